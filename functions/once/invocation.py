"""One invocation's batch, as every step of a record sees it: the deadline, the store, the
quarantine and the outbox, and the steps both runners take the same way.

A record runs through one of two runners, one per mode of the design (``once.twophase``
for ``effects="any"``, ``once.staged`` for ``effects="staged"``), on the processor's
threads. Every step of either may need what belongs to the invocation: how much time is
left (the deadline guard, the lease), and where a record's ending goes (the record store,
the DLQ, the outbox's destinations). ``BatchProcessor.run`` builds one ``Invocation`` per
batch from the Lambda context, so that no step threads the context along; it also holds
the steps both runners end with: quarantining a message, sending what a COMPLETED record
owes, answering a copy the record refused, and storing what business code returned.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from once import constants as c
from once.effects import OutboxMessage
from once.models import Attempt, Outcome, PermanentError, RecordResult
from once.observability import log_safely
from once.outbox import Outbox
from once.payload import Parsed, StoredResult, describe_error, encode_result, stand_in, type_name
from once.powertools import (
    RESPONSE_MAX_BYTES,
    PowertoolsBridge,
    PowertoolsKeyError,
    PowertoolsRecord,
)
from once.protocol import hashed_before
from once.quarantine import Quarantine
from once.sqsrecord import SqsRecord
from once.store import Rejected, Store

#: Business code: ``process(body, attempt) -> JSON-serializable result``.
Process = Callable[[Any, Attempt], Any]


@dataclass(frozen=True)
class Settings:
    key_prefix: str
    lease_margin_ms: int
    lock_timeout_ms: int
    min_remaining_ms: int
    max_workers: int
    #: on_expired_lease="quarantine": a takeover sends its message to the DLQ, runs nothing.
    quarantine_takeovers: bool = False
    #: effects="staged": business code first, then one write (``once.staged``), no claim.
    staged: bool = False
    #: make_handler(powertools=): the team's Powertools records, honoured and kept
    #: (``once.powertools``) while it migrates.
    powertools: PowertoolsBridge | None = None


@dataclass(frozen=True)
class Invocation:
    """One batch's invocation: its Lambda context (None outside Lambda), the processor's
    settings, and where a record's ending is written."""

    context: Any
    settings: Settings
    store: Store
    quarantine: Quarantine
    outbox: Outbox
    logger: Any

    def too_late(self) -> bool:
        """Less than ``min_remaining_ms`` left in the invocation: start no call that a
        record could do without (a claim, a quarantine send), so that the batch response
        is returned before Lambda's deadline."""
        return self.context is not None and (
            self.context.get_remaining_time_in_millis() < self.settings.min_remaining_ms
        )

    def bridged(self, record: SqsRecord) -> dict[str, PowertoolsRecord]:
        """The store's ``companion`` argument for this record: its Powertools record, while
        the bridge is on (``once.powertools``) and Powertools keeps one for it; else no
        argument at all (a store of a test's own need not take it)."""
        bridge = self.settings.powertools
        companion = None if bridge is None else bridge.record_for(record.raw_event)
        return {} if companion is None else {"companion": companion}

    def lease_ms(self) -> int:
        if self.context is None:
            return self.settings.lock_timeout_ms
        return self.context.get_remaining_time_in_millis() + self.settings.lease_margin_ms

    def quarantined(self, record: SqsRecord, ending: RecordResult, error: str) -> RecordResult:
        """Acknowledge a permanent failure only once its copy is in the DLQ: ``ending``
        (QUARANTINED, or CONFLICT or LEASE_EXPIRED: each its own metric; its ``reason``
        the DLQ's ``once.reason``) once the send went through; otherwise the record is
        FAILED and SQS redelivers it. ``ending.review_fence``: on a quarantine for review,
        the fence a review must name (``once.fence``)."""
        if self.too_late():
            # One send per record: with too little time left, the batch response comes
            # first; the message comes back and is quarantined then.
            return dataclasses.replace(ending, outcome=Outcome.DEADLINE, review_fence=None)
        assert ending.reason is not None
        sent = self.quarantine.send(
            record.raw_event, ending.reason, error, fence=ending.review_fence, key=ending.key
        )
        if sent:
            return ending
        log_safely(
            self.logger,
            "warning",
            "quarantine not sent: the record is reported failed and comes back",
            message_id=record.message_id,
            key=ending.key,
            reason=ending.reason,
            error=_why(sent),
        )
        return dataclasses.replace(ending, outcome=Outcome.FAILED)

    def send_owed(
        self,
        record_id: str,
        fence: int | None,
        messages: Sequence[OutboxMessage],
        done: RecordResult,
        *,
        owner: str | None = None,
        settle: PowertoolsRecord | None = None,
    ) -> RecordResult:
        """Send a COMPLETED record's outbox, then clear it: ``done`` (acknowledged) once it
        owes nothing, else OWED (redelivered; the next delivery sends it again, with the same
        identity). With too little time left, nothing is sent: the batch response comes
        first. The clear is tied to the completion by its ``fence``, or by its ``owner``
        for a staged commit (whose transaction does not say the fence). ``settle``: the
        message's Powertools record, held while the outbox was owed, completed with the
        clear, in one transaction (``Store.clear_outbox``)."""
        if self.too_late():
            return ended(done, Outcome.OWED, _OWED_DEADLINE)
        sent = self.outbox.send(record_id, messages)
        if not sent:
            # Why, in AWS's words (the error's class and code, or a Failed entry's code):
            # what tells a missing permission from a deleted queue from a refused message.
            said = _why(sent)
            log_safely(
                self.logger,
                "warning",
                "outbox not sent: it is sent again on the next delivery",
                message_id=done.message_id,
                record_id=record_id,
                fence=fence,
                error=said,
            )
            return ended(done, Outcome.OWED, f"{_OWED_UNSENT}: {said}")
        bridged = {} if settle is None else {"companion": settle}
        try:
            self.store.clear_outbox(record_id, fence, owner=owner, **bridged)
        except Exception as error:
            log_safely(
                self.logger,
                "warning",
                "outbox sent but not cleared: its messages are sent again",
                message_id=done.message_id,
                record_id=record_id,
                fence=fence,
                error=describe_error(error),
            )
            return ended(done, Outcome.OWED, f"{_OWED_UNCLEARED}: {describe_error(error)}")
        return done

    def _held(self, record: SqsRecord) -> PowertoolsRecord | None:
        """The message's Powertools record, held (its response written) while the outbox
        of the record that refused this copy is owed; None without the bridge (or an id it
        cannot derive: the outbox is sent and cleared all the same)."""
        try:
            return self.bridged(record).get("companion")
        except PowertoolsKeyError:
            return None

    def with_response(self, companion: PowertoolsRecord | None, value: Any) -> Any:
        """``companion`` with the response Powertools would have stored for ``value``
        (``PowertoolsRecord.response``); None stays None."""
        if companion is None:
            return None
        stored = encode_result(value, cap_bytes=RESPONSE_MAX_BYTES)
        return dataclasses.replace(companion, response=stored.text)

    def rejected(
        self, record: SqsRecord, parsed: Parsed, record_id: str, rejected: Rejected
    ) -> RecordResult:
        """A copy the record refused (a claim's, or a staged commit's, condition): a
        DUPLICATE acknowledged (once the outbox it owes is sent), a CONFLICT quarantined, a
        BUSY one back after the holder's lease."""
        message_id, old = record.message_id, rejected.record
        if rejected.outcome is Outcome.DUPLICATE and old.outbox:
            owed = RecordResult(message_id, Outcome.OWED_SENT, parsed.key, old.fence)
            held = self._held(record)
            return self.send_owed(record_id, old.fence, old.outbox, owed, settle=held)
        if rejected.outcome is Outcome.CONFLICT:
            conflict = RecordResult(
                message_id, Outcome.CONFLICT, parsed.key, old.fence, reason=c.REASON_CONFLICT
            )
            return self.quarantined(record, conflict, "payload differs from the stored record")
        return RecordResult(
            message_id,
            rejected.outcome,
            parsed.key,
            old.fence,
            holder_remaining_ms=rejected.holder_remaining_ms,
        )

    def encoded(self, value: Any, done: RecordResult) -> tuple[str, RecordResult]:
        """The result as stored, whatever business code returned: in a safe form when it
        cannot be stored as is (said in a warning), with ``done`` marked an internal error
        if once's own encoder failed."""
        try:
            stored = encode_result(value)
        except Exception as error:  # encode_result is total; a bug in it still completes
            stored = StoredResult(stand_in(value), (type_name(value),), describe_error(error))
            done = dataclasses.replace(done, internal_error=True)
        if stored.stand_ins:
            log_safely(
                self.logger,
                "warning",
                "result stored in a safe form: what cannot be stored as JSON is stored as "
                '{"unencodable": "<type>"}',
                message_id=done.message_id,
                key=done.key,
                stand_ins=sorted(set(stored.stand_ins)),
                error=stored.error,
            )
        return stored.text, done


