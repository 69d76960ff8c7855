"""The identity per operation, what a ``SOURCE_KEY`` consumer hashes and the staged failure
rows, across a deploy and at their edges, held to AWS's rules and to what docs/design.md ("The
identity: what it names, its characters, how it survives a deploy", the staged table) and
docs/handler.md ("Chains: once → queue → once, across hops and across time") promise.

Each test is named by the behaviour it expects; each came from an adversarial review of the
change, and those that proved a defect failed before its fix."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from once import SOURCE_KEY, Attempt, PermanentError, make_handler, payload
from once import constants as c
from once.effects import OutboxMessage
from once.models import Outcome, record_id
from once.testing import OnceEnv
from oncecli.redrive import move
from tests.integration import hops

# --- helpers ---------------------------------------------------------------------------------


def _peek_source(env: OnceEnv) -> str:
    """The body of the one message waiting in the source queue, left there (SQS redelivers
    exactly this body)."""
    [message] = env.sqs.receive_message(QueueUrl=env.queue_url, VisibilityTimeout=0)["Messages"]
    return str(message["Body"])


def _record_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    client.meta.events.register(
        f"provide-client-params.*.{operation}", lambda params, **_: calls.append(params)
    )
    return calls


def _legacy_record(
    env: OnceEnv, handler: Any, key: str, body: dict[str, Any], outbox: list[OutboxMessage]
) -> None:
    """A COMPLETED record owing ``outbox`` as the previous runtime stored it: its
    messages without a stored source (``"s"``)."""
    for message in outbox:
        assert "s" not in json.loads(message.to_json())
    env.dynamodb.put_item(
        TableName=str(handler.table_name),
        Item={
            c.ATTR_ID: {"S": record_id(str(handler.key_prefix), key)},
            c.ATTR_STATUS: {"S": c.STATUS_COMPLETED},
            c.ATTR_FENCE: {"N": "1"},
            c.ATTR_OWNER: {"S": "previous-runtime"},
            c.ATTR_EXPIRES_AT: {"N": str(int(env.clock()) + 3600)},
            c.ATTR_PAYLOAD_HASH: {"S": payload.sha256(payload.canonical_json(body))},
            c.ATTR_RESULT: {"S": '"done"'},
            c.ATTR_OUTBOX: {"L": [{"S": m.to_json()} for m in outbox]},
        },
    )


@contextlib.contextmanager
def _previous_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The previous runtime's reader: a ``SOURCE_KEY`` consumer hashed the body as SQS held
    it, the whole SNS notification included (its ``BodyReader.read`` validated and
    hashed ``body``; this change hashes ``without_transport(body)``, nothing else of the
    read differs). Leaving the block is the deploy."""
    with monkeypatch.context() as previous:
        previous.setattr(payload, "without_transport", lambda body: body)
        yield


def _shipping_upstream(env: OnceEnv, topic: str) -> Any:
    handler = make_handler(
        lambda body, attempt: attempt.send(topic, {"order": body["orderId"]}),
        key="orderId",
        key_prefix="orders",
        max_workers=1,
    )
    assert env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.PROCESSED]
    return handler


# --- 1. a deploy changes what a SOURCE_KEY consumer behind SNS hashes ---------------------------


