"""The commit's decision rows (``protocol.judge_commit``): what a canceled TransactWriteItems of
staged writes plus the record's completion means, read from each element's cancellation code
(the record's is the last) and the record its condition saw. Pure: no I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from once import constants as c
from once.models import Record
from once.protocol import CONDITION_FAILED, TRANSIENT_REASONS, Verdict, judge_commit

ME, OTHER = "me", "other"
FENCE = 3
NONE = "None"
#: Codes DynamoDB gives an element that did not refuse its condition.
OTHER_CODES = (
    "TransactionConflict",
    "ThrottlingError",
    "ValidationError",
    "ProvisionedThroughputExceeded",
    "ItemCollectionSizeLimitExceeded",
)


def record(status: str, *, owner: str = ME, fence: int = FENCE) -> Record:
    return Record(id="test#k", status=status, fence=fence, owner=owner)


def test_my_own_commit_retried_after_it_landed_is_mine() -> None:
    # The SDK resent the commit after a lost response; the record already holds it.
    codes = [NONE, NONE, CONDITION_FAILED]
    assert judge_commit(codes, record(c.STATUS_COMPLETED), me=ME, fence=FENCE) is Verdict.MINE


@pytest.mark.parametrize(
    "old",
    [
        record(c.STATUS_IN_PROGRESS, owner=OTHER, fence=FENCE + 1),  # taken over, still running
        record(c.STATUS_COMPLETED, owner=OTHER, fence=FENCE + 1),  # taken over and completed
        record(c.STATUS_FAILED, owner=OTHER, fence=FENCE + 1),  # taken over and failed
        record(c.STATUS_COMPLETED, owner=ME, fence=FENCE + 1),  # another fence, same owner id
        record(c.STATUS_FAILED, owner=ME, fence=FENCE),  # mine, but failed: not this commit
        None,  # the item is gone
    ],
    ids=["in-progress", "completed", "failed", "other-fence", "my-fail", "gone"],
)
def test_a_commit_whose_record_condition_failed_otherwise_is_a_lost_lease(
    old: Record | None,
) -> None:
    assert judge_commit([NONE, CONDITION_FAILED], old, me=ME, fence=FENCE) is Verdict.LEASE_LOST


def test_a_zombie_is_never_taken_for_a_business_refusal() -> None:
    # Both a staged write and the record refused: the record's verdict comes first.
    codes = [CONDITION_FAILED, NONE, CONDITION_FAILED]
    taken_over = record(c.STATUS_IN_PROGRESS, owner=OTHER, fence=FENCE + 1)
    assert judge_commit(codes, taken_over, me=ME, fence=FENCE) is Verdict.LEASE_LOST


def test_a_staged_write_refused_with_the_record_still_mine_is_refused() -> None:
    in_progress = record(c.STATUS_IN_PROGRESS)
    assert judge_commit([NONE, CONDITION_FAILED, NONE], in_progress, me=ME, fence=FENCE) is (
        Verdict.REFUSED
    )


@pytest.mark.parametrize("code", sorted(TRANSIENT_REASONS))
def test_a_commit_canceled_for_a_passing_cause_is_transient(code: str) -> None:
    # A conflicting request on one of its items (a duplicate's claim on the record, another
    # record's commit on one ledger row) or throttling: committing again may land it.
    assert judge_commit([NONE, code, NONE], None, me=ME, fence=FENCE) is Verdict.TRANSIENT
    assert judge_commit([code, code], None, me=ME, fence=FENCE) is Verdict.TRANSIENT


@pytest.mark.parametrize("code", ["ValidationError", "ItemCollectionSizeLimitExceeded"])
def test_a_commit_canceled_for_a_lasting_cause_is_canceled(code: str) -> None:
    assert judge_commit([NONE, code, NONE], None, me=ME, fence=FENCE) is Verdict.CANCELED
    assert judge_commit([code, "TransactionConflict"], None, me=ME, fence=FENCE) is (
        Verdict.CANCELED
    )


def test_a_cancellation_without_reasons_is_canceled() -> None:
    assert judge_commit([], None, me=ME, fence=FENCE) is Verdict.CANCELED


@given(
    staged=st.lists(st.sampled_from((NONE, CONDITION_FAILED, *OTHER_CODES)), max_size=99),
    status=st.sampled_from((c.STATUS_IN_PROGRESS, c.STATUS_COMPLETED, c.STATUS_FAILED)),
    owner=st.sampled_from((ME, OTHER)),
    fence=st.integers(1, 5),
)
def test_a_failed_record_condition_is_judged_as_a_finalize_whatever_the_staged_codes(
    staged: list[str], status: str, owner: str, fence: int
) -> None:
    old = record(status, owner=owner, fence=fence)
    verdict = judge_commit([*staged, CONDITION_FAILED], old, me=ME, fence=FENCE)
    mine = (owner, fence, status) == (ME, FENCE, c.STATUS_COMPLETED)
    assert verdict is (Verdict.MINE if mine else Verdict.LEASE_LOST)


@given(
    staged=st.lists(st.sampled_from((NONE, CONDITION_FAILED, *OTHER_CODES)), max_size=99),
    record_code=st.sampled_from((NONE, *OTHER_CODES)),
)
def test_with_the_record_condition_met_a_refused_staged_condition_is_refused_else_by_cause(
    staged: list[str], record_code: str
) -> None:
    verdict = judge_commit([*staged, record_code], None, me=ME, fence=FENCE)
    causes = {*staged, record_code} - {NONE}
    if CONDITION_FAILED in staged:
        assert verdict is Verdict.REFUSED
    elif causes and causes <= TRANSIENT_REASONS:
        assert verdict is Verdict.TRANSIENT
    else:
        assert verdict is Verdict.CANCELED
