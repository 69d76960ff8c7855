"""The harness's invariant checks on hand-written histories: each one must fire on the
violation it names, and stay quiet where only timing is ambiguous."""

from __future__ import annotations

import json
from typing import Any

from proof.chaos.invariants import (
    INVARIANTS,
    FinalState,
    check,
    ledger_not_once,
    lost,
    mismatch_executed,
    notified_not_once,
    one_completed_result,
    order_broken,
    owed_at_end,
    stale_write_landed,
    two_live_owners,
)
from proof.chaos.twohop import TwoHopState

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


def test_a_second_completion_inside_the_retention_is_counted_but_not_after_it() -> None:
    # Retention 10 s, skew 0.8 s: the record surely lives until 0.01 + 9 - 0.8 = 8.21 s.
    first = [claim("a", 0, 0.01), finalize("a", 0.5, 0.51)]
    inside = [*first, claim("b", 8.0, 8.1), finalize("b", 8.5, 8.51)]
    after = [*first, claim("b", 8.0, 8.3), finalize("b", 8.5, 8.51)]
    assert one_completed_result(inside, retention_s=10, skew_ms=800) == 1
    assert one_completed_result(after, retention_s=10, skew_ms=800) == 0
    assert one_completed_result(after) == 1  # records that never expire: as before


def test_an_allowed_second_completion_opens_the_next_retention_window() -> None:
    history = [
        claim("a", 0, 0.01),
        finalize("a", 0.5, 0.51),
        claim("b", 20, 20.01),
        finalize("b", 20.5, 20.51),
        claim("c", 25, 25.01),
        finalize("c", 25.5, 25.51),
    ]
    assert one_completed_result(history, retention_s=10, skew_ms=800) == 1


def test_a_zombie_completion_after_a_takeover_is_counted_whatever_the_retention() -> None:
    history = [claim("a", 0, 0.01), claim("b", 5, 5.01), finalize("b", 6, 6.01)]
    zombie = [*history, finalize("a", 7, 7.01)]
    assert one_completed_result(zombie, retention_s=10, skew_ms=800) == 1


def run(key: str, t: float, payload: str = "x") -> dict:
    return {"e": "exec", "key": key, "hash": payload, "message": "m", "t": int(t * S)}


def test_another_payload_may_run_only_once_the_record_has_expired() -> None:
    # Retention 10 s, 4 s from claim to business code, skew 0.8 s: the record that fixed
    # "x" surely lives until 0 - 4 + 9 - 0.8 = 4.2 s.
    window = {"retention_s": 10, "skew_ms": 800, "longest_run_s": 4}
    assert mismatch_executed([run("p1", 0), run("p1", 4.1, "y")], **window) == 1
    assert mismatch_executed([run("p1", 0), run("p1", 4.3, "y")], **window) == 0
    assert mismatch_executed([run("p1", 0), run("p1", 100, "y")]) == 1  # never expires
    # "y" fixed the payload at 4.3 s: "x" again before 8.5 s is a mismatch.
    assert mismatch_executed([run("p1", 0), run("p1", 4.3, "y"), run("p1", 6, "x")], **window) == 1


def deliver(t: float, *hids: str) -> dict:
    return {"e": "deliver", "count": len(hids), "hids": list(hids), "t": int(t * S)}


def done(key: str, hid: str, t: float) -> list[dict]:
    """A payment delivered, run, credited and acknowledged."""
    return [
        deliver(t, hid),
        run(key, t + 0.1),
        {"e": "credit", "key": key, "applied": "now", "t": int((t + 0.2) * S)},
        {"e": "ack", "hid": hid, "t": int((t + 0.3) * S)},
    ]


def retried(key: str, hid: str, *times: float) -> list[dict]:
    """A payment delivered and run at each time, failing every time."""
    return [event for t in times for event in (deliver(t, hid), run(key, t + 0.1))]


def fifo(**overrides: object) -> FinalState:
    return final(
        **{
            "sent": {"h1", "h2", "h3"},
            "keys": {"h1": "p1", "h2": "p2", "h3": "p3"},
            "groups": {"acct-a": ["p1", "p2"], "acct-b": ["p3"]},
            **overrides,
        }
    )


def test_payments_of_a_group_run_in_the_order_they_were_sent() -> None:
    assert order_broken([*done("p1", "h1", 1), *done("p2", "h2", 2)], fifo()) == 0
    assert order_broken([*done("p2", "h2", 1), *done("p1", "h1", 2)], fifo()) == 1


