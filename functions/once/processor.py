"""The batch processor: runs every SQS record of a batch through the fenced protocol and
says which ones SQS must redeliver.

Why our own and not Powertools' ``BatchProcessor``: that processor runs each record
independently and decides success by whether the record handler raised. Our rules need
records to know about each other: records sharing a business key run once and the others
*follow* that outcome (0 extra writes); FIFO groups run in order and stop at the first
failure while other groups go on; a deadline guard leaves records unclaimed; and a
permanent failure is acknowledged only once its copy is in the DLQ. The batch's records are
read as Powertools' SQS event types read them (``once.sqsrecord``).

Rules this module keeps: it never raises for a record-level problem, and it reports only
message ids of its own batch.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from once import constants as c
from once.awserrors import describe
from once.effects import Effects, OutboxMessage
from once.models import Attempt, Outcome, PermanentError, RecordResult, record_id
from once.observability import log_safely
from once.outbox import Outbox
from once.payload import (
    BadMessage,
    BodyReader,
    Parsed,
    StoredResult,
    describe_error,
    encode_result,
    stand_in,
    type_name,
)
from once.protocol import (
    StagedEnd,
    Step,
    Verdict,
    after_commit,
    hashed_before,
    must_quarantine_takeover,
    review_fence_for,
    review_reason,
    staged_end_reads_record,
)
from once.quarantine import Quarantine
from once.sqsrecord import SqsRecord
from once.store import (
    Claimed,
    CommitCanceled,
    CommitLanded,
    Committed,
    RecordStore,
    Rejected,
    WriteRefused,
)

#: Business code: ``process(body, attempt) -> JSON-serializable result``.
Process = Callable[[Any, Attempt], Any]

#: When a leader ended like this, a follower with the same key and payload ends like this.
_FOLLOW = {Outcome.PROCESSED: Outcome.DUPLICATE, Outcome.OWED_SENT: Outcome.DUPLICATE}


@dataclass(frozen=True)
class Settings:
    key_prefix: str
    lease_margin_ms: int
    lock_timeout_ms: int
    min_remaining_ms: int
    max_workers: int
    #: on_expired_lease="quarantine": a takeover sends its message to the DLQ, runs nothing.
    quarantine_takeovers: bool = False
    #: effects="staged": business code first, then one write (``_run_staged``), no claim.
    staged: bool = False


@dataclass
class _Item:
    index: int  # its place in the event
    record: SqsRecord
    parsed: Parsed | None
    bad: BadMessage | None


@dataclass(frozen=True)
class _Attempt:
    """One record's way from its claim to its commit: what was claimed, what business code
    staged, and how it ends if every step goes through (``done``: PROCESSED, the claim's
    fence). Each step of that way (run, complete, commit, fail, quarantine) takes the
    attempt and what it decided, so that it reads as a row of the design's tables; a step
    that changes how it ends passes on a copy (``dataclasses.replace``). Business code is
    handed its own view of it, ``once.models.Attempt``."""

    record: SqsRecord
    parsed: Parsed
    record_id: str  # the record's ``id`` in the table
    claim: Claimed
    context: Any  # the Lambda context: the deadline guard's clock
    effects: Effects  # what business code staged (empty on a quarantined takeover)
    done: RecordResult


class BatchProcessor:
    """Runs one batch: concurrently across keys (or FIFO groups), in order within one."""

    def __init__(
        self,
        process: Process,
        store: RecordStore,
        quarantine: Quarantine,
        outbox: Outbox,
        reader: BodyReader,
        settings: Settings,
        logger: logging.Logger | Any,
    ) -> None:
        self._process = process
        self._store = store
        self._quarantine = quarantine
        self._outbox = outbox
        self._reader = reader
        self._settings = settings
        self._logger = logger
        self._pool: ThreadPoolExecutor | None = None

    def run(self, records: Iterable[SqsRecord], context: Any) -> list[RecordResult]:
        """Every record's result, in the order of ``records``."""
        items = [self._read(index, record) for index, record in enumerate(records)]
        # A FIFO queue's name ends in .fifo; standard (fair) queues may carry group ids too.
        fifo = any(item.record.event_source_arn.endswith(".fifo") for item in items)
        units = _fifo_groups(items) if fifo else _key_groups(items)
        # Each unit runs in a copy of the caller's context (context variables, such as the
        # keys of Powertools' thread_safe_append_keys): business code sees what was set
        # around the handler, on a pool thread too, and what it sets itself stays with its
        # unit, never reaching other keys' records, later invocations or the caller.
        caller = contextvars.copy_context()

        def run_unit(unit: list[_Item]) -> list[RecordResult]:
            return caller.copy().run(self._run_unit, unit, context, stop_on_failure=fifo)

        runs = (
            [run_unit(units[0])] if len(units) == 1 else list(self._executor().map(run_unit, units))
        )
        ordered = sorted(
            (
                (item.index, result)
                for unit, run in zip(units, runs, strict=True)
                for item, result in zip(unit, run, strict=True)
            ),
            key=lambda placed: placed[0],
        )
        return [result for _, result in ordered]

    def _executor(self) -> ThreadPoolExecutor:
        """One pool per process, reused across invocations (threads start once)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self._settings.max_workers, thread_name_prefix="once"
            )
        return self._pool

    def close(self) -> None:
        """Let the pool's threads end once idle; work not yet started is cancelled."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _read(self, index: int, record: SqsRecord) -> _Item:
        try:
            attributes = record.raw_event.get("messageAttributes")
            return _Item(index, record, self._reader.read(record.body, attributes), None)
        except BadMessage as bad:
            return _Item(index, record, None, bad)

    def _run_unit(
        self, unit: list[_Item], context: Any, *, stop_on_failure: bool
    ) -> list[RecordResult]:
        """Records that must run one after the other: one key, or the FIFO groups that
        share a key. With ``stop_on_failure``, a record not done stops the rest of its group."""
        leaders: dict[tuple[str, str], RecordResult] = {}
        stopped: set[str] = set()
        results: list[RecordResult] = []
        for item in unit:
            group = _group(item)
            if group in stopped:
                handled = RecordResult(
                    item.record.message_id,
                    Outcome.SKIPPED,
                    item.parsed.key if item.parsed else None,
                )
            else:
                handled = self._contained(item, context, leaders)
            if stop_on_failure and not handled.outcome.acknowledged:
                stopped.add(group)
            self._log(handled)
            results.append(handled)
        return results

    def _contained(
        self, item: _Item, context: Any, leaders: dict[tuple[str, str], RecordResult]
    ) -> RecordResult:
        """``_run_item``, with an error of once's own code confined to this record: it is
        reported failed (SQS retries it; never acknowledged), counted as ``InternalError``
        and logged with its class and where it was raised, and the batch goes on. The
        protocol's own steps catch what they expect, so reaching here is a bug in once."""
        try:
            return self._run_item(item, context, leaders)
        except Exception as error:
            log_safely(
                self._logger,
                "error",
                "internal error: this record will be redelivered",
                message_id=item.record.message_id,
                error=_class(error),
                stack=traceback.format_tb(error.__traceback__),
            )
            return RecordResult(
                item.record.message_id,
                Outcome.FAILED,
                item.parsed.key if item.parsed else None,
                reason=_class(error),
                internal_error=True,
            )

    def _run_item(
        self, item: _Item, context: Any, leaders: dict[tuple[str, str], RecordResult]
    ) -> RecordResult:
        message_id = item.record.message_id
        if item.parsed is None:
            assert item.bad is not None
            return self._quarantined(item.record, None, item.bad.reason, str(item.bad), context)
        parsed = item.parsed
        leader = leaders.get((parsed.key, parsed.payload_hash))
        if leader is not None:
            return self._follow(item, leader, context)
        if self._too_late(context):
            handled = RecordResult(message_id, Outcome.DEADLINE, parsed.key)
        elif self._settings.staged:
            handled = self._run_staged(item.record, parsed, context)
        else:
            handled = self._claim_and_run(item.record, parsed, context)
        leaders[(parsed.key, parsed.payload_hash)] = handled
        return handled

    def _follow(self, item: _Item, leader: RecordResult, context: Any) -> RecordResult:
        """Same key, same payload, same batch: no write, the leader's outcome decides."""
        assert item.parsed is not None
        if leader.outcome in (Outcome.QUARANTINED, Outcome.CONFLICT, Outcome.LEASE_EXPIRED):
            return self._quarantined(
                item.record,
                item.parsed.key,
                leader.reason or c.REASON_PERMANENT_ERROR,
                "follows " + leader.message_id,
                context,
                outcome=leader.outcome,
                review_fence=leader.review_fence,
            )
        outcome = _FOLLOW.get(leader.outcome, leader.outcome)
        return RecordResult(
            item.record.message_id,
            outcome,
            item.parsed.key,
            leader.fence,
            reason=leader.reason,
            holder_remaining_ms=leader.holder_remaining_ms,
        )

    def _claim_and_run(self, record: SqsRecord, parsed: Parsed, context: Any) -> RecordResult:
        message_id = record.message_id
        stored_as = record_id(self._settings.key_prefix, parsed.key)
        try:
            claim = self._store.claim(
                stored_as,
                payload_hash=parsed.payload_hash,
                message_id=message_id,
                lease_ms=self._lease_ms(context),
            )
        except Exception as error:  # DynamoDB unreachable or throttled past retries
            return RecordResult(message_id, Outcome.FAILED, parsed.key, reason=_class(error))
        if isinstance(claim, Rejected):
            if _met_before(claim, parsed):
                return self._claim_and_run(record, parsed.under_previous_hash(), context)
            return self._rejected(record, parsed, stored_as, claim, context)
        attempt = _Attempt(
            record,
            parsed,
            stored_as,
            claim,
            context,
            Effects(table_name=self._store.table_name, record_id=stored_as),
            RecordResult(message_id, Outcome.PROCESSED, parsed.key, claim.fence, claim.takeover),
        )
        if self._settings.quarantine_takeovers and must_quarantine_takeover(
            takeover=claim.takeover, previous=claim.previous, review_fence=_review_fence(record)
        ):
            return self._quarantine_takeover(attempt)
        return self._execute(attempt)

    def _rejected(
        self,
        record: SqsRecord,
        parsed: Parsed,
        stored_as: str,
        rejected: Rejected,
        context: Any,
    ) -> RecordResult:
        """A copy the record refused (a claim's, or a staged commit's, condition): a
        DUPLICATE acknowledged (once the outbox it owes is sent), a CONFLICT quarantined, a
        BUSY one back after the holder's lease."""
        message_id, old = record.message_id, rejected.record
        if rejected.outcome is Outcome.DUPLICATE and old.outbox:
            owed = RecordResult(message_id, Outcome.OWED_SENT, parsed.key, old.fence)
            return self._send_owed(stored_as, old.fence, old.outbox, owed, context)
        if rejected.outcome is Outcome.CONFLICT:
            return self._quarantined(
                record,
                parsed.key,
                c.REASON_CONFLICT,
                "payload differs from the stored record",
                context,
                outcome=Outcome.CONFLICT,
                fence=old.fence,
            )
        return RecordResult(
            message_id,
            rejected.outcome,
            parsed.key,
            old.fence,
            holder_remaining_ms=rejected.holder_remaining_ms,
        )

    def _run_staged(self, record: SqsRecord, parsed: Parsed, context: Any) -> RecordResult:
        """``effects="staged"``: business code runs first, with no claim (``attempt.fence``
        is None), staging every effect it has; then one write completes the record under
        the claim's condition, with what it staged (``RecordStore.commit_staged``). The
        record refusing that write refuses the copy as it would refuse a claim
        (``_rejected``). Nothing that ends without the commit wrote anything: a raise, a
        refused staged write or a canceled commit leaves no record to undo, and every copy
        that ends so is first judged by the record (``_refused_by_record``): a duplicate is
        acknowledged (once what its record owes is sent), never retried or quarantined.
        Only a commit whose ending is unknown is not read: it may have landed, and its
        redelivery's commit finds out."""
        message_id = record.message_id
        stored_as = record_id(self._settings.key_prefix, parsed.key)
        effects = Effects(table_name=self._store.table_name, record_id=stored_as)
        handed = Attempt(
            key=parsed.key,
            fence=None,
            message_id=message_id,
            takeover=False,
            record=None,
            effects=effects,
        )
        failed = RecordResult(message_id, Outcome.FAILED, parsed.key)
        try:
            value = self._process(parsed.body, handed)
        except PermanentError as error:
            refused = self._refused_by_record(
                record, parsed, stored_as, context, StagedEnd.PERMANENT
            )
            if refused is not None:
                return refused
            return self._quarantined(
                record, parsed.key, c.REASON_PERMANENT_ERROR, describe_error(error), context
            )
        except Exception as error:
            refused = self._refused_by_record(record, parsed, stored_as, context, StagedEnd.RAISED)
            if refused is not None:
                return refused
            return _replace(failed, Outcome.FAILED, describe_error(error))
        done = RecordResult(message_id, Outcome.PROCESSED, parsed.key)
        result, done = self._encoded(value, done)

        def commit(parsed: Parsed) -> Committed | Rejected:
            return self._store.commit_staged(
                stored_as,
                payload_hash=parsed.payload_hash,
                message_id=message_id,
                result=result,
                effects=effects if effects else None,
            )

        try:
            committed = commit(parsed)
            if isinstance(committed, Rejected) and _met_before(committed, parsed):
                parsed = parsed.under_previous_hash()
                committed = commit(parsed)
        except WriteRefused as refusal:
            refused = self._refused_by_record(record, parsed, stored_as, context, StagedEnd.REFUSED)
            if refused is not None:
                return refused
            said = f"{c.REASON_WRITE_REFUSED}: {refusal}"
            if refusal.refused == "quarantine":
                return self._quarantined(record, parsed.key, c.REASON_WRITE_REFUSED, said, context)
            return _replace(failed, Outcome.FAILED, c.REASON_WRITE_REFUSED)
        except CommitCanceled as canceled:
            refused = self._refused_by_record(
                record, parsed, stored_as, context, StagedEnd.CANCELED
            )
            if refused is not None:
                return refused
            return _replace(failed, Outcome.FAILED, f"{c.REASON_COMMIT_FAILED}: {canceled}")
        except Exception as error:  # may have landed: the redelivery's commit finds out
            log_safely(
                self._logger,
                "warning",
                "staged commit failed: the message comes back and commits, or is a duplicate",
                record_id=stored_as,
                error=_class(error),
            )
            return _replace(failed, Outcome.FAILED, _class(error))
        if isinstance(committed, Rejected):
            return self._rejected(record, parsed, stored_as, committed, context)
        done = dataclasses.replace(done, fence=committed.fence)
        if not effects.messages:
            return done
        return self._send_owed(
            stored_as, committed.fence, effects.messages, done, context, owner=committed.owner
        )

    def _refused_by_record(
        self, record: SqsRecord, parsed: Parsed, stored_as: str, context: Any, end: StagedEnd
    ) -> RecordResult | None:
        """A staged copy that ends without its commit (business code raised, a staged
        write was refused, the commit was canceled): the record's refusal of it, where the
        record refuses it (``RecordStore.staged_refusal``: one read, on this path only);
        None where the copy's own reason stands, or the record cannot be read (the copy's
        reason then decides: nothing is lost, a duplicate at worst comes back or is
        quarantined). Which endings read is the protocol's (``staged_end_reads_record``)."""
        if not staged_end_reads_record(end):
            return None
        try:
            rejected = self._store.staged_refusal(
                stored_as, payload_hash=parsed.payload_hash, previous_hash=parsed.previous_hash
            )
        except Exception as error:
            log_safely(
                self._logger,
                "warning",
                "record not read",
                record_id=stored_as,
                error=_class(error),
            )
            return None
        if rejected is None:
            return None
        return self._rejected(record, parsed, stored_as, rejected, context)

    def _quarantine_takeover(self, attempt: _Attempt) -> RecordResult:
        """Mark the record FAILED (fenced) with the fence its review must name, then send
        the message to the DLQ with that fence for review: a takeover as ``LEASE_EXPIRED``,
        a copy of a message already under review with that review's reason."""
        claim = attempt.claim
        review_fence = review_fence_for(
            fence=claim.fence, takeover=claim.takeover, previous=claim.previous
        )
        reason = review_reason(takeover=claim.takeover, previous=claim.previous)
        outcome = Outcome.LEASE_EXPIRED if reason == c.REASON_LEASE_EXPIRED else Outcome.QUARANTINED
        fail = functools.partial(self._store.fail, review_fence=review_fence)
        written = self._finalize(fail, attempt, reason)
        if not written:
            return _replace(attempt.done, _unfinished(written))
        detail = (
            "an earlier claim expired mid-flight; business code was not run"
            if reason == c.REASON_LEASE_EXPIRED
            else "a copy of a message under review; business code was not run"
        )
        return self._quarantined(
            attempt.record,
            attempt.parsed.key,
            reason,
            detail,
            attempt.context,
            outcome=outcome,
            fence=claim.fence,
            takeover=claim.takeover,
            review_fence=review_fence,
        )

    def _execute(self, attempt: _Attempt) -> RecordResult:
        """Run business code under a claim, then finalize with the fence (committing what it
        staged)."""
        claim = attempt.claim
        handed = Attempt(
            key=attempt.parsed.key,
            fence=claim.fence,
            message_id=attempt.record.message_id,
            takeover=claim.takeover,
            record=claim.previous,
            effects=attempt.effects,
        )
        try:
            value = self._process(attempt.parsed.body, handed)
        except PermanentError as error:
            if self._finalize(self._store.fail, attempt, describe_error(error)) is False:
                return _replace(attempt.done, Outcome.LEASE_LOST)
            return self._quarantined(
                attempt.record,
                attempt.parsed.key,
                c.REASON_PERMANENT_ERROR,
                describe_error(error),
                attempt.context,
                fence=claim.fence,
                takeover=claim.takeover,
            )
        except Exception as error:
            written = self._finalize(self._store.fail, attempt, describe_error(error))
            return _replace(attempt.done, _unfinished(written), describe_error(error))
        return self._complete(attempt, value)

    def _complete(self, attempt: _Attempt, value: Any) -> RecordResult:
        """Business code returned: the record completes, whatever the value, with what it
        staged (``_commit``). Nothing here raises: only the completing write itself failing
        (DynamoDB refusing it past the SDK's retries) leaves the record IN_PROGRESS, as a
        crash before the finalize would."""
        result, done = self._encoded(value, attempt.done)
        return self._commit(dataclasses.replace(attempt, done=done), result)

    def _encoded(self, value: Any, done: RecordResult) -> tuple[str, RecordResult]:
        """The result as stored, whatever business code returned: in a safe form when it
        cannot be stored as is (said in a warning), with ``done`` marked an internal error
        if once's own encoder failed."""
        try:
            stored = encode_result(value)
        except Exception as error:  # encode_result is total; a bug in it still completes
            stored = StoredResult(stand_in(value), (type_name(value),), _class(error))
            done = dataclasses.replace(done, internal_error=True)
        if stored.stand_ins:
            log_safely(
                self._logger,
                "warning",
                "result stored in a safe form: what cannot be stored as JSON is stored as "
                '{"unencodable": "<type>"}',
                message_id=done.message_id,
                key=done.key,
                stand_ins=sorted(set(stored.stand_ins)),
                error=stored.error,
            )
        return stored.text, done

    def _commit(self, attempt: _Attempt, result: str) -> RecordResult:
        """Complete the record with the staged writes (one transaction) and its outbox, then
        send what it owes. Every way the commit can end is judged in ``protocol.py``
        (``after_commit``): done; a lost lease; nothing landed, certainly (a staged write's
        condition, a cause DynamoDB calls lasting, or a passing one past the store's tries),
        which fails the record for a retry under ``"run"`` and for a review under
        ``"quarantine"``; or unknown, which leaves the record to its lease."""
        effects, done = attempt.effects, attempt.done
        complete = (
            functools.partial(self._store.complete, effects=effects)
            if effects
            else self._store.complete
        )
        refused, reason, error = "retry", "", ""
        try:
            written = self._finalize(complete, attempt, result, reraise=_NOTHING_LANDED)
            verdict = {True: Verdict.MINE, False: Verdict.LEASE_LOST, None: Verdict.UNKNOWN}[
                written
            ]
        except WriteRefused as refusal:
            verdict, refused = Verdict.REFUSED, refusal.refused
            reason, error = c.REASON_WRITE_REFUSED, f"{c.REASON_WRITE_REFUSED}: {refusal}"
        except CommitCanceled as canceled:
            verdict = Verdict.CANCELED
            reason, error = c.REASON_COMMIT_FAILED, f"{c.REASON_COMMIT_FAILED}: {canceled}"
        step = after_commit(verdict, refused=refused, review=self._settings.quarantine_takeovers)
        if step is Step.WAIT:
            return _replace(done, Outcome.FAILED)
        if step is Step.LOST:
            return _replace(done, Outcome.LEASE_LOST)
        if step is not Step.DONE:
            failed = self._not_committed(attempt, step, reason, error)
            if failed is not None:
                return failed
        if not effects.messages:
            return done
        return self._send_owed(
            attempt.record_id, attempt.claim.fence, effects.messages, done, attempt.context
        )

    def _not_committed(
        self, attempt: _Attempt, step: Step, reason: str, error: str
    ) -> RecordResult | None:
        """The commit certainly landed nothing: fail the record (for review under
        ``"quarantine"``), then quarantine the message where the step says so. The fail is
        fenced, and it is also the check of the commit's own end: a record it finds
        COMPLETED under this claim had its commit land after all (``CommitLanded``), and
        then the answer is None: the record is done, with what it staged."""
        claim = attempt.claim
        review_fence = claim.fence if step is Step.REVIEW else None
        fail = functools.partial(self._store.fail, review_fence=review_fence)
        try:
            failed = self._finalize(fail, attempt, error, reraise=(CommitLanded,))
        except CommitLanded:
            return None
        if not failed or step is Step.RETRY:
            # WRITE_REFUSED is its own metric; a canceled commit says AWS's codes.
            said = reason if reason == c.REASON_WRITE_REFUSED else error
            return _replace(attempt.done, _unfinished(failed), said)
        return self._quarantined(
            attempt.record,
            attempt.parsed.key,
            reason,
            error,
            attempt.context,
            fence=claim.fence,
            takeover=claim.takeover,
            review_fence=review_fence,
        )

    def _send_owed(
        self,
        record_id: str,
        fence: int | None,
        messages: tuple[OutboxMessage, ...] | list[OutboxMessage],
        done: RecordResult,
        context: Any,
        *,
        owner: str | None = None,
    ) -> RecordResult:
        """Send a COMPLETED record's outbox, then clear it: ``done`` (acknowledged) once it
        owes nothing, else OWED (redelivered; the next delivery sends it again, with the same
        identity). With too little time left, nothing is sent: the batch response comes
        first. The clear is tied to the completion by its ``fence``, or by its ``owner``
        for a staged commit (whose transaction does not say the fence)."""
        if self._too_late(context):
            return _replace(done, Outcome.OWED, _OWED_DEADLINE)
        sent = self._outbox.send(record_id, messages)
        if not sent:
            # Why, in AWS's words (the error's class and code, or a Failed entry's code):
            # what tells a missing permission from a deleted queue from a refused message.
            why = _why(sent)
            log_safely(
                self._logger,
                "warning",
                "outbox not sent: it is sent again on the next delivery",
                message_id=done.message_id,
                record_id=record_id,
                fence=fence,
                error=why,
            )
            return _replace(done, Outcome.OWED, f"{_OWED_UNSENT}: {why}")
        try:
            self._store.clear_outbox(record_id, fence, owner=owner)
        except Exception as error:
            log_safely(
                self._logger,
                "warning",
                "outbox sent but not cleared: its messages are sent again",
                message_id=done.message_id,
                record_id=record_id,
                fence=fence,
                error=describe(error),
            )
            return _replace(done, Outcome.OWED, f"{_OWED_UNCLEARED}: {describe(error)}")
        return done

    def _finalize(
        self,
        write: Callable[[str, Claimed, str], bool],
        attempt: _Attempt,
        value: str,
        *,
        reraise: tuple[type[Exception], ...] = (),
    ) -> bool | None:
        """Complete or fail. True: written. False: lease lost. None: DynamoDB error, the
        record stays IN_PROGRESS until its lease ends and the retry takes over. The errors in
        ``reraise`` are the caller's to handle."""
        try:
            return write(attempt.record_id, attempt.claim, value)
        except reraise:
            raise
        except Exception as error:
            log_safely(
                self._logger,
                "warning",
                "finalize failed",
                record_id=attempt.record_id,
                fence=attempt.claim.fence,
                error=_class(error),
            )
            return None

    def _quarantined(
        self,
        record: SqsRecord,
        key: str | None,
        reason: str,
        error: str,
        context: Any,
        *,
        outcome: Outcome = Outcome.QUARANTINED,
        fence: int | None = None,
        takeover: bool = False,
        review_fence: int | None = None,
    ) -> RecordResult:
        """Acknowledge a permanent failure only once its copy is in the DLQ. The outcome
        stays what it was (QUARANTINED, or CONFLICT: its own metric) once the send went
        through; otherwise the record is FAILED and SQS redelivers it. ``review_fence``:
        on a quarantined takeover, the fence a review must name (``once.fence``)."""
        if self._too_late(context):
            # One send per record: with too little time left, the batch response comes
            # first; the message comes back and is quarantined then.
            return RecordResult(record.message_id, Outcome.DEADLINE, key, fence, takeover, reason)
        sent = self._quarantine.send(record.raw_event, reason, error, fence=review_fence, key=key)
        if not sent:
            outcome = Outcome.FAILED
            log_safely(
                self._logger,
                "warning",
                "quarantine not sent: the record is reported failed and comes back",
                message_id=record.message_id,
                key=key,
                reason=reason,
                error=_why(sent),
            )
        return RecordResult(
            record.message_id, outcome, key, fence, takeover, reason, review_fence=review_fence
        )

    def _too_late(self, context: Any) -> bool:
        """Less than ``min_remaining_ms`` left in the invocation: start no call that a
        record could do without (a claim, a quarantine send), so that the batch response
        is returned before Lambda's deadline."""
        return context is not None and (
            context.get_remaining_time_in_millis() < self._settings.min_remaining_ms
        )

    def _lease_ms(self, context: Any) -> int:
        if context is None:
            return self._settings.lock_timeout_ms
        return context.get_remaining_time_in_millis() + self._settings.lease_margin_ms

    def _log(self, handled: RecordResult) -> None:
        log_safely(
            self._logger,
            handled.outcome.log_level,
            f"record {handled.outcome.value}",
            message_id=handled.message_id,
            key=handled.key,
            fence=handled.fence,
            outcome=handled.outcome.value,
            reason=handled.reason,
        )


#: A commit that applied nothing, with the record still the claim's.
_NOTHING_LANDED = (WriteRefused, CommitCanceled)


def _met_before(rejected: Rejected, parsed: Parsed) -> bool:
    """A CONFLICT from a record written under the hash an earlier version gave this body: the
    copy is met again under that hash (``protocol.hashed_before``)."""
    return rejected.outcome is Outcome.CONFLICT and hashed_before(
        rejected.record, parsed.previous_hash
    )


def _review_fence(record: SqsRecord) -> int | None:
    """The fence a person reviewed, on a message redriven from the DLQ after a quarantine
    for review (``once.reason`` one of ``REVIEW_REASONS``, and ``once.fence``); None on any
    other."""
    attributes = record.raw_event.get("messageAttributes") or {}
    reason = (attributes.get(c.QUARANTINE_ATTR_REASON) or {}).get("stringValue")
    fence = (attributes.get(c.QUARANTINE_ATTR_FENCE) or {}).get("stringValue") or ""
    if reason not in c.REVIEW_REASONS or not (fence.isascii() and fence.isdigit()):
        return None
    return int(fence)


#: An OWED record's reason: why its outbox is still owed (the runbook tells them apart).
_OWED_DEADLINE = "outbox not sent: too little time left in the invocation"
_OWED_UNSENT = "outbox not sent"
_OWED_UNCLEARED = "outbox sent, not cleared"


