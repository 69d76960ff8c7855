"""A small seeded run of the fault-injection harness, on DynamoDB Local.

once must come out with no violation and nothing lost; the control run (once finalizing
without its fence) must be caught, or the harness proves nothing. The peers run under the
same faults; their figures are measured, not asserted.
"""

from __future__ import annotations

import pytest

from oncecli.chaos.harness import Endpoints, Run, chaos

# Enough zombies and crashes in a few hundred deliveries to exercise every path.
RATES = {
    "pause": 0.03,
    "kill_after_claim": 0.01,
    "kill_after_effect": 0.01,
    "kill_before_finalize": 0.01,
    "throttle": 0.05,
    "lost_response": 0.05,
}


@pytest.fixture(scope="module")
def runs(dynamodb_local: dict, moto_server: str) -> dict[str, Run]:
    endpoints = Endpoints(sqs=moto_server, dynamodb=dynamodb_local["endpoint"])
    done = chaos(
        300,
        seed=11,
        endpoints=endpoints,
        workers=3,
        rates=RATES,
        implementations=("once", "once-unfenced", "powertools", "naive"),
    )
    return {run.impl: run for run in done}


def test_once_keeps_every_invariant_under_every_fault(runs: dict[str, Run]) -> None:
    once = runs["once"]
    assert once.deliveries >= 250
    assert once.violations == dict.fromkeys(once.violations, 0)
    assert once.lost == 0
    for fault in ("pause", "throttle", "lost_response", "redriven"):
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
