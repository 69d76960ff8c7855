"""The invariants the harness checks, from the history a run recorded and its final state.

Each check returns a count of violations, so that a report can say "3 stale writes landed"
rather than pass or fail. The checks are conservative where timing is ambiguous. A write
is only known to have been applied somewhere between its ``sent`` and ``landed`` readings:
a process stopped (SIGSTOP, by any of its threads) between a write and its answer records
``landed`` late. So one write counts as after another only if it was *sent* after the other
had *landed*, and an overlap of requests in flight is never counted. Clock readings are
``time.monotonic_ns()``, which every process on one machine shares.

History events (dicts, one JSON line each; every one has ``t``, when it was written):

- ``claim``: ``item``, ``claim``, ``sent``, ``landed``, ``lease_ms`` (None: no lease)
- ``finalize``: ``item``, ``claim``, ``op`` (complete, fail, delete), ``result``, ``sent``,
  ``landed``
- ``finalize_sent``: a finalize leaving, answered or not: ``item``, ``claim``, ``sent``
- ``record_replaced``: a claim replaced a COMPLETED record, past its retention: ``item``,
  ``claim``, ``owing`` (the record still owed its outbox, which the claim removed)
- ``expired``: the harness let a record's retention pass (its TTL attribute set in the
  past, once its operation was over and the queues drained), for the reuse wave: ``item``,
  ``key``
- ``deliver``: a worker received messages: ``hids`` (harness ids, in batch order)
- ``exec``: business code started: ``key``, ``hash``, ``message``
- ``credit``: the ledger answered: ``key``, ``applied`` (now or earlier)
- ``ack``: a message was deleted from the queue as done: ``hid`` (harness id)
- ``delete_sent``: a worker sent the delete of messages its consumer said were done:
  ``hids``
- ``redrive``: the harness moved the DLQ back to the queue: ``hids`` (the ids moved); its
  ``t`` is read before the move starts
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Event = dict[str, Any]

INVARIANTS = (
    "one_completed_result",
    "stale_write_landed",
    "two_live_owners",
    "lost",
    "mismatch_executed",
    "poison_not_in_dlq",
    "ledger_not_once",
    "order_broken",
)

_NS_PER_S = 1_000_000_000
_NS_PER_MS = 1_000_000
#: A record's expiry is a whole epoch second: flooring it may take up to 1 s off.
_EXPIRY_FLOOR_S = 1


@dataclass
class FinalState:
    """What the run left behind."""

    sent: set[str]  # harness ids of every message produced
    in_dlq: set[str]  # harness ids found in the DLQ at the end
    poison: set[str]  # harness ids of poison messages
    payments: dict[str, dict[str, Any]]  # paymentId -> the first valid body produced
    hid_keys: dict[str, str]  # harness id -> paymentId (for valid payments)
    ledger_entries: dict[str, dict[str, Any]]  # paymentId -> ledger entry
    balances: dict[str, int]  # account -> balance
    keys: dict[str, str] = field(default_factory=dict)  # harness id -> paymentId (poison too)
    # FIFO message group -> its paymentIds in the order of their first send (standard: empty)
    groups: dict[str, list[str]] = field(default_factory=dict)


def _by(events: Iterable[Event], kind: str) -> list[Event]:
    return [e for e in events if e["e"] == kind]


def _claims_by_item(history: list[Event]) -> dict[str, list[Event]]:
    claims: dict[str, list[Event]] = defaultdict(list)
    for e in _by(history, "claim"):
        claims[e["item"]].append(e)
    return claims


def _expiries(history: list[Event]) -> dict[str, list[int]]:
    """item -> when the harness let its record's retention pass (``expired`` events: the
    reuse wave's records, expired once their operation was over and the queues drained)."""
    found: dict[str, list[int]] = defaultdict(list)
    for e in _by(history, "expired"):
        found[e["item"]].append(e["t"])
    return found


def _window_ns(retention_s: float, skew_ms: float) -> float:
    """How long a record kept ``retention_s`` surely lives past a time before its expiry
    was computed: the retention, less the expiry's flooring to a whole second and the skew
    between the clock that computed it and the one that finds it past."""
    return (retention_s - _EXPIRY_FLOOR_S) * _NS_PER_S - skew_ms * _NS_PER_MS


