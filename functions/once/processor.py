"""The batch processor: runs every SQS record of a batch through the fenced protocol and
says which ones SQS must redeliver.

Why our own and not Powertools' ``BatchProcessor``: that processor runs each record
independently and decides success by whether the record handler raised. Our rules need
records to know about each other: records sharing a business key run once and the others
*follow* that outcome (0 extra writes); FIFO groups run in order and stop at the first
failure while other groups go on; a deadline guard leaves records unclaimed; and a
permanent failure is acknowledged only once its copy is in the DLQ. The batch's records are
read as Powertools' SQS event types read them (``once.sqsrecord``).

This module is the scheduler: which records run, on which thread, in what order, and which
follow another (docs/design.md, "Batch rules"). Each record a unit runs goes through the
runner of the handler's mode, ``once.twophase`` (claim, run, commit) or ``once.staged``
(run, one write), with the invocation they share (``once.invocation``).

Rules this module keeps: it never raises for a record-level problem, and it reports only
message ids of its own batch.
"""

from __future__ import annotations

import contextvars
import traceback
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from once import constants as c
from once.invocation import Invocation, Process, Settings
from once.models import Outcome, RecordResult
from once.observability import log_safely, logger
from once.outbox import Outbox
from once.payload import BadMessage, BodyReader, Parsed, describe_error
from once.quarantine import Quarantine
from once.sqsrecord import SqsRecord
from once.staged import StagedRunner
from once.store import Store
from once.twophase import TwoPhaseRunner

#: What runs a record of the handler's mode.
Runner = TwoPhaseRunner | StagedRunner

#: When a leader ended like this, a follower with the same key and payload ends like this.
_FOLLOW = {Outcome.PROCESSED: Outcome.DUPLICATE, Outcome.OWED_SENT: Outcome.DUPLICATE}


@dataclass
class _Item:
    index: int  # its place in the event
    record: SqsRecord
    parsed: Parsed | None
    bad: BadMessage | None


class BatchProcessor:
    """Runs one batch: concurrently across keys (or FIFO groups), in order within one."""

    def __init__(
        self,
        process: Process,
        store: Store,
        quarantine: Quarantine,
        outbox: Outbox,
        reader: BodyReader,
        settings: Settings,
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
        runner = self._runner(context)
        # Each unit runs in a copy of the caller's context (context variables, such as the
        # keys of Powertools' thread_safe_append_keys): business code sees what was set
        # around the handler, on a pool thread too, and what it sets itself stays with its
        # unit, never reaching other keys' records, later invocations or the caller.
        caller = contextvars.copy_context()

        def run_unit(unit: list[_Item]) -> list[RecordResult]:
            return caller.copy().run(self._run_unit, unit, runner, stop_on_failure=fifo)

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

    def _runner(self, context: Any) -> Runner:
        """The runner of the handler's mode, for one invocation (``context``: Lambda's)."""
        invocation = Invocation(
            context, self._settings, self._store, self._quarantine, self._outbox, self._logger
        )
        if self._settings.staged:
            return StagedRunner(self._process, invocation)
        return TwoPhaseRunner(self._process, invocation)

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
        self, unit: list[_Item], runner: Runner, *, stop_on_failure: bool
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
                handled = self._contained(item, runner, leaders)
            if stop_on_failure and not handled.outcome.acknowledged:
                stopped.add(group)
            self._log(handled)
            results.append(handled)
        return results

    def _contained(
        self, item: _Item, runner: Runner, leaders: dict[tuple[str, str], RecordResult]
    ) -> RecordResult:
        """``_run_item``, with an error of once's own code confined to this record: it is
        reported failed (SQS retries it; never acknowledged), counted as ``InternalError``
        and logged with its class and where it was raised, and the batch goes on. The
        protocol's own steps catch what they expect, so reaching here is a bug in once."""
        try:
            return self._run_item(item, runner, leaders)
        except Exception as error:
            log_safely(
                self._logger,
                "error",
                "internal error: this record will be redelivered",
                message_id=item.record.message_id,
                error=describe_error(error),
                stack=traceback.format_tb(error.__traceback__),
            )
            return RecordResult(
                item.record.message_id,
                Outcome.FAILED,
                item.parsed.key if item.parsed else None,
                reason=describe_error(error),
                internal_error=True,
            )

    def _run_item(
        self, item: _Item, runner: Runner, leaders: dict[tuple[str, str], RecordResult]
    ) -> RecordResult:
        invocation = runner.invocation
        if item.parsed is None:
            assert item.bad is not None
            unread = RecordResult(
                item.record.message_id, Outcome.QUARANTINED, reason=item.bad.reason
            )
            return invocation.quarantined(item.record, unread, str(item.bad))
        parsed = item.parsed
        leader = leaders.get((parsed.key, parsed.payload_hash))
        if leader is not None:
            return _follow(item.record, parsed, leader, invocation)
        if invocation.too_late():
            handled = RecordResult(item.record.message_id, Outcome.DEADLINE, parsed.key)
        else:
            handled = runner.run(item.record, parsed)
        leaders[(parsed.key, parsed.payload_hash)] = handled
        return handled

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


def _follow(
    record: SqsRecord, parsed: Parsed, leader: RecordResult, invocation: Invocation
) -> RecordResult:
    """Same key, same payload, same batch: no write, the leader's outcome decides."""
    if leader.outcome in (Outcome.QUARANTINED, Outcome.CONFLICT, Outcome.LEASE_EXPIRED):
        ending = RecordResult(
            record.message_id,
            leader.outcome,
            parsed.key,
            reason=leader.reason or c.REASON_PERMANENT_ERROR,
            review_fence=leader.review_fence,
        )
        return invocation.quarantined(record, ending, "follows " + leader.message_id)
    outcome = _FOLLOW.get(leader.outcome, leader.outcome)
    return RecordResult(
        record.message_id,
        outcome,
        parsed.key,
        leader.fence,
        reason=leader.reason,
        holder_remaining_ms=leader.holder_remaining_ms,
    )


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
