"""What a million messages cost: Powertools, ``once`` two-phase and ``once`` staged, each with
no staged write, one staged write and an outbox of one, priced at AWS's public prices
(``prices.py``) from what this bench measures; and what the outbox's clear costs against
leaving it out.

``python -m proof.bench.commit`` runs it after its own measurements, on the same engines
(the tables on DynamoDB Local or moto, SQS on moto's server), and puts its section after
its own. Per consumer and variant:

- **Counts** (no RTT): a batch of new keys, every item call asking for
  ``ReturnConsumedCapacity=TOTAL`` (the write and read units the engine reports, the units
  DynamoDB's rules give the items written, ``work.RuleUnits``), SQS requests counted on the
  wire; the same batch again (duplicates); for ``once``'s outbox, a batch whose sends fail
  and its redelivery once the queue exists (a duplicate that owes its outbox: what every
  duplicate would send if the clear were left out).
- **Timing**: batches of 10 new keys, 10 ms before every DynamoDB and SQS request, 20 ms of
  business time, the combinations taking turns batch by batch; for ``once``'s receivers
  (two-phase and staged) the redelivery of each batch (duplicates). The wall time of each
  outbox clear and each outbox send is taken on the wire, from the call's parameters being
  built to its response being parsed.

Powertools' variants do what its business code must do itself: the record, plus its own
``PutItem`` of the ledger entry and its own ``SendMessage`` (neither atomic with the record).
The Lambda side is the bench's batch: wall time of a batch of 10 at 512 MB, one invoke per
batch; the SQS side is the event source mapping's one ``ReceiveMessage`` and one
``DeleteMessageBatch`` per batch (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html),
plus what the consumer itself sends. Happy path: no visibility change, no DLQ send.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from proof.bench import atomic, prices
from proof.bench.subjects import context, sqs_event
from proof.bench.wire import Wire
from proof.chaos.peers import powertools

CONSUMERS = ("powertools", "once", "once-staged")
TITLE = {"powertools": "Powertools", "once": "once two-phase", "once-staged": "once staged"}
#: Powertools' own record table (its records have other attributes than once's).
PT_TABLE = "bench-cost-powertools"
VARIANTS = (
    atomic.Variant("no staged write", 0, 0),
    atomic.Variant("one staged write", 1, 0),
    atomic.Variant("outbox of one", 0, 1),
)
#: The Lambda function the figures are priced for.
MEMORY_GB = 0.5
BATCH = 10
#: The event source mapping's requests per batch: one ReceiveMessage, one DeleteMessageBatch.
ESM_REQUESTS_PER_BATCH = 2
#: Duplicate rates the outbox's clear is weighed at.
DUPLICATE_RATES = (0.001, 0.01, 0.1)


@dataclass(frozen=True)
class Plan:
    count: int  # new keys per count batch
    reps: int  # timed batches of 10 per combination


def plan(scale: str) -> Plan:
    if scale == "smoke":
        return Plan(count=4, reps=1)
    if scale == "quick":
        return Plan(count=10, reps=6)
    return Plan(count=20, reps=20)


# --- the consumers ------------------------------------------------------------------------


def powertools_business(
    variant: atomic.Variant, wire: Wire, sqs: Any, queue: str | atomic.Outbound, ms: float
) -> Callable[[Any, Any], Any]:
    """The same business code as ``atomic.business``, written for Powertools: the write and
    the message are its own calls (Powertools stages nothing)."""
    ddb = wire.client()

    def process(payment: dict[str, Any], attempt: Any) -> dict[str, Any]:
        if ms:
            time.sleep(ms / 1000)
        pid, account, amount = payment["paymentId"], payment["account"], payment["amount"]
        if variant.writes >= 1:
            ddb.put_item(
                TableName=atomic.LEDGER,
                Item={
                    "id": {"S": f"entry#{pid}"},
                    "account": {"S": account},
                    "amount": {"N": str(amount)},
                },
                ConditionExpression="attribute_not_exists(id)",
            )
        for seq in range(variant.messages):
            url = queue if isinstance(queue, str) else queue.url_for(pid)
            body = {"paymentId": pid, "status": "credited", "n": seq}
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
        return {"paymentId": pid, "account": account, "amount": amount}

    return process


def build(
    consumer: str,
    variant: atomic.Variant,
    wire: Wire,
    sqs: Any,
    queue: str | atomic.Outbound,
    ms: float,
) -> Callable[[list[str], str | None], None]:
    """A function that delivers one batch of keys to ``consumer`` running ``variant``; for
    ``once``, every record must end as ``expect`` (an outcome), for Powertools every record
    must succeed."""
    if consumer == "powertools":
        h = powertools.make_handler(
            powertools_business(variant, wire, sqs, queue, ms),
            table_name=PT_TABLE,
            key="paymentId",
            client=wire.client(),
        )

        def deliver_pt(keys: list[str], expect: str | None = None) -> None:
            response = h(sqs_event([atomic.body(k) for k in keys]), context())
            if response["batchItemFailures"]:
                raise RuntimeError(f"Powertools, {variant.label}: records failed; no figure")

        return deliver_pt
    mode: Literal["any", "staged"] = "staged" if consumer == "once-staged" else "any"
    h = atomic.handler(variant, queue, ms, effects=mode)

    def deliver_once(keys: list[str], expect: str | None = None) -> None:
        atomic.deliver(h, keys, expect)

    return deliver_once


# --- the wall time of single calls ---------------------------------------------------------


class CallTimer:
    """Wall time of the outbox's clears (an ``UpdateItem`` that removes the outbox) and of
    SQS sends, from the call's parameters being built to its response parsed (the injected
    RTT, the engine, the client's own work), while ``on``."""

    def __init__(self, wire: Wire) -> None:
        self.on = False
        self.times: dict[str, list[float]] = {"clear": [], "send": []}
        self._lock = threading.Lock()
        events = wire.session.events
        events.register("before-parameter-build.dynamodb.UpdateItem", self._start_clear)
        events.register("after-call.dynamodb.UpdateItem", self._end)
        for op in ("SendMessage", "SendMessageBatch"):
            events.register(f"before-parameter-build.sqs.{op}", self._start_send)
            events.register(f"after-call.sqs.{op}", self._end)

    def _start_clear(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if self.on and "REMOVE #outbox" in params.get("UpdateExpression", ""):
            context["bench_timed"] = ("clear", time.perf_counter())

    def _start_send(self, context: dict[str, Any], **_: Any) -> None:
        if self.on:
            context["bench_timed"] = ("send", time.perf_counter())

    def _end(self, context: dict[str, Any], **_: Any) -> None:
        if "bench_timed" in context:
            kind, start = context.pop("bench_timed")
            with self._lock:
                self.times[kind].append((time.perf_counter() - start) * 1000)

    def medians(self) -> dict[str, float | None]:
        with self._lock:
            return {k: statistics.median(v) if v else None for k, v in self.times.items()}


# --- measuring ------------------------------------------------------------------------------


def counts(
    wire: Wire, units: atomic.Units, sqs: Any, queue_url: str, n: int
) -> dict[str, dict[str, Any]]:
    """Per consumer and variant: the new path and the duplicate; for ``once``'s outbox, the
    duplicate that owes its outbox (sent, then cleared)."""
    out: dict[str, dict[str, Any]] = {}
    for consumer in CONSUMERS:
        for variant in VARIANTS:
            deliver = build(consumer, variant, wire, sqs, queue_url, 0)
            keys = atomic.new_keys(n)
            new_outcome = None if consumer == "powertools" else "processed"
            dup_outcome = None if consumer == "powertools" else "duplicate"
            row: dict[str, Any] = {
                "new": atomic.counted(wire, units, partial(deliver, keys, new_outcome), n),
                "duplicate": atomic.counted(wire, units, partial(deliver, keys, dup_outcome), n),
            }
            if variant.messages and consumer != "powertools":
                missing = queue_url.rsplit("/", 1)[0] + f"/bench-cost-owed-{uuid.uuid4().hex[:8]}"
                owing = build(consumer, variant, wire, sqs, missing, 0)
                owed = atomic.new_keys(n)
                atomic.counted(wire, units, partial(owing, owed, "owed"), n)
                sqs.create_queue(QueueName=missing.rsplit("/", 1)[1])
                row["owed_duplicate"] = atomic.counted(
                    wire, units, partial(owing, owed, "owed_sent"), n
                )
            out[f"{consumer}|{variant.label}"] = row
    return out


def timing(
    wire: Wire,
    meters: atomic.Meters,
    sqs: Any,
    queue: atomic.Outbound,
    reps: int,
    timer: CallTimer,
) -> dict[str, dict[str, Any]]:
    """Batches of ``BATCH`` new keys per combination, taking turns; ``once``'s duplicates
    (the same batch again) for the variant without staged writes."""
    wire.latency_ms = atomic.RTT_MS
    combos = [(c, v) for c in CONSUMERS for v in VARIANTS]
    delivers = [build(c, v, wire, sqs, queue, atomic.BUSINESS_MS) for c, v in combos]
    expect = [None if c == "powertools" else "processed" for c, _ in combos]
    for deliver, outcome in zip(delivers, expect, strict=True):
        deliver(atomic.new_keys(BATCH), outcome)  # untimed: clients, pools
        queue.empty()
    new: list[list[dict[str, float]]] = [[] for _ in combos]
    dup: dict[int, list[dict[str, float]]] = {
        i: [] for i, (c, v) in enumerate(combos) if c != "powertools" and v is VARIANTS[0]
    }
    timer.on = True
    for rep in range(reps):
        order = list(range(len(combos)))
        order = order[rep % len(order) :] + order[: rep % len(order)]
        for i in order:
            keys = atomic.new_keys(BATCH)
            new[i].append(meters.sample(partial(delivers[i], keys, expect[i])))
            if i in dup:
                dup[i].append(meters.sample(partial(delivers[i], keys, "duplicate")))
            queue.empty()
    timer.on = False
    wire.latency_ms = 0.0
    out: dict[str, dict[str, Any]] = {}
    for i, (c, v) in enumerate(combos):
        row = {"new": atomic.summary(new[i], BATCH)}
        if i in dup:
            row["duplicate"] = atomic.summary(dup[i], BATCH)
        out[f"{c}|{v.label}"] = row
    return out | {"calls_ms": timer.medians()}


def measure(
    wire: Wire,
    reader: Any,
    meters: atomic.Meters,
    sqs: Any,
    queue_url: str,
    scale: str,
    tick: Callable[[str], None],
) -> dict[str, Any]:
    """The counts and the timing (capacity asked for during the counts only); ``reader``:
    a DynamoDB client off the wire (``work.RuleUnits``)."""
    from oncecli.aws import create_table

    p = plan(scale)
    create_table(wire.client(), PT_TABLE)
    units = atomic.Units(atomic.Refused(wire), atomic.RuleUnits(wire, reader))
    timer = CallTimer(wire)
    tick("cost: counts per consumer and variant")
    was, wire.capacity_on = wire.capacity_on, True
    got = {"counts": counts(wire, units, sqs, queue_url, p.count), "count_records": p.count}
    wire.capacity_on = False
    tick(f"cost: batches of {BATCH}, {p.reps} per consumer and variant")
    outbound = atomic.Outbound(sqs, "bench-cost-timed")
    got["timing"] = timing(wire, meters, sqs, outbound, p.reps, timer)
    outbound.empty()
    wire.capacity_on = was
    return got | {
        "reps": p.reps,
        "rtt_ms": atomic.RTT_MS,
        "business_ms": atomic.BUSINESS_MS,
        "prices_as_of": prices.AS_OF,
    }


# --- the arithmetic -------------------------------------------------------------------------


def lambda_usd(
    batch_ms: float, memory_gb: float = MEMORY_GB, batch: int = BATCH
) -> tuple[float, float]:
    """USD per million messages of Lambda's duration (``batch_ms`` per batch of ``batch``
    messages at ``memory_gb``) and of its requests (one invoke per batch)."""
    gb_s = batch_ms / 1000 * memory_gb / batch
    return gb_s * 1e6 * prices.LAMBDA_GB_SECOND, prices.LAMBDA_REQUESTS_PER_MILLION / batch


def sqs_requests(sent: float, batch: int = BATCH) -> float:
    """SQS requests per message: the event source mapping's receive and delete per batch,
    plus ``sent`` requests of the consumer's own (each payload under 64 KB: one request)."""
    return ESM_REQUESTS_PER_BATCH / batch + sent


def bill(
    count: dict[str, Any], batch_ms: float, memory_gb: float = MEMORY_GB, batch: int = BATCH
) -> dict[str, float]:
    """USD per million new messages, by component, from one combination's counts (per new
    message) and its median batch time (of ``batch`` messages at ``memory_gb``). DynamoDB at
    the engine's measured units; the same at DynamoDB's rules in ``dynamodb_writes_rule``."""
    new = count["new"]
    duration, requests = lambda_usd(batch_ms, memory_gb, batch)
    return {
        "dynamodb_writes": new["wcu_reported"] * prices.WRU_PER_MILLION,
        "dynamodb_writes_rule": new["wcu_rules"] * prices.WRU_PER_MILLION,
        "dynamodb_reads": new["rcu_reported"] * prices.RRU_PER_MILLION,
        "lambda_duration": duration,
        "lambda_requests": requests,
        "sqs": sqs_requests(new["sqs_calls"], batch) * prices.SQS_REQUESTS_PER_MILLION,
    }


#: The components of ``bill`` that add up to the total (engine-measured DynamoDB units).
COMPONENTS = ("dynamodb_writes", "dynamodb_reads", "lambda_duration", "lambda_requests", "sqs")


def total(parts: dict[str, float]) -> float:
    return sum(parts[k] for k in COMPONENTS)


def clear_tradeoff(result: dict[str, Any], sender: str = "once-staged") -> dict[str, Any]:
    """What the outbox's clear costs per million new messages with an outbox of one, and
    what leaving it out costs per million at each duplicate rate: the sender's re-send per
    duplicate, and the receiver's handling of the re-sent copy when the receiver is a
    ``once`` consumer (two-phase or staged) that acknowledges it as a duplicate."""
    counts_, timing_ = result["counts"], result["timing"]
    plain = counts_[f"{sender}|no staged write"]["new"]
    outbox = counts_[f"{sender}|outbox of one"]
    clear_wru = outbox["new"]["wcu_rules"] - plain["wcu_rules"]
    clear_calls = outbox["new"]["ddb_calls"] - plain["ddb_calls"]
    calls_ms = timing_["calls_ms"]
    clear_ms = calls_ms.get("clear") or 0.0
    send_ms = calls_ms.get("send") or 0.0
    # The records of a batch clear concurrently: the invocation waits about one clear.
    keep = clear_wru * prices.WRU_PER_MILLION + lambda_usd(clear_ms)[0]
    owed = outbox.get("owed_duplicate", {})
    resend_requests = owed.get("sqs_calls", 1.0)
    sender_extra = resend_requests * prices.SQS_REQUESTS_PER_MILLION + lambda_usd(send_ms)[0]
    receivers = {}
    for receiver in ("once", "once-staged"):
        dup_count = counts_[f"{receiver}|no staged write"]["duplicate"]
        dup_ms = timing_[f"{receiver}|no staged write"]["duplicate"]["median_ms"]
        duration, requests = lambda_usd(dup_ms)
        receivers[receiver] = {
            "dup_batch_ms": dup_ms,
            "dup_wru": dup_count["wcu_rules"],
            "usd_per_million_duplicates": dup_count["wcu_rules"] * prices.WRU_PER_MILLION
            + duration
            + requests
            + sqs_requests(0) * prices.SQS_REQUESTS_PER_MILLION,
        }
    per_duplicate = {
        r: sender_extra + v["usd_per_million_duplicates"] for r, v in receivers.items()
    }
    return {
        "sender": sender,
        "clear_calls": clear_calls,
        "clear_wru": clear_wru,
        "clear_ms": clear_ms,
        "send_ms": send_ms,
        "keep_usd": keep,
        "resend_requests": resend_requests,
        "sender_extra_usd": sender_extra,
        "receivers": receivers,
        "per_duplicate_usd": per_duplicate,
        "rates": [
            {"rate": d, "keep": keep, **{r: d * v for r, v in per_duplicate.items()}}
            for d in DUPLICATE_RATES
        ],
        "break_even": {r: keep / v if v else None for r, v in per_duplicate.items()},
    }
