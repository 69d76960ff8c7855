"""Crash points: an invocation killed the way Lambda kills one, at a chosen step of the protocol.

A killed Lambda does nothing more: no further DynamoDB write, no DLQ send, no batch
response. Here the kill is ``InvocationKilled``, a ``BaseException``: the runtime catches
``Exception`` around business code and DynamoDB calls, so the kill goes through it the way a
``SIGKILL`` goes through a process. It is raised from the record store and the quarantine
bound to the handler for one invocation; from then on both refuse every call, from every
thread of that invocation, so records running concurrently die at their next step too (a
write already on the wire when the invocation dies lands, as it would in DynamoDB).

The three points, and the record each one leaves (DynamoDB's state, nothing simulated):

- ``after_claim``: the claim landed, business code never ran. ``IN_PROGRESS`` under the dead
  owner's lease; after the lease a takeover runs the business code for the first time.
- ``after_process``: business code returned (or raised) and its effect is done; the
  invocation died before sending the finalize. ``IN_PROGRESS`` under the dead owner's lease;
  after the lease a takeover runs the business code *again*, with the next fence: only
  what it carries downstream (``attempt.key``, ``attempt.fence``) keeps the effect single.
  It never fires where no business code ran: a takeover quarantined under
  ``on_expired_lease="quarantine"`` writes its FAILED record and sends its message as
  usual (crash that path ``after_claim``, or ``before_finalize``: record FAILED, message
  neither sent to the DLQ nor acknowledged).
- ``before_finalize``: the finalize was on the wire when the invocation died: DynamoDB applied
  it (``COMPLETED`` with the result, or ``FAILED``) but the invocation never learnt it and
  never returned its batch response. Nothing is acknowledged, so SQS redelivers a message
  whose record is already finished: the redelivery is a ``duplicate``, business code not run.

With effects staged (``attempt.write``, ``attempt.send``), the finalize is the commit:
``after_process`` dies before it, so none of the staged writes or messages exist and the
takeover runs on a clean slate; ``before_finalize`` dies once it landed, so the writes are
in and the messages are owed (none sent): the redelivery is ``owed_sent``, business code not
run.

An invocation also dies at its deadline (``TIMEOUT``), whatever its crash point: once the
kit's clock passes the function timeout, the store and the quarantine refuse every call, as
nothing of a Lambda invocation runs after its timeout. Business code that ran past the
deadline has had its effect; its finalize never lands and no batch response is returned.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from once import constants as c
from once.awserrors import Sent
from once.effects import Effects, OutboxMessage
from once.models import Record
from once.outbox import Outbox
from once.powertools import PowertoolsRecord
from once.quarantine import Quarantine
from once.store import Claimed, Committed, RecordStore, Rejected

AFTER_CLAIM = "after_claim"
AFTER_PROCESS = "after_process"
BEFORE_FINALIZE = "before_finalize"
CRASH_POINTS = (AFTER_CLAIM, AFTER_PROCESS, BEFORE_FINALIZE)
#: Not a crash point a test asks for: where an invocation that outlived its function
#: timeout dies, as Lambda kills it at its deadline (``KillSwitch.die_at``).
TIMEOUT = "timeout"


class InvocationKilled(BaseException):
    """The invocation was killed at ``point``; nothing of it runs after this."""

    def __init__(self, point: str) -> None:
        super().__init__(f"invocation killed {point.replace('_', ' ')}")
        self.point = point


def check_crash_point(crash: str | None) -> None:
    if crash is not None and crash not in CRASH_POINTS:
        raise ValueError(
            f"crash={crash!r} is not a crash point: use one of {', '.join(CRASH_POINTS)} "
            "(or None for an invocation that is not killed)"
        )


class KillSwitch:
    """The fate of one invocation: the point where it dies, and whether it has died.

    It also counts the records whose business code is running and the store and quarantine
    calls on the wire, so that once the invocation is dead the caller can wait for those
    threads to reach their next (refused) step instead of returning while business code or
    a write of a dead invocation is still under way.
    """

    def __init__(self, point: str | None) -> None:
        check_crash_point(point)
        self.point = point
        self.killed_at: str | None = None
        self._state = threading.Condition()
        self._running = 0
        self._calls = 0
        self._clock: Callable[[], float] | None = None
        self._deadline_s = 0.0

    def die_at(self, deadline_s: float, clock: Callable[[], float]) -> None:
        """The invocation's deadline: from then on it is dead (``TIMEOUT``), as Lambda kills
        an invocation at its function timeout. A call already on the wire still lands."""
        with self._state:
            self._clock, self._deadline_s = clock, deadline_s

    def past_deadline(self) -> bool:
        """Whether the invocation has outlived its deadline (it is dead from then on)."""
        with self._state:
            return self._timed_out()

    def check(self) -> None:
        """Refuse the call if the invocation is dead."""
        with self._state:
            self._refuse_if_dead()

    @contextmanager
    def call(self) -> Iterator[None]:
        """A store or quarantine call: refused if the invocation is dead, counted while it
        is on the wire (a call already sent when the invocation dies lands)."""
        with self._state:
            self._refuse_if_dead()
            self._calls += 1
        try:
            yield
        finally:
            with self._state:
                self._calls -= 1
                self._state.notify_all()

    def reached(self, point: str) -> None:
        """The invocation is at ``point``: it dies here if that is its crash point."""
        with self._state:
            self._refuse_if_dead()
            if point == self.point:
                self.killed_at = point
                self._state.notify_all()
                raise InvocationKilled(point)

    def business_starts(self) -> None:
        """A claim came back: the record is about to run business code (or die first)."""
        with self._state:
            self._refuse_if_dead()
            if self.point == AFTER_CLAIM:
                self.killed_at = AFTER_CLAIM
                self._state.notify_all()
                raise InvocationKilled(AFTER_CLAIM)
            self._running += 1

    def business_ended(self) -> None:
        with self._state:
            self._running -= 1
            self._state.notify_all()

    def wait_for_the_dead(self, timeout_s: float) -> bool:
        """After a kill: wait until no business code and no store or quarantine call of
        this invocation is under way."""
        with self._state:
            return self._state.wait_for(lambda: self._running == 0 and self._calls == 0, timeout_s)

    def _timed_out(self) -> bool:
        if self.killed_at is None and self._clock is not None and self._clock() > self._deadline_s:
            self.killed_at = TIMEOUT
            self._state.notify_all()
        return self.killed_at == TIMEOUT

    def _refuse_if_dead(self) -> None:
        self._timed_out()
        if self.killed_at is not None:
            raise InvocationKilled(self.killed_at)


class CrashingStore:
    """A store (``once.store.Store``): the real record store on ``client``, whose every call
    first asks the invocation's kill switch."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        retention_s: int,
        clock: Callable[[], float],
        switch: KillSwitch,
    ) -> None:
        self._store = RecordStore(client, table_name, retention_s=retention_s, clock=clock)
        self._switch = switch
        #: The claims whose business code has ended: a commit that landed nothing is
        #: followed by a fail of the same claim, and its end must be counted once.
        self._ended: set[tuple[str, str, int]] = set()
        self._ended_lock = threading.Lock()

    @property
    def table_name(self) -> str:
        return self._store.table_name

    @property
    def _sleep(self) -> Callable[[float], None]:
        """The real store's wait between commit tries: a model sets its own clock's."""
        return self._store._sleep

    @_sleep.setter
    def _sleep(self, sleep: Callable[[float], None]) -> None:
        self._store._sleep = sleep

    def claim(
        self,
        record_id: str,
        *,
        payload_hash: str,
        message_id: str,
        lease_ms: int,
        companion: PowertoolsRecord | None = None,
    ) -> Claimed | Rejected:
        with self._switch.call():
            claimed = self._store.claim(
                record_id,
                payload_hash=payload_hash,
                message_id=message_id,
                lease_ms=lease_ms,
                companion=companion,
            )
        if isinstance(claimed, Claimed):
            self._switch.business_starts()
        else:
            self._switch.check()  # killed while the claim was on the wire
        return claimed

    def complete(
        self, record_id: str, claim: Claimed, result: str, effects: Effects | None = None
    ) -> bool:
        write = functools.partial(self._store.complete, effects=effects)
        return self._finalize_or_die(write, record_id, claim, result)

    def clear_outbox(
        self,
        record_id: str,
        fence: int | None,
        *,
        owner: str | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> bool:
        with self._switch.call():
            cleared = self._store.clear_outbox(record_id, fence, owner=owner, companion=companion)
        self._switch.check()
        return cleared

    def commit_staged(
        self,
        record_id: str,
        *,
        payload_hash: str,
        message_id: str,
        result: str,
        effects: Effects | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> Committed | Rejected:
        # effects="staged": business code ran before any call (there is no claim to die
        # after); the commit is its finalize.
        self._switch.reached(AFTER_PROCESS)
        with self._switch.call():
            committed = self._store.commit_staged(
                record_id,
                payload_hash=payload_hash,
                message_id=message_id,
                result=result,
                effects=effects,
                companion=companion,
            )
        self._switch.reached(BEFORE_FINALIZE)
        return committed

    def fail(
        self, record_id: str, claim: Claimed, error: str, *, review_fence: int | None = None
    ) -> bool:
        # The fail of a claim quarantined for review (its error a bare review reason,
        # LEASE_EXPIRED for a takeover) follows no business code.
        ran = error not in c.REVIEW_REASONS
        write = functools.partial(self._store.fail, review_fence=review_fence)
        return self._finalize_or_die(write, record_id, claim, error, business_ran=ran)

    def staged_refusal(
        self,
        record_id: str,
        *,
        payload_hash: str,
        previous_hash: str | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> Rejected | None:
        with self._switch.call():  # its read (two with a companion)
            return self._store.staged_refusal(
                record_id,
                payload_hash=payload_hash,
                previous_hash=previous_hash,
                companion=companion,
            )

    def get(self, record_id: str) -> Record | None:
        with self._switch.call():
            return self._store.get(record_id)

    def _finalize_or_die(
        self,
        write: Callable[[str, Claimed, str], bool],
        record_id: str,
        claim: Claimed,
        value: str,
        *,
        business_ran: bool = True,
    ) -> bool:
        with self._ended_lock:
            first_end = (record_id, claim.owner, claim.fence) not in self._ended
            self._ended.add((record_id, claim.owner, claim.fence))
        if first_end:
            self._switch.business_ended()
        if business_ran:
            self._switch.reached(AFTER_PROCESS)
        with self._switch.call():
            written = write(record_id, claim, value)
        self._switch.reached(BEFORE_FINALIZE)
        return written


class CrashingOutbox(Outbox):
    """The real outbox, refusing to send for an invocation that is dead."""

    def __init__(self, outbox: Outbox, *, switch: KillSwitch) -> None:
        self._outbox = outbox
        self._switch = switch

    def send(self, record_id: str, messages: Sequence[OutboxMessage]) -> Sent:
        with self._switch.call():
            sent = self._outbox.send(record_id, messages)
        self._switch.check()
        return sent


class CrashingQuarantine(Quarantine):
    """The real quarantine, refusing to send for an invocation that is dead."""

    def __init__(self, client: Any, dlq_url: str | None, *, switch: KillSwitch) -> None:
        super().__init__(client, dlq_url)
        self._switch = switch

    def send(
        self,
        record: dict[str, Any],
        reason: str,
        error: str,
        *,
        fence: int | None = None,
        key: str | None = None,
    ) -> Sent:
        with self._switch.call():
            sent = super().send(record, reason, error, fence=fence, key=key)
        self._switch.check()
        return sent
