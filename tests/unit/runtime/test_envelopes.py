"""Envelopes: ``envelope=`` unwraps the body (SNS->SQS, EventBridge->SQS, encoded payloads)
before the key, the validation and business code see it, with Powertools' JMESPath
functions. A body the envelope does not match is that body's bad input."""

from __future__ import annotations

import base64
import gzip
import json
import uuid
from typing import Any

from once import constants as c
from once.models import Outcome
from tests.conftest import Spy, message_ids, outcomes

ORDER = {"orderId": "o-1", "item": "book", "qty": 1}


def sns(payload: Any) -> dict[str, Any]:
    """What SQS receives from an SNS subscription without raw message delivery."""
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
        "Message": json.dumps(payload),
        "Timestamp": f"2026-01-01T00:00:{uuid.uuid4().int % 60:02d}.000Z",
        "SignatureVersion": "1",
        "Signature": base64.b64encode(uuid.uuid4().bytes).decode(),
    }


def eventbridge(detail: Any) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "OrderPlaced",
        "source": "shop.orders",
        "time": "2026-01-01T00:00:00Z",
        "detail": detail,
    }


def test_the_same_payload_published_twice_through_sns_is_a_duplicate_the_second_time(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy, envelope="powertools_json(Message)")
    first, second = sns(ORDER), sns(ORDER)  # two SNS message ids and timestamps
    assert first["MessageId"] != second["MessageId"]

    assert outcomes(handler, sqs_event([first])) == [Outcome.PROCESSED]
    assert outcomes(handler, sqs_event([second])) == [Outcome.DUPLICATE]

    assert [body for body, _ in spy.calls] == [ORDER]  # business code sees the inner payload
    assert aws.record("o-1")["status"] == c.STATUS_COMPLETED


def test_another_payload_under_the_same_key_inside_the_envelope_is_a_conflict(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy, envelope="powertools_json(Message)")
    handler(sqs_event([sns(ORDER)]), None)

    assert outcomes(handler, sqs_event([sns(ORDER | {"qty": 2})])) == [Outcome.CONFLICT]
    assert len(spy.calls) == 1


def test_an_eventbridge_detail_is_unwrapped(aws, once_handler, spy, sqs_event) -> None:
    handler = once_handler(spy, envelope="detail")
    event = sqs_event([eventbridge(ORDER), eventbridge(ORDER)])

    assert outcomes(handler, event) == [Outcome.PROCESSED, Outcome.DUPLICATE]
    assert [body for body, _ in spy.calls] == [ORDER]


def test_a_gzipped_base64_payload_is_unwrapped(aws, once_handler, spy, sqs_event) -> None:
    data = base64.b64encode(gzip.compress(json.dumps(ORDER).encode())).decode()
    handler = once_handler(spy, envelope="powertools_json(powertools_base64_gzip(data))")

    assert outcomes(handler, sqs_event([{"data": data}])) == [Outcome.PROCESSED]
    assert [body for body, _ in spy.calls] == [ORDER]


def test_a_body_the_envelope_does_not_match_is_quarantined_and_the_batch_goes_on(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy, envelope="powertools_json(Message)")
    unwrapped_by_mistake = ORDER  # raw delivery on: no Message
    not_json_inside = sns(ORDER) | {"Message": "{not json"}
    not_a_string = sns(ORDER) | {"Message": 42}
    event = sqs_event([unwrapped_by_mistake, sns(ORDER), not_json_inside, not_a_string])

    assert handler(event, None) == {"batchItemFailures": []}

    assert [body for body, _ in spy.calls] == [ORDER]
    dead = aws.dlq()
    reasons = {
        m["MessageAttributes"][c.QUARANTINE_ATTR_MESSAGE_ID]["StringValue"]: m["MessageAttributes"][
            c.QUARANTINE_ATTR_REASON
        ]["StringValue"]
        for m in dead
    }
    ids = message_ids(event)
    assert reasons == {
        ids[0]: "INVALID_ENVELOPE",
        ids[2]: "INVALID_ENVELOPE",
        ids[3]: "INVALID_ENVELOPE",
    }
    for message in dead:
        error = message["MessageAttributes"][c.QUARANTINE_ATTR_ERROR]["StringValue"]
        assert "book" not in error


def test_without_an_envelope_the_key_and_the_hash_see_the_whole_body(
    aws, once_handler, sqs_event
) -> None:
    spy = Spy(lambda body, attempt: "ok")
    handler = once_handler(spy, key="detail.orderId")

    assert outcomes(handler, sqs_event([eventbridge(ORDER), eventbridge(ORDER)])) == [
        Outcome.PROCESSED,
        Outcome.CONFLICT,  # two envelopes differ (ids), though the detail is the same
    ]
