"""Turns the benchmark's results into tables (stdout, with rich) and ``docs/performance.md``
with its PNG plots (matplotlib, Agg backend: no display needed).

The same rows feed the terminal and the page, so what is printed is what is committed.
This module holds what frames the page: its head (the run, the machine's load, the tuning
goals gathered from every section) and the order of the sections. Each section is a module
of its own, ``<name>_page.py``, with a ``section(page, ...)`` that adds its text, tables and
plots to the ``Page`` (``page.py``), and a ``goal_rows(...)`` if it has tuning goals; a new
section is such a module, called from ``render`` (and from ``goal_rows``) here.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from rich.console import Console

from proof.bench import (
    batches_page,
    bounds_page,
    coldstart_page,
    footprint_page,
    latency_page,
    profile_page,
    throughput_page,
    work_page,
)
from proof.bench.latency import COMPARED
from proof.bench.page import Page, Rows, pyplot


def _work_run(runs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The engine run that measured DynamoDB work per path, if any did."""
    return next((r for r in runs.values() if r.get("paths")), None)


def goal_rows(results: dict[str, Any]) -> Rows:
    """Every tuning goal, measured in this run, with its verdict and, for batch times, the
    ratio this machine's CPU allows (the floor of ``once`` over Powertools' time)."""
    rows: Rows = []
    for engine, result in results["engines"].items():
        rows.extend(batches_page.goal_rows(engine, result))
    work_run = _work_run(results["engines"])
    if work_run is not None:
        rows.extend(work_page.goal_rows(work_run["paths"]))
        rows.extend(work_page.write_unit_goal_rows(work_run.get("write_units")))
    cold = results.get("coldstart")
    if cold:
        rows.extend(coldstart_page.goal_rows(cold))
    if results.get("footprint"):
        rows.extend(footprint_page.goal_rows(results["footprint"]))
    return rows


def head(page: Page, results: dict[str, Any]) -> None:
    """What was run and how, the machine's load, and the tuning goals."""
    meta = results["meta"]
    page.text(f"""
# Performance

Measured by `make bench` (`{meta["command"]}`), scale `{meta["scale"]}`, in
{meta["seconds"]:.0f} s on {meta["machine"]}. Every comparison runs `once` and the
Powertools consumer written the documented way (`idempotent_function` +
`BatchProcessor(EventType.SQS)` + `process_partial_response`, in `proof/chaos/peers/`) in the
same run, on the same engine, with the same round trip injected at the client (a botocore
`before-send` hook that sleeps before every DynamoDB call) and the same business function.
The naive pattern (`proof/chaos/peers/naive.py`) joins the DynamoDB work table.
""")
    page.text(machine_note(results))
    page.text(
        "## Tuning goals\n\nBatch time: batches of new keys, 10 ms per DynamoDB call, "
        "20 ms of business time, medians of `once` over Powertools' in one run (section "
        '"Big batches"); "machine allows" is the floor of `once`\'s time on this machine '
        "over Powertools' median, the best ratio its cores permit. CPU: milliseconds of CPU "
        "the consumer's process spends per new record. Calls: on the wire, per record "
        "(section below). Import: medians of fresh interpreters (section below)."
    )
    page.table(
        "Tuning goals",
        ["goal", "measured", "machine allows", "target", ""],
        goal_rows(results),
    )


def render(results: dict[str, Any], docs: Path, console: Console) -> str:
    """Print every table and write the plots; return the markdown page. The sections come
    in the page's order, each only when the run measured what it shows."""
    runs: dict[str, dict[str, Any]] = results["engines"]
    page = Page(console)
    head(page, results)
    for engine, result in runs.items():
        if result.get("batches"):
            batches_page.section(page, engine, result, docs)
    if any(r.get("latency") for r in runs.values()):
        latency_page.section(page, runs, docs)
    work_run = _work_run(runs)
    if work_run is not None:
        work_page.section(page, work_run, docs)
    cold = results.get("coldstart")
    if cold:
        coldstart_page.section(page, cold, docs, pyplot())
    if results.get("footprint"):
        footprint_page.section(page, results["footprint"])
    tp = results.get("throughput")
    if tp:
        throughput_page.section(page, tp, docs)
    profile = next((r["profile"] for r in runs.values() if r.get("profile")), None)
    if profile:
        profile_page.section(page, profile, docs)
    bounds_page.section(page)
    if any(r.get("batches") for r in runs.values()):
        page.text(batches_page.DISAGREE)
    return page.markdown()


def machine_note(results: dict[str, Any]) -> str:
    """The machine's load around the run, and whether the figures were taken on a quiet one."""
    load = results["meta"].get("load")
    if not load:
        return ""
    shares = [
        row[name]["other_cpu_share"]
        for run in results["engines"].values()
        for row in run.get("batches", {}).get("rows", [])
        for name in (*COMPARED, "once-staged")
        if name in row
    ]
    worst = max(shares, default=0.0)
    start, end = (", ".join(f"{v:.2f}" for v in load[k]) for k in ("start", "end"))
    quiet = (
        f"Other processes used at most {worst:.0%} of the cores during the big batches."
        if worst < QUIET_SHARE
        else f"**The machine was not quiet**: other processes used up to {worst:.0%} of its "
        'cores during the big batches (column "other load"). `once` runs records '
        "concurrently and needs the CPU that load takes, Powertools mostly sleeps, so load "
        "raises `once`'s times and its ratios more than Powertools'; on a quiet machine "
        "both are lower."
    )
    return f"Load average (1, 5, 15 min) at the start: {start}; at the end: {end}. {quiet}"


#: Beyond this share of the cores used by other processes, a run is not called quiet.
QUIET_SHARE = 0.10


def machine() -> str:
    import os

    return (
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )
