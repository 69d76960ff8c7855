"""The two-phase runner: one record's way under ``effects="any"``, as docs/design.md's
tables read it.

Claim the key (a refused claim is answered as the decision table says); under
``on_expired_lease="quarantine"``, a takeover runs nothing and is quarantined for review;
otherwise run business code under the claim, then commit what it staged with the record's
completion (or fail the record when it raised). Every way the commit can end is judged in
``protocol.py`` (``after_commit``); a commit that certainly landed nothing fails the record,
for a retry or a review ("How a commit can end"). The other mode's way is ``once.staged``;
which records run, in what order, and which follow another is ``once.processor``'s.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from once import constants as c
from once.effects import Effects
from once.invocation import Invocation, Process, ended, met_before, returned
from once.models import Attempt, Outcome, PermanentError, RecordResult, record_id
from once.observability import log_safely
from once.payload import Parsed, describe_error
from once.protocol import (
    Step,
    Verdict,
    after_commit,
    must_quarantine_takeover,
    review_fence_for,
    review_reason,
)
from once.sqsrecord import SqsRecord
from once.store import Claimed, CommitCanceled, CommitLanded, Rejected, WriteRefused


@dataclass(frozen=True)
class _UnderClaim:
    """One record's way from its claim to its commit: what was claimed, what business code
    staged, and how it ends if every step goes through (``done``: PROCESSED, the claim's
    fence). Each step of that way (run, complete, commit, fail, quarantine) takes it and
    what it decided, so that it reads as a row of the design's tables; a step that changes
    how it ends passes on a copy (``dataclasses.replace``). Business code is handed its own
    view of it, ``once.models.Attempt``."""

    record: SqsRecord
    parsed: Parsed
    record_id: str  # the record's ``id`` in the table
    claim: Claimed
    effects: Effects  # what business code staged (empty on a quarantined takeover)
    done: RecordResult


class TwoPhaseRunner:
    """Runs records of one invocation under a claim each: claim, run, commit."""

    def __init__(self, process: Process, invocation: Invocation) -> None:
        self._process = process
        self.invocation = invocation

    def run(self, record: SqsRecord, parsed: Parsed) -> RecordResult:
        """Claim the record's key, then run it (or quarantine the takeover, or answer the
        refusal)."""
        at = self.invocation
        message_id = record.message_id
        stored_as = record_id(at.settings.key_prefix, parsed.key)
        try:
            claim = at.store.claim(
                stored_as,
                payload_hash=parsed.payload_hash,
                message_id=message_id,
                lease_ms=at.lease_ms(),
                **at.bridged(record),
            )
        except Exception as error:  # DynamoDB unreachable or throttled past retries
            return RecordResult(
                message_id, Outcome.FAILED, parsed.key, reason=describe_error(error)
            )
        if isinstance(claim, Rejected):
            if met_before(claim, parsed):
                return self.run(record, parsed.under_previous_hash())
            return at.rejected(record, parsed, stored_as, claim)
        held = _UnderClaim(
            record,
            parsed,
            stored_as,
            claim,
            Effects(
                table_name=at.store.table_name,
                record_id=stored_as,
                reserved=1 if claim.companion is None else 2,
            ),
            RecordResult(message_id, Outcome.PROCESSED, parsed.key, claim.fence, claim.takeover),
        )
        if at.settings.quarantine_takeovers and must_quarantine_takeover(
            takeover=claim.takeover, previous=claim.previous, review_fence=_review_fence(record)
        ):
            return self._quarantine_takeover(held)
        return self._execute(held)

    def _quarantine_takeover(self, held: _UnderClaim) -> RecordResult:
        """Mark the record FAILED (fenced) with the fence its review must name, then send
        the message to the DLQ with that fence for review: a takeover as ``LEASE_EXPIRED``,
        a copy of a message already under review with that review's reason."""
        claim = held.claim
        review_fence = review_fence_for(
            fence=claim.fence, takeover=claim.takeover, previous=claim.previous
        )
        reason = review_reason(takeover=claim.takeover, previous=claim.previous)
        outcome = Outcome.LEASE_EXPIRED if reason == c.REASON_LEASE_EXPIRED else Outcome.QUARANTINED
        fail = functools.partial(self.invocation.store.fail, review_fence=review_fence)
        written = self._finalize(fail, held, reason)
        if not written:
            return ended(held.done, _unfinished(written))
        detail = (
            "an earlier claim expired mid-flight; business code was not run"
            if reason == c.REASON_LEASE_EXPIRED
            else "a copy of a message under review; business code was not run"
        )
        ending = dataclasses.replace(
            held.done, outcome=outcome, reason=reason, review_fence=review_fence
        )
        return self.invocation.quarantined(held.record, ending, detail)

    def _execute(self, held: _UnderClaim) -> RecordResult:
        """Run business code under a claim, then finalize with the fence (committing what it
        staged)."""
        claim = held.claim
        handed = Attempt(
            key=held.parsed.key,
            fence=claim.fence,
            message_id=held.record.message_id,
            takeover=claim.takeover,
            record=claim.previous,
            effects=held.effects,
        )
        fail = self.invocation.store.fail
        try:
            value = returned(self._process(held.parsed.body, handed))
        except PermanentError as error:
            if self._finalize(fail, held, describe_error(error)) is False:
                return ended(held.done, Outcome.LEASE_LOST)
            ending = ended(held.done, Outcome.QUARANTINED, c.REASON_PERMANENT_ERROR)
            return self.invocation.quarantined(held.record, ending, describe_error(error))
        except Exception as error:
            written = self._finalize(fail, held, describe_error(error))
            return ended(held.done, _unfinished(written), describe_error(error))
        return self._complete(held, value)

    def _complete(self, held: _UnderClaim, value: Any) -> RecordResult:
        """Business code returned: the record completes, whatever the value, with what it
        staged (``_commit``). Nothing here raises: only the completing write itself failing
        (DynamoDB refusing it past the SDK's retries) leaves the record IN_PROGRESS, as a
        crash before the finalize would."""
        result, done = self.invocation.encoded(value, held.done)
        held = dataclasses.replace(held, done=done)
        companion = self.invocation.with_response(held.claim.companion, value)
        if companion is not None:  # the Powertools record gets the response as Powertools would
            held = dataclasses.replace(
                held, claim=dataclasses.replace(held.claim, companion=companion)
            )
        return self._commit(held, result)

    def _commit(self, held: _UnderClaim, result: str) -> RecordResult:
        """Complete the record with the staged writes (one transaction) and its outbox, then
        send what it owes. Every way the commit can end is judged in ``protocol.py``
        (``after_commit``): done; a lost lease; nothing landed, certainly (a staged write's
        condition, a cause DynamoDB calls lasting, or a passing one past the store's tries),
        which fails the record for a retry under ``"run"`` and for a review under
        ``"quarantine"``; or unknown, which leaves the record to its lease."""
        at = self.invocation
        effects, done = held.effects, held.done
        complete = (
            functools.partial(at.store.complete, effects=effects) if effects else at.store.complete
        )
        refused, reason, error = "retry", "", ""
        try:
            written = self._finalize(complete, held, result, reraise=_NOTHING_LANDED)
            verdict = {True: Verdict.MINE, False: Verdict.LEASE_LOST, None: Verdict.UNKNOWN}[
                written
            ]
        except WriteRefused as refusal:
            verdict, refused = Verdict.REFUSED, refusal.refused
            reason, error = c.REASON_WRITE_REFUSED, f"{c.REASON_WRITE_REFUSED}: {refusal}"
        except CommitCanceled as canceled:
            verdict = Verdict.CANCELED
            reason, error = c.REASON_COMMIT_FAILED, f"{c.REASON_COMMIT_FAILED}: {canceled}"
        step = after_commit(verdict, refused=refused, review=at.settings.quarantine_takeovers)
        if step is Step.WAIT:
            return ended(done, Outcome.FAILED)
        if step is Step.LOST:
            return ended(done, Outcome.LEASE_LOST)
        if step is not Step.DONE:
            failed = self._not_committed(held, step, reason, error)
            if failed is not None:
                return failed
        if not effects.messages:
            return done
        return at.send_owed(
            held.record_id,
            held.claim.fence,
            effects.messages,
            done,
            settle=held.claim.companion,
        )

    def _not_committed(
        self, held: _UnderClaim, step: Step, reason: str, error: str
    ) -> RecordResult | None:
        """The commit certainly landed nothing: fail the record (for review under
        ``"quarantine"``), then quarantine the message where the step says so. The fail is
        fenced, and it is also the check of the commit's own end: a record it finds
        COMPLETED under this claim had its commit land after all (``CommitLanded``), and
        then the answer is None: the record is done, with what it staged."""
        review_fence = held.claim.fence if step is Step.REVIEW else None
        fail = functools.partial(self.invocation.store.fail, review_fence=review_fence)
        try:
            failed = self._finalize(fail, held, error, reraise=(CommitLanded,))
        except CommitLanded:
            return None
        if not failed or step is Step.RETRY:
            # WRITE_REFUSED is its own metric; a canceled commit says AWS's codes.
            said = reason if reason == c.REASON_WRITE_REFUSED else error
            return ended(held.done, _unfinished(failed), said)
        claim = held.claim
        ending = RecordResult(
            held.record.message_id,
            Outcome.QUARANTINED,
            held.parsed.key,
            claim.fence,
            claim.takeover,
            reason,
            review_fence=review_fence,
        )
        return self.invocation.quarantined(held.record, ending, error)

    def _finalize(
        self,
        write: Callable[[str, Claimed, str], bool],
        held: _UnderClaim,
        value: str,
        *,
        reraise: tuple[type[Exception], ...] = (),
    ) -> bool | None:
        """Complete or fail. True: written. False: lease lost. None: DynamoDB error, the
        record stays IN_PROGRESS until its lease ends and the retry takes over. The errors in
        ``reraise`` are the caller's to handle."""
        try:
            return write(held.record_id, held.claim, value)
        except reraise:
            raise
        except Exception as error:
            log_safely(
                self.invocation.logger,
                "warning",
                "finalize failed",
                record_id=held.record_id,
                fence=held.claim.fence,
                error=describe_error(error),
            )
            return None


#: A commit that applied nothing, with the record still the claim's.
_NOTHING_LANDED = (WriteRefused, CommitCanceled)


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


def _unfinished(written: bool | None) -> Outcome:
    """A record that did not end COMPLETED: False from a finalize means a newer claim owns
    the key; None means the write itself failed and the lease will run out."""
    return Outcome.LEASE_LOST if written is False else Outcome.FAILED
