"""Small seeded runs of the fault-injection harness, on DynamoDB Local: a standard queue,
the FIFO queue, the short record retention and the two-hop consumer are modules of their
own (``test_harness_*``), so that ``make test`` runs them side by side, a module to each
process.

once must come out of each with no violation and nothing lost; each control (once
finalizing without its fence; a FIFO loop that ignores message groups) must be caught, or
the harness proves nothing. The peers run under the same faults; their figures are
measured, not asserted.
"""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from proof.chaos.traffic import build
from tests.chaos.rates import RATES


@pytest.fixture(scope="module")
def runs(endpoints: Endpoints) -> dict[str, Run]:
    done = chaos(
        300,
        seed=11,
        endpoints=endpoints,
        workers=3,
        rates=RATES,
        implementations=("once", "once-unfenced", "powertools", "naive"),
        side_by_side=True,
    )
    return {run.impl: run for run in done}


def test_each_seed_s_first_wave_leaves_poison_in_the_dlq_for_the_redrive() -> None:
    """Poison payments fail on every delivery, so SQS moves them to the DLQ before the first
    wave drains, and the redrive between the waves moves them back: "redriven" is injected
    because the seeded workload has some, whatever the run's timing."""
    for seed in (11, 12, 13):
        work = build(max(20, int(300 / 1.3)), seed)  # as ``chaos`` builds it
        assert any(s.kind == "poison" and s.wave == 0 for s in work.sends), seed


def test_once_keeps_every_invariant_under_every_fault(runs: dict[str, Run]) -> None:
    once = runs["once"]
    assert once.deliveries >= 250
    assert once.violations == dict.fromkeys(once.violations, 0)
    assert once.lost == 0
    for fault in (
        "pause",
        "throttle",
        "lost_response",
        "redriven",
        "outage",
        "outage_windows",
        "delete_failed",
        "short_visibility",
    ):
        assert once.faults.get(fault, 0) > 0, f"{fault} was never injected"


def test_once_reports_the_time_from_a_busy_or_failed_delivery_to_done(
    runs: dict[str, Run],
) -> None:
    once = runs["once"]
    assert set(once.to_completion) == {"busy", "failed"}
    # Poison payments fail on every delivery and end in the DLQ: failed, never done.
    assert once.faults["workload_poison"] > 0
    assert once.to_completion["failed"]["unfinished"] > 0
    for impl in ("powertools", "naive"):
        assert runs[impl].to_completion == {}


def test_the_harness_catches_a_finalize_without_its_fence(runs: dict[str, Run]) -> None:
    control = runs["once-unfenced"]
    assert control.faults.get("pause", 0) > 0
    assert control.violations["stale_write_landed"] + control.violations["one_completed_result"] > 0


def test_the_peers_ran_under_the_same_workload(runs: dict[str, Run]) -> None:
    for impl in ("powertools", "naive"):
        assert runs[impl].deliveries > 0
        assert set(runs[impl].violations) == set(runs["once"].violations)
