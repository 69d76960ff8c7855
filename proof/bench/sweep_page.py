"""The page's "On Lambda's CPU: the memory sweep" section, rendered from a
``proof.bench.sweep`` run's results: per consumer, variant, batch size and memory size, the
batch time, the CPU per record, whether the batch was CPU-bound, the GB-seconds and the
dollars per million messages by component; the cheapest memory size of each; the cold start
at each share; and the plot ``perf_sweep.png``.

The arithmetic is here, not in the measurement: a page renders from results, and the
measurement (``sweep.py``) imports the page, never the reverse.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from rich.console import Console

from proof.bench import cost, cpushare, prices
from proof.bench.page import ENGINE_TITLE, Page, Rows, place_section, pyplot

PLOT = "perf_sweep.png"
BEGIN = "<!-- memory sweep: written by python -m proof.bench.sweep -->"
END = "<!-- /memory sweep -->"
#: A batch is called CPU-bound when the process used this share of its quota over it.
CPU_BOUND = 0.8
#: The memory size the whole-core rows are priced at (the cost section's).
UNTHROTTLED_PRICED_MB = round(cost.MEMORY_GB * 1024)
#: The memory size ``OnceConsumer`` deploys by default (once_cdk/consumer.py).
DEFAULT_MB = 512
COMPONENT_TITLE = {
    "lambda_duration": "Lambda GB-s $",
    "lambda_requests": "Lambda requests $",
    "dynamodb_writes": "DynamoDB writes $",
    "dynamodb_reads": "DynamoDB reads $",
    "sqs": "SQS $",
}
PATH_TITLE = {"new": "new messages", "duplicate": "duplicates"}


# --- the arithmetic -----------------------------------------------------------------------


def summary(samples: list[dict[str, float]], size: int, vcpus: float | None) -> dict[str, Any]:
    """Median batch time, CPU per record, the share of its quota the process used and
    whether the batches were CPU-bound (on whole cores: never called so)."""
    wall = sum(s["wall_ms"] for s in samples)
    cpu = sum(s["cpu_ms"] for s in samples)
    use = cpu / (wall * vcpus) if vcpus and wall else None
    periods = sum(s["periods"] for s in samples)
    return {
        "batches": len(samples),
        "median_ms": statistics.median(s["wall_ms"] for s in samples),
        "cpu_ms_per_record": cpu / (size * len(samples)),
        "quota_use": use,
        "throttled_share": sum(s["throttled"] for s in samples) / periods if periods else None,
        "cpu_bound": use is not None and use >= CPU_BOUND,
    }


def bill(count: dict[str, Any], batch_ms: float, memory_mb: int, batch: int) -> dict[str, float]:
    """USD per million messages by component (``cost.COMPONENTS``), DynamoDB's writes by
    DynamoDB's rules (a refused duplicate's write is billed though the engine reports none),
    their total, and the GB-seconds per million."""
    parts = cost.bill({"new": count}, batch_ms, memory_mb / 1024, batch)
    parts["dynamodb_writes"] = parts.pop("dynamodb_writes_rule")
    parts["total"] = cost.total(parts)
    parts["gb_s_per_million"] = batch_ms / 1000 * memory_mb / 1024 / batch * 1e6
    return parts


def figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per consumer, variant, batch size and memory size (None: whole cores), each
    with its new messages' and its duplicates' summary and bill."""
    out = []
    for point in result["points"]:
        memory = point["memory_mb"]
        for row in point["rows"]:
            counts = result["counts"][f"{point['consumer']}|{row['variant']}"]
            entry: dict[str, Any] = {
                "consumer": point["consumer"],
                "variant": row["variant"],
                "batch": row["batch"],
                "memory_mb": memory,
                "throttled": point["throttled"],
            }
            for path in PATH_TITLE:
                s = summary(row[path], row["batch"], point["vcpus"])
                priced = memory or UNTHROTTLED_PRICED_MB
                entry[path] = s | {"usd": bill(counts[path], s["median_ms"], priced, row["batch"])}
            out.append(entry)
    return out


Key = tuple[str, str, int, str]


