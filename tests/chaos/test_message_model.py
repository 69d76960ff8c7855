"""The message-level model (``message_model.py``) run against the real handler: bounded on
moto in every ``make test``, on DynamoDB Local in a short run (and a long one on request:
``ONCE_MODEL_EXAMPLES=20000``), and the controls it must catch, each by construction: a
sequence of the machine's own rules that ends in the broken promise, run on a runtime with
that one defect put back. And each error AWS documents for each call once makes
(``aws_faults.py``), met by one delivery under each ``on_expired_lease`` policy, then the
runbook to quiescence: the machine's runs draw a few of them per example; these meet every
one of them."""

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
from once import invocation, processor, protocol, quarantine, staged, store, twophase
from once.models import Outcome, Record
from once.protocol import Step, Verdict
from oncecli.aws import create_table, local_client
from proof.chaos.unfenced import UnfencedRecordStore
from tests.chaos import aws_faults, message_model
from tests.chaos.aws_faults import Fault
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


def machine_on(client: Any, effects: str = "any") -> type[MessageMachine]:
    return type(
        "MessageMachineOnEngine",
        (MessageMachine,),
        {"client": client, "table": RECORDS, "effects_table": EFFECTS, "effects": effects},
    )


def test_the_message_model_holds_on_moto(moto_client: Any) -> None:
    MessageMachine.seen.clear()
    run_state_machine_as_test(machine_on(moto_client), settings=_settings(200))
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
    # AWS's documented errors were injected, and met the paths around them.
    fired = [name for name in MessageMachine.seen if name.startswith("fault ")]
    assert len(fired) >= 10, f"too few faults met a call: {fired}"
    # Which fault meets which path depends on the pool's scheduling: each fault is met, under
    # each policy, by construction in test_each_documented_aws_error_under_each_policy.


def test_the_message_model_holds_under_effects_staged_on_moto(moto_client: Any) -> None:
    """The same machine, every invariant, the handler built with ``effects="staged"``: no
    claim, business code first, one write commits it; plus the staged mode's own."""
    MessageMachine.seen.clear()
    run_state_machine_as_test(machine_on(moto_client, "staged"), settings=_settings(120))
    print(dict(sorted(MessageMachine.seen.items())))
    for path in (
        "outcome processed",
        "outcome duplicate",
        "outcome conflict",
        "outcome owed_sent",
        "outcome skipped",
        "dlq PERMANENT_ERROR",
        "dlq WRITE_REFUSED",
        "killed before_finalize",
        "killed timeout",
    ):
        assert MessageMachine.seen[path] > 0, f"no run reached {path}"
    # No claim is made, so none is lost or taken over.
    for path in ("outcome lease_lost", "dlq LEASE_EXPIRED", "killed after_claim"):
        assert MessageMachine.seen[path] == 0, path
    fired = [name for name in MessageMachine.seen if name.startswith("fault ")]
    assert len(fired) >= 10, f"too few faults met a call: {fired}"


@pytest.fixture(scope="module")
def dynamodb_local_client(dynamodb_local: dict) -> Any:
    client = local_client("dynamodb", dynamodb_local["endpoint"])
    existing = client.list_tables()["TableNames"]
    for table in (RECORDS, EFFECTS):
        if table not in existing:
            create_table(client, table, key=c.PARTITION_KEY)
    return client


@pytest.mark.dynamodb_local
def test_the_message_model_holds_on_dynamodb_local(dynamodb_local_client: Any) -> None:
    client = dynamodb_local_client
    examples = LONG_EXAMPLES or 15
    run_state_machine_as_test(
        machine_on(client), settings=_settings(examples, derandomize=not LONG_EXAMPLES)
    )


@pytest.mark.dynamodb_local
def test_the_message_model_holds_under_effects_staged_on_dynamodb_local(
    dynamodb_local_client: Any,
) -> None:
    examples = LONG_EXAMPLES or 15
    run_state_machine_as_test(
        machine_on(dynamodb_local_client, "staged"),
        settings=_settings(examples, derandomize=not LONG_EXAMPLES),
    )


# --- the controls: each defect put back, caught by a sequence of the machine's rules ----------


def started(
    client: Any,
    *,
    fifo: bool = False,
    policy: str = "run",
    batch: int = 10,
    source_keyed: bool = False,
    backoff: bool = False,
    effects: str = "any",
) -> Any:
    machine = machine_on(client, effects)()
    machine.setup(
        fifo=fifo, policy=policy, drain_batch=batch, source_keyed=source_keyed, backoff=backoff
    )
    return machine


def produce(machine: MessageMachine, op: Op, group: str = "g1") -> Message:
    machine.add(op)
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

    monkeypatch.setattr(twophase, "review_fence_for", lambda *, fence, takeover, previous: fence)
    monkeypatch.setattr(twophase, "must_quarantine_takeover", reviewed_only_at_its_own_fence)


