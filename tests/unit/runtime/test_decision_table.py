"""The decision table of docs/design.md, row by row, on the pure functions of ``protocol.py``:
what a rejected claim, complete or fail means, read from the old item alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from once import constants as c
from once.models import METRIC_NAMES, Outcome, Record
from once.protocol import (
    StagedEnd,
    Verdict,
    claim_condition_holds,
    is_takeover,
    judge_claim,
    judge_finalize,
    judge_staged_cancel,
    judge_staged_commit,
    judge_staged_refusal,
    staged_end_reads_record,
)

ME, OTHER = "me", "other"
HASH, OTHER_HASH = "h" * 64, "x" * 64
NOW_S = 1_700_000_000


def record(status: str, *, owner: str = OTHER, fence: int = 3, payload_hash: str = HASH) -> Record:
    return Record(
        id="test#k",
        status=status,
        fence=fence,
        owner=owner,
        lease_expires_at=NOW_S * 1000 + 5_000,
        expires_at=NOW_S + 3600,
        payload_hash=payload_hash,
    )


# --- claim ----------------------------------------------------------------------------------


def test_a_completed_record_with_the_same_hash_is_a_duplicate() -> None:
    assert judge_claim(record(c.STATUS_COMPLETED), me=ME, payload_hash=HASH) is Verdict.DUPLICATE


@pytest.mark.parametrize("status", [c.STATUS_COMPLETED, c.STATUS_IN_PROGRESS, c.STATUS_FAILED])
def test_a_live_record_with_another_hash_is_a_conflict_whatever_its_status(status: str) -> None:
    old = record(status, payload_hash=OTHER_HASH)
    assert judge_claim(old, me=ME, payload_hash=HASH) is Verdict.CONFLICT


def test_a_live_lease_of_another_owner_with_the_same_hash_is_busy() -> None:
    assert judge_claim(record(c.STATUS_IN_PROGRESS), me=ME, payload_hash=HASH) is Verdict.BUSY


def test_my_own_claim_found_in_progress_is_an_sdk_retry_that_landed() -> None:
    old = record(c.STATUS_IN_PROGRESS, owner=ME)
    assert judge_claim(old, me=ME, payload_hash=HASH) is Verdict.MINE


def test_a_failed_record_that_still_refused_the_claim_is_retried_later_not_run() -> None:
    # Only a clock race can refuse a claim on FAILED with the same hash: retry is safe.
    assert judge_claim(record(c.STATUS_FAILED), me=ME, payload_hash=HASH) is Verdict.BUSY


# --- takeover -------------------------------------------------------------------------------


def test_a_claim_that_replaced_a_live_in_progress_record_is_a_takeover() -> None:
    assert is_takeover(record(c.STATUS_IN_PROGRESS), retried=False) is True


@pytest.mark.parametrize("status", [c.STATUS_COMPLETED, c.STATUS_FAILED])
def test_a_claim_that_replaced_a_finished_record_is_no_takeover(status: str) -> None:
    assert is_takeover(record(status), retried=False) is False


def test_a_claim_of_an_absent_or_expired_record_is_no_takeover() -> None:
    assert is_takeover(None, retried=False) is False


@pytest.mark.parametrize(("fence", "expected"), [(1, False), (2, True), (7, True)])
def test_a_retried_claim_is_a_takeover_whenever_an_earlier_claim_existed(
    fence: int, expected: bool
) -> None:
    # The retry finds only its own record: what the earlier claim left is no longer visible,
    # so any fence above 1 is conservatively a takeover.
    mine = record(c.STATUS_IN_PROGRESS, owner=ME, fence=fence)
    assert is_takeover(mine, retried=True) is expected


# --- complete / fail ------------------------------------------------------------------------


@pytest.mark.parametrize("target", [c.STATUS_COMPLETED, c.STATUS_FAILED])
def test_my_owner_fence_and_target_status_on_the_record_is_my_own_retried_write(
    target: str,
) -> None:
    old = record(target, owner=ME, fence=3)
    assert judge_finalize(old, me=ME, fence=3, target_status=target) is Verdict.MINE


@pytest.mark.parametrize(
    "old",
    [
        None,  # the record is gone (never happens: the application never deletes)
        record(c.STATUS_IN_PROGRESS, owner=OTHER, fence=4),  # a newer claim holds it
        record(c.STATUS_COMPLETED, owner=OTHER, fence=4),  # a newer claim finished it
        record(c.STATUS_FAILED, owner=OTHER, fence=4),
        record(c.STATUS_COMPLETED, owner=ME, fence=2),  # my owner but an older fence
        record(c.STATUS_FAILED, owner=ME, fence=3),  # mine, but not the state I was writing
    ],
    ids=[
        "absent",
        "newer-in-progress",
        "newer-completed",
        "newer-failed",
        "older-fence",
        "other-status",
    ],
)
def test_any_other_refused_complete_is_a_lost_lease(old: Record | None) -> None:
    verdict = judge_finalize(old, me=ME, fence=3, target_status=c.STATUS_COMPLETED)
    assert verdict is Verdict.LEASE_LOST


# --- vocabulary -----------------------------------------------------------------------------


def test_only_done_or_quarantined_records_are_acknowledged() -> None:
    # CONFLICT and LEASE_EXPIRED are outcomes only once their copy is in the DLQ (else the
    # record is FAILED); PROCESSED and OWED_SENT only once nothing of the outbox is owed.
    assert {o for o in Outcome if o.acknowledged} == {
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.QUARANTINED,
        Outcome.CONFLICT,
        Outcome.LEASE_EXPIRED,
        Outcome.OWED_SENT,
    }


def test_every_outcome_is_counted_by_a_metric() -> None:
    assert set(METRIC_NAMES) == set(Outcome)
    assert METRIC_NAMES[Outcome.LEASE_LOST] == "LeaseLost"
    assert METRIC_NAMES[Outcome.LEASE_EXPIRED] == "LeaseExpired"
    assert METRIC_NAMES[Outcome.DUPLICATE] == "Duplicate"


def test_a_record_past_its_expiry_is_no_longer_live() -> None:
    live = record(c.STATUS_COMPLETED)
    assert live.is_live(NOW_S)
    assert replace(live, expires_at=NOW_S).is_live(NOW_S)
    assert not replace(live, expires_at=NOW_S - 1).is_live(NOW_S)


def test_a_record_is_read_from_a_low_level_item() -> None:
    item = {
        "id": {"S": "test#k"},
        "status": {"S": "COMPLETED"},
        "fence": {"N": "7"},
        "owner": {"S": "o"},
        "expires_at": {"N": "10"},
        "payload_hash": {"S": HASH},
        "result": {"S": "{}"},
        "message_id": {"S": "m"},
        "updated_at": {"N": "11"},
    }
    assert Record.from_item(item) == Record(
        id="test#k",
        status="COMPLETED",
        fence=7,
        owner="o",
        lease_expires_at=None,
        expires_at=10,
        payload_hash=HASH,
        result="{}",
        error=None,
        message_id="m",
        updated_at=11,
    )


# --- effects="staged": a refused commit, judged as a refused claim ----------------------------


def test_a_staged_commit_refused_by_my_own_completed_record_is_an_sdk_retry_that_landed() -> None:
    old = record(c.STATUS_COMPLETED, owner=ME)
    assert judge_staged_commit(old, me=ME, payload_hash=HASH) is Verdict.MINE


def test_a_staged_commit_refused_by_a_completed_record_is_a_duplicate() -> None:
    old = record(c.STATUS_COMPLETED)
    assert judge_staged_commit(old, me=ME, payload_hash=HASH) is Verdict.DUPLICATE


@pytest.mark.parametrize("status", [c.STATUS_COMPLETED, c.STATUS_IN_PROGRESS, c.STATUS_FAILED])
def test_a_staged_commit_refused_by_another_payload_is_a_conflict(status: str) -> None:
    old = record(status, payload_hash=OTHER_HASH)
    assert judge_staged_commit(old, me=ME, payload_hash=HASH) is Verdict.CONFLICT


def test_a_staged_commit_refused_by_a_live_two_phase_claim_is_busy() -> None:
    old = record(c.STATUS_IN_PROGRESS)
    assert judge_staged_commit(old, me=ME, payload_hash=HASH) is Verdict.BUSY


@pytest.mark.parametrize(
    ("codes", "verdict"),
    [
        (["None", "ConditionalCheckFailed"], Verdict.DUPLICATE),  # the record's own reason
        (["ConditionalCheckFailed", "ConditionalCheckFailed"], Verdict.DUPLICATE),
        (["ConditionalCheckFailed", "None"], Verdict.REFUSED),  # a staged write's
        (["TransactionConflict", "None"], Verdict.TRANSIENT),
        (["ThrottlingError", "ProvisionedThroughputExceeded"], Verdict.TRANSIENT),
        (["ValidationError", "None"], Verdict.CANCELED),
        (["None", "ItemCollectionSizeLimitExceeded"], Verdict.CANCELED),
    ],
)
def test_a_canceled_staged_transaction_is_judged_by_the_record_first(
    codes: list[str], verdict: Verdict
) -> None:
    old = record(c.STATUS_COMPLETED)
    assert judge_staged_cancel(codes, old, me=ME, payload_hash=HASH) is verdict


@pytest.mark.parametrize(
    ("old", "holds"),
    [
        (None, True),
        (replace(record(c.STATUS_COMPLETED), expires_at=NOW_S - 1), True),  # expired
        (record(c.STATUS_FAILED), True),
        (replace(record(c.STATUS_IN_PROGRESS), lease_expires_at=NOW_S * 1000 - 1), True),
        (record(c.STATUS_IN_PROGRESS), False),  # a live lease
        (record(c.STATUS_COMPLETED), False),
        (record(c.STATUS_FAILED, payload_hash=OTHER_HASH), False),
    ],
)
def test_the_claim_condition_as_a_pure_function(old: Record | None, holds: bool) -> None:
    assert claim_condition_holds(old, now_ms=NOW_S * 1000, payload_hash=HASH) is holds


@pytest.mark.parametrize(
    ("old", "verdict"),
    [
        (None, Verdict.REFUSED),  # the copy's own reason stands
        (record(c.STATUS_FAILED), Verdict.REFUSED),
        (record(c.STATUS_COMPLETED), Verdict.DUPLICATE),
        (record(c.STATUS_COMPLETED, payload_hash=OTHER_HASH), Verdict.CONFLICT),
        (record(c.STATUS_IN_PROGRESS), Verdict.BUSY),
    ],
)
def test_a_staged_copy_that_ended_on_its_own_is_judged_by_the_record_it_reads(
    old: Record | None, verdict: Verdict
) -> None:
    assert judge_staged_refusal(old, now_ms=NOW_S * 1000, payload_hash=HASH) is verdict


@pytest.mark.parametrize(
    ("end", "reads"),
    [
        (StagedEnd.RAISED, True),  # a copy may raise because its own first commit landed
        (StagedEnd.PERMANENT, True),
        (StagedEnd.REFUSED, True),  # a canceled transaction may name only the staged write
        (StagedEnd.CANCELED, True),
        (StagedEnd.UNKNOWN, False),  # may have landed: the redelivery's commit finds out
    ],
)
def test_every_staged_ending_without_a_commit_but_an_unknown_one_is_judged_by_the_record(
    end: StagedEnd, reads: bool
) -> None:
    assert staged_end_reads_record(end) is reads
