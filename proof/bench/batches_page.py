"""The page's "Big batches" section, one per engine, and its goal rows: batch time and CPU
per record of ``once`` against Powertools as batches grow, ``once``'s floor, and the
``max_workers`` sweep (``batches.py`` measures them). The caveats that come with these
figures, "When another measurement disagrees", close the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench import batches
from proof.bench.page import ENGINE_TITLE, Page, Rows, ms, pyplot, verdict


def goal_rows(engine: str, result: dict[str, Any]) -> Rows:
    """The batch time goals (``once`` over Powertools, beside the ratio this machine's CPU
    allows) and the CPU per new record, for every batch size measured on ``engine``."""
    rows: Rows = []
    for row in result.get("batches", {}).get("rows", []):
        goal = batches.GOALS.get(row["batch"])
        once, pt = row["once"], row["powertools"]
        if goal is not None:
            rows.append(
                [
                    f"batch of {row['batch']}, once / Powertools, {ENGINE_TITLE[engine]}",
                    f"{ms(once['median_ms'])} / {ms(pt['median_ms'])} ms = {row['ratio']:.3f}",
                    f"{row['ratio_floor']:.3f}",
                    f"≤ {goal:.2f}",
                    verdict(row["ratio"] <= goal),
                ]
            )
        rows.append(
            [
                f"CPU ms per new record, batch of {row['batch']}, once (Powertools)",
                f"{once['cpu_ms_per_record']:.2f} ({pt['cpu_ms_per_record']:.2f})",
                "",
                f"≤ {batches.CPU_GOAL_MS:.1f}",
                verdict(once["cpu_ms_per_record"] <= batches.CPU_GOAL_MS),
            ]
        )
    rows.extend(staged_goal_rows(engine, result))
    return rows


def staged_goal_rows(engine: str, result: dict[str, Any]) -> Rows:
    """The goals of ``once`` under ``effects="staged"``: batch time over Powertools' in the
    same batches, and its client CPU per new record."""
    rows: Rows = []
    measured = [r for r in result.get("batches", {}).get("rows", []) if "once-staged" in r]
    for row in measured:
        goal = batches.GOALS_STAGED.get(row["batch"])
        staged, pt = row["once-staged"], row["powertools"]
        if goal is not None:
            rows.append(
                [
                    f"batch of {row['batch']}, once staged / Powertools, {ENGINE_TITLE[engine]}",
                    f"{ms(staged['median_ms'])} / {ms(pt['median_ms'])} ms = "
                    f"{row['ratio_staged']:.3f}",
                    f"{row['ratio_floor_staged']:.3f}",
                    f"≤ {goal:.2f}",
                    verdict(row["ratio_staged"] <= goal),
                ]
            )
    for row in measured:
        cpu_goal = batches.CPU_GOALS_STAGED_MS.get(row["batch"])
        if cpu_goal is not None:
            staged = row["once-staged"]
            rows.append(
                [
                    f"client CPU ms per new record, batch of {row['batch']}, staged (two-phase)",
                    f"{staged['cpu_ms_per_record']:.2f} ({row['once']['cpu_ms_per_record']:.2f})",
                    "",
                    f"≤ {cpu_goal:.1f}",
                    verdict(staged["cpu_ms_per_record"] <= cpu_goal),
                ]
            )
    return rows


def batch_rows(rows: list[dict[str, Any]]) -> Rows:
    out = []
    for r in rows:
        once, pt = r["once"], r["powertools"]
        out.append(
            [
                r.get("label", f"{r['batch']:,}"),
                str(r["reps"]),
                ms(once["median_ms"]),
                ms(pt["median_ms"]),
                f"{r['ratio']:.3f}",
                f"{ms(r['floor']['floor_ms'])} ({r['floor']['bound']})",
                f"{r['ratio_floor']:.3f}",
                f"{once['cpu_ms_per_record']:.2f}",
                f"{pt['cpu_ms_per_record']:.2f}",
                f"{once['engine_cpu_ms_per_call']:.2f} / {pt['engine_cpu_ms_per_call']:.2f}",
                f"{once['other_cpu_share']:.0%} / {pt['other_cpu_share']:.0%}",
            ]
        )
    return out


def staged_rows(rows: list[dict[str, Any]]) -> Rows:
    """``once`` under ``effects="staged"`` in the same batches as the main table."""
    out = []
    for r in rows:
        if "once-staged" not in r:
            continue
        staged, once = r["once-staged"], r["once"]
        out.append(
            [
                r.get("label", f"{r['batch']:,}"),
                str(r["reps"]),
                ms(staged["median_ms"]),
                ms(once["median_ms"]),
                ms(r["powertools"]["median_ms"]),
                f"{r['ratio_staged']:.3f}",
                f"{ms(r['floor_staged']['floor_ms'])} ({r['floor_staged']['bound']})",
                f"{r['ratio_floor_staged']:.3f}",
                f"{staged['cpu_ms_per_record']:.2f} ({once['cpu_ms_per_record']:.2f})",
                f"{staged['engine_cpu_ms_per_call']:.2f}",
                f"{staged['other_cpu_share']:.0%}",
            ]
        )
    return out


STAGED_HEADER = [
    "batch",
    "batches",
    "once staged median ms",
    "once two-phase median ms",
    "Powertools median ms",
    "staged / Powertools",
    "staged floor ms (bound)",
    "floor / Powertools",
    "CPU ms / record, staged (two-phase)",
    "engine CPU ms / call, staged",
    "other load, staged",
]


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
            ms(r["once"]["median_ms"]),
            f"{ms(r['floor_ms'])} ({r['bound']})",
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


def plot(result: dict[str, Any], path: Path) -> None:
    """Median batch time against batch size, both consumers, with ``once``'s floor."""
    plt = pyplot()
    rows = sorted(result["rows"], key=lambda r: r["batch"])
    x = [r["batch"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(x, [r["once"]["median_ms"] for r in rows], "-o", label="once")
    if all("once-staged" in r for r in rows):
        ax.plot(x, [r["once-staged"]["median_ms"] for r in rows], "-^", label="once staged")
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


def section(page: Page, engine: str, result: dict[str, Any], docs: Path) -> None:
    """The section for one engine's big batches, with its plot (``perf_batches.png``)."""
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
    staged = staged_rows(first + b["rows"])
    if staged:
        page.text(
            '`once` under `effects="staged"` in the same batches (the three consumers take '
            "turns batch by batch): business code first, then one conditional write per "
            "record, no claim, so one DynamoDB call per new record where the two-phase "
            "protocol makes two. Its floor's waits are `ceil(batch / max_workers)` rounds of "
            "business + one RTT."
        )
        page.table(
            f"Big batches, {ENGINE_TITLE[engine]}: once staged",
            STAGED_HEADER,
            staged,
        )
    plot(b, docs / "perf_batches.png")
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


#: Closes the page when any engine ran big batches: what moves ``once``'s batch times.
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