def one_completed_result(
    history: list[Event], *, retention_s: float | None = None, skew_ms: float = 0.0
) -> int:
    """At most one claim completes an item while its record lives (its result never changes).

    Without retention (None) a record lives forever: every completing claim after the first
    counts. With ``retention_s`` N, the completions are taken in the order their finalizes
    landed; the first opens a window at its claim's landing, and a later one counts only if
    its own claim landed within (N - 1) s - ``skew_ms`` of that. The expiry was computed
    after the opener's claim landed, floored to a whole second, on a clock that may be
    skewed; a later claim succeeds only past it, on its own skewed clock. A completion not
    counted opens the next window. Either way a record's lifetime also ends where the harness
    let its retention pass (``expired``, the reuse wave's records): a completion claimed
    after that is the next lifetime's first.
    """
    claim_landed: dict[tuple[str, str], int] = {}
    claim_sent: dict[tuple[str, str], int] = {}
    for e in _by(history, "claim"):
        at = (e["item"], e["claim"])
        claim_landed[at] = min(claim_landed.get(at, e["landed"]), e["landed"])
        claim_sent[at] = min(claim_sent.get(at, e["sent"]), e["sent"])
    completions: dict[str, dict[str, Event]] = defaultdict(dict)  # item -> claim -> finalize
    for f in _by(history, "finalize"):
        if f["op"] != "complete":
            continue
        mine = completions[f["item"]]
        if f["claim"] not in mine or f["landed"] < mine[f["claim"]]["landed"]:
            mine[f["claim"]] = f
    expiries = _expiries(history)
    count = 0
    for item, by_claim in completions.items():
        if retention_s is None:
            # One completion per lifetime of the record: a lifetime ends where the harness
            # let its retention pass (``expired``), and a completion whose claim was sent
            # after that belongs to the next.
            lives: dict[int, int] = defaultdict(int)
            for f in by_claim.values():
                at = (item, f["claim"])
                sent_at: int = claim_sent[at] if at in claim_sent else f["sent"]
                ended = [t for t in expiries.get(item, []) if t < sent_at]
                lives[len(ended)] += 1
            count += sum(n - 1 for n in lives.values())
            continue
        window = _window_ns(retention_s, skew_ms)
        opened: int | None = None  # the window's claim landing (None: not in the history)
        for n, f in enumerate(sorted(by_claim.values(), key=lambda f: f["landed"])):
            claimed = claim_landed.get((item, f["claim"]))
            # A claim missing from the history was applied before its finalize was sent.
            applied_by = f["sent"] if claimed is None else claimed
            renewed = opened is not None and any(
                opened < t < applied_by for t in expiries.get(item, ())
            )
            if n and opened is not None and applied_by < opened + window and not renewed:
                count += 1
            else:
                opened = claimed
    return count


def stale_write_landed(history: list[Event]) -> int:
    """A finalize landed although a newer claim on its item had surely been applied first.

    The newer claim must have been sent after the finalizer's own claim landed (so it was
    applied after it) and must have landed before the finalize was sent.
    """
    claims = _claims_by_item(history)
    owner_landed = {(e["item"], e["claim"]): e["landed"] for e in _by(history, "claim")}
    count = 0
    for f in _by(history, "finalize"):
        mine = owner_landed.get((f["item"], f["claim"]))
        if mine is None:
            continue
        if any(
            c["claim"] != f["claim"] and mine < c["sent"] and c["landed"] < f["sent"]
            for c in claims[f["item"]]
        ):
            count += 1
    return count


def two_live_owners(history: list[Event], skew_ms: float) -> int:
    """A claim was applied while an earlier claim on its item still held a live lease.

    Only certain cases count. The later claim must have been sent after the earlier one
    landed (so it was surely applied after it) and must have landed while the earlier
    lease was live: from the earlier claim's send time for ``lease_ms`` less the largest
    clock skew, and until the earlier claim sent its finalize. A process stopped between
    a write and its answer therefore never counts against a consumer. Nor does one killed
    between them: a finalize counts from its send (``finalize_sent``), answered or not,
    because a write in flight when its process dies may still land (a poison payment's
    FAILED, which frees the record for the next claim at once).
    """
    released: dict[tuple[str, str], int] = {}
    for f in history:
        if f["e"] not in ("finalize", "finalize_sent"):
            continue
        key = (f["item"], f["claim"])
        released[key] = min(released.get(key, f["sent"]), f["sent"])
    claims = _claims_by_item(history)
    count = 0
    for item_claims in claims.values():
        for later in item_claims:
            for earlier in item_claims:
                if later["sent"] <= earlier["landed"]:
                    continue
                lease = earlier["lease_ms"]
                live_until = (
                    float("inf")
                    if lease is None
                    else earlier["sent"] + (lease - skew_ms) * _NS_PER_MS
                )
                until = min(
                    live_until, released.get((earlier["item"], earlier["claim"]), float("inf"))
                )
                if later["landed"] < until:
                    count += 1
                    break
    return count


