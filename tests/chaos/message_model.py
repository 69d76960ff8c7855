"""The message-level model: the real ``Handler`` between a source queue, its DLQ and an
operator who follows docs/runbook.md, checked against the design's promises after every step.

``test_record_model.py`` checks one level down (the record store against a model of its
item). This machine drives whole invocations: producers send operations, copies of them and
changed payloads; SQS hands out batches by the standard or the FIFO rules, makes what was not
acknowledged visible again after its visibility timeout and moves it to the DLQ at
``maxReceiveCount``; invocations die at any crash point, overrun their deadline, or stall
past their lease while another invocation takes the key over (a zombie); the clock moves;
TTL sweeps run; business code returns odd values, raises, stages writes that commit with the
record (``attempt.write``), one guarded by a condition that may refuse the commit, and
messages for the outbox (``attempt.send``), whose sends may fail; the operator redrives the
DLQ as the runbook says, reviewing LEASE_EXPIRED copies first.

AWS answers as it documents, not kinder (``aws_faults.py``): a per-example budget of faults,
each drawn from the errors AWS documents for the call (a canceled commit's
``CancellationReasons``, a refused UpdateItem, a batch send's ``Failed`` entries, a refused
quarantine, a timeout before or after a write landed), each answering one call.

The queues, the DLQ, the outbox's destination and the clock are plain Python; the records
and the business writes live in a real engine (moto in-process for the default suite,
DynamoDB Local for long runs). The handler is the real one (``make_handler``), bound to the
testing kit's crashing store, quarantine and outbox (``once.testing.crash``), so that its
calls to the DLQ and the outbox land in the model.

The invariants, each from the design:

- ``acknowledged_unfinished``: a message is acknowledged only if its operation is COMPLETED
  (owing nothing) or its copy is in the DLQ;
- ``ran_again``: business code runs for a key only on a new key, a FAILED record, or an
  IN_PROGRESS one whose lease really expired (and then with a higher fence); never on a live
  COMPLETED record;
- ``effect_not_once``: the staged write lands exactly once per completion (none of a zombie's,
  none of a crashed or refused attempt's), and the completion names the run that made it;
- ``dlq_without_reason``: every message once sends to the DLQ carries ``once.reason``;
- ``fifo_order``: in a FIFO group an operation takes effect only once every earlier one of its
  group has taken effect or reached the DLQ;
- ``owed_dropped``: nothing an outbox owes is dropped (acknowledged while owed, or never sent);
- ``undeliverable_committed``: nothing is committed that is never delivered: at quiescence
  every completion's outbox was sent; a destination refused until a person fixes it
  (``aws_faults.PERMANENT``) leaves the record owing, counted (``owed``) at each delivery
  and in the DLQ by ``maxReceiveCount``, never silently cleared;
- ``unfenced_ran_twice``: under ``on_expired_lease="quarantine"``, business code that returned
  for an operation never runs for it again without a person's review in between (the redrive
  of a DLQ copy carrying ``once.fence``), and under either policy never once its commit
  landed, while the record is remembered (past its retention a record is forgotten, as the
  design says, and the operation starts afresh);
- ``identity_lost``: for a consumer keyed on the upstream identity (``key=SOURCE_KEY``), a
  DLQ copy keeps ``once.source`` and ``once.seq``: its redrive is never ``INVALID_KEY``;
- liveness at quiescence (``quiesce``): once producers stop and the operator has followed the
  runbook, every operation is COMPLETED or knowingly dropped, in a bounded number of rounds.

The same machine runs a consumer built with ``effects="staged"`` (``effects``): business code
first, with no claim, then one write commits what it staged. Every invariant above holds as
it is but ``ran_again`` and ``unfenced_ran_twice``, which are about claims: a staged copy runs
business code whatever the record holds (copies in flight, and duplicates, all run it), and
``on_expired_lease="quarantine"`` is not allowed with it. ``effect_not_once`` then names the
run by its message (the fence is not known before the commit). Its own invariants:

- ``staged_claimed``: business code sees no claim (``attempt.fence`` None, no takeover, no
  record), and no record is ever IN_PROGRESS or FAILED (nothing but the commit writes it);
- ``staged_raise_wrote``: an invocation in which every run of a key's business code raised
  leaves that key's record and effect as they were;
- ``committed_twice``: a COMPLETED record is never completed again by another commit while it
  lives (before its retention passed): exactly one commit lands, whatever ran.

A check made inside the runtime's own calls (business code, the DLQ's ``SendMessage``) would
be caught there like any error (business code that raises is a transient failure; a
quarantine whose send raises is not sent): it is noted (``noted``) and raised again once the
invocation ends.
"""

from __future__ import annotations

import json
import math
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from once import SOURCE_KEY, PermanentError, identity, make_handler
from once import constants as c
from once.backoff import Backoff
from once.handler import Handler
from once.models import Attempt, Outcome, Record, record_id
from once.observability import logger
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
from once.visibility import Visibility
from tests.chaos import aws_faults
from tests.chaos.aws_faults import Fault, Faults, FaultyDynamoDB

