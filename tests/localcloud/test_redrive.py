"""``oncecli.redrive.move`` on moto (in process): what it sends to the source queue for each
DLQ message, and what it leaves in the DLQ."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from oncecli.aws import LOCAL_REGION
from oncecli.redrive import move


@pytest.fixture
def sqs(monkeypatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    with mock_aws():
        yield boto3.client("sqs", region_name=LOCAL_REGION)


def _fifo_pair(sqs: Any) -> tuple[str, str]:
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    dlq = sqs.create_queue(QueueName="orders-dlq.fifo", Attributes=attributes)["QueueUrl"]
    source = sqs.create_queue(QueueName="orders.fifo", Attributes=attributes)["QueueUrl"]
    return dlq, source


def _sent(sqs: Any) -> list[dict[str, Any]]:
    """Every SendMessage request the client makes from now on, as sent."""
    requests: list[dict[str, Any]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessage", lambda params, **_: requests.append(params)
    )
    return requests


def test_fifo_copy_is_deduplicated_by_the_dlq_message_id_not_the_original_send(sqs):
    """SQS would drop a copy carrying the original's deduplication id within 5 minutes of the
    original send; the move then deletes the DLQ message, and it is lost."""
    dlq, source = _fifo_pair(sqs)
    for n in range(2):
        sqs.send_message(
            QueueUrl=dlq,
            MessageBody=f"order {n}",
            MessageGroupId="g",
            MessageDeduplicationId=f"o{n}",
        )
    in_dlq = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=0)[
        "Messages"
    ]
    sent = _sent(sqs)

    assert move(sqs, dlq, source).moved == 2

    copies = [r for r in sent if r["QueueUrl"] == source]
    assert sorted(r["MessageDeduplicationId"] for r in copies) == sorted(
        m["MessageId"] for m in in_dlq
    )
    assert all(r["MessageGroupId"] == "g" for r in copies)
    bodies = sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in bodies) == ["order 0", "order 1"]


def _quarantined(sqs: Any, url: str, body: str, reason: str) -> None:
    sqs.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageAttributes={"once.reason": {"DataType": "String", "StringValue": reason}},
    )


def _bodies(sqs: Any, url: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return sorted(m["Body"] for m in messages.get("Messages", []))


def test_lease_expired_messages_stay_in_the_dlq_visible_for_review(sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    source = sqs.create_queue(QueueName="source")["QueueUrl"]
    _quarantined(sqs, dlq, "poison", "POISON")
    _quarantined(sqs, dlq, "expired", "LEASE_EXPIRED")
    sqs.send_message(QueueUrl=dlq, MessageBody="plain")

    done = move(sqs, dlq, source)

    assert (done.moved, done.lease_expired_left) == (2, 1)
    assert _bodies(sqs, source) == ["plain", "poison"]
    assert _bodies(sqs, dlq) == ["expired"]  # visible now, not hidden for a minute


def test_include_lease_expired_moves_them_too(sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    source = sqs.create_queue(QueueName="source")["QueueUrl"]
    _quarantined(sqs, dlq, "expired", "LEASE_EXPIRED")
    sqs.send_message(QueueUrl=dlq, MessageBody="plain")

    done = move(sqs, dlq, source, include_lease_expired=True)

    assert (done.moved, done.lease_expired_left) == (2, 0)
    assert _bodies(sqs, source) == ["expired", "plain"]
    assert _bodies(sqs, dlq) == []


def test_max_counts_moved_messages_not_the_ones_left(sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    source = sqs.create_queue(QueueName="source")["QueueUrl"]
    _quarantined(sqs, dlq, "expired", "LEASE_EXPIRED")
    for n in range(3):
        sqs.send_message(QueueUrl=dlq, MessageBody=f"plain {n}")

    assert move(sqs, dlq, source, 2).moved == 2
    assert len(_bodies(sqs, source)) == 2
