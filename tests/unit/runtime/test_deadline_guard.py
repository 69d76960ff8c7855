"""The deadline guard: with less than ``min_remaining_ms`` left in the invocation a record is
not claimed (it is reported failed, unclaimed, with no write to the table), and no DLQ send
is started (the message comes back and is quarantined then)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from once.models import Outcome
from tests.conftest import Calls, count_calls, failed_ids, message_ids, outcomes, store_client

ORDER = {"orderId": "o-1", "qty": 1}


def test_a_record_is_not_claimed_when_too_little_time_remains(
    aws, once_handler, spy, sqs_event, context
) -> None:
    handler = once_handler(spy, min_remaining_ms=500)
    calls: Calls = count_calls(store_client(handler))
    event = sqs_event([ORDER, {"orderId": "o-2"}])

    response = handler(event, context(remaining_ms=499))

    assert failed_ids(response) == message_ids(event)
    assert spy.calls == []
    assert len(calls) == 0
    assert aws.records() == []


def test_exactly_the_minimum_remaining_is_enough(
    aws, once_handler, spy, sqs_event, context
) -> None:
    handler = once_handler(spy, min_remaining_ms=500)
    assert handler(sqs_event([ORDER]), context(remaining_ms=500)) == {"batchItemFailures": []}
    assert len(spy.calls) == 1


def test_the_default_minimum_is_half_a_second(aws, once_handler, spy, sqs_event, context) -> None:
    assert outcomes(once_handler(spy), sqs_event([ORDER]), context(remaining_ms=499)) == [
        Outcome.DEADLINE
    ]


def test_records_reached_after_time_runs_out_in_a_batch_are_left_unclaimed(
    aws, once_handler, spy, sqs_event, context
) -> None:
    def countdown() -> Iterator[int]:
        remaining = 10_000
        while True:
            yield remaining
            remaining -= 1_500

    ticks = countdown()
    event = sqs_event([{"orderId": f"o-{i}"} for i in range(6)], fifo_groups=["g"] * 6)
    handler = once_handler(spy, min_remaining_ms=5_000)

    # Each record asks twice (guard, then lease): 10.0 s, 7.0 s, then 4.0 s < 5 s.
    result = outcomes(handler, event, context(remaining_ms=lambda: next(ticks)))

    assert result[:2] == [Outcome.PROCESSED] * 2
    assert result[2] is Outcome.DEADLINE
    assert result[3:] == [Outcome.SKIPPED] * 3  # FIFO: the rest of the group waits its turn
    assert spy.keys == ["o-0", "o-1"]
    assert aws.record("o-2") is None


def test_quarantine_sends_stop_when_too_little_time_remains(
    aws, once_handler, spy, sqs_event, context
) -> None:
    # 30 bodies that are not JSON, one DLQ send each; each send takes 50 ms of 1,000 ms left.
    left_ms = [1_000]
    left_at_each_send: list[int] = []
    handler = once_handler(spy, min_remaining_ms=500)

    def takes_50_ms(**_: Any) -> None:
        left_at_each_send.append(left_ms[0])
        left_ms[0] -= 50

    handler.processor._quarantine._client.meta.events.register(
        "before-call.sqs.SendMessage", takes_50_ms
    )
    event = sqs_event(["not json"] * 30)

    result = handler.handle(event, context(lambda: left_ms[0]))

    sent = len(left_at_each_send)
    assert min(left_at_each_send) >= 500
    assert [r.outcome for r in result.records] == (
        [Outcome.QUARANTINED] * sent + [Outcome.DEADLINE] * (30 - sent)
    )
    assert len(aws.dlq()) == sent  # acknowledged = in the DLQ; the rest come back
    assert failed_ids(result.response) == message_ids(event)[sent:]
