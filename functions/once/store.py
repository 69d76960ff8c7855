"""The record store: claim, complete and fail as single conditional writes on DynamoDB, and
the commit of an attempt's staged writes with its completion as one transaction.

``Store`` is what the batch processor asks of a store; ``RecordStore`` is the one on
DynamoDB, and the testing kit's crashing store wraps one (``once.testing.crash``). This
module holds only DynamoDB: the update expressions, the conditions, the requests and
the parsing of what comes back. What a rejection *means* is decided in ``protocol.py``. The
store never deletes an item (that would reset the fence), and never relies on TTL: expiry is part of
every claim condition, because TTL deletes lazily, sometimes days late.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from botocore.exceptions import ClientError

from once import constants as c
from once.awserrors import error_code
from once.effects import Effects, OutboxMessage
from once.models import Outcome, Record
from once.payload import describe_error
from once.powertools import PowertoolsRecord, PowertoolsState
from once.protocol import (
    CONDITION_FAILED,
    Verdict,
    claim_expires_at,
    hashed_before,
    is_takeover,
    judge_claim,
    judge_commit,
    judge_finalize,
    judge_powertools,
    judge_staged_cancel,
    judge_staged_commit,
    judge_staged_refusal,
    judge_write_error,
    powertools_takeover,
)

#: Tries of a completing write whose refusal DynamoDB calls transient (a conflicting request
#: on one of its items, throttling past the SDK's own retries), within the invocation: the
#: staged writes are still what business code asked for, so committing again is safe.
COMMIT_TRIES = 3
#: The wait before the second and third try, at most (full jitter, as AWS's SDKs back off).
_COMMIT_BACKOFF_S = (0.05, 0.2)
#: The jitter's source: the operating system's, drawn at each wait. ``random``'s own generator
#: is seeded at import, in INIT, and a SnapStart snapshot would carry its state into every
#: environment restored from it, so that they back off in lockstep (AWS asks for entropy
#: generated after initialization: https://docs.aws.amazon.com/lambda/latest/dg/
#: snapstart-uniqueness.html). ``SystemRandom`` keeps no state to snapshot.
_JITTER = random.SystemRandom()

_CLAIM_UPDATE = (
    "SET #status = :in_progress, #owner = :me, #lease = :lease, #expires = :expires, "
    "#hash = :hash, #message = :message, #updated = :now_ms "
    "ADD #fence :one REMOVE #result, #error, #review, #outbox"
)
_CLAIM_CONDITION = (
    "attribute_not_exists(#id) OR #expires < :now_s OR "
    "((#status = :failed OR (#status = :in_progress AND #lease < :now_ms)) AND #hash = :hash)"
)
_COMPLETE_UPDATE = (
    "SET #status = :completed, #result = :result, #expires = :expires, #updated = :now_ms "
    "REMOVE #lease"
)
#: The completion of a record with an outbox: the messages are owed from this write on.
_COMPLETE_WITH_OUTBOX_UPDATE = (
    "SET #status = :completed, #result = :result, #expires = :expires, #updated = :now_ms, "
    "#outbox = :outbox REMOVE #lease"
)
#: Once every message of the outbox is sent: owed no more. The fence and the status tie it
#: to the completion that stored them (a record claimed afresh after its retention is not
#: touched).
_CLEAR_UPDATE = "SET #updated = :now_ms REMOVE #outbox"
_CLEAR_CONDITION = "#fence = :fence AND #status = :completed AND attribute_exists(#outbox)"
#: The clear after a staged commit with staged writes, whose fence the transaction does not
#: return: its owner, new with every claim and every staged commit, ties it to that commit.
_CLEAR_OWNED_CONDITION = "#owner = :me AND #status = :completed AND attribute_exists(#outbox)"
#: The one write of ``effects="staged"``: the record COMPLETED under the claim's condition,
#: the fence bumped as a claim bumps it (``_CLAIM_CONDITION``).
_STAGED_UPDATE = (
    "SET #status = :completed, #owner = :me, #result = :result, #expires = :expires, "
    "#hash = :hash, #message = :message, #updated = :now_ms "
    "ADD #fence :one REMOVE #lease, #error, #review, #outbox"
)
_STAGED_WITH_OUTBOX_UPDATE = (
    "SET #status = :completed, #owner = :me, #result = :result, #expires = :expires, "
    "#hash = :hash, #message = :message, #updated = :now_ms, #outbox = :outbox "
    "ADD #fence :one REMOVE #lease, #error, #review"
)
_FAIL_UPDATE = "SET #status = :failed, #error = :error, #updated = :now_ms REMOVE #lease"
#: A claim given back where the key was absent (the bridge to Powertools' records): FAILED and
#: expired, so that it counts as absent again, its fence kept.
_FORGET_UPDATE = (
    "SET #status = :failed, #error = :error, #updated = :now_ms, #expires = :expired REMOVE #lease"
)
#: A quarantined takeover's fail also records the fence its review must name.
_FAIL_FOR_REVIEW_UPDATE = (
    "SET #status = :failed, #error = :error, #updated = :now_ms, #review = :review REMOVE #lease"
)

_NAMES = {
    "#id": c.ATTR_ID,
    "#status": c.ATTR_STATUS,
    "#fence": c.ATTR_FENCE,
    "#owner": c.ATTR_OWNER,
    "#lease": c.ATTR_LEASE_EXPIRES_AT,
    "#expires": c.ATTR_EXPIRES_AT,
    "#hash": c.ATTR_PAYLOAD_HASH,
    "#result": c.ATTR_RESULT,
    "#error": c.ATTR_ERROR,
    "#message": c.ATTR_MESSAGE_ID,
    "#updated": c.ATTR_UPDATED_AT,
    "#review": c.ATTR_REVIEW_FENCE,
    "#outbox": c.ATTR_OUTBOX,
}


def _names(expression: str) -> dict[str, str]:
    """The attribute-name placeholders an expression uses (DynamoDB rejects unused ones)."""
    return {k: v for k, v in _NAMES.items() if k in expression}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _outbox(messages: Sequence[OutboxMessage]) -> dict[str, Any]:
    """The record's ``outbox``: one JSON string per message owed."""
    return {"L": [_s(m.to_json()) for m in messages]}


