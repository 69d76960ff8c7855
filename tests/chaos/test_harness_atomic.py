"""The harness's two-hop workload on DynamoDB Local: a credit committed with the record, a
notification through the outbox to a second once consumer keyed on ``SOURCE_KEY``; built
two-phase (``once-atomic``) and with ``effects="staged"`` (``once-staged``: no claim, one
write per message), the two run side by side under every fault of the two-hop runs. Beside
them, the same chain with an SNS hop (``once-atomic-sns``: hop 1 publishes to a topic that
feeds hop 2's queue, raw message delivery off), some of whose payment ids are sent again
once their hop-1 records' retention has passed: new operations on old keys, which hop 2,
whose records of the first ones are still live, must apply too. And the same chain through
EventBridge (``once-atomic-events``: hop 1 puts the notification on a bus as an event's
detail, a rule sends each whole event to hop 2's queue, hop 2 keyed on ``SOURCE_KEY``), under
EventBridge's own faults as well."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from tests.chaos.rates import EVENTS_RATES, REUSE, TWO_HOP_RATES

#: Every fault of the two-hop runs (a staged copy makes no claim to be killed after).
TWO_HOP_FAULTS = (
    "kill_after_claim",
    "kill_after_effect",
    "kill_before_finalize",
    "kill_before_clear",
    "pause",
    "throttle",
    "lost_response",
    "send_failed",
    "send_duplicated",
    "redriven",
    "outage",
    "outage_windows",
    "delete_failed",
    "short_visibility",
)
#: The SNS chain's size: "deliveries to aim for" (``chaos``), about 480 messages sent.
SNS_DELIVERIES = 600
#: The EventBridge chain's: about 460 messages sent.
EVENTS_DELIVERIES = 600
#: The EventBridge chain's own faults: an entry of PutEvents failed while the others were
#: put, a clear throttled past the SDK's retries.
EVENTS_FAULTS = ("event_entry_failed", "throttle_clear")


@pytest.fixture(scope="module")
def runs(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    # Kept (pytest keeps its last temporary directories): a failure names it.
    kept = tmp_path_factory.mktemp("chaos-two-hop")
    # The SNS and EventBridge chains run beside the pair (each run mostly waits on visibility
    # timeouts, backoffs and retention), so the module takes about as long as its longest run.
    with ThreadPoolExecutor(3, thread_name_prefix="two-hop") as pool:
        pair = pool.submit(
            chaos,
            200,
            seed=14,
            endpoints=endpoints,
            workers=3,
            rates=TWO_HOP_RATES,
            implementations=("once-atomic", "once-staged"),
            side_by_side=True,
            history_dir=kept / "sqs",
        )
        sns = pool.submit(
            chaos,
            SNS_DELIVERIES,
            seed=15,
            endpoints=endpoints,
            workers=4,  # its ~480 messages drain in about the pair's time, two of them
            rates=TWO_HOP_RATES,
            implementations=("once-atomic-sns",),
            reuse=REUSE,
            history_dir=kept / "sns",
        )
        events = pool.submit(
            chaos,
            EVENTS_DELIVERIES,
            seed=16,
            endpoints=endpoints,
            workers=4,
            rates=EVENTS_RATES,
            implementations=("once-atomic-events",),
            history_dir=kept / "events",
        )
        done = [*pair.result(), *sns.result(), *events.result()]
    return {run.impl: run for run in done}


def test_once_atomic_commits_each_credit_and_notification_once_under_every_fault(
    runs: dict[str, Run],
) -> None:
    """The credit committed with the record (``attempt.write``), the notification sent
    through the outbox to a second queue and applied by a second once consumer keyed on
    ``SOURCE_KEY``: no partial credit, none twice, each notification applied once, nothing
    owed at the end, nothing lost; and every invariant of the one-hop consumers as well."""
    atomic = runs["once-atomic"]
    figures = atomic.figures()
    assert atomic.deliveries >= 150, figures
    assert set(atomic.violations) >= {
        "credit_partial",
        "credit_twice",
        "notified_not_once",
        "owed_at_end",
        "ledger_not_once",
        "notify_conflict",
    }, figures
    assert atomic.violations == dict.fromkeys(atomic.violations, 0), figures
    assert atomic.lost == 0, figures
    assert atomic.notifications["executions"] > 0, figures
    for fault in TWO_HOP_FAULTS:
        assert atomic.faults.get(fault, 0) > 0, f"{fault} was never injected\n{figures}"
    # A refused send leaves the record owing its notification: a later delivery sent it.
    assert atomic.faults["outcome_owed"] > 0, figures


def test_once_staged_commits_each_credit_and_notification_once_under_every_fault(
    runs: dict[str, Run],
) -> None:
    """Copies in flight all run business code under ``effects="staged"``; exactly one
    commit lands per key: no credit partial or twice, each notification applied once,
    nothing owed at the end, nothing lost, no record ever claimed or FAILED."""
    staged = runs["once-staged"]
    figures = staged.figures()
    assert staged.deliveries >= 150, figures
    assert staged.violations == dict.fromkeys(staged.violations, 0), figures
    assert staged.lost == 0, figures
    assert staged.notifications["executions"] > 0, figures
    assert set(staged.violations) >= {
        "credit_partial",
        "credit_twice",
        "notified_not_once",
        "owed_at_end",
        "ledger_not_once",
        "one_completed_result",
        "staged_not_one_write",
    }, figures
    assert "staged_not_one_write" not in runs["once-atomic"].violations, figures
    # A mismatched copy runs business code before its commit is refused: measured, and its
    # effect never landing is credit_twice's and credit_partial's to check.
    assert "mismatch_executed" not in staged.violations, figures
    assert staged.faults["workload_mismatch"] > 0, figures
    # Every fault of the two-hop runs but the kill after a claim: a staged copy makes none.
    # Its pause comes before its commit, and lasts until another copy's commit landed.
    for fault in TWO_HOP_FAULTS:
        if fault != "kill_after_claim":
            assert staged.faults.get(fault, 0) > 0, f"{fault} was never injected\n{figures}"
    assert staged.faults.get("kill_after_claim", 0) == 0, figures
    # A copy's commit refused by the one that landed: seed 14 sends three payments of its
    # first wave again in the second (``sequential``), after the first wave was done.
    assert staged.outcomes.get("duplicate", 0) + staged.outcomes.get("owed_sent", 0) > 0, figures
    assert staged.faults["outcome_owed"] > 0, figures
    # One write per new message: the two-phase consumer claims first as well.
    atomic_updates = runs["once-atomic"].dynamodb_calls["UpdateItem"]
    assert staged.dynamodb_calls.get("UpdateItem", 0) < atomic_updates, (
        f"{figures}\n{runs['once-atomic'].figures()}"
    )


def test_once_through_sns_applies_every_operation_once_past_hop_1_s_retention(
    runs: dict[str, Run],
) -> None:
    """Hop 1's outbox publishes to an SNS topic; hop 2's queue gets SNS's notification
    document (raw message delivery off), a message id, timestamp and signature of its own on
    every publish (a resend of one outbox message, and the SDK's retry of a publish whose
    answer was lost, included); hop 2 is keyed on ``SOURCE_KEY`` with no ``envelope=``. Once
    the first two waves are done, the harness lets the retention of some first-wave
    payments' hop-1 records pass (each done: expired, then swept), and sends those ids
    again: each is a second operation, credited again and notified under a new identity,
    which hop 2 applies although its record of the first notification is live (once's
    default retention). Every operation's notification applied exactly once, none judged a
    CONFLICT, nothing owed, nothing lost."""
    sns = runs["once-atomic-sns"]
    figures = sns.figures()
    assert sns.violations == dict.fromkeys(sns.violations, 0), figures
    assert set(sns.violations) >= {
        "credit_partial",
        "notified_not_once",
        "owed_at_end",
        "reuse_not_applied",
        "notify_conflict",
    }, figures
    assert sns.lost == 0, figures
    assert sns.violations["owed_at_end"] == 0, figures
    # At least 600 deliveries over the two hops, by construction: none is lost, so each of
    # the ~480 messages sent was delivered at least once, and each operation's notification
    # (one per payment credited, ~320) was applied, so delivered, at least once.
    assert sns.deliveries + sns.notifications["deliveries"] >= 600, figures
    # The reuse wave went out once hop 1's records of its ids were expired and swept (an id
    # whose record was not done then, its payment parked in the DLQ, is left out).
    assert sns.faults["workload_reuse"] > 0, figures
    assert sns.faults["ttl_swept"] >= sns.faults["workload_reuse"], figures
    # Its second operations reached hop 2: a reused id applied twice downstream. A reuse
    # message is delivered until it is done or parked in the DLQ, and one parked there has
    # mostly committed on an earlier delivery: only a run in which every delivery of every
    # reused id died before its commit would show none.
    assert sns.notifications["reuse_applied_downstream"] > 0, figures
    for fault in TWO_HOP_FAULTS:
        assert sns.faults.get(fault, 0) > 0, f"{fault} was never injected\n{figures}"


def test_once_through_eventbridge_applies_every_notification_once_under_every_fault(
    runs: dict[str, Run],
) -> None:
    """Hop 1's outbox puts the notification on a custom bus as an event's detail (once's
    identity its ``once`` member), and a second event no rule matches in the same
    ``PutEvents``; a rule sends each notification whole to hop 2's queue (``id`` and ``time``
    new on every ``PutEvents``), and hop 2, keyed on ``SOURCE_KEY``, reads it from the
    event's ``detail``. Under every fault of the two-hop runs, an entry failed while the other
    was put (the whole outbox then owed and put again) and a clear throttled past the SDK's
    retries: every notification applied once, each resend a duplicate and never a CONFLICT,
    nothing owed, nothing lost."""
    events = runs["once-atomic-events"]
    figures = events.figures()
    assert events.violations == dict.fromkeys(events.violations, 0), figures
    assert set(events.violations) >= {
        "credit_partial",
        "credit_twice",
        "notified_not_once",
        "owed_at_end",
        "notify_conflict",
    }, figures
    assert events.lost == 0, figures
    assert events.violations["owed_at_end"] == 0, figures
    # At least 600 deliveries over the two hops, by construction: none is lost, so each of
    # the ~460 messages sent was delivered at least once, and each payment credited (~320)
    # had its notification applied, so delivered, at least once.
    assert events.deliveries + events.notifications["deliveries"] >= EVENTS_DELIVERIES, figures
    for fault in (*TWO_HOP_FAULTS, *EVENTS_FAULTS):
        assert events.faults.get(fault, 0) > 0, f"{fault} was never injected\n{figures}"
    # A refused send, or an entry failed, leaves the record owing both events: a later
    # delivery put them again, and hop 2 took the notification's second event (another id
    # and time) for the duplicate it is.
    assert events.faults["outcome_owed"] > 0, figures
    assert events.faults["outcome_owed_sent"] > 0, figures
    assert events.outcomes.get("notify duplicate", 0) > 0, figures
