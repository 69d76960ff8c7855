"""The protocol's vocabulary: the stored record, the outcome of a record, what business
code is handed (`Attempt`) or may raise (`PermanentError`), and what a batch came to
(`RecordResult`, `BatchResult`).

Kept apart from the DynamoDB code so that the decision table (``protocol.py``), the store
and the processor all speak about the same small, immutable types.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from once import constants as c


class PermanentError(Exception):
    """Raised by business code when retrying cannot help (bad amount, unknown account...).

    The record is marked FAILED and the message is quarantined to the DLQ at once instead
    of being redelivered until ``maxReceiveCount``.
    """


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
        )


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

    @classmethod
    def from_item(cls, item: dict[str, dict[str, str]]) -> Record:
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
        )

    def is_live(self, now_s: int) -> bool:
        """A record past its TTL is treated as absent, whether or not TTL deleted it yet."""
        return self.expires_at is None or self.expires_at >= now_s


@dataclass(frozen=True)
class Attempt:
    """What business code gets with each body: who it is running as.

    Carry ``key`` and ``fence`` downstream (an idempotency key for a payment API, a
    condition on a fenced write): that turns "the record is safe" into "the effect happened
    once", even after a crash between the effect and the finalize.
    """

    key: str
    fence: int
    message_id: str
    takeover: bool
    """True when this claim took over one that expired mid-flight: reconcile downstream.
    Conservatively true after a retried claim whose fence is above 1 (a lost response hides
    whether the earlier claim had finished)."""
    record: Record | None
    """The record as it was before this claim (None for a new key): after a takeover or a
    retry it tells what the previous attempt left behind."""


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
