"""The example service under crashes, tested as a team would test its own handler: with
once.testing's ``once_env``, the ledger table and the notifications queue created in the
same moto mock.

``credit`` stages the ledger's writes and the notification, and runs with
``effects="staged"``: no claim, and one transaction commits the writes with the record, the
notification sent after it. So a crash before the commit leaves nothing behind (not even a
record: the redelivery credits at once, on a clean slate), and a crash after it leaves the
payment credited with its notification owed, which the redelivery sends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import payments.handler
from once import constants as c
from once import identity
from payments import ENV_NOTIFICATIONS_QUEUE_URL, STATUS_CREDITED
from payments.ledger import ACCOUNT_PREFIX, ENTRY_PREFIX
from tests.conftest import LEDGER

ACCOUNT = "acct-Zanzibar-7781"
AMOUNT = 123_457
PAYMENT = {"paymentId": "p-1", "account": ACCOUNT, "amount": AMOUNT}
NOTICE = {**PAYMENT, "status": STATUS_CREDITED}


def named(source: str) -> str:
    """``once.source`` without its operation's token: the record id it names (escaped, here
    as it is: the example's ids need no escaping)."""
    return source.rsplit(identity.SEPARATOR, 1)[0]


class Example:
    """The service's own resources in once_env's mock: the ledger and the notifications."""

    def __init__(self, once_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.env = once_env
        once_env.dynamodb.create_table(
            TableName=LEDGER,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}],
        )
        self.notifications = once_env.sqs.create_queue(QueueName="notifications")["QueueUrl"]
        monkeypatch.setenv(ENV_NOTIFICATIONS_QUEUE_URL, self.notifications)
        self._seen: list[tuple[dict[str, Any], str, int]] = []

    def balance(self) -> int:
        item = self.env.dynamodb.get_item(
            TableName=LEDGER, Key={c.PARTITION_KEY: {"S": ACCOUNT_PREFIX + ACCOUNT}}
        ).get("Item")
        return int(item["balance"]["N"]) if item else 0

    def entries(self) -> int:
        items = self.env.dynamodb.scan(TableName=LEDGER)["Items"]
        return sum(item[c.PARTITION_KEY]["S"].startswith(ENTRY_PREFIX) for item in items)

    def notified(self) -> list[tuple[dict[str, Any], str, int]]:
        """(body, once.source, once.seq) of every notification sent so far."""
        while True:
            batch = self.env.sqs.receive_message(
                QueueUrl=self.notifications, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not batch:
                return list(self._seen)
            for message in batch:
                attributes = message["MessageAttributes"]
                self._seen.append(
                    (
                        json.loads(message["Body"]),
                        named(attributes[c.OUTBOX_ATTR_SOURCE]["StringValue"]),
                        int(attributes[c.OUTBOX_ATTR_SEQ]["StringValue"]),
                    )
                )


@pytest.fixture
def example(once_env: Any, monkeypatch: pytest.MonkeyPatch) -> Example:
    return Example(once_env, monkeypatch)


def test_a_crash_before_the_commit_leaves_nothing_and_the_redelivery_credits_and_notifies_once(
    once_env, example
) -> None:
    handler = payments.handler.lambda_handler

    crashed = once_env.deliver(handler, [PAYMENT], crash="after_process")
    # credit returned, the invocation died before the commit: nothing of it landed, and
    # with no claim there is no lease to wait for either.
    assert (example.balance(), example.entries(), example.notified()) == (0, 0, [])
    assert once_env.record("p-1") is None

    retried = once_env.deliver(handler, [PAYMENT])

    assert retried.outcomes == ["processed"]
    assert retried.message_ids == crashed.message_ids  # SQS's redelivery of the same message
    assert retried.receive_counts == [2]
    assert (example.balance(), example.entries()) == (AMOUNT, 1)
    record = once_env.record("p-1")
    assert record is not None
    assert (record.status, record.fence, record.outbox) == (c.STATUS_COMPLETED, 1, ())
    assert once_env.deliver(handler, [PAYMENT]).outcomes == ["duplicate"]
    assert example.balance() == AMOUNT
    assert example.notified() == [(NOTICE, "payments#p-1", 0)]


def test_a_crash_after_the_commit_leaves_the_credit_and_the_redelivery_sends_what_is_owed(
    once_env, example
) -> None:
    handler = payments.handler.lambda_handler

    once_env.deliver(handler, [PAYMENT], crash="before_finalize")
    # The commit landed (credit and record together), the invocation died before sending.
    assert (example.balance(), example.entries(), example.notified()) == (AMOUNT, 1, [])
    record = once_env.record("p-1")
    assert record is not None
    assert (record.status, record.fence, len(record.outbox)) == (c.STATUS_COMPLETED, 1, 1)

    # The redelivery runs credit, its commit is refused by the COMPLETED record (nothing it
    # staged lands), and it sends what the record owes.
    assert once_env.deliver(handler, [PAYMENT]).outcomes == ["owed_sent"]
    assert once_env.deliver(handler, [PAYMENT]).outcomes == ["duplicate"]

    assert (example.balance(), example.entries()) == (AMOUNT, 1)
    record = once_env.record("p-1")
    assert record is not None
    assert (record.status, record.fence, record.outbox) == (c.STATUS_COMPLETED, 1, ())
    assert example.notified() == [(NOTICE, "payments#p-1", 0)]


@pytest.mark.parametrize(
    ("crash", "credited_by_the_dead_invocation", "redelivered"),
    [
        ("after_process", 0, ["processed"]),
        ("before_finalize", AMOUNT, ["owed_sent"]),
    ],
)
def test_every_crash_point_ends_with_the_payment_credited_and_announced_once(
    once_env, example, crash: str, credited_by_the_dead_invocation: int, redelivered: list[str]
) -> None:
    handler = payments.handler.lambda_handler

    once_env.deliver(handler, [PAYMENT, PAYMENT], crash=crash)  # a duplicate in the batch too
    assert example.balance() == credited_by_the_dead_invocation
    assert example.notified() == []  # never before the commit, and the sender died with it
    assert once_env.deliver(handler, [PAYMENT]).outcomes == redelivered
    assert once_env.deliver(handler, [PAYMENT, PAYMENT]).outcomes == ["duplicate"] * 2

    assert (example.balance(), example.entries()) == (AMOUNT, 1)
    record = once_env.record("p-1")
    assert record is not None
    assert (record.status, record.outbox) == (c.STATUS_COMPLETED, ())
    assert example.notified() == [(NOTICE, "payments#p-1", 0)]
