"""What atomic effects cost: ``attempt.write``'s commit transaction against the plain
completion, and an outbox (``attempt.send``) of 1 and of 10 messages.

    python -m proof.bench.commit [--engine dynamodb-local|moto] [--scale full|quick|smoke]
                                   [--docs DIR] [--json PATH] [--no-page]

``make bench`` runs it after ``python -m proof.bench``. Its section of
``docs/performance.md`` sits below the page's kept-sections marker, between comments of its
own, so that the main renderer keeps it and this script rewrites only it.

Five variants of one business function, the same but for the effects it stages: none (the
plain fenced ``UpdateItem`` completion), one write (a ``Put`` of a ledger entry), two writes
(the ledger's shape: ``Put`` entry + ``Update ADD balance``), and two writes with an outbox
of 1 and of 10 messages to an SQS queue. Every record credits an account of its own, so no
two transactions of a batch touch one item (a shared account would measure contention, not
cost). The table is on the engine (DynamoDB Local in a private network namespace, or moto),
the outbox's queue on moto's server.

- **Counts** (no RTT): a batch of new keys, asking DynamoDB for ``ReturnConsumedCapacity=
  TOTAL`` on every item call (``Wire(capacity=True)``: once does not ask for it itself) and
  summing what comes back; calls are counted on the wire, DynamoDB's and SQS's apart. Then
  the same batch again (duplicates). For an outbox, also a batch whose sends fail (its queue
  does not exist yet: the records are COMPLETED and owe their outbox) and, once the queue
  exists, its redelivery, which sends what is owed and clears it.
- **Timing** (capacity not asked for): batches of new keys with ``RTT_MS`` before every
  DynamoDB and SQS request and ``BUSINESS_MS`` of business time, as the "Big batches"
  section; the variants alternate batch by batch after the engine's warm-up. Per batch: wall
  time, the consumer's CPU (``time.process_time``), each engine's CPU (``/proc``) and the
  rest of the machine's.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal

import boto3
from rich.console import Console

import once
from oncecli.aws import create_table, local_env
from oncecli.localcloud import engines
from oncecli.project import ROOT
from proof.bench import batches, work
from proof.bench.__main__ import KEPT_SECTIONS
from proof.bench.report import Page, machine
from proof.bench.subjects import KEY_PREFIX, context, sqs_event
from proof.bench.wire import Wire

TABLE = "bench-commit"
LEDGER = "bench-commit-ledger"
RTT_MS = batches.RTT_MS
BUSINESS_MS = batches.BUSINESS_MS
ENGINE_TITLE = {"moto": "moto server", "dynamodb-local": "DynamoDB Local"}
#: The section's bounds on the page; the main renderer keeps everything below its marker.
BEGIN = "<!-- atomic effects: written by python -m proof.bench.commit -->"
END = "<!-- /atomic effects -->"


@dataclass(frozen=True)
class Variant:
    label: str
    writes: int
    messages: int


VARIANTS = (
    Variant("plain completion", 0, 0),
    Variant("1 write", 1, 0),
    Variant("2 writes (ledger)", 2, 0),
    Variant("2 writes + outbox of 1", 2, 1),
    Variant("2 writes + outbox of 10", 2, 10),
)


@dataclass(frozen=True)
class Plan:
    """Batch sizes with their batches per variant; warm-up records per variant, least and
    most; records per count."""

    reps: dict[int, int]
    warm_least: int
    warm_most: int
    count: int


def plan(scale: str) -> Plan:
    if scale == "smoke":
        return Plan({4: 1}, warm_least=0, warm_most=0, count=4)
    if scale == "quick":
        return Plan({10: 8, 100: 2}, warm_least=300, warm_most=1000, count=10)
    return Plan({10: 20, 100: 5}, warm_least=1000, warm_most=3000, count=20)


# --- the consumer -------------------------------------------------------------------------


def body(key: str) -> str:
    return json.dumps({"paymentId": key, "account": f"acct-{key}", "amount": 100})


def business(variant: Variant, queue: str | Outbound, ms: float) -> Callable[[Any, Any], Any]:
    """The ledger's business code, with ``variant``'s effects staged; its outbox goes to
    ``queue`` (a URL, or the ``Outbound`` queue of the moment)."""

    def process(payment: dict[str, Any], attempt: Any) -> dict[str, Any]:
        if ms:
            time.sleep(ms / 1000)
        pid, account, amount = payment["paymentId"], payment["account"], payment["amount"]
        if variant.writes >= 1:
            attempt.write(
                {
                    "Put": {
                        "TableName": LEDGER,
                        "Item": {
                            "id": {"S": f"entry#{pid}"},
                            "account": {"S": account},
                            "amount": {"N": str(amount)},
                        },
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                }
            )
        if variant.writes >= 2:
            attempt.write(
                {
                    "Update": {
                        "TableName": LEDGER,
                        "Key": {"id": {"S": f"account#{account}"}},
                        "UpdateExpression": "ADD balance :a",
                        "ExpressionAttributeValues": {":a": {"N": str(amount)}},
                    }
                }
            )
        for seq in range(variant.messages):
            url = queue if isinstance(queue, str) else queue.url_for(pid)
            attempt.send(url, {"paymentId": pid, "status": "credited", "n": seq})
        return {"paymentId": pid, "account": account, "amount": amount, "fence": attempt.fence}

    return process


def handler(
    variant: Variant, queue: str | Outbound, ms: float, effects: Literal["any", "staged"] = "any"
) -> Any:
    """``once`` running ``variant``'s business code, two-phase or (``effects="staged"``)
    with one commit and no claim."""
    return once.make_handler(
        business(variant, queue, ms),
        key="paymentId",
        table_name=TABLE,
        key_prefix=KEY_PREFIX,
        dlq_url=None,
        effects=effects,
    )


def deliver(h: Any, keys: list[str], expect: str | None = None) -> list[str]:
    """One batch of ``keys``; the outcomes. ``expect``: every record must end so."""
    result = h.handle(sqs_event([body(k) for k in keys]), context())
    outcomes = [r.outcome.value for r in result.records]
    if expect is not None and set(outcomes) != {expect}:
        raise RuntimeError(
            f"expected every record {expect}, got {dict(Counter(outcomes))}: the figures "
            "would be wrong"
        )
    return outcomes


def new_keys(n: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(n)]


# --- counts -------------------------------------------------------------------------------


class Refused:
    """What refused conditional writes consume (DynamoDB reports none, yet bills the item
    it refused: ``work.rejected_units``), summed."""

    def __init__(self, wire: Wire) -> None:
        self.units = 0.0
        self._lock = threading.Lock()
        wire.session.events.register("after-call.dynamodb", self._on_response)

    def _on_response(self, parsed: dict[str, Any], **_: Any) -> None:
        if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            with self._lock:
                self.units += work.rejected_units(parsed.get("Item"))

    def take(self) -> float:
        with self._lock:
            units, self.units = self.units, 0.0
        return units


#: Write units by DynamoDB's rules (``work.RuleUnits``: measured here first, now shared).
RuleUnits = work.RuleUnits


@dataclass
class Units:
    """Write units: those that land (``RuleUnits``) and those refused (``Refused``)."""

    refused: Refused
    rules: RuleUnits


def counted(wire: Wire, units: Units, action: Callable[[], Any], per: int) -> dict[str, Any]:
    """Calls on the wire and write units, per record, of ``action``: by DynamoDB's rules
    (``wcu_rules``: the writes that landed and those refused) and as the engine reported
    them (``wcu_reported``: the writes that landed)."""
    wire.reset()
    units.refused.take()
    units.rules.take()
    action()
    calls, capacity = wire.snapshot()
    other = Counter(wire.other_calls)
    refused = units.refused.take()
    landed = units.rules.take()
    return {
        "ddb_calls": sum(calls.values()) / per,
        "ddb_operations": {op: n / per for op, n in sorted(calls.items())},
        "sqs_calls": sum(other.values()) / per,
        "sqs_operations": {op.split(".", 1)[1]: n / per for op, n in sorted(other.items())},
        "wcu_reported": capacity["write"] / per,
        "wcu_refused": refused / per,
        "wcu_rules": (landed + refused) / per,
        "rcu_reported": capacity["read"] / per,
    }


def record_bytes(ddb: Any, key: str) -> int:
    item = ddb.get_item(TableName=TABLE, Key={"id": {"S": f"{KEY_PREFIX}#{key}"}})["Item"]
    return work.item_size(item)


def counts(wire: Wire, reader: Any, sqs: Any, queue_url: str, n: int) -> list[dict[str, Any]]:
    """Per variant: the new path, the duplicate, and for an outbox the owed path."""
    ddb = wire.client()
    units = Units(Refused(wire), RuleUnits(wire, reader))
    rows = []
    for variant in VARIANTS:
        h = handler(variant, queue_url, 0)
        keys = new_keys(n)
        row: dict[str, Any] = {"variant": variant.label, **asdict(variant)}
        row["new"] = counted(wire, units, partial(deliver, h, keys, "processed"), n)
        row["record_bytes"] = record_bytes(ddb, keys[0])
        row["duplicate"] = counted(wire, units, partial(deliver, h, keys, "duplicate"), n)
        if variant.messages:
            # A queue that does not exist yet: the sends fail after the commit.
            missing = queue_url.rsplit("/", 1)[0] + f"/bench-owed-{uuid.uuid4().hex[:8]}"
            owing = handler(variant, missing, 0)
            owed = new_keys(n)
            row["owed"] = counted(wire, units, partial(deliver, owing, owed, "owed"), n)
            row["owed_record_bytes"] = record_bytes(ddb, owed[0])
            sqs.create_queue(QueueName=missing.rsplit("/", 1)[1])
            row["owed_sent"] = counted(wire, units, partial(deliver, owing, owed, "owed_sent"), n)
            row["after_owed_sent"] = counted(
                wire, units, partial(deliver, owing, owed, "duplicate"), n
            )
        rows.append(row)
    return rows


# --- timing -------------------------------------------------------------------------------


@dataclass
class Outbound:
    """The queues the outbox variants send to while they are timed. moto's SendMessageBatch
    takes time in proportion to the queue's depth (10 ms at 0 messages, 0.7 s at 3,000) and
    serves one request at a time, which SQS does not: a batch of 100 records with 10 messages
    each would queue its sends past the runtime's 5 s read timeout. So each payment sends to
    one of ``SHARDS`` queues (by its id), and after each measured batch, outside the
    measurement, the variants are given new, empty queues and the old ones are deleted
    (moto allows one PurgeQueue a minute, as SQS does)."""

    sqs: Any
    name: str
    urls: list[str] = field(default_factory=list)
    made: int = 0

    SHARDS: ClassVar[int] = 16

    def __post_init__(self) -> None:
        self.empty()

    def url_for(self, payment_id: str) -> str:
        return self.urls[int(payment_id[:8], 16) % len(self.urls)]

    def empty(self) -> None:
        old, self.made = self.urls, self.made + 1
        self.urls = [
            self.sqs.create_queue(QueueName=f"{self.name}-{self.made}-{n}")["QueueUrl"]
            for n in range(self.SHARDS)
        ]
        for url in old:
            self.sqs.delete_queue(QueueUrl=url)


@dataclass
class Meters:
    """Wall, consumer CPU, each engine's CPU and the rest of the machine's over a batch."""

    engines: dict[str, int]  # role -> pid ("dynamodb", "sqs"); one pid may serve both

    def read(self) -> dict[str, float]:
        pids = set(self.engines.values())
        return {
            "wall": time.perf_counter(),
            "cpu": time.process_time(),
            **{f"pid{pid}": batches.process_cpu_s(pid) for pid in pids},
            "busy": batches.machine_busy_s(),
        }

    def sample(self, action: Callable[[], Any]) -> dict[str, float]:
        before = self.read()
        action()
        after = self.read()
        d = {k: after[k] - before[k] for k in before}
        engines_s = sum(v for k, v in d.items() if k.startswith("pid"))
        out = {
            "wall_ms": d["wall"] * 1000,
            "cpu_ms": d["cpu"] * 1000,
            "other_cpu_ms": max(0.0, d["busy"] - d["cpu"] - engines_s) * 1000,
        }
        for role, pid in self.engines.items():
            out[f"{role}_cpu_ms"] = d[f"pid{pid}"] * 1000
        return out


def warm_up(
    wire: Wire, meters: Meters, queue: Outbound, least: int, most: int
) -> dict[str, Any] | None:
    """Every variant in batches of 10, no RTT, no business time, in rounds of up to 100
    records per variant, until the engines' CPU per record stops falling (a round within 10%
    of the one before) once ``least`` records per variant have run, or ``most`` have."""
    if most <= 0:
        return None
    wire.latency_ms = 0.0
    handlers = [handler(v, queue, 0) for v in VARIANTS]
    rounds: list[float] = []
    done = 0
    while True:
        engine_ms = 0.0
        for _ in range(10):
            for h in handlers:
                s = meters.sample(partial(deliver, h, new_keys(10), "processed"))
                queue.empty()
                engine_ms += sum(v for k, v in s.items() if k in ("dynamodb_cpu_ms", "sqs_cpu_ms"))
        done += 100
        rounds.append(engine_ms / (100 * len(handlers)))
        settled = len(rounds) > 1 and rounds[-1] > 0.9 * rounds[-2]
        if done >= most or (done >= least and settled):
            return {"records": done, "first_ms": rounds[0], "last_ms": rounds[-1]}


def summary(samples: list[dict[str, float]], size: int) -> dict[str, Any]:
    walls = [s["wall_ms"] for s in samples]
    total = {k: sum(s[k] for s in samples) for k in samples[0]}
    records = size * len(samples)
    return {
        "median_ms": statistics.median(walls),
        "max_ms": max(walls),
        "samples": walls,
        "cpu_ms_per_record": total["cpu_ms"] / records,
        **{
            f"{role}_cpu_ms_per_record": total[f"{role}_cpu_ms"] / records
            for role in ("dynamodb", "sqs")
            if f"{role}_cpu_ms" in total
        },
        "other_cpu_share": total["other_cpu_ms"] / (total["wall_ms"] * (os.cpu_count() or 1)),
    }


def timing(
    wire: Wire, meters: Meters, queue: Outbound, reps: dict[int, int], tick: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Per batch size, every variant, alternating batch by batch (one untimed batch each)."""
    wire.latency_ms = RTT_MS
    handlers = [handler(v, queue, BUSINESS_MS) for v in VARIANTS]
    rows = []
    for size, n in reps.items():
        tick(f"timing: batches of {size}, {n} per variant")
        for h in handlers:
            deliver(h, new_keys(min(size, 10)), "processed")
        samples: list[list[dict[str, float]]] = [[] for _ in VARIANTS]
        for rep in range(n):
            order = list(range(len(VARIANTS)))
            order = order[rep % len(order) :] + order[: rep % len(order)]
            for i in order:
                samples[i].append(
                    meters.sample(partial(deliver, handlers[i], new_keys(size), "processed"))
                )
                queue.empty()
        for variant, got in zip(VARIANTS, samples, strict=True):
            rows.append({"variant": variant.label, "batch": size, "reps": n} | summary(got, size))
    wire.latency_ms = 0.0
    return rows


