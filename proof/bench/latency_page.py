"""The page's batch latency sections: the cost of one DynamoDB call beyond the injected
round trip, then per engine the batch time of ``once`` and Powertools over round trips,
business times and batch sizes, with one plot for all engines (``latency.py`` measures
them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench.latency import COMPARED
from proof.bench.page import ENGINE_TITLE, Page, Rows, ms, pyplot


def overhead_rows(runs: dict[str, dict[str, Any]]) -> Rows:
    """Time per DynamoDB call beyond the injected RTT, from one-record batches with no
    business time: the engine's service time plus the client's CPU, without concurrency."""
    rows = []
    for engine, result in runs.items():
        for row in result.get("latency", []):
            if row["batch"] == 1 and row["business_ms"] == 0:
                rtt = row["latency_ms"]
                rows.append(
                    [ENGINE_TITLE[engine]]
                    + [ms((row[name]["median_ms"] - 2 * rtt) / 2) for name in COMPARED]
                )
    return rows


def latency_rows(result: dict[str, Any]) -> Rows:
    return [
        [
            str(r["batch"]),
            f"{r['latency_ms']:g}",
            f"{r['business_ms']:g}",
            str(r["reps"]),
            ms(r["once"]["median_ms"]),
            ms(r["once"]["p99_ms"]),
            ms(r["powertools"]["median_ms"]),
            ms(r["powertools"]["p99_ms"]),
            f"{r['ratio_median']:.2f}",
            f"{r['ratio_p99']:.2f}",
        ]
        for r in result["latency"]
    ]


LATENCY_HEADER = [
    "batch",
    "RTT ms",
    "business ms",
    "batches",
    "once median",
    "once p99",
    "Powertools median",
    "Powertools p99",
    "ratio median",
    "ratio p99",
]


def _plot_medians(ax: Any, rows: list[dict[str, Any]], x_key: str, business: float) -> None:
    """once's and Powertools' median batch times over ``x_key``, one line each."""
    if not rows:
        return
    rows = sorted(rows, key=lambda r: r[x_key])
    x = [r[x_key] for r in rows]
    for name, style in (("once", "-o"), ("powertools", "--s")):
        ax.plot(
            x,
            [r[name]["median_ms"] for r in rows],
            style,
            label=f"{name}, business {business:g} ms",
        )


def plot(runs: dict[str, dict[str, Any]], path: Path) -> None:
    """Median batch time over the round trip (batch of 10) and over the batch size (10 ms),
    one row of two panels per engine."""
    plt = pyplot()
    engines = [e for e in runs if runs[e].get("latency")]
    fig, axes = plt.subplots(len(engines), 2, figsize=(11, 4 * len(engines)), squeeze=False)
    for i, engine in enumerate(engines):
        rows = runs[engine]["latency"]
        left, right = axes[i]
        for business in sorted({r["business_ms"] for r in rows}):
            same = [r for r in rows if r["business_ms"] == business]
            _plot_medians(left, [r for r in same if r["batch"] == 10], "latency_ms", business)
            _plot_medians(right, [r for r in same if r["latency_ms"] == 10], "batch", business)
        left.set(
            title=f"{ENGINE_TITLE[engine]}: batch of 10",
            xlabel="injected RTT per call (ms)",
            ylabel="median batch time (ms)",
        )
        right.set(
            title=f"{ENGINE_TITLE[engine]}: 10 ms RTT",
            xlabel="batch size",
            ylabel="median batch time (ms)",
            xscale="log",
            yscale="log",
        )
        for ax in (left, right):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def section(page: Page, runs: dict[str, dict[str, Any]], docs: Path) -> None:
    """The per-call cost table, each engine's batch latency table and ``perf_latency.png``;
    for runs where at least one engine measured batch latency."""
    overhead = overhead_rows(runs)
    if overhead:
        page.text(
            "What one DynamoDB call costs beyond the injected RTT when nothing runs "
            "concurrently (one-record batches, no business time): the engine's service time "
            "plus the client's CPU. Under `once`'s concurrency these costs queue on the "
            "engine and on the client's GIL; that queue is the gap between `once` and its "
            "floor of 2 RTT + business."
        )
        page.table("Per-call cost beyond the RTT (ms)", ["engine", "once", "Powertools"], overhead)
    for engine, result in runs.items():
        if not result.get("latency"):
            continue
        page.text(f"## Batch latency: {ENGINE_TITLE[engine]}")
        page.table(
            f"Batch time in ms, {ENGINE_TITLE[engine]} (fresh keys: the new path)",
            LATENCY_HEADER,
            latency_rows(result),
            note="p99 is nearest-rank over the batches measured: with fewer than 100 "
            "batches it is the slowest one. The first batch of each consumer in "
            "each cell is a warm-up and is not counted.",
        )
    plot(runs, docs / "perf_latency.png")
    page.image("perf_latency.png", "median batch time, once against Powertools")