def cheapest(rows: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Per consumer, variant, batch size and path: the row (at a share) of least dollars."""
    best: dict[Key, dict[str, Any]] = {}
    for r in rows:
        if r["memory_mb"] is None:
            continue
        for path in PATH_TITLE:
            key = (r["consumer"], r["variant"], r["batch"], path)
            if key not in best or r[path]["usd"]["total"] < best[key][path]["usd"]["total"]:
                best[key] = r
    return best


# --- the tables ---------------------------------------------------------------------------


def _mb(memory: int | None) -> str:
    return f"{memory:,}" if memory else f"whole cores (priced at {UNTHROTTLED_PRICED_MB})"


def _bound(s: dict[str, Any]) -> str:
    if s["quota_use"] is None:
        return "-"
    return ("yes" if s["cpu_bound"] else "no") + f" ({s['quota_use']:.0%})"


def sweep_rows(rows: list[dict[str, Any]], batch: int, path: str) -> Rows:
    out = []
    for r in rows:
        if r["batch"] != batch:
            continue
        s = r[path]
        usd = s["usd"]
        out.append(
            [
                cost.TITLE[r["consumer"]],
                r["variant"],
                _mb(r["memory_mb"]),
                f"{s['median_ms']:.1f}",
                f"{s['cpu_ms_per_record']:.2f}",
                _bound(s),
                f"{usd['gb_s_per_million']:,.0f}",
                *(f"{usd[k]:.3f}" for k in COMPONENT_TITLE),
                f"{usd['total']:.3f}",
            ]
        )
    return out


SWEEP_HEADER = [
    "consumer",
    "variant",
    "memory MB",
    "batch ms (median)",
    "CPU ms / record",
    "CPU-bound (quota used)",
    "GB-s / million",
    *COMPONENT_TITLE.values(),
    "total $ / million",
]


def cheapest_rows(rows: list[dict[str, Any]]) -> Rows:
    best = cheapest(rows)
    at_default = {
        (r["consumer"], r["variant"], r["batch"], path): r[path]["usd"]["total"]
        for r in rows
        if r["memory_mb"] == DEFAULT_MB
        for path in PATH_TITLE
    }
    out = []
    for key, r in best.items():
        consumer, variant, batch, path = key
        s = r[path]
        default = at_default.get(key)
        out.append(
            [
                cost.TITLE[consumer],
                variant,
                f"{batch:,}",
                PATH_TITLE[path],
                f"{r['memory_mb']:,}",
                f"{s['usd']['total']:.3f}",
                f"{s['median_ms']:.1f}",
                f"{default:.3f}" if default is not None else "-",
            ]
        )
    return out


CHEAPEST_HEADER = [
    "consumer",
    "variant",
    "batch",
    "messages",
    "cheapest MB",
    "total $ / million there",
    "batch ms there",
    f"total $ / million at {DEFAULT_MB} MB",
]


def cold_rows(result: dict[str, Any]) -> Rows:
    out = []
    for point in result["points"]:
        c = point["cold"]
        init = c["start_ms"] + c["import_ms"] + c["build_ms"]
        out.append(
            [
                cost.TITLE[point["consumer"]],
                _mb(point["memory_mb"]).split(" (")[0],
                f"{c['start_ms']:.0f}",
                f"{c['import_ms']:.0f}",
                f"{c['build_ms']:.0f}",
                f"{c['first_ms']:.0f}",
                f"{init + c['first_ms']:.0f}",
            ]
        )
    return out


COLD_HEADER = [
    "consumer",
    "memory MB",
    "interpreter start ms",
    "import ms",
    "handler built ms",
    "first record ms (at the share)",
    "cold start ms",
]


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Cost per million new messages and batch time by memory size, one line per consumer
    (color) and variant (line style), one row of panels per batch size."""
    plt = pyplot()
    batches = sorted({r["batch"] for r in rows})
    fig, axes = plt.subplots(len(batches), 2, figsize=(11, 3.6 * len(batches)), squeeze=False)
    colors = {"powertools": "tab:orange", "once": "tab:blue", "once-staged": "tab:green"}
    styles = {v.label: s for v, s in zip(cost.VARIANTS, ("-", "--", ":"), strict=True)}
    for line, batch in enumerate(batches):
        money, time_ax = axes[line]
        for consumer in cost.CONSUMERS:
            for variant in cost.VARIANTS:
                pts = sorted(
                    (r["memory_mb"], r["new"])
                    for r in rows
                    if r["batch"] == batch
                    and r["consumer"] == consumer
                    and r["variant"] == variant.label
                    and r["memory_mb"]
                )
                if not pts:
                    continue
                xs = [m for m, _ in pts]
                style = {"color": colors[consumer], "linestyle": styles[variant.label]}
                label = f"{cost.TITLE[consumer]}, {variant.label}"
                usd = [s["usd"]["total"] for _, s in pts]
                money.plot(xs, usd, marker="o", label=label, **style)
                time_ax.plot(xs, [s["median_ms"] for _, s in pts], marker="o", **style)
        for ax in (money, time_ax):
            ax.set_xscale("log")
            ax.set_xticks(xs, [str(m) for m in xs])
            ax.minorticks_off()
            ax.grid(alpha=0.3)
            ax.set_xlabel("Lambda memory MB (CPU share: MB / 1,769 vCPU)")
        money.set(ylabel="USD per million new messages", title=f"Batch of {batch}: cost")
        time_ax.set(ylabel="batch ms (median)", title=f"Batch of {batch}: time")
        time_ax.set_yscale("log")
        if line == 0:
            money.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- the section --------------------------------------------------------------------------


def _load(result: dict[str, Any]) -> str:
    start, end = (", ".join(f"{v:.2f}" for v in result[k]) for k in ("load_start", "load_end"))
    return f"load average (1, 5, 15 min) {start} at the start, {end} at the end"


def _quotas(result: dict[str, Any]) -> str:
    seen: dict[int, str] = {}
    for point in result["points"]:
        if point["memory_mb"]:
            seen.setdefault(point["memory_mb"], point["quota"])
    lines = [f"- {line}" for _, line in sorted(seen.items())]
    unthrottled = [p for p in result["points"] if p["memory_mb"] and not p["throttled"]]
    if unthrottled:
        lines.insert(
            0,
            f"- **{len(unthrottled)} runs could not be throttled and ran on whole cores**: "
            "their figures are this machine's, not a Lambda's.",
        )
    return "\n".join(lines)


def section(page: Page, result: dict[str, Any], docs: Path | None) -> None:
    rows = figures(result)
    engine = ENGINE_TITLE[result["engine"]]
    reps = ", ".join(f"{v} of {k}" for k, v in result["reps"].items())
    page.text(f"""
## On Lambda's CPU: the memory sweep

Every other section runs a consumer on whole cores of this machine. A Lambda function gets
CPU in proportion to its memory, one vCPU at 1,769 MB ({cpushare.SOURCE}), so at the 512 MB
`OnceConsumer` deploys it has 0.29 of a core. Here each consumer runs in a process of its
own held to that share by a cgroup v1 CPU quota (`proof/bench/cpushare.py`:
`cpu.cfs_quota_us = cpu.cfs_period_us * MB / 1769`), at each memory size, and once on whole
cores for comparison (the "whole cores" rows, and every section above: kept beside these).
The quota's period is {result["period_us"] / 1000:g} ms: public measurements put Lambda's
near 20 ms (this rests on issue 43's text; AWS documents no period), and a longer one would
let a process burst a whole period's quota at once, then stall.

- **Back to back.** A quota bites on sustained work: each consumer's batches run one after
  the other in its process, as a busy queue invokes a function (idle time between batches
  would refill the quota). Per variant and batch size ({reps}), a batch of new keys, then
  the same batch again (duplicates); {result["rtt_ms"]:g} ms before every DynamoDB and SQS
  request, {result["business_ms"]:g} ms of business time; tables on {engine}, the outbox's
  queues on moto's server, both outside the quota.
- **CPU-bound**: the process used at least {CPU_BOUND:.0%} of its quota over the batches
  (its CPU over wall time times its share; in brackets).
- **Dollars** per million messages: {prices.note()}. Lambda billed for the median batch at
  the memory size, one invoke per batch; DynamoDB's writes by DynamoDB's rules (a
  duplicate's refused write is billed one unit though the engine reports none), reads as
  the engine reported them; SQS: the event source mapping's receive and delete per batch,
  plus the consumer's sends. Calls and units per message do not depend on the CPU: counted
  once, batches of {result["count_records"]} new keys, no RTT. The whole-core rows are
  priced at {UNTHROTTLED_PRICED_MB} MB, as the cost section is. A staged duplicate with a
  staged write is one refused `TransactWriteItems`: the engine reports no units for it and
  the bench counts refused conditional writes only, so its writes are priced at 0 here (what
  AWS bills a cancelled transaction was not checked).
- **Cold start**: a faithful one imports and builds at a full core and handles its first
  record at the share. Issue 43 quotes an AWS guide that an on-demand function's init phase
  runs at a full vCPU for up to 10 s (resting on the issue's text; the init phase's 10 s
  limit: {cpushare.INIT_LIMIT}); init is billed since August 2025
  ({cpushare.INIT_BILLING}). So each process starts with a full core (the share, if larger)
  for the interpreter, the consumer's import and its handler's construction, and its quota
  drops to the share for its first record (one new message). The child runs with Lambda's
  `AWS_LAMBDA_INITIALIZATION_TYPE=on-demand`, under which `once` builds its processor and
  its DynamoDB client, boto3's import included, in INIT (`once/snapstart.py`: "handler
  built"), calling no AWS API; Powertools builds its client at import.

Measured by `{result.get("command", "python -m proof.bench.sweep")}` ({result["at"]}), in
{result["seconds"]:.0f} s on {result["cores"]} cores shared with other work:
{_load(result)}. Quotas:

{_quotas(result)}
""")
    for batch in sorted({r["batch"] for r in rows}):
        for path in PATH_TITLE:
            page.table(
                f"Batch of {batch}, {PATH_TITLE[path]}: time, CPU and USD per million by "
                "memory size",
                SWEEP_HEADER,
                sweep_rows(rows, batch, path),
            )
    if docs is not None:
        plot(rows, docs / PLOT)
        page.image(PLOT, "USD per million new messages and batch time by Lambda memory size")
    page.table(
        "The cheapest memory size, per consumer, variant, batch size",
        CHEAPEST_HEADER,
        cheapest_rows(rows),
        note="Figures of one run, a few batches per point, on a shared machine: neighbouring "
        "memory sizes within a few percent are a tie.",
    )
    page.table("Cold start at each memory size's share", COLD_HEADER, cold_rows(result))


def render(result: dict[str, Any], console: Console, docs: Path | None = None) -> str:
    """Print the tables; return the section's markdown (its plot goes to ``docs``)."""
    page = Page(console)
    section(page, result, docs)
    return page.markdown()


def write_section(docs: Path, markdown: str) -> Path:
    return place_section(docs, markdown, BEGIN, END)
