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
from once import processor, protocol
from once.models import Outcome, Record
from oncecli.aws import create_table, local_client
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
    run_state_machine_as_test(machine_on(moto_client), settings=_settings(60))
    print(dict(sorted(MessageMachine.seen.items())))
    # The search reaches the paths the invariants are about, not only the happy one.
    for path in ("outcome processed", "outcome duplicate", "dlq LEASE_EXPIRED", "killed timeout"):
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


def test_the_model_catches_the_redrive_loop_of_two_lease_expired_copies(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As before the fix: each quarantined copy carries its own fence, and a review counts
    # only while the record is still at that fence, so each redriven copy spoils the other's.
    monkeypatch.setattr(processor, "review_fence_for", lambda *, fence, takeover, previous: fence)

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

    monkeypatch.setattr(processor, "must_quarantine_takeover", reviewed_only_at_its_own_fence)
    machine = started(moto_client, policy="quarantine", batch=1)
    first, retry = produce(machine, OK), produce(machine, OK)
    deliver(machine, [first], crash="after_claim")
    machine.clock.now += message_model.VISIBILITY_S + 1
    deliver(machine, [first])  # a takeover: quarantined, fence 2
    deliver(machine, [retry])  # the producer's retry: quarantined too, fence 3
    assert [m.reason for m in machine.dlq] == [c.REASON_LEASE_EXPIRED] * 2

    with pytest.raises(Violation) as caught:
        machine.quiesce()
    assert caught.value.name == "no_convergence"


def test_the_fixed_runtime_converges_on_the_same_sequence(moto_client: Any) -> None:
    machine = started(moto_client, policy="quarantine", batch=1)
    first, retry = produce(machine, OK), produce(machine, OK)
    deliver(machine, [first], crash="after_claim")
    machine.clock.now += message_model.VISIBILITY_S + 1
    deliver(machine, [first])
    deliver(machine, [retry])
    assert [m.reason for m in machine.dlq] == [c.REASON_LEASE_EXPIRED] * 2

    machine.quiesce()
    record = machine._record("k1")
    assert record is not None and record.status == c.STATUS_COMPLETED
    assert protocol  # the real decision functions ran


def test_the_model_catches_a_follower_acknowledged_although_its_leader_failed(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy in the same batch follows its leader's outcome; here a failed leader's follower
    # is reported a duplicate (acknowledged) although nothing was done.
    monkeypatch.setitem(processor._FOLLOW, Outcome.FAILED, Outcome.DUPLICATE)
    machine = started(moto_client)
    flaky = Op("k1", 0, "flaky", send=False, ret=0)
    machine.flaky_left["k1"] = 1
    first, copy = produce(machine, flaky), produce(machine, flaky)

    with pytest.raises(Violation) as caught:
        deliver(machine, [first, copy])
    assert caught.value.name == "acknowledged_unfinished"


def test_the_model_catches_a_fifo_group_that_goes_on_past_a_failure(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_unit = processor.BatchProcessor._run_unit

    def going_on(self: Any, unit: Any, context: Any, *, stop_on_failure: bool) -> Any:
        return run_unit(self, unit, context, stop_on_failure=False)

    monkeypatch.setattr(processor.BatchProcessor, "_run_unit", going_on)
    machine = started(moto_client, fifo=True)
    machine.flaky_left["k1"] = 1
    earlier = produce(machine, Op("k1", 0, "flaky", send=False, ret=0))
    later = produce(machine, Op("k2", 0, "ok", send=False, ret=0))

    with pytest.raises(Violation) as caught:
        deliver(machine, [earlier, later])
    assert caught.value.name == "fifo_order"


def test_the_model_catches_an_acknowledgment_before_the_outbox_is_sent(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The outbox's send reported as done whatever happened: the source is acknowledged while
    # its record still owes the message.
    monkeypatch.setattr(
        processor.BatchProcessor,
        "_send_owed",
        lambda self, record_id, fence, messages, done, context: done,
    )
    machine = started(moto_client)
    sent = produce(machine, Op("k1", 0, "ok", send=True, ret=0))
    machine.out_down = True

    with pytest.raises(Violation) as caught:
        deliver(machine, [sent])
    assert caught.value.name == "owed_dropped"


def test_the_model_catches_a_zombies_commit_that_ignores_the_fence(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record model's control one level up: a completion without its fence condition
    # lands a stalled invocation's staged write beside its takeover's.
    from oncecli.chaos.unfenced import UnfencedRecordStore

    monkeypatch.setattr(
        message_model.CrashingStore,
        "finalize_condition",
        UnfencedRecordStore.finalize_condition,
    )
    machine = started(moto_client)
    stalled = produce(machine, OK)
    batch = machine._receive(1, None, only=[stalled])
    machine.stall = (1, batch)

    with pytest.raises(Violation) as caught:
        machine._invoke(0, batch, None, zombie=True)
        machine.each_completion_landed_its_effect_once()
    assert caught.value.name == "effect_not_once"
