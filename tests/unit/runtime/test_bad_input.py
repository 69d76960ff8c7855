"""The bad-input corpus: bodies that can never yield a business key are quarantined to the
DLQ at once with their reason, acknowledged, never handed to business code, never written
to the table; and nothing is lost on the way."""

from __future__ import annotations

import json

import pytest

from once import constants as c
from once.models import Outcome
from tests.conftest import Calls, count_calls, failed_ids, message_ids, outcomes, store_client

HUGE = 200 * 1024

CORPUS = {
    "not-json": ("this is not json", "INVALID_JSON"),
    "truncated-json": ('{"orderId": "o-1"', "INVALID_JSON"),
    "deeply-nested": ("[" * 100_000, "INVALID_JSON"),
    "deeply-nested-beside-a-key": (
        '{"orderId": "o-1", "x": ' + "[" * 5_000 + "]" * 5_000 + "}",
        "INVALID_JSON",
    ),
    "huge-not-json": ("x" * HUGE, "INVALID_JSON"),
    "json-null": ("null", "INVALID_KEY"),
    "empty-object": ("{}", "INVALID_KEY"),
    "null-key": ('{"orderId": null}', "INVALID_KEY"),
    "empty-string-key": ('{"orderId": ""}', "INVALID_KEY"),
    "object-key": ('{"orderId": {"id": "o-1"}}', "INVALID_KEY"),
    "array-key": ('{"orderId": ["o-1"]}', "INVALID_KEY"),
    "bool-key": ('{"orderId": true}', "INVALID_KEY"),
    "float-key": ('{"orderId": 1.5}', "INVALID_KEY"),
    "body-is-an-array": ('[{"orderId": "o-1"}]', "INVALID_KEY"),
    "body-is-a-string": ('"o-1"', "INVALID_KEY"),
    "body-is-a-number": ("42", "INVALID_KEY"),
    "huge-without-key": (json.dumps({"padding": "p" * HUGE}), "INVALID_KEY"),
}


@pytest.mark.parametrize(("body", "reason"), CORPUS.values(), ids=CORPUS.keys())
def test_a_body_without_a_usable_key_is_quarantined_and_never_run(
    aws, once_handler, spy, sqs_event, body: str, reason: str
) -> None:
    handler = once_handler(spy)
    calls: Calls = count_calls(store_client(handler))
    event = sqs_event([body])

    assert handler(event, None) == {"batchItemFailures": []}

    assert spy.calls == []
    assert len(calls) == 0
    assert aws.records() == []
    [dead] = aws.dlq()
    assert dead["Body"] == body
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_REASON] == reason
    assert attributes[c.QUARANTINE_ATTR_MESSAGE_ID] == message_ids(event)[0]
    assert len(attributes[c.QUARANTINE_ATTR_ERROR]) <= c.ERROR_MAX_CHARS


def test_an_empty_body_which_sqs_never_delivers_is_never_run_nor_acknowledged(
    aws, once_handler, spy, sqs_event
) -> None:
    # SQS takes no empty body ("The minimum size is one character", SendMessage), so no
    # record holds one; if one came, its DLQ copy would be refused as well (MissingParameter):
    # it is reported failed, never acknowledged, and business code never sees it.
    event = sqs_event([""])
    assert failed_ids(once_handler(spy)(event, None)) == message_ids(event)
    assert spy.calls == []
    assert aws.records() == []
    assert aws.dlq() == []


def test_bad_bodies_do_not_hold_up_the_good_ones_in_their_batch(
    aws, once_handler, spy, sqs_event
) -> None:
    good = [{"orderId": f"o-{i}", "qty": i} for i in range(3)]
    bad = [body for body, _ in CORPUS.values()]
    event = sqs_event(bad[:5] + good + bad[5:])

    assert outcomes(once_handler(spy), event).count(Outcome.QUARANTINED) == len(bad)
    assert sorted(spy.keys) == ["o-0", "o-1", "o-2"]
    assert len(aws.dlq()) == len(bad)

    redelivered = sqs_event(bad + good)
    assert once_handler(spy)(redelivered, None) == {"batchItemFailures": []}
    assert len(spy.calls) == 3  # the good ones are duplicates now


def test_an_integer_key_is_a_business_key(aws, once_handler, spy, sqs_event) -> None:
    assert once_handler(spy)(sqs_event([{"orderId": 7}]), None) == {"batchItemFailures": []}
    assert aws.record(7)["status"] == c.STATUS_COMPLETED


def test_a_huge_valid_body_is_processed_like_any_other(aws, once_handler, spy, sqs_event) -> None:
    body = {"orderId": "o-big", "notes": "n" * HUGE}
    assert once_handler(spy)(sqs_event([body]), None) == {"batchItemFailures": []}
    assert spy.calls[0][0] == body


def test_nothing_is_lost_when_the_dlq_refuses_a_bad_body(aws, once_handler, spy, sqs_event) -> None:
    handler = once_handler(spy, dlq_url=aws.missing_queue_url)
    event = sqs_event(["not json", "{}", {"orderId": "o-1"}])

    response = handler(event, None)

    assert failed_ids(response) == message_ids(event)[:2]  # retried, then redriven by SQS
    assert spy.keys == ["o-1"]
