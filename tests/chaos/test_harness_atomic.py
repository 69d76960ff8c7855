"""The harness's two-hop consumer (DynamoDB Local): a credit committed with the record, a
notification through the outbox to a second once consumer keyed on ``SOURCE_KEY``."""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from tests.chaos.rates import TWO_HOP_RATES


@pytest.fixture(scope="module")
def atomic_runs(endpoints: Endpoints) -> dict[str, Run]:
    done = chaos(
        200,
        seed=14,
        endpoints=endpoints,
        workers=3,
        rates=TWO_HOP_RATES,
        implementations=("once-atomic",),
    )
    return {run.impl: run for run in done}


def test_once_atomic_commits_each_credit_and_notification_once_under_every_fault(
    atomic_runs: dict[str, Run],
) -> None:
    """The credit committed with the record (``attempt.write``), the notification sent
    through the outbox to a second queue and applied by a second once consumer keyed on
    ``SOURCE_KEY``: no partial credit, none twice, each notification applied once, nothing
    owed at the end, nothing lost; and every invariant of the one-hop consumers as well."""
    atomic = atomic_runs["once-atomic"]
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
    for fault in (
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
    ):
        assert atomic.faults.get(fault, 0) > 0, f"{fault} was never injected"
    # A refused send leaves the record owing its notification: a later delivery sent it.
    assert atomic.faults["outcome_owed"] > 0