def _update(
    table: str, record_id: str, update: str, condition: str, values: dict[str, Any]
) -> dict[str, Any]:
    """One conditional update of a record, as an ``UpdateItem`` request or a transaction's
    element: a refusal returns the item that stopped it (``ALL_OLD``), so no read is needed."""
    return {
        "TableName": table,
        "Key": {c.ATTR_ID: _s(record_id)},
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": _names(update + " " + condition),
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


@dataclass(frozen=True)
class Claimed:
    """This invocation holds the key: it may run business code as ``owner`` with ``fence``."""

    owner: str
    fence: int
    takeover: bool
    previous: Record | None
    #: The message's Powertools record this claim also holds INPROGRESS (``once.powertools``),
    #: completed with the record's own commit.
    companion: PowertoolsRecord | None = None


@dataclass(frozen=True)
class Rejected:
    """The claim did not go through; ``outcome`` is DUPLICATE, CONFLICT or BUSY."""

    outcome: Outcome
    record: Record
    #: The store's clock when the claim was refused (epoch ms): with the record's lease,
    #: how long a BUSY key stays held.
    at_ms: int

    @property
    def holder_remaining_ms(self) -> int | None:
        """How long the holder's lease still runs (None: no lease on the record)."""
        if self.record.lease_expires_at is None:
            return None
        return self.record.lease_expires_at - self.at_ms


@dataclass(frozen=True)
class Committed:
    """A staged commit landed: the record is COMPLETED as ``owner``, at ``fence`` (None when
    the transaction that carried staged writes does not say it)."""

    owner: str
    fence: int | None


class WriteRefused(Exception):
    """DynamoDB refused a staged write's condition at commit: nothing of the commit landed
    and the record is still IN_PROGRESS under the claim. Names the element, never a value."""

    def __init__(self, index: int, operation: str, table: str, refused: str) -> None:
        super().__init__(
            f"staged write {index} ({operation} on table {table}) was refused by its condition"
        )
        self.index = index
        #: What business code asked for when it staged the write: "retry" or "quarantine".
        self.refused = refused


class _Canceled(Exception):
    """Inside the store: a commit canceled, nothing landed, judged TRANSIENT or CANCELED."""

    def __init__(self, verdict: Verdict, codes: list[str]) -> None:
        super().__init__(verdict.value)
        self.verdict = verdict
        self.codes = codes


class CommitCanceled(Exception):
    """DynamoDB canceled or refused the completing write for a reason other than a
    condition, certainly before applying any of it (a missing permission, a deleted table, a
    request it does not accept; a conflicting transaction or throttling past the tries):
    nothing landed and the record is still IN_PROGRESS under the claim. Names AWS's codes,
    never a value."""

    def __init__(self, codes: list[str]) -> None:
        super().__init__("commit canceled: " + ", ".join(sorted(set(codes) - {"None"})))
        self.codes = codes


class CommitLanded(Exception):
    """A fail after a commit taken for one that landed nothing found the record COMPLETED
    under the same claim: an earlier try of the commit had landed (its answer was lost, and
    the SDK's retry was refused). The record is done, with what it staged."""


def _companion_item(error: ClientError) -> Any:
    """A canceled transaction's Powertools record as its element's condition saw it (the
    element before the record's), if DynamoDB returned it."""
    reasons: Any = error.response.get("CancellationReasons") or []
    return reasons[-2].get("Item") if len(reasons) >= 2 else None


def _cancellation(error: ClientError) -> tuple[list[str], Record | None]:
    """A canceled transaction's code per element (``"None"``: not a cause) and the record
    the last element's condition saw (``ReturnValuesOnConditionCheckFailure``), if any."""
    reasons: Any = error.response.get("CancellationReasons") or []
    codes = [reason.get("Code") or "None" for reason in reasons]
    item = reasons[-1].get("Item") if reasons else None
    return codes, (Record.from_item(item) if item else None)


def _raise_unless_judged_by_the_record(
    verdict: Verdict, codes: list[str], effects: Effects
) -> None:
    """A canceled commit that landed nothing for a reason of its own raises: a staged
    write's refusal (``WriteRefused``, naming the element) or a cause the store may commit
    again after (``_Canceled``). What the record's condition decided is the caller's."""
    if verdict is Verdict.REFUSED:
        index = codes.index(CONDITION_FAILED)
        ((operation, body),) = effects.writes[index].items()
        raise WriteRefused(
            index, operation, str(body["TableName"]), effects.refusals[index]
        ) from None
    if verdict in (Verdict.TRANSIENT, Verdict.CANCELED):
        raise _Canceled(verdict, codes) from None


#: What a completing write tried by ``RecordStore._tried`` ends with.
_Ended = TypeVar("_Ended")


def _claim_values(
    me: str, payload_hash: str, message_id: str, now: float
) -> dict[str, dict[str, str]]:
    """The values a claim's condition and a staged commit's (the same one) both bind."""
    return {
        ":in_progress": _s(c.STATUS_IN_PROGRESS),
        ":failed": _s(c.STATUS_FAILED),
        ":me": _s(me),
        ":hash": _s(payload_hash),
        ":message": _s(message_id),
        ":now_ms": _n(int(now * 1000)),
        ":now_s": _n(int(now)),
        ":one": _n(1),
    }


def _staged_rejected(old: Record, verdict: Verdict, *, me: str, at_ms: int) -> Committed | Rejected:
    """A staged commit the record's condition refused: my own, landed and retried by the
    SDK (``Committed``), or refused as a claim is (``Rejected``)."""
    if verdict is Verdict.MINE:
        return Committed(owner=me, fence=old.fence)
    return Rejected(outcome=Outcome(verdict.value), record=old, at_ms=at_ms)


def _fenced(claim: Claimed) -> dict[str, dict[str, str]]:
    """The values of the finalize condition."""
    return {
        ":me": _s(claim.owner),
        ":fence": _n(claim.fence),
        ":in_progress": _s(c.STATUS_IN_PROGRESS),
    }


def _judged_cancel(error: ClientError, claim: Claimed, effects: Effects) -> bool:
    """A canceled commit, judged from each element's cancellation code and the record its
    condition saw: True (mine, it had landed), False (a lost lease), or raised."""
    codes, old = _cancellation(error)
    bridged = claim.companion is not None
    verdict = judge_commit(codes, old, me=claim.owner, fence=claim.fence, bridged=bridged)
    _raise_unless_judged_by_the_record(verdict, codes, effects)
    return verdict is Verdict.MINE


def client_request_token(owner: str, fence: int) -> str:
    """The commit's idempotency token: one per claim, so an SDK retry of a commit that
    landed is recognised by DynamoDB (for ten minutes; after that the record's condition
    recognises it)."""
    return hashlib.sha256(f"{owner}:{fence}".encode()).hexdigest()[:36]


class Store(Protocol):
    """What the batch processor asks of a record store: the writes of the design's
    transitions (docs/design.md), each answering as ``RecordStore`` documents it."""

    @property
    def table_name(self) -> str: ...

    def claim(
        self,
        record_id: str,
        *,
        payload_hash: str,
        message_id: str,
        lease_ms: int,
        companion: PowertoolsRecord | None = None,
    ) -> Claimed | Rejected: ...

    def complete(
        self, record_id: str, claim: Claimed, result: str, effects: Effects | None = None
    ) -> bool: ...

    def fail(
        self, record_id: str, claim: Claimed, error: str, *, review_fence: int | None = None
    ) -> bool: ...

    def clear_outbox(
        self,
        record_id: str,
        fence: int | None,
        *,
        owner: str | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> bool: ...

    def commit_staged(
        self,
        record_id: str,
        *,
        payload_hash: str,
        message_id: str,
        result: str,
        effects: Effects | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> Committed | Rejected: ...

    def staged_refusal(
        self,
        record_id: str,
        *,
        payload_hash: str,
        previous_hash: str | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> Rejected | None: ...


class _Requests:
    """The idempotency table's client and what every write of the store is made of: one
    conditional ``UpdateItem``, a completing write tried again while DynamoDB calls its
    refusal transient, a strongly consistent read. ``RecordStore`` writes the design's
    transitions with them; this class only speaks to DynamoDB."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        retention_s: int = c.DEFAULT_RETENTION_S,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._table = table_name
        self._retention_s = retention_s
        self._clock = clock
        self._sleep = sleep

    @property
    def table_name(self) -> str:
        return self._table

    def _tried(self, write: Callable[[], _Ended]) -> _Ended:
        """A completing write, tried again while DynamoDB refuses it for a cause that passes
        (``COMMIT_TRIES`` in all). Raises ``CommitCanceled`` when it certainly landed nothing
        (``protocol.judge_write_error``); an error after which it may have landed is raised
        as it is."""
        for tried in range(1, COMMIT_TRIES + 1):
            try:
                return write()
            except _Canceled as canceled:
                verdict, codes = canceled.verdict, canceled.codes
            except ClientError as error:
                code = error_code(error)
                verdict, codes = judge_write_error(code), [code or "None"]
                if verdict is Verdict.UNKNOWN:
                    raise
            if verdict is Verdict.CANCELED or tried == COMMIT_TRIES:
                raise CommitCanceled(codes) from None
            self._sleep(_JITTER.uniform(0, _COMMIT_BACKOFF_S[tried - 1]))
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(
        self,
        record_id: str,
        update: str,
        condition: str,
        values: dict[str, Any],
        *,
        return_old_on_success: bool = False,
    ) -> tuple[Record | None, bool]:
        """One conditional UpdateItem. Returns (old record or None, whether it was rejected)."""
        request = _update(self._table, record_id, update, condition, values)
        if return_old_on_success:
            request["ReturnValues"] = "ALL_OLD"
        try:
            response = self._client.update_item(**request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            item: Any = error.response.get("Item")  # the old item: ALL_OLD
            return (Record.from_item(item) if item else None), True
        item = response.get("Attributes")
        return (Record.from_item(item) if item else None), False

    def get(self, record_id: str) -> Record | None:
        """Read one record, strongly consistent: what a tool inspecting a key sees. The
        protocol itself never reads before it writes."""
        response = self._client.get_item(
            TableName=self._table, Key={c.ATTR_ID: _s(record_id)}, ConsistentRead=True
        )
        item = response.get("Item")
        return Record.from_item(item) if item else None

    @staticmethod
    def _adopt(write: Callable[[], object]) -> None:
        """Complete once's own record with what a Powertools record says was done. The copy
        is a duplicate whether or not this write lands; where it does not, the key's next
        copy meets the Powertools record again (or once's claim's lease, then it)."""
        try:
            write()
        except Exception:
            return


class _StagedCommits(_Requests):
    """The writes of ``effects="staged"`` (``once.staged``): the one commit after business
    code ran, and the read that judges a copy that ended without it."""

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
        """``effects="staged"``: complete the record in one write, after business code ran,
        under the claim's condition (a new key, an expired record, or a FAILED or
        lease-expired one with the same payload), bumping the fence as a claim does; with
        staged writes, or the message's Powertools record (``companion``: written COMPLETED
        under Powertools' claim condition), one ``TransactWriteItems``, the record last.
        Refused, it is judged as a refused claim (``Rejected``: DUPLICATE, CONFLICT or BUSY;
        nothing staged landed; a Powertools DUPLICATE completes once's record with its
        response, as a claim's does). Raises ``WriteRefused`` or ``CommitCanceled`` when
        nothing landed for another reason."""
        now = self._clock()
        now_ms = int(now * 1000)
        me = uuid.uuid4().hex
        values = _claim_values(me, payload_hash, message_id, now) | {
            ":completed": _s(c.STATUS_COMPLETED),
            ":result": _s(result),
            ":expires": _n(int(now) + self._retention_s),
        }
        update = _STAGED_UPDATE
        if effects is not None and effects.messages:
            update = _STAGED_WITH_OUTBOX_UPDATE
            values[":outbox"] = _outbox(effects.messages)
        record = _update(self._table, record_id, update, _CLAIM_CONDITION, values)
        rejected = functools.partial(_staged_rejected, me=me, at_ms=now_ms)
        writes = effects or Effects()
        bridged = []
        if companion is not None and writes.messages:  # held until the outbox is sent
            until_s = int(now) + self._retention_s
            held = companion.held(me=me, result=result, now=now, until_s=until_s)
            bridged.append({"Put": held})
        elif companion is not None:
            bridged.append({"Put": companion.completed(result=result, now=now)})

        def plain() -> Committed | Rejected:
            old, refused = self._write(
                record_id, update, _CLAIM_CONDITION, values, return_old_on_success=True
            )
            if refused:
                assert old is not None  # a failed claim condition implies an existing item
                return rejected(old, judge_staged_commit(old, me=me, payload_hash=payload_hash))
            return Committed(owner=me, fence=(old.fence if old is not None else 0) + 1)

        def transaction() -> Committed | Rejected:
            try:
                self._client.transact_write_items(
                    TransactItems=[*writes.writes, *bridged, {"Update": record}],
                    ClientRequestToken=client_request_token(me, 0),
                )
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                codes, old = _cancellation(error)
                state = (
                    None if companion is None else companion.state(_companion_item(error), now=now)
                )
                verdict = judge_staged_cancel(
                    codes, old, me=me, payload_hash=payload_hash, powertools=state
                )
                _raise_unless_judged_by_the_record(verdict, codes, writes)
                if old is not None and codes[-1] == CONDITION_FAILED:
                    return rejected(old, verdict)
                # The Powertools record refused it (judge_staged_cancel).
                assert companion is not None and state is not None
                adopt = functools.partial(
                    self.commit_staged,
                    record_id,
                    payload_hash=payload_hash,
                    message_id=message_id,
                    result=state.data or "null",
                )
                return self._refused_by_powertools(companion, state, verdict, adopt)
            return Committed(owner=me, fence=None)

        return self._tried(transaction if writes.writes or bridged else plain)

    def _refused_by_powertools(
        self,
        companion: PowertoolsRecord,
        state: PowertoolsState,
        verdict: Verdict,
        adopt: Callable[[], object] | None = None,
    ) -> Rejected:
        """A staged copy the message's Powertools record refused: its refusal, once a
        DUPLICATE's response completes once's own record (``adopt``, by ``_adopt``)."""
        if verdict is Verdict.DUPLICATE and adopt is not None:
            self._adopt(adopt)
        return Rejected(
            outcome=Outcome(verdict.value),
            record=companion.as_record(state, fence=0),
            at_ms=int(self._clock() * 1000),
        )

    def staged_refusal(
        self,
        record_id: str,
        *,
        payload_hash: str,
        previous_hash: str | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> Rejected | None:
        """``effects="staged"``: a copy ended without its commit (business code raised, a
        staged write was refused, the commit was canceled): read the record (strongly
        consistent) and say whether it refuses the copy first
        (``protocol.judge_staged_refusal``): a ``Rejected`` (DUPLICATE, CONFLICT or BUSY), or
        None when the copy's own reason stands. A CONFLICT with a record written under the
        copy's ``previous_hash`` is judged again under that hash (``protocol.hashed_before``),
        from the same read. One read, on that path only; with a ``companion``, where once's
        record lets the copy's reason stand, a second: the message's Powertools record
        (``protocol.judge_powertools``)."""
        now = self._clock()
        now_ms = int(now * 1000)
        old = self.get(record_id)
        verdict = judge_staged_refusal(old, now_ms=now_ms, payload_hash=payload_hash)
        if verdict is Verdict.CONFLICT and old is not None and hashed_before(old, previous_hash):
            assert previous_hash is not None
            verdict = judge_staged_refusal(old, now_ms=now_ms, payload_hash=previous_hash)
        if verdict is Verdict.REFUSED and companion is not None:
            state = companion.state(self._client.get_item(**companion.read()).get("Item"), now=now)
            by_powertools = judge_powertools(state)
            return (
                None
                if by_powertools is None
                else self._refused_by_powertools(companion, state, by_powertools)
            )
        if verdict is Verdict.REFUSED:
            return None
        assert old is not None
        return Rejected(outcome=Outcome(verdict.value), record=old, at_ms=now_ms)


class RecordStore(_StagedCommits):
    """Conditional writes on the idempotency table, one item per business key (``Store``)."""

    #: Complete and fail land only for the claim that still owns the record: same owner,
    #: same fence, still IN_PROGRESS. The values ``:me``, ``:fence`` and ``:in_progress``
    #: are always bound.
    finalize_condition: ClassVar[str] = (
        "#owner = :me AND #fence = :fence AND #status = :in_progress"
    )

    def claim(
        self,
        record_id: str,
        *,
        payload_hash: str,
        message_id: str,
        lease_ms: int,
        companion: PowertoolsRecord | None = None,
    ) -> Claimed | Rejected:
        """Take the key for ``lease_ms``, bumping the fence; or say why not. With a
        ``companion``, then take the message's Powertools record too (``_bridge``)."""
        now = self._clock()
        now_s, now_ms = int(now), int(now * 1000)
        me = uuid.uuid4().hex
        values = _claim_values(me, payload_hash, message_id, now) | {
            ":lease": _n(now_ms + lease_ms),
            ":expires": _n(claim_expires_at(now_ms, lease_ms, self._retention_s)),
        }
        old, rejected = self._write(
            record_id, _CLAIM_UPDATE, _CLAIM_CONDITION, values, return_old_on_success=True
        )
        if rejected:
            assert old is not None  # a failed claim condition implies an existing item
            verdict = judge_claim(old, me=me, payload_hash=payload_hash)
            if verdict is not Verdict.MINE:
                return Rejected(outcome=Outcome(verdict.value), record=old, at_ms=now_ms)
            # Our claim landed but its response was lost; the SDK retried it. The fence on
            # the record is ours; what it replaced is no longer visible.
            claimed = Claimed(
                owner=me, fence=old.fence, takeover=is_takeover(old, retried=True), previous=None
            )
        else:
            previous = old if old is not None and old.is_live(now_s) else None
            fence = (old.fence if old is not None else 0) + 1
            takeover = is_takeover(previous, retried=False)
            claimed = Claimed(owner=me, fence=fence, takeover=takeover, previous=previous)
        if companion is None:
            return claimed
        return self._bridge(record_id, claimed, companion, lease_end_ms=now_ms + lease_ms)

    def _bridge(
        self, record_id: str, claim: Claimed, companion: PowertoolsRecord, *, lease_end_ms: int
    ) -> Claimed | Rejected:
        """Under a claim of once's own record, take the message's Powertools record
        INPROGRESS for the same lease (``PowertoolsRecord.claim``). Where it refuses the
        copy (``protocol.judge_powertools``), the claim ends: a DUPLICATE completes once's
        record with Powertools' response (later copies are duplicates by once's own record,
        for its retention), a BUSY or CONFLICT fails it (the next copy may claim it again),
        and the refusal is returned. An error fails it too, and is raised."""
        now = self._clock()
        try:
            response = self._client.put_item(
                **companion.claim(me=claim.owner, now=now, lease_end_ms=lease_end_ms),
                ReturnValues="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                self._release(record_id, claim, f"{c.REASON_POWERTOOLS}: {describe_error(error)}")
                raise
            item: Any = error.response.get("Item")  # the old item: ALL_OLD
            state = companion.state(item, now=now)
            verdict = judge_powertools(state) or Verdict.BUSY  # a clock race: retry later
            held = companion.as_record(state, fence=claim.fence)
            if verdict is Verdict.DUPLICATE:
                self._adopt(
                    functools.partial(self.complete, record_id, claim, state.data or "null")
                )
            else:
                self._release(record_id, claim, f"{c.REASON_POWERTOOLS}: {verdict.value}")
            return Rejected(outcome=Outcome(verdict.value), record=held, at_ms=int(now * 1000))
        except Exception as error:
            self._release(record_id, claim, f"{c.REASON_POWERTOOLS}: {describe_error(error)}")
            raise
        replaced = companion.state(response.get("Attributes"), now=now)
        takeover = claim.takeover or powertools_takeover(replaced, me=claim.owner)
        return dataclasses.replace(claim, companion=companion, takeover=takeover)

    def _release(self, record_id: str, claim: Claimed, error: str) -> None:
        """Give back a claim whose Powertools record was not taken, as if it had not been
        made, so that the next copy is judged as this one would have been: a takeover is
        left to its lease (the next claim is a takeover again, reviewed under
        ``on_expired_lease="quarantine"``); a claim of an absent key leaves the record
        expired (absent again: a copy under another payload hash is not refused by the one
        this copy carried); a claim of a FAILED record puts back its error and review fence.
        Where this write fails, the claim's lease frees the key."""
        if claim.takeover:
            return
        previous = claim.previous
        try:
            if previous is None:
                self._forget(record_id, claim, error)
            else:
                self.fail(
                    record_id, claim, previous.error or error, review_fence=previous.review_fence
                )
        except Exception:
            return

    def _forget(self, record_id: str, claim: Claimed, error: str) -> None:
        """The claim's record FAILED and past its retention: a claim counts it absent."""
        now = self._clock()
        values = {
            ":failed": _s(c.STATUS_FAILED),
            ":error": _s(error),
            ":now_ms": _n(int(now * 1000)),
            ":expired": _n(int(now) - 1),
        }
        self._finalize(record_id, claim, _FORGET_UPDATE, values, c.STATUS_FAILED)

    def complete(
        self, record_id: str, claim: Claimed, result: str, effects: Effects | None = None
    ) -> bool:
        """Mark the record COMPLETED with its result, and commit what the attempt staged with
        it: its writes in the same transaction, its outbox on the record. False: the lease
        was lost (nothing of it landed). Raises ``WriteRefused`` or ``CommitCanceled`` when
        the transaction applied nothing and the record is still the claim's."""
        now = self._clock()
        values: dict[str, Any] = {
            ":completed": _s(c.STATUS_COMPLETED),
            ":result": _s(result),
            ":expires": _n(int(now) + self._retention_s),
            ":now_ms": _n(int(now * 1000)),
        }
        update = _COMPLETE_UPDATE
        if effects is not None and effects.messages:
            update = _COMPLETE_WITH_OUTBOX_UPDATE
            values[":outbox"] = _outbox(effects.messages)
        if claim.companion is None and (effects is None or not effects.writes):
            plain = functools.partial(
                self._finalize, record_id, claim, update, values, c.STATUS_COMPLETED
            )
            return self._tried(plain)
        return self._commit(record_id, claim, update, values, effects or Effects())

    def _commit(
        self,
        record_id: str,
        claim: Claimed,
        update: str,
        values: dict[str, Any],
        effects: Effects,
    ) -> bool:
        """The staged writes, the Powertools record's completion (with a companion) and the
        record's completion in one TransactWriteItems, the record last, its element under
        the finalize condition."""
        values |= _fenced(claim)
        record = _update(self._table, record_id, update, self.finalize_condition, values)
        bridged = []
        if claim.companion is not None:
            now = self._clock()
            result = values[":result"]["S"]
            if effects.messages:  # held until the outbox is sent (``clear_outbox``)
                until_s = int(now) + self._retention_s
                held = claim.companion.hold(me=claim.owner, result=result, until_s=until_s)
                bridged.append({"Update": held})
            else:
                completed = claim.companion.complete(me=claim.owner, result=result, now=now)
                bridged.append({"Update": completed})
        # One request for every try: DynamoDB takes its token (ClientRequestToken) again
        # only with the same parameters, and answers a retry of a commit that landed as the
        # commit itself.
        request = {
            "TransactItems": [*effects.writes, *bridged, {"Update": record}],
            "ClientRequestToken": client_request_token(claim.owner, claim.fence),
        }

        def commit() -> bool:
            try:
                self._client.transact_write_items(**request)
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                return _judged_cancel(error, claim, effects)
            return True

        return self._tried(commit)

    def clear_outbox(
        self,
        record_id: str,
        fence: int | None,
        *,
        owner: str | None = None,
        companion: PowertoolsRecord | None = None,
    ) -> bool:
        """Every message of the record's outbox is sent: remove it, if the record is still
        the COMPLETED one (``fence``, or ``owner`` for a staged commit whose fence is not
        known) that stored it. False: nothing to clear (another delivery cleared it, or the
        record has been claimed afresh). With a ``companion`` (the message's Powertools
        record, held while the outbox was owed), the clear and its settling to COMPLETED are
        one transaction: neither is left without the other."""
        values = {
            ":completed": _s(c.STATUS_COMPLETED),
            ":now_ms": _n(int(self._clock() * 1000)),
        }
        if owner is not None:
            values[":me"] = _s(owner)
            condition = _CLEAR_OWNED_CONDITION
        else:
            assert fence is not None
            values[":fence"] = _n(fence)
            condition = _CLEAR_CONDITION
        if companion is not None:
            return self._clear_and_settle(record_id, condition, values, companion)
        _, rejected = self._write(record_id, _CLEAR_UPDATE, condition, values)
        return not rejected

    def _clear_and_settle(
        self,
        record_id: str,
        condition: str,
        values: dict[str, Any],
        companion: PowertoolsRecord,
    ) -> bool:
        """The clear and the Powertools record's settling, one ``TransactWriteItems``. The
        clear refused: nothing to clear (the delivery that cleared it settled it too). Only
        the settling refused (not held: settled already, or never held): the plain clear."""
        clear = _update(self._table, record_id, _CLEAR_UPDATE, condition, values)
        settle = companion.settle(now=self._clock())
        try:
            self._client.transact_write_items(TransactItems=[{"Update": settle}, {"Update": clear}])
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise
            codes, _ = _cancellation(error)
            if codes[-1] == CONDITION_FAILED:
                return False
            if codes[0] == CONDITION_FAILED:
                _, rejected = self._write(record_id, _CLEAR_UPDATE, condition, values)
                return not rejected
            raise
        return True

    def fail(
        self, record_id: str, claim: Claimed, error: str, *, review_fence: int | None = None
    ) -> bool:
        """Mark the record FAILED so that a retry may claim it. False: the lease was lost.
        ``review_fence``: on a quarantined takeover, the fence a review must name."""
        values = {
            ":failed": _s(c.STATUS_FAILED),
            ":error": _s(error),
            ":now_ms": _n(int(self._clock() * 1000)),
        }
        update = _FAIL_UPDATE
        if review_fence is not None:
            update = _FAIL_FOR_REVIEW_UPDATE
            values[":review"] = _n(review_fence)
        return self._finalize(record_id, claim, update, values, c.STATUS_FAILED)

    def _finalize(
        self,
        record_id: str,
        claim: Claimed,
        update: str,
        values: dict[str, Any],
        target_status: str,
    ) -> bool:
        values |= _fenced(claim)
        old, rejected = self._write(record_id, update, self.finalize_condition, values)
        if not rejected:
            return True
        verdict = judge_finalize(
            old, me=claim.owner, fence=claim.fence, target_status=target_status
        )
        if verdict is Verdict.LANDED:
            raise CommitLanded(record_id)
        return verdict is Verdict.MINE