def test_a_message_that_failed_before_the_deploy_runs_after_it_instead_of_being_a_conflict(
    once_env: OnceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue: "A deploy that changes the identity's format neither drops nor doubles a
    message in flight". design.md says of the hash change only that a *resend* of a message
    recorded before it is a CONFLICT. But SQS redelivers the very same body after a failure
    (at-least-once; a message reported in ``batchItemFailures`` comes back), and the record
    the previous runtime left is FAILED under the hash of the whole notification: the claim
    condition takes a FAILED record only with the same hash, so the retry is quarantined as
    a CONFLICT; the runbook has a person drop a CONFLICT from the DLQ, and a redrive is a
    CONFLICT again for as long as the record lives (longer than the DLQ keeps the copy).
    The e-mail is never sent."""
    topic = hops.topic_to_source_queue(once_env, "shipped")
    _shipping_upstream(once_env, topic)
    runs: list[str] = []

    def mail(body: dict[str, Any], attempt: Attempt) -> str:
        runs.append(attempt.key)
        if len(runs) == 1:
            raise TimeoutError("the mail server did not answer")  # a passing failure
        return "mailed"

    downstream = make_handler(mail, key=SOURCE_KEY, key_prefix="mailer", max_workers=1)
    body = _peek_source(once_env)
    with _previous_runtime(monkeypatch):
        first = once_env.deliver_waiting(downstream)
    assert first.outcomes == [Outcome.FAILED]

    again = once_env.deliver(downstream, [body])  # SQS redelivers the same message
    assert again.message_ids == first.message_ids

    assert again.outcomes == [Outcome.PROCESSED]
    assert len(runs) == 2
    assert once_env.dlq_messages() == []


def test_a_message_done_before_the_deploy_and_delivered_again_after_it_is_a_duplicate(
    once_env: OnceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message processed by the previous runtime whose batch response was lost (the
    invocation died after the record completed) comes back with the same body (SQS:
    at-least-once, "a message might be delivered more than once"). It is a copy of a done
    message: DUPLICATE, acknowledged (handler.md: "A resend is a duplicate"; Outcome:
    "DUPLICATE: already COMPLETED with the same payload"). After the deploy the hash of the
    same body differs, and the copy is quarantined as a CONFLICT."""
    topic = hops.topic_to_source_queue(once_env, "shipped")
    _shipping_upstream(once_env, topic)
    mailed: list[str] = []
    downstream = make_handler(
        lambda body, attempt: mailed.append(attempt.key),
        key=SOURCE_KEY,
        key_prefix="mailer",
        max_workers=1,
    )
    body = _peek_source(once_env)
    with _previous_runtime(monkeypatch):
        first = once_env.deliver_waiting(downstream, crash="before_finalize")
    assert first.outcomes == [None] and len(mailed) == 1

    again = once_env.deliver(downstream, [body])
    assert again.message_ids == first.message_ids

    assert again.outcomes == [Outcome.DUPLICATE]
    assert once_env.dlq_messages() == []


# --- 2. what a SOURCE_KEY consumer hashes behind SQS is the body --------------------------------


def test_a_source_key_consumer_behind_sqs_hashes_the_whole_body_even_one_typed_notification(
    once_env: OnceEnv,
) -> None:
    """design.md: "What a SOURCE_KEY consumer hashes is ... the business body as published
    ...: through SQS, or SNS with raw delivery on, the body". ``without_transport`` tells
    an SNS notification by ``"Type": "Notification"`` alone, so a business body with such a
    field (a notification service's own event) is hashed without its other fields: two
    different payloads under one identity (an upstream still on the previous runtime reuses
    its bare record id after its retention: the old identity's defect, during the rollout) are
    taken for one, and the second is acknowledged as a DUPLICATE, never applied and never
    quarantined, where any other body is a CONFLICT."""
    sent: list[Any] = []
    downstream = make_handler(
        lambda body, attempt: sent.append(body),
        key=SOURCE_KEY,
        key_prefix="mailer",
        max_workers=1,
    )
    identity = {c.OUTBOX_ATTR_SOURCE: "orders#o-1", c.OUTBOX_ATTR_SEQ: 0}
    first = {"Type": "Notification", "to": "ann@example.com", "text": "o-1 shipped"}
    second = {"Type": "Notification", "to": "ann@example.com", "text": "o-1 refunded"}

    assert once_env.deliver(downstream, [first], message_attributes=identity).outcomes == [
        Outcome.PROCESSED
    ]
    later = once_env.deliver(downstream, [second], message_attributes=identity)

    assert later.outcomes == [Outcome.CONFLICT]  # as for {"type": "notification", ...}
    assert len(sent) == 1


# --- 3. the identity of an outbox stored before this change -----------------------------------


def test_an_outbox_stored_before_the_change_is_resent_to_every_kind_of_target_as_it_was_sent(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). design.md: "an outbox stored by a version of once that stored no
    identity with its messages is sent under the identity it had then, the bare record id".
    To a FIFO queue or topic that includes the deduplication id (SQS and SNS drop a message
    whose ``MessageDeduplicationId`` they saw within 5 minutes; a different one would be
    delivered twice): the previous runtime's was sha256(``<record id>#<seq>``)."""
    queue, fifo_queue = hops.queue(once_env, "legacy-q"), hops.queue(once_env, "legacy-q.fifo")
    topic, fifo_topic = hops.topic(once_env, "legacy-t"), hops.topic(once_env, "legacy-t.fifo")
    handler = make_handler(lambda body, attempt: "never runs", key="id", max_workers=1)
    outbox = [
        OutboxMessage(destination=queue, body='{"n":0}'),
        OutboxMessage(destination=fifo_queue, body='{"n":1}', group_id="g"),
        OutboxMessage(destination=topic, body='{"n":2}'),
        OutboxMessage(destination=fifo_topic, body='{"n":3}', group_id="g"),
    ]
    _legacy_record(once_env, handler, "p-1", {"id": "p-1"}, outbox)
    to_queues = _record_calls(once_env.sqs, "SendMessageBatch")
    to_topics = _record_calls(hops.sns(once_env), "PublishBatch")

    assert once_env.deliver(handler, [{"id": "p-1"}]).outcomes == [Outcome.OWED_SENT]

    old_id = record_id(str(handler.key_prefix), "p-1")
    entries = [
        *(
            e
            for call in to_queues
            if call["QueueUrl"] != once_env.queue_url
            for e in call["Entries"]
        ),
        *(e for call in to_topics for e in call["PublishBatchRequestEntries"]),
    ]
    by_seq = {int(e["MessageAttributes"][c.OUTBOX_ATTR_SEQ]["StringValue"]): e for e in entries}
    assert sorted(by_seq) == [0, 1, 2, 3]
    for seq, entry in by_seq.items():
        assert entry["MessageAttributes"][c.OUTBOX_ATTR_SOURCE]["StringValue"] == old_id
        if seq in (1, 3):
            previous = hashlib.sha256(f"{old_id}#{seq}".encode()).hexdigest()
            assert entry["MessageDeduplicationId"] == previous


def test_an_outbox_sqs_refused_before_the_change_reaches_a_source_key_consumer_once_resent(
    once_env: OnceEnv,
) -> None:
    """design.md: a record id the destination refused "was never accepted there (the record
    stayed owed), so no downstream knows it, and it is sent escaped" — "so that
    ``<once.source>#<once.seq>`` stays within a downstream's 1024-byte key" an escaped id
    past 256 characters is cut. ``legacy_source`` escapes without the cut: a key within
    once's 1024 bytes whose characters are escaped (each UTF-8 byte outside ``SAFE`` becomes
    three characters: a space, any letter outside ASCII) is sent as an identity of up to
    three times that, and the downstream quarantines it as INVALID_KEY, on every redrive:
    what the operation owed is finally sent, and can never be applied."""
    notify = hops.queue(once_env, "legacy-notify")
    handler = make_handler(lambda body, attempt: "never runs", key="id", max_workers=1)
    key = "INV\f" + "é" * 400  # 805 bytes: a key once takes
    assert len(key.encode()) <= c.MAX_KEY_BYTES
    _legacy_record(
        once_env, handler, key, {"id": key}, [OutboxMessage(destination=notify, body='{"n":1}')]
    )
    assert once_env.deliver(handler, [{"id": key}]).outcomes == [Outcome.OWED_SENT]
    [sent] = hops.take(once_env, notify)

    hops.forward(once_env, [sent])
    applied = once_env.deliver_waiting(
        make_handler(lambda body, attempt: "ok", key=SOURCE_KEY, key_prefix="mailer")
    )

    assert applied.outcomes == [Outcome.PROCESSED]
    assert once_env.dlq_messages() == []


# --- 4. effects="staged": the record read on the failure path ---------------------------------


def _owing_staged_handler(env: OnceEnv, notify: str, fail: Callable[[int], None]) -> Any:
    runs: list[int] = []

    def ship(body: dict[str, Any], attempt: Attempt) -> str:
        runs.append(1)
        fail(len(runs))
        attempt.send(notify, {"order": body["orderId"]})
        return "shipped"

    handler = make_handler(ship, key="orderId", effects="staged", max_workers=1)
    hops.fail(env.sqs, "SendMessageBatch", when=lambda params: params["QueueUrl"] == notify)
    assert env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED]
    return handler


