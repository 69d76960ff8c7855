"""The quarantine fast path: a permanent failure is acknowledged only once its copy is in
the DLQ, with the reason in message attributes and the message's own attributes kept."""

from __future__ import annotations

import base64
from typing import Any

from once import PermanentError
from once import constants as c
from once.models import Outcome
from tests.conftest import failed_ids, message_ids, outcomes


def reject(body: Any, attempt: Any) -> None:
    raise PermanentError("cannot ship")


def test_a_failed_dlq_send_is_reported_failed_not_acknowledged(
    aws, once_handler, sqs_event
) -> None:
    handler = once_handler(reject, dlq_url=aws.missing_queue_url)
    event = sqs_event([{"orderId": "o-1"}, "not json", {"orderId": "o-2"}])

    assert outcomes(handler, event) == [Outcome.FAILED] * 3
    assert sorted(failed_ids(handler(event, None))) == sorted(message_ids(event))


def test_without_a_dlq_a_permanent_failure_is_reported_failed(aws, once_handler, sqs_event) -> None:
    handler = once_handler(reject, dlq_url=None)
    event = sqs_event([{"orderId": "o-1"}, "{}"])

    assert sorted(failed_ids(handler(event, None))) == sorted(message_ids(event))
    assert aws.record("o-1")["status"] == c.STATUS_FAILED  # its retry may claim it again
    assert aws.dlq() == []


def test_a_permanent_failure_retried_after_a_failed_send_reaches_the_dlq(
    aws, once_handler, sqs_event
) -> None:
    event = sqs_event([{"orderId": "o-1"}])
    assert failed_ids(once_handler(reject, dlq_url=None)(event, None)) == message_ids(event)

    assert once_handler(reject)(event, None) == {"batchItemFailures": []}
    assert len(aws.dlq()) == 1


def test_the_dlq_copy_keeps_the_body_and_the_messages_own_attributes(
    aws, once_handler, sqs_event
) -> None:
    own = {
        "tenant": {
            "stringValue": "acme",
            "dataType": "String",
            "stringListValues": [],
            "binaryListValues": [],
        },
        "priority": {
            "stringValue": "3",
            "dataType": "Number",
            "stringListValues": [],
            "binaryListValues": [],
        },
        "signature": {
            "binaryValue": base64.b64encode(b"\x00\x01\xfe").decode(),
            "dataType": "Binary",
            "stringListValues": [],
            "binaryListValues": [],
        },
    }
    event = sqs_event(["not json"], message_attributes=own)

    once_handler(reject)(event, None)

    [dead] = aws.dlq()
    attributes = dead["MessageAttributes"]
    assert dead["Body"] == "not json"
    assert attributes["tenant"] == {"StringValue": "acme", "DataType": "String"}
    assert attributes["priority"] == {"StringValue": "3", "DataType": "Number"}
    assert attributes["signature"] == {"BinaryValue": b"\x00\x01\xfe", "DataType": "Binary"}
    assert attributes[c.QUARANTINE_ATTR_MESSAGE_ID]["StringValue"] == message_ids(event)[0]
    assert attributes[c.QUARANTINE_ATTR_REASON]["StringValue"] == "INVALID_JSON"
    assert attributes[c.QUARANTINE_ATTR_ERROR]["StringValue"].startswith("body is not JSON")


def test_the_dlq_copy_stays_within_the_ten_attributes_sqs_allows(
    aws, once_handler, sqs_event
) -> None:
    own = {f"a{i}": {"stringValue": str(i), "dataType": "String"} for i in range(10)}
    event = sqs_event(["not json"], message_attributes=own)

    assert once_handler(reject)(event, None) == {"batchItemFailures": []}

    [dead] = aws.dlq()
    names = set(dead["MessageAttributes"])
    assert len(names) == 10
    assert {
        c.QUARANTINE_ATTR_MESSAGE_ID,
        c.QUARANTINE_ATTR_REASON,
        c.QUARANTINE_ATTR_ERROR,
    } <= names


def test_a_body_too_large_for_the_dlq_with_our_attributes_is_reported_failed_not_lost(
    aws, once_handler, sqs_event
) -> None:
    # SQS counts message attributes toward its size limit: a body close to the limit plus
    # the quarantine's attributes is refused. Nothing is acknowledged; the queue's own
    # redrive moves the original message after maxReceiveCount receives.
    small = aws.sqs.create_queue(QueueName="small-dlq", Attributes={"MaximumMessageSize": "1024"})
    event = sqs_event(["x" * 2_000])

    response = once_handler(reject, dlq_url=small["QueueUrl"])(event, None)

    assert failed_ids(response) == message_ids(event)
    assert aws.dlq(small["QueueUrl"]) == []


def test_a_redriven_message_quarantined_again_still_points_at_the_producers_message(
    aws, once_handler, sqs_event
) -> None:
    first = sqs_event(["not json"])
    once_handler(reject)(first, None)
    [dead] = aws.dlq()
    # Redriven from the DLQ, it comes back with a new message id and the DLQ's attributes.
    redriven = sqs_event(
        [dead["Body"]],
        message_attributes={
            name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
            for name, value in dead["MessageAttributes"].items()
        },
    )

    assert once_handler(reject)(redriven, None) == {"batchItemFailures": []}

    [again] = aws.dlq()
    attributes = {k: v["StringValue"] for k, v in again["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_MESSAGE_ID] == message_ids(first)[0]
    assert attributes[c.QUARANTINE_ATTR_REASON] == c.REASON_INVALID_JSON
