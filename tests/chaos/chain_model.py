"""The chain model: two real once consumers joined by a transport, checked against the promise
the outbox makes end to end: once → queue → once is exactly once, per upstream OPERATION,
across hops and across time.

Why a model one level up from ``message_model.py``: that machine checks one consumer against
its own record. What breaks between two consumers is not visible there: the identity an
upstream outbox gives its message (``once.source``, ``once.seq``), what a transport does to a
message on the way (SQS keeps it; SNS with raw delivery on keeps it too; SNS with raw delivery
off wraps it in a notification whose ``MessageId``, ``Timestamp`` and ``Signature`` are new on
every publish and carries the attributes in that JSON, with no SQS message attributes at all;
EventBridge carries no attributes at all: the identity travels in the event's detail, and a
rule's SQS target delivers the whole event, whose ``id`` and ``time`` are new on every
``PutEvents``, or with ``InputPath: "$.detail"`` the detail alone), and time: each consumer
forgets a key after its own retention, the upstream one first, and a key reused past the
upstream retention is a NEW operation whose message the downstream consumer must apply
although it still remembers the old one.

The pieces:

- upstream consumer U (``key="k"``): a producer's order ``{"k": key, "n": n}``. Its business
  code reads the order's state (the item its own commit writes, with ``attempt.write``, in a
  table of its own) and raises ``RuntimeError`` when the order is already placed, as business
  code that reads what its first commit changed does; otherwise it places it and stages one
  message with ``attempt.send`` to the transport (``{"order": key}``, and with ``tagged`` the
  order's ``n`` too: a body that is the same for every operation of a key, or not);
- the transport (``transport``): ``sqs`` (SendMessageBatch to the downstream queue),
  ``sns-raw`` (PublishBatch, a subscription with raw delivery on: the same SQS message
  attributes) or ``sns-envelope`` (raw delivery off: the body is SNS's notification JSON, the
  identity in its ``MessageAttributes``, a fresh ``MessageId``, ``Timestamp`` and
  ``Signature`` on every publish, including a resend of the same outbox message), ``events``
  (PutEvents to a bus, a rule's SQS target given no input: the body is the whole event, the
  identity in its ``detail.once``, a fresh ``id`` and ``time`` on every ``PutEvents``) or
  ``events-detail`` (the same rule's target with ``InputPath: "$.detail"``: the body is the
  detail, the identity its ``once``); EventBridge's delivery to the target is emulated here as
  SNS's envelope is;
- downstream consumer D (``key=SOURCE_KEY``): applies the message's effect, an ``ADD`` on the
  operation's item staged with ``attempt.write``, so the count is what committed, not what ran;
  behind SNS with raw delivery off it takes the notification whole or unwraps it
  (``envelope="powertools_json(Message)"``, ``unwrap``);
- each consumer with its own retention (U's shorter than D's) and mode (``effects="any"`` or
  ``"staged"``); a deploy switches a consumer's mode (a new handler on the same table and
  prefix);
- SQS as AWS runs it: standard queues, batches of any visible messages, redelivery after the
  visibility timeout of what was not acknowledged, ``maxReceiveCount`` to a DLQ that the
  operator redrives; producers' duplicates; invocations that die at a crash point or at their
  deadline; AWS's documented errors on the calls (``aws_faults``), an outage of the
  destination, a failed clear: the record stays COMPLETED owing its outbox, and a later
  delivery resends it with the same identity;
- a clock the records run on (``RecordStore(clock=)``) that passes U's retention
  (``pass_upstream_retention``) only as the design allows: once every copy of U's messages is
  gone (the retention is chosen to outlast them), and never D's while a copy of its messages
  may still come.

Each example has its own two tables (moto copies every table a transaction writes to: shared
ones would make a long run slower and larger with each example). The model knows which
upstream operation each downstream message carries (it reads U's record
when the outbox sends: the operation is the completion that owes it); nothing on the wire
says so but once's identity. An operation is one committed upstream completion: the count
U's commit adds to the operation's item.

The invariants (``Violation.name``):

1. ``applied_not_once``: every upstream operation's message is applied downstream exactly
   once: never twice, never acknowledged unapplied (dropped as a duplicate of another
   operation's, or quarantined), and at quiescence applied; ``applied_uncommitted``: nothing
   is applied for an operation that did not commit; ``upstream_not_once``: an operation
   commits upstream once;
2. ``owed_forever``: nothing owed forever: at quiescence (faults off, outages over, both queues
   redelivered and both DLQs redriven until nothing is in flight) no upstream record still
   holds an outbox and every operation's message was applied (``no_convergence`` if the
   queues never empty, ``not_done`` for an operation that never committed); the same when
   U's queue does not empty before its retention passes (each fault answers one call, so it
   empties well within the rounds);
3. ``conflict_on_resend``: no CONFLICT downstream (the outcome, whose message goes to D's DLQ
   with ``once.reason=CONFLICT``) from a resend or a copy of the same upstream message. A
   CONFLICT under an identity another operation's message was sent under too is that
   operation's message dropped: invariant 1.

What once puts on the wire is held to the AWS rules its messages can meet where the model
receives them (SendMessageBatch's and PublishBatch's entries, Ids, attribute names, types,
empty values and characters, Number precision, sizes: ``_refused``; PutEvents' entries and
the request's size, by ``once.sendrules``' own rules: ``outbox_events``): a call AWS would
refuse for one of them is refused with AWS's code, an entry PutEvents would fail is failed
with its ``ErrorCode``, and nothing AWS takes is refused.

A check made inside the runtime's own calls (business code, an outbox send) would be caught
there like any error: it is noted (``noted``) and raised again once the invocation ends.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from once import SOURCE_KEY, make_handler, sendrules
from once import constants as c
from once.handler import Handler
from once.models import Attempt, Outcome, Record, record_id
from once.outbox import Outbox
from once.payload import canonical_json, sha256
from once.store import RecordStore
from once.testing.crash import (
    CRASH_POINTS,
    CrashingOutbox,
    CrashingQuarantine,
    CrashingStore,
    InvocationKilled,
    KillSwitch,
)
from oncecli.aws import create_table
from tests.chaos import aws_faults
from tests.chaos.aws_faults import Fault, Faults, FaultyDynamoDB
from tests.chaos.message_model import Clock, Context, Violation

REGION = "us-east-1"
ACCOUNT = "000000000000"
#: The function timeout, the queues' visibility timeout (it outlasts the lease: timeout +
#: margin) and maxReceiveCount, for both consumers.
TIMEOUT_S = 10
VISIBILITY_S = 30
LEASE_MARGIN_S = 2
MAX_RECEIVE = 5
#: Each consumer's retention: U forgets a key first, D much later.
U_RETENTION_S = 3600
D_RETENTION_S = 4 * U_RETENTION_S
#: How many times an example passes U's retention: D's is never passed (4 times U's).
MAX_JUMPS = 2
#: Deploys per example: each switches a consumer's mode while messages are in flight.
MAX_DEPLOYS = 2
#: Rounds of the runbook at quiescence (and of a drain before U's retention passes); the time
#: they may take is kept in reserve whenever the clock moves, so that no retention passes
#: while a copy it must recognise can still arrive.
ROUNDS = 12
RESERVE_S = (ROUNDS + 2) * (VISIBILITY_S + 1)
#: The faults an example may draw from AWS's documented ones (``inject``; ``aws_faults``).
FAULT_BUDGET = 3
#: Business keys: few, so that keys come back.
KEYS = ("k1", "k2")
U_QUEUE = "chain-up"
D_QUEUE = "chain-down"
U_DLQ_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{U_QUEUE}-dlq"
D_DLQ_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{D_QUEUE}-dlq"
#: U's outbox destination: D's queue (``sqs``), or a topic D's queue subscribes to.
OUT_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{D_QUEUE}"
OUT_TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:chain-orders"
OUT_BUS = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/chain-orders"
#: The events' ``Source`` and ``DetailType`` (U's ``attempt.send`` to the bus).
EVENT_SOURCE, DETAIL_TYPE = "chain.orders", "order.placed"
TRANSPORTS = ("sqs", "sns-raw", "sns-envelope", "events", "events-detail")
#: The transports through EventBridge: the whole event, or its detail (``InputPath``).
EVENT_TRANSPORTS = ("events", "events-detail")
MODES = ("any", "staged")
#: The calls faults answer, per consumer, weighted by how much of the chain hangs on them:
#: U's clear and sends (a resend follows), and its commit (a staged commit whose answer is
#: lost is judged again by the redelivery); "outbox" is the transport's send.
_U_TARGETS = ("clear", "clear", "outbox", "outbox", "commit", "commit", "complete", "claim")
_D_TARGETS = ("commit", "complete", "claim", "fail")
#: DLQ reasons the operator drops rather than redrives (docs/runbook.md, "The DLQ").
DROPPED_REASONS = (
    c.REASON_INVALID_JSON,
    c.REASON_INVALID_ENVELOPE,
    c.REASON_INVALID_KEY,
    c.REASON_INVALID_PAYLOAD,
    c.REASON_CONFLICT,
)
#: Outcomes of a downstream message that say its operation is applied.
_APPLIED = (Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.OWED_SENT)


@dataclass(frozen=True)
class Op:
    """One upstream operation a producer sends: the order ``n`` of business key ``key``."""

    key: str
    n: int

    def body(self) -> str:
        return json.dumps({"k": self.key, "n": self.n})

    @property
    def payload_hash(self) -> str:
        """U's record's payload hash (``validate`` is the whole body)."""
        return sha256(canonical_json(json.loads(self.body())))

    def __str__(self) -> str:
        return f"{self.key}:{self.n}"


@dataclass
class Copy:
    """One SQS message of a queue or a DLQ. ``op`` and ``resend`` are the model's knowledge,
    never on the wire: the upstream operation a downstream message carries, and whether it is
    a resend of an identity already sent for that operation."""

    id: str
    body: str
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    op: Op | None = None
    resend: bool = False
    #: A downstream message's identity as the model saw it sent (``<source>#<seq>``).
    identity: str = ""
    receive_count: int = 0
    visible_at: float = 0.0
    receipt: str = ""
    #: In a DLQ: once's ``once.reason``, or None when SQS moved it at maxReceiveCount.
    reason: str | None = None


class Queue:
    """A standard SQS queue with its DLQ (``maxReceiveCount`` = ``MAX_RECEIVE``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.messages: list[Copy] = []
        self.dlq: list[Copy] = []

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{self.name}"

    @property
    def empty(self) -> bool:
        return not self.messages and not self.dlq

    def receive(
        self, now: float, size: int, pick: Callable[[list[Copy]], list[Copy]] | None
    ) -> list[Copy]:
        """The visible messages SQS hands out (any of them: a standard queue), after moving
        those received ``MAX_RECEIVE`` times already to the DLQ."""
        for message in [m for m in self.messages if m.visible_at <= now]:
            if message.receive_count >= MAX_RECEIVE:
                self.messages.remove(message)
                self.dlq.append(message)
        visible = [m for m in self.messages if m.visible_at <= now]
        batch = pick(visible) if pick is not None else visible[:size]
        for message in batch:
            message.receive_count += 1
            message.visible_at = now + VISIBILITY_S
            message.receipt = uuid.uuid4().hex
        return batch

    def delete(self, message: Copy, receipt: str) -> None:
        """The mapping deletes an acknowledged message; only its latest receipt does."""
        if message in self.messages and message.receipt == receipt:
            self.messages.remove(message)


# --- AWS's rules for what once sends (SendMessageBatch, PublishBatch) -----------------------

#: SQS's and SNS's message characters: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
#: #x10000-#x10FFFF (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
_REFUSED_CHARACTER = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: A batch entry's Id: up to 80 alphanumerics, hyphens and underscores.
_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
#: An attribute's name: up to 256 of A-Z a-z 0-9 _ - . , no leading, trailing or doubled
#: period, not starting with AWS. or Amazon. in any case
#: (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html).
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_-](?:[A-Za-z0-9_-]|\.(?!\.)){0,255}(?<!\.)")
_SQS_MAX_BYTES = 1024 * 1024  # since 2025
_SNS_MAX_BYTES = 256 * 1024