def test_a_payment_running_while_an_earlier_one_still_retries_breaks_the_order() -> None:
    history = [*retried("p1", "h1", 1, 6, 11, 16, 21), *done("p2", "h2", 7)]
    assert order_broken(history, fifo(in_dlq={"h1"})) == 1


def test_a_payment_running_after_the_earlier_one_went_to_the_dlq_keeps_the_order() -> None:
    history = [*retried("p1", "h1", 1, 6, 11, 16, 21), *done("p2", "h2", 30)]
    assert order_broken(history, fifo(in_dlq={"h1"})) == 0


def test_a_redriven_payment_may_run_after_later_ones() -> None:
    redrive = {"e": "redrive", "hids": ["h1"], "t": int(25 * S)}
    history = [*retried("p1", "h1", 1, 6, 11, 16, 21), redrive, *done("p1", "h1", 35)]
    assert order_broken([*history, *done("p2", "h2", 30)], fifo()) == 0
    # Before its move to the DLQ (after its delivery at 21 s) it still held the group.
    assert order_broken([*history, *done("p2", "h2", 12)], fifo()) == 1


def test_a_payment_after_a_neighbour_credited_but_not_acknowledged_keeps_the_order() -> None:
    # One batch: p1 credited, p2 run, then the worker died before deleting either.
    credited = [
        deliver(1, "h1", "h2"),
        run("p1", 1.1),
        {"e": "credit", "key": "p1", "applied": "now", "t": int(1.2 * S)},
        run("p2", 1.3),
    ]
    assert order_broken([*credited, *done("p1", "h1", 7), *done("p2", "h2", 8)], fifo()) == 0


def test_a_dlq_message_never_delivered_does_not_hold_its_group() -> None:
    assert order_broken(done("p2", "h2", 1), fifo(in_dlq={"h1"})) == 0


def test_groups_do_not_order_each_other() -> None:
    history = [*retried("p1", "h1", 1, 6, 11, 16, 21), *done("p3", "h3", 7)]
    assert order_broken(history, fifo(in_dlq={"h1"})) == 0


def test_a_standard_queue_has_no_order_to_break() -> None:
    history = [*done("p2", "h2", 1), *done("p1", "h1", 2)]
    assert order_broken(history, final(keys={"h1": "p1", "h2": "p2"})) == 0


def test_check_reports_every_invariant() -> None:
    assert set(check([], fifo(), skew_ms=800, retention_s=10, longest_run_s=4)) == set(INVARIANTS)


# --- the two-hop workload (once-atomic) ------------------------------------------------------


def two_hop_state(**overrides: Any) -> TwoHopState:
    """Payment p1 credited and notified once; p2 credited, its notification owed."""
    state = TwoHopState(
        entries={"p1": ("a", 5, 1), "p2": ("a", 7, 1)},
        balances={"a": 12},
        notified={"p1": 1},
        records={"p1": "COMPLETED", "p2": "COMPLETED"},
        owed=["pay#p2"],
        hop1_prefix="pay",
    )
    for name, value in overrides.items():
        setattr(state, name, value)
    return state


def test_an_owed_notification_whose_payment_was_acknowledged_is_a_violation() -> None:
    state = two_hop_state()
    assert notified_not_once(state) == 1
    assert owed_at_end(state) == 1


def test_an_owed_notification_whose_payment_waits_in_the_dlq_is_no_violation() -> None:
    # The runbook's redrive delivers the payment again, which sends what its record owes.
    state = two_hop_state(parked={"p2"})
    assert notified_not_once(state) == 0
    assert owed_at_end(state) == 0


def test_a_parked_payment_whose_record_owes_nothing_must_still_have_been_notified() -> None:
    state = two_hop_state(parked={"p2"}, owed=[])
    assert notified_not_once(state) == 1
    assert owed_at_end(state) == 0


def test_a_notification_applied_twice_is_a_violation_wherever_its_payment_is() -> None:
    state = two_hop_state(notified={"p1": 2, "p2": 1}, owed=[], parked={"p1"})
    assert notified_not_once(state) == 1


def test_a_late_copy_of_an_applied_notification_is_not_owed_but_an_unapplied_one_is(
    aws,
) -> None:
    # What the harness reads at the end (harness._left_unapplied): a zombie's late re-send
    # of p1, which hop 2 applied, owes nothing; p2's notification, never applied, is owed.
    from proof.chaos.harness import _left_unapplied

    url = aws.sqs.create_queue(QueueName="notify-left")["QueueUrl"]
    for payment in ("p1", "p1", "p2"):
        aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"paymentId": payment}))

    assert _left_unapplied(aws.sqs, url, {"p1": 1}) == 1
    assert _left_unapplied(aws.sqs, url, {}) == 0  # read and deleted: nothing is left
