"""The decision table: what a rejected conditional write means.

Every transition is one conditional write that returns the old item when its condition
fails (``ReturnValuesOnConditionCheckFailure=ALL_OLD``). These pure functions read that old
item and say what happened. They hold no I/O, so the decision table of docs/design.md can be
tested row by row and read in one sitting.
"""

from __future__ import annotations

from enum import StrEnum

from once import constants as c
from once.models import Outcome, Record
from once.powertools import COMPLETED, INPROGRESS, PowertoolsState


class Verdict(StrEnum):
    """How a rejected write is to be taken."""

    MINE = "mine"  # an SDK retry of my own write that had landed: a success
    DUPLICATE = Outcome.DUPLICATE.value
    CONFLICT = Outcome.CONFLICT.value
    BUSY = Outcome.BUSY.value
    LEASE_LOST = Outcome.LEASE_LOST.value
    REFUSED = "refused"  # a staged write's condition refused the commit: nothing landed
    TRANSIENT = "transient"  # nothing landed, for a cause DynamoDB calls transient: commit again
    CANCELED = "canceled"  # nothing landed, certainly, and committing again will not change it
    UNKNOWN = "unknown"  # the write may have landed (a timeout, a 5xx): nothing is known
    LANDED = "landed"  # a fail found the claim's own commit COMPLETED: the commit had landed


#: A cancellation reason's code for an element whose condition failed.
CONDITION_FAILED = "ConditionalCheckFailed"

# What DynamoDB says of a refused write, from its documentation: each operation's "Errors"
# (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html,
# .../API_UpdateItem.html), the common errors
# (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/CommonErrors.html) and the
# error handling guide
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html):
# a 400 answer is a request DynamoDB did not process ("the request was not processed" for
# throttling; "you can retry"); a 500 may have been processed ("the operation might have
# succeeded"), and so may a request whose answer never came.

#: ``CancellationReasons`` codes (TransactWriteItems) of an element canceled for a cause that
#: passes: "TransactionConflict", "ThrottlingError" and "ProvisionedThroughputExceeded".
#: The others: "None" (the element was not the cause), "ConditionalCheckFailed",
#: "ItemCollectionSizeLimitExceeded" and "ValidationError", which another try meets again.
TRANSIENT_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
#: Error codes of a write DynamoDB refused unprocessed, for a cause that passes (throttling
#: past the SDK's own retries, a conflict with a transaction on the item).
TRANSIENT_ERRORS = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ThrottlingException",
        "TransactionConflictException",
    }
)
#: Error codes of a write DynamoDB refused unprocessed, which another try meets again: a
#: missing permission, a missing table, a request it does not accept, a full item collection,
#: credentials it does not accept.
REFUSED_ERRORS = frozenset(
    {
        "AccessDeniedException",
        "ResourceNotFoundException",
        "ValidationException",
        "ItemCollectionSizeLimitExceededException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredTokenException",
    }
)


def judge_claim(old: Record, *, me: str, payload_hash: str) -> Verdict:
    """Classify a claim whose condition failed, from the record that stopped it.

    The condition only fails on a live record, so liveness is a given here.
    """
    if old.owner == me and old.status == c.STATUS_IN_PROGRESS:
        return Verdict.MINE
    if old.payload_hash != payload_hash:
        return Verdict.CONFLICT
    if old.status == c.STATUS_COMPLETED:
        return Verdict.DUPLICATE
    # IN_PROGRESS under another owner's live lease. (FAILED or an expired lease with the
    # same hash would have passed the condition; if a clock race says otherwise, retrying
    # later is the safe answer.)
    return Verdict.BUSY


def judge_finalize(old: Record | None, *, me: str, fence: int, target_status: str) -> Verdict:
    """Classify a complete or fail whose condition (``owner, fence, IN_PROGRESS``) failed.

    It is my own write retried by the SDK when the record already carries my owner, my fence
    and the status I was writing. A fail that finds my own fence COMPLETED follows a commit
    taken for one that landed nothing, whose earlier try had landed after all (the SDK's
    retry of it was answered with an error): the commit LANDED. Anything else means a newer
    claim owns the key.
    """
    if old is not None and old.owner == me and old.fence == fence:
        if old.status == target_status:
            return Verdict.MINE
        if old.status == c.STATUS_COMPLETED and target_status == c.STATUS_FAILED:
            return Verdict.LANDED
    return Verdict.LEASE_LOST


