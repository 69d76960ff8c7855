"""``make chaos`` says why it exits as it does: once's violations fail the run, by name and
count; the peers' are measured, never a failure."""

from __future__ import annotations

from pathlib import Path

from proof.chaos.command import verdict
from proof.chaos.harness import Run


def run(impl: str, **violations: int) -> Run:
    counts = {"lost": 0, "two_live_owners": 0, "order_broken": 0} | violations
    return Run(impl=impl, violations=counts, lost=counts["lost"])


def test_once_keeping_every_invariant_exits_0_and_names_what_was_checked() -> None:
    code, why = verdict([run("once"), run("once-nobackoff"), run("powertools", lost=3)], None)
    assert code == 0
    assert why == "exit 0: once and once-nobackoff kept every invariant and lost nothing"


def test_a_violation_by_once_exits_1_naming_the_consumer_the_invariant_and_the_count() -> None:
    code, why = verdict([run("once", two_live_owners=2, lost=1), run("naive", lost=9)], None)
    assert code == 1
    assert why.startswith("exit 1: once: lost 1, two_live_owners 2; ")
    assert "naive" not in why
    assert "--keep-history" in why


def test_a_kept_history_is_pointed_at() -> None:
    _, why = verdict([run("once-nobackoff", order_broken=1)], Path("/tmp/h"))
    assert why == "exit 1: once-nobackoff: order_broken 1; the histories are in /tmp/h"


def test_a_run_without_once_asserts_nothing() -> None:
    code, why = verdict([run("naive", lost=2)], None)
    assert code == 0
    assert "nothing was asserted" in why
