"""The atomic effects' measurement: what ``attempt.write``'s commit transaction and an
outbox (``attempt.send``) cost against the plain completion, in calls, write units, batch
time and CPU.

It exists apart from ``commit.py`` (the command that runs it and renders the section) so
that what the cost section (``cost.py``) and the memory sweep (``sweep.py``) build on, the
ledger's business code, its handler, the counting and the meters, is a measurement that
imports no page and no command: the bench's modules import each other in one direction.
"""

from __future__ import annotations

import contextlib
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
from typing import Any, ClassVar, Literal

import once
from proof.bench import batches, work
from proof.bench.subjects import KEY_PREFIX, context, sqs_event
from proof.bench.wire import Wire

TABLE = "bench-commit"
LEDGER = "bench-commit-ledger"
RTT_MS = batches.RTT_MS
BUSINESS_MS = batches.BUSINESS_MS


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
