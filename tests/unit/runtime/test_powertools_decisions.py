"""The decision table's rows for the bridge to Powertools' records (docs/design.md, "A
Powertools record"): how a message's Powertools record refuses a copy, and how a commit
that carries it can end. Powertools' own rules are cited from its source
(``aws_lambda_powertools/utilities/idempotency/persistence/base.py`` and ``dynamodb.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from once import constants as c
from once.models import Record
from once.powertools import COMPLETED, INPROGRESS, PowertoolsState
from once.protocol import (
    CONDITION_FAILED,
    Verdict,
    judge_commit,
    judge_powertools,
    judge_staged_cancel,
    powertools_takeover,
)


def _state(status: str | None, **more: bool) -> PowertoolsState:
    fields = {"expired": False, "lease_ended": False, "same_payload": True} | more
    return PowertoolsState(status, **fields)


@pytest.mark.parametrize(
    ("state", "verdict"),
    [
        # _put_record's condition lets a write in: absent, expired, an ended INPROGRESS.
        (_state(None), None),
        (_state(COMPLETED, expired=True), None),
        (_state(INPROGRESS, lease_ended=True), None),
        # ... and once's own hold (its own record decided who holds the key).
        (_state(INPROGRESS, once_holds=True), None),
        # _validate_payload comes before the status (IdempotencyValidationError).
        (_state(COMPLETED, same_payload=False), Verdict.CONFLICT),
        (_state(INPROGRESS, same_payload=False), Verdict.CONFLICT),
        # _handle_for_status: COMPLETED returns the stored response; INPROGRESS waits.
        (_state(COMPLETED), Verdict.DUPLICATE),
        (_state(INPROGRESS), Verdict.BUSY),
        # A status Powertools never writes (IdempotencyInvalidStatusError): not run.
        (_state("PAUSED"), Verdict.BUSY),
    ],
)
def test_a_powertools_record_refuses_a_copy_as_powertools_would(
    state: PowertoolsState, verdict: Verdict | None
) -> None:
    assert judge_powertools(state) is verdict


@given(
    status=st.sampled_from([None, COMPLETED, INPROGRESS]),
    expired=st.booleans(),
    lease_ended=st.booleans(),
    same_payload=st.booleans(),
    once_holds=st.booleans(),
)
def test_a_copy_runs_only_where_powertools_would_have_run_it_or_once_holds_the_key(
    status: str | None, expired: bool, lease_ended: bool, same_payload: bool, once_holds: bool
) -> None:
    state = PowertoolsState(status, expired, lease_ended, same_payload, once_holds)
    powertools_would_run = status is None or expired or (status == INPROGRESS and lease_ended)
    held_by_once = status == INPROGRESS and once_holds and not expired
    assert (judge_powertools(state) is None) == (powertools_would_run or held_by_once)


_MINE = Record(id="k", status=c.STATUS_COMPLETED, fence=3, owner="me")
_NONE = "None"


@pytest.mark.parametrize(
    ("codes", "old", "verdict"),
    [
        # The record's own condition speaks first: my landed commit, or a newer claim.
        ([_NONE, CONDITION_FAILED, CONDITION_FAILED], _MINE, Verdict.MINE),
        ([_NONE, _NONE, CONDITION_FAILED], None, Verdict.LEASE_LOST),
        # The Powertools record is no longer INPROGRESS under my claim: taken over.
        ([_NONE, CONDITION_FAILED, _NONE], None, Verdict.LEASE_LOST),
        ([CONDITION_FAILED, _NONE], None, Verdict.LEASE_LOST),
        # A staged write's condition, the bridge's element untouched: refused.
        ([CONDITION_FAILED, _NONE, _NONE], None, Verdict.REFUSED),
        # A passing cause on the bridge's element passes.
        ([_NONE, "TransactionConflict", _NONE], None, Verdict.TRANSIENT),
        (["ValidationError", _NONE, _NONE], None, Verdict.CANCELED),
    ],
)
def test_a_bridged_commit_ends_as_the_table_says(
    codes: list[str], old: Record | None, verdict: Verdict
) -> None:
    assert judge_commit(codes, old, me="me", fence=3, bridged=True) is verdict


def test_without_the_bridge_the_element_before_the_record_is_a_staged_write() -> None:
    assert judge_commit([CONDITION_FAILED, _NONE], None, me="me", fence=3) is Verdict.REFUSED


@pytest.mark.parametrize(
    ("codes", "powertools", "verdict"),
    [
        ([CONDITION_FAILED, _NONE], _state(COMPLETED), Verdict.DUPLICATE),
        ([CONDITION_FAILED, _NONE], _state(INPROGRESS), Verdict.BUSY),
        ([CONDITION_FAILED, _NONE], _state(COMPLETED, same_payload=False), Verdict.CONFLICT),
        # The condition failed, yet the record read says free: a clock race, retry later.
        ([CONDITION_FAILED, _NONE], _state(None), Verdict.BUSY),
        ([CONDITION_FAILED, _NONE, _NONE], _state(COMPLETED), Verdict.REFUSED),
        ([_NONE, "ThrottlingError", _NONE], _state(COMPLETED), Verdict.TRANSIENT),
    ],
)
def test_a_bridged_staged_commit_is_judged_by_the_powertools_record_after_once_s_own(
    codes: list[str], powertools: PowertoolsState, verdict: Verdict
) -> None:
    assert (
        judge_staged_cancel(codes, None, me="me", payload_hash="h", powertools=powertools)
        is verdict
    )
    # once's own record refusing it speaks first.
    refused_by_record = [*codes[:-1], CONDITION_FAILED]
    old = Record(id="k", status=c.STATUS_COMPLETED, fence=1, owner="other", payload_hash="h")
    assert (
        judge_staged_cancel(
            refused_by_record, old, me="me", payload_hash="h", powertools=powertools
        )
        is Verdict.DUPLICATE
    )


def test_a_bridge_put_that_finds_its_own_hold_is_conservatively_a_takeover() -> None:
    """The SDK retried a put that had landed: what it replaced is no longer visible."""
    mine = PowertoolsState(INPROGRESS, False, False, True, once_holds=True, holder="me")
    theirs = PowertoolsState(INPROGRESS, False, False, True, once_holds=True, holder="other")
    powertools_own = PowertoolsState(INPROGRESS, False, True, True)
    assert powertools_takeover(mine, me="me") is True
    assert powertools_takeover(theirs, me="me") is False
    assert powertools_takeover(powertools_own, me="me") is True
    assert powertools_takeover(PowertoolsState(None, True, True, True), me="me") is False
