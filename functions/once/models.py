"""The protocol's vocabulary: the stored record, the outcome of a record, what business
code is handed (`Attempt`) or may raise (`PermanentError`), and what a batch came to
(`RecordResult`, `BatchResult`).

Kept apart from the DynamoDB code so that the decision table (``protocol.py``), the store
and the processor all speak about the same small, immutable types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from once import constants as c
from once.effects import Effects, OutboxMessage, Refused


class PermanentError(Exception):
    """Raised by business code when retrying cannot help (bad amount, unknown account...).

    The record is marked FAILED and the message is quarantined to the DLQ at once instead
    of being redelivered until ``maxReceiveCount``. Its message is stored (write it for
    operators, free of payload values).
    """


class TransientError(Exception):
    """Raised by business code for a failure a retry may mend (the carrier is down), with a
    message an operator may read: SQS retries it as any other error, and its message, which
    business code writes for operators and keeps free of payload values, is stored in the
    record's ``error`` and the DLQ's ``once.error`` (any other error's message is not:
    ``payload.describe_error``)."""


class Outcome(StrEnum):
    """What happened to one SQS record. Each outcome is also an EMF metric."""

    PROCESSED = "processed"  # business logic ran and the record is COMPLETED
    DUPLICATE = "duplicate"  # already COMPLETED with the same payload: not run again
    BUSY = "busy"  # another live claim holds the key: retried later
    CONFLICT = "conflict"  # same key, different payload: never run, its copy in the DLQ
    FAILED = "failed"  # transient failure: record FAILED, message retried
    QUARANTINED = "quarantined"  # permanent failure, sent to the DLQ and acknowledged
    LEASE_LOST = "lease_lost"  # a newer claim owns the key; nothing was overwritten
    LEASE_EXPIRED = "lease_expired"  # a takeover under on_expired_lease="quarantine": in the DLQ
    DEADLINE = "deadline"  # not claimed: too little time left in the invocation
    SKIPPED = "skipped"  # FIFO: an earlier record of the same group failed
    OWED = "owed"  # COMPLETED, but its outbox is not all sent: retried to send it
    OWED_SENT = "owed_sent"  # already COMPLETED with messages owed: sent, business code not run

    @property
    def acknowledged(self) -> bool:
        """True when SQS may delete the message: it is done or it is in the DLQ. (A CONFLICT
        or LEASE_EXPIRED whose quarantine failed is FAILED, so both are always in the DLQ.)"""
        return self in (
            Outcome.PROCESSED,
            Outcome.DUPLICATE,
            Outcome.QUARANTINED,
            Outcome.CONFLICT,
            Outcome.LEASE_EXPIRED,
            Outcome.OWED_SENT,
        )

    @property
    def log_level(self) -> str:
        """The level of the record's log line: ``info`` for a healthy flow (done, or a copy
        waiting for the live claim), ``warning`` for what an operator may have to act on or
        explain (not done and coming back, refused, in the DLQ, still owing messages). With
        ``POWERTOOLS_LOG_LEVEL=WARNING`` the happy path writes no line, and every such
        record still does."""
        return "info" if self in _HEALTHY else "warning"


#: The outcomes of a healthy flow: their record's line is INFO (``Outcome.log_level``).
_HEALTHY = frozenset({Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.OWED_SENT, Outcome.BUSY})

#: EMF metric name for each outcome.
METRIC_NAMES: dict[Outcome, str] = {
    Outcome.PROCESSED: c.METRIC_PROCESSED,
    Outcome.DUPLICATE: c.METRIC_DUPLICATE,
    Outcome.BUSY: c.METRIC_BUSY,
    Outcome.CONFLICT: c.METRIC_CONFLICT,
    Outcome.FAILED: c.METRIC_FAILED,
    Outcome.QUARANTINED: c.METRIC_QUARANTINED,
    Outcome.LEASE_LOST: c.METRIC_LEASE_LOST,
    Outcome.LEASE_EXPIRED: c.METRIC_LEASE_EXPIRED,
    Outcome.DEADLINE: c.METRIC_DEADLINE,
    Outcome.SKIPPED: c.METRIC_FAILED,
    Outcome.OWED: c.METRIC_OWED,
    Outcome.OWED_SENT: c.METRIC_OWED_SENT,
}


def record_id(prefix: str, key: str) -> str:
    """A record's partition key: ``<prefix>#<business key>``. The prefix (the service's
    name) keeps the services that share a table apart."""
    return f"{prefix}#{key}"


@dataclass(frozen=True)
class Record:
    """One idempotency record, as DynamoDB returned it."""

    id: str
    status: str
    fence: int
    owner: str | None = None
    lease_expires_at: int | None = None
    expires_at: int | None = None
    payload_hash: str | None = None
    result: str | None = None
    error: str | None = None
    message_id: str | None = None
    updated_at: int | None = None
    #: FAILED by a quarantined takeover: the fence its DLQ messages carry as ``once.fence``.
    review_fence: int | None = None
    #: COMPLETED with messages not yet all sent: what ``attempt.send`` staged, in order.
    outbox: tuple[OutboxMessage, ...] = ()

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Record:
        """Build a record from a low-level DynamoDB item (``{"attr": {"S": "..."}}``)."""

        def text(name: str) -> str | None:
            value = item.get(name)
            return value["S"] if value else None

        def number(name: str) -> int | None:
            value = item.get(name)
            return int(value["N"]) if value else None

        return cls(
            id=item[c.ATTR_ID]["S"],
            status=text(c.ATTR_STATUS) or "",
            fence=number(c.ATTR_FENCE) or 0,
            owner=text(c.ATTR_OWNER),
            lease_expires_at=number(c.ATTR_LEASE_EXPIRES_AT),
            expires_at=number(c.ATTR_EXPIRES_AT),
            payload_hash=text(c.ATTR_PAYLOAD_HASH),
            result=text(c.ATTR_RESULT),
            error=text(c.ATTR_ERROR),
            message_id=text(c.ATTR_MESSAGE_ID),
            updated_at=number(c.ATTR_UPDATED_AT),
            review_fence=number(c.ATTR_REVIEW_FENCE),
            outbox=tuple(
                OutboxMessage.from_json(entry["S"])
                for entry in (item.get(c.ATTR_OUTBOX) or {}).get("L", ())
            ),
        )

    def is_live(self, now_s: int) -> bool:
        """A record past its TTL is treated as absent, whether or not TTL deleted it yet."""
        return self.expires_at is None or self.expires_at >= now_s


@dataclass(frozen=True)
class Attempt:
    """What business code gets with each body: who it is running as, and where it stages
    the effects once commits with the record (``write``, ``send``).

    DynamoDB writes staged with ``write`` and messages staged with ``send`` take effect
    exactly once: they are committed with the record's completion, all or nothing, and a
    crash, a raise or a zombie leaves none of them behind. For any other effect (a payment
    API, an email), carry ``key`` and ``fence`` downstream (an idempotency key, a condition
    on a fenced write): that turns "the record is safe" into "the effect happened once",
    even after a crash between the effect and the finalize.
    """

    key: str
    fence: int | None
    """The claim's fence; None under ``effects="staged"``, where no claim is made."""
    message_id: str
    takeover: bool
    """True when this claim took over one that expired mid-flight: reconcile downstream.
    Conservatively true after a retried claim whose fence is above 1 (a lost response hides
    whether the earlier claim had finished)."""
    record: Record | None
    """The record as it was before this claim (None for a new key, and under
    ``effects="staged"``, where no claim is made): after a takeover or a retry it tells what
    the previous attempt left behind."""
    effects: Effects = field(default_factory=Effects, repr=False, compare=False)
    """What ``write`` and ``send`` staged (the runtime commits it when business code returns)."""

    def write(self, element: Mapping[str, Any], *, refused: Refused = "retry") -> None:
        """Stage one ``TransactWriteItems`` element in the low-level client's shape
        (``{"Put" | "Update" | "Delete" | "ConditionCheck": {"TableName": ..., ...}}``), on
        any table but once's own. Nothing is written now: when business code returns, every
        staged write and the record's completion are committed in one transaction, all or
        nothing; if business code raises, nothing staged is written.

        If DynamoDB refuses an element's ``ConditionExpression`` at commit, nothing lands and
        the record fails as if business code had raised (``WRITE_REFUSED``, its own metric;
        the error names the element's index, operation and table): SQS retries it
        (``refused="retry"``), or, with ``refused="quarantine"``, the message goes to the DLQ
        at once, for a condition no retry can change.

        Raises ``ValueError`` now for what DynamoDB would refuse at commit: more than 99
        staged writes (the record is the 100th element; 98 with the bridge to Powertools'
        records, whose record is one more), about 4 MB in all, two operations on
        one item, a Put item over 400 KB, a write to once's idempotency table."""
        self.effects.write(element, refused=refused)

    def send(
        self,
        destination: str,
        body: Any,
        *,
        group_id: str | None = None,
        attributes: Mapping[str, str | int | float | bytes] | None = None,
        source: str | None = None,
        detail_type: str | None = None,
    ) -> None:
        """Stage one message to an SQS queue (its URL; standard or FIFO), an SNS topic (its
        ARN) or an EventBridge event bus (its ARN). ``body``: a string as it is, anything else
        as JSON. ``group_id``: the message group, required by a FIFO target. ``attributes``:
        up to 8, String, Number or Binary. To a bus, ``body`` is the event's detail (a JSON
        object), ``source`` and ``detail_type`` its ``Source`` and ``DetailType`` (required
        there, refused elsewhere); the event has no group id and no attributes.

        The message is stored on the record in the commit and sent after it, never before;
        the source message is acknowledged only once every message of its outbox is sent. A
        send that fails, or an invocation that dies first, leaves the messages owed: the next
        delivery of the source sends them without running business code. Each message
        carries ``once.source`` (this operation: its record id and a token of its commit,
        ``once.identity``) and ``once.seq`` (its index); to a FIFO
        target its deduplication id is derived from them, and a downstream once consumer
        keys on them with ``make_handler(key=SOURCE_KEY)``. An event carries them in its
        detail, as ``"once": {"source": ..., "seq": ...}`` (docs/design.md).

        Raises ``ValueError`` now for a message that SQS, SNS or EventBridge would refuse
        (their documented rules: no group id for a FIFO target, a group id or a text SQS does
        not take, more than 8 attributes, a Number past 38 digits, over 1 MiB to a queue or
        256 KiB to a topic with its attributes, 1 MB to a bus, an event's detail that is no
        JSON object, a destination in another region) or an
        outbox that would push the record past DynamoDB's 400 KB item size: nothing is
        committed that can never be delivered."""
        self.effects.send(
            destination,
            body,
            group_id=group_id,
            attributes=attributes,
            source=source,
            detail_type=detail_type,
        )


