"""The page's "DynamoDB work per record" section and its goal rows: calls, operations,
capacity units and price per record for each path a key can take, and how the record and
its write units grow with the stored result up to the cap (``work.py`` measures them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench import work
from proof.bench.page import ENGINE_TITLE, Page, Rows, pyplot, verdict


def goal_rows(paths: dict[str, Any]) -> Rows:
    """``once``'s DynamoDB calls per key on each path, against the protocol's count."""
    rows: Rows = []
    once = paths["once"]
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
    staged = paths.get("once-staged")
    if staged:
        new, dup = staged["new"]["calls"], staged["duplicate"]["calls"]
        rows.append(
            [
                "DynamoDB calls per new message / duplicate, staged",
                f"{new:g} / {dup:g}",
                "",
                "1 / 1",
                verdict(new <= 1 and dup <= 1),
            ]
        )
    return rows


#: Write units per new message, staged: (no staged write, one staged write).
STAGED_WRU_GOAL = (1.0, 4.0)


def write_unit_goal_rows(units: dict[str, Any] | None) -> Rows:
    """Write units per new message under ``effects="staged"``, with no staged write and
    with one, beside the two-phase protocol's (by DynamoDB's rules; the engine's report in
    parentheses when it differs)."""
    if not units or "once-staged" not in units:
        return []

    def pair(name: str) -> str:
        got = units[name]
        rule = " / ".join(f"{got[v]['wru_rules']:g}" for v in ("none", "one write"))
        engine = " / ".join(f"{got[v]['wru_reported']:g}" for v in ("none", "one write"))
        return rule + ("" if rule == engine else f" (engine reports {engine})")

    staged = units["once-staged"]
    got = (staged["none"]["wru_rules"], staged["one write"]["wru_rules"])
    goal = STAGED_WRU_GOAL
    return [
        [
            "write units per new message, staged, no staged write / one staged write",
            f"{pair('once-staged')} (two-phase: {pair('once')})"
            if "once" in units
            else pair("once-staged"),
            "",
            f"{goal[0]:g} / {goal[1]:g}",
            verdict(got[0] <= goal[0] and got[1] <= goal[1]),
        ]
    ]


def write_unit_rows(units: dict[str, Any]) -> Rows:
    title = {"once": "once two-phase", "once-staged": "once staged"}
    return [
        [
            title.get(name, name),
            variant,
            f"{got['calls']:g}",
            ", ".join(f"{op} {n:g}" for op, n in got["operations"].items() if n) or "-",
            f"{got['wru_reported']:g}",
            f"{got['wru_rules']:g}",
            f"{got['wru_rules'] * work.PRICE_WRU:.3f}",
        ]
        for name, per in units.items()
        if name in work.PROTOCOLS
        for variant, got in per.items()
    ]


BRIDGE_TITLE = "Write units per message with the bridge to Powertools' records"
BRIDGE_HEADER = [
    "protocol",
    "path",
    "staged writes",
    "calls",
    "operations",
    "WRU (engine)",
    "WRU (by rule)",
    "over no bridge (by rule)",
    "USD per million (by rule)",
]


def _operations(got: dict[str, Any]) -> str:
    """The operations per message, a canceled transaction marked so."""
    canceled = got.get("canceled", 0)
    return (
        ", ".join(
            f"{op} {n:g}"
            + (f" ({canceled:g} canceled)" if op == "TransactWriteItems" and canceled else "")
            for op, n in got["operations"].items()
            if n
        )
        or "-"
    )


def bridge_rows(units: dict[str, Any]) -> Rows:
    """Each protocol with the bridge, new message by staged writes and the duplicate of a
    Powertools record: calls, operations, write units and what they add over the same
    protocol without the bridge (a new message only: without the bridge a message Powertools
    completed is new to once)."""
    title = {"once": "once two-phase", "once-staged": "once staged"}
    rows: Rows = []
    for name, bridged_name in work.BRIDGED.items():
        measured = units.get(bridged_name, {})
        for variant in ("none", "one write", work.POWERTOOLS_DUPLICATE):
            if variant not in measured:
                continue
            got = measured[variant]
            duplicate = variant == work.POWERTOOLS_DUPLICATE
            plain = units.get(name, {}).get(variant)
            over = "-" if plain is None else f"+{got['wru_rules'] - plain['wru_rules']:g}"
            rows.append(
                [
                    f"{title[name]} + bridge",
                    "duplicate (Powertools COMPLETED)" if duplicate else "new",
                    "none" if duplicate else variant,
                    f"{got['calls']:g}",
                    _operations(got),
                    f"{got['wru_reported']:g}",
                    f"{got['wru_rules']:g}",
                    over,
                    f"{got['wru_rules'] * work.PRICE_WRU:.3f}",
                ]
            )
    return rows


def _added(units: dict[str, Any], name: str, variant: str) -> tuple[float, float, float]:
    """Write units by rule with the bridge, without it, and the USD per million added."""
    got = units[work.BRIDGED[name]][variant]["wru_rules"]
    plain = units[name][variant]["wru_rules"]
    return got, plain, (got - plain) * work.PRICE_WRU


def bridge_section(page: Page, units: dict[str, Any]) -> None:
    """The subsection on the bridge to Powertools' records: one paragraph, one table, from
    the run's ``write_units`` (``work.bridged``)."""
    if not all(b in units for b in work.BRIDGED.values()):
        return

    def more(name: str, variant: str, unit: str = "") -> str:
        got, plain, usd = _added(units, name, variant)
        return f"+{got - plain:g}{unit} ({got:g} instead of {plain:g}, +${usd:.3f} per million)"

    dup = {name: units[work.BRIDGED[name]][work.POWERTOOLS_DUPLICATE] for name in work.BRIDGED}
    two, staged = dup["once"], dup["once-staged"]
    page.text(f"""
### The bridge to Powertools' records

While a team moves from Powertools' idempotency utility, `make_handler(...,
powertools=PowertoolsBridge(...))` (`once.powertools`) makes once honour and keep the team's
Powertools records. From the bench's run (`work.write_units`: the run, the counting and the
prices of the table above; the records of the bench's Powertools consumer, on a table of
their own), the bridge costs per new message, by DynamoDB's rule (1 unit per KB of each item
written, twice that in a transaction:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling),
two-phase
{more("once", "none", " write units over once without it")} with no staged write and
{more("once", "one write")} with one: a `PutItem` of the message's Powertools record
INPROGRESS after the claim, and a completion that becomes a `TransactWriteItems` updating
that record to COMPLETED. Staged, {more("once-staged", "none")} and
{more("once-staged", "one write")}: the one commit becomes, or grows, a `TransactWriteItems`
with a `Put` of that record COMPLETED. A renewal Powertools completed before the deploy costs
two-phase {two["calls"]:g} calls and {two["wru_rules"]:g} write units (the claim, the refused
`PutItem` billed {two["wru_refused"]:g}, the write that completes once's record with
Powertools' response), staged {staged["calls"]:g} calls and {staged["wru_rules"]:g} (that
write; the canceled transaction is counted 0: DynamoDB Local reports nothing for it and
DynamoDB's documentation does not say what it bills). The bridge is paid only while it is
on: without `powertools=`, once writes its own record alone, at the figures of the table
above.
""")
    page.table(BRIDGE_TITLE, BRIDGE_HEADER, bridge_rows(units))


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


