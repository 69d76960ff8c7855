"""The protocol's rows of the outcome table of docs/design.md (Outcomes) through the handler,
on moto: what the batch response says, whether business code ran, and what the record holds
afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from once import PermanentError
from once import constants as c
from once.models import Outcome, record_id
from once.payload import canonical_json, sha256
from once.protocol import claim_expires_at
from once.store import Claimed, RecordStore
from tests.conftest import TABLE, Spy, failed_ids, message_ids, outcomes

ORDER = {"orderId": "o-1", "item": "book", "qty": 1}


def claim_elsewhere(
    aws: Any, body: dict[str, Any], *, clock: Any = None, lease_ms: int = 60_000
) -> Claimed:
    """Another invocation claims the key directly on the table."""
    store = RecordStore(aws.dynamodb, TABLE, **({"clock": clock} if clock else {}))
    claim = store.claim(
        record_id("test", body["orderId"]),
        payload_hash=sha256(canonical_json(body)),
        message_id="elsewhere",
        lease_ms=lease_ms,
    )
    assert isinstance(claim, Claimed)
    return claim


def test_a_new_key_runs_once_and_is_completed_with_fence_one(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    event = sqs_event([ORDER])

    assert handler(event, None) == {"batchItemFailures": []}

    assert len(spy.calls) == 1
    body, attempt = spy.calls[0]
    assert body == ORDER
    assert (attempt.key, attempt.fence, attempt.takeover, attempt.record) == ("o-1", 1, False, None)
    assert attempt.message_id == message_ids(event)[0]
    record = aws.record("o-1")
    assert record["status"] == c.STATUS_COMPLETED
    assert record["fence"] == 1
    assert record["message_id"] == message_ids(event)[0]
    assert record["payload_hash"] == sha256(canonical_json(ORDER))
    assert record["result"] == canonical_json({"orderId": "o-1", "fence": 1})
    assert c.ATTR_LEASE_EXPIRES_AT not in record
    assert c.ATTR_ERROR not in record


def test_a_duplicate_of_a_completed_order_is_acknowledged_without_running(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    handler(sqs_event([ORDER]), None)
    before = aws.record("o-1")

    redelivery = sqs_event([{"qty": 1, "item": "book", "orderId": "o-1"}])  # same, reordered
    assert outcomes(handler, redelivery) == [Outcome.DUPLICATE]
    assert handler(redelivery, None) == {"batchItemFailures": []}

    assert len(spy.calls) == 1
    assert aws.record("o-1") == before


@pytest.mark.parametrize("state", ["completed", "in_progress", "failed"])
def test_another_payload_under_a_live_key_is_never_run_and_is_quarantined(
    aws, once_handler, spy, sqs_event, state: str
) -> None:
    if state == "completed":
        once_handler(spy)(sqs_event([ORDER]), None)
    elif state == "in_progress":
        claim_elsewhere(aws, ORDER)
    else:
        once_handler(Spy(lambda body, attempt: 1 / 0))(sqs_event([ORDER]), None)
    before = aws.record("o-1")
    calls_before = len(spy.calls)

    conflicting = sqs_event([ORDER | {"qty": 2}])
    response = once_handler(spy)(conflicting, None)

    assert response == {"batchItemFailures": []}  # acknowledged: its copy is in the DLQ
    assert len(spy.calls) == calls_before
    assert aws.record("o-1") == before
    [dead] = aws.dlq()
    assert dead["Body"] == conflicting["Records"][0]["body"]
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_MESSAGE_ID] == message_ids(conflicting)[0]
    assert attributes[c.QUARANTINE_ATTR_REASON] == "CONFLICT"
    assert attributes[c.QUARANTINE_ATTR_ERROR]
    assert "2" not in attributes[c.QUARANTINE_ATTR_ERROR]  # no payload values


def test_a_key_under_another_live_lease_is_busy_and_reported_failed(
    aws, once_handler, spy, sqs_event
) -> None:
    holder = claim_elsewhere(aws, ORDER)
    handler = once_handler(spy)
    event = sqs_event([ORDER])

    assert outcomes(handler, event) == [Outcome.BUSY]
    assert failed_ids(handler(event, None)) == message_ids(event)

    assert spy.calls == []
    record = aws.record("o-1")
    assert (record["status"], record["owner"], record["fence"]) == (
        c.STATUS_IN_PROGRESS,
        holder.owner,
        1,
    )


def test_a_transient_failure_is_recorded_failed_and_its_retry_runs_under_the_next_fence(
    aws, once_handler, sqs_event
) -> None:
    attempts: list[int] = []

    def flaky(body: Any, attempt: Any) -> str:
        attempts.append(attempt.fence)
        if len(attempts) == 1:
            raise ConnectionError("downstream timed out")
        return "ok"

    handler = once_handler(flaky)
    event = sqs_event([ORDER])
    assert failed_ids(handler(event, None)) == message_ids(event)
    failed = aws.record("o-1")
    assert failed["status"] == c.STATUS_FAILED
    assert failed["error"] == "ConnectionError"  # the class: a message may quote the payload
    assert c.ATTR_LEASE_EXPIRES_AT not in failed

    assert handler(event, None) == {"batchItemFailures": []}  # SQS redelivers it
    assert attempts == [1, 2]
    done = aws.record("o-1")
    assert (done["status"], done["fence"], done["result"]) == (c.STATUS_COMPLETED, 2, '"ok"')
    assert c.ATTR_ERROR not in done


def test_a_permanent_error_marks_the_record_failed_and_quarantines_the_message(
    aws, once_handler, sqs_event
) -> None:
    def reject(body: Any, attempt: Any) -> None:
        raise PermanentError("unknown item")

    event = sqs_event([ORDER])
    assert once_handler(reject)(event, None) == {"batchItemFailures": []}

    assert aws.record("o-1")["status"] == c.STATUS_FAILED
    [dead] = aws.dlq()
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_REASON] == "PERMANENT_ERROR"
    assert attributes[c.QUARANTINE_ATTR_ERROR] == "PermanentError: unknown item"
    assert attributes[c.QUARANTINE_ATTR_MESSAGE_ID] == message_ids(event)[0]


def test_a_complete_after_a_newer_claim_overwrites_nothing_and_is_reported_failed(
    aws, once_handler, sqs_event, clock
) -> None:
    newer: list[Claimed] = []

    def overtaken(body: Any, attempt: Any) -> str:
        clock.advance(c.DEFAULT_LOCK_TIMEOUT_S + 1)  # our lease runs out mid-flight...
        newer.append(claim_elsewhere(aws, body, clock=clock))  # ...and a retry takes over
        return "late"

    handler = once_handler(overtaken, clock=clock)
    event = sqs_event([ORDER])
    assert outcomes(handler, event) == [Outcome.LEASE_LOST]

    record = aws.record("o-1")
    assert (record["status"], record["owner"], record["fence"]) == (
        c.STATUS_IN_PROGRESS,
        newer[0].owner,
        2,
    )
    assert newer[0].takeover
    assert c.ATTR_RESULT not in record


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), PermanentError("bad")], ids=["transient", "permanent"]
)
def test_a_fail_after_a_newer_claim_overwrites_nothing_and_is_reported_failed(
    aws, once_handler, sqs_event, clock, error: Exception
) -> None:
    newer: list[Claimed] = []

    def overtaken(body: Any, attempt: Any) -> None:
        clock.advance(c.DEFAULT_LOCK_TIMEOUT_S + 1)
        newer.append(claim_elsewhere(aws, body, clock=clock))
        raise error

    handler = once_handler(overtaken, clock=clock)
    event = sqs_event([ORDER])
    response = handler(event, None)

    assert failed_ids(response) == message_ids(event)  # not quarantined, not acknowledged
    assert aws.dlq() == []
    record = aws.record("o-1")
    assert (record["status"], record["owner"], record["fence"]) == (
        c.STATUS_IN_PROGRESS,
        newer[0].owner,
        2,
    )
    assert c.ATTR_ERROR not in record


def test_an_expired_record_is_treated_as_absent_and_the_fence_keeps_growing(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    handler = once_handler(spy, clock=clock, retention_s=3600)
    handler(sqs_event([ORDER]), None)
    assert aws.record("o-1")["expires_at"] == int(clock.now) + 3600

    clock.advance(3601)  # past expires_at; moto (like DynamoDB, for days) has not deleted it
    changed = ORDER | {"qty": 5}  # even another payload is no conflict with an expired record
    assert handler(sqs_event([changed]), None) == {"batchItemFailures": []}

    assert len(spy.calls) == 2
    _, attempt = spy.calls[1]
    assert (attempt.fence, attempt.takeover, attempt.record) == (2, False, None)
    record = aws.record("o-1")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 2)
    assert record["payload_hash"] == sha256(canonical_json(changed))


def test_an_expired_lease_is_taken_over_and_the_attempt_says_so(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    crashed = claim_elsewhere(aws, ORDER, clock=clock, lease_ms=1_000)
    clock.advance(2)

    assert once_handler(spy, clock=clock)(sqs_event([ORDER]), None) == {"batchItemFailures": []}

    _, attempt = spy.calls[0]
    assert (attempt.fence, attempt.takeover) == (2, True)
    assert attempt.record.owner == crashed.owner
    assert attempt.record.status == c.STATUS_IN_PROGRESS


def test_the_fence_grows_by_exactly_one_per_successful_claim_and_never_otherwise(
    aws, once_handler, sqs_event, clock
) -> None:
    results = iter([RuntimeError("1"), RuntimeError("2"), "ok"])
    seen: list[int] = []

    def business(body: Any, attempt: Any) -> str:
        seen.append(attempt.fence)
        result = next(results)
        if isinstance(result, Exception):
            raise result
        return result

    handler = once_handler(business, clock=clock)
    fences = []
    for _ in range(3):
        handler(sqs_event([ORDER]), None)
        fences.append(aws.record("o-1")["fence"])
    for _ in range(2):  # duplicates and a conflict claim nothing
        handler(sqs_event([ORDER, ORDER | {"qty": 9}]), None)
        fences.append(aws.record("o-1")["fence"])

    assert seen == [1, 2, 3]
    assert fences == [1, 2, 3, 3, 3]


def test_the_record_id_is_the_stable_prefix_and_the_business_key(
    aws, once_handler, spy, sqs_event
) -> None:
    once_handler(spy, key_prefix="orders-svc")(sqs_event([{"orderId": 42}]), None)
    assert [r["id"] for r in aws.records()] == ["orders-svc#42"]


def test_the_lease_is_the_remaining_time_plus_the_margin(
    aws, once_handler, sqs_event, context, clock
) -> None:
    leases: list[int] = []

    def business(body: Any, attempt: Any) -> None:
        leases.append(aws.record("o-1")[c.ATTR_LEASE_EXPIRES_AT])

    once_handler(business, clock=clock, lease_margin_s=7)(
        sqs_event([ORDER]), context(remaining_ms=30_000)
    )
    assert leases == [int(clock.now * 1000) + 30_000 + 7_000]


def test_outside_lambda_the_lease_is_the_lock_timeout(aws, once_handler, sqs_event, clock) -> None:
    leases: list[int] = []

    def business(body: Any, attempt: Any) -> None:
        leases.append(aws.record("o-1")[c.ATTR_LEASE_EXPIRES_AT])

    once_handler(business, clock=clock, lock_timeout_s=120)(sqs_event([ORDER]), None)
    assert leases == [int(clock.now * 1000) + 120_000]


def test_a_retention_shorter_than_the_lease_never_lets_a_live_claim_expire(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    # Outside Lambda the lease is lock_timeout_s (900 s): far longer than this retention.
    short = RecordStore(aws.dynamodb, TABLE, retention_s=60, clock=clock)
    claim = short.claim("test#o-1", payload_hash=sha256(canonical_json(ORDER)),
                        message_id="elsewhere", lease_ms=900_000)  # fmt: skip
    assert isinstance(claim, Claimed)
    clock.advance(120)  # past the retention, well inside the lease

    assert outcomes(once_handler(spy, clock=clock, retention_s=60), sqs_event([ORDER])) == [
        Outcome.BUSY
    ]
    assert spy.calls == []
    clock.advance(900)  # the lease has ended: a takeover now
    assert outcomes(once_handler(spy, clock=clock, retention_s=60), sqs_event([ORDER])) == [
        Outcome.PROCESSED
    ]


@pytest.mark.parametrize(("lease_ms", "retention_s", "expected"), [
    (10_000, 3_600, 1_000_000 + 3_600),  # the retention, when it outlasts the lease
    (900_000, 60, 1_000_000 + 900 + 1),  # never before the lease has ended (+1 s)
    (900_500, 60, 1_000_000 + 901 + 1),  # a lease ending mid-second rounds up
])  # fmt: skip
def test_a_claims_expiry_is_its_retention_but_never_before_its_lease_ends(
    lease_ms: int, retention_s: int, expected: int
) -> None:
    assert claim_expires_at(1_000_000_000, lease_ms, retention_s) == expected


def test_an_integer_key_and_its_decimal_string_are_one_business_key(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    assert outcomes(handler, sqs_event([{"orderId": 7}])) == [Outcome.PROCESSED]
    # Another body (7 is not "7" to the payload hash): the same key, another payload.
    assert outcomes(handler, sqs_event([{"orderId": "7"}])) == [Outcome.CONFLICT]
    # Without validation, it is the same order and a duplicate.
    unvalidated = once_handler(spy, validate=None)
    assert outcomes(unvalidated, sqs_event([{"orderId": "8"}, {"orderId": 8}])) == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
    ]
    assert len(spy.calls) == 2


def test_a_record_is_stored_under_the_prefix_and_the_business_key(
    aws, once_handler, spy, sqs_event
) -> None:
    once_handler(spy)(sqs_event([{"orderId": 7}]), None)  # the integer 7 is the key "7"

    assert record_id("test", "7") == "test#7"
    [stored] = aws.records()
    assert stored[c.ATTR_ID] == record_id("test", "7")