@dataclass(frozen=True)
class RecordResult:
    """How one SQS record of a batch ended: what the log line, the metrics and the retry
    backoff are made from."""

    message_id: str
    outcome: Outcome
    #: The business key, when the body could be read.
    key: str | None = None
    #: The fence of the claim that ran it (or of the record that refused it), when known.
    fence: int | None = None
    #: The claim took over one that expired mid-flight.
    takeover: bool = False
    #: Why it was quarantined or failed: a ``once.reason`` value or an error's class.
    reason: str | None = None
    #: BUSY: how long the holder's lease still ran when the claim was refused.
    holder_remaining_ms: int | None = None
    #: once's own code raised while handling it (a bug): counted as ``InternalError``.
    internal_error: bool = False
    #: LEASE_EXPIRED: the ``once.fence`` its DLQ message carries (the record's review fence).
    review_fence: int | None = None


@dataclass(frozen=True)
class BatchResult:
    """What one invocation did with its batch: one ``RecordResult`` per record, in the
    order of the event's records, and the partial batch response Lambda gets."""

    records: tuple[RecordResult, ...]

    @property
    def response(self) -> dict[str, list[dict[str, str]]]:
        """``{"batchItemFailures": [...]}``: every record that is neither done nor in the DLQ."""
        return {
            "batchItemFailures": [
                {"itemIdentifier": r.message_id} for r in self.records if not r.outcome.acknowledged
            ]
        }
