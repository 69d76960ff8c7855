"""The example service end to end on moto: ``payments.handler.lambda_handler`` credits each
payment to its account once and announces it once, across duplicates, redeliveries and a
crash before the commit. ``credit`` only stages: once commits the ledger's writes with the
record in one transaction and sends the notification after it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

import payments.handler
from once import constants as c
from once import identity
from once.models import Outcome
from payments import ENV_NOTIFICATIONS_QUEUE_URL, STATUS_CREDITED
from payments.ledger import ACCOUNT_PREFIX, ENTRY_PREFIX
from tests.conftest import LEDGER, failed_ids, message_ids, outcomes, plain

ACCOUNT = "acct-Zanzibar-7781"
AMOUNT = 123_457


def named(source: str) -> str:
    """``once.source`` without its operation's token: the record id it names (escaped, here
    as it is: the example's ids need no escaping)."""
    return source.rsplit(identity.SEPARATOR, 1)[0]


def payment(payment_id: str = "p-1", account: str = ACCOUNT, amount: Any = AMOUNT) -> dict:
    return {"paymentId": payment_id, "account": account, "amount": amount}


def notice(body: dict | None = None) -> dict:
    """The notification of a credited payment (default: ``payment()``)."""
    return {**(body or payment()), "status": STATUS_CREDITED}


@dataclass
class Notified:
    """One message of the notifications queue: its body and outbox identity."""

    body: Any
    source: str
    seq: int


@pytest.fixture
def notifications(aws: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The notifications queue, named to the service as the stack names it."""
    url = aws.sqs.create_queue(QueueName="notifications")["QueueUrl"]
    monkeypatch.setenv(ENV_NOTIFICATIONS_QUEUE_URL, url)
    return str(url)


@pytest.fixture
def service(aws, notifications, monkeypatch, clock) -> Iterator[Any]:
    """The module-level handler, its store on the test's clock.

    Records run one at a time: in-process moto is not thread-safe (a transaction copies the
    table while other threads write it), and races are the DynamoDB Local suites' job."""
    handler = payments.handler.lambda_handler
    handler.bind()  # a processor built for this test's mock and environment
    processor = handler.processor
    monkeypatch.setattr(processor._store, "_clock", clock)
    monkeypatch.setattr(processor, "_settings", replace(processor._settings, max_workers=1))
    monkeypatch.setattr(processor, "_pool", None)
    yield handler
    handler.bind()


def balance(aws: Any, account: str = ACCOUNT) -> int:
    item = aws.dynamodb.get_item(
        TableName=LEDGER, Key={"id": {"S": ACCOUNT_PREFIX + account}}, ConsistentRead=True
    ).get("Item")
    return int(item["balance"]["N"]) if item else 0


def entries(aws: Any) -> list[dict[str, Any]]:
    items = [plain(i) for i in aws.dynamodb.scan(TableName=LEDGER)["Items"]]
    return [i for i in items if i["id"].startswith(ENTRY_PREFIX)]


def notified(aws: Any, url: str) -> list[Notified]:
    """Every message of the notifications queue (consumed: call it once per check)."""
    found = []
    for message in aws.dlq(url):
        attributes = message["MessageAttributes"]
        found.append(
            Notified(
                json.loads(message["Body"]),
                named(attributes[c.OUTBOX_ATTR_SOURCE]["StringValue"]),
                int(attributes[c.OUTBOX_ATTR_SEQ]["StringValue"]),
            )
        )
    return found


def test_duplicates_in_a_batch_and_across_batches_credit_and_notify_once(
    aws, service, sqs_event, notifications
) -> None:
    assert service(sqs_event([payment()] * 3), None) == {"batchItemFailures": []}
    for _ in range(2):
        assert service(sqs_event([payment()]), None) == {"batchItemFailures": []}

    assert balance(aws) == AMOUNT
    [entry] = entries(aws)
    assert entry == {"id": "payment#p-1", "account": ACCOUNT, "amount": AMOUNT}
    record = aws.record("p-1", prefix="payments")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)
    assert c.ATTR_OUTBOX not in record  # sent, then cleared
    assert json.loads(record["result"]) == {
        "paymentId": "p-1",
        "account": ACCOUNT,
        "amount": AMOUNT,
    }
    assert notified(aws, notifications) == [Notified(notice(), "payments#p-1", 0)]