def _followers_of_a_failed_leader_acknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(processor._FOLLOW, Outcome.FAILED, Outcome.DUPLICATE)


def _fifo_groups_that_go_on_past_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    run_unit = processor.BatchProcessor._run_unit

    def going_on(self: Any, unit: Any, context: Any, *, stop_on_failure: bool) -> Any:
        return run_unit(self, unit, context, stop_on_failure=False)

    monkeypatch.setattr(processor.BatchProcessor, "_run_unit", going_on)


def _acknowledged_before_the_outbox_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        invocation.Invocation,
        "send_owed",
        lambda self, record_id, fence, messages, done, owner=None, settle=None: done,
    )


def _commits_without_the_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        store.RecordStore,
        "finalize_condition",
        UnfencedRecordStore.finalize_condition,
    )


def a_commit_that_conflicts_past_its_tries(client: Any) -> MessageMachine:
    # Defect 2 of issue 30: under "quarantine", the commit canceled for TransactionConflict
    # on every try; business code had returned, so it must not run again unreviewed.
    machine = started(client, policy="quarantine")
    message = produce(machine, OK)
    conflict = Fault("commit", "reason", "TransactionConflict", "record", store.COMMIT_TRIES)
    machine.inject(conflict)
    deliver(machine, [message])
    machine.quiesce()  # the runbook: the COMMIT_FAILED copy reviewed and redriven
    return machine


def a_commit_throttled_once(client: Any) -> MessageMachine:
    # Defect 2 again, without the store's tries: one ThrottlingError on a staged element.
    machine = started(client, policy="quarantine")
    message = produce(machine, OK)
    machine.inject(Fault("commit", "reason", "ThrottlingError", "staged"))
    deliver(machine, [message])
    machine.quiesce()
    return machine


def _canceled_commits_retried_unreviewed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under "quarantine" a commit that landed nothing failed the record for a plain retry,
    as under "run": the next delivery ran business code again, with no review."""
    after_commit = protocol.after_commit

    def retried(verdict: Verdict, *, refused: str = "retry", review: bool) -> Step:
        step = after_commit(verdict, refused=refused, review=review)
        return Step.RETRY if step is Step.REVIEW else step

    monkeypatch.setattr(protocol, "after_commit", retried)
    monkeypatch.setattr(twophase, "after_commit", retried)


def _no_tries_and_canceled_commits_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    _canceled_commits_retried_unreviewed(monkeypatch)
    monkeypatch.setattr(store, "COMMIT_TRIES", 1)


def an_upstream_message_quarantined_and_redriven(client: Any) -> MessageMachine:
    # Defect 4 of issue 30: a message of an upstream once outbox (once.source, once.seq)
    # with 8 attributes of the team's, to a consumer keyed on SOURCE_KEY, quarantined, fixed
    # and redriven: the DLQ copy must still carry the identity it is keyed on.
    machine = started(client, source_keyed=True)
    message = produce(machine, Op(machine.new_key(), 0, "permanent", send=False, ret=0))
    deliver(machine, [message])
    assert [m.reason for m in machine.dlq] == [c.REASON_PERMANENT_ERROR]
    machine.quiesce()  # the cause fixed, the copy redriven: it runs, keyed as before
    return machine


def _team_attributes_before_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DLQ copy carried the message's own attributes in their order, as many as fit
    beside once's: with 8 of the team's before it, the identity was left out."""
    ours_names = (
        c.QUARANTINE_ATTR_MESSAGE_ID,
        c.QUARANTINE_ATTR_REASON,
        c.QUARANTINE_ATTR_ERROR,
        c.QUARANTINE_ATTR_FENCE,
    )

    def by_position(
        url: str,
        record: dict[str, Any],
        reason: str,
        error: str,
        fence: int | None,
        *,
        key: str | None = None,
        team: bool = True,
    ) -> dict[str, Any]:
        own = record.get("messageAttributes") or {}
        ours = {
            c.QUARANTINE_ATTR_MESSAGE_ID: {
                "DataType": "String",
                "StringValue": (own.get(c.QUARANTINE_ATTR_MESSAGE_ID) or {}).get("stringValue")
                or record["messageId"],
            },
            c.QUARANTINE_ATTR_REASON: {"DataType": "String", "StringValue": reason},
            c.QUARANTINE_ATTR_ERROR: {"DataType": "String", "StringValue": error or reason},
        }
        if fence is not None:
            ours[c.QUARANTINE_ATTR_FENCE] = {"DataType": "Number", "StringValue": str(fence)}
        room = 10 - len(ours)
        carried: dict[str, dict[str, Any]] = {}
        for name, attribute in own.items():
            if name in ours_names or len(carried) == room:
                continue
            if attribute.get("stringValue") is not None:
                carried[name] = {
                    "DataType": attribute.get("dataType", "String"),
                    "StringValue": attribute["stringValue"],
                }
        request: dict[str, Any] = {
            "QueueUrl": url,
            "MessageBody": record["body"],
            "MessageAttributes": carried | ours,
        }
        group = (record.get("attributes") or {}).get("MessageGroupId")
        if group:
            request["MessageGroupId"] = group
        return request

    monkeypatch.setattr(quarantine.Quarantine, "_request", staticmethod(by_position))