def lost_hids(history: list[Event], final: FinalState) -> set[str]:
    """The harness ids of messages neither done (acknowledged) nor in the DLQ.

    A message whose delete a worker sent after the consumer's success counts as done, its
    ``ack`` recorded or not: the run ends once the queue is empty, so such a message was
    deleted, by that delete or by a later delivery's (a worker deletes only what its
    consumer says is done); and the harness stops the workers then, so one may be killed
    between its delete's landing and its ``ack``."""
    done = {e["hid"] for e in _by(history, "ack")}
    done |= {hid for e in _by(history, "delete_sent") for hid in e["hids"]}
    return final.sent - done - final.in_dlq


def lost(history: list[Event], final: FinalState) -> int:
    """Messages neither done (acknowledged) nor in the DLQ."""
    return len(lost_hids(history, final))


def mismatch_executed(
    history: list[Event],
    *,
    retention_s: float | None = None,
    skew_ms: float = 0.0,
    longest_run_s: float = 0.0,
) -> int:
    """Business code ran for a key with a payload other than the one its record fixed.

    Without retention (None) that is the first payload the key ran with. With
    ``retention_s`` N the record may be gone, and another payload may run, from the run
    that fixed the current payload + (N - ``longest_run_s`` - 1) s - ``skew_ms`` on: that
    record was claimed at most ``longest_run_s`` before its business code ran. Such a run
    fixes its own payload, and the next window is measured from it. A run after the harness
    let the record's retention pass (``expired``) may carry another payload too.
    """
    fixed: dict[str, Event] = {}  # key -> the run that fixed its current payload
    expiries: dict[str, list[int]] = defaultdict(list)  # key -> the harness's expiries
    for x in _by(history, "expired"):
        expiries[x["key"]].append(x["t"])
    count = 0
    for e in sorted(_by(history, "exec"), key=lambda e: e["t"]):
        first = fixed.setdefault(e["key"], e)
        if first["hash"] == e["hash"]:
            continue
        if any(first["t"] < t < e["t"] for t in expiries.get(e["key"], ())):
            fixed[e["key"]] = e  # the record's retention passed between: a new payload
            continue
        claimed_from = first["t"] - longest_run_s * _NS_PER_S
        if retention_s is not None and e["t"] >= claimed_from + _window_ns(retention_s, skew_ms):
            fixed[e["key"]] = e
        else:
            count += 1
    return count


def poison_not_in_dlq(final: FinalState) -> int:
    return len(final.poison - final.in_dlq)


def ledger_not_once(history: list[Event], final: FinalState) -> int:
    """Every payment acknowledged as done is credited once; no balance is off."""
    acked_keys = {
        final.hid_keys[e["hid"]] for e in _by(history, "ack") if e["hid"] in final.hid_keys
    }
    credited_now: dict[str, int] = defaultdict(int)
    for e in _by(history, "credit"):
        if e["applied"] == "now":
            credited_now[e["key"]] += 1
    count = sum(1 for key in acked_keys if key not in final.ledger_entries)
    count += sum(n - 1 for n in credited_now.values() if n > 1)
    expected: dict[str, int] = defaultdict(int)
    for entry in final.ledger_entries.values():
        expected[entry["account"]] += entry["amount"]
    count += sum(
        1
        for account in set(expected) | set(final.balances)
        if expected.get(account, 0) != final.balances.get(account, 0)
    )
    return count


def _settled(history: list[Event], final: FinalState) -> dict[str, float]:
    """paymentId -> the earliest it may have stopped holding its group: its first credit
    (its effect done) or acknowledgement, or its move to the DLQ.

    SQS moves a message to the DLQ at a receive after its last delivery, so that delivery
    bounds the move from below: the last one before each redrive that moved it back, and
    for one in the DLQ at the end its last one of all; one never delivered counts from 0.
    """
    settled: dict[str, float] = {}

    def settle(key: str | None, t: float) -> None:
        if key is not None:
            settled[key] = min(settled.get(key, t), t)

    delivered: dict[str, list[int]] = defaultdict(list)
    for e in history:
        if e["e"] == "credit":
            settle(e["key"], e["t"])
        elif e["e"] == "ack":
            settle(final.keys.get(e["hid"]), e["t"])
        elif e["e"] == "deliver":
            for hid in e["hids"]:
                delivered[hid].append(e["t"])

    def last_delivery(hid: str, before: float) -> int:
        return max((t for t in delivered[hid] if t < before), default=0)

    for e in _by(history, "redrive"):
        for hid in e["hids"]:
            settle(final.keys.get(hid), last_delivery(hid, e["t"]))
    for hid in final.in_dlq:
        settle(final.keys.get(hid), last_delivery(hid, float("inf")))
    return settled


