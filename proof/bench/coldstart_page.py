"""The page's cold start section and goal rows: import time of the handler modules, the
first record in a fresh interpreter and after an emulated SnapStart restore, and the Lambda
asset (``coldstart.py`` measures them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench.page import Rows, verdict

#: Cold start (import + make_handler + first record), once over Powertools' medians.
FIRST_RECORD_GOAL = 0.8
#: The same after an emulated SnapStart restore (restore hooks + first record).
SNAPSTART_GOAL = 0.6


def goal_rows(cold: dict[str, Any]) -> Rows:
    ours, theirs = (r["median_ms"] for r in cold["imports"].values())
    rows = [
        [
            "import time, payments.handler / Powertools minimal",
            f"{ours:.0f} / {theirs:.0f} ms",
            "",
            "≤ 1",
            verdict(ours <= theirs),
        ]
    ]
    for key, label, goal in (
        ("first_record", "cold start: import + make_handler + first record", FIRST_RECORD_GOAL),
        ("snapshot", "SnapStart, emulated: restore hooks + first record", SNAPSTART_GOAL),
    ):
        if cold.get(key):
            once, pt = (r["total_ms_median"] for r in cold[key].values())
            rows.append(
                [
                    f"{label}, once / Powertools",
                    f"{once:.0f} / {pt:.0f} ms = {once / pt:.2f}",
                    "",
                    f"≤ {goal}",
                    verdict(once / pt <= goal),
                ]
            )
    return rows


def import_rows(cold: dict[str, Any]) -> Rows:
    rows = []
    for label, r in cold["imports"].items():
        top = ", ".join(f"{k} {v:.0f}" for k, v in list(r["breakdown_ms"].items())[:5])
        rows.append(
            [label, f"{r['median_ms']:.1f}", f"{r['min_ms']:.1f}", f"{r['max_ms']:.1f}", top]
        )
    return rows


def _with_gc(first: dict[str, Any]) -> bool:
    """True when every row says what the garbage collector took (results saved before it
    was measured do not)."""
    return all("gc_ms_median" in r for r in first.values())


def first_record_rows(first: dict[str, Any]) -> Rows:
    gc = _with_gc(first)
    return [
        [
            label,
            f"{r['import_ms_median']:.0f}",
            f"{r['first_ms_median']:.0f}",
            f"{r['total_ms_median']:.0f}",
            f"{r['total_ms_min']:.0f}-{r['total_ms_max']:.0f}",
            f"{r['cpu_ms_median']:.0f}",
        ]
        + ([f"{r['gc_ms_median']:.0f} ({r['full_gc_runs']}/{r['runs']})"] if gc else [])
        for label, r in first.items()
    ]


def _first_record_table(page: Any, title: str, before: str, figures: dict[str, Any]) -> None:
    """A table of ``first_record_rows``; ``before``: what the time before the first record
    is (the import, or the restore hooks)."""
    gc = ["GC (runs with a full collection)"] if _with_gc(figures) else []
    page.table(
        title,
        ["module", before, "first record", "total (median)", "total min-max", "CPU", *gc],
        first_record_rows(figures),
    )


def plot(cold: dict[str, Any], path: Path, plt: Any) -> None:
    fig, ax = plt.subplots(figsize=(8, 2.8))
    labels = list(cold["imports"])
    ax.barh(labels, [cold["imports"][k]["median_ms"] for k in labels], color=["C0", "C1"])
    ax.set(xlabel="median import time in a fresh interpreter (ms)", title="Cold start: import")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def section(page: Any, cold: dict[str, Any], docs: Path, plt: Any) -> None:
    page.text(f"""
## Cold start

Import time of the handler module in a fresh interpreter, median of {cold["runs"]} processes
(the module's own import, not the interpreter's start). The Powertools baseline is
`proof/bench/lambdas/powertools_handler.py`: Logger, `BatchProcessor` and the idempotency
utility, written as the docs write it (its persistence layer creates its DynamoDB client at
import; `payments.handler` creates its clients at the first invocation). The last column is
self time by top-level package from one `python -X importtime` run, in ms.
""")
    page.table(
        "Import time (ms)",
        ["module", "median", "min", "max", "largest self times (ms)"],
        import_rows(cold),
    )
    plot(cold, docs / "perf_coldstart.png", plt)
    page.image("perf_coldstart.png", "import time of the handler modules")
    first = cold.get("first_record")
    if first:
        page.text(
            "What a cold start bills beyond the runtime's own start: import the module (which "
            "builds the handler), then handle one SQS batch of one new record, in a fresh "
            "interpreter; the modules alternate. The once module is "
            "`proof/bench/lambdas/once_handler.py` (the same business function as the "
            "Powertools one, once's defaults). Every AWS call goes to a local endpoint that "
            "answers at once with an empty success, so the figures are the client's own work "
            "(imports, clients, requests), not an engine's or a network's. Every measured "
            "interpreter reads compiled byte code, once's modules as the installed packages' "
            "(a first, unmeasured run of each module compiles it). The GC column is the "
            "cyclic garbage collector's share of the CPU: a process that allocates this "
            "much pays one full collection (some 15 ms) about when its first record runs; "
            "one that allocates a little less pays it at a later, warm invocation."
        )
        _first_record_table(page, "Cold start: import + first record (ms)", "import", first)
    snapshot = cold.get("snapshot")
    if snapshot:
        page.text(
            "With SnapStart (`OnceConsumer(snap_start=True)`), emulated: the module is "
            "imported and the runtime's before-snapshot hooks run (once's prime the handler: "
            "configuration, processor, DynamoDB client, no AWS call); a fork stands for a "
            "restore, whose child runs the after-restore hooks (once's close every connection "
            "and thread the snapshot holds) and handles one new record. The figures start at "
            "the fork. What a real restore adds, resuming the microVM and paging its memory "
            "in, is not emulated: Lambda reports it as the Restore Duration, and bills it."
        )
        _first_record_table(
            page, "SnapStart, emulated: after the restore (ms)", "restore hooks", snapshot
        )
        first = cold.get("first_record")
        if first:
            (once_snap, pt_snap), (once_cold, pt_cold) = (
                [r["total_ms_median"] for r in figures.values()] for figures in (snapshot, first)
            )
            page.text(
                f"What SnapStart leaves of a cold start: once {once_snap:.0f} ms after a "
                f"restore against {once_cold:.0f} ms without, {once_snap / pt_cold:.2f} of "
                f"Powertools' cold start without SnapStart ({pt_cold:.0f} ms). Powertools "
                f"gains as much from SnapStart ({pt_snap:.0f} ms after a restore): side by "
                "side, both are left with their first record's requests. Without SnapStart "
                "the import, botocore's client and the first requests are the cold start, "
                'for both (see the tuning notes under "Where once\'s time goes").'
            )
    asset = cold["asset"]
    if "total_bytes" in asset:
        packages = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in asset["packages"].items())
        page.text(f"""
**Lambda asset** ({asset["source"]}): {asset["total_bytes"] / 1e6:.2f} MB unzipped, of which
our code (`once`, `payments`) is {asset["ours_bytes"] / 1e3:.0f} kB and packages the runtime
already provides {asset["runtime_provided_bytes"] / 1e6:.2f} MB. Largest packages:
{packages}.
""")
    else:
        page.text(f"**Lambda asset**: {asset['source']}.")
