"""The invariants the harness checks, from the history a run recorded and its final state.

Each check returns a count of violations, so that a report can say "3 stale writes landed"
rather than pass or fail. The checks are conservative where timing is ambiguous. A write
is only known to have been applied somewhere between its ``sent`` and ``landed`` readings:
a process stopped (SIGSTOP, by any of its threads) between a write and its answer records
``landed`` late. So one write counts as after another only if it was *sent* after the other
had *landed*, and an overlap of requests in flight is never counted. Clock readings are
``time.monotonic_ns()``, which every process on one machine shares.

History events (dicts, one JSON line each):

- ``claim``: ``item``, ``claim``, ``sent``, ``landed``, ``lease_ms`` (None: no lease)
- ``finalize``: ``item``, ``claim``, ``op`` (complete, fail, delete), ``result``, ``sent``,
  ``landed``
- ``exec``: business code started: ``key``, ``hash``, ``message``
- ``credit``: the ledger answered: ``key``, ``applied`` (now or earlier)
- ``ack``: a message was deleted from the queue as done: ``hid`` (harness id)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
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
)


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


def _by(events: Iterable[Event], kind: str) -> list[Event]:
    return [e for e in events if e["e"] == kind]


def _claims_by_item(history: list[Event]) -> dict[str, list[Event]]:
    claims: dict[str, list[Event]] = defaultdict(list)
    for e in _by(history, "claim"):
        claims[e["item"]].append(e)
    return claims


def one_completed_result(history: list[Event]) -> int:
    """At most one claim ever completes an item (its result then never changes)."""
    completers: dict[str, set[str]] = defaultdict(set)
    for e in _by(history, "finalize"):
        if e["op"] == "complete":
            completers[e["item"]].add(e["claim"])
    return sum(len(claims) - 1 for claims in completers.values() if len(claims) > 1)


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
    a write and its answer therefore never counts against a consumer.
    """
    released: dict[tuple[str, str], int] = {}
    for f in _by(history, "finalize"):
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
                    else earlier["sent"] + (lease - skew_ms) * 1_000_000
                )
                until = min(
                    live_until, released.get((earlier["item"], earlier["claim"]), float("inf"))
                )
                if later["landed"] < until:
                    count += 1
                    break
    return count


def lost(history: list[Event], final: FinalState) -> int:
    """Messages neither done (acknowledged) nor in the DLQ."""
    acked = {e["hid"] for e in _by(history, "ack")}
    return len(final.sent - acked - final.in_dlq)


def mismatch_executed(history: list[Event]) -> int:
    """Business code ran for a key with a payload other than the first one it ran with."""
    first: dict[str, str] = {}
    count = 0
    for e in sorted(_by(history, "exec"), key=lambda e: e["t"]):
        if first.setdefault(e["key"], e["hash"]) != e["hash"]:
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


def check(history: list[Event], final: FinalState, skew_ms: float) -> dict[str, int]:
    """Every invariant's violation count for one consumer's run."""
    return {
        "one_completed_result": one_completed_result(history),
        "stale_write_landed": stale_write_landed(history),
        "two_live_owners": two_live_owners(history, skew_ms),
        "lost": lost(history, final),
        "mismatch_executed": mismatch_executed(history),
        "poison_not_in_dlq": poison_not_in_dlq(final),
        "ledger_not_once": ledger_not_once(history, final),
    }
