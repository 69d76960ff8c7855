"""Every fault the harness enables is injected at least once per run, by construction: the
chaos suite asserts that each was, and must never fail because the draws fell badly, the
machine was fast, or the run's tail was idle.

- A fault drawn at a rate fires on the run's first event that can fire it, in whichever
  worker process gets there first (``faults.owe``, ``faults.Dice``), and at its rate after.
- With a short retention, the first wave lasts until a TTL sweep has deleted a record
  (``harness._SweepOwed``).
- Outage windows open on a DynamoDB call: ``test_chaos_outage_windows.py``.
"""

from __future__ import annotations

import multiprocessing
import random
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from proof.chaos import harness
from proof.chaos.faults import DRAWN, Dice, Injector, owe
from proof.chaos.harness import DEFAULT_RATES, _SweepOwed
from proof.errors import HarnessFailed
from tests.unit.proof.chaos_fakes import Clock, dynamodb_client, engine, fake_monotonic

#: A rate so small that no draw of these tests ever fires it: what fires is the debt.
NEVER = 1e-12


def test_every_fault_drawn_at_a_rate_is_owed_once_enabled() -> None:
    """Every rate of the harness but the outage's (windows per second, opened by calls) is
    a per-event draw that ``Dice`` makes, so none can be left out of the debt."""
    assert set(DRAWN) == set(DEFAULT_RATES) - {"outage"}


def test_a_run_owes_each_enabled_drawn_fault_and_none_other(tmp_path: Path) -> None:
    prefix = str(tmp_path / "run.owed")
    owed = owe(prefix, {"pause": 0.01, "throttle": 0.0, "outage": 0.5, "delete_failed": 1.0})
    assert sorted(p.name for p in owed) == ["run.owed.delete_failed", "run.owed.pause"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in owed)


def test_the_run_s_first_chance_fires_an_owed_fault_whatever_the_draw(tmp_path: Path) -> None:
    prefix = str(tmp_path / "run.owed")
    owe(prefix, {"pause": NEVER})
    dice = Dice(random.Random(0), prefix)
    rolls = [dice.roll("pause", NEVER) for _ in range(10_000)]
    assert rolls[0] and not any(rolls[1:])


def test_a_fault_at_rate_zero_is_never_forced(tmp_path: Path) -> None:
    prefix = str(tmp_path / "run.owed")
    Path(f"{prefix}.pause").touch()  # even with its file there
    assert not any(Dice(random.Random(0), prefix).roll("pause", 0.0) for _ in range(100))


def test_the_draws_at_the_rate_are_the_same_with_or_without_the_debt(tmp_path: Path) -> None:
    prefix = str(tmp_path / "run.owed")
    owe(prefix, {"delete_failed": 0.3})
    owing, free = Dice(random.Random(5), prefix), Dice(random.Random(5))
    with_debt = [owing.roll("delete_failed", 0.3) for _ in range(1000)]
    without = [free.roll("delete_failed", 0.3) for _ in range(1000)]
    assert with_debt[0] and with_debt[1:] == without[1:]


def _race(prefix: str, seed: int, start: Any, fired: Any) -> None:
    start.wait()
    if Dice(random.Random(seed), prefix).roll("short_visibility", NEVER):
        fired.put(seed)


def test_of_every_worker_process_exactly_one_takes_the_debt(tmp_path: Path) -> None:
    """Workers are processes, killed and respawned: the debt is a file, taken once per run."""
    prefix = str(tmp_path / "run.owed")
    owe(prefix, {"short_visibility": NEVER})
    ctx = multiprocessing.get_context("fork")
    start, fired = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(prefix, i, start, fired)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    takers = []
    while not fired.empty():
        takers.append(fired.get())
    assert len(takers) == 1
    # A worker respawned after that starts with a fresh Dice: the run owes nothing more.
    assert not Dice(random.Random(99), prefix).roll("short_visibility", NEVER)


def test_an_injector_s_client_fault_fires_on_the_first_call_it_can(tmp_path: Path) -> None:
    prefix = str(tmp_path / "run.owed")
    owe(prefix, {"throttle": NEVER})
    client = dynamodb_client()
    injector = Injector(client, dice=Dice(random.Random(0), prefix))
    injector.throttle(NEVER, operations=("ListTables",))
    client.meta.events.register("before-send.dynamodb", engine)
    client.describe_limits()  # not an operation the fault is for: it keeps the debt
    with pytest.raises(ClientError, match="Throttling"):
        client.list_tables()
    for _ in range(50):
        client.list_tables()
    assert injector.counts == {"throttle": 1}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return fake_monotonic(monkeypatch)


class Table:
    """The idempotency table as the sweep sees it: records and the moments they expire."""

    def __init__(self, clock: Clock, expiries: list[float]) -> None:
        self.clock = clock
        self.expiries = expiries
        self.sweeps = 0

    def sweep(self) -> int:
        self.sweeps += 1
        expired = [t for t in self.expiries if t < self.clock.now]
        self.expiries = [t for t in self.expiries if t >= self.clock.now]
        return len(expired)

    def holds_items(self) -> bool:
        return bool(self.expiries)


def _first_wave(owed: _SweepOwed, table: Table, clock: Clock, drained_at: float) -> float:
    """The harness's loop once the queue is empty: it goes on while the sweep is owed,
    sweeping every ``SWEEP_S``; returns when the wave ended."""
    swept = 0
    clock.now = drained_at
    owed.drained()
    last_sweep = clock.now
    while owed.waits(swept):
        clock.now += 0.5
        if clock.now - last_sweep > harness.SWEEP_S:
            swept += table.sweep()
            last_sweep = clock.now
    return clock.now


def test_a_first_wave_shorter_than_the_retention_waits_for_a_sweep_that_deletes(
    clock: Clock,
) -> None:
    """A fast machine: the queue drained 5 s in, before any record expired (20 s)."""
    table = Table(clock, expiries=[1000 + 20 + i for i in range(5)])
    owed = _SweepOwed(20, table.sweep, table.holds_items)
    ended = _first_wave(owed, table, clock, drained_at=1005)
    assert 1020 < ended <= 1020 + harness.SWEEP_S + 1
    assert len(table.expiries) < 5


def test_a_first_wave_that_outlived_the_retention_does_not_wait(clock: Clock) -> None:
    table = Table(clock, expiries=[1020.0])
    owed = _SweepOwed(20, table.sweep, table.holds_items)
    owed.drained()
    assert not owed.waits(swept=3)


def test_nothing_owed_without_a_short_retention(clock: Clock) -> None:
    table = Table(clock, expiries=[1020.0])
    owed = _SweepOwed(None, table.sweep, table.holds_items)
    owed.drained()
    assert not owed.waits(swept=0)


def test_a_sweep_that_deletes_nothing_past_every_record_s_retention_is_the_engine_s_failure(
    clock: Clock,
) -> None:
    owed = _SweepOwed(20, lambda: 0, lambda: True)
    owed.drained()
    clock.now += 20
    assert owed.waits(swept=0)
    clock.now += harness.MAX_SKEW_S + 1
    with pytest.raises(HarnessFailed, match="no record was swept"):
        owed.waits(swept=0)


def test_an_empty_table_owes_no_sweep_past_the_retention(clock: Clock) -> None:
    owed = _SweepOwed(20, lambda: 0, lambda: False)
    owed.drained()
    clock.now += 20 + harness.MAX_SKEW_S + 1
    assert not owed.waits(swept=0)
