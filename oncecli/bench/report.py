"""Turns the benchmark's results into tables (stdout, with rich) and ``docs/performance.md``
with its PNG plots (matplotlib, Agg backend: no display needed).

The same rows feed the terminal and the page, so what is printed is what is committed.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from oncecli.bench import batches, coldstart_page, tuning, work
from oncecli.bench.latency import COMPARED

ENGINE_TITLE = {"moto": "moto server", "dynamodb-local": "DynamoDB Local"}

Rows = list[list[str]]


def _ms(value: float) -> str:
    return f"{value:.1f}"


def _md_table(header: Sequence[str], rows: Rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


class Page:
    """Collects sections for the terminal and the markdown page at once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.parts: list[str] = []

    def text(self, markdown: str) -> None:
        self.parts.append(markdown.strip() + "\n")

    def table(self, title: str, header: Sequence[str], rows: Rows, note: str = "") -> None:
        table = Table(title=title, title_justify="left")
        for name in header:
            table.add_column(name, justify="right" if name != header[0] else "left")
        for row in rows:
            table.add_row(*row)
        self.console.print(table)
        self.parts.append(
            f"**{title}**\n\n{_md_table(header, rows)}\n" + (f"\n{note.strip()}\n" if note else "")
        )

    def image(self, name: str, alt: str) -> None:
        self.parts.append(f"![{alt}]({name})\n")

    def markdown(self) -> str:
        return "\n".join(self.parts)


# --- sections -----------------------------------------------------------------------------


def goal_rows(results: dict[str, Any]) -> Rows:
    """Every tuning goal, measured in this run, with its verdict and, for batch times, the
    ratio this machine's CPU allows (the floor of ``once`` over Powertools' time)."""
    rows: Rows = []

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    for engine, result in results["engines"].items():
        for row in result.get("batches", {}).get("rows", []):
            goal = batches.GOALS.get(row["batch"])
            once, pt = row["once"], row["powertools"]
            if goal is not None:
                rows.append(
                    [
                        f"batch of {row['batch']}, once / Powertools, {ENGINE_TITLE[engine]}",
                        f"{_ms(once['median_ms'])} / {_ms(pt['median_ms'])} ms"
                        f" = {row['ratio']:.3f}",
                        f"{row['ratio_floor']:.3f}",
                        f"≤ {goal:.2f}",
                        verdict(row["ratio"] <= goal),
                    ]
                )
            rows.append(
                [
                    f"CPU ms per new record, batch of {row['batch']}, once / Powertools",
                    f"{once['cpu_ms_per_record']:.2f} / {pt['cpu_ms_per_record']:.2f}"
                    f" = {once['cpu_ms_per_record'] / pt['cpu_ms_per_record']:.2f}",
                    "",
                    "≤ 1",
                    verdict(once["cpu_ms_per_record"] <= pt["cpu_ms_per_record"]),
                ]
            )
    work_run = next((r for r in results["engines"].values() if r.get("paths")), None)
    if work_run is not None:
        once = work_run["paths"]["once"]
        for path, goal in (("new", 2), ("duplicate", 1), ("in-batch duplicate", 0)):
            calls = once[path]["calls"]
            rows.append(
                [
                    f"DynamoDB calls per {path} key",
                    f"{calls:g}",
                    "",
                    f"{goal}",
                    verdict(calls <= goal),
                ]
            )
    cold = results.get("coldstart")
    if cold:
        rows.extend(coldstart_page.goal_rows(cold))
    return rows


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
                    + [_ms((row[name]["median_ms"] - 2 * rtt) / 2) for name in COMPARED]
                )
    return rows


