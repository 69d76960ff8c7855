"""The harness's two-hop workload built with ``effects="staged"`` (``once-staged``), beside
the same business code built two-phase (``once-atomic``), on DynamoDB Local: no claim, one
write (a transaction with the staged credit, or with the notification's effect) per
message, and every fault of the two-hop runs."""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from tests.chaos.rates import TWO_HOP_RATES


@pytest.fixture(scope="module")
def staged_runs(endpoints: Endpoints) -> dict[str, Run]:
    done = chaos(
        200,
        seed=14,
        endpoints=endpoints,
        workers=3,
        rates=TWO_HOP_RATES,
        implementations=("once-atomic", "once-staged"),
        side_by_side=True,
    )
    return {run.impl: run for run in done}


def test_once_staged_commits_each_credit_and_notification_once_under_every_fault(
    staged_runs: dict[str, Run],
) -> None:
    """Copies in flight all run business code under ``effects="staged"``; exactly one
    commit lands per key: no credit partial or twice, each notification applied once,
    nothing owed at the end, nothing lost, no record ever claimed or FAILED; and so for the
    same business code two-phase beside it."""
    for impl in ("once-atomic", "once-staged"):
        run = staged_runs[impl]
        assert run.deliveries >= 150, impl
        assert run.violations == dict.fromkeys(run.violations, 0), impl
        assert run.lost == 0, impl
        assert run.notifications["executions"] > 0, impl
    staged = staged_runs["once-staged"]
    assert set(staged.violations) >= {
        "credit_partial",
        "credit_twice",
        "notified_not_once",
        "owed_at_end",
        "ledger_not_once",
        "one_completed_result",
        "staged_not_one_write",
    }
    assert "staged_not_one_write" not in staged_runs["once-atomic"].violations
    # A mismatched copy runs business code before its commit is refused: measured, and its
    # effect never landing is credit_twice's and credit_partial's to check.
    assert "mismatch_executed" not in staged.violations
    assert staged.faults["workload_mismatch"] > 0
    # Every fault of the two-hop runs but the kill after a claim: a staged copy makes none.
    # Its pause comes before its commit, and lasts until another copy's commit landed.
    for fault in (
        "kill_after_effect",
        "kill_before_finalize",
        "kill_before_clear",
        "pause",
        "throttle",
        "lost_response",
        "send_failed",
        "send_duplicated",
        "redriven",
        "outage",
        "outage_windows",
        "delete_failed",
        "short_visibility",
    ):
        assert staged.faults.get(fault, 0) > 0, f"{fault} was never injected"
    assert staged.faults.get("kill_after_claim", 0) == 0
    # A copy's commit refused by the one that landed: seed 14 sends three payments of its
    # first wave again in the second (``sequential``), after the first wave was done.
    assert staged.outcomes.get("duplicate", 0) + staged.outcomes.get("owed_sent", 0) > 0
    assert staged.faults["outcome_owed"] > 0
    # One write per new message: the two-phase consumer claims first as well.
    assert (
        staged.dynamodb_calls.get("UpdateItem", 0)
        < staged_runs["once-atomic"].dynamodb_calls["UpdateItem"]
    )
