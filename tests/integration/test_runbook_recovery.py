"""docs/runbook.md, followed to recovery for every way a message reaches the DLQ.

Each test puts a message in the DLQ the way production would (every ``once.reason``, and
SQS's own move at ``maxReceiveCount``), then does what the runbook says: fix the cause,
``once redrive`` (``oncecli.redrive.move``, the command's own code) and let the mapping
deliver what it moved back (``OnceEnv.deliver_waiting``). Each ends with the operation run
once, or the message knowingly dropped, and nothing left in the DLQ unaccounted for.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from once import PermanentError, make_handler
from once import constants as c
from once.models import Outcome
from once.testing import OnceEnv, Quarantined
from oncecli.redrive import Moved, move
from tests.conftest import Spy

ORDER = {"orderId": "o-1", "item": "book", "qty": 1}


def redrive(env: OnceEnv, *, include_lease_expired: bool = False) -> Moved:
    """``once redrive`` on the kit's queues."""
    return move(env.sqs, env.dlq_url, env.queue_url, include_lease_expired=include_lease_expired)


def drop(env: OnceEnv) -> list[Quarantined]:
    """A person deletes what is left in the DLQ, having decided it must not run."""
    dropped = env.dlq_messages()
    while messages := env.sqs.receive_message(QueueUrl=env.dlq_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        for message in messages:
            env.sqs.delete_message(QueueUrl=env.dlq_url, ReceiptHandle=message["ReceiptHandle"])
    return dropped


@pytest.fixture
def env():
    with OnceEnv() as kit:
        yield kit


def test_invalid_json_is_dropped_after_the_producer_sends_it_again_fixed(env) -> None:
    spy = Spy()
    handler = make_handler(spy, key="orderId")
    env.deliver(handler, ["{'orderId': 'o-1'}"])  # a producer's Python repr, not JSON
    [dead] = env.dlq_messages()
    assert dead.reason == c.REASON_INVALID_JSON

    env.deliver(handler, [ORDER])  # the producer, fixed, sends the operation again
    assert redrive(env).moved == 1  # the runbook's redrive: the cause is still there
    assert env.deliver_waiting(handler).outcomes == [Outcome.QUARANTINED]
    [again] = drop(env)  # back in the DLQ at once: knowingly dropped

    assert again.reason == c.REASON_INVALID_JSON
    assert again.original_message_id == dead.original_message_id  # chain of custody kept
    assert spy.keys == ["o-1"]


@pytest.mark.parametrize(
    ("reason", "body", "broken", "fixed"),
    [
        (
            c.REASON_INVALID_ENVELOPE,
            {"Type": "Notification", "Message": json.dumps(ORDER)},  # SNS to SQS
            {"envelope": "detail"},  # written for EventBridge
            {"envelope": "powertools_json(Message)"},
        ),
        (c.REASON_INVALID_KEY, {"order_id": "o-1"}, {"key": "orderId"}, {"key": "order_id"}),
        (
            c.REASON_INVALID_PAYLOAD,
            ORDER,
            {"key": "orderId", "validate": "length(lines)"},  # no lines in this body
            {"key": "orderId", "validate": "[orderId, item, qty]"},
        ),
    ],
    ids=["envelope", "key", "validate"],
)
def test_a_body_refused_by_the_expressions_runs_once_after_they_are_fixed(
    env, reason: str, body: dict[str, Any], broken: dict[str, str], fixed: dict[str, str]
) -> None:
    spy = Spy()
    env.deliver(make_handler(spy, **({"key": "orderId"} | broken)), [body])
    [dead] = env.dlq_messages()
    assert dead.reason == reason

    handler = make_handler(spy, **({"key": "orderId"} | fixed))  # the fix, deployed
    assert redrive(env).moved == 1
    assert env.deliver_waiting(handler).outcomes == [Outcome.PROCESSED]

    assert len(spy.calls) == 1
    assert env.dlq_messages() == []


def test_a_conflict_is_dropped_and_the_second_operation_sent_under_a_new_id(env) -> None:
    spy = Spy()
    handler = make_handler(spy, key="orderId")
    env.deliver(handler, [ORDER])
    env.deliver(handler, [ORDER | {"qty": 5}])  # a producer reused the id for another order
    [dead] = env.dlq_messages()
    assert dead.reason == c.REASON_CONFLICT

    env.deliver(handler, [ORDER | {"orderId": "o-2", "qty": 5}])  # sent again under a new id
    assert redrive(env).moved == 1
    assert env.deliver_waiting(handler).outcomes == [Outcome.CONFLICT]  # the first payload won
    [again] = drop(env)

    assert again.reason == c.REASON_CONFLICT
    assert [(body["orderId"], body["qty"]) for body, _ in spy.calls] == [("o-1", 1), ("o-2", 5)]


def test_a_permanent_error_runs_once_after_its_cause_is_fixed(env) -> None:
    accounts: set[str] = set()

    def credit(body: Any, attempt: Any) -> dict[str, str]:
        if body["account"] not in accounts:
            raise PermanentError("unknown account")
        return {"credited": body["account"]}

    spy = Spy(credit)
    handler = make_handler(spy, key="orderId")
    env.deliver(handler, [ORDER | {"account": "a-1"}])
    [dead] = env.dlq_messages()
    assert (dead.reason, dead.error) == (
        c.REASON_PERMANENT_ERROR,
        "PermanentError: unknown account",
    )
    assert env.record("o-1").status == c.STATUS_FAILED

    accounts.add("a-1")  # the account is opened
    assert redrive(env).moved == 1
    assert env.deliver_waiting(handler).outcomes == [Outcome.PROCESSED]

    assert len(spy.calls) == 2  # the refused attempt, then the run
    assert env.record("o-1").status == c.STATUS_COMPLETED
    assert env.dlq_messages() == []


@pytest.mark.parametrize("one_by_one", [True, False], ids=["one-by-one", "one-batch"])
def test_quarantined_takeovers_run_once_after_one_reviewed_redrive(env, one_by_one) -> None:
    shipped: list[int] = []

    def ship(body: Any, attempt: Any) -> dict[str, int]:
        shipped.append(attempt.fence)
        return {"fence": attempt.fence}

    handler = make_handler(ship, key="orderId", on_expired_lease="quarantine")
    env.deliver(handler, [ORDER], crash="after_claim")  # died before shipping
    env.expire_leases()
    env.deliver(handler, [ORDER])  # SQS's redelivery: a takeover, quarantined
    env.deliver(handler, [ORDER | {}], message_attributes={"retry": "1"})  # a producer's retry
    dead = env.dlq_messages()
    assert [m.reason for m in dead] == [c.REASON_LEASE_EXPIRED] * 2
    assert {m.attributes[c.QUARANTINE_ATTR_FENCE] for m in dead} == {"2"}

    # The runbook: inspect the record, check downstream that nothing shipped, then redrive.
    record = env.record("o-1")
    assert (record.status, record.error, record.review_fence) == (
        c.STATUS_FAILED,
        c.REASON_LEASE_EXPIRED,
        2,
    )
    assert shipped == []
    left = redrive(env)
    assert (left.moved, left.lease_expired_left) == (0, 2)  # never without a review
    assert redrive(env, include_lease_expired=True).moved == 2
    delivered = env.deliver_waiting(handler, same_batch=not one_by_one)

    assert sorted(delivered.outcomes) == sorted([Outcome.PROCESSED, Outcome.DUPLICATE])
    assert len(shipped) == 1
    assert env.record("o-1").status == c.STATUS_COMPLETED
    assert env.dlq_messages() == []


def test_a_quarantined_takeover_whose_effect_happened_is_dropped(env) -> None:
    spy = Spy()
    handler = make_handler(spy, key="orderId", on_expired_lease="quarantine")
    env.deliver(handler, [ORDER], crash="after_process")  # shipped, then died
    env.expire_leases()
    env.deliver(handler, [ORDER])

    [dropped] = drop(env)  # downstream shows the shipment: the message is deleted
    assert dropped.reason == c.REASON_LEASE_EXPIRED
    assert len(spy.calls) == 1
    # A later copy goes to the DLQ again, never run: the record stays FAILED for review.
    assert env.deliver(handler, [ORDER]).outcomes == [Outcome.LEASE_EXPIRED]
    assert len(spy.calls) == 1


def test_a_message_sqs_moved_at_max_receive_count_runs_once_after_the_fix() -> None:
    up = False

    def charge(body: Any, attempt: Any) -> dict[str, bool]:
        if not up:
            raise ConnectionError("payment provider down")
        return {"charged": True}

    spy = Spy(charge)
    with OnceEnv(max_receive_count=3) as env:
        handler = make_handler(spy, key="orderId")
        deliveries = [env.deliver(handler, [ORDER]) for _ in range(3)]
        assert [d.receive_counts for d in deliveries] == [[1], [2], [3]]
        assert deliveries[-1].moved_to_dlq == deliveries[-1].message_ids
        [dead] = env.dlq_messages()
        assert dead.reason is None  # SQS's move: no once.* attributes
        assert env.record("o-1").error == "ConnectionError"  # once inspect says why

        up = True  # the provider is back
        assert redrive(env).moved == 1
        assert env.deliver_waiting(handler).outcomes == [Outcome.PROCESSED]

        assert len(spy.calls) == 4  # three failed attempts, then the charge
        assert env.dlq_messages() == []


def test_a_refused_staged_write_runs_once_after_its_condition_can_hold(env) -> None:
    # A debit staged with attempt.write(refused="quarantine") on an account that must exist:
    # DynamoDB refuses the commit (nothing lands), the message goes to the DLQ with
    # WRITE_REFUSED; the account is opened, the message redriven, and the debit commits once.
    env.dynamodb.create_table(
        TableName="accounts",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )

    def debit(body: Any, attempt: Any) -> dict[str, int]:
        attempt.write(
            {
                "Update": {
                    "TableName": "accounts",
                    "Key": {"id": {"S": body["account"]}},
                    "UpdateExpression": "ADD balance :minus",
                    "ConditionExpression": "attribute_exists(id)",
                    "ExpressionAttributeValues": {":minus": {"N": str(-body["qty"])}},
                }
            },
            refused="quarantine",
        )
        return {"debited": body["qty"]}

    spy = Spy(debit)
    handler = make_handler(spy, key="orderId")
    env.deliver(handler, [ORDER | {"account": "a-1"}])
    [dead] = env.dlq_messages()
    assert dead.reason == c.REASON_WRITE_REFUSED
    assert "accounts" in (dead.error or "")
    assert env.dynamodb.scan(TableName="accounts")["Items"] == []  # nothing landed

    env.dynamodb.put_item(TableName="accounts", Item={"id": {"S": "a-1"}, "balance": {"N": "5"}})
    assert redrive(env).moved == 1
    assert env.deliver_waiting(handler).outcomes == [Outcome.PROCESSED]
    assert env.deliver(handler, [ORDER | {"account": "a-1"}]).outcomes == [Outcome.DUPLICATE]

    item = env.dynamodb.get_item(TableName="accounts", Key={"id": {"S": "a-1"}})["Item"]
    assert item["balance"] == {"N": "4"}  # debited once
    assert len(spy.calls) == 2  # the refused attempt, then the run
    assert env.dlq_messages() == []


def test_a_fair_queue_message_with_a_group_id_is_redriven_without_a_deduplication_id(
    once_env: OnceEnv,
) -> None:
    """A fair (standard) queue's message carries a group id, which its DLQ copy keeps; the
    redrive decides FIFO by the source queue, never by the message, so it sends no
    deduplication id a standard queue would refuse."""
    once_env.sqs.send_message(
        QueueUrl=once_env.dlq_url,
        MessageBody=json.dumps(ORDER),
        MessageGroupId="tenant-1",
        MessageAttributes={c.QUARANTINE_ATTR_REASON: {"DataType": "String", "StringValue": "X"}},
    )
    handler = make_handler(lambda order, attempt: "shipped", key="orderId")

    moved = redrive(once_env)

    assert (moved.moved, moved.refused) == (1, ())
    assert once_env.deliver_waiting(handler).outcomes == [Outcome.PROCESSED]
    assert once_env.dlq_messages() == []


def test_a_message_the_source_queue_refuses_stays_in_the_dlq_named_and_the_others_move(
    once_env: OnceEnv,
) -> None:
    """The source queue's maximum message size is its own (SetQueueAttributes); a DLQ copy
    larger than it is refused (InvalidParameterValue): it stays in the DLQ, named, and every
    other message moves."""
    once_env.sqs.set_queue_attributes(
        QueueUrl=once_env.queue_url, Attributes={"MaximumMessageSize": "1024"}
    )
    big = once_env.sqs.send_message(
        QueueUrl=once_env.dlq_url, MessageBody=json.dumps(ORDER | {"note": "x" * 2000})
    )["MessageId"]
    for n in range(3):
        once_env.sqs.send_message(
            QueueUrl=once_env.dlq_url, MessageBody=json.dumps(ORDER | {"orderId": f"o-{n}"})
        )

    moved = redrive(once_env)

    assert moved.moved == 3
    assert [(message_id, why) for message_id, why in moved.refused] == [
        (big, "ClientError (InvalidParameterValue, HTTP 400)")
    ]
    assert [json.loads(m.body)["note"][:1] for m in once_env.dlq_messages()] == ["x"]
