"""The harness's DynamoDB outage windows: each opens on a DynamoDB call, never on the clock,
so every window refuses at least one call and every run that calls DynamoDB has one (the
chaos suite asserts that the fault was injected). Once open, a window stays open for
``OUTAGE_S`` and then closes.

The case that failed: a window opened by the clock in the tail of a run, while every message
waited out its backoff and no worker called DynamoDB, injected nothing.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from proof.chaos.faults import Injector
from proof.chaos.harness import OUTAGE_S, OutageWindows
from tests.unit.proof.chaos_fakes import Clock, dynamodb_client, engine, fake_monotonic


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The monotonic clock of the harness and of the workers' hooks (one ``time`` module)."""
    return fake_monotonic(monkeypatch)


class Worker:
    """One worker's DynamoDB client with the outage hook installed, as ``worker.py`` does."""

    def __init__(self, flag: Path) -> None:
        self.client = dynamodb_client()
        self.injector = Injector(self.client)
        self.injector.outage(str(flag), str(_armed(flag)))
        self.client.meta.events.register("before-send.dynamodb", engine)

    def call(self) -> bool:
        """One DynamoDB call; whether the outage refused it."""
        try:
            self.client.list_tables()
        except ClientError as error:
            assert error.response["Error"]["Code"] == "InternalServerError"
            return True
        return False


def _armed(flag: Path) -> Path:
    return flag.with_suffix(".armed")


def _windows(flag: Path, rate: float, seed: int = 1) -> OutageWindows:
    return OutageWindows(flag, _armed(flag), rate, random.Random(seed))


class Run:
    """The harness ticking every ``tick`` seconds while workers call DynamoDB at the given
    moments; records what each call met and when the window's flag appeared."""

    def __init__(self, windows: OutageWindows, worker: Worker, clock: Clock, flag: Path) -> None:
        self.windows, self.worker, self.clock, self.flag = windows, worker, clock, flag
        self.refused: list[float] = []
        self.served: list[float] = []
        self.opened_by_tick = 0
        self.opened_by_call = 0

    def call(self) -> bool:
        before = self.flag.exists()
        refused = self.worker.call()
        (self.refused if refused else self.served).append(self.clock.now)
        self.opened_by_call += not before and self.flag.exists()
        return refused

    def until(self, end: float, *, call_every: float | None, tick: float = 0.5) -> None:
        next_call = self.clock.now if call_every else None
        while self.clock.now < end:
            self.clock.now += tick
            if next_call is not None and self.clock.now >= next_call:
                self.call()
                next_call += call_every or 0
            before = self.flag.exists()
            self.windows.tick()
            self.opened_by_tick += not before and self.flag.exists()


def test_the_run_s_first_dynamodb_call_opens_a_window_however_late_it_comes(
    tmp_path: Path, clock: Clock
) -> None:
    flag = tmp_path / "run.outage"
    windows = _windows(flag, 0.05)
    first, second = Worker(flag), Worker(flag)
    run = Run(windows, first, clock, flag)
    run.until(clock.now + 10_000, call_every=None)  # far past 1.5 / rate: nobody calls
    assert not flag.exists()
    assert windows.opened == 0

    assert first.call(), "the first call opens the window and is refused itself"
    assert second.call(), "the window is every worker's"
    clock.now += OUTAGE_S
    windows.tick()
    assert not flag.exists()
    assert not first.call() and not second.call()
    assert windows.opened == 1
    assert first.injector.counts["outage"] == 1 and second.injector.counts["outage"] == 1


def test_a_window_armed_in_an_idle_tail_waits_for_the_next_call(
    tmp_path: Path, clock: Clock
) -> None:
    """The run that failed: traffic, then a long tail with no DynamoDB call (every message
    waiting out its backoff) during which a clock-drawn window would open and close."""
    for seed in range(20):
        flag = tmp_path / f"{seed}.outage"
        windows = _windows(flag, 0.05, seed)
        run = Run(windows, Worker(flag), clock, flag)
        run.until(clock.now + 8, call_every=0.5)  # traffic: the first window, then no more
        tail_start = clock.now
        run.until(clock.now + 1000, call_every=None)  # the idle tail: 50 times 1 / rate
        assert not flag.exists(), f"seed {seed}: a window opened with nobody calling"
        assert run.opened_by_tick == 0
        assert all(t < tail_start for t in run.refused)

        assert run.call(), f"seed {seed}: the tail's first call did not open the window"
        run.until(clock.now + OUTAGE_S, call_every=None)
        windows.close()
        assert windows.opened == run.opened_by_call == 2, f"seed {seed}"


def test_every_window_opens_on_a_call_and_refuses_it_under_bursty_traffic(
    tmp_path: Path, clock: Clock
) -> None:
    """Bursts of calls between idle stretches of every length: windows open only on a call
    (never on the clock), and every window that opened refused at least that call."""
    rng = random.Random(3)
    flag = tmp_path / "bursty.outage"
    windows = _windows(flag, 0.1, seed=3)
    run = Run(windows, Worker(flag), clock, flag)
    for _ in range(60):
        run.until(clock.now + rng.uniform(0.5, 10), call_every=rng.choice([0.5, 1.0, 3.0]))
        run.until(clock.now + rng.choice([0.5, 5, 30, 120]), call_every=None)
    windows.close()
    assert run.opened_by_tick == 0
    assert windows.opened == run.opened_by_call >= 10
    assert len(run.refused) >= windows.opened


def test_a_window_stays_open_for_the_outage_and_then_closes(tmp_path: Path, clock: Clock) -> None:
    flag = tmp_path / "x.outage"
    windows = _windows(flag, 0.05)
    run = Run(windows, Worker(flag), clock, flag)
    run.until(clock.now + 60, call_every=0.25, tick=0.25)
    first = run.refused[0]
    open_for = max(t for t in run.refused if t < first + 10) - first
    assert open_for == pytest.approx(OUTAGE_S, abs=0.5)
    windows.close()
    assert not flag.exists()


def test_windows_come_at_the_rate_under_steady_traffic(tmp_path: Path, clock: Clock) -> None:
    windows = _windows(tmp_path / "x.outage", 0.02, seed=7)
    run = Run(windows, Worker(tmp_path / "x.outage"), clock, tmp_path / "x.outage")
    run.until(clock.now + 4000, call_every=2.0)
    assert windows.opened == pytest.approx(0.02 * 4000, rel=0.1)


def test_a_zero_rate_never_opens_a_window(tmp_path: Path, clock: Clock) -> None:
    flag = tmp_path / "x.outage"
    windows = _windows(flag, 0.0)
    run = Run(windows, Worker(flag), clock, flag)
    run.until(clock.now + 1000, call_every=1.0)
    windows.close()
    assert run.refused == [] and windows.opened == 0


def test_the_end_of_a_run_disarms_and_closes_the_open_window(tmp_path: Path, clock: Clock) -> None:
    flag = tmp_path / "x.outage"
    windows = _windows(flag, 0.05)
    assert Worker(flag).call()
    windows.close()
    assert windows.opened == 1
    assert not flag.exists() and not _armed(flag).exists()
    assert not Worker(flag).call()