def _refused(entries: list[dict[str, Any]], *, topic: bool) -> str | None:
    """The error code SQS (``topic`` False) or SNS answers a batch with, or None if it takes
    it. Only the rules once's messages can meet; each as AWS documents it."""
    invalid = "InvalidParameter" if topic else "InvalidParameterValue"
    if not entries:
        return "EmptyBatchRequest" if topic else "AWS.SimpleQueueService.EmptyBatchRequest"
    if len(entries) > 10:
        return (
            "TooManyEntriesInBatchRequest"
            if topic
            else "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
        )
    ids = [str(entry.get("Id", "")) for entry in entries]
    if len(set(ids)) != len(ids):
        return (
            "BatchEntryIdsNotDistinct"
            if topic
            else "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
        )
    total = 0
    for entry, entry_id in zip(entries, ids, strict=True):
        if not _ENTRY_ID.fullmatch(entry_id):
            return "InvalidBatchEntryId" if topic else "AWS.SimpleQueueService.InvalidBatchEntryId"
        body = entry.get("Message" if topic else "MessageBody")
        if not isinstance(body, str) or not body or _REFUSED_CHARACTER.search(body):
            return invalid
        attributes = entry.get("MessageAttributes") or {}
        if len(attributes) > 10:
            return invalid
        size = len(body.encode("utf-8"))
        for name, value in attributes.items():
            kind = str(value.get("DataType", ""))
            if not _ATTRIBUTE_NAME.fullmatch(name) or name.lower().startswith(("aws.", "amazon.")):
                return invalid
            if kind.split(".", 1)[0] not in ("String", "Number", "Binary"):
                return invalid
            text = value.get("StringValue")
            if kind.startswith("Binary"):
                data = value.get("BinaryValue")
                if not isinstance(data, bytes | bytearray):
                    return invalid
                size += len(name.encode()) + len(kind.encode()) + len(data)
                continue
            if not isinstance(text, str) or not text or _REFUSED_CHARACTER.search(text):
                return invalid  # SQS and SNS refuse an empty value as they refuse no value
            if kind.startswith("Number") and not _number_taken(text):
                return invalid
            size += len(name.encode()) + len(kind.encode()) + len(text.encode("utf-8"))
        total += size
    if total > (_SNS_MAX_BYTES if topic else _SQS_MAX_BYTES):
        return "BatchRequestTooLong" if topic else "AWS.SimpleQueueService.BatchRequestTooLong"
    return None


