"""An outbox send that fails says why (``Outbox.send`` returns ``once.awserrors.Sent``): the
error's class and AWS's code, or the first failed entry's code; never a value of the
message; and it never raises. Also: the batches follow each service's payload limit, counted
as AWS counts it (bodies and attributes' names, types and values)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from once import constants as c
from once.awserrors import SENT, Sent
from once.effects import OutboxMessage
from once.outbox import Outbox, _batches
from once.sendrules import SNS_BATCH_MAX_BYTES, SQS_BATCH_MAX_BYTES, attribute_bytes

REGION = "us-east-1"
SOURCE = "payments#p-1"
SECRET = "card-4111-1111"  # a value of the message no failure may quote
TOPIC = "arn:aws:sns:us-east-1:123456789012:notify"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"


def message(destination: str = QUEUE, body: str = SECRET) -> OutboxMessage:
    return OutboxMessage(
        destination=destination, body=body, attributes=(("note", "String", SECRET),)
    )


class Stub:
    """A client whose batch call raises ``error`` or answers ``response``."""

    def __init__(self, *, error: Exception | None = None, response: Any = None) -> None:
        self.error, self.response = error, response
        self.calls = 0

    def _call(self, **_: Any) -> Any:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.response

    send_message_batch = publish_batch = _call


def access_denied(operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "AccessDenied", "Message": f"not allowed to send {SECRET}"}},
        operation,
    )


def test_a_send_to_a_queue_that_does_not_exist_says_so() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        sent = Outbox(lambda service: sqs).send(SOURCE, [message()])
    assert not sent
    assert sent.ok is False
    # botocore's modeled exception, with SQS's code (the JSON protocol's, or the query one's).
    assert sent.error in (
        "QueueDoesNotExist (AWS.SimpleQueueService.NonExistentQueue, HTTP 400)",
        "QueueDoesNotExist (QueueDoesNotExist, HTTP 400)",
    )
    assert SECRET not in (sent.error or "")


@pytest.mark.parametrize(
    ("destination", "operation"), [(QUEUE, "SendMessageBatch"), (TOPIC, "PublishBatch")]
)
def test_an_access_denied_send_says_so_without_its_message(
    destination: str, operation: str
) -> None:
    stub = Stub(error=access_denied(operation))
    sent = Outbox(lambda service: stub).send(SOURCE, [message(destination)])
    assert sent == Sent(False, "ClientError (AccessDenied)")
    assert stub.calls == 1


@pytest.mark.parametrize("destination", [QUEUE, TOPIC])
def test_a_batch_with_a_failed_entry_says_its_code_never_its_message(destination: str) -> None:
    failed = {"Id": "0", "SenderFault": True, "Code": "InvalidParameterValue", "Message": SECRET}
    stub = Stub(response={"Successful": [], "Failed": [failed]})
    sent = Outbox(lambda service: stub).send(SOURCE, [message(destination)])
    assert sent == Sent(False, "Failed InvalidParameterValue")


def test_the_first_failed_entry_is_the_one_named() -> None:
    response = {
        "Successful": [{"Id": "1"}],
        "Failed": [
            {"Id": "0", "SenderFault": False, "Code": "InternalError", "Message": SECRET},
            {"Id": "2", "SenderFault": True, "Code": "InvalidParameterValue"},
        ],
    }
    stub = Stub(response=response)
    sent = Outbox(lambda service: stub).send(SOURCE, [message(), message(), message()])
    assert sent == Sent(False, "Failed InternalError")


def test_a_batch_answered_with_too_few_successes_is_not_sent() -> None:
    stub = Stub(response={"Successful": [{"Id": "0"}], "Failed": []})
    sent = Outbox(lambda service: stub).send(SOURCE, [message(), message()])
    assert sent == Sent(False, "Successful 1 of 2")


def test_an_error_that_is_not_aws_answer_is_named_by_its_class() -> None:
    stub = Stub(error=TimeoutError(SECRET))
    sent = Outbox(lambda service: stub).send(SOURCE, [message()])
    assert sent == Sent(False, "TimeoutError")


def test_a_client_that_cannot_be_built_is_a_failed_send_not_a_raise() -> None:
    def no_client(service: str) -> Any:
        raise RuntimeError(SECRET)

    assert Outbox(no_client).send(SOURCE, [message()]) == Sent(False, "RuntimeError")


def test_a_failed_batch_stops_the_send_before_the_next_batch() -> None:
    stub = Stub(error=access_denied("SendMessageBatch"))
    sent = Outbox(lambda service: stub).send(SOURCE, [message() for _ in range(11)])
    assert not sent
    assert stub.calls == 1


def test_a_send_that_goes_through_is_sent() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="notify")["QueueUrl"]
        sent = Outbox(lambda service: sqs).send(SOURCE, [message(url), message(url)])
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sent == SENT
    assert sent
    assert len(received) == 2


def test_nothing_owed_is_sent() -> None:
    assert Outbox(lambda service: Stub()).send(SOURCE, []) == SENT


# --- the batches' payload limits ---------------------------------------------------------------


def entry_bytes(seq: int, m: OutboxMessage) -> int:
    """What AWS counts for message ``seq``: the body and each attribute's name, type, value
    (once's own two included)."""
    size = len(m.body.encode("utf-8")) + sum(attribute_bytes(*a) for a in m.attributes)
    size += attribute_bytes(c.OUTBOX_ATTR_SOURCE, "String", SOURCE)
    return size + attribute_bytes(c.OUTBOX_ATTR_SEQ, "Number", str(seq))


def test_sqs_batches_take_up_to_1_mib_since_the_2025_limit() -> None:
    messages = [OutboxMessage(QUEUE, "x" * 300_000) for _ in range(4)]
    batches = _batches(SOURCE, messages)
    assert [len(batch) for _, batch in batches] == [3, 1]  # 3 x 300 kB fit in 1 MiB, not 4
    assert SQS_BATCH_MAX_BYTES == 1024 * 1024


def test_sns_batches_take_up_to_256_kib() -> None:
    messages = [OutboxMessage(TOPIC, "x" * 100_000) for _ in range(3)]
    assert [len(batch) for _, batch in _batches(SOURCE, messages)] == [2, 1]
    assert SNS_BATCH_MAX_BYTES == 256 * 1024


@pytest.mark.parametrize(
    ("destination", "limit"), [(QUEUE, SQS_BATCH_MAX_BYTES), (TOPIC, SNS_BATCH_MAX_BYTES)]
)
def test_a_batch_counts_attributes_as_aws_counts_them(destination: str, limit: int) -> None:
    attributes = (("note", "String", "n" * 100), ("raw", "Binary", b"\x00" * 50))
    first = OutboxMessage(destination, "a", attributes=attributes)
    overhead = entry_bytes(1, OutboxMessage(destination, "", attributes=attributes))
    # The second message's body fills the batch exactly with the first: one batch...
    exact = OutboxMessage(
        destination, "b" * (limit - entry_bytes(0, first) - overhead), attributes=attributes
    )
    assert [len(b) for _, b in _batches(SOURCE, [first, exact])] == [2]
    # ... and one byte more splits it: the attributes were counted.
    over = OutboxMessage(destination, exact.body + "b", attributes=attributes)
    assert [len(b) for _, b in _batches(SOURCE, [first, over])] == [1, 1]