def order_broken(history: list[Event], final: FinalState) -> int:
    """A payment of a FIFO group ran while one sent before it in its group was still pending.

    Pending: not yet credited, acknowledged or in the DLQ, as early as ``_settled`` can
    place that (a payment never settled stays pending). Each payment counts once, at its
    first run. One that went to the DLQ may run after later ones once redriven. A standard
    queue (no groups) has no order to break.
    """
    if not final.groups:
        return 0
    first_run: dict[str, int] = {}
    for e in _by(history, "exec"):
        first_run[e["key"]] = min(first_run.get(e["key"], e["t"]), e["t"])
    settled = _settled(history, final)
    count = 0
    for keys in final.groups.values():
        pending_until = float("-inf")  # the latest settling of the group's earlier payments
        for key in keys:
            ran = first_run.get(key)
            if ran is not None and pending_until > ran:
                count += 1
            pending_until = max(pending_until, settled.get(key, float("inf")))
    return count


def check(
    history: list[Event],
    final: FinalState,
    skew_ms: float,
    *,
    retention_s: float | None = None,
    longest_run_s: float = 0.0,
) -> dict[str, int]:
    """Every invariant's violation count for one consumer's run.

    ``retention_s``: how long a finished record lives (None: forever); ``longest_run_s``:
    the longest an invocation can take from its claim to its business code.
    """
    return {
        "one_completed_result": one_completed_result(
            history, retention_s=retention_s, skew_ms=skew_ms
        ),
        "stale_write_landed": stale_write_landed(history),
        "two_live_owners": two_live_owners(history, skew_ms),
        "lost": lost(history, final),
        "mismatch_executed": mismatch_executed(
            history, retention_s=retention_s, skew_ms=skew_ms, longest_run_s=longest_run_s
        ),
        "poison_not_in_dlq": poison_not_in_dlq(final),
        "ledger_not_once": ledger_not_once(history, final),
        "order_broken": order_broken(history, final),
    }


#: The two-hop workload's invariants (``once-atomic``, ``powertools-two-hop``; ``twohop.py``),
#: checked on the final state beside the ones above.
TWO_HOP_INVARIANTS = (
    "credit_partial",
    "credit_twice",
    "notified_not_once",
    "owed_at_end",
    "reuse_not_applied",
    "notify_conflict",
)


def credit_partial(state: Any, *, retention_s: float | None = None) -> int:
    """A credit that landed in part. Per account: its balance is not the sum of its entries'
    amounts, each as many times as it was applied (an entry without its balance change, or
    a balance change without its entry). Per payment, for once's records: an entry whose
    record is not COMPLETED, or a COMPLETED record without its entry (a record swept with
    its retention is not judged, nor one not COMPLETED whose key's earlier record expired:
    the entry then holds that earlier operation's credit)."""
    expected: dict[str, int] = defaultdict(int)
    for payment_id, (account, _, _) in state.entries.items():
        expected[account] += state.total(payment_id)
    count = sum(
        1
        for account in set(expected) | set(state.balances)
        if expected.get(account, 0) != state.balances.get(account, 0)
    )
    if state.records is not None:
        credited = {key for key, (_, _, applied) in state.entries.items() if applied}
        for key, status in state.records.items():
            if status == "COMPLETED" and key not in credited:
                count += 1
            elif status != "COMPLETED" and key in credited and key not in state.expired:
                # Unless an earlier record of the key expired (swept, or replaced by a claim
                # past its retention): its operation's credit stays, under the new one's
                # record, still running or failed.
                count += 1
        if retention_s is None:
            count += len(credited - set(state.records) - state.expired)
    return count


def credit_twice(state: Any, *, retention_s: float | None = None) -> int:
    """A payment credited more than once: its entry's count is above 1, and above 1 more
    for each time the harness let its record's retention pass (the reuse wave: a new
    operation on the key). With a retention the record of a payment may be swept and the
    payment credited anew by design; then ``one_completed_result`` stands for this check
    (once commits each credit with its record's completion), and this one counts nothing."""
    if retention_s is not None:
        return 0
    expired = getattr(state, "harness_expired", {})
    return sum(
        1 for key, (_, _, applied) in state.entries.items() if applied > 1 + expired.get(key, 0)
    )