def an_operation_that_sends(client: Any) -> MessageMachine:
    machine = started(client)
    deliver(machine, [produce(machine, Op("k1", 0, "ok", send=True, ret=0))])
    machine.quiesce()
    return machine


def _outbox_cleared_unsent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outbox cleared as if sent: the record owes nothing and nothing was delivered."""

    def cleared(
        self: Any,
        record_id: str,
        fence: int,
        messages: Any,
        done: Any,
        owner: Any = None,
        settle: Any = None,
    ) -> Any:
        self.store.clear_outbox(record_id, fence)
        return done

    monkeypatch.setattr(invocation.Invocation, "send_owed", cleared)


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
    "a commit canceled past its tries, retried unreviewed under quarantine": (
        a_commit_that_conflicts_past_its_tries,
        _canceled_commits_retried_unreviewed,
        "unfenced_ran_twice",
    ),
    "a commit throttled once, no tries, retried unreviewed under quarantine": (
        a_commit_throttled_once,
        _no_tries_and_canceled_commits_retried,
        "unfenced_ran_twice",
    ),
    "an outbox cleared without being sent": (
        an_operation_that_sends,
        _outbox_cleared_unsent,
        "undeliverable_committed",
    ),
    "a DLQ copy that keeps the team's attributes before the identity": (
        an_upstream_message_quarantined_and_redriven,
        _team_attributes_before_the_identity,
        "identity_lost",
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


def a_staged_copy_delivered_after_the_commit(client: Any) -> MessageMachine:
    machine = started(client, effects="staged")
    first, copy = produce(machine, OK), produce(machine, OK)
    deliver(machine, [first])
    deliver(machine, [copy])  # runs business code; its commit must be refused
    machine.quiesce()
    return machine


def _staged_commits_without_the_claims_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The staged commit lands whatever the record holds. (Each value the real condition
    binds is still used: DynamoDB refuses unused ones.)"""
    monkeypatch.setattr(
        store,
        "_CLAIM_CONDITION",
        "attribute_not_exists(#id) OR :now_s = :now_s OR :failed = :failed "
        "OR :in_progress = :in_progress",
    )


def a_staged_operation_that_fails_once(client: Any) -> MessageMachine:
    machine = started(client, effects="staged")
    machine.flaky_left["k1"] = 1
    deliver(machine, [produce(machine, Op("k1", 0, "flaky", send=False, ret=0))])
    machine.quiesce()
    return machine


