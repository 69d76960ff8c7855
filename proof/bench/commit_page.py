"""The page's "Atomic effects" section, rendered from a ``proof.bench.commit`` run's
results (``atomic.py`` measures them), and where it sits on ``docs/performance.md``.

A page module of its own, so that the measurement imports no page: ``commit.py`` measures
then calls ``render`` here, which also renders the cost section (``cost_page.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from proof.bench import cost_page
from proof.bench.atomic import VARIANTS
from proof.bench.page import ENGINE_TITLE, Page, place_section

#: The section's bounds on the page; the main renderer keeps everything below its marker.
BEGIN = "<!-- atomic effects: written by python -m proof.bench.commit -->"
END = "<!-- /atomic effects -->"


def _ops(ops: dict[str, float]) -> str:
    return ", ".join(f"{op} {n:g}" for op, n in ops.items() if n) or "-"


def _calls(path: dict[str, Any]) -> str:
    """``DynamoDB + SQS`` calls of one path, per record."""
    ddb, sqs = path["ddb_calls"], path["sqs_calls"]
    return f"{ddb:g}" + (f" + {sqs:g} SQS" if sqs else "")


def count_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for r in rows:
        new, dup = r["new"], r["duplicate"]
        owed = r.get("owed_sent")
        out.append(
            [
                r["variant"],
                f"{new['ddb_calls']:g} ({_ops(new['ddb_operations'])})",
                f"{new['sqs_calls']:g}"
                + (f" ({_ops(new['sqs_operations'])})" if new["sqs_calls"] else ""),
                f"{new['wcu_rules']:g}",
                f"{new['wcu_reported']:g}",
                f"{r['record_bytes']:,}"
                + (f" ({r['owed_record_bytes']:,} owing)" if "owed_record_bytes" in r else ""),
                f"{_calls(dup)}, {dup['wcu_rules']:g} WCU",
                f"{_calls(owed)}, {owed['wcu_rules']:g} WCU" if owed else "-",
            ]
        )
    return out


COUNT_HEADER = [
    "variant",
    "DynamoDB calls / new record",
    "SQS calls / new record",
    "WCU / new record",
    "WCU reported by the engine",
    "record bytes",
    "duplicate: calls, WCU",
    "duplicate owing its outbox: calls, WCU",
]


def time_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    plain = {r["batch"]: r for r in rows if r["variant"] == VARIANTS[0].label}
    out = []
    for r in rows:
        base = plain[r["batch"]]
        out.append(
            [
                f"{r['batch']:,}",
                r["variant"],
                str(r["reps"]),
                f"{r['median_ms']:.1f}",
                f"{r['median_ms'] - base['median_ms']:+.1f}" if r is not base else "",
                f"{r['cpu_ms_per_record']:.2f}",
                f"{r['cpu_ms_per_record'] / base['cpu_ms_per_record']:.2f}"
                if r is not base
                else "",
                f"{r['dynamodb_cpu_ms_per_record']:.2f}",
                f"{r['sqs_cpu_ms_per_record']:.2f}" if "sqs_cpu_ms_per_record" in r else "-",
                f"{r['other_cpu_share']:.0%}",
            ]
        )
    return out


TIME_HEADER = [
    "batch",
    "variant",
    "batches",
    "median ms",
    "vs plain ms",
    "consumer CPU ms / record",
    "CPU vs plain",
    "table engine CPU ms / record",
    "SQS engine CPU ms / record",
    "other load",
]


def render(result: dict[str, Any], console: Console, docs: Path | None = None) -> str:
    """Print the tables; return the sections' markdown (the cost section's plot goes to
    ``docs``, when given)."""
    page = Page(console)
    if "counts" in result:
        effects_section(page, result)
    if "cost" in result:
        cost_page.section(page, result, docs)
    return page.markdown()


def effects_section(page: Page, result: dict[str, Any]) -> None:
    """The atomic effects section."""
    engine = ENGINE_TITLE[result["engine"]]
    before = ", ".join(f"{v:.2f}" for v in result["load_before"])
    after = ", ".join(f"{v:.2f}" for v in result["load_after"])
    warm = result.get("warm_up")
    warmed = (
        f" The engines were warmed up first with {warm['records']:,} new records per variant "
        f"(engines' CPU per record {warm['first_ms']:.2f} ms in the first round, "
        f"{warm['last_ms']:.2f} ms in the last)."
        if warm
        else ""
    )
    page.text(f"""
## Atomic effects: the commit transaction and the outbox

What `attempt.write` and `attempt.send` cost against the plain completion. One business
function, five variants that differ only in what they stage: nothing (the completion is the
plain fenced `UpdateItem`), one write (a `Put` of a ledger entry), two writes (the ledger's
shape: `Put` entry + `Update ADD balance`), and two writes with an outbox of 1 and of 10
messages to an SQS queue. With a staged write the completion is one `TransactWriteItems`
(the record's element plus the writes); an outbox is sent after that commit and cleared by
one fenced `UpdateItem`. Each record credits an account of its own, so no two transactions
of a batch touch one item. Table on {engine}, the outbox's queues on moto's server (SQS;
while timed, one of 16 queues per payment, new and empty for each batch: moto's send slows
with the queue's depth, SQS's does not), `once` with its default `max_workers`.

```bash
python -m proof.bench.commit{"" if result["scale"] == "full" else " --scale " + result["scale"]}
```

Measured {result["at"]}, {result["machine"]}, shared with other work: load average
(1, 5, 15 min) {before} before, {after} after. The run took {result["seconds"]:.0f} s,
engines' start included.
""")
    page.text(f"""
**Calls and write units.** Batches of {result["count_records"]} new keys, no RTT. Calls are
requests on the wire, counted by a botocore hook (`proof/bench/wire.py`). Write units are
what {engine} reports when every item call asks for `ReturnConsumedCapacity=TOTAL`: the
runtime does not ask, the bench's hook adds it to each request and sums the
`ConsumedCapacity` that comes back, over every table a transaction touched. A refused
conditional write (a duplicate's claim) reports none yet is billed the item it refused, 1
unit per KB, at least 1: that column is computed from the item the refusal returns. "Owes
its outbox": the first delivery committed, then its sends failed (the queue did not exist
yet); this is the next delivery, after the queue exists.
""")
    page.table(
        f"Atomic effects, {engine}: calls and write units per record",
        COUNT_HEADER,
        count_rows(result["counts"]),
    )
    page.text(f"""
**Batch time and CPU.** Batches of new keys, {result["rtt_ms"]:g} ms injected before every
DynamoDB and every SQS request, {result["business_ms"]:g} ms of business time (as in "Big
batches"); the variants alternate batch by batch, each with one untimed batch first.{warmed}
CPU per record: the consumer's process (`time.process_time`, every thread), the table's
engine and moto's server (`/proc/<pid>/stat`); "other load" is the share of all
{result["cores"]} cores other processes used meanwhile.
""")
    page.table(
        f"Atomic effects, {engine}: batch time and CPU per record",
        TIME_HEADER,
        time_rows(result["rows"]),
    )


def write_section(docs: Path, markdown: str) -> Path:
    """Put the section on the page: in place of its earlier run, or at the end of the kept
    sections (``page.place_section``)."""
    return place_section(docs, markdown, BEGIN, END)