def notified_not_once(state: Any) -> int:
    """Every operation's notification is applied by hop 2 exactly once: a payment credited N
    times (its entry's ``applied``: one operation, or more when its id was used again after
    its record's retention) is notified N times, never more, and never fewer unless the
    missing ones wait for a person (in hop 2's DLQ; or the payment message in hop 1's DLQ
    while its record owes the notification) or were owed by a record that expired owing
    them (``expired_owing``: a retention shorter than the message's stay away, which only
    the harness's short ``--retention-s`` makes); and no notification is applied for a
    payment never credited. Counted per payment."""
    count = 0
    parked_owing = state.parked & state.owing_payments()
    for key in set(state.entries) | set(state.notified):
        applied = state.entries[key][2] if key in state.entries else 0
        times = state.notified.get(key, 0)
        waiting = state.in_notify_dlq(key) + (key in parked_owing) + state.expired_owing.get(key, 0)
        if times > applied or times + waiting < applied:
            count += 1
    return count


def owed_at_end(state: Any) -> int:
    """Nothing owed at the end: no record still holds an outbox unless its payment message
    is in hop 1's DLQ (the runbook's redrive sends what it owes), and the notifications
    queue holds no notification hop 2 has not applied (``notify_left``; a late copy of an
    applied one is ``notified_not_once``'s to judge, and owes nothing)."""
    parked_owing = state.owing_payments() & state.parked
    return len(state.owed) - len(parked_owing) + state.notify_left


def reuse_not_applied(state: Any) -> int:
    """A payment id used again after its hop-1 record's retention (the workload's ``reuse``
    sends, made once the harness saw that record swept) is a second operation: once its
    resend is acknowledged, its entry is credited twice, and hop 2 applied both
    notifications (the second one's identity is new, though hop 2's record of the first is
    still live), unless one waits for a person as ``notified_not_once`` allows. Counted per
    reused payment; 0 in a run without reuse."""
    count = 0
    for key in state.reuse_acked:
        applied = state.entries[key][2] if key in state.entries else 0
        times = state.notified.get(key, 0)
        waiting = state.in_notify_dlq(key) + state.expired_owing.get(key, 0)
        if applied < 2 or times + waiting < 2:
            count += 1
    return count


def notify_conflict(state: Any) -> int:
    """Hop 2 judged a notification CONFLICT: a key it had recorded with another payload. Every
    copy of one outbox message carries one identity and one payload (a resend after a lost
    clear, an SDK retry, SNS's own fields of each publish aside), and a later operation on
    the same key gets a new identity: a CONFLICT there is once mistaking two messages for one
    (or one for two), never a fault of the run."""
    return int(state.notify_conflicts)


def check_two_hop(state: Any, *, retention_s: float | None = None) -> dict[str, int]:
    """The two-hop invariants' violation counts for one run (``twohop.TwoHopState``)."""
    return {
        "credit_partial": credit_partial(state, retention_s=retention_s),
        "credit_twice": credit_twice(state, retention_s=retention_s),
        "notified_not_once": notified_not_once(state),
        "owed_at_end": owed_at_end(state),
        "reuse_not_applied": reuse_not_applied(state),
        "notify_conflict": notify_conflict(state),
    }


#: ``once-staged``'s own invariant (``effects="staged"``), checked beside the two-hop ones.
#: ``mismatch_executed`` is not among its invariants: under ``effects="staged"`` business code
#: runs before the record is read, so a copy with another payload runs by design, and its
#: commit is refused (CONFLICT); its effect landing is what ``credit_twice`` and
#: ``credit_partial`` catch (two payloads applied count 2). The harness reports how often it
#: ran (``mismatch_ran``).
STAGED_INVARIANTS = ("staged_not_one_write",)


def staged_not_one_write(history: list[Event], state: Any) -> int:
    """Under ``effects="staged"`` a record is written once, COMPLETED by its commit (and its
    outbox cleared after): never claimed (no ``IN_PROGRESS``, so no lease and no fence to
    take over), never FAILED (business code that raises writes nothing). Counts every
    claim and every finalize other than a staged commit in the history, and every record
    of either hop left in the table in another status than COMPLETED."""
    claims = len(_by(history, "claim"))
    others = sum(
        1 for f in _by(history, "finalize") if not (f.get("staged") and f["op"] == "complete")
    )
    left = sum(n for status, n in state.statuses.items() if status != "COMPLETED")
    return claims + others + left


def check_staged(history: list[Event], state: Any) -> dict[str, int]:
    """``once-staged``'s own invariant's violation count (``twohop.TwoHopState``)."""
    return {"staged_not_one_write": staged_not_one_write(history, state)}