def returned(value: Any) -> Any:
    """What business code returned, where it ran: raises ``NotRun`` for a value that says it
    did not (a coroutine, an awaitable, a generator or any other iterator: the body of an
    ``async def`` or of a generator function runs only when awaited or iterated, which once
    never does), closing a coroutine or generator so that nothing of it runs later."""
    if inspect.isawaitable(value) or isinstance(value, Iterator | AsyncIterator):
        close = getattr(value, "close", None)
        if callable(close) and (inspect.iscoroutine(value) or inspect.isgenerator(value)):
            close()
        raise NotRun(type_name(value))
    return value


class NotRun(PermanentError):
    """Business code returned a value that stands for work not done (``returned``): a
    programming error no retry mends, quarantined at once with this message."""

    def __init__(self, kind: str) -> None:
        super().__init__(
            f"business code returned a {kind} and did not run: make_handler runs a plain "
            "function (def, not async def, no yield); run asynchronous code inside it "
            "(asyncio.run) and return its result"
        )


def met_before(rejected: Rejected, parsed: Parsed) -> bool:
    """A CONFLICT from a record written under the hash an earlier version gave this body: the
    copy is met again under that hash (``protocol.hashed_before``)."""
    return rejected.outcome is Outcome.CONFLICT and hashed_before(
        rejected.record, parsed.previous_hash
    )


#: An OWED record's reason: why its outbox is still owed (the runbook tells them apart).
_OWED_DEADLINE = "outbox not sent: too little time left in the invocation"
_OWED_UNSENT = "outbox not sent"
_OWED_UNCLEARED = "outbox sent, not cleared"


def _why(sent: object) -> str:
    """Why a send failed, as ``Sent`` says it (a send of a test's own double may answer a
    plain False)."""
    return getattr(sent, "error", None) or "not sent"


def ended(handled: RecordResult, outcome: Outcome, reason: str | None = None) -> RecordResult:
    """``handled``, ending otherwise: ``outcome``, for ``reason``."""
    return dataclasses.replace(handled, outcome=outcome, reason=reason)