def plot(paths: dict[str, Any], path: Path) -> None:
    """DynamoDB calls per record on each path, one bar per consumer."""
    plt = pyplot()
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


def section(page: Page, run: dict[str, Any], docs: Path) -> None:
    """The section from the engine ``run`` that measured the paths, with ``perf_work.png``."""
    page.text(f"""
## DynamoDB work per record

On {ENGINE_TITLE[run["engine"]]}, which reports consumed capacity. Calls are requests
on the wire (an SDK retry would count). Prices: {work.PRICE_NOTE}. USD per million is
DynamoDB request units only (no Lambda, no SQS: `once` also sends a conflicting message to
the DLQ, one SQS request, when a DLQ is configured; with none here it reports it failed).
""")
    page.table(
        "DynamoDB work per record, by path",
        WORK_HEADER,
        work_rows(run["paths"]),
        note="An in-batch duplicate costs what a batch with the copy costs more "
        "than one without it. Busy: another delivery holds the key inside its "
        'business code (under `effects="staged"` no claim is held: the second copy '
        "commits and the holder's commit is refused as a duplicate). Conflict: a completed "
        "key, another payload; the naive pattern has no payload check and acknowledges it "
        "as a duplicate.",
    )
    units = run.get("write_units")
    if units:
        page.text("""
Write units per new message with and without a staged write (`attempt.write` of one `Put`
to a ledger table of its own): under the two-phase protocol the claim, then the completion
(a `TransactWriteItems` of the record and the write when one is staged); under
`effects="staged"` the one commit. "By rule" applies DynamoDB's billing to the items each
call wrote (1 unit per KB of the larger image, twice that in a transaction:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling),
"engine" is what DynamoDB Local reported through `ReturnConsumedCapacity=TOTAL`.
""")
        page.table(
            "Write units per new message, two-phase and staged",
            [
                "protocol",
                "staged writes",
                "calls",
                "operations",
                "WRU (engine)",
                "WRU (by rule)",
                "USD per million (by rule)",
            ],
            write_unit_rows(units),
        )
    plot(run["paths"], docs / "perf_work.png")
    page.image("perf_work.png", "DynamoDB calls per record by path")
    if units:
        bridge_section(page, units)
    sizes = run["record_sizes"]
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
