"""The example service end to end on moto: ``payments.handler.lambda_handler`` credits each
payment to its account once, across duplicates, redeliveries, and a crash between the
effect and the finalize (the ledger's own conditional write is the downstream fence)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

import payments.handler
from once import constants as c
from once.models import Outcome
from payments.ledger import ACCOUNT_PREFIX, ENTRY_PREFIX, Ledger
from tests.conftest import LEDGER, failed_ids, message_ids, outcomes, plain

ACCOUNT = "acct-Zanzibar-7781"
AMOUNT = 123_457


def payment(payment_id: str = "p-1", account: str = ACCOUNT, amount: Any = AMOUNT) -> dict:
    return {"paymentId": payment_id, "account": account, "amount": amount}


@pytest.fixture
def service(aws, monkeypatch, clock) -> Iterator[Any]:
    """The module-level handler, its ledger client reset, its store on the test's clock.

    Records run one at a time: in-process moto is not thread-safe (a transaction copies the
    table while other threads write it), and races are the DynamoDB Local suites' job."""
    monkeypatch.setattr(payments.handler, "_ledger", None)
    handler = payments.handler.lambda_handler
    processor = handler.processor
    monkeypatch.setattr(processor._store, "_clock", clock)
    monkeypatch.setattr(processor, "_settings", replace(processor._settings, max_workers=1))
    monkeypatch.setattr(processor, "_pool", None)
    yield handler


def ledger(aws: Any) -> Ledger:
    return Ledger(aws.dynamodb, LEDGER)


def entries(aws: Any) -> list[dict[str, Any]]:
    items = [plain(i) for i in aws.dynamodb.scan(TableName=LEDGER)["Items"]]
    return [i for i in items if i["id"].startswith(ENTRY_PREFIX)]


def test_duplicates_in_a_batch_and_across_batches_credit_once(aws, service, sqs_event) -> None:
    assert service(sqs_event([payment()] * 3), None) == {"batchItemFailures": []}
    for _ in range(2):
        assert service(sqs_event([payment()]), None) == {"batchItemFailures": []}

    assert ledger(aws).balance(ACCOUNT) == AMOUNT
    assert len(entries(aws)) == 1
    record = aws.record("p-1", prefix="payments")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)
    assert json.loads(record["result"]) == {
        "paymentId": "p-1",
        "account": ACCOUNT,
        "amount": AMOUNT,
        "fence": 1,
        "applied": "now",
    }


def test_every_payment_is_credited_once_to_its_account(aws, service, sqs_event) -> None:
    batch = [payment(f"p-{i}", account=f"a-{i % 2}", amount=100 + i) for i in range(10)]
    assert service(sqs_event(batch + batch[:4]), None) == {"batchItemFailures": []}
    assert service(sqs_event(batch[3:]), None) == {"batchItemFailures": []}

    assert ledger(aws).balance("a-0") == sum(100 + i for i in range(0, 10, 2))
    assert ledger(aws).balance("a-1") == sum(100 + i for i in range(1, 10, 2))
    assert len(entries(aws)) == 10


def test_a_crash_between_the_credit_and_the_finalize_does_not_credit_twice(
    aws, service, sqs_event, clock, context, monkeypatch
) -> None:
    store = service.processor._store
    real_complete = store.complete
    crashes = iter([True])

    def complete_or_crash(*args: Any, **kwargs: Any) -> bool:
        if next(crashes, False):
            raise ConnectionError("the invocation died before finalize")
        return real_complete(*args, **kwargs)

    monkeypatch.setattr(store, "complete", complete_or_crash)
    event = sqs_event([payment()])

    assert failed_ids(service(event, context(remaining_ms=60_000))) == message_ids(event)
    assert ledger(aws).balance(ACCOUNT) == AMOUNT  # the effect happened...
    stuck = aws.record("p-1", prefix="payments")
    assert (stuck["status"], stuck["fence"]) == (c.STATUS_IN_PROGRESS, 1)  # ...unfinalized

    assert outcomes(service, event, context(remaining_ms=60_000)) == [Outcome.BUSY]

    clock.advance(60 + c.DEFAULT_LEASE_MARGIN_S + 1)  # the dead invocation's lease runs out
    assert outcomes(service, event, context(remaining_ms=60_000)) == [Outcome.PROCESSED]

    assert ledger(aws).balance(ACCOUNT) == AMOUNT
    assert len(entries(aws)) == 1
    record = aws.record("p-1", prefix="payments")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 2)
    result = json.loads(record["result"])
    assert result["applied"] == "earlier"
    assert result["fence"] == 1  # the entry the first attempt wrote, returned as the answer
    assert service(event, None) == {"batchItemFailures": []}
    assert ledger(aws).balance(ACCOUNT) == AMOUNT


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
def test_an_invalid_payment_is_quarantined_and_credits_nothing(
    aws, service, sqs_event, body: dict
) -> None:
    event = sqs_event([body])
    assert service(event, None) == {"batchItemFailures": []}

    assert entries(aws) == []
    assert aws.record("p-1", prefix="payments")["status"] == c.STATUS_FAILED
    [dead] = aws.dlq()
    assert json.loads(dead["Body"]) == body
    reason = dead["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"]
    assert reason == "PERMANENT_ERROR"


def test_a_payment_without_a_string_id_is_quarantined_and_credits_nothing(
    aws, service, sqs_event
) -> None:
    no_id = {"account": ACCOUNT, "amount": AMOUNT}  # no key: quarantined before any write
    numeric = {"paymentId": 17, "account": ACCOUNT, "amount": AMOUNT}  # a key, a bad payment
    assert service(sqs_event([no_id, numeric]), None) == {"batchItemFailures": []}

    assert [(r["id"], r["status"]) for r in aws.records()] == [("payments#17", "FAILED")]
    reasons = sorted(
        m["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"] for m in aws.dlq()
    )
    assert reasons == ["INVALID_KEY", "PERMANENT_ERROR"]
    assert entries(aws) == []


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
    "changed", [{"account": "acct-Other-1"}, {"amount": AMOUNT + 1}], ids=["account", "amount"]
)
def test_a_payment_id_reused_for_another_credit_is_quarantined_not_acknowledged(
    aws, service, sqs_event, clock, changed: dict[str, Any]
) -> None:
    assert service(sqs_event([payment()]), None) == {"batchItemFailures": []}
    clock.advance(c.DEFAULT_RETENTION_S + 1)  # the record now counts as absent, by design
    reused = payment(**changed)

    assert service(sqs_event([reused]), None) == {"batchItemFailures": []}

    assert ledger(aws).balance(ACCOUNT) == AMOUNT
    assert ledger(aws).balance("acct-Other-1") == 0
    assert len(entries(aws)) == 1
    assert aws.record("p-1", prefix="payments")["status"] == c.STATUS_FAILED
    [dead] = aws.dlq()
    assert json.loads(dead["Body"]) == reused
    reason = dead["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"]
    assert reason == "PERMANENT_ERROR"
