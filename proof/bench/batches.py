"""Big batches: ``once`` against Powertools at 10, 100 and 1,000 records per batch, wall
time and CPU, beside the floor this machine allows.

The event source mapping hands a function up to 10,000 records per batch, and teams raise
the batch size to cut invocations. Here each batch carries fresh keys (the new path: two
DynamoDB calls per record), every call waits ``RTT_MS`` before it leaves (``Wire``) and the
business function sleeps ``BUSINESS_MS``. For every batch we record:

- the wall time of ``handler(event, context)``;
- the CPU the consumer's process spent on it (``time.process_time``: every thread), which is
  what bounds a Lambda with many records in flight, since its CPU is a share of a core;
- the CPU the engine's process spent (``/proc/<pid>/stat``), and the CPU every other process
  on the machine spent meanwhile (``/proc/stat``): the engine shares this machine's cores
  with the consumer, and other load is noise that the page reports beside the figures.

From the CPU measured per record, the floor of ``once``'s batch time on this machine is the
largest of: the waits (``ceil(n / workers)`` rounds of claim RTT + business + complete RTT),
the consumer's CPU (its Python threads share one GIL, so at most one core), and the
consumer's and the engine's CPU spread over all cores. Powertools runs records one after the
other, so its time is ``n`` times one record's.

``once`` under ``effects="staged"`` (``once-staged``: business code first, then one
conditional write, no claim) runs beside them in the same batches: one DynamoDB call per new
record, so its waits are one RTT + business per round.

DynamoDB Local is warmed up first, until its CPU per call stops falling (its JIT compiles
the request path over the first few thousand calls), so no consumer is charged for it; the
consumers then alternate batch by batch, so that drifting load hits both alike. A second
table sweeps ``once``'s ``max_workers`` at the large batch sizes: the data behind its
default.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from once.constants import DEFAULT_MAX_WORKERS
from proof.bench.subjects import Handler, Subjects, body, business, context, new_keys, sqs_event

#: The consumers of the warm-up (what warms the engine's request path).
COMPARED = ("once", "powertools")
#: The consumers timed batch by batch: two-phase ``once``, staged ``once``, Powertools.
TIMED = ("once", "once-staged", "powertools")
RTT_MS = 10.0
BUSINESS_MS = 20.0
#: DynamoDB calls per new record of the two-phase consumers (claim + complete, put + update).
CALLS_PER_RECORD = 2
#: DynamoDB calls per new record, per timed consumer (staged: the one commit).
CALLS = {"once": CALLS_PER_RECORD, "once-staged": 1, "powertools": CALLS_PER_RECORD}
#: Batch-time goals, once over Powertools, by batch size (one run, DynamoDB Local).
GOALS = {10: 0.12, 100: 0.07}
#: The same goals for ``once`` under ``effects="staged"``.
GOALS_STAGED = {10: 0.09, 100: 0.05}
#: CPU goal: ms of the consumer's process CPU per new record, at the bench's log level (INFO).
CPU_GOAL_MS = 2.0
#: CPU goal of ``once`` under ``effects="staged"`` (one request per record), by batch size.
CPU_GOALS_STAGED_MS = {10: 1.3}
#: Warm-up records per consumer between two readings of the engine's CPU per call.
WARM_ROUND = 250
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Plan:
    """How much a scale measures: batch sizes with their repetitions, the least and the most
    warm-up records per consumer, and the ``max_workers`` values swept at the large sizes."""

    reps: dict[int, int]
    warm_least: int
    warm_most: int
    sweep: tuple[int, ...]
    sweep_sizes: tuple[int, ...]
    sweep_reps: int


def plan(scale: str) -> Plan:
    if scale == "smoke":
        return Plan(
            {4: 2, 12: 1},
            warm_least=20,
            warm_most=20,
            sweep=(2, 4),
            sweep_sizes=(12,),
            sweep_reps=1,
        )
    if scale == "goal":
        return Plan(
            {10: 20, 100: 5},
            warm_least=2000,
            warm_most=8000,
            sweep=(),
            sweep_sizes=(),
            sweep_reps=0,
        )
    if scale == "quick":
        return Plan(
            {10: 10, 100: 3, 1000: 1},
            warm_least=2000,
            warm_most=8000,
            sweep=(10, 32, 64),
            sweep_sizes=(100, 1000),
            sweep_reps=1,
        )
    return Plan(
        {10: 20, 100: 5, 1000: 2},
        warm_least=3000,
        warm_most=10000,
        sweep=(10, 16, 32, 64, 128),
        sweep_sizes=(100, 1000),
        sweep_reps=2,
    )


def steps(scale: str) -> int:
    """Progress ticks of one run (each size, each sweep size)."""
    p = plan(scale)
    return len(p.reps) + len(p.sweep_sizes)


# --- CPU, from /proc ----------------------------------------------------------------------


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) * _TICK_S


def _read(directory: Path, name: str) -> str:
    """A /proc file's text, or "" for a thread or process that has ended since it was listed
    (the process's other threads come and go while it is read)."""
    try:
        return (directory / name).read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def engine_pid(port: int) -> int:
    """The pid of this process's child that serves ``port`` (its command line names it)."""
    me = os.getpid()
    children = {
        int(pid)
        for task in Path(f"/proc/{me}/task").iterdir()
        for pid in _read(task, "children").split()
    }
    for pid in children:
        argv = _read(Path(f"/proc/{pid}"), "cmdline").split("\0")
        if str(port) in argv:
            return pid
    raise RuntimeError(f"no child process of {me} serves port {port}")


@dataclass
class Meter:
    """Wall, consumer CPU, engine CPU and the rest of the machine's CPU over a block."""

    engine: int

    def read(self) -> tuple[float, float, float, float]:
        return (
            time.perf_counter(),
            time.process_time(),
            process_cpu_s(self.engine),
            machine_busy_s(),
        )

    def sample(self, action: Callable[[], Any]) -> dict[str, float]:
        before = self.read()
        action()
        wall, cpu, engine, busy = (b - a for a, b in zip(before, self.read(), strict=True))
        return {
            "wall_ms": wall * 1000,
            "cpu_ms": cpu * 1000,
            "engine_cpu_ms": engine * 1000,
            "other_cpu_ms": max(0.0, busy - cpu - engine) * 1000,
        }


# --- measurements ---------------------------------------------------------------------------


def _deliver(handler: Handler, size: int) -> Callable[[], None]:
    event = sqs_event([body(k) for k in new_keys(size)])

    def action() -> None:
        response = handler(event, context())
        if response["batchItemFailures"]:
            raise RuntimeError(
                f"{len(response['batchItemFailures'])} of {size} records failed in a bench "
                "batch: the figures would be wrong"
            )

    return action


def warm_up(subjects: Subjects, meter: Meter, least: int, most: int) -> dict[str, Any]:
    """Run new records through both consumers (batches of 10, no RTT, no business time) in
    rounds of up to ``WARM_ROUND`` records each, until the engine's CPU per call stops
    falling (a round within 10% of the one before) once ``least`` records have run, or
    ``most`` have: the engine's JIT, the clients, the pools. Returns the first and the last
    round's engine CPU per call and ms per record: what the warm-up removed."""
    subjects.wire.latency_ms = 0.0
    handlers = {name: subjects.build(name, business(0)) for name in COMPARED}
    size = min(WARM_ROUND, most)
    rounds: list[dict[str, Any]] = []
    while True:
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in COMPARED}
        for _ in range(max(1, size // 10)):
            for name, handler in handlers.items():
                samples[name].append(meter.sample(_deliver(handler, 10)))
        records = 10 * len(samples["once"])
        engine = sum(s["engine_cpu_ms"] for v in samples.values() for s in v)
        rounds.append(
            {
                "engine_cpu_ms_per_call": engine / (records * len(COMPARED) * CALLS_PER_RECORD),
                "ms_per_record": {
                    n: sum(s["wall_ms"] for s in v) / records for n, v in samples.items()
                },
            }
        )
        done = records * len(rounds)
        settled = len(rounds) > 1 and (
            rounds[-1]["engine_cpu_ms_per_call"] > 0.9 * rounds[-2]["engine_cpu_ms_per_call"]
        )
        if done >= most or (done >= least and settled):
            return {"records": done, "rounds": len(rounds), "first": rounds[0], "last": rounds[-1]}


def _summary(
    samples: list[dict[str, float]], size: int, calls: int = CALLS_PER_RECORD
) -> dict[str, Any]:
    walls = [s["wall_ms"] for s in samples]
    total = {k: sum(s[k] for s in samples) for k in samples[0]}
    records = size * len(samples)
    return {
        "median_ms": statistics.median(walls),
        "max_ms": max(walls),
        "samples": walls,
        "cpu_ms_per_record": total["cpu_ms"] / records,
        "engine_cpu_ms_per_call": total["engine_cpu_ms"] / (records * calls),
        "other_cpu_share": total["other_cpu_ms"] / (total["wall_ms"] * (os.cpu_count() or 1)),
    }


def floor_ms(
    size: int,
    workers: int,
    cpu_ms_per_record: float,
    engine_ms_per_call: float,
    calls: int = CALLS_PER_RECORD,
) -> dict[str, Any]:
    """The least time this machine allows ``once`` for ``size`` records of ``calls``
    DynamoDB calls each: the waits, one core of consumer CPU (one GIL), or all the CPU over
    all cores, whichever is largest."""
    cores = os.cpu_count() or 1
    waits = math.ceil(size / workers) * (calls * RTT_MS + BUSINESS_MS)
    gil = size * cpu_ms_per_record
    engine = size * calls * engine_ms_per_call
    shared = (gil + engine) / cores
    bound = max(("waits", waits), ("consumer CPU", gil), ("all CPU", shared), key=lambda t: t[1])
    return {"floor_ms": bound[1], "bound": bound[0], "waits_ms": waits, "cpu_ms": gil}


def run_size(subjects: Subjects, meter: Meter, size: int, reps: int) -> dict[str, Any]:
    """The timed consumers at one batch size, alternating batch by batch (one untimed
    first, the order rotating each round); ``once`` with its default ``max_workers``."""
    subjects.wire.latency_ms = RTT_MS
    workers = DEFAULT_MAX_WORKERS
    handlers = {name: subjects.build(name, business(BUSINESS_MS)) for name in TIMED}
    for handler in handlers.values():
        _deliver(handler, min(size, 10))()
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in TIMED}
    for rep in range(reps):
        turn = rep % len(TIMED)
        for name in TIMED[turn:] + TIMED[:turn]:
            samples[name].append(meter.sample(_deliver(handlers[name], size)))
    row: dict[str, Any] = {"batch": size, "reps": reps, "max_workers": workers}
    row |= {name: _summary(samples[name], size, CALLS[name]) for name in TIMED}
    pt = row["powertools"]["median_ms"]
    for name, suffix in (("once", ""), ("once-staged", "_staged")):
        got = row[name]
        floor = floor_ms(
            size,
            workers,
            got["cpu_ms_per_record"],
            got["engine_cpu_ms_per_call"],
            CALLS[name],
        )
        row[f"floor{suffix}"] = floor
        row[f"ratio{suffix}"] = got["median_ms"] / pt
        row[f"ratio_floor{suffix}"] = floor["floor_ms"] / pt
    return row


def sweep(
    subjects: Subjects, meter: Meter, size: int, workers: tuple[int, ...], reps: int
) -> list[dict[str, Any]]:
    """``once`` alone at one batch size for each ``max_workers``, interleaved by rep."""
    subjects.wire.latency_ms = RTT_MS
    handlers = {w: subjects.build("once", business(BUSINESS_MS), max_workers=w) for w in workers}
    for handler in handlers.values():
        _deliver(handler, min(size, max(workers)))()
    samples: dict[int, list[dict[str, float]]] = {w: [] for w in workers}
    for _ in range(reps):
        for w, handler in handlers.items():
            samples[w].append(meter.sample(_deliver(handler, size)))
    rows = []
    for w in workers:
        summary = _summary(samples[w], size)
        floor = floor_ms(size, w, summary["cpu_ms_per_record"], summary["engine_cpu_ms_per_call"])
        rows.append({"batch": size, "max_workers": w, "reps": reps, "once": summary} | floor)
    return rows


def run(
    subjects: Subjects, meter: Meter, scale: str, tick: Callable[[str], None]
) -> dict[str, Any]:
    """Every batch size of the plan, then the ``max_workers`` sweep (after ``warm_up``)."""
    p = plan(scale)
    result: dict[str, Any] = {
        "rtt_ms": RTT_MS,
        "business_ms": BUSINESS_MS,
        "cores": os.cpu_count(),
        "load_before": os.getloadavg(),
        "rows": [],
        "sweep": [],
    }
    for size, reps in p.reps.items():
        tick(f"batches: {size} records, {reps} batches each")
        result["rows"].append(run_size(subjects, meter, size, reps))
    for size in p.sweep_sizes:
        tick(f"batches: max_workers sweep at {size} records")
        result["sweep"] += sweep(subjects, meter, size, p.sweep, p.sweep_reps)
    result["load_after"] = os.getloadavg()
    subjects.wire.latency_ms = 0.0
    return result
