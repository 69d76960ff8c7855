"""once → transport → once, across hops and across time (docs/design.md, "The outbox, end
to end"): the identity an outbox message carries names the *operation* that committed it,
is made only of characters every transport takes, and survives a deploy that changes its
form; a ``SOURCE_KEY`` consumer hashes what the identity names, never SNS's envelope; and
under ``effects="staged"`` every copy that ends without its commit is judged by its record,
so what a committed operation owes is sent whatever business code does on the redelivery.

Each test here failed on the runtime before these rules (issue 39's four defects), on
``once_env``'s moto held to AWS's rules (``once.testing.strict``)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from once import SOURCE_KEY, Attempt, identity, make_handler
from once import constants as c
from once.effects import OutboxMessage
from once.models import Outcome, record_id
from once.testing import OnceEnv
from tests.integration import hops

#: The upstream keeps its records 60 s, the downstream 3600 s: a key comes back upstream after
#: the first and well inside the second, as it does on AWS with the construct's retentions
#: (19 days on a 4-day queue upstream, 29 on a 14-day one downstream) or after a backlog.
UP_RETENTION_S, DOWN_RETENTION_S = 60, 3600


# --- 1. the identity is sendable, whatever the key holds ---------------------------------------


def test_a_key_with_a_form_feed_sends_its_outbox_under_an_identity_sqs_takes(
    once_env: OnceEnv,
) -> None:
    notify = hops.queue(once_env, "invoices-notify")

    def issue(invoice: dict[str, Any], attempt: Attempt) -> str:
        attempt.send(notify, {"invoice": invoice["invoiceId"]})  # JSON escapes the form feed
        return "issued"

    handler = make_handler(issue, key="invoiceId", max_workers=1)

    delivery = once_env.deliver(handler, [{"invoiceId": "INV\f2024-17"}])

    assert delivery.outcomes == [Outcome.PROCESSED]  # not owed: SQS took the identity
    [sent] = hops.take(once_env, notify)
    source = hops.attribute(sent, c.OUTBOX_ATTR_SOURCE)
    assert source.isascii() and source.isprintable()
    assert source.startswith(identity.escape(record_id(handler.key_prefix, "INV\f2024-17")) + "@")
    # ...and the downstream keys on it like on any other.
    hops.forward(once_env, [sent])
    applied = once_env.deliver_waiting(make_handler(lambda b, a: "ok", key=SOURCE_KEY))
    assert applied.outcomes == [Outcome.PROCESSED]


def test_an_outbox_stored_before_identities_named_operations_is_resent_as_it_was_sent(
    once_env: OnceEnv,
) -> None:
    """A deploy that changes the identity's form drops and doubles nothing: an outbox the
    previous runtime stored (no source on its messages) is resent under the bare record id,
    which a downstream that recorded the first send recognises; one with a key SQS refused
    (never sent) is escaped, and can go at last."""
    notify = hops.queue(once_env, "legacy-notify")
    handler = make_handler(lambda body, attempt: "never runs", key="id", max_workers=1)
    table = once_env.dynamodb
    prefix = str(handler.key_prefix)
    for key in ("p-1", "p\f2"):
        legacy = OutboxMessage(destination=notify, body='{"n":1}')
        assert "s" not in json.loads(legacy.to_json())  # the stored form before this runtime
        table.put_item(
            TableName=str(handler.table_name),
            Item={
                c.ATTR_ID: {"S": record_id(prefix, key)},
                c.ATTR_STATUS: {"S": c.STATUS_COMPLETED},
                c.ATTR_FENCE: {"N": "1"},
                c.ATTR_OWNER: {"S": "previous-runtime"},
                c.ATTR_EXPIRES_AT: {"N": str(int(once_env.clock()) + 3600)},
                c.ATTR_PAYLOAD_HASH: {"S": payload_hash({"id": key})},
                c.ATTR_RESULT: {"S": '"done"'},
                c.ATTR_OUTBOX: {"L": [{"S": legacy.to_json()}]},
            },
        )

    delivery = once_env.deliver(handler, [{"id": "p-1"}, {"id": "p\f2"}], same_batch=False)

    assert delivery.outcomes == [Outcome.OWED_SENT, Outcome.OWED_SENT]
    sources = sorted(hops.attribute(m, c.OUTBOX_ATTR_SOURCE) for m in hops.take(once_env, notify))
    assert sources == sorted([record_id(prefix, "p-1"), identity.escape(record_id(prefix, "p\f2"))])


def payload_hash(body: dict[str, Any]) -> str:
    from once.payload import canonical_json, sha256

    return sha256(canonical_json(body))


# --- 2. the identity names the operation, not the key -----------------------------------------


@pytest.mark.parametrize("effects", ["any", "staged"])
def test_a_key_reused_after_the_upstream_retention_is_applied_downstream_again(
    once_env: OnceEnv, effects: str
) -> None:
    """After the upstream's retention, a key's next delivery is a new operation: its message
    is a new message downstream, whose record of the first one is still live."""
    notify = hops.queue(once_env, "reused-notify")
    upstream = make_handler(
        lambda body, attempt: attempt.send(notify, {"order": body["orderId"]}),
        key="orderId",
        retention_s=UP_RETENTION_S,
        effects=effects,
        max_workers=1,
    )
    applied: list[str] = []
    downstream = make_handler(
        lambda body, attempt: applied.append(attempt.key),
        key=SOURCE_KEY,
        key_prefix="mailer",
        retention_s=DOWN_RETENTION_S,
        max_workers=1,
    )

    assert once_env.deliver(upstream, [{"orderId": "o-1"}]).outcomes == [Outcome.PROCESSED]
    first = hops.take(once_env, notify)
    hops.forward(once_env, first)
    assert once_env.deliver_waiting(downstream).outcomes == [Outcome.PROCESSED]
    once_env.advance(UP_RETENTION_S + 1)  # the upstream forgets o-1; the downstream does not
    assert once_env.deliver(upstream, [{"orderId": "o-1"}]).outcomes == [Outcome.PROCESSED]
    second = hops.take(once_env, notify)
    hops.forward(once_env, second)

    assert once_env.deliver_waiting(downstream).outcomes == [Outcome.PROCESSED]
    assert len(applied) == 2 and applied[0] != applied[1]
    assert hops.attribute(first[0], c.OUTBOX_ATTR_SOURCE) != hops.attribute(
        second[0], c.OUTBOX_ATTR_SOURCE
    )


def test_a_key_reused_after_the_retention_is_not_deduplicated_by_a_fifo_target(
    once_env: OnceEnv,
) -> None:
    fifo = hops.queue(once_env, "reused-notify.fifo")
    upstream = make_handler(
        lambda body, attempt: attempt.send(fifo, {"order": body["orderId"]}, group_id="g"),
        key="orderId",
        retention_s=UP_RETENTION_S,
        max_workers=1,
    )
    once_env.deliver(upstream, [{"orderId": "o-1"}])
    once_env.advance(UP_RETENTION_S + 1)  # within SQS's 5 minutes of deduplication (moto's
    once_env.deliver(upstream, [{"orderId": "o-1"}])  # clock is the wall's: no time passed)

    sent = hops.take(once_env, fifo)
    assert len(sent) == 2
    assert len({m["Attributes"]["MessageDeduplicationId"] for m in sent}) == 2


# --- 3. effects="staged": a copy that raises is judged by its record -------------------------


class _Shipper:
    """Business code that reads what its own first commit changed: the order's state, which
    the commit moved to ``shipped``, and raises on a copy (``KeyError``: no ``pending``)."""

    def __init__(self, env: OnceEnv, notify: str) -> None:
        self.env, self.notify, self.runs = env, notify, 0
        env.dynamodb.create_table(
            TableName="orders",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        env.dynamodb.put_item(
            TableName="orders", Item={"id": {"S": "o-1"}, "state": {"S": "pending"}}
        )

    def __call__(self, body: dict[str, Any], attempt: Attempt) -> str:
        self.runs += 1
        item = self.env.dynamodb.get_item(
            TableName="orders", Key={"id": {"S": body["orderId"]}}, ConsistentRead=True
        )["Item"]
        pending = {"pending": "ready"}[item["state"]["S"]]  # KeyError once shipped
        attempt.write(
            {
                "Update": {
                    "TableName": "orders",
                    "Key": {"id": {"S": body["orderId"]}},
                    "UpdateExpression": "SET #s = :s",
                    "ExpressionAttributeNames": {"#s": "state"},
                    "ExpressionAttributeValues": {":s": {"S": "shipped"}},
                }
            }
        )
        attempt.send(self.notify, {"order": body["orderId"], "was": pending})
        return "shipped"


def test_a_staged_copy_whose_business_code_raises_on_its_own_commit_is_a_duplicate(
    once_env: OnceEnv,
) -> None:
    shipper = _Shipper(once_env, hops.queue(once_env, "ship-notify"))
    handler = make_handler(shipper, key="orderId", effects="staged", max_workers=1)

    assert once_env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.PROCESSED]
    again = once_env.deliver(handler, [{"orderId": "o-1"}])

    assert shipper.runs == 2  # the copy ran business code, which raised
    assert again.outcomes == [Outcome.DUPLICATE]
    assert again.batch_item_failures == []
    assert len(hops.take(once_env, shipper.notify)) == 1


def test_a_staged_copy_that_raises_sends_what_its_committed_operation_owes(
    once_env: OnceEnv,
) -> None:
    shipper = _Shipper(once_env, hops.queue(once_env, "owed-notify"))
    handler = make_handler(shipper, key="orderId", effects="staged", max_workers=1)
    hops.fail(
        once_env.sqs, "SendMessageBatch", when=lambda params: params["QueueUrl"] == shipper.notify
    )

    assert once_env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED]
    assert hops.take(once_env, shipper.notify) == []
    again = once_env.deliver(handler, [{"orderId": "o-1"}])  # its business code raises

    assert again.outcomes == [Outcome.OWED_SENT]
    [sent] = hops.take(once_env, shipper.notify)
    assert json.loads(sent["Body"]) == {"order": "o-1", "was": "ready"}
    record = once_env.record("o-1")
    assert record is not None and record.outbox == ()


def test_a_staged_copy_that_raises_on_a_new_key_is_retried_and_reads_once(
    once_env: OnceEnv,
) -> None:
    """The failure path's one read finds no record: the copy's own error stands."""
    calls: list[str] = []
    once_env.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.*", lambda model, **_: calls.append(model.name)
    )

    def flaky(body: dict[str, Any], attempt: Attempt) -> str:
        raise TimeoutError("the carrier did not answer")

    handler = make_handler(flaky, key="orderId", effects="staged", max_workers=1)
    delivery = once_env.deliver(handler, [{"orderId": "o-9"}])

    assert delivery.outcomes == [Outcome.FAILED]
    assert calls == ["GetItem"]
    assert once_env.record("o-9") is None


# --- 4. SOURCE_KEY behind SNS with raw delivery off: a resend is a duplicate -----------------


def test_a_resend_through_sns_without_raw_delivery_is_a_duplicate_downstream(
    once_env: OnceEnv,
) -> None:
    """No ``envelope=``: handler.md promises ``SOURCE_KEY`` behind SNS with raw delivery on
    or off. SNS writes a new MessageId, Timestamp and Signature on every publish; the hash
    covers what the publisher sent."""
    sns = boto3.client("sns", region_name=once_env.sqs.meta.region_name)
    topic = sns.create_topic(Name="shipped")["TopicArn"]
    arn = once_env.sqs.get_queue_attributes(
        QueueUrl=once_env.queue_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "false"},
    )
    once_env.sns = sns  # the outbox's client
    upstream = make_handler(
        lambda body, attempt: attempt.send(topic, {"order": body["orderId"]}),
        key="orderId",
        key_prefix="orders",
        max_workers=1,
    )
    applied: list[Any] = []
    downstream = make_handler(
        lambda body, attempt: applied.append(json.loads(body["Message"])),
        key=SOURCE_KEY,
        key_prefix="mailer",
        max_workers=1,
    )
    hops.fail(once_env.dynamodb, "UpdateItem", when=hops.is_clear)

    assert once_env.deliver(upstream, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED]
    first = once_env.deliver_waiting(downstream)
    assert once_env.deliver(upstream, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED_SENT]
    resent = once_env.deliver_waiting(downstream)

    assert first.outcomes == [Outcome.PROCESSED]
    assert resent.outcomes == [Outcome.DUPLICATE]
    assert applied == [{"order": "o-1"}]
    assert once_env.dlq_messages() == []
