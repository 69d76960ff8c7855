"""``Handler.handle``: each record's result, in the order of the event, beside the partial
batch response that Lambda gets from ``__call__``."""

from __future__ import annotations

from typing import Any

from once import PermanentError
from once import constants as c
from once.models import BatchResult, Outcome, RecordResult
from tests.conftest import failed_ids, message_ids
from tests.unit.runtime.test_outcome_table import claim_elsewhere


def business(body: Any, attempt: Any) -> str:
    if body.get("permanent"):
        raise PermanentError("not sold any more")
    if body.get("fail"):
        raise RuntimeError("warehouse offline")
    return "ok"


def test_records_come_back_in_the_event_order_whatever_order_they_ran_in(
    aws, once_handler, sqs_event
) -> None:
    # Unreadable records and each key's copies run as separate units, in another order.
    event = sqs_event(
        [
            {"orderId": "a"},
            "not json",
            {"orderId": "b", "fail": True},
            {"orderId": "a"},
            {"orderId": "c", "permanent": True},
            {"orderId": "b", "fail": True},
        ]
    )

    result = once_handler(business).handle(event, None)

    assert isinstance(result, BatchResult)
    assert [r.message_id for r in result.records] == message_ids(event)
    assert [(r.outcome, r.key) for r in result.records] == [
        (Outcome.PROCESSED, "a"),
        (Outcome.QUARANTINED, None),
        (Outcome.FAILED, "b"),
        (Outcome.DUPLICATE, "a"),
        (Outcome.QUARANTINED, "c"),
        (Outcome.FAILED, "b"),
    ]
    assert [r.reason for r in result.records] == [
        None,
        c.REASON_INVALID_JSON,
        "RuntimeError",
        None,
        c.REASON_PERMANENT_ERROR,
        "RuntimeError",
    ]
    assert failed_ids(result.response) == [message_ids(event)[2], message_ids(event)[5]]


def test_fifo_groups_that_share_a_key_come_back_in_the_event_order(
    aws, once_handler, sqs_event
) -> None:
    event = sqs_event(
        [{"orderId": "x"}, {"orderId": "y"}, {"orderId": "x"}, {"orderId": "z"}],
        fifo_groups=["g1", "g2", "g3", "g1"],
    )

    result = once_handler(business).handle(event, None)

    assert [r.message_id for r in result.records] == message_ids(event)
    assert [r.outcome for r in result.records] == [
        Outcome.PROCESSED,
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PROCESSED,
    ]


def test_a_result_carries_the_fence_and_the_takeover_of_its_claim(
    aws, once_handler, sqs_event, clock
) -> None:
    claim_elsewhere(aws, {"orderId": "o-1"}, clock=clock, lease_ms=1_000)
    clock.advance(2)

    [taken_over] = (
        once_handler(business, clock=clock).handle(sqs_event([{"orderId": "o-1"}]), None).records
    )

    assert (taken_over.outcome, taken_over.key, taken_over.fence, taken_over.takeover) == (
        Outcome.PROCESSED,
        "o-1",
        2,
        True,
    )


def test_calling_the_handler_returns_the_response_of_handle(aws, once_handler, sqs_event) -> None:
    handler = once_handler(business)
    event = sqs_event([{"orderId": "o-1", "fail": True}, {"orderId": "o-2"}])

    assert handler(event, None) == {
        "batchItemFailures": [{"itemIdentifier": message_ids(event)[0]}]
    }
    # The redelivery: o-1 fails again, o-2 is now a duplicate; same response from both.
    assert handler(event, None) == handler.handle(event, None).response


def test_a_batch_aborted_by_a_bug_reports_every_record_failed_with_the_error_class(
    aws, once_handler, sqs_event, monkeypatch
) -> None:
    handler = once_handler(business)

    def broken(records: Any, context: Any) -> None:
        raise KeyError("bug")

    monkeypatch.setattr(handler.processor, "run", broken)
    event = sqs_event([{"orderId": "o-1"}, {"orderId": "o-2"}])

    result = handler.handle(event, None)

    assert result.records == tuple(
        RecordResult(m, Outcome.FAILED, reason="KeyError", internal_error=True)
        for m in message_ids(event)
    )
    assert failed_ids(result.response) == message_ids(event)


def test_the_response_lists_exactly_the_records_neither_done_nor_in_the_dlq() -> None:
    every = [RecordResult(f"m-{o.value}", o) for o in Outcome]

    response = BatchResult(tuple(every)).response

    assert failed_ids(response) == [r.message_id for r in every if not r.outcome.acknowledged]
    assert set(failed_ids(response)) == {
        f"m-{o}" for o in ("busy", "failed", "lease_lost", "deadline", "skipped", "owed")
    }