def test_a_staged_copy_that_raises_while_its_record_cannot_be_read_comes_back_and_sends_later(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). processor: a copy whose record cannot be read keeps its own
    ending ("nothing is lost, a duplicate at worst comes back"): a raise is FAILED, never
    acknowledged, and the next delivery sends what the record owes (design.md, staged
    table: "a record that would refuse a claim ... OWED_SENT when it owes an outbox")."""
    notify = hops.queue(once_env, "staged-notify")

    def raise_on_copies(run: int) -> None:
        if run > 1:
            raise KeyError("shipped")

    handler = _owing_staged_handler(once_env, notify, raise_on_copies)
    hops.fail(once_env.dynamodb, "GetItem")  # throttled past the SDK's retries, or denied

    unread = once_env.deliver(handler, [{"orderId": "o-1"}])
    assert unread.outcomes == [Outcome.FAILED]
    assert unread.batch_item_failures == unread.message_ids
    assert hops.take(once_env, notify) == []

    assert once_env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED_SENT]
    assert len(hops.take(once_env, notify)) == 1


def test_a_staged_copy_that_raises_a_permanent_error_on_a_done_record_sends_what_it_owes(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). design.md's staged table: a ``PermanentError`` on a copy whose
    record is COMPLETED is "a duplicate ... acknowledged (OWED_SENT when it owes an outbox,
    sent first), never retried or quarantined"."""
    notify = hops.queue(once_env, "permanent-notify")

    def refuse_copies(run: int) -> None:
        if run > 1:
            raise PermanentError("order o-1 is already shipped")

    handler = _owing_staged_handler(once_env, notify, refuse_copies)
    again = once_env.deliver(handler, [{"orderId": "o-1"}])

    assert again.outcomes == [Outcome.OWED_SENT]
    assert len(hops.take(once_env, notify)) == 1
    assert once_env.dlq_messages() == []


