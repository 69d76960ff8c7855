"""The example service under crashes, tested as a team would test its own handler: with
once.testing's ``once_env``, the ledger table created in the same moto mock.

A crash after the credit leaves the record in progress with the money already on the
account; the takeover runs ``credit`` again under the next fence, and the ledger's own
conditional write (the payment entry) is what keeps the balance from moving twice.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import payments.handler
from once import constants as c
from payments.ledger import Ledger
from tests.conftest import LEDGER

ACCOUNT = "acct-Zanzibar-7781"
AMOUNT = 123_457
PAYMENT = {"paymentId": "p-1", "account": ACCOUNT, "amount": AMOUNT}


@pytest.fixture
def ledger(once_env: Any, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """The ledger table in once_env's mock; the service makes its client anew inside it."""
    once_env.dynamodb.create_table(
        TableName=LEDGER,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}],
    )
    monkeypatch.setattr(payments.handler, "_ledger", None)
    return Ledger(once_env.dynamodb, LEDGER)


def entries(once_env: Any) -> int:
    items = once_env.dynamodb.scan(TableName=LEDGER)["Items"]
    return sum(item[c.PARTITION_KEY]["S"].startswith("payment#") for item in items)


def test_a_payment_is_credited_once_across_a_crash_after_the_credit_and_a_takeover(
    once_env, ledger
) -> None:
    handler = payments.handler.lambda_handler

    crashed = once_env.deliver(handler, [PAYMENT], crash="after_process")
    assert ledger.balance(ACCOUNT) == AMOUNT  # the credit happened, the record is unfinished
    stuck = once_env.record("p-1")
    assert stuck is not None
    assert (stuck.status, stuck.fence) == (c.STATUS_IN_PROGRESS, 1)

    assert once_env.deliver(handler, [PAYMENT]).outcomes == ["busy"]  # the dead lease holds
    once_env.expire_leases()
    retried = once_env.deliver(handler, [PAYMENT])

    assert retried.outcomes == ["processed"]
    assert retried.message_ids == crashed.message_ids  # SQS's redelivery of the same message
    assert retried.receive_counts == [3]
    assert ledger.balance(ACCOUNT) == AMOUNT
    assert entries(once_env) == 1
    record = once_env.record("p-1")
    assert record is not None
    assert (record.status, record.fence) == (c.STATUS_COMPLETED, 2)
    result = json.loads(record.result or "")
    assert (result["applied"], result["fence"]) == ("earlier", 1)  # the first attempt's entry
    assert once_env.deliver(handler, [PAYMENT]).outcomes == ["duplicate"]
    assert ledger.balance(ACCOUNT) == AMOUNT


@pytest.mark.parametrize(
    ("crash", "credited_by_the_dead_invocation", "redelivered"),
    [
        ("after_claim", 0, ["busy"]),
        ("after_process", AMOUNT, ["busy"]),
        ("before_finalize", AMOUNT, ["duplicate"]),
    ],
)
def test_every_crash_point_ends_with_the_payment_credited_once(
    once_env, ledger, crash: str, credited_by_the_dead_invocation: int, redelivered: list[str]
) -> None:
    handler = payments.handler.lambda_handler

    once_env.deliver(handler, [PAYMENT, PAYMENT], crash=crash)  # a duplicate in the batch too
    assert ledger.balance(ACCOUNT) == credited_by_the_dead_invocation
    assert once_env.deliver(handler, [PAYMENT]).outcomes == redelivered
    once_env.expire_leases()
    once_env.deliver(handler, [PAYMENT, PAYMENT])

    assert ledger.balance(ACCOUNT) == AMOUNT
    assert entries(once_env) == 1
    record = once_env.record("p-1")
    assert record is not None
    assert record.status == c.STATUS_COMPLETED
