"""``effects="staged"``: business code first, then one write per message (DESIGN.md, "One write
per message"), run through once.testing on moto as a team's test would.

Each test reads DynamoDB itself (``GetItem``) or counts the requests on the wire: what the
table holds and what the mode costs, not what the runtime says of itself.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from once import Attempt, PermanentError, make_handler
from once import constants as c
from once.testing import OnceEnv
from tests.conftest import count_calls, plain

PREFIX = "staged"
LEDGER = "staged-ledger"
ORDER = {"orderId": "o-1", "qty": 2}


class Business:
    """Business code that stages a ledger entry (guarded: it must not exist) and an
    increment, and optionally a message; it records every attempt it was handed."""

    def __init__(self, *, send_to: str | None = None, refused: str = "retry") -> None:
        self.attempts: list[Any] = []
        self.send_to = send_to
        self.refused = refused
        self.raise_next: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        with self._lock:
            self.attempts.append(attempt)
            error, self.raise_next = self.raise_next, None
        if error is not None:
            raise error
        attempt.write(
            {
                "Put": {
                    "TableName": LEDGER,
                    "Item": {"pk": {"S": "entry#" + body["orderId"]}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            refused=self.refused,
        )
        attempt.write(
            {
                "Update": {
                    "TableName": LEDGER,
                    "Key": {"pk": {"S": "total"}},
                    "UpdateExpression": "ADD qty :q",
                    "ExpressionAttributeValues": {":q": {"N": str(body["qty"])}},
                }
            }
        )
        if self.send_to is not None:
            attempt.send(self.send_to, {"shipped": body["orderId"]})
        return {"shipped": body["orderId"]}


@pytest.fixture
def ledger(once_env: Any) -> str:
    once_env.dynamodb.create_table(
        TableName=LEDGER,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return LEDGER


def _item(once_env: Any, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    item = once_env.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    return plain(item) if item else None


def record(once_env: Any, key: str = "o-1") -> dict[str, Any] | None:
    return _item(once_env, once_env.table_name, {c.ATTR_ID: {"S": f"{PREFIX}#{key}"}})


def total(once_env: Any) -> int:
    item = _item(once_env, LEDGER, {"pk": {"S": "total"}})
    return int(item["qty"]) if item else 0


def staged(process: Any, **options: Any) -> Any:
    return make_handler(process, key="orderId", key_prefix=PREFIX, effects="staged", **options)


def writes(calls: Any) -> list[str]:
    """The record store's calls on the wire, the kit's own table set-up left out."""
    return [op for op in calls.sent if op in ("UpdateItem", "TransactWriteItems", "GetItem")]


def test_a_new_message_costs_one_call_and_runs_with_no_fence(once_env, ledger) -> None:
    business = Business()
    handler = staged(business)
    once_env.deliver(handler, [{"orderId": "warm", "qty": 0}])  # the kit binds its table
    calls = count_calls(once_env.dynamodb)

    delivery = once_env.deliver(handler, [ORDER])

    assert delivery.outcomes == ["processed"]
    assert writes(calls) == ["TransactWriteItems"]
    assert business.attempts[-1].fence is None
    assert business.attempts[-1].takeover is False
    item = record(once_env)
    assert item is not None
    assert (item["status"], item["fence"]) == (c.STATUS_COMPLETED, 1)
    assert c.ATTR_LEASE_EXPIRES_AT not in item
    assert total(once_env) == 2


def test_business_code_with_nothing_staged_commits_with_one_update(once_env) -> None:
    handler = staged(lambda body, attempt: {"seen": body["orderId"]})
    once_env.deliver(handler, [{"orderId": "warm"}])
    calls = count_calls(once_env.dynamodb)

    first = once_env.deliver(handler, [ORDER])
    again = once_env.deliver(handler, [ORDER])

    assert (first.outcomes, again.outcomes) == (["processed"], ["duplicate"])
    assert writes(calls) == ["UpdateItem", "UpdateItem"]
    assert first.results[0].fence == 1


def test_a_duplicate_runs_business_code_and_lands_none_of_what_it_staged(once_env, ledger) -> None:
    business = Business()
    handler = staged(business)
    once_env.deliver(handler, [ORDER])
    calls = count_calls(once_env.dynamodb)

    again = once_env.deliver(handler, [ORDER])

    assert again.outcomes == ["duplicate"]
    assert len(business.attempts) == 2
    # The record's condition refused the transaction (moto names it, with the guarded
    # entry's): one call. Where only the entry is named, a read of the record decides
    # (test_staged_endings.py).
    assert writes(calls) == ["TransactWriteItems"]
    assert total(once_env) == 2
    assert record(once_env)["fence"] == 1


def test_copies_in_one_batch_run_business_code_once(once_env, ledger) -> None:
    business = Business()
    delivery = once_env.deliver(staged(business), [ORDER, ORDER, ORDER])

    assert delivery.outcomes == ["processed", "duplicate", "duplicate"]
    assert len(business.attempts) == 1
    assert total(once_env) == 2


def test_business_code_that_raises_writes_nothing_and_the_retry_commits(once_env, ledger) -> None:
    business = Business()
    business.raise_next = RuntimeError("downstream read timed out")
    handler = staged(business)

    failed = once_env.deliver(handler, [ORDER])
    assert failed.outcomes == ["failed"]
    assert failed.batch_item_failures == failed.message_ids
    assert record(once_env) is None
    assert total(once_env) == 0

    retried = once_env.deliver(handler, [ORDER])
    assert retried.outcomes == ["processed"]
    assert total(once_env) == 2


def test_a_permanent_error_quarantines_a_new_message_without_a_record(once_env, ledger) -> None:
    business = Business()
    business.raise_next = PermanentError("not a valid order")

    delivery = once_env.deliver(staged(business), [ORDER])

    assert delivery.outcomes == ["quarantined"]
    assert [q.reason for q in once_env.dlq_messages()] == [c.REASON_PERMANENT_ERROR]
    assert record(once_env) is None


def test_a_permanent_error_on_a_duplicate_acknowledges_it(once_env, ledger) -> None:
    business = Business()
    handler = staged(business)
    once_env.deliver(handler, [ORDER])
    business.raise_next = PermanentError("order already closed")

    again = once_env.deliver(handler, [ORDER])

    assert again.outcomes == ["duplicate"]
    assert once_env.dlq_messages() == []


def test_a_refused_staged_write_is_retried_or_quarantined_as_asked(once_env, ledger) -> None:
    once_env.dynamodb.put_item(TableName=LEDGER, Item={"pk": {"S": "entry#o-1"}})

    retried = once_env.deliver(staged(Business()), [ORDER])
    assert retried.outcomes == ["failed"]
    assert retried.results[0].reason == c.REASON_WRITE_REFUSED
    assert record(once_env) is None

    quarantined = once_env.deliver(staged(Business(refused="quarantine")), [ORDER])
    assert quarantined.outcomes == ["quarantined"]
    assert [q.reason for q in once_env.dlq_messages()] == [c.REASON_WRITE_REFUSED]
    assert total(once_env) == 0


def test_another_payload_under_a_committed_key_is_a_conflict(once_env, ledger) -> None:
    handler = staged(Business())
    once_env.deliver(handler, [ORDER])

    other = once_env.deliver(handler, [{"orderId": "o-1", "qty": 9}])

    assert other.outcomes == ["conflict"]
    assert [q.reason for q in once_env.dlq_messages()] == [c.REASON_CONFLICT]
    assert total(once_env) == 2


def test_a_live_two_phase_claim_makes_a_staged_copy_busy_until_its_lease_ends(
    once_env, ledger
) -> None:
    """A deploy that switches modes: the two-phase claim's invocation died after its claim;
    the staged copy waits for the lease, then commits over it, bumping the fence."""
    two_phase = make_handler(Business(), key="orderId", key_prefix=PREFIX)
    once_env.deliver(two_phase, [ORDER], crash="after_claim")
    handler = staged(Business())

    busy = once_env.deliver(handler, [ORDER])
    assert busy.outcomes == ["busy"]

    once_env.expire_leases()
    done = once_env.deliver(handler, [ORDER])
    assert done.outcomes == ["processed"]
    assert (record(once_env)["status"], record(once_env)["fence"]) == (c.STATUS_COMPLETED, 2)
    assert total(once_env) == 2


def test_an_outbox_is_sent_after_the_commit_and_cleared(once_env, ledger) -> None:
    business = Business(send_to=once_env.queue_url)
    handler = staged(business)
    once_env.deliver(handler, [{"orderId": "warm", "qty": 0}])
    calls = count_calls(once_env.dynamodb)

    delivery = once_env.deliver(handler, [ORDER])

    assert delivery.outcomes == ["processed"]
    assert writes(calls) == ["TransactWriteItems", "UpdateItem"]  # the commit, the clear
    assert c.ATTR_OUTBOX not in record(once_env)


def test_a_crash_once_the_commit_landed_leaves_the_outbox_owed_to_the_next_copy(
    once_env, ledger
) -> None:
    business = Business(send_to=once_env.queue_url)
    handler = staged(business)

    crashed = once_env.deliver(handler, [ORDER], crash="before_finalize")
    assert crashed.killed_at == "before_finalize"
    assert record(once_env)[c.ATTR_OUTBOX]

    again = once_env.deliver(handler, [ORDER])
    assert again.outcomes == ["owed_sent"]
    assert c.ATTR_OUTBOX not in record(once_env)
    assert total(once_env) == 2


def test_a_crash_before_the_commit_leaves_nothing(once_env, ledger) -> None:
    handler = staged(Business())

    crashed = once_env.deliver(handler, [ORDER], crash="after_process")

    assert crashed.killed_at == "after_process"
    assert record(once_env) is None
    assert total(once_env) == 0
    assert once_env.deliver(handler, [ORDER]).outcomes == ["processed"]


def test_a_crash_after_the_claim_is_refused_under_staged_effects(once_env) -> None:
    handler = staged(lambda body, attempt: None)

    with pytest.raises(ValueError, match="no claim"):
        once_env.deliver(handler, [ORDER], crash="after_claim")


def test_a_fifo_group_stops_at_its_first_failure(once_env, ledger) -> None:
    business = Business()
    business.raise_next = RuntimeError("first fails")
    bodies = [{"orderId": "f-1", "qty": 1}, {"orderId": "f-2", "qty": 1}]

    delivery = once_env.deliver(staged(business), bodies, fifo_group="g")

    assert delivery.outcomes == ["failed", "skipped"]
    assert len(business.attempts) == 1


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"effects": "claimed"}, 'effects must be "any"'),
        ({"effects": "staged", "on_expired_lease": "quarantine"}, "no lease"),
    ],
)
def test_make_handler_refuses_an_unknown_mode_and_a_lease_policy_without_a_lease(
    options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        make_handler(lambda body, attempt: None, key="orderId", **options)


# --- once.testing's guard: business code under effects="staged" stages, it calls nothing ---


def test_the_kit_fails_business_code_that_writes_through_aws_itself(once_env, ledger) -> None:
    import boto3

    def credit(body: dict[str, Any], attempt: Any) -> None:
        ddb = boto3.client("dynamodb")
        ddb.get_item(TableName=LEDGER, Key={"pk": {"S": "total"}})  # a read is fine
        ddb.put_item(TableName=LEDGER, Item={"pk": {"S": "entry#" + body["orderId"]}})

    with pytest.raises(AssertionError, match=r"dynamodb PutItem.*attempt\.write"):
        once_env.deliver(staged(credit), [ORDER])


class Notifier:
    """A callable object whose method sends a message itself, from a pool thread."""

    def __init__(self, queue_url: str) -> None:
        self.queue_url = queue_url

    def __call__(self, body: dict[str, Any], attempt: Any) -> None:
        self._notify(body)

    def _notify(self, body: dict[str, Any]) -> None:
        import boto3

        boto3.client("sqs").send_message(QueueUrl=self.queue_url, MessageBody="{}")


def test_the_kit_finds_a_call_made_deep_inside_a_callable_object(once_env) -> None:
    bodies = [{"orderId": "a"}, {"orderId": "b"}]  # two keys: run on the pool's threads

    with pytest.raises(AssertionError, match="sqs SendMessage"):
        once_env.deliver(staged(Notifier(once_env.queue_url)), bodies)


def test_the_kit_leaves_the_default_mode_and_once_s_own_calls_alone(once_env, ledger) -> None:
    import boto3

    def credit(body: dict[str, Any], attempt: Any) -> None:
        boto3.client("dynamodb").put_item(TableName=LEDGER, Item={"pk": {"S": "x"}})

    assert once_env.deliver(make_handler(credit, key="orderId"), [ORDER]).outcomes == ["processed"]
    # once's own commit, clear and outbox send under staged effects are not business code's.
    business = Business(send_to=once_env.queue_url)
    assert once_env.deliver(staged(business), [ORDER]).outcomes == ["processed"]


@pytest.mark.parametrize(
    ("service", "operation", "params", "effect"),
    [
        ("dynamodb", "GetItem", {}, "none"),
        ("dynamodb", "Query", {}, "none"),
        ("dynamodb", "BatchGetItem", {}, "none"),
        ("dynamodb", "TransactGetItems", {}, "none"),
        ("s3", "ListObjectsV2", {}, "none"),
        ("dynamodb", "DescribeTable", {}, "none"),
        ("kms", "Decrypt", {}, "none"),
        ("kms", "GenerateRandom", {}, "none"),
        ("sts", "AssumeRole", {}, "none"),
        ("comprehend", "DetectSentiment", {}, "none"),
        ("translate", "TranslateText", {}, "none"),
        ("bedrock-runtime", "InvokeModel", {}, "none"),
        ("textract", "AnalyzeDocument", {}, "none"),
        ("dynamodb", "ExecuteStatement", {"Statement": 'SELECT * FROM "t"'}, "none"),
        ("dynamodb", "ExecuteStatement", {"Statement": '  select * from "t"'}, "none"),
        (
            "dynamodb",
            "ExecuteStatement",
            {"Statement": "INSERT INTO \"t\" VALUE {'k': 1}"},
            "change",
        ),
        (
            "dynamodb",
            "BatchExecuteStatement",
            {"Statements": [{"Statement": 'SELECT * FROM "t"'}, {"Statement": 'DELETE FROM "t"'}]},
            "change",
        ),
        (
            "dynamodb",
            "ExecuteTransaction",
            {"TransactStatements": [{"Statement": 'SELECT * FROM "t"'}]},
            "none",
        ),
        ("rds-data", "ExecuteStatement", {"sql": "UPDATE t SET a = 1"}, "change"),
        ("dynamodb", "PutItem", {}, "change"),
        ("dynamodb", "UpdateItem", {}, "change"),
        ("dynamodb", "TransactWriteItems", {}, "change"),
        ("sqs", "SendMessage", {}, "change"),
        ("sqs", "ReceiveMessage", {}, "change"),  # changes a message's visibility
        ("sns", "Publish", {}, "change"),
        ("s3", "PutObject", {}, "change"),
        ("lambda", "Invoke", {}, "change"),
        ("kms", "ScheduleKeyDeletion", {}, "change"),
        ("sts", "DecodeAuthorizationMessage", {}, "none"),
        ("geo-places", "Autocomplete", {}, "unknown"),  # judged neither way: a warning
    ],
)
def test_a_call_is_judged_by_what_it_does(
    service: str, operation: str, params: dict[str, Any], effect: str
) -> None:
    from once.testing.staged import effect_of

    assert effect_of(service, operation, params).value == effect


def test_staged_business_code_may_read_with_partiql_derive_credentials_and_draw_randomness(
    once_env: OnceEnv,
) -> None:
    """docs: staged code "may read anything": a PartiQL SELECT, sts:AssumeRole and
    kms:GenerateRandom change nothing, and the guard lets them through; a PartiQL INSERT
    still fails the test."""
    once_env.dynamodb.create_table(
        TableName="prices",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )

    def reads(order: dict[str, Any], attempt: Attempt) -> str:
        boto3.client("dynamodb").execute_statement(Statement='SELECT * FROM "prices"')
        boto3.client("sts").assume_role(
            RoleArn="arn:aws:iam::123456789012:role/reader", RoleSessionName="pricing"
        )
        boto3.client("kms").generate_random(NumberOfBytes=16)
        return "read"

    def inserts(order: dict[str, Any], attempt: Attempt) -> str:
        boto3.client("dynamodb").execute_statement(
            Statement="INSERT INTO \"prices\" VALUE {'id': 'p-1'}"
        )
        return "inserted"

    delivery = once_env.deliver(make_handler(reads, key="orderId", effects="staged"), [ORDER])
    assert delivery.outcomes == ["processed"]
    with pytest.raises(AssertionError, match="dynamodb ExecuteStatement"):
        once_env.deliver(make_handler(inserts, key="orderId", effects="staged"), [ORDER])


def test_an_unknown_call_under_staged_effects_warns_and_names_it(once_env: OnceEnv) -> None:
    """A call the guard can judge neither way (SSM's ``LabelParameterVersion``: no read or
    change in its name, on no list) is a warning that names it, never a failure."""
    from once.testing.staged import UnknownCallWarning

    def labels(order: dict[str, Any], attempt: Attempt) -> str:
        ssm = boto3.client("ssm")
        with contextlib.suppress(ClientError):
            ssm.label_parameter_version(Name="price", Labels=["current"])
        return "labelled"

    with pytest.warns(UnknownCallWarning, match="ssm LabelParameterVersion"):
        delivery = once_env.deliver(make_handler(labels, key="orderId", effects="staged"), [ORDER])
    assert delivery.outcomes == ["processed"]