# --- the run ------------------------------------------------------------------------------


def tick(step: str) -> None:
    print(f"commit bench: {step}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stdout_discarded() -> Iterator[None]:
    """The consumer logs each record to stdout, as in Lambda: file descriptor 1 goes to
    /dev/null meanwhile (the log lines are still formatted and written)."""
    sys.stdout.flush()
    saved = os.dup(1)
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.close(sink)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


#: What a run measures: the atomic effects section, and the cost section (``cost.py``).
PARTS = ("effects", "cost")


def measure(engine: str, scale: str, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """The engines' start, then ``parts``: the counts, the warm-up (always, when timing
    follows) and the timing of the atomic effects, then the cost section's figures."""
    p = plan(scale)
    started = time.monotonic()
    result: dict[str, Any] = {
        "engine": engine,
        "scale": scale,
        "rtt_ms": RTT_MS,
        "business_ms": BUSINESS_MS,
        "cores": os.cpu_count(),
        "machine": machine(),
        "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d at %H:%M UTC"),
        "load_before": os.getloadavg(),
        "count_records": p.count,
        "parts": list(parts),
    }
    os.environ.update({k: v for k, v in local_env().items() if k not in os.environ})
    with contextlib.ExitStack() as stack:
        moto = stack.enter_context(engines.MotoServer())
        table_engine = moto if engine == "moto" else stack.enter_context(engines.DynamoDBLocal())
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = table_engine.endpoint
        os.environ["AWS_ENDPOINT_URL_SQS"] = moto.endpoint
        wire = Wire(capacity=True)
        wire.also_count("sqs")
        wire.also_count("sns")
        ddb = wire.client()
        for name in (TABLE, LEDGER):
            create_table(ddb, name)
        sqs = wire.session.client("sqs")
        queue_url = sqs.create_queue(QueueName="bench-commit-notify")["QueueUrl"]
        # On moto one server is both engines: its CPU is the table engine's column.
        pids = {"dynamodb": batches.engine_pid(table_engine.port)}
        if table_engine is not moto:
            pids["sqs"] = batches.engine_pid(moto.port)
        meters = Meters(pids)
        with stdout_discarded():
            # Off the wire: a session of its own, so its reads are neither counted nor delayed.
            reader = boto3.session.Session().client("dynamodb", endpoint_url=table_engine.endpoint)
            if "effects" in parts:
                tick("counts: calls and write units per record")
                result["counts"] = counts(wire, reader, sqs, queue_url, p.count)
            wire.capacity_on = False
            tick(f"warm-up: {p.warm_least}-{p.warm_most} records per variant")
            outbound = Outbound(sqs, "bench-commit-timed")
            result["warm_up"] = warm_up(wire, meters, outbound, p.warm_least, p.warm_most)
            if "effects" in parts:
                result["rows"] = timing(wire, meters, outbound, p.reps, tick)
            outbound.empty()
            if "cost" in parts:
                from proof.bench import cost  # it builds on this module

                result["cost"] = cost.measure(wire, reader, meters, sqs, queue_url, scale, tick)
    result["load_after"] = os.getloadavg()
    result["seconds"] = time.monotonic() - started
    return result


# --- the section --------------------------------------------------------------------------


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
        from proof.bench import cost_page  # it builds on this module

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
    sections (after the marker, added if the page has none)."""
    path = docs / "performance.md"
    old = path.read_text() if path.is_file() else ""
    block = f"{BEGIN}\n\n{markdown.strip()}\n\n{END}\n"
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        page = head + block + ("\n" + tail if tail else "")
    elif KEPT_SECTIONS in old:
        page = old.rstrip("\n") + "\n\n" + block
    else:
        page = (old.rstrip("\n") + "\n\n" if old else "") + KEPT_SECTIONS + "\n\n" + block
    path.write_text(page)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proof.bench.commit", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--engine", choices=engines.ENGINES, default="dynamodb-local")
    parser.add_argument("--scale", choices=("smoke", "quick", "full"), default="full")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: rewrite the section from a --json of an earlier run",
    )
    parser.add_argument("--no-page", action="store_true", help="print the tables only")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="what to measure: effects (atomic effects), cost (what a million messages cost)",
    )
    args = parser.parse_args(argv)
    if args.render:
        result = json.loads(args.render.read_text())
    else:
        if args.engine == "dynamodb-local":
            engines.enter_private_netns(
                sys.argv[1:] if argv is None else argv, "proof.bench.commit"
            )
        parts = tuple(p for p in args.parts.split(",") if p)
        unknown = set(parts) - set(PARTS)
        if unknown:
            parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
        result = measure(args.engine, args.scale, parts)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
    markdown = render(
        result, Console(width=max(160, Console().width)), None if args.no_page else args.docs
    )
    if not args.no_page:
        print(f"wrote {write_section(args.docs, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
