"""The harness's two-hop workload on DynamoDB Local: a credit committed with the record, a
notification through the outbox to a second once consumer keyed on ``SOURCE_KEY``; built
two-phase (``once-atomic``) and with ``effects="staged"`` (``once-staged``: no claim, one
write per message), the two run side by side under every fault of the two-hop runs."""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from tests.chaos.rates import TWO_HOP_RATES

#: Every fault of the two-hop runs (a staged copy makes no claim to be killed after).
TWO_HOP_FAULTS = (
    "kill_after_claim",
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
)


@pytest.fixture(scope="module")
def runs(endpoints: Endpoints) -> dict[str, Run]:
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


def test_once_atomic_commits_each_credit_and_notification_once_under_every_fault(
    runs: dict[str, Run],
) -> None:
    """The credit committed with the record (``attempt.write``), the notification sent
    through the outbox to a second queue and applied by a second once consumer keyed on
    ``SOURCE_KEY``: no partial credit, none twice, each notification applied once, nothing
    owed at the end, nothing lost; and every invariant of the one-hop consumers as well."""
    atomic = runs["once-atomic"]
    assert atomic.deliveries >= 150
    assert set(atomic.violations) >= {
        "credit_partial",
        "credit_twice",
        "notified_not_once",
        "owed_at_end",
        "ledger_not_once",
    }
    assert atomic.violations == dict.fromkeys(atomic.violations, 0)
    assert atomic.lost == 0
    assert atomic.notifications["executions"] > 0
    for fault in TWO_HOP_FAULTS:
        assert atomic.faults.get(fault, 0) > 0, f"{fault} was never injected"
    # A refused send leaves the record owing its notification: a later delivery sent it.
    assert atomic.faults["outcome_owed"] > 0


def test_once_staged_commits_each_credit_and_notification_once_under_every_fault(
    runs: dict[str, Run],
) -> None:
    """Copies in flight all run business code under ``effects="staged"``; exactly one
    commit lands per key: no credit partial or twice, each notification applied once,
    nothing owed at the end, nothing lost, no record ever claimed or FAILED."""
    staged = runs["once-staged"]
    assert staged.deliveries >= 150
    assert staged.violations == dict.fromkeys(staged.violations, 0)
    assert staged.lost == 0
    assert staged.notifications["executions"] > 0
    assert set(staged.violations) >= {
        "credit_partial",
        "credit_twice",
        "notified_not_once",
        "owed_at_end",
        "ledger_not_once",
        "one_completed_result",
        "staged_not_one_write",
    }
    assert "staged_not_one_write" not in runs["once-atomic"].violations
    # A mismatched copy runs business code before its commit is refused: measured, and its
    # effect never landing is credit_twice's and credit_partial's to check.
    assert "mismatch_executed" not in staged.violations
    assert staged.faults["workload_mismatch"] > 0
    # Every fault of the two-hop runs but the kill after a claim: a staged copy makes none.
    # Its pause comes before its commit, and lasts until another copy's commit landed.
    for fault in TWO_HOP_FAULTS:
        if fault != "kill_after_claim":
            assert staged.faults.get(fault, 0) > 0, f"{fault} was never injected"
    assert staged.faults.get("kill_after_claim", 0) == 0
    # A copy's commit refused by the one that landed: seed 14 sends three payments of its
    # first wave again in the second (``sequential``), after the first wave was done.
    assert staged.outcomes.get("duplicate", 0) + staged.outcomes.get("owed_sent", 0) > 0
    assert staged.faults["outcome_owed"] > 0
    # One write per new message: the two-phase consumer claims first as well.
    assert (
        staged.dynamodb_calls.get("UpdateItem", 0)
        < runs["once-atomic"].dynamodb_calls["UpdateItem"]
    )
