"""The staged runner: one record's way under ``effects="staged"``, as docs/design.md reads it
("One write per message").

Business code runs first, with no claim (``attempt.fence`` is None), staging every effect
it has; then one write completes the record under the claim's condition, with what it
staged (``Store.commit_staged``). The record refusing that write refuses the copy as it
would refuse a claim. Nothing that ends without the commit wrote anything: a raise, a
refused staged write or a canceled commit leaves no record to undo, and every copy that
ends so is first judged by the record: a duplicate is acknowledged (once what its record
owes is sent), never retried or quarantined. Only a commit whose ending is unknown is not
read: it may have landed, and its redelivery's commit finds out. The other mode's way is
``once.twophase``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from once import constants as c
from once.effects import Effects
from once.invocation import Invocation, Process, ended, met_before, returned
from once.models import Attempt, Outcome, PermanentError, RecordResult, record_id
from once.observability import log_safely
from once.payload import Parsed, describe_error
from once.powertools import PowertoolsKeyError
from once.protocol import StagedEnd, staged_end_reads_record
from once.sqsrecord import SqsRecord
from once.store import CommitCanceled, Committed, Rejected, WriteRefused


class StagedRunner:
    """Runs records of one invocation with one write each: run, then the staged commit."""

    def __init__(self, process: Process, invocation: Invocation) -> None:
        self._process = process
        self.invocation = invocation

    def run(self, record: SqsRecord, parsed: Parsed) -> RecordResult:
        """Run business code, then commit what it staged with the record's completion."""
        at = self.invocation
        message_id = record.message_id
        stored_as = record_id(at.settings.key_prefix, parsed.key)
        try:
            bridged = at.bridged(record)
        except PowertoolsKeyError as error:  # the bridge is never off in silence
            return RecordResult(
                message_id, Outcome.FAILED, parsed.key, reason=describe_error(error)
            )
        effects = Effects(
            table_name=at.store.table_name, record_id=stored_as, reserved=1 + len(bridged)
        )
        handed = Attempt(
            key=parsed.key,
            fence=None,
            message_id=message_id,
            takeover=False,
            record=None,
            effects=effects,
        )
        try:
            value = returned(self._process(parsed.body, handed))
        except PermanentError as error:
            refused = self._refused_by_record(record, parsed, stored_as, StagedEnd.PERMANENT)
            if refused is not None:
                return refused
            ending = RecordResult(
                message_id, Outcome.QUARANTINED, parsed.key, reason=c.REASON_PERMANENT_ERROR
            )
            return at.quarantined(record, ending, describe_error(error))
        except Exception as error:
            refused = self._refused_by_record(record, parsed, stored_as, StagedEnd.RAISED)
            if refused is not None:
                return refused
            return RecordResult(
                message_id, Outcome.FAILED, parsed.key, reason=describe_error(error)
            )
        return self._commit(record, parsed, stored_as, effects, value)

    def _commit(
        self, record: SqsRecord, parsed: Parsed, stored_as: str, effects: Effects, value: Any
    ) -> RecordResult:
        """The one write: the record COMPLETED with what business code returned and staged,
        under the claim's condition; then what it owes is sent."""
        at = self.invocation
        message_id = record.message_id
        done = RecordResult(message_id, Outcome.PROCESSED, parsed.key)
        result, done = at.encoded(value, done)
        companion = at.with_response(at.bridged(record).get("companion"), value)
        bridged = {} if companion is None else {"companion": companion}

        def commit(parsed: Parsed) -> Committed | Rejected:
            return at.store.commit_staged(
                stored_as,
                payload_hash=parsed.payload_hash,
                message_id=message_id,
                result=result,
                effects=effects if effects else None,
                **bridged,
            )

        failed = RecordResult(message_id, Outcome.FAILED, parsed.key)
        try:
            committed = commit(parsed)
            if isinstance(committed, Rejected) and met_before(committed, parsed):
                parsed = parsed.under_previous_hash()
                committed = commit(parsed)
        except WriteRefused as refusal:
            refused = self._refused_by_record(record, parsed, stored_as, StagedEnd.REFUSED)
            if refused is not None:
                return refused
            said = f"{c.REASON_WRITE_REFUSED}: {refusal}"
            if refusal.refused == "quarantine":
                ending = ended(failed, Outcome.QUARANTINED, c.REASON_WRITE_REFUSED)
                return at.quarantined(record, ending, said)
            return ended(failed, Outcome.FAILED, c.REASON_WRITE_REFUSED)
        except CommitCanceled as canceled:
            refused = self._refused_by_record(record, parsed, stored_as, StagedEnd.CANCELED)
            if refused is not None:
                return refused
            return ended(failed, Outcome.FAILED, f"{c.REASON_COMMIT_FAILED}: {canceled}")
        except Exception as error:  # may have landed: the redelivery's commit finds out
            log_safely(
                at.logger,
                "warning",
                "staged commit failed: the message comes back and commits, or is a duplicate",
                record_id=stored_as,
                error=describe_error(error),
            )
            return ended(failed, Outcome.FAILED, describe_error(error))
        if isinstance(committed, Rejected):
            return at.rejected(record, parsed, stored_as, committed)
        done = dataclasses.replace(done, fence=committed.fence)
        if not effects.messages:
            return done
        return at.send_owed(
            stored_as,
            committed.fence,
            effects.messages,
            done,
            owner=committed.owner,
            settle=companion,
        )

    def _refused_by_record(
        self, record: SqsRecord, parsed: Parsed, stored_as: str, end: StagedEnd
    ) -> RecordResult | None:
        """A staged copy that ends without its commit (business code raised, a staged
        write was refused, the commit was canceled): the record's refusal of it, where the
        record refuses it (``Store.staged_refusal``: one read, on this path only); None
        where the copy's own reason stands, or the record cannot be read (the copy's reason
        then decides: nothing is lost, a duplicate at worst comes back or is quarantined).
        Which endings read is the protocol's (``staged_end_reads_record``)."""
        if not staged_end_reads_record(end):
            return None
        at = self.invocation
        try:
            rejected = at.store.staged_refusal(
                stored_as,
                payload_hash=parsed.payload_hash,
                previous_hash=parsed.previous_hash,
                **at.bridged(record),
            )
        except Exception as error:
            log_safely(
                at.logger,
                "warning",
                "record not read",
                record_id=stored_as,
                error=describe_error(error),
            )
            return None
        if rejected is None:
            return None
        return at.rejected(record, parsed, stored_as, rejected)