def latency_rows(result: dict[str, Any]) -> Rows:
    return [
        [
            str(r["batch"]),
            f"{r['latency_ms']:g}",
            f"{r['business_ms']:g}",
            str(r["reps"]),
            _ms(r["once"]["median_ms"]),
            _ms(r["once"]["p99_ms"]),
            _ms(r["powertools"]["median_ms"]),
            _ms(r["powertools"]["p99_ms"]),
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


def work_rows(paths: dict[str, Any]) -> Rows:
    rows = []
    for consumer, per_path in paths.items():
        for path in work.PATHS:
            row = per_path[path]
            ops = ", ".join(f"{op} {n:g}" for op, n in sorted(row["operations"].items()) if n)
            rows.append(
                [
                    consumer,
                    path,
                    f"{row['calls']:g}",
                    ops or "-",
                    f"{row['wru_reported']:g}",
                    f"{row['wru_refused']:g}",
                    f"{row['rru_reported']:g}",
                    f"{work.cost_per_million(row):.3f}",
                ]
            )
    return rows


WORK_HEADER = [
    "consumer",
    "path",
    "calls / record",
    "operations",
    "WRU reported",
    "WRU refused (computed)",
    "RRU",
    "USD per million",
]


def cap_rows(sizes: dict[str, Any]) -> Rows:
    return [
        [
            f"{r['result_bytes']:,}",
            f"{r['stored_result_bytes']:,}",
            f"{r['record_bytes']:,}",
            f"{r['wru_new']:g}",
            f"{r['wru_duplicate']:g}",
            f"{(r['wru_new']) * work.PRICE_WRU:.2f}",
        ]
        for r in sizes["capped"]
    ]


# --- plots --------------------------------------------------------------------------------


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def plot_latency(runs: dict[str, dict[str, Any]], path: Path) -> None:
    plt = _plt()
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


def plot_work(paths: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(paths)
    for i, (consumer, per_path) in enumerate(paths.items()):
        xs = [p + i * width for p in range(len(work.PATHS))]
        ax.bar(xs, [per_path[p]["calls"] for p in work.PATHS], width, label=consumer)
    ax.set_xticks([p + width * (len(paths) - 1) / 2 for p in range(len(work.PATHS))], work.PATHS)
    ax.set(ylabel="DynamoDB calls per record", title="DynamoDB calls per record, by path")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_throughput(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
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


# --- the page -----------------------------------------------------------------------------

BOUNDS = """
## What bounds each figure

- **Big batches, DynamoDB Local.** Three things, and the floor column says which one binds.
  The waits: `once` runs at most `max_workers` records at a time, each paying RTT +
  business + RTT (40 ms here), so a batch takes at least `ceil(batch / max_workers)` such
  rounds. The consumer's CPU: every record costs the consumer's process a few milliseconds of
  CPU (botocore builds, signs, sends and parses two requests; `once` parses, hashes and logs),
  and its threads share one GIL, so a batch takes at least batch x CPU per record, however
  many records are in flight; past a few dozen records this is the bound, and it is the
  figure that carries over to a Lambda, whose CPU is a share of a core set by its memory
  size. The machine: here DynamoDB Local's Java, the consumer and every other process share
  2 cores, so the engine's CPU per call also counts. Powertools runs records one after the
  other: its time is the batch size times one record's (two calls, the business time and
  its CPU), so the ratio tends to the consumer's CPU per record over Powertools' time per
  record as batches grow, whatever `max_workers` is (the "floor / Powertools" column).
- **Batch latency, DynamoDB Local.** The injected round trip and the business time: Java
  answers an item call in about a millisecond and serves concurrent calls in parallel, so
  `once`'s batch of 10 approaches its floor of claim + business + complete (about
  2 RTT + business), while Powertools pays that sum once per record because its
  `BatchProcessor` runs records one after the other. The ratio's physical limit is about
  1/batch size (0.1 for 10 records), reached when client-side CPU is negligible beside the
  injected waits. This is the engine whose ratio speaks for real DynamoDB, where calls are
  served in parallel too.
- **Batch latency, moto server.** moto's server: every call costs milliseconds of Python on
  one process with a GIL, so concurrent claims queue at the server and `once`'s
  concurrency buys less. The moto ratio is an upper bound (a pessimistic one) on what
  concurrency gives; its absolute times say more about moto than about either consumer.
- **Both engines, and this machine.** Client and server share 2 cores here. CPU spent in
  botocore (request signing, serialization, parsing) by 10 threads competes with the engine,
  so the p99 columns carry this machine's noise; the median is the figure to compare.
- **DynamoDB work.** Calls are counted on the wire and are a property of the protocol, not
  of the engine; DynamoDB Local reports consumed capacity for successful writes. For writes
  refused by their condition DynamoDB reports nothing but bills the existing item's size
  (1 KB units, at least 1): the "WRU refused" column is that rule applied to the item the
  refusal returned. So the cost of a duplicate grows with the stored result, up to the cap.
- **Cold start.** Module imports in a fresh interpreter on this machine (not a Lambda
  sandbox, whose CPU share depends on memory size): the relative order is the finding; the
  absolute figures are this machine's. The asset size is exact.
- **Throughput.** The local cloud's event source mapping emulator polls moto's SQS and
  invokes worker processes; with 2 cores, more workers than cores mostly add contention,
  so the curve flattens early, bounded by moto's single server process and by this machine.
"""


DISAGREE = """
## When another measurement disagrees

Four things move `once`'s figure for a batch of 10 far more than they move Powertools',
because `once` keeps ten records' CPU in flight at once and Powertools mostly sleeps:

- **The engine's warm-up.** DynamoDB Local's JIT compiles its request path over the first
  few thousand calls; until then each call costs the engine several times its steady CPU and
  that queues behind ten concurrent requests. The "engine cold" row measures it. This bench
  warms the engine up explicitly before any timed batch; earlier versions relied on the
  cells that ran before the goal cell, and at `--scale goal` on nothing.
- **Other load on the machine.** On 2 cores, any other process takes CPU that `once`'s
  concurrent records need; the "other load" columns and the load averages above say how
  much there was. Compare figures only from runs with little of it.
- **The order the consumers run in.** This bench alternates them batch by batch, so that
  load which comes and goes hits both alike; running all of one consumer's batches first
  lets a change of load land on one side only.
- **Client settings and where latency is injected.** Each consumer runs with its own
  client as shipped (`once`'s skips botocore's parameter validation, a fraction of a
  millisecond of CPU per record); the round trip is a sleep in botocore's `before-send`
  hook, after the request is built, identical for both. In trials while this bench was
  built, moving the sleep before the request is built, giving `once` botocore's default
  settings, or sending stdout to a pipe instead of /dev/null each moved `once`'s batch of
  10 by less than the run-to-run noise of a shared machine.
"""


def render(results: dict[str, Any], docs: Path, console: Console) -> str:
    """Print every table and write the plots; return the markdown page."""
    runs: dict[str, dict[str, Any]] = results["engines"]
    page = Page(console)
    meta = results["meta"]
    page.text(f"""
# Performance

Measured by `make bench` (`{meta["command"]}`), scale `{meta["scale"]}`, in
{meta["seconds"]:.0f} s on {meta["machine"]}. Every comparison runs `once` and the
Powertools consumer written the documented way (`idempotent_function` +
`BatchProcessor(EventType.SQS)` + `process_partial_response`, in `oncecli/chaos/peers/`) in the
same run, on the same engine, with the same round trip injected at the client (a botocore
`before-send` hook that sleeps before every DynamoDB call) and the same business function.
The naive pattern (`oncecli/chaos/peers/naive.py`) joins the DynamoDB work table.
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
    for engine, result in runs.items():
        if result.get("batches"):
            batches_section(page, engine, result, docs)
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
    if any(r.get("latency") for r in runs.values()):
        plot_latency(runs, docs / "perf_latency.png")
        page.image("perf_latency.png", "median batch time, once against Powertools")
    work_run = next((r for r in runs.values() if r.get("paths")), None)
    if work_run is not None:
        page.text(f"""
## DynamoDB work per record

On {ENGINE_TITLE[work_run["engine"]]}, which reports consumed capacity. Calls are requests
on the wire (an SDK retry would count). Prices: {work.PRICE_NOTE}. USD per million is
DynamoDB request units only (no Lambda, no SQS: `once` also sends a conflicting message to
the DLQ, one SQS request, when a DLQ is configured; with none here it reports it failed).
""")
        page.table(
            "DynamoDB work per record, by path",
            WORK_HEADER,
            work_rows(work_run["paths"]),
            note="An in-batch duplicate costs what a batch with the copy costs more "
            "than one without it. Busy: another delivery holds the key inside its "
            "business code. Conflict: a completed key, another payload; the naive "
            "pattern has no payload check and acknowledges it as a duplicate.",
        )
        plot_work(work_run["paths"], docs / "perf_work.png")
        page.image("perf_work.png", "DynamoDB calls per record by path")
        sizes = work_run["record_sizes"]
        typical = ", ".join(f"{k} {v} B" for k, v in sizes["typical"].items())
        page.text(f"""
### Record size and the result cap

A COMPLETED record for a small ledger-shaped result takes: {typical}. `once` stores the
business result as JSON up to 64 KiB (`RESULT_CAP_BYTES`); over the cap it stores only the
size and sha256, so the record falls back to a few hundred bytes. Under the cap the record
grows with the result, and so do the write units of the complete **and of every later
duplicate**, because a refused conditional write is billed the size of the item it refused.
""")
        page.table(
            "once: record size and write units against result size",
            [
                "result bytes",
                "stored result bytes",
                "record bytes",
                "WRU new (claim+complete)",
                "WRU per duplicate",
                "USD per million new",
            ],
            cap_rows(sizes),
        )
    cold = results.get("coldstart")
    if cold:
        coldstart_page.section(page, cold, docs, _plt())
    tp = results.get("throughput")
    if tp:
        page.text(f"""
## Throughput through the local cloud

The deployed stack on the local cloud (`oncecli.localcloud`, SQS on moto, the tables on the
engine), drained by the event source mapping emulator with W worker processes running
`payments.handler` (batch size 10, no batching window). The queue is filled with
{tp["rows"][0]["messages"] if tp["rows"] else 0} new payments first; the time runs from
the moment the workers are warm until all messages are deleted.
""")
        rows = [
            [
                ENGINE_TITLE.get(r["engine"], r["engine"]),
                str(r["workers"]),
                f"{r['messages_per_s']:.1f}",
                str(r["messages"]),
                f"{r['seconds']:.1f}",
                str(r["invocations"]),
                str(r["mean_invocation_ms"]),
            ]
            for r in tp["rows"]
        ]
        page.table(
            "Local cloud throughput",
            [
                "engine",
                "workers",
                "messages/s",
                "messages",
                "seconds",
                "invocations",
                "mean invocation ms",
            ],
            rows,
        )
        plot_throughput(tp["rows"], docs / "perf_throughput.png")
        page.image("perf_throughput.png", "messages per second against workers")
    profile = next((r["profile"] for r in runs.values() if r.get("profile")), None)
    if profile:
        page.text(
            "## Where once's time goes\n\npyinstrument samples the calling thread, and "
            "`once` runs a one-record batch in the calling thread, so this profile is "
            f"{profile['batches']} one-record batches with no injected RTT and no business "
            f"time on {ENGINE_TITLE.get(profile['engine'], profile['engine'])}: the "
            "client-side cost of one record, which a batch of 10 pays ten times under one "
            f"GIL.\n\n```text\n{profile['text'].strip()}\n```"
        )
        if profile.get("flat"):
            page.text(
                "The same samples by function, self time, libraries included: waiting for "
                "the engine shows as socket calls; nearly all the rest is botocore building, "
                "signing and parsing requests and urllib3/http.client sending them. That is "
                "the CPU per record that bounds big batches; `once`'s own code is the lines "
                "under `once/` and Powertools' logger formats its log line."
                f"\n\n```text\n{profile['flat'].strip()}\n```"
            )
        tuned = tuning.section(docs)
        if tuned:
            page.text(tuned)
    page.text(BOUNDS)
    if any(r.get("batches") for r in runs.values()):
        page.text(DISAGREE)
    return page.markdown()


def batch_rows(rows: list[dict[str, Any]]) -> Rows:
    out = []
    for r in rows:
        once, pt = r["once"], r["powertools"]
        out.append(
            [
                r.get("label", f"{r['batch']:,}"),
                str(r["reps"]),
                _ms(once["median_ms"]),
                _ms(pt["median_ms"]),
                f"{r['ratio']:.3f}",
                f"{_ms(r['floor']['floor_ms'])} ({r['floor']['bound']})",
                f"{r['ratio_floor']:.3f}",
                f"{once['cpu_ms_per_record']:.2f}",
                f"{pt['cpu_ms_per_record']:.2f}",
                f"{once['engine_cpu_ms_per_call']:.2f} / {pt['engine_cpu_ms_per_call']:.2f}",
                f"{once['other_cpu_share']:.0%} / {pt['other_cpu_share']:.0%}",
            ]
        )
    return out


BATCH_HEADER = [
    "batch",
    "batches",
    "once median ms",
    "Powertools median ms",
    "ratio",
    "once floor ms (bound)",
    "floor / Powertools",
    "once CPU ms / record",
    "Powertools CPU ms / record",
    "engine CPU ms / call (once / Powertools)",
    "other load (once / Powertools)",
]


def sweep_rows(rows: list[dict[str, Any]]) -> Rows:
    return [
        [
            f"{r['batch']:,}",
            str(r["max_workers"]),
            str(r["reps"]),
            _ms(r["once"]["median_ms"]),
            f"{_ms(r['floor_ms'])} ({r['bound']})",
            f"{r['once']['cpu_ms_per_record']:.2f}",
            f"{r['once']['engine_cpu_ms_per_call']:.2f}",
            f"{r['once']['other_cpu_share']:.0%}",
        ]
        for r in rows
    ]


SWEEP_HEADER = [
    "batch",
    "max_workers",
    "batches",
    "once median ms",
    "floor ms (bound)",
    "CPU ms / record",
    "engine CPU ms / call",
    "other load",
]


def plot_batches(result: dict[str, Any], path: Path) -> None:
    """Median batch time against batch size, both consumers, with ``once``'s floor."""
    plt = _plt()
    rows = sorted(result["rows"], key=lambda r: r["batch"])
    x = [r["batch"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(x, [r["once"]["median_ms"] for r in rows], "-o", label="once")
    ax.plot(x, [r["powertools"]["median_ms"] for r in rows], "--s", label="Powertools")
    ax.plot(x, [r["floor"]["floor_ms"] for r in rows], ":", color="grey", label="once's floor")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="records per batch (new keys)",
        ylabel="median batch time (ms)",
        title=f"Batch time, {result['rtt_ms']:g} ms RTT, {result['business_ms']:g} ms business",
    )
    ax.set_xticks(x, [f"{v:,}" for v in x])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def batches_section(page: Page, engine: str, result: dict[str, Any], docs: Path) -> None:
    b = result["batches"]
    warm = result.get("warm_up")
    warmed = (
        f"DynamoDB Local was warmed up first with {warm['records']:,} new records per "
        "consumer (no RTT, no business time), until its CPU per call stopped falling: "
        f"{warm['first']['engine_cpu_ms_per_call']:.2f} ms of engine CPU per call in the "
        f"first round of up to {batches.WARM_ROUND} records, "
        f"{warm['last']['engine_cpu_ms_per_call']:.2f} ms in the last. That is the "
        "engine's JIT compiling its request path, a cost no consumer should be charged."
        if warm
        else ""
    )
    page.text(f"""
## Big batches: {ENGINE_TITLE[engine]}

Batches of new keys, {b["rtt_ms"]:g} ms injected before every DynamoDB call,
{b["business_ms"]:g} ms of business time, `once` with its default `max_workers`. {warmed}
The consumers alternate batch by batch. CPU is measured per batch: the consumer's process
(`time.process_time`, every thread), the engine's process (`/proc/<pid>/stat`) and the rest
of the machine (`/proc/stat`, shown as "other load": the share of all {b["cores"]} cores other
processes used while the batch ran). `once`'s floor is the largest of the waits
(`ceil(batch / max_workers)` rounds of RTT + business + RTT), the consumer's CPU (one GIL:
one core at most) and the consumer's and the engine's CPU over all cores, from the CPU
measured in these very batches.
""")
    cold = result.get("cold")
    first = [{**cold, "label": f"{cold['batch']:,}, engine cold"}] if cold else []
    page.table(
        f"Big batches, {ENGINE_TITLE[engine]}: batch time and CPU per record",
        BATCH_HEADER,
        batch_rows(first + b["rows"]),
        note='"engine cold": the same batches before the engine\'s warm-up (it had only '
        "served the DynamoDB work section), measured to show what the warm-up removes; not "
        "a goal figure."
        if cold
        else "",
    )
    plot_batches(b, docs / "perf_batches.png")
    page.image("perf_batches.png", "median batch time against batch size, once and Powertools")
    if b["sweep"]:
        page.text(
            "`once` alone, for each `max_workers`, the same batches interleaved: where more "
            "records in flight stop paying, because the consumer's CPU, not the waits, is "
            "the bound."
        )
        page.table(
            f"max_workers sweep, {ENGINE_TITLE[engine]}", SWEEP_HEADER, sweep_rows(b["sweep"])
        )


def machine_note(results: dict[str, Any]) -> str:
    """The machine's load around the run, and whether the figures were taken on a quiet one."""
    load = results["meta"].get("load")
    if not load:
        return ""
    shares = [
        row[name]["other_cpu_share"]
        for run in results["engines"].values()
        for row in run.get("batches", {}).get("rows", [])
        for name in COMPARED
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