def judge_commit(
    codes: list[str], old: Record | None, *, me: str, fence: int, bridged: bool = False
) -> Verdict:
    """Classify a commit (staged writes, then the record's completion, in one
    ``TransactWriteItems``) that DynamoDB canceled, from each element's cancellation code
    (the record's is the last) and the record its condition saw (``old``). ``bridged``: the
    element before the record's is the Powertools record's completion (``once.powertools``).

    A canceled transaction applied nothing. The record's own condition failing is judged as
    a finalize's: my own commit retried by the SDK after it landed (the record carries my
    owner, my fence, COMPLETED) is a success, anything else a lost lease; it comes first,
    because a zombie's commit must never be taken for a business refusal. The Powertools
    record's condition failing (it is no longer INPROGRESS under my claim: a Powertools
    consumer took it over once my lease had passed) is a lost lease too. Otherwise a
    staged write's condition refused it (REFUSED); or every element that caused the
    cancellation names a cause that passes (a conflicting request on one of its items,
    throttling: TRANSIENT); or one names a cause that stays (CANCELED). In each of those
    the record is still mine and IN_PROGRESS.
    """
    if codes and codes[-1] == CONDITION_FAILED:
        return judge_finalize(old, me=me, fence=fence, target_status=c.STATUS_COMPLETED)
    if bridged and len(codes) >= 2 and codes[-2] == CONDITION_FAILED:
        return Verdict.LEASE_LOST
    return _canceled_by(codes, writes=len(codes) - 1 - bridged)


def _canceled_by(codes: list[str], *, writes: int) -> Verdict:
    """A canceled commit whose record condition held: a staged write's condition (one of
    the first ``writes`` elements) refused it (REFUSED); or every element that caused the
    cancellation names a cause that passes (TRANSIENT); or one names a cause that stays
    (CANCELED)."""
    if CONDITION_FAILED in codes[:writes]:
        return Verdict.REFUSED
    causes = set(codes) - {"None"}
    if causes and causes <= TRANSIENT_REASONS:
        return Verdict.TRANSIENT
    return Verdict.CANCELED


def judge_staged_commit(old: Record, *, me: str, payload_hash: str) -> Verdict:
    """Classify a staged commit (``effects="staged"``: business code ran first, then one
    write completes the record under the claim's condition) whose condition failed, from the
    record that stopped it: my own commit, retried by the SDK after it landed (my owner,
    COMPLETED), is MINE; anything else is judged as a refused claim (``_refusing``)."""
    if old.owner == me and old.status == c.STATUS_COMPLETED:
        return Verdict.MINE
    return _refusing(old, payload_hash=payload_hash)


def _refusing(old: Record, *, payload_hash: str) -> Verdict:
    """Why a live record refuses a staged copy: another payload is a CONFLICT; COMPLETED
    is a DUPLICATE (what the copy staged never lands); a live ``IN_PROGRESS`` (a two-phase
    claim, while a deploy switches modes) is BUSY. (FAILED or an expired lease with the same
    hash would have let it in; a clock race says retry later, the safe answer.)"""
    if old.payload_hash != payload_hash:
        return Verdict.CONFLICT
    if old.status == c.STATUS_COMPLETED:
        return Verdict.DUPLICATE
    return Verdict.BUSY