def test_every_payment_is_credited_and_announced_once(
    aws, service, sqs_event, notifications
) -> None:
    batch = [payment(f"p-{i}", account=f"a-{i % 2}", amount=100 + i) for i in range(10)]
    assert service(sqs_event(batch + batch[:4]), None) == {"batchItemFailures": []}
    assert service(sqs_event(batch[3:]), None) == {"batchItemFailures": []}

    assert balance(aws, "a-0") == sum(100 + i for i in range(0, 10, 2))
    assert balance(aws, "a-1") == sum(100 + i for i in range(1, 10, 2))
    assert len(entries(aws)) == 10
    sent = notified(aws, notifications)
    assert sorted((n.source, n.seq) for n in sent) == sorted(
        (f"payments#p-{i}", 0) for i in range(10)
    )
    by_id = {p["paymentId"]: p for p in batch}
    assert [n.body for n in sent] == [notice(by_id[n.body["paymentId"]]) for n in sent]


def test_a_crash_before_the_commit_leaves_nothing_and_the_redelivery_credits_once(
    aws, service, sqs_event, context, monkeypatch, notifications
) -> None:
    store = service.processor._store
    real_commit = store.commit_staged
    crashes = iter([True])

    def commit_or_crash(*args: Any, **kwargs: Any) -> Any:
        if next(crashes, False):
            raise ConnectionError("the invocation died before the commit")
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(store, "commit_staged", commit_or_crash)
    event = sqs_event([payment()])

    assert failed_ids(service(event, context(remaining_ms=60_000))) == message_ids(event)
    assert (balance(aws), entries(aws)) == (0, [])  # credit ran, and nothing of it landed
    assert notified(aws, notifications) == []
    assert aws.record("p-1", prefix="payments") is None  # no claim, no lease to wait for

    assert outcomes(service, event, context(remaining_ms=60_000)) == [Outcome.PROCESSED]

    assert balance(aws) == AMOUNT
    assert len(entries(aws)) == 1
    record = aws.record("p-1", prefix="payments")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)
    assert service(event, None) == {"batchItemFailures": []}
    assert balance(aws) == AMOUNT
    assert notified(aws, notifications) == [Notified(notice(), "payments#p-1", 0)]


def test_the_notification_is_sent_only_after_the_credit_is_committed(
    aws, service, sqs_event, monkeypatch, notifications
) -> None:
    outbox = service.processor._outbox
    real_send = outbox.send
    seen: list[tuple[int, str, bool, int]] = []

    def observed(source: str, messages: Any) -> bool:
        record = aws.record("p-1", prefix="payments")
        queued = len(notified(aws, notifications))
        seen.append((balance(aws), record["status"], c.ATTR_OUTBOX in record, queued))
        return bool(real_send(source, messages))

    monkeypatch.setattr(outbox, "send", observed)
    assert service(sqs_event([payment()]), None) == {"batchItemFailures": []}

    # At the send: the credit and the record's completion had landed, with the message owed,
    # and nothing was in the queue yet.
    assert seen == [(AMOUNT, c.STATUS_COMPLETED, True, 0)]
    assert notified(aws, notifications) == [Notified(notice(), "payments#p-1", 0)]


def test_a_failed_send_leaves_the_notification_owed_and_the_redelivery_sends_it_without_crediting(
    aws, service, sqs_event, monkeypatch, notifications
) -> None:
    outbox = service.processor._outbox
    real_send = outbox.send
    calls: list[str] = []

    def send_or_fail(source: str, messages: Any) -> bool:
        calls.append(source)
        if len(calls) == 1:
            return False  # SQS unreachable: the outbox says "not all sent", never raises
        return bool(real_send(source, messages))

    monkeypatch.setattr(outbox, "send", send_or_fail)
    event = sqs_event([payment()])

    assert outcomes(service, event) == [Outcome.OWED]  # not acknowledged: SQS redelivers
    assert balance(aws) == AMOUNT
    record = aws.record("p-1", prefix="payments")
    assert record["status"] == c.STATUS_COMPLETED and c.ATTR_OUTBOX in record
    assert notified(aws, notifications) == []

    assert outcomes(service, event) == [Outcome.OWED_SENT]
    assert outcomes(service, event) == [Outcome.DUPLICATE]

    assert balance(aws) == AMOUNT
    assert len(entries(aws)) == 1
    assert c.ATTR_OUTBOX not in aws.record("p-1", prefix="payments")
    assert notified(aws, notifications) == [Notified(notice(), "payments#p-1", 0)]


