"""The page's "Throughput through the local cloud" section: messages per second drained by
the event source mapping emulator against the number of worker processes
(``throughput.py`` measures them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench.page import ENGINE_TITLE, Page, Rows, pyplot


def throughput_rows(rows: list[dict[str, Any]]) -> Rows:
    return [
        [
            ENGINE_TITLE.get(r["engine"], r["engine"]),
            str(r["workers"]),
            f"{r['messages_per_s']:.1f}",
            str(r["messages"]),
            f"{r['seconds']:.1f}",
            str(r["invocations"]),
            str(r["mean_invocation_ms"]),
        ]
        for r in rows
    ]


THROUGHPUT_HEADER = [
    "engine",
    "workers",
    "messages/s",
    "messages",
    "seconds",
    "invocations",
    "mean invocation ms",
]


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Messages per second against workers, one line per engine."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for engine in sorted({r["engine"] for r in rows}):
        cells = [r for r in rows if r["engine"] == engine and r.get("messages_per_s")]
        ax.plot(
            [r["workers"] for r in cells],
            [r["messages_per_s"] for r in cells],
            "-o",
            label=ENGINE_TITLE.get(engine, engine),
        )
    ax.set(xlabel="workers", ylabel="messages per second", title="Local cloud throughput")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def section(page: Page, tp: dict[str, Any], docs: Path) -> None:
    """The section, its table and ``perf_throughput.png``."""
    page.text(f"""
## Throughput through the local cloud

The deployed stack on the local cloud (`oncecli.localcloud`, SQS on moto, the tables on the
engine), drained by the event source mapping emulator with W worker processes running
`payments.handler` (batch size 10, no batching window). The queue is filled with
{tp["rows"][0]["messages"] if tp["rows"] else 0} new payments first; the time runs from
the moment the workers are warm until all messages are deleted.
""")
    page.table("Local cloud throughput", THROUGHPUT_HEADER, throughput_rows(tp["rows"]))
    plot(tp["rows"], docs / "perf_throughput.png")
    page.image("perf_throughput.png", "messages per second against workers")