def judge_staged_cancel(
    codes: list[str],
    old: Record | None,
    *,
    me: str,
    payload_hash: str,
    powertools: PowertoolsState | None = None,
) -> Verdict:
    """Classify a staged commit with staged writes (one ``TransactWriteItems``, the record
    last) that DynamoDB canceled: the record's condition failing is judged as
    ``judge_staged_commit``; then, with the Powertools record's element before the record's
    (``powertools``: that record as its condition saw it), its condition failing is judged
    as that record refuses a copy (``judge_powertools``; a clock race that finds it free
    says BUSY: retry later); otherwise as ``judge_commit`` (a staged write's condition:
    REFUSED; causes that pass: TRANSIENT; one that stays: CANCELED). Nothing landed."""
    if codes and codes[-1] == CONDITION_FAILED and old is not None:
        return judge_staged_commit(old, me=me, payload_hash=payload_hash)
    bridged = powertools is not None
    if powertools is not None and len(codes) >= 2 and codes[-2] == CONDITION_FAILED:
        return judge_powertools(powertools) or Verdict.BUSY
    return _canceled_by(codes, writes=len(codes) - 1 - bridged)


def judge_powertools(state: PowertoolsState) -> Verdict | None:
    """A message's Powertools record, as the bridge meets it (``once.powertools``): None
    where it lets once's write in, as Powertools' own claim condition would (absent,
    expired, or INPROGRESS past its in-progress expiry), or where once itself holds it
    INPROGRESS (once's own record, claimed first, decided who holds it). Otherwise how it
    refuses the copy, in the order Powertools judges it (``_put_record``, then
    ``_handle_for_status``): another validation hash is a CONFLICT; COMPLETED is a DUPLICATE
    (its response the result); INPROGRESS is BUSY (back after its in-progress expiry, or its
    expiry when Powertools had no Lambda context to set one); a status Powertools does not
    write is BUSY too, so that it reaches the DLQ rather than run."""
    if state.status is None or state.expired:
        return None
    if state.status == INPROGRESS and (state.lease_ended or state.once_holds):
        return None
    if not state.same_payload:
        return Verdict.CONFLICT
    if state.status == COMPLETED:
        return Verdict.DUPLICATE
    return Verdict.BUSY