def _why(sent: object) -> str:
    """Why a send failed, as ``Sent`` says it (a send of a test's own double may answer a
    plain False)."""
    return getattr(sent, "error", None) or "not sent"


def _class(error: BaseException) -> str:
    return type(error).__name__


def _unfinished(written: bool | None) -> Outcome:
    """A record that did not end COMPLETED: False from a finalize means a newer claim owns
    the key; None means the write itself failed and the lease will run out."""
    return Outcome.LEASE_LOST if written is False else Outcome.FAILED


def _replace(handled: RecordResult, outcome: Outcome, reason: str | None = None) -> RecordResult:
    return dataclasses.replace(handled, outcome=outcome, reason=reason)


def _key_groups(items: list[_Item]) -> list[list[_Item]]:
    """Standard queue: one unit per business key; each unreadable record on its own."""
    groups: dict[str, list[_Item]] = {}
    units: list[list[_Item]] = []
    for item in items:
        if item.parsed is None:
            units.append([item])
        else:
            groups.setdefault(item.parsed.key, []).append(item)
    return units + list(groups.values())


def _group(item: _Item) -> str:
    return item.record.attributes.message_group_id or ""


def _fifo_groups(items: list[_Item]) -> list[list[_Item]]:
    """FIFO queue: one unit per message group, in the order SQS delivered it; groups that
    share a business key are one unit, so that copies of a key follow their leader instead
    of racing its claim (each group still runs in its own order)."""
    merged: dict[str, str] = {}  # group -> the group it was merged into (union-find)

    def root(group: str) -> str:
        while merged.get(group, group) != group:
            group = merged[group]
        return group

    first_group_of_key: dict[str, str] = {}
    for item in items:
        group = root(_group(item))
        if item.parsed is not None:
            other = root(first_group_of_key.setdefault(item.parsed.key, group))
            if other != group:
                merged[group] = other
    units: dict[str, list[_Item]] = {}
    for item in items:
        units.setdefault(root(_group(item)), []).append(item)
    return list(units.values())
