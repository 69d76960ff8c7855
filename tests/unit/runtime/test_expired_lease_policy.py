"""``on_expired_lease="quarantine"``: for effects that cannot be fenced, a claim that takes
over an expired IN_PROGRESS lease runs nothing. It marks the record FAILED
(``LEASE_EXPIRED``, through the fenced fail), sends the message to the DLQ and acknowledges
it; a person checks whether the effect happened and redrives, and the redriven message runs
once."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import constants as c
from once import make_handler
from once.models import Outcome, Record
from once.protocol import must_quarantine_takeover, review_fence_for
from tests.conftest import Spy, build_event, failed_ids, message_ids, outcomes
from tests.unit.runtime.test_observability import emf
from tests.unit.runtime.test_outcome_table import claim_elsewhere

ORDER = {"orderId": "o-1", "item": "book", "qty": 1}


def crashed_mid_flight(aws: Any, clock: Any) -> None:
    """An invocation claimed the order and died; its lease has run out."""
    claim_elsewhere(aws, ORDER, clock=clock, lease_ms=1_000)
    clock.advance(2)


def redriven(dead: dict[str, Any], sqs_event: Any) -> dict[str, Any]:
    """The DLQ message moved back to the source queue: a new message id, its attributes."""
    return sqs_event(
        [dead["Body"]],
        message_attributes={
            name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
            for name, value in dead["MessageAttributes"].items()
        },
    )


def test_a_quarantined_takeover_runs_nothing_and_its_message_goes_to_the_dlq(
    aws, once_handler, spy, sqs_event, clock, capsys
) -> None:
    crashed_mid_flight(aws, clock)
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    capsys.readouterr()

    event = sqs_event([ORDER])
    assert handler(event, None) == {"batchItemFailures": []}

    assert spy.calls == []
    record = aws.record("o-1")
    assert (record["status"], record["fence"], record["error"]) == (
        c.STATUS_FAILED,
        2,
        c.REASON_LEASE_EXPIRED,
    )
    [dead] = aws.dlq()
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_REASON] == c.REASON_LEASE_EXPIRED
    assert attributes[c.QUARANTINE_ATTR_MESSAGE_ID] == message_ids(event)[0]
    assert attributes[c.QUARANTINE_ATTR_FENCE] == "2"  # the fence of the FAILED record
    assert emf(capsys.readouterr().out) == {c.METRIC_LEASE_EXPIRED: 1, c.METRIC_TAKEOVER: 1}


def test_a_quarantined_takeover_keeps_its_fence_within_the_ten_attributes_sqs_allows(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    own = {f"a{i}": {"stringValue": str(i), "dataType": "String"} for i in range(10)}

    assert outcomes(handler, sqs_event([ORDER], message_attributes=own)) == [Outcome.LEASE_EXPIRED]
    [dead] = aws.dlq()
    assert len(dead["MessageAttributes"]) == 10
    assert dead["MessageAttributes"][c.QUARANTINE_ATTR_FENCE]["StringValue"] == "2"


def test_a_redrive_after_a_quarantined_takeover_runs_once(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    handler(sqs_event([ORDER]), None)
    [dead] = aws.dlq()

    again = redriven(dead, sqs_event)  # a person checked the effect and redrove it
    assert outcomes(handler, again) == [Outcome.PROCESSED]
    assert outcomes(handler, again) == [Outcome.DUPLICATE]

    [(_, attempt)] = spy.calls
    assert (attempt.fence, attempt.takeover) == (3, False)
    assert attempt.record.error == c.REASON_LEASE_EXPIRED
    assert aws.record("o-1")["status"] == c.STATUS_COMPLETED


class Killed(BaseException):
    """Lambda killing the invocation: nothing of it runs after this."""


def test_a_reviewed_redrive_that_dies_after_its_effect_is_quarantined_again_not_run(
    aws, once_handler, sqs_event, clock
) -> None:
    fences: list[int] = []

    def ship(body: Any, attempt: Any) -> dict[str, bool]:
        fences.append(attempt.fence)
        raise Killed  # the effect happened; the invocation died before its finalize

    crashed_mid_flight(aws, clock)
    handler = once_handler(ship, clock=clock, on_expired_lease="quarantine")
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.LEASE_EXPIRED]
    [dead] = aws.dlq()
    again = redriven(dead, sqs_event)  # a person reviewed the first takeover
    with pytest.raises(Killed):
        handler(again, None)
    clock.advance(c.DEFAULT_LOCK_TIMEOUT_S + 1)  # the dead invocation's lease runs out

    # SQS redelivers the redriven message, its attributes unchanged: a new takeover
    assert outcomes(handler, again) == [Outcome.LEASE_EXPIRED]
    assert fences == [3]
    assert aws.record("o-1")["error"] == c.REASON_LEASE_EXPIRED


def test_a_redelivery_after_a_failed_quarantine_is_quarantined_again_not_run(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)
    event = sqs_event([ORDER])
    no_dlq = once_handler(spy, clock=clock, on_expired_lease="quarantine", dlq_url=None)

    assert failed_ids(no_dlq(event, None)) == message_ids(event)
    assert aws.record("o-1")["error"] == c.REASON_LEASE_EXPIRED

    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    assert outcomes(handler, event) == [Outcome.LEASE_EXPIRED]
    assert spy.calls == []
    assert len(aws.dlq()) == 1


def forged(fence: int) -> dict[str, dict[str, str]]:
    """The attributes of a reviewed redrive, set by a producer on a message of its own."""
    return {
        c.QUARANTINE_ATTR_REASON: {"stringValue": c.REASON_LEASE_EXPIRED, "dataType": "String"},
        c.QUARANTINE_ATTR_FENCE: {"stringValue": str(fence), "dataType": "Number"},
    }


def test_a_forged_review_on_a_fresh_message_runs_nothing_unreviewed(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)  # IN_PROGRESS at fence 1, no quarantine, no review
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")

    event = sqs_event([ORDER], message_attributes=forged(1))
    assert outcomes(handler, event) == [Outcome.LEASE_EXPIRED]
    assert spy.calls == []
    [dead] = aws.dlq()
    assert dead["MessageAttributes"][c.QUARANTINE_ATTR_FENCE]["StringValue"] == "2"


def test_a_review_of_another_quarantine_of_the_key_does_not_count(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.LEASE_EXPIRED]  # FAILED, fence 2

    stale = sqs_event([ORDER], message_attributes=forged(1))  # reviewed some other record
    assert outcomes(handler, stale) == [Outcome.LEASE_EXPIRED]
    assert spy.calls == []
    assert aws.record("o-1")["fence"] == 3


def test_copies_in_the_batch_of_a_quarantined_takeover_are_quarantined_too(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")

    event = sqs_event([ORDER, ORDER])
    assert outcomes(handler, event) == [Outcome.LEASE_EXPIRED, Outcome.LEASE_EXPIRED]
    assert spy.calls == []
    assert len(aws.dlq()) == 2


def _dead_letters(aws: Any) -> list[dict[str, Any]]:
    """Every message in the DLQ, taken out of it (a person redrives them)."""
    dead = aws.dlq()
    for message in dead:
        aws.sqs.delete_message(QueueUrl=aws.dlq_url, ReceiptHandle=message["ReceiptHandle"])
    return dead


def test_two_quarantined_copies_redriven_one_by_one_run_the_operation_once(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    # A message and a producer's retry of it, each quarantined in its own invocation: before,
    # each claim bumped the fence and spoiled the other copy's review, round after round.
    crashed_mid_flight(aws, clock)
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.LEASE_EXPIRED]
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.LEASE_EXPIRED]
    first, second = _dead_letters(aws)
    assert {
        m["MessageAttributes"][c.QUARANTINE_ATTR_FENCE]["StringValue"] for m in (first, second)
    } == {"2"}

    # once redrive --include-lease-expired, each copy in its own invocation
    assert outcomes(handler, redriven(second, sqs_event)) == [Outcome.PROCESSED]
    assert outcomes(handler, redriven(first, sqs_event)) == [Outcome.DUPLICATE]
    assert len(spy.calls) == 1
    assert aws.dlq() == []


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    copies=st.integers(min_value=2, max_value=4),
    order=st.randoms(use_true_random=False),
    cuts=st.sets(st.integers(min_value=1, max_value=3)),
)
def test_quarantined_copies_redriven_in_any_order_and_batching_run_the_operation_once(
    aws, once_handler, clock, copies: int, order: Any, cuts: set[int]
) -> None:
    order_body = {"orderId": f"o-{uuid.uuid4().hex}", "item": "book", "qty": 1}
    claim_elsewhere(aws, order_body, clock=clock, lease_ms=1_000)
    clock.advance(2)
    spy = Spy()
    handler = once_handler(spy, clock=clock, on_expired_lease="quarantine")
    for _ in range(copies):  # each copy quarantined in an invocation of its own
        assert outcomes(handler, build_event([order_body])) == [Outcome.LEASE_EXPIRED]
    dead = _dead_letters(aws)
    order.shuffle(dead)

    # One reviewed redrive: the copies come back in any order, in batches of any sizes.
    bounds = [0, *sorted(cut for cut in cuts if cut < copies), copies]
    ran = [
        outcome
        for start, end in itertools.pairwise(bounds)
        for outcome in outcomes(handler, redriven_all(dead[start:end]))
    ]

    assert sorted(ran) == sorted([Outcome.PROCESSED] + [Outcome.DUPLICATE] * (copies - 1))
    assert len(spy.calls) == 1
    assert aws.dlq() == []


def redriven_all(dead: list[dict[str, Any]]) -> dict[str, Any]:
    """Several DLQ messages moved back to the source queue, delivered in one batch."""
    events = [redriven(message, build_event) for message in dead]
    return {"Records": [record for event in events for record in event["Records"]]}


def test_by_default_a_takeover_runs_the_business_code_again(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed_mid_flight(aws, clock)
    assert outcomes(once_handler(spy, clock=clock), sqs_event([ORDER])) == [Outcome.PROCESSED]
    [(_, attempt)] = spy.calls
    assert attempt.takeover is True


def test_an_unknown_policy_is_refused(spy) -> None:
    with pytest.raises(ValueError, match="on_expired_lease"):
        make_handler(spy, key="orderId", on_expired_lease="retry")


def _previous(status: str, error: str | None = None) -> Record:
    return Record(id="test#k", status=status, fence=2, error=error)


def _requarantined(*, review_fence: int, fence: int) -> Record:
    """FAILED by a quarantined takeover at ``review_fence``, its copies quarantined again up
    to ``fence``."""
    return Record(
        id="test#k",
        status=c.STATUS_FAILED,
        fence=fence,
        error=c.REASON_LEASE_EXPIRED,
        review_fence=review_fence,
    )


@pytest.mark.parametrize(
    ("takeover", "previous", "review_fence", "expected"),
    [
        (True, _previous(c.STATUS_IN_PROGRESS), None, True),  # a lease expired mid-flight
        # a reviewed redrive's own claim expired mid-flight: its effect may have run
        (True, _previous(c.STATUS_IN_PROGRESS), 2, True),
        (False, None, None, False),  # a new key
        (False, None, 2, False),  # a new key, with a review of nothing: nothing to quarantine
        (False, _previous(c.STATUS_FAILED, "RuntimeError"), None, False),  # a retry
        (False, _previous(c.STATUS_FAILED, "RuntimeError"), 2, False),
        # FAILED by an earlier quarantine whose DLQ send failed: still unreviewed
        (False, _previous(c.STATUS_FAILED, c.REASON_LEASE_EXPIRED), None, True),
        # the message quarantined with this record's fence, redriven by a person
        (False, _previous(c.STATUS_FAILED, c.REASON_LEASE_EXPIRED), 2, False),
        # a review of an older quarantine of the key (or a forged one)
        (False, _previous(c.STATUS_FAILED, c.REASON_LEASE_EXPIRED), 1, True),
        # copies of one crash quarantined at fences 2..4: a review of any of them counts
        (False, _requarantined(review_fence=2, fence=4), 2, False),
        (False, _requarantined(review_fence=2, fence=4), 3, False),
        (False, _requarantined(review_fence=2, fence=4), 4, False),
        # a fence from before that crash, or past the record
        (False, _requarantined(review_fence=2, fence=4), 1, True),
        (False, _requarantined(review_fence=2, fence=4), 5, True),
        # a reviewed copy whose own run crashed: a new crash, whatever the fence
        (True, _previous(c.STATUS_IN_PROGRESS), 3, True),
    ],
    ids=[
        "takeover",
        "takeover-of-a-reviewed-redrive",
        "new-key",
        "new-key-with-a-review",
        "retry-after-failure",
        "retry-after-failure-with-a-review",
        "unsent-quarantine",
        "reviewed-redrive",
        "review-of-another-fence",
        "review-of-the-first-copy",
        "review-of-a-later-copy",
        "review-of-the-last-copy",
        "review-from-before-the-crash",
        "review-past-the-record",
        "takeover-after-a-review",
    ],
)
def test_which_claims_a_quarantine_policy_sends_to_the_dlq(
    takeover: bool, previous: Record | None, review_fence: int | None, expected: bool
) -> None:
    verdict = must_quarantine_takeover(
        takeover=takeover, previous=previous, review_fence=review_fence
    )
    assert verdict is expected


@pytest.mark.parametrize(
    ("fence", "takeover", "previous", "expected"),
    [
        (2, True, _previous(c.STATUS_IN_PROGRESS), 2),  # a new crash: its own fence
        # a copy reaching the record of a quarantined crash: that crash's review fence
        (5, False, _requarantined(review_fence=2, fence=4), 2),
        # a record written before review fences were stored: its fence
        (3, False, _previous(c.STATUS_FAILED, c.REASON_LEASE_EXPIRED), 2),
        # a takeover of a reviewed run that crashed: a new crash
        (6, True, _previous(c.STATUS_IN_PROGRESS), 6),
        (1, False, None, 1),  # a retried claim: no record to follow
    ],
    ids=[
        "new-crash",
        "copy-of-a-crash",
        "record-without-review-fence",
        "crash-after-review",
        "retry",
    ],
)
def test_which_fence_a_quarantined_takeover_asks_its_review_to_name(
    fence: int, takeover: bool, previous: Record | None, expected: int
) -> None:
    assert review_fence_for(fence=fence, takeover=takeover, previous=previous) == expected
