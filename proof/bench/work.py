"""DynamoDB work per record, for every path a record can take, per consumer.

Paths: ``new`` (a key never seen), ``duplicate`` (redelivery of a completed key),
``in-batch duplicate`` (the same key twice in one batch), ``busy`` (another delivery holds
the key right now) and ``conflict`` (a completed key with a different payload). For each we
count requests on the wire and sum the capacity DynamoDB Local reports through
``ReturnConsumedCapacity``. DynamoDB reports no capacity for a write whose condition failed,
yet bills it: by AWS's rule it consumes the size of the existing item in 1 KB units, at
least 1; that figure is computed from the item the rejection returns and marked so.
Then: cost per million messages at on-demand prices, and the stored record size, with what
``once``'s 64 KiB result cap does to it. Last, the write units of a new message under both
protocols with no staged write and with one (``write_units``), as the engine reports them
and by DynamoDB's rules (``RuleUnits``): a transaction is billed twice a plain write, per
item (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling);
and the same with the bridge to Powertools' records (``make_handler(powertools=...)``), with
the duplicate whose Powertools record Powertools completed before the deploy (``bridged``).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import once
from once import constants as c
from oncecli.aws import create_table, record_id
from proof.bench import prices
from proof.bench.subjects import (
    CONSUMERS,
    KEY_PREFIX,
    TABLES,
    Subjects,
    body,
    business,
    context,
    invoke,
    new_keys,
    sqs_event,
)
from proof.bench.wire import Wire
from proof.chaos.peers import powertools

#: On-demand prices, us-east-1, standard table class (``prices.py``, with its date and
#: source): USD per million write / read request units, and per GB-month stored.
PRICE_WRU = prices.WRU_PER_MILLION
PRICE_RRU = prices.RRU_PER_MILLION
PRICE_GB_MONTH = prices.GB_MONTH
PRICE_NOTE = (
    f"on-demand, us-east-1, standard table class: ${PRICE_WRU} per million write "
    f"request units, ${PRICE_RRU} per million read request units, "
    f"${PRICE_GB_MONTH} per GB-month"
)
PATHS = ("new", "duplicate", "in-batch duplicate", "busy", "conflict")
#: Result sizes that show the cap: small, 10 KiB, just under the cap, over it.
RESULT_SIZES = (64, 10 * 1024, c.RESULT_CAP_BYTES - 64, 100 * 1024)


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (see ``value_size``)."""
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def _number_size(raw: str) -> int:
    digits = str(Decimal(raw).normalize()).lstrip("-").replace(".", "").lstrip("0")
    return math.ceil(len(digits or "0") / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    """One attribute value's size by DynamoDB's rules: UTF-8 strings, binary as is, numbers
    about one byte per two significant digits plus one, sets the sum of their elements, a
    list or a map 3 bytes plus 1 per element (and a map its keys), a boolean or null 1."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return _number_size(raw)
    if kind == "B":
        return len(raw)
    if kind == "SS":
        return sum(len(v.encode()) for v in raw)
    if kind == "NS":
        return sum(_number_size(v) for v in raw)
    if kind == "BS":
        return sum(len(v) for v in raw)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in raw.items())
    return 1


def rejected_units(item: dict[str, Any] | None) -> float:
    """What a write refused by its condition consumes: the existing item, 1 KB units."""
    return max(1, math.ceil(item_size(item or {}) / 1024))


class _Rejections:
    """Sums the computed capacity of refused conditional writes (they report none)."""

    def __init__(self, subjects: Subjects) -> None:
        self.units = 0.0
        self._lock = threading.Lock()
        subjects.wire.session.events.register("after-call.dynamodb", self._on_response)

    def _on_response(self, parsed: dict[str, Any], **_: Any) -> None:
        if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            with self._lock:
                self.units += rejected_units(parsed.get("Item"))

    def take(self) -> float:
        with self._lock:
            units, self.units = self.units, 0.0
        return units


def _measure(
    subjects: Subjects, rejections: _Rejections, action: Callable[[], Any], per: int
) -> dict[str, Any]:
    wire = subjects.wire
    wire.reset()
    rejections.take()
    action()
    calls, capacity = wire.snapshot()
    refused = rejections.take()
    return {
        "calls": sum(calls.values()) / per,
        "operations": {op: n / per for op, n in calls.items()},
        "wru_reported": capacity["write"] / per,
        "rru_reported": capacity["read"] / per,
        "wru_refused": refused / per,
    }


def _minus(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Field by field a - b, operations included."""
    out = {k: v - b[k] for k, v in a.items() if k != "operations"}
    ops = {
        op: a["operations"].get(op, 0) - b["operations"].get(op, 0)
        for op in set(a["operations"]) | set(b["operations"])
    }
    return out | {"operations": {op: n for op, n in ops.items() if n}}


def _busy(subjects: Subjects, name: str, rejections: _Rejections, n: int) -> dict[str, Any]:
    """Hold a key inside business code in one thread; deliver it again meanwhile."""
    entered, release = threading.Event(), threading.Event()

    def hold(body_: Any, attempt: Any) -> dict[str, Any]:
        entered.set()
        release.wait(30)
        return {"held": True}

    holder, contender = subjects.build(name, hold), subjects.build(name, business(0))
    results = []
    for key in new_keys(n):
        entered.clear()
        release.clear()
        thread = threading.Thread(target=invoke, args=(holder, [body(key)]))
        thread.start()
        if not entered.wait(30):
            raise RuntimeError(f"{name}: the holder never entered business code")
        results.append(
            _measure(subjects, rejections, lambda k=key: invoke(contender, [body(k)]), 1)
        )
        release.set()
        thread.join()
    return {k: sum(r[k] for r in results) / n for k in results[0] if k != "operations"} | {
        "operations": results[0]["operations"]
    }


def paths(subjects: Subjects, n: int = 10) -> dict[str, dict[str, Any]]:
    """Per consumer, per path: calls and capacity per record."""
    rejections = _Rejections(subjects)
    out: dict[str, dict[str, Any]] = {}
    for name in CONSUMERS:
        handler = subjects.build(name, business(0))
        keys = new_keys(n)
        bodies = [body(k) for k in keys]
        row = {"new": _measure(subjects, rejections, lambda h=handler, b=bodies: invoke(h, b), n)}
        row["duplicate"] = _measure(
            subjects, rejections, lambda h=handler, b=bodies: invoke(h, b), n
        )
        pairs = [body(k) for k in new_keys(n // 2) for _ in range(2)]
        both = _measure(subjects, rejections, lambda h=handler, b=pairs: invoke(h, b), n // 2)
        # Per pair: one new key and its in-batch copy; the copy costs the difference.
        row["in-batch duplicate"] = _minus(both, row["new"])
        row["busy"] = _busy(subjects, name, rejections, 3)
        changed = [body(k, amount=999) for k in keys]
        row["conflict"] = _measure(
            subjects, rejections, lambda h=handler, b=changed: invoke(h, b), n
        )
        out[name] = row
    return out


def cost_per_million(row: dict[str, Any]) -> float:
    """USD per million records taking this path (DynamoDB request units only)."""
    wru = row["wru_reported"] + row["wru_refused"]
    return wru * PRICE_WRU + row["rru_reported"] * PRICE_RRU


def record_sizes(subjects: Subjects) -> dict[str, Any]:
    """Stored size of a COMPLETED record per consumer (run first, on empty tables), and
    once's record size and write units as its result grows past the cap."""
    typical = {}
    for name in CONSUMERS:
        handler = subjects.build(name, business(0))
        key = new_keys(1)[0]
        invoke(handler, [body(key)])
        items = subjects.wire.client().scan(TableName=TABLES[name])["Items"]
        done = [item_size(i) for i in items if i.get("status", {}).get("S") == "COMPLETED"]
        typical[name] = max(done) if done else None
    rejections = _Rejections(subjects)
    capped = []
    for size in RESULT_SIZES:
        handler = subjects.build("once", lambda b, a, s=size: {"blob": "x" * s})
        key = new_keys(1)[0]
        new = _measure(subjects, rejections, lambda h=handler, k=key: invoke(h, [body(k)]), 1)
        dup = _measure(subjects, rejections, lambda h=handler, k=key: invoke(h, [body(k)]), 1)
        item = subjects.wire.client().get_item(
            TableName=TABLES["once"],
            Key={"id": {"S": record_id(KEY_PREFIX, key)}},
            ConsistentRead=True,
        )["Item"]
        capped.append(
            {
                "result_bytes": size + len('{"blob":""}'),
                "stored_result_bytes": len(item["result"]["S"].encode()),
                "record_bytes": item_size(item),
                "wru_new": new["wru_reported"] + new["wru_refused"],
                "wru_duplicate": dup["wru_reported"] + dup["wru_refused"],
            }
        )
    return {"typical": typical, "capped": capped}


# --- write units by DynamoDB's rules ------------------------------------------------------


#: Single-item writes, and the element kinds of a transaction that write.
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
WRITE_ELEMENTS = ("Put", "Update", "Delete")


def _written(operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(table, key) of every item a write call writes (the bench's tables are keyed ``id``)."""
    if operation == "TransactWriteItems":
        bodies = [b for e in params["TransactItems"] for k, b in e.items() if k in WRITE_ELEMENTS]
        return [(b["TableName"], {"id": b.get("Item", b.get("Key"))["id"]}) for b in bodies]
    item = params["Item"] if operation == "PutItem" else params["Key"]
    return [(params["TableName"], {"id": item["id"]})]


class RuleUnits:
    """Write units of every write that lands, by DynamoDB's rules: per item, 1 per KB of the
    larger of its images before and after the write, rounded up; twice that in a
    transaction. The images are read around the call (consistent reads, with ``reader``: a
    client off the wire, neither counted nor delayed), only while ``wire.capacity_on``.
    DynamoDB Local's own report (``Wire.capacity``) agrees for single-item writes, and
    under-reports a transaction that writes several items of one size to one table (it
    bills them as one)."""

    def __init__(self, wire: Wire, reader: Any) -> None:
        self.units = 0.0
        self._wire = wire
        self._reader = reader
        self._lock = threading.Lock()
        # Its own key in a request's context: several counters may watch one session (the
        # atomic effects' and the cost's, in one run), each counting every write.
        self._key = f"bench_units_{id(self)}"
        events = wire.session.events
        for operation in (*WRITES, "TransactWriteItems"):
            events.register(f"before-parameter-build.dynamodb.{operation}", self._before)
            events.register(f"after-call.dynamodb.{operation}", self._after)

    def _images(self, keys: list[tuple[str, dict[str, Any]]]) -> list[int]:
        sizes = []
        for table, key in keys:
            got = self._reader.get_item(TableName=table, Key=key, ConsistentRead=True)
            sizes.append(item_size(got.get("Item") or {}))
        return sizes

    def _before(
        self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        if self._wire.capacity_on:
            keys = _written(model.name, params)
            context[self._key] = (keys, self._images(keys))

    def _after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if self._key not in context or "Error" in parsed:
            return  # not measuring, or refused (``Refused`` counts what a refusal costs)
        keys, before = context.pop(self._key)
        per_kb = 2 if model.name == "TransactWriteItems" else 1
        units = sum(
            per_kb * max(1, math.ceil(max(a, b) / 1024))
            for a, b in zip(before, self._images(keys), strict=True)
        )
        with self._lock:
            self.units += units

    def take(self) -> float:
        with self._lock:
            units, self.units = self.units, 0.0
        return units


#: The table the staged write goes to (a ledger entry per payment).
LEDGER = "bench-ledger"
#: The protocols whose write units are goals: two-phase ``once`` and staged ``once``.
PROTOCOLS = ("once", "once-staged")


def _ledger_entry(body_: Any, attempt: Any) -> dict[str, Any]:
    """Business code that stages one write: a ledger entry of its own per payment."""
    attempt.write(
        {
            "Put": {
                "TableName": LEDGER,
                "Item": {"id": {"S": f"entry#{body_['paymentId']}"}, "amount": {"N": "100"}},
                "ConditionExpression": "attribute_not_exists(id)",
            }
        }
    )
    return {"paymentId": body_["paymentId"]}


class _Canceled:
    """Counts transactions canceled (``TransactionCanceledException``): the engine reports no
    capacity for one, and what it bills for one is not in its documentation (the transaction
    page tells the two writes per item of one that lands), so the rules count it 0."""

    def __init__(self, wire: Wire) -> None:
        self.count = 0
        self._lock = threading.Lock()
        wire.session.events.register("after-call.dynamodb.TransactWriteItems", self._on_response)

    def _on_response(self, parsed: dict[str, Any], **_: Any) -> None:
        if parsed.get("Error", {}).get("Code") == "TransactionCanceledException":
            with self._lock:
                self.count += 1

    def take(self) -> int:
        with self._lock:
            count, self.count = self.count, 0
        return count


@dataclass
class _Counters:
    """What one write-units row is counted with, on the wire's session."""

    wire: Wire
    rules: RuleUnits
    refused: _Rejections
    canceled: _Canceled

    def count(self, action: Callable[[], Any], n: int) -> dict[str, Any]:
        """Per message of ``action`` (``n`` of them): calls on the wire, their operations,
        write units as the engine reported them and by DynamoDB's rules (the writes that
        landed, and those refused by their condition: ``rejected_units``), and the
        transactions canceled (counted 0 by the rules: ``_Canceled``)."""
        self.wire.reset()
        self.rules.take()
        self.refused.take()
        self.canceled.take()
        action()
        calls, capacity = self.wire.snapshot()
        refused = self.refused.take()
        return {
            "calls": sum(calls.values()) / n,
            "operations": {op: k / n for op, k in sorted(calls.items())},
            "wru_reported": capacity["write"] / n,
            "wru_rules": (self.rules.take() + refused) / n,
            "wru_refused": refused / n,
            "canceled": self.canceled.take() / n,
        }


def _deliver(handler: Any, bodies: list[str], expect: str, what: str) -> None:
    """One batch of ``bodies``; every record must end ``expect``, or there is no figure."""
    outcomes = [r.outcome.value for r in handler.handle(sqs_event(bodies), context()).records]
    if set(outcomes) != {expect}:
        raise RuntimeError(f"{what}: expected every record {expect}, got {outcomes}; no figure")


def write_units(subjects: Subjects, reader: Any, n: int = 10) -> dict[str, dict[str, Any]]:
    """Per protocol, write units per new message with no staged write and with one: what
    the engine reports (``ReturnConsumedCapacity=TOTAL``) and what DynamoDB's rules make of
    the items written (``RuleUnits``). Then the same with the bridge to Powertools' records
    (``BRIDGED``, ``bridged``). ``reader``: a client off the wire."""
    wire = subjects.wire
    client = wire.client()
    tables = client.list_tables()["TableNames"]
    for table in (LEDGER, POWERTOOLS_RECORDS):
        if table not in tables:
            create_table(client, table)
    counters = _Counters(wire, RuleUnits(wire, reader), _Rejections(subjects), _Canceled(wire))
    was, wire.capacity_on = wire.capacity_on, True
    out: dict[str, dict[str, Any]] = {}
    try:
        for name in PROTOCOLS:
            out[name] = {}
            for variant, process in (("none", business(0)), ("one write", _ledger_entry)):
                handler = subjects.build(name, process)
                bodies = [body(k) for k in new_keys(n)]
                what = f"{name}, {variant}"
                deliver = functools.partial(_deliver, handler, bodies, "processed", what)
                out[name][variant] = counters.count(deliver, n)
        out |= bridged(subjects, counters, reader, n)
    finally:
        wire.capacity_on = was
    return out


# --- the bridge to Powertools' records ----------------------------------------------------

#: The team's Powertools records (``once.powertools``), and what precedes ``#`` in their ids.
POWERTOOLS_RECORDS = "bench-powertools-records"
POWERTOOLS_PREFIX = "bench-renewals"
#: The protocols with the bridge, by the protocol they bridge.
BRIDGED = {"once": "once+bridge", "once-staged": "once-staged+bridge"}
#: The path of a message whose Powertools record Powertools completed before the deploy.
POWERTOOLS_DUPLICATE = "duplicate (Powertools COMPLETED)"


def powertools_bridge() -> once.PowertoolsBridge:
    """The bridge to the records the bench's Powertools consumer writes
    (``proof/chaos/peers/powertools.py``: the business key in the body, the whole body
    validated), as a team writes it from that configuration."""
    return once.PowertoolsBridge(
        table_name=POWERTOOLS_RECORDS,
        key_prefix=POWERTOOLS_PREFIX,
        event_key_jmespath="powertools_json(body).paymentId",
        payload_validation_jmespath="powertools_json(body)",
    )


def _powertools_status(reader: Any, text: str) -> str | None:
    """The status of the Powertools record of the message whose body is ``text``."""
    record = powertools_bridge().record_for(sqs_event([text])["Records"][0])
    assert record is not None
    item = reader.get_item(TableName=POWERTOOLS_RECORDS, Key=record.key(), ConsistentRead=True)
    return item.get("Item", {}).get("status", {}).get("S")


def bridged(
    subjects: Subjects, counters: _Counters, reader: Any, n: int
) -> dict[str, dict[str, Any]]:
    """Per protocol with the bridge (``BRIDGED``): a new message with no staged write and
    with one (its Powertools record absent: once writes it, and leaves it COMPLETED), and
    a message Powertools' own consumer completed before (``POWERTOOLS_DUPLICATE``: once
    honours that record and completes its own with Powertools' response)."""
    team = powertools.make_handler(
        business(0),
        table_name=POWERTOOLS_RECORDS,
        key="paymentId",
        client=subjects.wire.client(),
        key_prefix=POWERTOOLS_PREFIX,
    )
    out: dict[str, dict[str, Any]] = {}
    for name, title in BRIDGED.items():
        out[title] = {}
        effects = "staged" if name == "once-staged" else "any"
        for variant, process in (("none", business(0)), ("one write", _ledger_entry)):
            handler = once.make_handler(
                process,
                key="paymentId",
                table_name=TABLES[name],
                key_prefix=KEY_PREFIX,
                dlq_url=None,
                effects=effects,
                powertools=powertools_bridge(),
            )
            bodies = [body(k) for k in new_keys(n)]
            deliver = functools.partial(_deliver, handler, bodies, "processed", title)
            out[title][variant] = counters.count(deliver, n)
            if _powertools_status(reader, bodies[0]) != "COMPLETED":
                raise RuntimeError(f"{title}: the Powertools record is not COMPLETED; no figure")
            if variant != "none":
                continue
            # Renewals the Powertools build completed before the deploy, redelivered.
            done = [body(k) for k in new_keys(n)]
            if team(sqs_event(done), context())["batchItemFailures"]:
                raise RuntimeError("the Powertools consumer failed a record; no figure")
            deliver = functools.partial(_deliver, handler, done, "duplicate", title)
            out[title][POWERTOOLS_DUPLICATE] = counters.count(deliver, n)
    return out