REGION = "us-east-1"
ACCOUNT = "000000000000"
#: The function's timeout, the source queue's visibility timeout and maxReceiveCount: the
#: visibility outlasts the lease (timeout + margin), as OnceConsumer derives it.
TIMEOUT_S = 10
VISIBILITY_S = 30
MAX_RECEIVE = 4
LEASE_MARGIN_S = 2
RETENTION_S = 600
DLQ_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/model-dlq"
OUT_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/model-out"
OUT_TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:model-out"
#: The faults an example may inject (``aws_faults``): few, so runs stay fast and each fault
#: meets the paths around it.
FAULT_BUDGET = 3
#: With ``backoff``, the handler's own: failed records come back after d(n) = 2 * 2^(n-1) s.
BACKOFF_BASE_S, BACKOFF_MAX_S = 2, 300
#: ``source_keyed``: the upstream outbox the messages come from (``once.source``), and how
#: many attributes of the team's own each message carries beside the identity (8: with once's
#: own a DLQ copy cannot keep them all).
UPSTREAM = "upstream-record"
TEAM_ATTRIBUTES = 8
#: Business keys per example: few, so that copies, conflicts and groups meet.
MAX_KEYS = 4
GROUPS = ("g1", "g2")
#: What business code returns, by the body's ``ret``: values that are not plain JSON too.
RETURNS: tuple[Callable[[], Any], ...] = (
    lambda: {"ok": True},
    lambda: None,
    lambda: {1, 2},
    lambda: b"\x00\xff",
    lambda: Decimal("1.10"),
    lambda: math.nan,
    lambda: _recursive(),
    lambda: _JsonTrap(),
    lambda: "x" * (c.RESULT_CAP_BYTES + 10),
)
#: Reasons an operator drops rather than redrives: the body is wrong, or another payload
#: under the key ran (docs/runbook.md, "The DLQ").
DROPPED_REASONS = (
    c.REASON_INVALID_JSON,
    c.REASON_INVALID_ENVELOPE,
    c.REASON_INVALID_KEY,
    c.REASON_INVALID_PAYLOAD,
    c.REASON_CONFLICT,
)


def _recursive() -> list[Any]:
    looped: list[Any] = []
    looped.append(looped)
    return looped


class _JsonTrap:
    """A value object a JSON encoder may take for a pydantic model: its ``json`` raises."""

    def json(self) -> str:
        raise AttributeError("no pydantic here")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


#: Outcomes that say the record's operation took effect (now, or in an earlier delivery).
_TOOK_EFFECT = (Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.OWED, Outcome.OWED_SENT)


class Violation(AssertionError):
    """A promise of the design broken; the name says which."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name


@dataclass
class Message:
    """One SQS message of the model's source queue or DLQ."""

    id: str
    body: str
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    group: str | None = None
    receive_count: int = 0
    visible_at: float = 0.0
    receipt: str = ""
    #: Moved to the DLQ by SQS at maxReceiveCount (no once.* attributes).
    moved_by_sqs: bool = False

    @property
    def origin(self) -> str:
        """The id of the message first quarantined (``once.original_message_id``), or own."""
        return self.attributes.get(c.QUARANTINE_ATTR_MESSAGE_ID, {}).get("StringValue", self.id)

    @property
    def reason(self) -> str | None:
        return self.attributes.get(c.QUARANTINE_ATTR_REASON, {}).get("StringValue")


@dataclass(frozen=True)
class Op:
    """An operation a producer sends: one business key and payload."""

    key: str
    version: int
    mode: str  # "ok", "flaky", "permanent", "gated", "plain" (stages no write)
    send: bool
    ret: int
    #: Where the outbox message goes: the queue (SendMessageBatch) or the topic (PublishBatch).
    to: str = "queue"

    def body(self) -> str:
        fields = {"k": self.key, "v": self.version, "mode": self.mode, "send": self.send}
        return json.dumps(
            fields | {"ret": self.ret} | ({"to": self.to} if self.to != "queue" else {})
        )

    @property
    def payload_hash(self) -> str:
        return _payload_hash(self.body())


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


class Context:
    """A Lambda context whose remaining time runs on the model's clock."""

    def __init__(self, clock: Clock, deadline: float) -> None:
        self._clock, self._deadline = clock, deadline
        self.aws_request_id = uuid.uuid4().hex
        self.function_name = "model"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:model"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))


class _Meta:
    endpoint_url = f"https://sqs.{REGION}.amazonaws.com"


