"""The big-batch benchmark's arithmetic and its CPU readings from /proc: the floor it
reports beside every figure, and the meters that feed it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from proof.bench import batches


@pytest.mark.parametrize(
    ("size", "workers", "cpu", "engine", "bound", "floor"),
    [
        # 10 records, 10 workers: one round of RTT + business + RTT, CPU far below it.
        (10, 10, 0.5, 0.1, "waits", 40.0),
        # 100 records, 10 workers: ten rounds.
        (100, 10, 0.5, 0.1, "waits", 400.0),
        # 1,000 records, 100 workers: 400 ms of waits, 3,500 ms of CPU under one GIL.
        (1000, 100, 3.5, 0.0, "consumer CPU", 3500.0),
        # The engine's CPU spread with the consumer's over the cores outweighs the GIL.
        (1000, 1000, 1.0, 5.0, "all CPU", (1000 * 1.0 + 2000 * 5.0) / (os.cpu_count() or 1)),
    ],
)
def test_the_floor_is_the_largest_of_waits_gil_and_all_cpu(
    size: int, workers: int, cpu: float, engine: float, bound: str, floor: float
) -> None:
    if bound == "all CPU" and (os.cpu_count() or 1) > 10:
        pytest.skip("with this many cores the consumer's GIL stays the bound")
    got = batches.floor_ms(size, workers, cpu, engine)
    assert got["bound"] == bound
    assert got["floor_ms"] == pytest.approx(floor)


def test_an_uneven_batch_pays_a_whole_round_for_its_last_records() -> None:
    assert batches.floor_ms(11, 10, 0.0, 0.0)["waits_ms"] == 2 * (
        batches.CALLS_PER_RECORD * batches.RTT_MS + batches.BUSINESS_MS
    )


def test_the_meters_see_a_child_burn_cpu_while_this_process_waits() -> None:
    burn = "import time\nend = time.time() + 10\nwhile time.time() < end: pass"
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        machine, mine = batches.machine_busy_s(), time.process_time()
        deadline = time.monotonic() + 10
        while batches.process_cpu_s(child.pid) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert batches.process_cpu_s(child.pid) >= 0.3
        assert batches.machine_busy_s() - machine >= 0.3
        assert time.process_time() - mine < 0.2
    finally:
        child.kill()
        child.wait()


def test_engine_pid_names_the_child_serving_a_port_and_refuses_a_stranger() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)", "--port", "4242"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                assert batches.engine_pid(4242) == child.pid
                break
            except RuntimeError:
                time.sleep(0.05)
        else:
            pytest.fail("the child never showed up under /proc")
        with pytest.raises(RuntimeError, match="port 4343"):
            batches.engine_pid(4343)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("scale", ["smoke", "goal", "quick", "full"])
def test_every_scale_measures_the_goal_sizes_it_claims(scale: str) -> None:
    plan = batches.plan(scale)
    assert all(reps > 0 for reps in plan.reps.values())
    assert set(plan.sweep_sizes) <= set(plan.reps)
    if scale != "smoke":
        assert set(batches.GOALS) <= set(plan.reps)
        assert 1000 <= plan.warm_least <= plan.warm_most


def test_a_staged_record_waits_one_round_trip_and_its_business_time_per_round() -> None:
    staged = batches.floor_ms(10, 10, 0.0, 0.0, calls=batches.CALLS["once-staged"])
    assert staged["waits_ms"] == batches.RTT_MS + batches.BUSINESS_MS
