"""The message-level model (``message_model.py``) run against the real handler: bounded on
moto in every ``make test``, on DynamoDB Local in a short run (and a long one on request:
``ONCE_MODEL_EXAMPLES=20000``), and the controls it must catch, each by construction: a
sequence of the machine's own rules that ends in the broken promise, run on a runtime with
that one defect put back."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from moto import mock_aws

from once import constants as c
from once import processor
from once.models import Outcome, Record
from oncecli.aws import create_table, local_client
from oncecli.chaos.unfenced import UnfencedRecordStore
from tests.chaos import message_model
from tests.chaos.message_model import Message, MessageMachine, Op, Violation

RECORDS = "model-records"
EFFECTS = "model-effects"
#: The long run's size on DynamoDB Local (``ONCE_MODEL_EXAMPLES``); the suite's is small.
LONG_EXAMPLES = int(os.environ.get("ONCE_MODEL_EXAMPLES", "0"))


def _settings(examples: int, steps: int = 30, *, derandomize: bool = True) -> settings:
    """The suite's runs are derandomized: the same examples on every run, so that the suite
    passes or fails by the code, never by the seed of the day. The long run searches anew
    each time, and keeps what it finds in Hypothesis' example database."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=derandomize,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@pytest.fixture(scope="module")
def moto_client() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=message_model.REGION)
        for table in (RECORDS, EFFECTS):
            create_table(client, table, key=c.PARTITION_KEY)
        yield client


def machine_on(client: Any) -> type[MessageMachine]:
    return type(
        "MessageMachineOnEngine",
        (MessageMachine,),
        {"client": client, "table": RECORDS, "effects_table": EFFECTS},
    )


def test_the_message_model_holds_on_moto(moto_client: Any) -> None:
    MessageMachine.seen.clear()
    run_state_machine_as_test(machine_on(moto_client), settings=_settings(100))
    print(dict(sorted(MessageMachine.seen.items())))
    # The search reaches the paths the invariants are about, not only the happy one.
    for path in (
        "outcome processed",
        "outcome duplicate",
        "outcome conflict",
        "outcome lease_lost",
        "outcome skipped",
        "dlq LEASE_EXPIRED",
        "dlq PERMANENT_ERROR",
        "dlq WRITE_REFUSED",
        "killed before_finalize",
        "killed timeout",
    ):
        assert MessageMachine.seen[path] > 0, f"no run reached {path}"


@pytest.mark.dynamodb_local
def test_the_message_model_holds_on_dynamodb_local(dynamodb_local: dict) -> None:
    client = local_client("dynamodb", dynamodb_local["endpoint"])
    for table in (RECORDS, EFFECTS):
        create_table(client, table, key=c.PARTITION_KEY)
    examples = LONG_EXAMPLES or 15
    run_state_machine_as_test(
        machine_on(client), settings=_settings(examples, derandomize=not LONG_EXAMPLES)
    )


# --- the controls: each defect put back, caught by a sequence of the machine's rules ----------


def started(client: Any, *, fifo: bool = False, policy: str = "run", batch: int = 10) -> Any:
    machine = machine_on(client)()
    machine.setup(fifo=fifo, policy=policy, drain_batch=batch)
    return machine


def produce(machine: MessageMachine, op: Op, group: str = "g1") -> Message:
    machine.ops[op.key].append(op)
    machine._produce(op.body(), group)
    return machine.queue[-1]


def deliver(machine: MessageMachine, messages: list[Message], crash: str | None = None) -> None:
    """One receive of exactly ``messages`` and one invocation of them."""
    batch = machine._receive(10, None, only=messages)
    assert batch, "nothing visible to deliver"
    machine._invoke(0, batch, crash)


OK = Op("k1", 0, "ok", send=False, ret=0)


def two_lease_expired_copies_redriven_one_by_one(client: Any) -> MessageMachine:
    machine = started(client, policy="quarantine", batch=1)
    first, retry = produce(machine, OK), produce(machine, OK)
    deliver(machine, [first], crash="after_claim")
    machine.clock.now += message_model.VISIBILITY_S + 1
    deliver(machine, [first])  # a takeover: quarantined
    deliver(machine, [retry])  # the producer's retry: quarantined too
    assert [m.reason for m in machine.dlq] == [c.REASON_LEASE_EXPIRED] * 2
    machine.quiesce()  # the runbook: review, redrive, one message per invocation
    return machine


def a_failed_leader_and_its_follower_in_one_batch(client: Any) -> MessageMachine:
    machine = started(client)
    flaky = Op("k1", 0, "flaky", send=False, ret=0)
    machine.flaky_left["k1"] = 1
    deliver(machine, [produce(machine, flaky), produce(machine, flaky)])
    machine.quiesce()
    return machine


def a_fifo_group_whose_first_operation_fails(client: Any) -> MessageMachine:
    machine = started(client, fifo=True)
    machine.flaky_left["k1"] = 1
    earlier = produce(machine, Op("k1", 0, "flaky", send=False, ret=0))
    later = produce(machine, Op("k2", 0, "ok", send=False, ret=0))
    deliver(machine, [earlier, later])
    machine.quiesce()
    return machine


