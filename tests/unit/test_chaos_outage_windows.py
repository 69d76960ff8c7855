"""The harness's DynamoDB outage windows: when they open, how long they stay open, and that
a run long enough always has one (the chaos suite asserts that the fault was injected)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from oncecli.chaos import harness
from oncecli.chaos.harness import OUTAGE_S, OutageWindows


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(harness.time, "monotonic", fake)
    return fake


def _run(windows: OutageWindows, clock: Clock, seconds: float, step: float = 0.5) -> list[bool]:
    """Tick every ``step`` seconds; whether the flag was up after each tick."""
    seen = []
    for _ in range(int(seconds / step)):
        clock.now += step
        windows.tick()
        seen.append(windows._flag.exists())
    return seen


def test_a_window_opens_within_one_and_a_half_gaps_of_the_start(
    tmp_path: Path, clock: Clock
) -> None:
    for seed in range(50):
        flag = tmp_path / f"{seed}.outage"
        windows = OutageWindows(flag, 0.05, random.Random(seed))
        seen = _run(windows, clock, 1.5 / 0.05 + 0.5)
        assert any(seen), f"seed {seed}: no window in 1.5 / rate seconds"
        windows.close()


def test_a_window_stays_open_for_the_outage_and_then_closes(tmp_path: Path, clock: Clock) -> None:
    flag = tmp_path / "x.outage"
    windows = OutageWindows(flag, 0.05, random.Random(1))
    seen = _run(windows, clock, 60, step=0.25)
    first = seen.index(True)
    open_ticks = seen[first:].index(False)
    assert open_ticks * 0.25 == pytest.approx(OUTAGE_S, abs=0.25)
    windows.close()
    assert not flag.exists()


def test_windows_come_at_the_rate_on_average(tmp_path: Path, clock: Clock) -> None:
    windows = OutageWindows(tmp_path / "x.outage", 0.02, random.Random(7))
    _run(windows, clock, 10_000)
    assert windows.opened == pytest.approx(0.02 * 10_000, rel=0.1)


def test_a_zero_rate_never_opens_a_window(tmp_path: Path, clock: Clock) -> None:
    windows = OutageWindows(tmp_path / "x.outage", 0.0, random.Random(1))
    assert not any(_run(windows, clock, 1000))
    assert windows.opened == 0
