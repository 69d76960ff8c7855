"""DynamoDB calls per record, counted as requests leave the idempotency table's client:
a new key costs 2, a duplicate 1, a duplicate inside the same batch 0. The application
never deletes a record."""

from __future__ import annotations

from typing import Any

import pytest

from once import PermanentError
from once.models import Outcome
from tests.conftest import Calls, count_calls, outcomes, store_client
from tests.unit.runtime.test_outcome_table import claim_elsewhere

ORDER = {"orderId": "o-1", "qty": 1}


@pytest.fixture
def wired(aws, once_handler, spy) -> tuple[Any, Calls]:
    handler = once_handler(spy)
    return handler, count_calls(store_client(handler))


def test_a_new_key_costs_two_calls(wired, sqs_event) -> None:
    handler, calls = wired
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert calls.count == {"UpdateItem": 2}


def test_a_duplicate_costs_one_call(wired, sqs_event) -> None:
    handler, calls = wired
    handler(sqs_event([ORDER]), None)
    calls.reset()
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.DUPLICATE]
    assert calls.count == {"UpdateItem": 1}


def test_a_duplicate_in_the_same_batch_costs_nothing(wired, sqs_event) -> None:
    handler, calls = wired
    outcomes(handler, sqs_event([ORDER]))
    single = len(calls)
    calls.reset()
    assert outcomes(handler, sqs_event([{"orderId": "o-2"}] * 4)) == (
        [Outcome.PROCESSED] + [Outcome.DUPLICATE] * 3
    )
    assert len(calls) == single == 2


def test_a_busy_key_costs_one_call(aws, wired, sqs_event) -> None:
    handler, calls = wired
    claim_elsewhere(aws, ORDER)
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.BUSY]
    assert calls.count == {"UpdateItem": 1}


def test_a_conflict_costs_one_call(wired, sqs_event) -> None:
    handler, calls = wired
    handler(sqs_event([ORDER]), None)
    calls.reset()
    assert outcomes(handler, sqs_event([ORDER | {"qty": 2}])) == [Outcome.CONFLICT]
    assert calls.count == {"UpdateItem": 1}


def test_an_unreadable_body_costs_nothing(wired, sqs_event) -> None:
    handler, calls = wired
    assert outcomes(handler, sqs_event(["not json", "{}"])) == [Outcome.QUARANTINED] * 2
    assert len(calls) == 0


def test_a_failure_costs_two_calls(aws, once_handler, sqs_event) -> None:
    def broken(body: Any, attempt: Any) -> None:
        raise PermanentError("no")

    handler = once_handler(broken)
    calls = count_calls(store_client(handler))
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.QUARANTINED]
    assert calls.count == {"UpdateItem": 2}


def test_no_record_is_ever_deleted_or_overwritten_whole(
    aws, once_handler, sqs_event, clock
) -> None:
    fail_first = iter([True, False, False, False])

    def business(body: Any, attempt: Any) -> str:
        if next(fail_first, False):
            raise RuntimeError("once")
        return "ok"

    handler = once_handler(business, clock=clock, retention_s=60)
    calls = count_calls(store_client(handler))
    for step in range(6):
        handler(sqs_event([ORDER, ORDER, ORDER | {"qty": 2}, "bad"]), None)
        if step == 3:
            clock.advance(61)  # expire it: re-claimed, never deleted
    assert set(calls.count) == {"UpdateItem"}
    assert aws.record("o-1")["fence"] == 3