class _Sqs:
    """The handler's SQS and SNS client for the DLQ, the outbox's destinations and the source
    queue's visibility: sends land in the model's lists; ``down`` makes them fail as an
    unreachable queue does; an armed fault (``aws_faults``) answers as AWS documents."""

    meta = _Meta()

    def __init__(self, machine: MessageMachine) -> None:
        self._machine = machine

    def send_message(self, **request: Any) -> dict[str, Any]:
        if self._machine.dlq_down:
            raise ConnectionError("DLQ unreachable (model)")
        assert request["QueueUrl"] == DLQ_URL

        def send() -> dict[str, Any]:
            with self._machine.noted():
                self._machine.on_quarantine(request)
            return {"MessageId": uuid.uuid4().hex}

        fault = self._machine.faults.take("quarantine")
        if fault is None:
            return send()
        return aws_faults.answer_call(fault, send, "SendMessage", "sqs")

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert QueueUrl == OUT_URL
        return self._batch("outbox-sqs", "SendMessageBatch", Entries)

    def publish_batch(
        self, TopicArn: str, PublishBatchRequestEntries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        assert TopicArn == OUT_TOPIC
        return self._batch("outbox-sns", "PublishBatch", PublishBatchRequestEntries)

    def _batch(self, target: str, operation: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self._machine.out_down:
            raise ConnectionError("destination unreachable (model)")

        def send(sent: list[dict[str, Any]], failed: list[Any]) -> dict[str, Any]:
            for entry in sent:
                attributes = entry.get("MessageAttributes", {})
                source = attributes[c.OUTBOX_ATTR_SOURCE]["StringValue"]
                seq = attributes[c.OUTBOX_ATTR_SEQ]["StringValue"]
                # The record it names (its operation's token aside).
                self._machine.sent_out.append((identity.named(source), seq))
            return {"Successful": [{"Id": e["Id"]} for e in sent], "Failed": failed}

        fault = self._machine.faults.take(target)
        if fault is None:
            return send(entries, [])
        if fault.kind == "failed":
            return send(*aws_faults.failed_entries(fault, entries))
        return aws_faults.answer_call(fault, lambda: send(entries, []), operation, target[7:])

    def change_message_visibility_batch(
        self, QueueUrl: str, Entries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The handler's backoff: each entry sets when its message comes back."""
        fault = self._machine.faults.take("visibility")
        changed, failed = list(Entries), list[dict[str, Any]]()
        if fault is not None:
            if fault.kind != "failed":
                return aws_faults.answer_call(
                    fault, lambda: {}, "ChangeMessageVisibilityBatch", "sqs"
                )
            changed, failed = aws_faults.failed_entries(fault, Entries)
        successful = []
        for entry in changed:
            message = next(
                (m for m in self._machine.queue if m.receipt == entry["ReceiptHandle"]), None
            )
            if message is None:
                failed.append(
                    {"Id": entry["Id"], "Code": "ReceiptHandleIsInvalid", "SenderFault": True}
                )
                continue
            message.visible_at = self._machine.clock() + int(entry["VisibilityTimeout"])
            successful.append({"Id": entry["Id"]})
        return {"Successful": successful, "Failed": failed}


class MessageMachine(RuleBasedStateMachine):
    """Set ``client`` (a DynamoDB client), ``table`` and ``effects_table`` on a subclass
    (``test_message_model.py`` does, per engine)."""

    client: Any
    table: str
    effects_table: str
    #: ``make_handler(effects=)``: ``"any"`` (two-phase) or ``"staged"`` (set on a subclass).
    effects: str = "any"
    #: What the runs exercised, over every example of the process: outcomes, kills, DLQ
    #: reasons, redrives (``test_message_model.py`` prints it; docs/reliability.md quotes it).
    seen: Counter[str] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.prefix = f"model-{uuid.uuid4().hex[:12]}"
        self.store = RecordStore(self.client, self.table, clock=self.clock)
        self.sqs = _Sqs(self)
        self.queue: list[Message] = []
        self.dlq: list[Message] = []
        self.sent_out: list[tuple[str, str]] = []
        self.ops: dict[str, list[Op]] = defaultdict(list)  # key -> the ops sent under it
        self.sent_order: dict[str, list[str]] = defaultdict(list)  # group -> keys, first send
        self.fixed: set[str] = set()  # keys whose permanent cause the operator fixed
        self.flaky_left: dict[str, int] = {}
        self.effected: set[str] = set()  # keys whose operation took effect
        self.effected_ops: set[str] = set()  # the payload hashes of those operations
        self.in_dlq_ever: set[str] = set()  # keys a copy of which reached the DLQ
        self.dropped: set[str] = set()  # message bodies an operator dropped
        #: Per key, the owners whose claim completed its record: one per completion, however
        #: the record was forgotten since (TTL swept it, or its retention passed).
        #: (Each owner's payload hash: a ``plain`` operation stages no effect.)
        self.completions: dict[str, dict[str, str]] = defaultdict(dict)
        self.plain_ops: set[str] = set()  # the payload hashes of ``plain`` operations
        self.quarantined_now: list[Message] = []
        self.dlq_down = False
        self.out_down = False
        self.garbage_sent = False
        self.fifo = False
        self.policy = "run"
        self.drain_batch = 10
        self.handlers: list[Handler] = []
        self.stall: tuple[int, list[Message]] | None = None  # a zombie's pending takeover
        self.source_keyed = False
        self.violations: list[Violation] = []  # found inside the runtime (``noted``)
        self.backoff = False
        self.faults = Faults(on_fired=lambda fault: self.seen.update([f"fault {fault}"]))
        #: ``unfenced_ran_twice``: a counter of events; per operation (its payload hash) when
        #: its business code last returned; per redriven message carrying ``once.fence``
        #: when a person reviewed it; the operations whose commit was seen landed.
        self.tick = 0
        self.returned: dict[str, int] = {}
        self.reviewed_at: dict[str, int] = {}
        self.landed_ops: set[str] = set()
        #: Per key, the payload hashes of its completions (``undeliverable_committed``).
        self.completed_hashes: dict[str, set[str]] = defaultdict(set)
        #: ``staged_raise_wrote``: invocations in flight (a zombie's holds another), and per
        #: key whether a run of its business code returned in the outermost one.
        self.depth = 0
        self.returned_in_invocation: dict[str, bool] = {}
        #: ``committed_twice``: per key, the owner and the expiry of the completion last seen.
        self.last_completion: dict[str, tuple[str, int | None]] = {}

    # --- set-up -------------------------------------------------------------------------------

    @initialize(
        fifo=st.booleans(),
        policy=st.sampled_from(["run", "quarantine"]),
        drain_batch=st.sampled_from([1, 10]),
        source_keyed=st.booleans(),
        backoff=st.booleans(),
    )
    def setup(
        self,
        fifo: bool,
        policy: str,
        drain_batch: int,
        source_keyed: bool = False,
        backoff: bool = False,
    ) -> None:
        """``source_keyed``: the messages come from an upstream once outbox, carrying its
        identity (``once.source``, ``once.seq``) and the team's own attributes, to a consumer
        keyed on the identity (``key=SOURCE_KEY``). ``backoff``: the handler sets when a failed
        record comes back (``ChangeMessageVisibilityBatch``), instead of the queue's timeout."""
        if self.staged:
            policy = "run"  # effects="staged" takes no lease: nothing to quarantine on expiry
        self.fifo, self.policy, self.drain_batch = fifo, policy, drain_batch
        self.source_keyed, self.backoff = source_keyed, backoff
        self.handlers = [self._make_handler() for _ in range(2)]  # two Lambda instances

    def _make_handler(self) -> Handler:
        return make_handler(
            self._business,
            key=SOURCE_KEY if self.source_keyed else "k",
            table_name=self.table,
            dlq_url=DLQ_URL,
            key_prefix=self.prefix,
            lease_margin_s=LEASE_MARGIN_S,
            retention_s=RETENTION_S,
            max_workers=1,  # one record after another: a run replays exactly
            on_expired_lease=self.policy,  # type: ignore[arg-type]
            # Without backoff the queue's visibility timeout brings failures back.
            backoff_base_s=BACKOFF_BASE_S if self.backoff else None,
            backoff_max_s=BACKOFF_MAX_S,
            effects=self.effects,  # type: ignore[arg-type]
        )

    @property
    def staged(self) -> bool:
        return self.effects == "staged"

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:model{'.fifo' if self.fifo else ''}"

    # --- producers ----------------------------------------------------------------------------

    @precondition(lambda self: len(self.ops) < MAX_KEYS)
    @rule(
        mode=st.sampled_from(["ok", "flaky", "permanent", "gated", "plain"]),
        send=st.booleans(),
        ret=st.integers(0, len(RETURNS) - 1),
        group=st.sampled_from(GROUPS),
        to=st.sampled_from(["queue", "topic"]),
    )
    def send_new(self, mode: str, send: bool, ret: int, group: str, to: str = "queue") -> None:
        """A new operation under a new business key."""
        op = Op(self.new_key(), 0, mode, send, ret, to if send else "queue")
        self.add(op)
        self._produce(op.body(), group)

    def add(self, op: Op) -> None:
        """An operation a producer is about to send."""
        if op.mode == "flaky":
            self.flaky_left.setdefault(op.key, 2)
        if op.mode == "plain":
            self.plain_ops.add(op.payload_hash)
        self.ops[op.key].append(op)

    @precondition(lambda self: bool(self.ops))
    @rule(data=st.data())
    def send_changed(self, data: st.DataObject) -> None:
        """Another payload under a key already used: a CONFLICT, or the one that runs."""
        key = data.draw(st.sampled_from(sorted(self.ops)))
        op = Op(key, len(self.ops[key]), "ok", data.draw(st.booleans()), 0)
        self.ops[key].append(op)
        self._produce(op.body(), data.draw(st.sampled_from(GROUPS)))

    @precondition(lambda self: bool(self.ops))
    @rule(data=st.data())
    def send_copy(self, data: st.DataObject) -> None:
        """A producer's retry: a copy of an earlier operation, in a new message."""
        key = data.draw(st.sampled_from(sorted(self.ops)))
        op = data.draw(st.sampled_from(self.ops[key]))
        self._produce(op.body(), data.draw(st.sampled_from(GROUPS)))

    @precondition(lambda self: not self.garbage_sent)
    @rule(group=st.sampled_from(GROUPS))
    def send_garbage(self, group: str) -> None:
        """A body that is not JSON (once per example: each is quarantined the same way)."""
        self.garbage_sent = True
        self._produce("not json {", group)

    def new_key(self) -> str:
        """The next business key: ``k<n>``, or for ``source_keyed`` the identity the
        upstream outbox gave its message (``<once.source>#<once.seq>``)."""
        n = len(self.ops) + 1
        return f"{UPSTREAM}#{n}" if self.source_keyed else f"k{n}"

    def _produce(self, body: str, group: str) -> None:
        message = Message(uuid.uuid4().hex, body, group=group if self.fifo else None)
        if self.source_keyed:
            # The team's attributes first, the identity last: SQS hands them out in no order
            # a consumer may rely on.
            seq = (_key_of(body) or f"{UPSTREAM}#0").rsplit("#", 1)[-1]
            message.attributes = {
                f"team{i}": {"DataType": "String", "StringValue": f"value {i}"}
                for i in range(TEAM_ATTRIBUTES)
            } | {
                c.OUTBOX_ATTR_SOURCE: {"DataType": "String", "StringValue": UPSTREAM},
                c.OUTBOX_ATTR_SEQ: {"DataType": "Number", "StringValue": seq},
            }
        self.queue.append(message)
        key = _key_of(body)
        if key is not None and key not in self.sent_order[message.group or ""]:
            self.sent_order[message.group or ""].append(key)

    # --- SQS and Lambda -----------------------------------------------------------------------

    @rule(
        data=st.data(),
        crash=st.sampled_from([None, None, None, *CRASH_POINTS]),
        instance=st.integers(0, 1),
    )
    def invoke(self, data: st.DataObject, crash: str | None, instance: int) -> None:
        """A receive takes a batch and an invocation runs it, dying at ``crash`` if given."""
        batch = self._receive(data.draw(st.integers(1, 10)), data)
        if batch:
            self._invoke(instance, batch, crash)

    @rule(data=st.data(), instance=st.integers(0, 1))
    def invoke_overrun(self, data: st.DataObject, instance: int) -> None:
        """Business code runs past the function timeout: Lambda kills the invocation."""
        batch = self._receive(data.draw(st.integers(1, 10)), data)
        if batch:
            self._invoke(instance, batch, None, overrun=True)

    @rule(data=st.data(), instance=st.integers(0, 1))
    def invoke_zombie(self, data: st.DataObject, instance: int) -> None:
        """An invocation stalls in business code past its lease (a paused process, its clock
        behind); meanwhile SQS hands its message out again and the other instance takes the
        key over. Then the stalled one resumes and tries to finish."""
        batch = self._receive(1, data)
        if batch:
            self.stall = (1 - instance, batch)
            self._invoke(instance, batch, None, zombie=True)
            self.stall = None

    @rule(seconds=st.sampled_from([1, 5, 13, 31, RETENTION_S + 1]))
    def advance(self, seconds: int) -> None:
        self.clock.now += seconds

    @rule()
    def ttl_sweep(self) -> None:
        """DynamoDB's TTL: a record past its expiry is deleted, if it is still expired."""
        for key in sorted(self.ops):
            record = self._record(key)
            if record is None or record.expires_at is None or record.expires_at >= self.clock():
                continue
            self.client.delete_item(
                TableName=self.table,
                Key={c.ATTR_ID: {"S": record_id(self.prefix, key)}},
                ConditionExpression="#e < :now",
                ExpressionAttributeNames={"#e": c.ATTR_EXPIRES_AT},
                ExpressionAttributeValues={":now": {"N": str(int(self.clock()))}},
            )

    @rule(down=st.booleans())
    def dlq_outage(self, down: bool) -> None:
        self.dlq_down = down

    @rule(down=st.booleans())
    def destination_outage(self, down: bool) -> None:
        self.out_down = down

    @precondition(lambda self: self.faults.armed_count < FAULT_BUDGET)
    @rule(fault=aws_faults.faults())
    def inject(self, fault: Fault) -> None:
        """AWS answers the next call of the fault's kind as it documents it may
        (``aws_faults``): one call, or ``times`` calls in a row."""
        self.faults.arm(fault)
        self.seen["faults armed"] += 1

    # --- the operator -------------------------------------------------------------------------

    @precondition(lambda self: bool(self.dlq))
    @rule(include_lease_expired=st.booleans(), fix=st.booleans())
    def operator_redrives(self, include_lease_expired: bool, fix: bool) -> None:
        """docs/runbook.md: drop what must not run, fix the cause (or not yet), review the
        LEASE_EXPIRED copies (``--include-lease-expired``) or leave them, redrive."""
        if fix:
            self._fix_every_cause()
        self._redrive(include_lease_expired=include_lease_expired)

    def _fix_every_cause(self) -> None:
        self.faults.fix()
        for key in sorted(self.ops):
            self.fixed.add(key)
            self.client.put_item(
                TableName=self.effects_table,
                Item={c.PARTITION_KEY: {"S": self._gate(key)}},
            )

    def _redrive(self, *, include_lease_expired: bool) -> None:
        kept: list[Message] = []
        for message in self.dlq:
            if message.reason in DROPPED_REASONS:
                self.dropped.add(message.body)
            elif message.reason == c.REASON_LEASE_EXPIRED and not include_lease_expired:
                kept.append(message)
            else:  # moved back with its attributes, as a move task does
                self.seen[f"redriven {message.reason}"] += 1
                again = Message(
                    uuid.uuid4().hex, message.body, dict(message.attributes), message.group
                )
                if c.QUARANTINE_ATTR_FENCE in message.attributes:
                    self.tick += 1  # a person reviewed it: its operation may run again
                    self.reviewed_at[again.id] = self.tick
                self.queue.append(again)
        self.dlq = kept

    # --- an invocation ------------------------------------------------------------------------

    def _receive(
        self, size: int, data: st.DataObject | None, *, only: list[Message] | None = None
    ) -> list[Message]:
        """The visible messages SQS hands out: for FIFO, the first visible ones of each group
        no message of which is in flight, in order; a standard queue any of them. A message
        received ``MAX_RECEIVE`` times already is moved to the DLQ instead."""
        now = self.clock()
        for message in [m for m in self.queue if m.visible_at <= now]:
            if message.receive_count >= MAX_RECEIVE:
                self.queue.remove(message)
                message.moved_by_sqs = True
                self.seen["dlq maxReceiveCount"] += 1
                self.dlq.append(message)
                self._reached_dlq(message)
        if only is not None:
            batch = [m for m in self.queue if m in only and m.visible_at <= now]
        elif self.fifo:
            batch = []
            blocked: set[str | None] = set()
            for message in self.queue:
                if message.group in blocked:
                    continue
                if message.visible_at > now:
                    blocked.add(message.group)
                    continue
                batch.append(message)
                if len(batch) == min(size, c.FIFO_MAX_BATCH_SIZE):
                    break
        else:
            visible = [m for m in self.queue if m.visible_at <= now]
            if data is None:
                batch = visible[:size]
            else:
                batch = data.draw(
                    st.lists(st.sampled_from(visible), unique_by=id, min_size=1, max_size=size)
                    if visible
                    else st.just([])
                )
        for message in batch:
            message.receive_count += 1
            message.visible_at = now + VISIBILITY_S
            message.receipt = uuid.uuid4().hex
        return batch

    def _event_record(self, message: Message) -> dict[str, Any]:
        attributes = {"ApproximateReceiveCount": str(message.receive_count)}
        if message.group is not None:
            attributes["MessageGroupId"] = message.group
        return {
            "messageId": message.id,
            "receiptHandle": message.receipt,
            "body": message.body,
            "attributes": attributes,
            "messageAttributes": {
                name: {"stringValue": v["StringValue"], "dataType": v["DataType"]}
                for name, v in message.attributes.items()
            },
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": self.arn,
            "awsRegion": REGION,
        }

    def _invoke(
        self,
        instance: int,
        batch: list[Message],
        crash: str | None,
        *,
        overrun: bool = False,
        zombie: bool = False,
    ) -> None:
        handler = self.handlers[instance]
        switch = KillSwitch(crash)
        deadline = self.clock() + TIMEOUT_S
        if not zombie:  # a stalled process does not know how late it is
            switch.die_at(deadline, self.clock)
        store = CrashingStore(
            FaultyDynamoDB(self.client, self.faults),
            self.table,
            retention_s=RETENTION_S,
            clock=self.clock,
            switch=switch,
        )
        store._sleep = self._sleep  # the store's backoff between commit tries, on our clock
        handler.bind(
            store=store,
            quarantine=CrashingQuarantine(self.sqs, DLQ_URL, switch=switch),
            outbox=CrashingOutbox(Outbox(lambda _service: self.sqs), switch=switch),
        )
        if self.backoff:  # the handler's backoff, on the model's source queue
            _ = handler.processor
            handler._visibility = Visibility(
                self.sqs, Backoff(BACKOFF_BASE_S, BACKOFF_MAX_S), logger
            )
        self._overrun = overrun
        event = {"Records": [self._event_record(m) for m in batch]}
        receipts = [m.receipt for m in batch]
        quarantined_before = len(self.quarantined_now)
        before = self._before_invocation()
        try:
            result = handler.handle(event, Context(self.clock, deadline))
        except InvocationKilled:
            self.seen[f"killed {switch.killed_at}"] += 1
            # Nothing of a killed invocation may still run (the kit counts it exactly).
            assert switch.wait_for_the_dead(5), f"killed {switch.killed_at}, still running"
            handler.bind()
            return  # nothing acknowledged: the batch comes back after its visibility timeout
        finally:
            self._overrun = False
            self._after_invocation(before)
            if self.violations:
                raise self.violations[0]
            if self.ops:
                self._observe()  # every completion, before a later claim may replace it
        quarantined = self.quarantined_now[quarantined_before:]
        for message, receipt, end in zip(batch, receipts, result.records, strict=True):
            self.seen[f"outcome {end.outcome}"] += 1
            if end.outcome in _TOOK_EFFECT and end.key is not None:
                self._took_effect(end.key, message)
            if end.outcome.acknowledged:
                self._check_acknowledged(message, end.outcome, quarantined)
                # The mapping deletes it; SQS deletes only with the latest receipt handle.
                if message in self.queue and message.receipt == receipt:
                    self.queue.remove(message)

    def _before_invocation(self) -> Any:
        """``staged_raise_wrote``: the outermost invocation's view of every key before it."""
        self.depth += 1
        if not self.staged or self.depth > 1 or not self.ops:
            return None
        self.returned_in_invocation = {}
        return self._read_all()

    def _after_invocation(self, before: Any) -> None:
        self.depth -= 1
        if before is None:
            return
        records_before, effects_before = before
        records, effects = self._read_all()
        for key, returned in self.returned_in_invocation.items():
            if returned:
                continue
            if (records.get(key), effects.get(key)) != (
                records_before.get(key),
                effects_before.get(key),
            ):
                self.violations.append(
                    Violation(
                        "staged_raise_wrote",
                        f"{key}: its business code raised, and the record or the effect changed",
                    )
                )

    @contextmanager
    def noted(self) -> Iterator[None]:
        """A check made inside the runtime (business code, a client's call), which catches
        what they raise: the violation is noted, and raised again once the invocation ends."""
        try:
            yield
        except Violation as violation:
            self.violations.append(violation)
            raise

    def _sleep(self, seconds: float) -> None:
        self.clock.now += seconds

    def _business(self, body: dict[str, Any], attempt: Attempt) -> Any:
        """The operation: stage its effect (and a gate, an outbox message), or fail."""
        key = str(body["k"])
        operation = sha256(canonical_json(body))
        with self.noted():
            if self.staged:
                self._check_staged(key, attempt)
            else:
                self._check_run(key, attempt)
                self._check_unfenced(key, operation, attempt)
        self.returned_in_invocation.setdefault(key, False)
        if self._overrun:
            self.clock.now += TIMEOUT_S + 1
        if self.stall is not None:
            other, batch = self.stall
            self.stall = None
            self.clock.now += VISIBILITY_S + 1  # past the lease, and the message is back
            again = self._receive(10, None, only=batch)
            if again:
                self._invoke(other, again, None)
        mode = body["mode"]
        if mode == "flaky" and self.flaky_left.get(key, 0) > 0:
            self.flaky_left[key] -= 1
            raise RuntimeError("the dependency is down (model)")
        if mode == "permanent" and key not in self.fixed:
            raise PermanentError("no such account (model)")
        if mode == "plain":  # nothing staged: the plain UpdateItem completes the record
            return self._returned(body, attempt, key, operation)
        # The run that made the effect: its fence, or (staged: no fence before the commit)
        # its message, which the commit writes on the record.
        run = {"N": str(attempt.fence)} if attempt.fence is not None else {"S": attempt.message_id}
        attempt.write(
            {
                "Update": {
                    "TableName": self.effects_table,
                    "Key": {c.PARTITION_KEY: {"S": self._effect(key)}},
                    "UpdateExpression": "ADD #n :one SET #f = :fence",
                    "ExpressionAttributeNames": {"#n": "n", "#f": "fence"},
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":fence": run},
                }
            }
        )
        if mode == "gated":
            attempt.write(
                {
                    "ConditionCheck": {
                        "TableName": self.effects_table,
                        "Key": {c.PARTITION_KEY: {"S": self._gate(key)}},
                        "ConditionExpression": "attribute_exists(#id)",
                        "ExpressionAttributeNames": {"#id": c.PARTITION_KEY},
                    }
                },
                refused="quarantine",
            )
        return self._returned(body, attempt, key, operation)

    def _returned(self, body: dict[str, Any], attempt: Attempt, key: str, operation: str) -> Any:
        if body["send"]:
            attempt.send(OUT_TOPIC if body.get("to") == "topic" else OUT_URL, {"k": key})
        value = RETURNS[body["ret"]]()
        self.returned_in_invocation[key] = True
        self.tick += 1
        self.returned[operation] = self.tick  # returned: whatever it did outside is done
        return value

    # --- what the model observes ----------------------------------------------------------------

    def on_quarantine(self, request: dict[str, Any]) -> None:
        message = Message(
            uuid.uuid4().hex,
            request["MessageBody"],
            dict(request.get("MessageAttributes") or {}),
            request.get("MessageGroupId"),
        )
        if message.reason is None:
            raise Violation("dlq_without_reason", f"a DLQ message without once.reason: {request}")
        key = _key_of(message.body)
        if self.source_keyed and message.reason == c.REASON_INVALID_KEY and key in self.ops:
            raise Violation(
                "identity_lost",
                f"{key}: a message of the upstream outbox quarantined as INVALID_KEY "
                f"(its attributes: {sorted(message.attributes)})",
            )
        self.dlq.append(message)
        self.seen[f"dlq {message.reason}"] += 1
        self.quarantined_now.append(message)
        self._reached_dlq(message)

    def _reached_dlq(self, message: Message) -> None:
        key = _key_of(message.body)
        if key is not None:
            self.in_dlq_ever.add(key)

    def _check_run(self, key: str, attempt: Attempt) -> None:
        """Business code runs on a new key, a FAILED record, or a lease that really expired."""
        previous = attempt.record
        now_ms = int(self.clock() * 1000)
        if previous is None or not previous.is_live(int(self.clock())):
            return
        if previous.status == c.STATUS_COMPLETED:
            raise Violation("ran_again", f"{key} ran on a live COMPLETED record")
        if previous.status == c.STATUS_IN_PROGRESS and (
            previous.lease_expires_at is None
            or previous.lease_expires_at >= now_ms
            or attempt.fence is None  # a claim always has one
            or attempt.fence <= previous.fence
        ):
            raise Violation(
                "ran_again",
                f"{key} ran at fence {attempt.fence} while fence {previous.fence}'s lease held",
            )

    def _check_staged(self, key: str, attempt: Attempt) -> None:
        """Under ``effects="staged"`` business code runs with no claim: no fence, no
        takeover, no record read."""
        if (attempt.fence, attempt.takeover, attempt.record) != (None, False, None):
            raise Violation(
                "staged_claimed",
                f"{key} ran with fence {attempt.fence}, takeover {attempt.takeover}",
            )

    def _check_unfenced(self, key: str, operation: str, attempt: Attempt) -> None:
        """Under ``"quarantine"`` business code that returned runs again only for a message
        a person reviewed since; never once its commit landed. A claim that found no live
        record (the key forgotten past its retention, or new) starts the operation afresh."""
        if attempt.record is None:
            self.returned.pop(operation, None)
            self.landed_ops.discard(operation)
            return
        if operation in self.landed_ops:
            raise Violation(
                "unfenced_ran_twice",
                f"{key} ran again at fence {attempt.fence} after its commit landed",
            )
        if self.policy != "quarantine" or operation not in self.returned:
            return
        reviewed = self.reviewed_at.get(attempt.message_id)
        if reviewed is None or reviewed < self.returned[operation]:
            raise Violation(
                "unfenced_ran_twice",
                f"{key} ran again at fence {attempt.fence} (message {attempt.message_id}) "
                "with no review since its business code returned",
            )

    def _took_effect(self, key: str, message: Message) -> None:
        if self.fifo and key not in self.effected:
            group = self.sent_order[message.group or ""]
            for earlier in group[: group.index(key)] if key in group else []:
                if earlier not in self.effected and earlier not in self.in_dlq_ever:
                    raise Violation(
                        "fifo_order", f"{key} took effect before {earlier} of its group"
                    )
        self.effected.add(key)
        self.effected_ops.add(_payload_hash(message.body))

    def _check_acknowledged(
        self, message: Message, outcome: Outcome, quarantined: list[Message]
    ) -> None:
        if outcome in (Outcome.QUARANTINED, Outcome.CONFLICT, Outcome.LEASE_EXPIRED):
            if not any(q.origin == message.origin for q in quarantined):
                raise Violation(
                    "acknowledged_unfinished", f"{outcome} acknowledged with no copy in the DLQ"
                )
            return
        key = _key_of(message.body)
        record = self._record(key) if key is not None else None
        if record is None or record.status != c.STATUS_COMPLETED:
            raise Violation(
                "acknowledged_unfinished",
                f"{key} acknowledged ({outcome}) on a record "
                f"{record.status if record else 'absent'}",
            )
        if record.outbox:
            raise Violation("owed_dropped", f"{key} acknowledged while it owes its outbox")

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def each_completion_landed_its_effect_once(self) -> None:
        if not self.ops:
            return
        records, effects = self._observe()
        for key in sorted(self.ops):
            record, effect = records.get(key), effects.get(key)
            landed = int(effect["n"]["N"]) if effect else 0
            completed = record is not None and record.status == c.STATUS_COMPLETED
            expected = sum(1 for h in self.completions[key].values() if h not in self.plain_ops)
            if landed != expected:
                raise Violation(
                    "effect_not_once",
                    f"{key}: the effect landed {landed} times for {expected} completions",
                )
            if (
                completed
                and effect
                and record
                and record.payload_hash not in self.plain_ops
                and _run_of(effect) != (record.message_id if self.staged else record.fence)
            ):
                raise Violation("effect_not_once", f"{key}: the effect is another run's")

    def _observe(self) -> tuple[dict[str, Record], dict[str, dict[str, Any]]]:
        """Every key's record and effect item; each completed record's owner is noted."""
        records, effects = self._read_all()
        for key, record in records.items():
            if self.staged and record.status != c.STATUS_COMPLETED:
                raise Violation(
                    "staged_claimed", f"{key}: a record {record.status} under effects=staged"
                )
            if self.staged and record.status == c.STATUS_COMPLETED and record.owner:
                self._check_committed_once(key, record)
            if record.status == c.STATUS_COMPLETED and record.owner:
                self.completions[key][record.owner] = record.payload_hash or ""
                if record.payload_hash:
                    self.completed_hashes[key].add(record.payload_hash)
                    self.landed_ops.add(record.payload_hash)
        return records, effects

    def _check_committed_once(self, key: str, record: Record) -> None:
        """A completion by another owner replaced one that still lived: two commits landed.
        (The clock never goes back: a completion whose expiry is still ahead now was live
        throughout since it was seen.)"""
        assert record.owner is not None
        seen = self.last_completion.get(key)
        if seen is not None and seen[0] != record.owner:
            _, expires_at = seen
            if expires_at is None or expires_at >= self.clock():
                raise Violation(
                    "committed_twice", f"{key}: a second commit landed over a live completion"
                )
        self.last_completion[key] = (record.owner, record.expires_at)

    def _read_all(self) -> tuple[dict[str, Record], dict[str, dict[str, Any]]]:
        """Every key's record and effect item, in one consistent BatchGetItem."""
        keys = sorted(self.ops)
        ids = {record_id(self.prefix, key): key for key in keys}
        effects = {self._effect(key): key for key in keys}
        answer = self.client.batch_get_item(
            RequestItems={
                self.table: {
                    "Keys": [{c.ATTR_ID: {"S": i}} for i in ids],
                    "ConsistentRead": True,
                },
                self.effects_table: {
                    "Keys": [{c.PARTITION_KEY: {"S": e}} for e in effects],
                    "ConsistentRead": True,
                },
            }
        )
        assert not answer.get("UnprocessedKeys"), "the engine left keys unread"
        responses = answer["Responses"]
        return (
            {ids[i["id"]["S"]]: Record.from_item(i) for i in responses.get(self.table, [])},
            {effects[i["id"]["S"]]: i for i in responses.get(self.effects_table, [])},
        )

    # --- quiescence -----------------------------------------------------------------------------

    def quiesce(self, *, rounds: int = 12) -> None:
        """Producers stop, every outage and misconfiguration ends, the operator fixes every
        cause and follows the runbook until both queues are empty; then every operation is
        done or dropped."""
        self.dlq_down = self.out_down = False
        self._fix_every_cause()  # a per-call fault still armed answers its call on the way
        for _ in range(rounds):
            self.clock.now += VISIBILITY_S + 1
            while batch := self._receive(self.drain_batch, None):
                self._invoke(0, batch, None)
            if self.queue:
                continue
            if not self.dlq:
                break
            self._redrive(include_lease_expired=True)  # each LEASE_EXPIRED copy reviewed
        else:
            raise Violation(
                "no_convergence",
                f"after {rounds} rounds of the runbook: {len(self.queue)} queued, "
                f"{len(self.dlq)} in the DLQ ({sorted(str(m.reason) for m in self.dlq)})",
            )
        for key, ops in self.ops.items():
            record = self._record(key)
            for op in ops:
                done = (
                    record is not None
                    and record.status == c.STATUS_COMPLETED
                    and record.payload_hash == op.payload_hash
                )
                dropped = op.body() in self.dropped
                if not done and not dropped and op.payload_hash not in self.effected_ops:
                    raise Violation("not_done", f"{op} is neither done nor dropped")
            if record is not None and record.outbox:
                raise Violation("owed_dropped", f"{key} still owes its outbox at quiescence")
            source = identity.escape(record_id(self.prefix, key))
            for completed in sorted(self.completed_hashes[key]):
                stored = next((o for o in ops if o.payload_hash == completed), None)
                if stored is not None and stored.send and (source, "0") not in self.sent_out:
                    raise Violation(
                        "undeliverable_committed",
                        f"{key}: a completion stored its outbox, which was never sent",
                    )
            if record is not None and record.status == c.STATUS_COMPLETED:
                sent_op = next((o for o in ops if o.payload_hash == record.payload_hash), None)
                source = identity.escape(record_id(self.prefix, key))
                if sent_op and sent_op.send and not any(s == source for s, _ in self.sent_out):
                    raise Violation("owed_dropped", f"{key}'s outbox was never sent")

    def teardown(self) -> None:
        try:
            if self.handlers:
                self.quiesce()
        finally:
            for handler in self.handlers:
                handler.bind()

    # --- helpers --------------------------------------------------------------------------------

    def _record(self, key: str) -> Record | None:
        return self.store.get(record_id(self.prefix, key))

    def _effect(self, key: str) -> str:
        return f"{self.prefix}#effect#{key}"

    def _gate(self, key: str) -> str:
        return f"{self.prefix}#gate#{key}"


def _run_of(effect: dict[str, Any]) -> int | str:
    """The run an effect item names: a fence (two-phase), or a message id (staged)."""
    named = effect["fence"]
    return int(named["N"]) if "N" in named else str(named["S"])


def _payload_hash(body: str) -> str:
    """The record's payload hash of a body (``validate`` is the whole body)."""
    return sha256(canonical_json(json.loads(body)))


def _key_of(body: str) -> str | None:
    try:
        return str(json.loads(body)["k"])
    except (ValueError, KeyError, TypeError):
        return None
