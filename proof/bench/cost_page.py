"""The page's "What a million messages cost" section: dollars per million new messages for
Powertools, ``once`` two-phase and ``once`` staged, by component, with its stacked-bar plot
(``perf_cost.png``), and what the outbox's clear costs against leaving it out at several
duplicate rates (``cost.py`` measures the figures, ``prices.py`` holds the prices).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench import cost, prices
from proof.bench.page import ENGINE_TITLE, Page, Rows, pyplot

PLOT = "perf_cost.png"
#: AWS's rule for a transaction's write units.
TRANSACTION_RULE = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
    "transaction-apis.html#transaction-capacity-handling"
)
COMPONENT_TITLE = {
    "dynamodb_writes": "DynamoDB writes",
    "dynamodb_reads": "DynamoDB reads",
    "lambda_duration": "Lambda GB-seconds",
    "lambda_requests": "Lambda requests",
    "sqs": "SQS requests",
}


def _combos(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, consumer, variant) in the page's order."""
    return [
        (f"{c}|{v.label}", c, v.label)
        for c in cost.CONSUMERS
        for v in cost.VARIANTS
        if f"{c}|{v.label}" in result["counts"]
    ]


def bills(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """USD per million new messages, by component, per combination."""
    return {
        key: cost.bill(result["counts"][key], result["timing"][key]["new"]["median_ms"])
        for key, _, _ in _combos(result)
    }


def measured_rows(result: dict[str, Any]) -> Rows:
    rows = []
    for key, consumer, variant in _combos(result):
        new = result["counts"][key]["new"]
        timed = result["timing"][key]["new"]
        ops = ", ".join(f"{op} {n:g}" for op, n in new["ddb_operations"].items() if n)
        rows.append(
            [
                cost.TITLE[consumer],
                variant,
                f"{new['ddb_calls']:g} ({ops or '-'})",
                f"{new['wcu_reported']:g}",
                f"{new['wcu_rules']:g}",
                f"{new['rcu_reported']:g}",
                f"{cost.sqs_requests(new['sqs_calls']):g}",
                f"{timed['median_ms']:.1f}",
                f"{timed['median_ms'] / cost.BATCH:.1f}",
            ]
        )
    return rows


MEASURED_HEADER = [
    "consumer",
    "variant",
    "DynamoDB calls / new message",
    "WRU (engine)",
    "WRU (by rule)",
    "RRU (engine)",
    "SQS requests / message",
    "batch of 10: median ms",
    "billed ms / message",
]


def usd_rows(result: dict[str, Any]) -> Rows:
    b = bills(result)
    rows = []
    for key, consumer, variant in _combos(result):
        parts = b[key]
        base = b.get(f"powertools|{variant}")
        differs = abs(parts["dynamodb_writes_rule"] - parts["dynamodb_writes"]) > 1e-9
        by_rule = cost.total(parts) - parts["dynamodb_writes"] + parts["dynamodb_writes_rule"]
        rows.append(
            [
                cost.TITLE[consumer],
                variant,
                *(f"{parts[k]:.3f}" for k in cost.COMPONENTS),
                f"{cost.total(parts):.3f}",
                f"{cost.total(parts) / cost.total(base):.2f}" if base else "",
                f"{by_rule:.3f}" if differs else "same",
            ]
        )
    return rows


USD_HEADER = [
    "consumer",
    "variant",
    *(f"{COMPONENT_TITLE[k]} $" for k in cost.COMPONENTS),
    "total $",
    "vs Powertools",
    "total $, DynamoDB by rule",
]


def clear_rows(trade: dict[str, Any]) -> Rows:
    return [
        [
            f"{r['rate']:.1%}",
            f"{r['keep']:.3f}",
            f"{r['once']:.3f}",
            f"{r['once-staged']:.3f}",
            "keep" if r["keep"] <= min(r["once"], r["once-staged"]) else "leave out",
        ]
        for r in trade["rates"]
    ]


CLEAR_HEADER = [
    "duplicate rate",
    "keep the clear $ / million",
    "leave it out $ / million (two-phase receiver)",
    "leave it out $ / million (staged receiver)",
    "cheaper",
]


def plot(result: dict[str, Any], path: Path) -> None:
    """Stacked bars: USD per million new messages by component, per consumer and variant."""
    plt = pyplot()
    b = bills(result)
    combos = _combos(result)
    fig, ax = plt.subplots(figsize=(10, 4.6))
    x = list(range(len(combos)))
    bottom = [0.0] * len(combos)
    for component in cost.COMPONENTS:
        heights = [b[key][component] for key, _, _ in combos]
        ax.bar(x, heights, 0.7, bottom=bottom, label=COMPONENT_TITLE[component])
        bottom = [a + h for a, h in zip(bottom, heights, strict=True)]
    ax.set_xticks(x, [f"{cost.TITLE[c]}\n{v}" for _, c, v in combos], fontsize=7)
    ax.set(
        ylabel="USD per million new messages",
        title=f"What a million messages cost ({prices.REGION}, on-demand, prices of "
        f"{prices.AS_OF})",
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _engine_note(result: dict[str, Any], engine: str) -> str:
    """Whether the engine's reported write units agree with DynamoDB's rules, row by row."""
    off = [
        f"{cost.TITLE[c]}, {v} (engine {result['counts'][k]['new']['wcu_reported']:g}, "
        f"rule {result['counts'][k]['new']['wcu_rules']:g})"
        for k, c, v in _combos(result)
        if abs(result["counts"][k]["new"]["wcu_reported"] - result["counts"][k]["new"]["wcu_rules"])
        > 1e-9
    ]
    if not off:
        return (
            f"{engine} reported, for every row, the write units DynamoDB's rules give the items "
            "written (a transactional write 2 units per item per KB: "
            f"{TRANSACTION_RULE}), so the engine's figure is the bill."
        )
    return (
        f"**{engine} reports fewer write units than AWS bills** in these rows: "
        + "; ".join(off)
        + ". AWS bills a transactional write 2 units per item per KB "
        f"({TRANSACTION_RULE}): "
        'the dollars are the engine\'s figure, and the last column ("DynamoDB by rule") the '
        "total with DynamoDB priced by that rule."
    )


def section(page: Page, run: dict[str, Any], docs: Path | None) -> None:
    """The section from a ``proof.bench.commit`` run that measured ``cost``."""
    result = run["cost"]
    engine = ENGINE_TITLE[run["engine"]]
    scale = "" if run["scale"] == "full" else f" --scale {run['scale']}"
    if run.get("parts") == ["cost"]:
        scale += " --parts cost"
    page.text(f"""
## What a million messages cost

Dollars per million new messages for Powertools, `once` two-phase (`effects="any"`, the
default) and `once` staged (`effects="staged"`), each with no staged write, one staged write
(a `Put` of a ledger entry) and an outbox of one message; Powertools' equivalents are its
record plus the business code's own `PutItem` or `SendMessage`, not atomic with the record.
Measured by `python -m proof.bench.commit{scale}` ({run["at"]}, tables on {engine}, SQS on
moto's server), priced with `proof/bench/prices.py`: {prices.note()}.

- **DynamoDB**: the write and read units per new message the engine reported with
  `ReturnConsumedCapacity=TOTAL` on every item call, batches of {result["count_records"]} new
  keys, on-demand.
- **Lambda**: {cost.MEMORY_GB * 1024:.0f} MB, billed for the median wall time of a batch of
  {cost.BATCH} new messages ({result["rtt_ms"]:g} ms before every DynamoDB and SQS request,
  {result["business_ms"]:g} ms of business time, batches per row: {result["reps"]}, the rows
  taking turns), one invoke per batch. The wall time is this machine's (a client on 2 shared
  cores): a Lambda's CPU share differs, and the cold start is not in it.
- **SQS**: the event source mapping's one `ReceiveMessage` and one `DeleteMessageBatch` per
  batch of {cost.BATCH} (empty long polls not counted), plus what the consumer sends (the
  outbox: `once` sends each record's messages in one `SendMessageBatch`, Powertools' code one
  `SendMessage`); each payload is under 64 KB, one request. On the happy path there is no
  visibility change and no DLQ send. The producer's `SendMessage` onto the source queue is the
  same for every consumer and left out.
""")
    page.table(f"Per new message, measured ({engine})", MEASURED_HEADER, measured_rows(result))
    page.text(_engine_note(result, engine))
    page.table(
        "USD per million new messages",
        USD_HEADER,
        usd_rows(result),
        note="No free tier. Duplicates, retries and storage are not in these figures (the "
        "DynamoDB work section prices a duplicate: one refused write, 1 unit).",
    )
    if docs is not None:
        plot(result, docs / PLOT)
        page.image(PLOT, "USD per million new messages by component, per consumer and variant")
    clear_section(page, result)


def clear_section(page: Page, result: dict[str, Any]) -> None:
    """The outbox's clear: what keeping it costs, what leaving it out would."""
    trade = cost.clear_tradeoff(result)
    receivers = trade["receivers"]
    two_phase, staged = receivers["once"], receivers["once-staged"]
    page.text(f"""
### The outbox's clear

After a record's outbox is sent, `once` clears it: one more fenced `UpdateItem` per new
message with an outbox ({trade["clear_calls"]:g} call measured, {trade["clear_wru"]:g} write
unit by DynamoDB's rules, {trade["clear_ms"]:.1f} ms of wall time per clear on the wire
here, the records of a batch clearing concurrently). Leaving it out would save that call and
leave the sent outbox on the COMPLETED record; then every later duplicate of the message
finds the outbox and sends it again ({trade["resend_requests"]:g} SQS request per duplicate
measured, {trade["send_ms"]:.1f} ms per send), and the receiver takes each re-sent copy as a
duplicate of the message it already handled, by `once.source` / `once.seq`: for a `once`
receiver, its share of a receive and a delete, of an invoke, and one refused write
(two-phase receiver: {two_phase["dup_wru"]:g} unit, a batch of {cost.BATCH} duplicates in
{two_phase["dup_batch_ms"]:.1f} ms; staged receiver: {staged["dup_wru"]:g} unit,
{staged["dup_batch_ms"]:.1f} ms, since it runs business code before its commit is refused).

What each choice promises: with the clear, a COMPLETED record with no outbox means nothing
is owed, so a duplicate is acknowledged on the record alone and sends nothing; without it,
every duplicate re-sends, and the receiver's dedup carries the cost. "Never acknowledged
while owed" holds either way: a message is acknowledged only once its outbox is sent. But
without the clear, a duplicate that arrives after the receiver's record of the re-sent copy
has expired (the receiver keeps records for its own retention, the sender re-sends for the
sender's) is a new message to the receiver, and its effect happens twice: leaving the clear
out would make exactly-once depend on every receiver keeping its records at least as long
as every sender, which no consumer can check. That, not the price, is why the clear stays.
""")
    page.table(
        f"Keeping the clear against leaving it out, per million new messages with an outbox "
        f"of one ({cost.TITLE[trade['sender']]} sender)",
        CLEAR_HEADER,
        clear_rows(trade),
    )
    page.text(conclusion(trade))


def conclusion(trade: dict[str, Any]) -> str:
    """When leaving the clear out would be cheaper, from the break-even duplicate rates."""
    even = trade["break_even"]
    if even["once"] is None or even["once-staged"] is None:
        return "The runtime keeps the clear."
    low = min(even["once"], even["once-staged"])
    return (
        "The runtime keeps the clear. Leaving it out would be cheaper whenever fewer than "
        f"{even['once']:.1%} of messages are delivered again after they completed (with a "
        f"two-phase receiver; {even['once-staged']:.1%} with a staged one): that is where one "
        "clear per new message costs what the re-sends and the receiver's dedup cost. "
        + (
            "Below that rate the clear costs up to "
            f"${trade['keep_usd']:.2f} per million messages with an outbox more than leaving "
            "it out; what it buys is the promise above: a COMPLETED record without an outbox "
            "owes nothing, read from the record alone."
            if low > 0.1
            else "Above that rate the clear is also the cheaper choice."
        )
    )
