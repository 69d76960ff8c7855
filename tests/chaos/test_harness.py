"""Small seeded runs of the fault-injection harness, on DynamoDB Local: a standard queue,
the FIFO queue, the short record retention and the two-hop consumer are modules of their
own (``test_harness_*``), so that ``make test`` runs them side by side, a module to each
process.

once must come out of each with no violation and nothing lost; each control (once
finalizing without its fence; a FIFO loop that ignores message groups) must be caught, or
the harness proves nothing. The peers run under the same faults; their figures are
measured, not asserted. Every check of a run says the run's figures when it fails
(``Run.figures``), and each module keeps its runs' histories where those figures say.
"""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from proof.chaos.invariants import FinalState, lost, two_live_owners
from proof.chaos.traffic import build
from tests.chaos.rates import RATES

S = 1_000_000_000  # one second in monotonic nanoseconds


@pytest.fixture(scope="module")
def runs(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    done = chaos(
        300,
        seed=11,
        endpoints=endpoints,
        workers=3,
        rates=RATES,
        implementations=("once", "once-unfenced", "powertools", "naive"),
        side_by_side=True,
        # Kept (pytest keeps its last temporary directories): a failure names it.
        history_dir=tmp_path_factory.mktemp("chaos-standard"),
    )
    return {run.impl: run for run in done}


def test_each_seed_s_first_wave_leaves_poison_in_the_dlq_for_the_redrive() -> None:
    """Poison payments fail on every delivery, so SQS moves them to the DLQ before the first
    wave drains, and the redrive between the waves moves them back: "redriven" is injected
    because the seeded workload has some, whatever the run's timing."""
    for seed in (11, 12, 13):
        work = build(max(20, int(300 / 1.3)), seed)  # as ``chaos`` builds it
        assert any(s.kind == "poison" and s.wave == 0 for s in work.sends), seed


def test_a_lease_released_by_a_write_whose_answer_never_came_is_not_held_by_two() -> None:
    """A run of the retention module on a loaded machine (seed 13) counted one
    ``two_live_owners`` that no consumer caused. Worker w1 claimed poison payment
    ``pay-13-00113`` (its lease ~4 s), whose business code raises at once, so its FAILED
    goes out within a millisecond; 4 ms after the claim another thread of w1 fired
    ``kill_before_finalize`` and the process died before an answer came back. The FAILED
    had landed: the respawned w1, handed the message again after a 1 s visibility timeout,
    claimed the record at 2.5 s, which only a FAILED record allowed then (the first lease
    ran 1.5 s more, the record's expiry 25 s). The history held no finalize of the first
    claim, so its lease was taken as held until it ran out. A finalize now counts from its
    send (``finalize_sent``), answered or not."""
    first = {"e": "claim", "item": "k", "claim": "a", "sent": 0, "landed": int(0.07 * S),
             "lease_ms": 3978}  # fmt: skip
    second = {"e": "claim", "item": "k", "claim": "b", "sent": int(1.85 * S),
              "landed": int(2.52 * S), "lease_ms": 3905}  # fmt: skip
    failed_sent = {"e": "finalize_sent", "item": "k", "claim": "a", "sent": int(0.075 * S)}
    assert two_live_owners([first, second], skew_ms=800) == 1  # what the old history said
    assert two_live_owners([first, failed_sent, second], skew_ms=800) == 0
    # A finalize sent only after the second claim had landed releases nothing before it.
    late = {**failed_sent, "sent": int(2.6 * S)}
    assert two_live_owners([first, late, second], skew_ms=800) == 1


def test_a_message_whose_delete_went_out_is_not_lost_when_its_ack_was_never_written() -> None:
    """The harness stops the workers once the queue is empty: one may be killed after its
    delete landed and before it wrote ``ack``. The queue is empty, so the message was
    deleted, and a worker deletes only what its consumer said was done."""
    final = FinalState(sent={"h1", "h2"}, in_dlq=set(), poison=set(), payments={},
                       hid_keys={}, ledger_entries={}, balances={})  # fmt: skip
    acked = {"e": "ack", "hid": "h1"}
    deleting = {"e": "delete_sent", "hids": ["h2"]}
    assert lost([acked], final) == 1
    assert lost([acked, deleting], final) == 0


def test_once_keeps_every_invariant_under_every_fault(runs: dict[str, Run]) -> None:
    once = runs["once"]
    figures = once.figures()
    assert once.deliveries >= 250, figures
    assert once.violations == dict.fromkeys(once.violations, 0), figures
    assert once.lost == 0, figures
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
        assert once.faults.get(fault, 0) > 0, f"{fault} was never injected\n{figures}"


def test_once_reports_the_time_from_a_busy_or_failed_delivery_to_done(
    runs: dict[str, Run],
) -> None:
    once = runs["once"]
    figures = once.figures()
    assert set(once.to_completion) == {"busy", "failed"}, f"{once.to_completion}\n{figures}"
    # Poison payments fail on every delivery and end in the DLQ: failed, never done.
    assert once.faults["workload_poison"] > 0, figures
    assert once.to_completion["failed"]["unfinished"] > 0, f"{once.to_completion}\n{figures}"
    for impl in ("powertools", "naive"):
        assert runs[impl].to_completion == {}, runs[impl].figures()


def test_the_harness_catches_a_finalize_without_its_fence(runs: dict[str, Run]) -> None:
    control = runs["once-unfenced"]
    figures = control.figures()
    assert control.faults.get("pause", 0) > 0, figures
    caught = control.violations["stale_write_landed"] + control.violations["one_completed_result"]
    assert caught > 0, figures


def test_the_peers_ran_under_the_same_workload(runs: dict[str, Run]) -> None:
    for impl in ("powertools", "naive"):
        figures = runs[impl].figures()
        assert runs[impl].deliveries > 0, figures
        assert set(runs[impl].violations) == set(runs["once"].violations), figures