def _staged_raise_that_fails_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Business code raised under staged, and the record was written FAILED (a claim's
    fail, where no claim was made)."""
    run_staged = staged.StagedRunner.run

    def failing(self: Any, record: Any, parsed: Any) -> Any:
        result = run_staged(self, record, parsed)
        at = self.invocation
        if result.outcome is Outcome.FAILED:
            at.store._store._client.put_item(
                TableName=at.store.table_name,
                Item={
                    c.ATTR_ID: {"S": message_model.record_id(at.settings.key_prefix, "k1")},
                    c.ATTR_STATUS: {"S": c.STATUS_FAILED},
                    c.ATTR_PAYLOAD_HASH: {"S": parsed.payload_hash},
                    c.ATTR_FENCE: {"N": "1"},
                },
            )
        return result

    monkeypatch.setattr(staged.StagedRunner, "run", failing)


STAGED_CONTROLS = {
    "a staged commit without the claim's condition": (
        a_staged_copy_delivered_after_the_commit,
        _staged_commits_without_the_claims_condition,
        "committed_twice",
    ),
    "a staged raise that writes the record": (
        a_staged_operation_that_fails_once,
        _staged_raise_that_fails_the_record,
        "staged_raise_wrote",
    ),
}


@pytest.mark.parametrize("control", STAGED_CONTROLS)
def test_the_model_catches_each_staged_control(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch, control: str
) -> None:
    sequence, defect, invariant = STAGED_CONTROLS[control]
    defect(monkeypatch)
    with pytest.raises(Violation) as caught:
        sequence(moto_client)
    assert caught.value.name == invariant


@pytest.mark.parametrize("control", STAGED_CONTROLS)
def test_the_runtime_passes_each_staged_control_sequence(moto_client: Any, control: str) -> None:
    sequence, _, _ = STAGED_CONTROLS[control]
    machine = sequence(moto_client)
    assert not machine.queue and not machine.dlq


# --- each error AWS documents for each call once makes, under each policy -------------------


def _operation_for(machine: MessageMachine, fault: Fault) -> Op:
    """An operation whose delivery makes the call ``fault`` answers."""
    mode = {
        "complete": "plain",  # nothing staged: the plain UpdateItem completes it
        "fail": "flaky",  # business code raises: the record is failed
        "visibility": "flaky",  # reported failed: the backoff changes its visibility
        "quarantine": "permanent",  # sent to the DLQ
    }.get(fault.target, "ok")
    if fault.kind == "reason" and fault.code == "ConditionalCheckFailed":
        mode = "gated"  # a staged element with a condition
    send = fault.target in ("outbox-sqs", "outbox-sns", "clear")
    to = "topic" if fault.target == "outbox-sns" else "queue"
    return Op(machine.new_key(), 0, mode, send=send, ret=0, to=to)


#: The faults a consumer of this model meets: its outbox sends to queues and topics. An
#: outbox to an EventBridge bus meets PutEvents' faults in the chain model
#: (tests/chaos/test_chain_model.py), whose hops run through a bus and a rule.
MODEL_FAULTS = [f for f in aws_faults.FAULTS if f.target != "outbox-events"]


@pytest.mark.parametrize("policy", ["run", "quarantine"])
@pytest.mark.parametrize("fault", MODEL_FAULTS, ids=str)
def test_each_documented_aws_error_under_each_policy(
    moto_client: Any, fault: Fault, policy: str
) -> None:
    """One delivery meets the fault, then the runbook to quiescence: every invariant holds
    and every operation is done, whatever AWS answered."""
    a_delivery_that_meets(moto_client, fault, policy)


@pytest.mark.dynamodb_local
@pytest.mark.parametrize("policy", ["run", "quarantine"])
@pytest.mark.parametrize(
    "fault", [f for f in aws_faults.FAULTS if f.target in ("commit", "complete")], ids=str
)
def test_each_documented_commit_error_on_dynamodb_local(
    dynamodb_local_client: Any, fault: Fault, policy: str
) -> None:
    """The same on AWS's own engine, for the commit's and the completion's errors (its
    idempotency token answers a retried commit that landed as the commit itself)."""
    a_delivery_that_meets(dynamodb_local_client, fault, policy)


#: The record writes a staged consumer makes: its commit (the plain UpdateItem, or the
#: TransactWriteItems with its staged writes) and its outbox's clear; no claim, no fail
#: (business code that raises writes nothing). The sends, the quarantine and the visibility
#: changes are the same code after either mode's commit: met above, and drawn by the
#: staged machine's runs.
STAGED_FAULTS = [f for f in aws_faults.FAULTS if f.target in ("commit", "complete", "clear")]


@pytest.mark.parametrize("fault", STAGED_FAULTS, ids=str)
def test_each_documented_aws_error_under_effects_staged(moto_client: Any, fault: Fault) -> None:
    """The same, for a consumer built with ``effects="staged"``: its commit (the plain
    UpdateItem, or the TransactWriteItems with its staged writes) meets every cancellation
    reason and error the claim's commit meets."""
    a_delivery_that_meets(moto_client, fault, "run", effects="staged")


def a_delivery_that_meets(client: Any, fault: Fault, policy: str, effects: str = "any") -> None:
    machine = started(client, policy=policy, backoff=fault.target == "visibility", effects=effects)
    message = produce(machine, _operation_for(machine, fault))
    machine.inject(fault)
    deliver(machine, [message])
    assert machine.faults.fired, f"{fault} met no call"
    assert machine.faults.pending(fault.target) == 0, f"{fault} met too few calls"
    machine.each_completion_landed_its_effect_once()
    if fault.permanent:
        # Until a person fixes the cause, every delivery meets it: the message ends where a
        # person sees it (the DLQ: once's quarantine, or SQS's maxReceiveCount), and what
        # the record owes stays on it, counted at each delivery (owed), never dropped.
        for _ in range(message_model.MAX_RECEIVE):
            machine.clock.now += message_model.VISIBILITY_S + 1
            if batch := machine._receive(10, None):
                machine._invoke(0, batch, None)
        (key,) = machine.ops
        assert key in machine.in_dlq_ever, f"{fault}: the message never reached the DLQ"
        record = machine._record(key)
        if fault.target.startswith("outbox"):
            assert record is not None and record.outbox, f"{fault}: the owed messages are lost"
    machine.quiesce()
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
