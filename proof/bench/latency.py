"""Batch latency: ``once`` against the Powertools consumer, cell by cell, same engine, same
injected round trip, same business time, batches interleaved so that noise hits both.

A cell is (batch size, injected ms per DynamoDB call, business ms). Every batch carries
fresh keys (the "new" path, 2 writes per record). The engine is warmed up before the first
cell (``batches.warm_up``); in each cell the first batch of each consumer is untimed
(clients, connection pool, thread pool), and the wall time of ``handler(event, context)``
is what is recorded.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from proof.bench.subjects import Subjects, body, business, context, new_keys, sqs_event

COMPARED = ("once", "powertools")


@dataclass(frozen=True)
class Cell:
    batch: int
    latency_ms: float
    business_ms: float
    reps: int


def matrix(scale: str) -> list[Cell]:
    """Every named value covered, trimmed to what fits in the run's time budget: the
    latency x business grid at batch 10, and one-record batches at 10 ms (what one call
    costs beyond its RTT). Larger batches, and the goals, are ``batches``' section."""
    if scale == "smoke":
        return [Cell(2, 1.0, 0.0, 2), Cell(3, 1.0, 1.0, 2)]
    if scale == "goal":
        return []
    reps = {1: 30, 10: 15} if scale == "full" else {1: 4, 10: 3}
    cells = [Cell(10, lat, biz, reps[10]) for lat in (1.0, 5.0, 10.0, 20.0) for biz in (0.0, 20.0)]
    return cells + [Cell(1, 10.0, biz, reps[1]) for biz in (0.0, 20.0)]


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (with fewer than 100 samples, p99 is the maximum)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _timed(handler: Callable[..., dict[str, Any]], size: int) -> tuple[float, float]:
    """Wall ms of one batch, and the CPU ms this process spent on it (all threads)."""
    event = sqs_event([body(k) for k in new_keys(size)])
    cpu = time.process_time()
    start = time.perf_counter()
    response = handler(event, context())
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    if response["batchItemFailures"]:
        raise RuntimeError(
            f"{len(response['batchItemFailures'])} records failed in a bench "
            "batch: the numbers would be wrong"
        )
    return elapsed * 1000, cpu * 1000


def run_cell(subjects: Subjects, cell: Cell) -> dict[str, Any]:
    """Median and p99 batch time per consumer for one cell, and the ratio once/Powertools."""
    subjects.wire.latency_ms = cell.latency_ms
    handlers = {name: subjects.build(name, business(cell.business_ms)) for name in COMPARED}
    times: dict[str, list[float]] = {name: [] for name in COMPARED}
    cpu: dict[str, list[float]] = {name: [] for name in COMPARED}
    for handler in handlers.values():
        _timed(handler, cell.batch)  # warm-up
    for rep in range(cell.reps):
        order = COMPARED if rep % 2 == 0 else tuple(reversed(COMPARED))
        for name in order:
            wall, used = _timed(handlers[name], cell.batch)
            times[name].append(wall)
            cpu[name].append(used)
    row: dict[str, Any] = {
        "batch": cell.batch,
        "latency_ms": cell.latency_ms,
        "business_ms": cell.business_ms,
        "reps": cell.reps,
    }
    for name in COMPARED:
        row[name] = {
            "median_ms": statistics.median(times[name]),
            "p99_ms": percentile(times[name], 99),
            "cpu_ms": statistics.median(cpu[name]),
            "samples": times[name],
        }
    row["ratio_median"] = row["once"]["median_ms"] / row["powertools"]["median_ms"]
    row["ratio_p99"] = row["once"]["p99_ms"] / row["powertools"]["p99_ms"]
    return row


def run(subjects: Subjects, scale: str, tick: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for cell in matrix(scale):
        tick(f"latency batch={cell.batch} rtt={cell.latency_ms:g}ms biz={cell.business_ms:g}ms")
        rows.append(run_cell(subjects, cell))
    subjects.wire.latency_ms = 0.0
    return rows
