"""``effects="staged"`` on the paths the two-phase mode has always had: envelopes, the retry
backoff, the deadline guard and bad input. The staged mode changes how a record commits,
not what reaches business code, when a failed record comes back, or what is acknowledged."""

from __future__ import annotations

from once import constants as c
from once.models import Outcome
from tests.conftest import count_calls, failed_ids, message_ids, outcomes
from tests.unit.runtime.test_backoff import changes, fail_some, received
from tests.unit.runtime.test_envelopes import ORDER, sns


def test_the_same_payload_published_twice_through_sns_commits_once(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy, envelope="powertools_json(Message)", effects="staged")

    assert outcomes(handler, sqs_event([sns(ORDER)])) == [Outcome.PROCESSED]
    assert outcomes(handler, sqs_event([sns(ORDER)])) == [Outcome.DUPLICATE]

    # Business code saw the inner payload both times (no claim stops a copy in this mode);
    # the record committed once.
    assert [body for body, _ in spy.calls] == [ORDER, ORDER]
    record = aws.record("o-1")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)


def test_a_failed_staged_record_comes_back_after_the_backoff(aws, once_handler) -> None:
    event = received(aws, "orders", ['{"orderId": "o-1", "fail": true}'], receives=3)
    handler = once_handler(fail_some, effects="staged")
    sent = changes(handler)

    response = handler(event, None)

    assert failed_ids(response) == message_ids(event)
    assert [e["VisibilityTimeout"] for e in sent[0]["Entries"]] == [8]  # 2 s * 2^(3-1)
    assert aws.record("o-1") is None  # a raise wrote nothing


def test_a_record_with_too_little_time_left_is_not_run(
    aws, once_handler, spy, sqs_event, context
) -> None:
    handler = once_handler(spy, effects="staged", min_remaining_ms=500)
    calls = count_calls(handler.processor._store._client)

    assert outcomes(handler, sqs_event([ORDER]), context(remaining_ms=100)) == [Outcome.DEADLINE]
    assert (spy.calls, len(calls)) == ([], 0)


def test_bad_input_is_quarantined_before_business_code_as_in_the_two_phase_mode(
    aws, once_handler, spy, sqs_event
) -> None:
    event = sqs_event(["not json", {"qty": 1}, ORDER])

    assert outcomes(once_handler(spy, effects="staged"), event) == [
        Outcome.QUARANTINED,
        Outcome.QUARANTINED,
        Outcome.PROCESSED,
    ]
    reasons = sorted(
        m["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"] for m in aws.dlq()
    )
    assert reasons == [c.REASON_INVALID_JSON, c.REASON_INVALID_KEY]
    assert len(spy.calls) == 1


def test_a_copy_on_a_fifo_queue_follows_its_leader_across_groups(
    aws, once_handler, spy, sqs_event
) -> None:
    event = sqs_event([ORDER, ORDER], fifo_groups=["g-1", "g-2"])

    assert outcomes(once_handler(spy, effects="staged"), event) == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
    ]
    assert len(spy.calls) == 1
