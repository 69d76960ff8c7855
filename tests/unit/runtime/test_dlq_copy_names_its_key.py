"""A DLQ copy names the business key its body yielded (``once.key``), so that ``once dlq``
lists it and ``once inspect KEY`` can be run on it; a body that yielded none (``INVALID_JSON``,
``INVALID_KEY``) has none. A key holding a character SQS refuses in a String value is written
with ``\\uXXXX`` (the SQS rule: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html),
and a redriven copy's earlier ``once.key`` is once's own, never carried as the team's."""

from __future__ import annotations

from typing import Any

from once import constants as c
from once import sendrules as rules
from once.quarantine import Quarantine

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-dlq"


def record(attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "body": '{"orderId": "o-1"}',
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": attributes or {},
    }


def attributes(key: str | None, incoming: dict[str, Any] | None = None) -> dict[str, Any]:
    request = Quarantine._request(URL, record(incoming), "PERMANENT_ERROR", "E", None, key=key)
    result: dict[str, Any] = request["MessageAttributes"]
    return result


def test_a_keyed_copy_names_its_key() -> None:
    assert attributes("o-1")[c.QUARANTINE_ATTR_KEY] == {"DataType": "String", "StringValue": "o-1"}


def test_a_copy_without_a_key_names_none() -> None:
    assert c.QUARANTINE_ATTR_KEY not in attributes(None)


def test_a_key_sqs_would_refuse_is_escaped_so_the_copy_is_sent() -> None:
    value = attributes("o\x0c1\ud800")[c.QUARANTINE_ATTR_KEY]["StringValue"]
    assert rules.text_taken(value, to_topic=False)
    assert value == "o\\u000c1\\ud800"


def test_a_redriven_copys_earlier_key_is_replaced_not_carried() -> None:
    earlier = {c.QUARANTINE_ATTR_KEY: {"dataType": "String", "stringValue": "old"}}
    carried = attributes("o-1", earlier)
    assert carried[c.QUARANTINE_ATTR_KEY]["StringValue"] == "o-1"
    assert c.QUARANTINE_ATTR_DROPPED not in carried