def test_a_fifo_group_goes_on_past_a_staged_copy_that_raises_on_its_own_commit(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). A FIFO group stops at a record that is not done; a copy judged a
    duplicate by its record is done (design.md's staged table), so the group's next message
    runs in the same batch, in order."""
    done: list[str] = []

    def ship(body: dict[str, Any], attempt: Attempt) -> str:
        if body["orderId"] in done:
            raise KeyError("already shipped")  # what its own first commit changed
        done.append(body["orderId"])
        return "shipped"

    handler = make_handler(ship, key="orderId", effects="staged", max_workers=1)
    assert once_env.deliver(handler, [{"orderId": "o-1"}], fifo_group="g").outcomes == [
        Outcome.PROCESSED
    ]
    batch = once_env.deliver(handler, [{"orderId": "o-1"}, {"orderId": "o-2"}], fifo_group="g")

    assert batch.outcomes == [Outcome.DUPLICATE, Outcome.PROCESSED]
    assert done == ["o-1", "o-2"]


# --- 5. the quarantine of a SOURCE_KEY consumer's message, and its redrive -------------------


def test_a_source_key_message_quarantined_with_eight_attributes_is_keyed_again_on_redrive(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). quarantine.py: the DLQ copy carries ``once.source`` and
    ``once.seq`` before the team's attributes (SQS takes 10 attributes a message), "without
    which the redrive of a key=SOURCE_KEY consumer's message could never be keyed again";
    the redriven copy is the same operation's message: applied once."""
    notify = hops.queue(once_env, "eight-notify")
    team = {f"a{i}": f"v{i}" for i in range(8)}
    upstream = make_handler(
        lambda body, attempt: attempt.send(notify, {"n": 1}, attributes=team),
        key="id",
        key_prefix="orders",
        max_workers=1,
    )
    once_env.deliver(upstream, [{"id": "INV\f1 é@%~"}])
    [sent] = hops.take(once_env, notify)
    applied: list[str] = []

    def apply(body: Any, attempt: Attempt) -> str:
        if not applied:
            applied.append("refused")
            raise PermanentError("the mail template is missing")
        applied.append(attempt.key)
        return "mailed"

    downstream = make_handler(apply, key=SOURCE_KEY, key_prefix="mailer", max_workers=1)
    hops.forward(once_env, [sent])
    assert once_env.deliver_waiting(downstream).outcomes == [Outcome.QUARANTINED]
    [copy] = once_env.dlq_messages()
    assert copy.attributes[c.OUTBOX_ATTR_SOURCE] == hops.attribute(sent, c.OUTBOX_ATTR_SOURCE)

    move(once_env.sqs, once_env.dlq_url, once_env.queue_url)
    assert once_env.deliver_waiting(downstream).outcomes == [Outcome.PROCESSED]
    hops.forward(once_env, [sent])  # and the upstream's resend after that is a duplicate
    assert once_env.deliver_waiting(downstream).outcomes == [Outcome.DUPLICATE]
    assert applied[1:] == [f"{hops.attribute(sent, c.OUTBOX_ATTR_SOURCE)}#0"]


# --- 6. held: the identity across resends, modes and SNS FIFO's per-publish fields ------------


def test_an_outbox_resent_after_a_switch_to_staged_carries_the_identity_of_its_first_send(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). design.md: the identity is stored with each message in the commit,
    "and every send of the outbox sends what is stored: the same identity on every resend",
    whatever the mode of the delivery that resends it (a deploy may switch a consumer from
    ``effects="any"`` to ``"staged"``, whose copy runs business code again under a new
    token and is refused by the record)."""
    notify = hops.queue(once_env, "switch-notify")

    def ship(body: dict[str, Any], attempt: Attempt) -> str:
        attempt.send(notify, {"order": body["orderId"]})
        return "shipped"

    tried = _record_calls(once_env.sqs, "SendMessageBatch")
    hops.fail(once_env.sqs, "SendMessageBatch", when=lambda params: params["QueueUrl"] == notify)
    two_phase = make_handler(ship, key="orderId", max_workers=1)
    assert once_env.deliver(two_phase, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED]
    staged = make_handler(ship, key="orderId", effects="staged", max_workers=1)

    assert once_env.deliver(staged, [{"orderId": "o-1"}]).outcomes == [Outcome.OWED_SENT]

    sources = [
        e["MessageAttributes"][c.OUTBOX_ATTR_SOURCE]["StringValue"]
        for call in tried
        if call["QueueUrl"] == notify
        for e in call["Entries"]
    ]
    assert len(sources) == 2 and sources[0] == sources[1]
    [sent] = hops.take(once_env, notify)
    assert hops.attribute(sent, c.OUTBOX_ATTR_SOURCE) == sources[0]


def test_a_republish_through_an_sns_fifo_topic_without_raw_delivery_is_a_duplicate(
    once_env: OnceEnv,
) -> None:
    """Pinned (it held). An SNS FIFO topic assigns each published message a new
    ``MessageId`` and ``SequenceNumber`` ("a large, non-consecutive number that Amazon SNS
    assigns to each message", PublishBatchResultEntry), written into the notification with
    raw delivery off beside a new ``Timestamp`` and ``Signature``; past SNS's 5-minute
    deduplication window the outbox's resend reaches the queue again. handler.md: "A resend
    is a duplicate" (moto writes no ``SequenceNumber``: the republish is written as SNS
    writes it)."""
    topic = hops.topic(once_env, "shipped.fifo")
    hops.sns(once_env).subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=hops.queue_arn(once_env, once_env.fifo_queue_url),
        Attributes={"RawMessageDelivery": "false"},
    )
    upstream = make_handler(
        lambda body, attempt: attempt.send(topic, {"order": body["orderId"]}, group_id="g"),
        key="orderId",
        key_prefix="orders",
        max_workers=1,
    )
    assert once_env.deliver(upstream, [{"orderId": "o-1"}]).outcomes == [Outcome.PROCESSED]
    [published] = hops.take(once_env, once_env.fifo_queue_url)
    first = json.loads(published["Body"]) | {"SequenceNumber": "10000000000000000001"}
    republished = first | {
        "MessageId": "5f0c1c2e-0000-4000-8000-000000000002",
        "SequenceNumber": "10000000000000000097",
        "Timestamp": "2026-01-01T00:06:00.000Z",
        "Signature": "c2lnbmVkIGFnYWlu",
    }
    applied: list[str] = []
    downstream = make_handler(
        lambda body, attempt: applied.append(attempt.key),
        key=SOURCE_KEY,
        key_prefix="mailer",
        max_workers=1,
    )

    for notification, expected in ((first, Outcome.PROCESSED), (republished, Outcome.DUPLICATE)):
        once_env.sqs.send_message(
            QueueUrl=once_env.fifo_queue_url,
            MessageBody=json.dumps(notification),
            MessageGroupId="g",
            MessageDeduplicationId=notification["SequenceNumber"],
        )
        assert once_env.deliver_waiting(downstream, fifo=True).outcomes == [expected]
    assert len(applied) == 1
