"""The harness's report: a table per consumer, the JSON document, and the PNG plot.

The JSON is ``{"implementations": {"once": {...}, "powertools": {...}, "naive": {...}}}``
(and the run's ``engine``, ``seed``, ``fifo``, ``retention_s``, ``per_fault``), each with
``deliveries``, ``executions``, ``lost``, ``violations`` (``order_broken`` among them) and
``faults`` (``ttl_swept`` among them), and for once's
consumers ``to_completion``: per ``busy`` and ``failed``, the ``count`` of messages timed
from their first such delivery to their ack, ``median_s``, ``p90_s`` and ``unfinished``
(never acked: in the DLQ).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from proof.chaos.harness import Run
from proof.chaos.invariants import INVARIANTS, STAGED_INVARIANTS, TWO_HOP_INVARIANTS
from proof.chaos.retrytimes import NOT_DONE

#: Faults after which business code may legitimately run again (the effect happened, the
#: record did not learn it): the price the ledger's own fence absorbs.
CRASH_AFTER_EFFECT = ("kill_after_effect", "kill_before_finalize", "pause")


def document(runs: list[Run], **meta: Any) -> dict[str, Any]:
    return {"implementations": {r.impl: r.as_json() for r in runs}, **meta}


def table(runs: list[Run]) -> Table:
    out = Table(title="Invariant violations per consumer (same workload, same faults)")
    out.add_column("")
    for run in runs:
        out.add_column(run.impl, justify="right")
    rows: list[tuple[str, list[Any]]] = [
        ("deliveries", [r.deliveries for r in runs]),
        ("business executions (valid payments)", [r.executions for r in runs]),
        ("  beyond one per key", [r.executions - r.unique_executed for r in runs]),
        (
            "  crash-after-effect faults",
            [sum(r.faults.get(k, 0) for k in CRASH_AFTER_EFFECT) for r in runs],
        ),
    ]
    # "-": an invariant a consumer is not held to (once-staged's mismatch_executed).
    rows += [(name, [r.violations.get(name, "-") for r in runs]) for name in INVARIANTS]
    if any(r.notifications for r in runs):
        # The two-hop workload's: "-" for a one-hop consumer, which has no second hop.
        rows += [(name, [r.violations.get(name, "-") for r in runs]) for name in TWO_HOP_INVARIANTS]
    if any(name in r.violations for r in runs for name in STAGED_INVARIANTS):
        # effects="staged"'s own: "-" for a consumer built otherwise.
        rows += [(name, [r.violations.get(name, "-") for r in runs]) for name in STAGED_INVARIANTS]
        for figure in ("deliveries", "executions", "in_dlq", "owed_in_source_dlq"):
            rows.append(
                (f"notifications: {figure}", [r.notifications.get(figure, "-") for r in runs])
            )
    if any(r.outcomes for r in runs):
        # A duplicate absorbed: a delivery of a message whose operation already took effect,
        # acknowledged with nothing applied again (hop 2's as "notify duplicate").
        for outcome in (
            "processed",
            "duplicate",
            "owed_sent",
            "notify processed",
            "notify duplicate",
        ):
            rows.append((f"outcome {outcome}", [r.outcomes.get(outcome, "-") for r in runs]))
    if any(r.dynamodb_calls for r in runs):
        rows.append(("DynamoDB calls", [sum(r.dynamodb_calls.values()) or "-" for r in runs]))
        rows.append(("  per delivery", [_per_delivery(r) for r in runs]))
    rows.append(("total violations", [sum(r.violations.values()) for r in runs]))
    rows.append(("run time (s)", [f"{r.seconds:.0f}" for r in runs]))
    for kind in NOT_DONE:
        label = "BUSY" if kind == "busy" else kind
        rows.append((f"{label} delivery to done: median s (n)", [_wait(r, kind) for r in runs]))
    for label, values in rows:
        style = "bold" if label == "total violations" else None
        out.add_row(label, *[_cell(v, label) for v in values], style=style)
    return out


def _per_delivery(run: Run) -> str:
    """DynamoDB calls per delivery (of both hops, for a two-hop consumer)."""
    deliveries = run.deliveries + run.notifications.get("deliveries", 0)
    calls = sum(run.dynamodb_calls.values())
    return f"{calls / deliveries:.2f}" if calls and deliveries else "-"


def _wait(run: Run, kind: str) -> str:
    """``median (count)`` of a once consumer's retry times; ``-`` for the others."""
    found = run.to_completion.get(kind)
    if not found:
        return "-"
    if found["median_s"] is None:
        return f"- ({found['count']})"
    return f"{found['median_s']:.1f} ({found['count']})"


def faults_table(runs: list[Run]) -> Table:
    out = Table(title="Faults injected")
    out.add_column("fault")
    for run in runs:
        out.add_column(run.impl, justify="right")
    kinds = sorted({k for r in runs for k in r.faults})
    for kind in kinds:
        out.add_row(kind, *[str(r.faults.get(kind, 0)) for r in runs])
    return out


def _cell(value: Any, label: str) -> str:
    if value == "-":
        return value
    if (
        label in INVARIANTS
        or label in TWO_HOP_INVARIANTS
        or label in STAGED_INVARIANTS
        or label == "total violations"
    ):
        return f"[red]{value}[/red]" if value else "[green]0[/green]"
    return str(value)


def plot(per_fault: dict[str, list[Run]], path: Path, queue: str = "standard") -> None:
    """Grouped bars: total violations per fault kind (run alone), one bar per consumer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(per_fault)
    impls = [r.impl for r in next(iter(per_fault.values()))]
    width = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(13, 5))
    for i, impl in enumerate(impls):
        values = [
            sum(next(r for r in per_fault[k] if r.impl == impl).violations.values()) for k in kinds
        ]
        ax.bar([x + i * width for x in range(len(kinds))], values, width, label=impl)
    ax.set_xticks([x + width * (len(impls) - 1) / 2 for x in range(len(kinds))])
    ax.set_xticklabels(kinds, rotation=25, ha="right")
    ax.set_ylabel("invariant violations")
    ax.set_title(f"Violations per fault kind, {queue} queue (each fault alone, same workload)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def show(runs: list[Run], console: Console) -> None:
    console.print(table(runs))
    console.print(faults_table(runs))