def _number_taken(text: str) -> bool:
    """A Number attribute: up to 38 significant digits, from -10^128 to 10^126."""
    try:
        number = Decimal(text)
    except InvalidOperation:
        return False
    if not number.is_finite():
        return False
    digits = len(number.normalize().as_tuple().digits) if number else 1
    return (
        digits <= 38
        and abs(number) <= Decimal("1e126")
        and (number == 0 or abs(number) >= Decimal("1e-128"))
    )


def _md5(text: str) -> str:
    """The digest SQS returns and Lambda hands over for a body."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


class _Aws:
    """One consumer's SQS, SNS and EventBridge client: its quarantine's SendMessage to its DLQ
    and, for U, its outbox's SendMessageBatch, PublishBatch or PutEvents, which land in the
    model's queues."""

    def __init__(self, machine: ChainMachine, consumer: str) -> None:
        self._machine = machine
        self._consumer = consumer

    def send_message(self, **request: Any) -> dict[str, Any]:
        expected = U_DLQ_URL if self._consumer == "U" else D_DLQ_URL
        assert request["QueueUrl"] == expected, request["QueueUrl"]
        with self._machine.noted():
            self._machine.on_quarantine(self._consumer, request)
        return {"MessageId": str(uuid.uuid4()), "MD5OfMessageBody": _md5(request["MessageBody"])}

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert self._consumer == "U" and QueueUrl == OUT_URL, QueueUrl
        return self._machine.outbox_batch("outbox-sqs", "SendMessageBatch", Entries)

    def publish_batch(
        self, TopicArn: str, PublishBatchRequestEntries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        assert self._consumer == "U" and TopicArn == OUT_TOPIC, TopicArn
        return self._machine.outbox_batch("outbox-sns", "PublishBatch", PublishBatchRequestEntries)

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert self._consumer == "U", "only U's outbox puts events"
        return self._machine.outbox_events(Entries)


class ChainMachine(RuleBasedStateMachine):
    """Set ``client`` (a DynamoDB client) on a subclass (``test_chain_model.py`` does). Each
    example makes two tables of its own and deletes them at its end: ``table`` (both
    consumers' records, each under its own prefix) and ``state_table`` (U's orders, and what
    each operation committed upstream and applied downstream). Tables that every example
    shared would grow with the run, and moto copies each table a transaction writes to."""

    client: Any
    #: The transports an example draws from (``test_chain_model.py`` runs one at a time).
    transports: tuple[str, ...] = TRANSPORTS
    #: What the runs exercised, over every example of the process (``test_chain_model.py``
    #: prints it): outcomes per consumer, resends, keys reused past U's retention, faults.
    seen: Counter[str] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        run = f"chain-{uuid.uuid4().hex[:12]}"
        self.run = run
        self.table, self.state_table = f"{run}-records", f"{run}-state"
        for table in (self.table, self.state_table):
            create_table(self.client, table, key=c.PARTITION_KEY)
        self.prefixes = {"U": f"{run}-orders", "D": f"{run}-notices"}
        self.retention = {"U": U_RETENTION_S, "D": D_RETENTION_S}
        self.dlq_urls = {"U": U_DLQ_URL, "D": D_DLQ_URL}
        self.queues = {"U": Queue(U_QUEUE), "D": Queue(D_QUEUE)}
        self.clients = {"U": _Aws(self, "U"), "D": _Aws(self, "D")}
        self.faults = {name: Faults(on_fired=self._fired(name)) for name in ("U", "D")}
        self.modes = {"U": "any", "D": "any"}
        self.handlers: dict[str, Handler] = {}
        self.transport = "sqs"
        self.tagged = False
        self.unwrap = False
        self.ops: dict[str, list[Op]] = {}  # key -> its operations, in order
        self.by_hash: dict[str, Op] = {}
        self.past: set[Op] = set()  # operations whose U retention has passed
        self.first_sent: dict[Op, float] = {}  # when a producer first sent the operation
        #: Per downstream identity (``<once.source>#<once.seq>``): the operations sent under
        #: it, in order, and when it was first sent.
        self.identities: dict[str, list[Op]] = defaultdict(list)
        self.born: dict[str, float] = {}
        self.downstream_ids: dict[str, Copy] = {}  # D's message ids: its business code's view
        self.out_down = False
        self.jumps = 0
        self.deploys = 0
        self.injected = 0  # faults drawn by ``inject``
        self.violations: list[Violation] = []
        #: A promise was found broken: the teardown does not run the runbook over it.
        self.failed = False

    def _fired(self, name: str) -> Callable[[Fault], None]:
        return lambda fault: self.seen.update([f"fault {name} {fault}"])

    # --- set-up -------------------------------------------------------------------------------

    @initialize(
        data=st.data(),
        upstream=st.sampled_from(MODES),
        downstream=st.sampled_from(MODES),
        tagged=st.booleans(),
        unwrap=st.booleans(),
    )
    def start(
        self, data: st.DataObject, upstream: str, downstream: str, tagged: bool, unwrap: bool
    ) -> None:
        """The chain, and a producer's first order: every example has one to carry."""
        transport = data.draw(st.sampled_from(self.transports))
        self.setup(transport, upstream, downstream, tagged, unwrap=unwrap)
        self.send_new(KEYS[0])

    def setup(
        self, transport: str, upstream: str, downstream: str, tagged: bool, *, unwrap: bool = False
    ) -> None:
        """``transport`` joins U's outbox to D's queue; ``upstream`` and ``downstream`` are the
        consumers' modes (``effects``); ``tagged``: U's message names the order's ``n`` (each
        operation's message differs), else every operation of a key sends the same body;
        ``unwrap``: behind SNS with raw delivery off, D unwraps the notification
        (``envelope="powertools_json(Message)"``), else it takes the notification whole."""
        self.transport, self.tagged = transport, tagged
        self.unwrap = unwrap and transport == "sns-envelope"
        self.modes = {"U": upstream, "D": downstream}
        self.handlers = {name: self._make_handler(name) for name in ("U", "D")}
        self.seen[f"transport {transport}{' unwrapped by D' if self.unwrap else ''}"] += 1
        self.seen[f"modes U {upstream}, D {downstream}"] += 1

    def _make_handler(self, name: str) -> Handler:
        upstream = name == "U"
        return make_handler(
            self._upstream if upstream else self._downstream,
            key="k" if upstream else SOURCE_KEY,
            envelope=None if upstream or not self.unwrap else "powertools_json(Message)",
            table_name=self.table,
            dlq_url=self.dlq_urls[name],
            key_prefix=self.prefixes[name],
            lease_margin_s=LEASE_MARGIN_S,
            retention_s=self.retention[name],
            max_workers=1,  # one record after another: a run replays exactly
            backoff_base_s=None,  # failures come back after the visibility timeout
            effects=self.modes[name],  # type: ignore[arg-type]
        )

    @property
    def destination(self) -> str:
        if self.transport in EVENT_TRANSPORTS:
            return OUT_BUS
        return OUT_URL if self.transport == "sqs" else OUT_TOPIC

    # --- producers ----------------------------------------------------------------------------

    def reusable(self) -> list[str]:
        """Keys a producer may send a new operation under: new ones, and those whose every
        operation is past U's retention (within it, another payload is a CONFLICT upstream,
        which ``message_model`` covers)."""
        return [k for k in KEYS if all(op in self.past for op in self.ops.get(k, []))]

    @precondition(lambda self: bool(self.reusable()))
    @rule(data=st.data())
    def new_operation(self, data: st.DataObject) -> None:
        """A producer sends a new order: on a new key, or on a key U has forgotten (a new
        operation, which D must apply although it remembers the key's last one)."""
        self.send_new(data.draw(st.sampled_from(self.reusable())))

    def send_new(self, key: str) -> Op:
        """A new operation on ``key``, sent by a producer."""
        assert key in self.reusable(), f"{key} is not reusable yet"
        ops = self.ops.setdefault(key, [])
        op = Op(key, len(ops) + 1)
        if ops:
            self.seen["key reused past U's retention"] += 1
        ops.append(op)
        self.by_hash[op.payload_hash] = op
        self.first_sent[op] = self.clock()
        self._produce(op)
        return op

    def current(self) -> list[Op]:
        return [ops[-1] for ops in self.ops.values() if ops and ops[-1] not in self.past]

    @precondition(lambda self: bool(self.current()))
    @rule(data=st.data())
    def producer_copy(self, data: st.DataObject | None = None) -> None:
        """A producer's retry: a copy of an operation U still remembers, in a new message."""
        ops = self.current()
        op = data.draw(st.sampled_from(ops)) if data is not None else ops[0]
        self.seen["producer copy"] += 1
        self._produce(op)

    def _produce(self, op: Op) -> None:
        self.queues["U"].messages.append(Copy(uuid.uuid4().hex, op.body(), op=op))

    # --- SQS and Lambda -----------------------------------------------------------------------

    @rule(data=st.data(), crash=st.sampled_from([None, None, None, *CRASH_POINTS]))
    def invoke_upstream(self, data: st.DataObject | None = None, crash: str | None = None) -> None:
        """A receive takes a batch of U's queue (copies of one order together or apart) and
        an invocation runs it, dying at ``crash`` if given."""
        self._receive_and_invoke("U", data, crash)

    @rule(data=st.data(), crash=st.sampled_from([None, None, None, *CRASH_POINTS]))
    def invoke_downstream(
        self, data: st.DataObject | None = None, crash: str | None = None
    ) -> None:
        self._receive_and_invoke("D", data, crash)

    def _receive_and_invoke(self, name: str, data: st.DataObject | None, crash: str | None) -> None:
        def pick(visible: list[Copy]) -> list[Copy]:
            assert data is not None
            if not visible:
                return []
            return data.draw(
                st.lists(st.sampled_from(visible), unique_by=id, min_size=1, max_size=10)
            )

        batch = self.queues[name].receive(self.clock(), 10, pick if data is not None else None)
        if batch:
            self.invoke(name, batch, crash)

    @rule(seconds=st.sampled_from([1, 5, 13, VISIBILITY_S + 1]))
    def advance(self, seconds: int) -> None:
        """Time passes, within every retention that a copy in flight still needs."""
        if not self.tick(seconds):
            self.seen["advance refused: a retention would pass under a copy"] += 1

    @precondition(lambda self: self.jumps < MAX_JUMPS and bool(self.ops))
    @rule()
    def pass_upstream_retention(self) -> None:
        """Time passes U's retention: first every copy of U's messages is delivered (an
        outage ends; the operator redrives U's DLQ), as the design's retention outlasts
        them; then U has forgotten every key, and D remembers what it applied."""
        self.out_down = False
        upstream = self.queues["U"]
        for _ in range(ROUNDS):
            if not self.tick(VISIBILITY_S + 1):
                break
            self.drain("U")
            if upstream.empty:
                break
            self.redrive("U")
        else:  # every round ran: with each fault answering once, U empties well within them
            raise self.stuck(f"U's queue is not empty after {ROUNDS} rounds")
        jump = U_RETENTION_S + 1
        if not upstream.empty or not self.may_pass(jump):
            self.seen["retention not passed: copies in flight"] += 1
            return
        self.clock.now += jump
        self.jumps += 1
        self.past.update(op for ops in self.ops.values() for op in ops)
        self.seen["U's retention passed"] += 1

    @rule(down=st.booleans())
    def destination_outage(self, down: bool) -> None:
        """U's outbox destination refuses every send (``ConnectionError``) while down."""
        self.out_down = down

    @precondition(lambda self: self.faults["U"].pending("clear") == 0)
    @rule()
    def clear_refused(self) -> None:
        """U's next clear of an outbox it sent is refused (throttled past the SDK's retries):
        the record stays COMPLETED owing what D already has, and the next delivery resends it
        with the same identity."""
        self.faults["U"].arm(Fault("clear", "error", "ThrottlingException"))

    @precondition(lambda self: self.injected < FAULT_BUDGET)
    @rule(data=st.data(), consumer=st.sampled_from(["U", "U", "U", "D"]))
    def inject(self, data: st.DataObject, consumer: str) -> None:
        """AWS answers the consumer's next call of the fault's kind as it documents it may:
        a call first (weighted), then one of the faults AWS documents for it."""
        target = data.draw(st.sampled_from(_U_TARGETS if consumer == "U" else _D_TARGETS))
        fault = data.draw(st.sampled_from(self.fault_catalog(target)))
        self.faults[consumer].arm(fault)
        self.injected += 1

    def fault_catalog(self, target: str) -> list[Fault]:
        """The faults of one call that pass (a misconfiguration that lasts until a person
        fixes it is ``message_model``'s): ``outbox`` is the transport's send."""
        if target == "outbox":
            target = {"sqs": "outbox-sqs", "events": "outbox-events"}.get(
                self.transport.split("-")[0], "outbox-sns"
            )
        return [f for f in aws_faults.FAULTS if f.target == target and not f.permanent]

    @precondition(lambda self: self.deploys < MAX_DEPLOYS)
    @rule(consumer=st.sampled_from(["U", "D"]))
    def deploy(self, consumer: str) -> None:
        """A deploy switches the consumer between ``effects="any"`` and ``"staged"``: a new
        handler on the same table and prefix, while messages are in flight."""
        self.deploys += 1
        self.modes[consumer] = "staged" if self.modes[consumer] == "any" else "any"
        self.handlers[consumer].bind()
        self.handlers[consumer] = self._make_handler(consumer)
        self.seen[f"deploy {consumer} {self.modes[consumer]}"] += 1

    @precondition(lambda self: any(q.dlq for q in self.queues.values()))
    @rule()
    def operator_redrives(self) -> None:
        """docs/runbook.md: drop what must not run, redrive the rest of both DLQs."""
        self.redrive("U")
        self.redrive("D")

    # --- helpers the rules and the controls share -----------------------------------------------

    def tick(self, seconds: float) -> bool:
        """Move the clock, if no retention a copy in flight still needs would pass."""
        if not self.may_pass(seconds):
            return False
        self.clock.now += seconds
        return True

    def may_pass(self, seconds: float) -> bool:
        """Whether ``seconds`` may pass with time kept for the runbook (``RESERVE_S``): every
        operation a copy of which is in U's queue or DLQ stays within U's retention (its
        record, however late it committed, expires no earlier than its first send + the
        retention), and every identity a copy of which is in D's queue or DLQ within D's.
        The design chooses retentions that outlast every copy; the model keeps to that."""
        later = self.clock() + seconds + RESERVE_S
        upstream = self.queues["U"]
        for message in upstream.messages + upstream.dlq:
            if message.op is not None and later >= self.first_sent[message.op] + U_RETENTION_S:
                return False
        downstream = self.queues["D"]
        return all(
            later < self.born[m.identity] + D_RETENTION_S
            for m in downstream.messages + downstream.dlq
            if m.identity
        )

    def drain(self, name: str) -> None:
        """Deliver every visible message of the consumer's queue, ten at a time."""
        while batch := self.queues[name].receive(self.clock(), 10, None):
            self.invoke(name, batch, None)

    def redrive(self, name: str) -> None:
        """The operator's redrive of one DLQ: the reasons the runbook drops are dropped, the
        rest moved back with their attributes (a move task: new message ids)."""
        queue = self.queues[name]
        for message in queue.dlq:
            if message.reason in DROPPED_REASONS:
                self.seen[f"dropped {name} {message.reason}"] += 1
                continue
            again = Copy(
                uuid.uuid4().hex,
                message.body,
                dict(message.attributes),
                message.op,
                message.resend,
                message.identity,
            )
            if name == "D":
                self.downstream_ids[again.id] = again
            self.seen[f"redriven {name} {message.reason or 'maxReceiveCount'}"] += 1
            queue.messages.append(again)
        queue.dlq = []

    def _event_record(self, name: str, message: Copy) -> dict[str, Any]:
        return {
            "messageId": message.id,
            "receiptHandle": message.receipt,
            "body": message.body,
            "attributes": {"ApproximateReceiveCount": str(message.receive_count)},
            "messageAttributes": {  # as Lambda hands them over
                attribute: {
                    "stringValue": v["StringValue"],
                    "stringListValues": [],
                    "binaryListValues": [],
                    "dataType": v["DataType"],
                }
                for attribute, v in message.attributes.items()
            },
            "md5OfBody": _md5(message.body),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queues[name].arn,
            "awsRegion": REGION,
        }

    def invoke(self, name: str, batch: list[Copy], crash: str | None) -> list[Outcome]:
        """One invocation of the consumer's handler on ``batch``, bound to the kit's crashing
        store, quarantine and outbox (``once.testing.crash``), on the model's clock: each
        message's outcome (none when the invocation was killed)."""
        handler = self.handlers[name]
        switch = KillSwitch(crash)
        deadline = self.clock() + TIMEOUT_S
        switch.die_at(deadline, self.clock)
        store = CrashingStore(
            FaultyDynamoDB(self.client, self.faults[name]),
            self.table,
            retention_s=self.retention[name],
            clock=self.clock,
            switch=switch,
        )
        store._sleep = self._sleep  # the store's backoff between commit tries, on our clock
        client = self.clients[name]
        handler.bind(
            store=store,
            quarantine=CrashingQuarantine(client, self.dlq_urls[name], switch=switch),
            outbox=CrashingOutbox(Outbox(lambda _service: client), switch=switch),
        )
        event = {"Records": [self._event_record(name, m) for m in batch]}
        receipts = [m.receipt for m in batch]
        try:
            result = handler.handle(event, Context(self.clock, deadline))
        except InvocationKilled:
            self.seen[f"killed {name} {switch.killed_at}"] += 1
            assert switch.wait_for_the_dead(5), f"killed {switch.killed_at}, still running"
            handler.bind()
            return []  # nothing acknowledged: the batch comes back after its visibility timeout
        finally:
            if self.violations:
                raise self.violations[0]
        for message, receipt, end in zip(batch, receipts, result.records, strict=True):
            self.seen[f"outcome {name} {end.outcome}"] += 1
            if name == "D":
                self._judge_downstream(message, end.outcome, end.reason)
            if end.outcome.acknowledged:
                self.queues[name].delete(message, receipt)
        return [end.outcome for end in result.records]

    def _sleep(self, seconds: float) -> None:
        self.clock.now += seconds

    def fail(self, name: str, detail: str) -> Violation:
        """The violation to raise; the example is over."""
        self.failed = True
        return Violation(name, detail)

    @contextmanager
    def noted(self) -> Iterator[None]:
        """A check made inside the runtime (business code, a client's call), which catches
        what they raise: the violation is noted, and raised again once the invocation ends."""
        try:
            yield
        except Violation as violation:
            self.violations.append(violation)
            raise

    # --- the business code of the two consumers -------------------------------------------------

    def _upstream(self, body: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        """Place the order, once: read its state (what this code's own commit wrote), raise
        if it is placed already, else stage its placement, the operation's count and the
        message to the transport."""
        key, n = str(body["k"]), int(body["n"])
        placed = self._item(self._order(key))
        if placed is not None and int(placed["n"]["N"]) >= n:
            self.seen["U's business code found its order placed"] += 1
            raise RuntimeError("the order is placed already (model)")
        attempt.write(
            {
                "Update": {
                    "TableName": self.state_table,
                    "Key": {c.PARTITION_KEY: {"S": self._order(key)}},
                    "UpdateExpression": "SET #n = :n",
                    "ExpressionAttributeNames": {"#n": "n"},
                    "ExpressionAttributeValues": {":n": {"N": str(n)}},
                }
            }
        )
        attempt.write(self._count(self._committed(Op(key, n))))
        body = {"order": key, "n": n} if self.tagged else {"order": key}
        if self.transport in EVENT_TRANSPORTS:
            attempt.send(self.destination, body, source=EVENT_SOURCE, detail_type=DETAIL_TYPE)
        else:
            attempt.send(self.destination, body)
        return {"placed": n}

    def _downstream(self, body: Any, attempt: Attempt) -> dict[str, Any]:
        """Apply the upstream operation's message: one count on its item, committed with
        D's record."""
        message = self.downstream_ids.get(attempt.message_id)
        with self.noted():
            if message is None or message.op is None:
                raise self.fail("model", f"D ran on a message it never got: {attempt.message_id}")
            inner = body
            if self.transport == "sns-envelope" and not self.unwrap:
                if not isinstance(body, dict) or body.get("Type") != "Notification":
                    raise self.fail("model", f"not an SNS notification: {body!r}")
                inner = json.loads(body["Message"])
            if self.transport == "events":
                if not isinstance(body, dict) or body.get("detail-type") != DETAIL_TYPE:
                    raise self.fail("model", f"not an EventBridge event: {body!r}")
                inner = body["detail"]
            if not isinstance(inner, dict) or inner.get("order") != message.op.key:
                raise self.fail("model", f"D got {inner!r} for {message.op}")
        attempt.write(self._count(self._applied(message.op)))
        return {"applied": str(message.op)}

    def _count(self, item: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.state_table,
                "Key": {c.PARTITION_KEY: {"S": item}},
                "UpdateExpression": "ADD #c :one",
                "ExpressionAttributeNames": {"#c": "c"},
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }

    # --- the transport ------------------------------------------------------------------------

    def outbox_batch(self, target: str, operation: str, entries: list[dict[str, Any]]) -> Any:
        """U's outbox sends a batch: refused as AWS refuses it, failed as an armed fault
        says, or delivered to D's queue through the transport."""
        if self.out_down:
            raise ConnectionError("destination unreachable (model)")
        code = _refused(entries, topic=target == "outbox-sns")
        if code is not None:
            self.seen[f"refused by AWS {code}"] += 1
            raise aws_faults.client_error(code, operation)

        def send(sent: list[dict[str, Any]], failed: list[Any]) -> dict[str, Any]:
            with self.noted():
                for entry in sent:
                    self._deliver(entry)
            successful = [{"Id": e["Id"], "MessageId": str(uuid.uuid4())} for e in sent]
            if target == "outbox-sqs":  # SendMessageBatchResultEntry's required digest
                for result, entry in zip(successful, sent, strict=True):
                    result["MD5OfMessageBody"] = _md5(entry["MessageBody"])
            return {"Successful": successful, "Failed": failed}

        fault = self.faults["U"].take(target)
        if fault is None:
            return send(entries, [])
        if fault.kind == "failed":
            return send(*aws_faults.failed_entries(fault, entries))
        return aws_faults.answer_call(fault, lambda: send(entries, []), operation, target[7:])

    def outbox_events(self, entries: list[dict[str, Any]]) -> Any:
        """U's outbox puts events: the request refused as PutEvents refuses it (more than
        ``EVENTS_MAX_ENTRIES`` entries, or entries that together reach
        ``EVENTS_REQUEST_MAX_BYTES``: ``ValidationException``), each entry PutEvents fails for
        its content failed alone with its ``ErrorCode`` (``sendrules.event_entry_problem``),
        the call failed as an armed fault says, or each entry put reaching D's queue through
        the rule's target. The results keep the request's order; ``FailedEntryCount`` counts
        the failed (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html)."""
        if self.out_down:
            raise ConnectionError("destination unreachable (model)")
        for entry in entries:
            assert entry.get("EventBusName") == OUT_BUS, entry.get("EventBusName")
        size = sum(sendrules.event_entry_bytes(entry) for entry in entries)
        if not entries or len(entries) > sendrules.EVENTS_MAX_ENTRIES:
            self.seen["refused by AWS ValidationException (entries)"] += 1
            raise aws_faults.client_error("ValidationException", "PutEvents")
        if size >= sendrules.EVENTS_REQUEST_MAX_BYTES:
            self.seen["refused by AWS ValidationException (size)"] += 1
            raise aws_faults.client_error("ValidationException", "PutEvents")

        def put(sent: list[dict[str, Any]], failed: dict[str, Any] | None) -> dict[str, Any]:
            results: list[dict[str, Any]] = [] if failed is None else [failed]
            with self.noted():
                for entry in sent:
                    problem = sendrules.event_entry_problem(entry)
                    if problem is not None:
                        self.seen[f"failed by AWS {problem[0]}"] += 1
                        results.append({"ErrorCode": problem[0], "ErrorMessage": problem[1]})
                        continue
                    self._deliver(entry)
                    results.append({"EventId": str(uuid.uuid4())})
            failures = sum(1 for result in results if "ErrorCode" in result)
            return {"FailedEntryCount": failures, "Entries": results}

        fault = self.faults["U"].take("outbox-events")
        if fault is None:
            return put(entries, None)
        if fault.kind == "failed":
            return put(*aws_faults.failed_event_entries(fault, entries))
        return aws_faults.answer_call(fault, lambda: put(entries, None), "PutEvents", "events")

    def _identity(self, entry: dict[str, Any]) -> tuple[str | None, str | None]:
        """once's identity as the entry carries it: SQS's or SNS's message attributes, or an
        event's ``Detail`` (``"once": {"source": ..., "seq": <a JSON number>}``)."""
        if "Detail" in entry:
            carried = json.loads(entry["Detail"]).get(c.EVENT_IDENTITY)
            if not isinstance(carried, dict):
                return None, None
            seq = carried.get(c.EVENT_IDENTITY_SEQ)
            return carried.get(c.EVENT_IDENTITY_SOURCE), (
                str(seq) if isinstance(seq, int) and not isinstance(seq, bool) else None
            )
        attributes: dict[str, dict[str, Any]] = entry.get("MessageAttributes") or {}
        source = attributes.get(c.OUTBOX_ATTR_SOURCE, {}).get("StringValue")
        return source, attributes.get(c.OUTBOX_ATTR_SEQ, {}).get("StringValue")

    def _deliver(self, entry: dict[str, Any]) -> None:
        """One accepted entry reaches D's queue as the transport delivers it."""
        attributes: dict[str, dict[str, Any]] = entry.get("MessageAttributes") or {}
        body = entry.get("MessageBody") or entry.get("Message") or entry["Detail"]
        source, seq = self._identity(entry)
        if source is None or seq is None:
            raise self.fail("identity_lost", f"an outbox message without once's identity: {entry}")
        identity = f"{source}#{int(seq)}"
        op = self._sending(body)
        resend = op in self.identities[identity]
        self.identities[identity].append(op)
        self.born.setdefault(identity, self.clock())
        if resend:
            self.seen["resend"] += 1
        message = Copy(uuid.uuid4().hex, body, op=op, resend=resend, identity=identity)
        if self.transport == "sns-envelope":
            message.body = self._notification(body, attributes)
        elif self.transport in EVENT_TRANSPORTS:  # no message attributes
            message.body = self._event(entry)
        else:  # SQS, or SNS with raw delivery on: SQS's message attributes
            message.attributes = {
                name: {"DataType": v["DataType"], "StringValue": v["StringValue"]}
                for name, v in attributes.items()
                if "StringValue" in v
            }
        self.downstream_ids[message.id] = message
        self.queues["D"].messages.append(message)

    def _notification(self, text: str, attributes: dict[str, dict[str, Any]]) -> str:
        """SNS's notification JSON, as an SQS subscription without raw message delivery gets
        it: a new ``MessageId``, ``Timestamp`` and ``Signature`` on every publish
        (https://docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html)."""
        carried = {
            name: {
                "Type": v["DataType"],
                "Value": base64.b64encode(v["BinaryValue"]).decode()
                if "BinaryValue" in v
                else v["StringValue"],
            }
            for name, v in attributes.items()
        }
        when = datetime.fromtimestamp(self.clock(), UTC).isoformat(timespec="milliseconds")
        notification = {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "TopicArn": OUT_TOPIC,
            "Message": text,
            "Timestamp": when.replace("+00:00", "Z"),
            "SignatureVersion": "1",
            "Signature": base64.b64encode(os.urandom(256)).decode(),
            "SigningCertURL": f"https://sns.{REGION}.amazonaws.com/"
            "SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem",
            "UnsubscribeURL": f"https://sns.{REGION}.amazonaws.com/?Action=Unsubscribe"
            f"&SubscriptionArn={OUT_TOPIC}:2bcfbf39-05c3-41de-beaa-fcfcc21c8f55",
            "MessageAttributes": carried,
        }
        # SNS writes it with its own spacing: '"Type" : "Notification"'.
        return json.dumps(notification, indent=2, separators=(",", " : "))

    def _event(self, entry: dict[str, Any]) -> str:
        """What the rule's SQS target sends D's queue for a put entry: the whole event
        (``events``: ``version``, a new ``id``, ``detail-type``, ``source``, ``account``,
        ``time`` of this ``PutEvents`` to the second, ``region``, ``resources``, ``detail``),
        or with ``InputPath: "$.detail"`` the detail alone (``events-detail``)
        (https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html,
        https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_Target.html)."""
        detail = json.loads(entry["Detail"])
        if self.transport == "events-detail":
            return json.dumps(detail)
        when = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps(
            {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": entry["DetailType"],
                "source": entry["Source"],
                "account": ACCOUNT,
                "time": when,
                "region": REGION,
                "resources": list(entry.get("Resources") or []),
                "detail": detail,
            }
        )

    def _sending(self, body: str) -> Op:
        """The operation whose outbox is being sent: the completion U's record holds (it owes
        the outbox; a new claim would have removed it). A tagged body names it too."""
        inner = json.loads(body)
        key = str(inner["order"])
        record = RecordStore(self.client, self.table).get(record_id(self.prefixes["U"], key))
        op = self.by_hash.get(record.payload_hash or "") if record is not None else None
        if record is None or op is None or record.status != c.STATUS_COMPLETED:
            raise self.fail(
                "outbox_of_another_operation",
                f"{key}'s outbox sent while its record is {record.status if record else 'absent'}",
            )
        if "n" in inner and int(inner["n"]) != op.n:
            raise self.fail(
                "outbox_of_another_operation",
                f"{key}'s message of order {inner['n']} sent while its record is {op}'s",
            )
        return op

    # --- what the model observes ----------------------------------------------------------------

    def on_quarantine(self, name: str, request: dict[str, Any]) -> None:
        attributes = dict(request.get("MessageAttributes") or {})
        reason = attributes.get(c.QUARANTINE_ATTR_REASON, {}).get("StringValue")
        self.seen[f"dlq {name} {reason}"] += 1
        copy = Copy(uuid.uuid4().hex, request["MessageBody"], attributes, reason=reason)
        if name == "U":
            copy.op = self.by_hash.get(sha256(canonical_json(json.loads(copy.body))))
        else:
            origin = attributes.get(c.QUARANTINE_ATTR_MESSAGE_ID, {}).get("StringValue")
            quarantined = self.downstream_ids.get(str(origin))
            if quarantined is not None:
                copy.op, copy.resend = quarantined.op, quarantined.resend
                copy.identity = quarantined.identity
        # The copy keeps the message's own attributes (the identity among them): the DLQ
        # message's, less once's quarantine ones, which a redrive carries along.
        self.queues[name].dlq.append(copy)

    def _judge_downstream(self, message: Copy, outcome: Outcome, reason: str | None) -> None:
        """Invariants 1 and 3 where D ends a message. A CONFLICT under an identity that
        another operation's message was sent under too is that operation's message dropped
        (1: two operations share one identity, and D keeps one); under an identity only
        this operation's messages were sent under, it comes from a resend of the same
        message (3). An acknowledgment of a message whose operation is not applied exactly
        once is one dropped or doubled (1)."""
        op = message.op
        assert op is not None
        if outcome is Outcome.CONFLICT or reason == c.REASON_CONFLICT:
            others = sorted({str(o) for o in self.identities[message.identity] if o != op})
            if others:
                raise self.fail(
                    "applied_not_once",
                    f"{op}'s message is a CONFLICT downstream: {others} sent under its "
                    f"identity {message.identity} too, and {op}'s is never applied",
                )
            raise self.fail(
                "conflict_on_resend",
                f"D quarantined a {'resend' if message.resend else 'copy'} of {op}'s message "
                f"(identity {message.identity}) as a CONFLICT",
            )
        if outcome in _APPLIED:
            applied = self._counted(self._applied(op))
            if applied != 1:
                raise self.fail(
                    "applied_not_once",
                    f"D acknowledged {op}'s message ({outcome}) with the operation applied "
                    f"{applied} times (identity {message.identity})",
                )

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def each_operation_applied_at_most_once(self) -> None:
        """Invariant 1, after every step: no operation commits twice upstream or applies
        twice downstream, and nothing is applied that did not commit."""
        committed, applied = self._counts()
        for op in self._all_ops():
            if committed[op] > 1:
                raise self.fail("upstream_not_once", f"{op} committed {committed[op]} times")
            if applied[op] > 1:
                raise self.fail("applied_not_once", f"{op} applied {applied[op]} times")
            if applied[op] and not committed[op]:
                raise self.fail("applied_uncommitted", f"{op} applied, never committed")

    def quiesce(self, rounds: int = ROUNDS) -> None:
        """Producers stop, outages and faults end, both queues are redelivered and both DLQs
        redriven until nothing is in flight; then nothing is owed and every operation is
        applied exactly once (invariants 1 and 2)."""
        self.out_down = False
        for faults in self.faults.values():
            faults.clear()
        converged = False
        for _ in range(rounds):
            self.clock.now += VISIBILITY_S + 1
            self.drain("U")
            self.drain("D")
            if all(q.empty for q in self.queues.values()):
                converged = True
                break
            self.redrive("U")
            self.redrive("D")
        if self.owing() or not converged:
            raise self.stuck(f"after {rounds} rounds of the runbook")
        committed, applied = self._counts()
        for op in self._all_ops():
            if not committed[op]:
                raise self.fail("not_done", f"{op} never committed upstream")
            if applied[op] != 1:
                raise self.fail(
                    "applied_not_once",
                    f"{op} committed upstream, applied {applied[op]} times downstream",
                )
        self.seen["quiesced"] += 1

    def owing(self) -> list[str]:
        """The keys whose U record holds an outbox."""
        return sorted(
            key
            for key in self.ops
            if (record := self._record("U", key)) is not None and record.outbox
        )

    def stuck(self, where: str) -> Violation:
        """Liveness broken (invariant 2): a U record still owes its outbox, or the queues
        never empty."""
        queues = ", ".join(
            f"{name} {len(q.messages)} queued, {len(q.dlq)} in its DLQ"
            for name, q in self.queues.items()
        )
        if owing := self.owing():
            return self.fail("owed_forever", f"{where}: U's records of {owing} owe ({queues})")
        return self.fail("no_convergence", f"{where}: {queues}")

    def teardown(self) -> None:
        try:
            if self.handlers and self.ops and not self.failed:
                self.quiesce()
        finally:
            for handler in self.handlers.values():
                handler.bind()
            for table in (self.table, self.state_table):
                self.client.delete_table(TableName=table)

    # --- reading the tables ---------------------------------------------------------------------

    def _all_ops(self) -> list[Op]:
        return [op for ops in self.ops.values() for op in ops]

    def _counts(self) -> tuple[Counter[Op], Counter[Op]]:
        """Per operation: its commits upstream and its applications downstream, in one
        consistent read."""
        ops = self._all_ops()
        if not ops:
            return Counter(), Counter()
        names = {self._committed(op): ("U", op) for op in ops} | {
            self._applied(op): ("D", op) for op in ops
        }
        answer = self.client.batch_get_item(
            RequestItems={
                self.state_table: {
                    "Keys": [{c.PARTITION_KEY: {"S": name}} for name in names],
                    "ConsistentRead": True,
                }
            }
        )
        assert not answer.get("UnprocessedKeys"), "the engine left keys unread"
        committed: Counter[Op] = Counter()
        applied: Counter[Op] = Counter()
        for item in answer["Responses"].get(self.state_table, []):
            side, op = names[item[c.PARTITION_KEY]["S"]]
            (committed if side == "U" else applied)[op] += int(item["c"]["N"])
        return committed, applied

    def _counted(self, name: str) -> int:
        item = self._item(name)
        return int(item["c"]["N"]) if item is not None else 0

    def _item(self, name: str) -> dict[str, Any] | None:
        answer = self.client.get_item(
            TableName=self.state_table,
            Key={c.PARTITION_KEY: {"S": name}},
            ConsistentRead=True,
        )
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def _record(self, name: str, key: str) -> Record | None:
        return RecordStore(self.client, self.table).get(record_id(self.prefixes[name], key))

    def _order(self, key: str) -> str:
        return f"{self.run}#order#{key}"

    def _committed(self, op: Op) -> str:
        return f"{self.run}#committed#{op}"

    def _applied(self, op: Op) -> str:
        return f"{self.run}#applied#{op}"