@pytest.mark.parametrize(
    "body",
    [
        payment(amount=0),
        payment(amount=-5),
        payment(amount=1.5),
        payment(amount="100"),
        payment(amount=True),
        payment(account=""),
        payment(account=None),
        {"paymentId": "p-1", "account": ACCOUNT},
    ],
    ids=[
        "zero",
        "negative",
        "float",
        "string",
        "bool",
        "empty-account",
        "null-account",
        "no-amount",
    ],
)
def test_an_invalid_payment_is_quarantined_and_credits_and_announces_nothing(
    aws, service, sqs_event, notifications, body: dict
) -> None:
    event = sqs_event([body])
    assert service(event, None) == {"batchItemFailures": []}

    assert entries(aws) == []
    assert notified(aws, notifications) == []
    assert aws.record("p-1", prefix="payments") is None  # staged: nothing written on a raise
    [dead] = aws.dlq()
    assert json.loads(dead["Body"]) == body
    reason = dead["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"]
    assert reason == "PERMANENT_ERROR"


def test_a_payment_without_a_string_id_is_quarantined_and_credits_nothing(
    aws, service, sqs_event, notifications
) -> None:
    no_id = {"account": ACCOUNT, "amount": AMOUNT}  # no key: quarantined before any write
    numeric = {"paymentId": 17, "account": ACCOUNT, "amount": AMOUNT}  # a key, a bad payment
    assert service(sqs_event([no_id, numeric]), None) == {"batchItemFailures": []}

    assert aws.records() == []  # staged: a raise writes no record
    reasons = sorted(
        m["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"] for m in aws.dlq()
    )
    assert reasons == ["INVALID_KEY", "PERMANENT_ERROR"]
    assert entries(aws) == []
    assert notified(aws, notifications) == []


def test_the_ledger_account_balance_is_its_own_item(aws, service, sqs_event) -> None:
    service(sqs_event([payment()]), None)
    account = plain(
        aws.dynamodb.get_item(TableName=LEDGER, Key={"id": {"S": ACCOUNT_PREFIX + ACCOUNT}})["Item"]
    )
    assert account == {"id": ACCOUNT_PREFIX + ACCOUNT, "balance": AMOUNT}


def test_no_account_or_amount_appears_in_info_logs(aws, service, sqs_event, caplog) -> None:
    event = sqs_event([payment(), payment(), payment("p-2", amount=-1), payment(amount=AMOUNT + 1)])
    with caplog.at_level(logging.INFO):
        service(event, None)

    lines = [
        r.getMessage() + " " + json.dumps(r.__dict__, default=str)
        for r in caplog.records
        if r.levelno <= logging.INFO
    ]
    assert lines
    for line in lines:
        assert ACCOUNT not in line
        assert str(AMOUNT) not in line


@pytest.mark.parametrize(
    "changed",
    [{}, {"account": "acct-Other-1"}, {"amount": AMOUNT + 1}],
    ids=["same-payment", "account", "amount"],
)
def test_a_payment_id_credited_before_the_records_retention_is_quarantined_not_credited_again(
    aws, service, sqs_event, clock, notifications, changed: dict[str, Any]
) -> None:
    assert service(sqs_event([payment()]), None) == {"batchItemFailures": []}
    clock.advance(c.DEFAULT_RETENTION_S + 1)  # the record now counts as absent, by design
    again = payment(**changed)

    # The entry refuses the commit: a duplicate the record forgot, or another payment under
    # a used id. Retrying cannot change it and acknowledging could lose money: the DLQ.
    assert service(sqs_event([again]), None) == {"batchItemFailures": []}

    assert balance(aws) == AMOUNT
    assert balance(aws, "acct-Other-1") == 0
    assert len(entries(aws)) == 1
    record = aws.record("p-1", prefix="payments")
    # The record read after the refusal is past its retention: it refuses nothing, so the
    # entry's refusal stands. Nothing is written over the old record.
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)
    [dead] = aws.dlq()
    assert json.loads(dead["Body"]) == again
    reason = dead["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"]
    assert reason == c.REASON_WRITE_REFUSED
    assert notified(aws, notifications) == [Notified(notice(), "payments#p-1", 0)]