def claim_condition_holds(old: Record | None, *, now_ms: int, payload_hash: str) -> bool:
    """Whether the claim's condition (``store._CLAIM_CONDITION``) would let a write in over
    ``old``: an absent or expired record, or a FAILED or lease-expired ``IN_PROGRESS`` one
    with the same payload hash. The staged mode asks it of a record it read, to tell a
    refusal of its own from one the record would have made."""
    if old is None or not old.is_live(now_ms // 1000):
        return True
    if old.payload_hash != payload_hash:
        return False
    if old.status == c.STATUS_FAILED:
        return True
    return old.status == c.STATUS_IN_PROGRESS and (old.lease_expires_at or 0) < now_ms


def powertools_takeover(replaced: PowertoolsState, *, me: str) -> bool:
    """Whether the bridge's claim (by ``me``) replaced a Powertools build's own claim
    (``INPROGRESS`` without once's hold): one that expired mid-flight, whose function may
    have run. It is a takeover as once's own is (``Attempt.takeover``; quarantined under
    ``on_expired_lease="quarantine"``). Where the record replaced is ``me``'s own (the SDK
    retried a put that had landed), what was there before is no longer visible: then the
    answer is conservatively true, as ``is_takeover`` answers a retried claim."""
    if replaced.holder == me:
        return True
    return replaced.status == INPROGRESS and not replaced.once_holds


class StagedEnd(StrEnum):
    """How an ``effects="staged"`` copy can end without its commit landing."""

    RAISED = "raised"  # business code raised (anything but a PermanentError)
    PERMANENT = "permanent"  # business code raised a PermanentError
    REFUSED = "refused"  # a staged write's condition refused the transaction
    CANCELED = "canceled"  # DynamoDB canceled the commit, or it stayed transient past the tries
    UNKNOWN = "unknown"  # no answer, a 5xx: the commit may have landed


def staged_end_reads_record(end: StagedEnd) -> bool:
    """Whether a staged copy that ended so is judged by its record first (one strongly
    consistent read: ``judge_staged_refusal``). Every ending without a commit is: business
    code may raise on a copy *because* its own first commit changed what it reads (an order
    moved to ``shipped``), and only the record tells that copy from a first failure, and
    sends what the committed operation still owes. Not an unknown ending: its commit may
    have landed, and its redelivery's commit finds out (DUPLICATE) without a read."""
    return end is not StagedEnd.UNKNOWN


def judge_staged_refusal(old: Record | None, *, now_ms: int, payload_hash: str) -> Verdict:
    """``effects="staged"``: a copy that ended without its commit (business code raised, a
    ``PermanentError`` or anything else; a staged write's condition refused the transaction;
    DynamoDB canceled it), judged by the record read after it (strongly consistent; None:
    absent). The record speaks first: where it would refuse a claim, the copy ends as that
    refusal (a DUPLICATE is acknowledged, not retried or quarantined: its business code's
    view of the world came after the commit that landed, and may raise on it). Otherwise the
    copy's own reason stands: REFUSED. DynamoDB does not document that a canceled
    transaction reports every element whose condition failed, so a duplicate's refused
    staged write is never taken on its own word."""
    if claim_condition_holds(old, now_ms=now_ms, payload_hash=payload_hash):
        return Verdict.REFUSED
    assert old is not None
    return _refusing(old, payload_hash=payload_hash)


def hashed_before(old: Record, previous_hash: str | None) -> bool:
    """Whether a record that refused a copy as a CONFLICT was written under the hash an
    earlier version of once gave that copy's body (``payload.Parsed.previous_hash``: a
    ``SOURCE_KEY`` consumer behind SNS without raw delivery hashed SNS's whole notification).
    Then the copy is met again under that hash: SQS's redelivery of a message that FAILED,
    or completed, before the deploy is a retry or a DUPLICATE, never a CONFLICT (and a
    FAILED record keeps its operation: nothing else would ever apply it)."""
    return previous_hash is not None and old.payload_hash == previous_hash


def judge_write_error(code: str | None) -> Verdict:
    """Classify a completing write (the commit, or the plain completion) that DynamoDB
    refused with an error other than a condition's or a transaction's cancellation, from
    AWS's error code (None: no answer from DynamoDB, a timeout or a reset connection).

    Refused unprocessed for a cause that passes: TRANSIENT; for one that stays: CANCELED;
    anything else (an internal error, no answer, a reused idempotency token, a transaction
    still in progress under the same token, a code not documented) may have landed: UNKNOWN.
    """
    if code in TRANSIENT_ERRORS:
        return Verdict.TRANSIENT
    if code in REFUSED_ERRORS:
        return Verdict.CANCELED
    return Verdict.UNKNOWN


class Step(StrEnum):
    """What the processor does once a commit ended, after business code returned."""

    DONE = "done"  # the record is COMPLETED: send what it owes, acknowledge
    LOST = "lost"  # a newer claim owns the key: report it failed, write nothing
    RETRY = "retry"  # fail the record; the next delivery runs business code again
    QUARANTINE = "quarantine"  # fail the record and send the message to the DLQ
    REVIEW = "review"  # fail the record for review (its fence) and send it to the DLQ
    WAIT = "wait"  # unknown: leave the record IN_PROGRESS; its lease decides


def after_commit(verdict: Verdict, *, refused: str = "retry", review: bool) -> Step:
    """Where a commit's ending leads, by the policy (``review``: ``on_expired_lease=
    "quarantine"``, for business code whose effects cannot be fenced; ``refused``: what the
    refused staged write asked for). A TRANSIENT ending is committed again within the
    invocation by the store; one that stays TRANSIENT past those tries is CANCELED here.

    Business code that returned is run again only under ``"run"``: under ``"quarantine"``,
    every commit that certainly landed nothing goes to a person, who checks what business
    code did before redriving (the record is FAILED for review, as a quarantined takeover's
    is). An unknown ending is left to the lease: the takeover that follows is itself
    quarantined under ``"quarantine"``.
    """
    if verdict in (Verdict.MINE, Verdict.LANDED):
        return Step.DONE
    if verdict is Verdict.LEASE_LOST:
        return Step.LOST
    if verdict is Verdict.UNKNOWN:
        return Step.WAIT
    if review:
        return Step.REVIEW
    if verdict is Verdict.REFUSED and refused == "quarantine":
        return Step.QUARANTINE
    return Step.RETRY


def is_takeover(old: Record | None, *, retried: bool) -> bool:
    """Whether a claim that went through took over a claim that expired mid-flight.

    ``old`` is the live record the claim replaced (None: absent or past its retention). When
    the claim's response was lost and the SDK's retry found the claim's own record
    (``retried``), what was there before is no longer visible: any fence above 1 says an
    earlier claim existed, and the answer is then conservatively true.
    """
    if retried:
        return old is not None and old.fence > 1
    return old is not None and old.status == c.STATUS_IN_PROGRESS


def claim_expires_at(now_ms: int, lease_ms: int, retention_s: int) -> int:
    """The ``expires_at`` (epoch s) a claim writes: the retention, but never before the
    lease ends (+1 s). A record past ``expires_at`` counts as absent, so a retention shorter
    than the lease would otherwise let a second claim in while the first is still live."""
    lease_end_s = -(-(now_ms + lease_ms) // 1000)  # rounded up
    return max(now_ms // 1000 + retention_s, lease_end_s + 1)


def _quarantined_crash(previous: Record | None) -> bool:
    """Whether the record a claim replaced was FAILED for review: by a quarantined takeover,
    or by a commit that landed nothing under ``on_expired_lease="quarantine"`` (each writes
    the review fence; a takeover's record written before review fences were stored says
    ``LEASE_EXPIRED``)."""
    return (
        previous is not None
        and previous.status == c.STATUS_FAILED
        and (previous.review_fence is not None or previous.error == c.REASON_LEASE_EXPIRED)
    )


def review_reason(*, takeover: bool, previous: Record | None) -> str:
    """The ``once.reason`` of a claim quarantined for review: ``LEASE_EXPIRED`` for a
    takeover; for a copy that reached a record FAILED for review, the reason of that review
    (stored first in the record's error, ``<reason>: <detail>``)."""
    if not takeover and previous is not None and previous.error:
        reason = previous.error.split(":", 1)[0]
        if reason in c.REVIEW_REASONS:
            return reason
    return c.REASON_LEASE_EXPIRED


def _review_start(previous: Record) -> int:
    """The review fence of a record FAILED by a quarantined takeover; a record written
    before review fences were stored names its own fence."""
    return previous.review_fence if previous.review_fence is not None else previous.fence


def must_quarantine_takeover(
    *, takeover: bool, previous: Record | None, review_fence: int | None
) -> bool:
    """Under ``on_expired_lease="quarantine"``: whether a claim that went through must send
    its message to the DLQ instead of running business code.

    A takeover must, and so must a claim of a record that an earlier such quarantine marked
    FAILED (``LEASE_EXPIRED``), unless the message is one of those a person reviewed and
    redrove: ``review_fence`` is its ``once.fence`` (None when it carries no
    ``once.reason=LEASE_EXPIRED``), and it must name that record's crash: from the record's
    review fence (the first quarantine of the crash) to its fence. Every claim in that range
    quarantined a copy and ran nothing, so a review of any copy covers them all, and copies
    redriven in any order and batching converge: the first reviewed one runs, the others
    are duplicates. A review covers that crash only: a takeover is quarantined even for a
    reviewed message (the reviewed run's own effect may have happened before its invocation
    died), and a fence from before the crash (an older quarantine, or forged onto another
    message) reviews nothing.
    """
    unsent = _quarantined_crash(previous)
    reviewed = (
        unsent
        and previous is not None
        and review_fence is not None
        and _review_start(previous) <= review_fence <= previous.fence
    )
    return takeover or (unsent and not reviewed)


def review_fence_for(*, fence: int, takeover: bool, previous: Record | None) -> int:
    """The review fence a quarantined takeover's claim (at ``fence``) writes on the record
    and sends as ``once.fence``: its own fence for a new crash (a takeover), or the review
    fence of the crash it quarantines again (a copy of the operation that reached a record
    FAILED by an earlier quarantine and was not reviewed), so that every copy of one crash
    carries one fence."""
    if not takeover and previous is not None and _quarantined_crash(previous):
        return _review_start(previous)
    return fence