def an_outbox_whose_destination_is_down(client: Any) -> MessageMachine:
    machine = started(client)
    machine.out_down = True
    deliver(machine, [produce(machine, Op("k1", 0, "ok", send=True, ret=0))])
    machine.quiesce()  # the destination is back: what is owed is sent, then acknowledged
    assert machine.sent_out
    return machine


def a_stalled_invocation_whose_key_is_taken_over(client: Any) -> MessageMachine:
    machine = started(client)
    batch = machine._receive(1, None, only=[produce(machine, OK)])
    machine.stall = (1, batch)  # the other instance takes over while this one stalls
    machine._invoke(0, batch, None, zombie=True)
    machine.each_completion_landed_its_effect_once()
    machine.quiesce()
    return machine


def _before_the_review_fence_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each quarantined copy carries its own fence, and a review counts only while the
    record is still at that fence: each redriven copy spoils the other's review."""

    def reviewed_only_at_its_own_fence(
        *, takeover: bool, previous: Record | None, review_fence: int | None
    ) -> bool:
        unsent = (
            previous is not None
            and previous.status == c.STATUS_FAILED
            and previous.error == c.REASON_LEASE_EXPIRED
        )
        reviewed = unsent and previous is not None and review_fence == previous.fence
        return takeover or (unsent and not reviewed)

    monkeypatch.setattr(processor, "review_fence_for", lambda *, fence, takeover, previous: fence)
    monkeypatch.setattr(processor, "must_quarantine_takeover", reviewed_only_at_its_own_fence)


def _followers_of_a_failed_leader_acknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(processor._FOLLOW, Outcome.FAILED, Outcome.DUPLICATE)


def _fifo_groups_that_go_on_past_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    run_unit = processor.BatchProcessor._run_unit

    def going_on(self: Any, unit: Any, context: Any, *, stop_on_failure: bool) -> Any:
        return run_unit(self, unit, context, stop_on_failure=False)

    monkeypatch.setattr(processor.BatchProcessor, "_run_unit", going_on)


def _acknowledged_before_the_outbox_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        processor.BatchProcessor,
        "_send_owed",
        lambda self, record_id, fence, messages, done, context: done,
    )


def _commits_without_the_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        message_model.CrashingStore,
        "finalize_condition",
        UnfencedRecordStore.finalize_condition,
    )


#: (the sequence of the machine's rules, the defect put back, the invariant that catches it)
CONTROLS = {
    "the redrive loop of two LEASE_EXPIRED copies": (
        two_lease_expired_copies_redriven_one_by_one,
        _before_the_review_fence_fix,
        "no_convergence",
    ),
    "a follower acknowledged although its leader failed": (
        a_failed_leader_and_its_follower_in_one_batch,
        _followers_of_a_failed_leader_acknowledged,
        "acknowledged_unfinished",
    ),
    "a FIFO group that goes on past a failure": (
        a_fifo_group_whose_first_operation_fails,
        _fifo_groups_that_go_on_past_a_failure,
        "fifo_order",
    ),
    "an acknowledgment sent before the outbox is sent": (
        an_outbox_whose_destination_is_down,
        _acknowledged_before_the_outbox_is_sent,
        "owed_dropped",
    ),
    "a stalled invocation's commit without the fence": (
        a_stalled_invocation_whose_key_is_taken_over,
        _commits_without_the_fence,
        "effect_not_once",
    ),
}


@pytest.mark.parametrize("control", CONTROLS)
def test_the_model_catches_each_control(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch, control: str
) -> None:
    sequence, defect, invariant = CONTROLS[control]
    defect(monkeypatch)
    with pytest.raises(Violation) as caught:
        sequence(moto_client)
    assert caught.value.name == invariant


@pytest.mark.parametrize("control", CONTROLS)
def test_the_runtime_passes_each_control_sequence(moto_client: Any, control: str) -> None:
    sequence, _, _ = CONTROLS[control]
    machine = sequence(moto_client)
    assert not machine.queue and not machine.dlq
    for key in machine.ops:
        record = machine._record(key)
        assert record is not None and record.status == c.STATUS_COMPLETED, key


# --- what the long runs found, replayed ---------------------------------------------------------


def test_a_repeat_past_the_retention_lands_its_effect_again_and_is_counted(
    moto_client: Any,
) -> None:
    # Found by the first long run on DynamoDB Local (a defect of the model, not of once): the
    # commit landed as the invocation died, the message came back past the record's
    # retention, and its claim found the record forgotten (expired, not yet swept), as the
    # design says; the effect landed a second time, for a second completion. The model
    # counted completions only when a sweep deleted one; it now notes each completed
    # record's owner as it sees it.
    machine = started(moto_client, batch=1)
    message = produce(machine, OK)
    deliver(machine, [message], crash="before_finalize")
    machine.each_completion_landed_its_effect_once()
    machine.clock.now += message_model.RETENTION_S + 1
    batch = machine._receive(1, None, only=[message])
    machine.stall = (1, batch)
    machine._invoke(0, batch, None, zombie=True)
    machine.each_completion_landed_its_effect_once()
    assert len(machine.completions["k1"]) == 2
    machine.quiesce()
