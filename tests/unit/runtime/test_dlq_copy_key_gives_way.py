"""``once.key`` gives way when a DLQ copy is over SQS's message size (body and attributes
together take at most 1 MiB:
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html):
a copy that fits without it is quarantined without it, never refused (proved by the
adversarial review of issue 42: the key never gave way, and such a message was retried to the
DLQ without once's attributes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from once import sendrules as rules
from once.quarantine import Quarantine

REASON, ERROR = "PERMANENT_ERROR", "PermanentError: refused"
KEY = "order-" + "k" * 900  # a key within once's MAX_KEY_BYTES (1024)


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def record(body: str) -> dict[str, Any]:
    return {
        "messageId": "3f1d0c8e-9f57-4e27-9e2e-3c8b9f0d1a11",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
    }


def body_that_fits_only_without_the_key(url: str) -> str:
    """A body whose copy fits SQS's 1 MiB with once's attributes, but not with ``once.key``."""
    base = Quarantine._request(url, record(""), REASON, ERROR, None, key=None)
    room = rules.SQS_MESSAGE_MAX_BYTES - rules.request_message_bytes("", base["MessageAttributes"])
    return '{"orderId": "' + KEY + '", "pad": "' + "x" * (room - 200 - len(KEY) - 30) + '"}'


def test_a_copy_that_fits_only_without_its_key_is_quarantined_without_it(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
    body = body_that_fits_only_without_the_key(url)
    with_key = Quarantine._request(url, record(body), REASON, ERROR, None, key=KEY)
    assert rules.request_message_bytes(body, with_key["MessageAttributes"]) <= (
        rules.SQS_MESSAGE_MAX_BYTES
    )
    assert "once.key" not in with_key["MessageAttributes"]
    assert with_key["MessageAttributes"]["once.error"]["StringValue"] == ERROR
    small = Quarantine._request(url, record('{"orderId": "o"}'), REASON, ERROR, None, key=KEY)
    assert small["MessageAttributes"]["once.key"]["StringValue"] == KEY

    quarantine = Quarantine(sqs, url)
    assert quarantine.send(record(body), REASON, ERROR, key=None)  # as before commit 0e949e7
    sent = quarantine.send(record(body), REASON, ERROR, key=KEY)
    assert sent, (
        f"the DLQ copy is refused ({sent.error}): once.key, a convenience for `once dlq`, "
        "never gives way, so a message the quarantine took before is no longer quarantined"
    )
