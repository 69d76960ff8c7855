"""The harness's invariant checks on hand-written histories: each one must fire on the
violation it names, and stay quiet where only timing is ambiguous."""

from __future__ import annotations

from oncecli.chaos.invariants import (
    FinalState,
    ledger_not_once,
    lost,
    mismatch_executed,
    one_completed_result,
    stale_write_landed,
    two_live_owners,
)

S = 1_000_000_000  # one second in monotonic nanoseconds


def claim(claim_id: str, sent: float, landed: float, lease_ms: int | None = 4000) -> dict:
    return {
        "e": "claim",
        "item": "k",
        "claim": claim_id,
        "sent": int(sent * S),
        "landed": int(landed * S),
        "lease_ms": lease_ms,
    }


def finalize(claim_id: str, sent: float, landed: float, op: str = "complete") -> dict:
    return {
        "e": "finalize",
        "item": "k",
        "claim": claim_id,
        "op": op,
        "result": claim_id,
        "sent": int(sent * S),
        "landed": int(landed * S),
    }


def final(**overrides: object) -> FinalState:
    state = FinalState(
        sent={"h1", "h2"},
        in_dlq=set(),
        poison=set(),
        payments={},
        hid_keys={"h1": "p1", "h2": "p1"},
        ledger_entries={},
        balances={},
    )
    for name, value in overrides.items():
        setattr(state, name, value)
    return state


def test_a_zombie_write_sent_after_a_takeover_is_a_stale_write() -> None:
    history = [claim("a", 0, 0.01), claim("b", 5, 5.01), finalize("a", 7, 7.01)]
    assert stale_write_landed(history) == 1
    assert one_completed_result([*history, finalize("b", 6, 6.01)]) == 1


def test_a_finalize_in_flight_during_a_takeover_is_not_counted() -> None:
    history = [claim("a", 0, 0.01), finalize("a", 4.9, 5.2), claim("b", 5, 5.01)]
    assert stale_write_landed(history) == 0


def test_a_claim_answered_late_is_not_taken_for_a_newer_claim() -> None:
    # "b" was applied at once, then its process was stopped before the answer came back;
    # "a" took over after b's lease and finalized. b's late landing proves nothing.
    history = [claim("b", 0, 6.0), claim("a", 4.5, 4.51), finalize("a", 7, 7.01)]
    assert stale_write_landed(history) == 0


def test_a_claim_inside_a_live_lease_is_two_owners_but_not_after_it() -> None:
    assert two_live_owners([claim("a", 0, 0.01), claim("b", 1, 1.01)], skew_ms=800) == 1
    assert two_live_owners([claim("a", 0, 0.01), claim("b", 5, 5.01)], skew_ms=800) == 0
    released = [claim("a", 0, 0.01), finalize("a", 0.5, 0.51), claim("b", 1, 1.01)]
    assert two_live_owners(released, skew_ms=800) == 0


def test_claims_whose_order_is_uncertain_are_not_two_owners() -> None:
    # "a" was stopped between its write and the answer: it may have been applied first.
    assert two_live_owners([claim("a", 0, 6.0), claim("b", 5, 5.01)], skew_ms=800) == 0


def test_a_message_neither_acknowledged_nor_in_the_dlq_is_lost() -> None:
    history = [{"e": "ack", "hid": "h1"}]
    assert lost(history, final()) == 1
    assert lost(history, final(in_dlq={"h2"})) == 0


def test_a_second_payload_for_a_key_must_never_run() -> None:
    runs = [
        {"e": "exec", "key": "p1", "hash": "x", "t": 1},
        {"e": "exec", "key": "p1", "hash": "y", "t": 2},
    ]
    assert mismatch_executed(runs) == 1


def test_an_acknowledged_payment_missing_from_the_ledger_is_caught() -> None:
    history = [{"e": "ack", "hid": "h1"}]
    assert ledger_not_once(history, final()) == 1
    entries = {"p1": {"account": "a", "amount": 5}}
    assert ledger_not_once(history, final(ledger_entries=entries, balances={"a": 5})) == 0
    assert ledger_not_once(history, final(ledger_entries=entries, balances={"a": 10})) == 1
