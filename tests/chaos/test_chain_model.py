"""The chain model (``chain_model.py``): two real once consumers joined by SQS, SNS with raw
delivery on, SNS with raw delivery off, or EventBridge (a rule's SQS target given the whole
event, or its detail), run on moto in every ``make test`` (bounded and
derandomized, one run per transport; a long search on request, ``ONCE_CHAIN_EXAMPLES=5000``,
that many random examples per transport), and the controls it must catch: each defect of
issue 39 put back by monkeypatch, then a sequence of the machine's own rules that ends in the
promise it breaks, and the suite's own derandomized search that finds it unaided.

- the identity names the key, not the operation (``once.identity.source_of`` gives the bare
  record id): a key reused past U's retention, inside D's, is dropped by D (a duplicate of
  the old operation's message, or a CONFLICT with it) → invariant 1;
- under ``effects="staged"`` a copy whose business code raises is never judged by the record
  (``StagedRunner._refused_by_record`` answers None): the redelivery of an operation whose
  outbox is owed raises (its business code reads what its commit changed), and the owed
  message is never sent → invariant 2;
- a ``SOURCE_KEY`` consumer behind SNS with raw delivery off hashes SNS's envelope
  (``once.payload.without_transport`` keeps SNS's per-publish fields): a resend after a failed
  clear is a CONFLICT downstream → invariant 3;
- the same behind EventBridge (``once.payload.without_event_transport`` keeps the event's
  ``id`` and ``time``, new on every ``PutEvents``) → invariant 3;
- an outbox that takes a ``PutEvents`` answer for a success whatever its result entries say
  (``once.outbox._events_outcome``): an entry EventBridge failed is never put again, and its
  operation is never applied downstream → invariant 1.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from moto import mock_aws

from once import staged
from once.awserrors import SENT
from once.models import Outcome
from tests.chaos import aws_faults, chain_model
from tests.chaos.aws_faults import Fault
from tests.chaos.chain_model import ChainMachine, Op, Violation

#: The long search's size (``ONCE_CHAIN_EXAMPLES``, not derandomized); the suite's is small.
LONG_EXAMPLES = int(os.environ.get("ONCE_CHAIN_EXAMPLES", "0"))
#: The suite's run: the same examples every time, well under a minute on two cores.
SUITE_EXAMPLES, SUITE_STEPS = 25, 25


def _settings(
    examples: int,
    steps: int = SUITE_STEPS,
    *,
    derandomize: bool = True,
    shrink: bool = True,
) -> settings:
    """The suite's runs are derandomized: the same examples on every run, so that the suite
    passes or fails by the code, never by the seed of the day (and with no example database:
    ``derandomize`` implies none). The long run searches anew."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=derandomize,
        phases=list(Phase) if shrink else [Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@pytest.fixture(scope="module")
def moto_client() -> Iterator[Any]:
    """moto's DynamoDB: each example makes its own tables on it (``ChainMachine``)."""
    with mock_aws():
        yield boto3.client("dynamodb", region_name=chain_model.REGION)


def machine_on(
    client: Any, transports: tuple[str, ...] = chain_model.TRANSPORTS
) -> type[ChainMachine]:
    """The machine on this engine. Its name says its transports: a derandomized run's seed
    comes from it, so that each transport's run draws examples of its own."""
    name = "".join(t.title().replace("-", "") for t in transports)
    return type(
        f"ChainMachineOn{name}",
        (ChainMachine,),
        {"client": client, "transports": transports},
    )


@pytest.mark.parametrize("transport", chain_model.TRANSPORTS)
def test_the_chain_model_holds_on_moto(moto_client: Any, transport: str) -> None:
    """Every invariant after every step, and at quiescence, over derandomized runs of one
    transport and both modes of each consumer (deployed from one to the other); the runs
    reach the paths the invariants are about, not only the happy one."""
    ChainMachine.seen.clear()
    started = time.monotonic()
    examples = LONG_EXAMPLES or SUITE_EXAMPLES
    run_state_machine_as_test(
        machine_on(moto_client, (transport,)),
        settings=_settings(examples, derandomize=not LONG_EXAMPLES),
    )
    seen = ChainMachine.seen
    print(f"{transport}: {examples} examples in {time.monotonic() - started:.1f} s")
    print(dict(sorted(seen.items())))
    for path in (
        "key reused past U's retention",
        "resend",
        "outcome U owed",
        "outcome U owed_sent",
        "outcome D processed",
        "outcome D duplicate",
        "U's business code found its order placed",
        "quiesced",
    ):
        assert seen[path] > 0, f"no run reached {path}"
    assert any(name.startswith("deploy ") for name in seen), "no run deployed a consumer"
    assert any(name.startswith("fault U ") for name in seen), "no fault met U's calls"


# --- the controls: each defect put back, caught by a sequence of the machine's rules ----------


def started(
    client: Any,
    *,
    transport: str = "sqs",
    upstream: str = "any",
    downstream: str = "any",
    tagged: bool = False,
) -> ChainMachine:
    machine = machine_on(client)()
    machine.setup(transport, upstream, downstream, tagged)
    return machine


def deliver(machine: ChainMachine, name: str, crash: str | None = None) -> list[Outcome]:
    """One receive of every visible message of the consumer's queue (ten at most), and one
    invocation of them: each one's outcome."""
    batch = machine.queues[name].receive(machine.clock(), 10, None)
    assert batch, f"nothing visible in {name}'s queue"
    return machine.invoke(name, batch, crash)


def a_key_reused_past_upstream_retention(
    client: Any, *, transport: str = "sqs", tagged: bool = False, upstream: str = "any"
) -> ChainMachine:
    """Order k1:1 goes through the chain; U's retention passes (D's does not); a new order
    on k1 is a new operation, which D must apply."""
    machine = started(client, transport=transport, tagged=tagged, upstream=upstream)
    machine.send_new("k1")
    assert deliver(machine, "U") == [Outcome.PROCESSED]
    assert deliver(machine, "D") == [Outcome.PROCESSED]
    machine.pass_upstream_retention()
    assert machine.jumps == 1, "U's retention did not pass"
    machine.send_new("k1")  # k1:2
    assert deliver(machine, "U") == [Outcome.PROCESSED]
    assert deliver(machine, "D") == [Outcome.PROCESSED]  # another operation: applied
    machine.quiesce()
    return machine


def an_owed_staged_operation_redelivered(client: Any, *, transport: str = "sqs") -> ChainMachine:
    """U in effects="staged": the first delivery commits, the send fails (owed); the
    redelivery's business code runs first, finds its order placed and raises: the record must
    judge it a duplicate that owes its outbox, and send it."""
    machine = started(client, transport=transport, upstream="staged")
    machine.send_new("k1")
    machine.destination_outage(True)
    assert deliver(machine, "U") == [Outcome.OWED]
    machine.destination_outage(False)
    machine.advance(chain_model.VISIBILITY_S + 1)
    deliver(machine, "U")
    machine.quiesce()
    return machine


def a_resend_after_a_failed_clear(
    client: Any, *, transport: str = "sns-envelope", upstream: str = "any"
) -> ChainMachine:
    """The outbox is sent, its clear fails (owed); D applies the message; the redelivery
    upstream resends it with the same identity: through SNS a new notification (raw delivery
    off: a new MessageId, Timestamp and Signature), which D must take for a duplicate."""
    machine = started(client, transport=transport, upstream=upstream)
    machine.send_new("k1")
    machine.clear_refused()
    assert deliver(machine, "U") == [Outcome.OWED]
    assert deliver(machine, "D") == [Outcome.PROCESSED]
    machine.advance(chain_model.VISIBILITY_S + 1)
    assert deliver(machine, "U") == [Outcome.OWED_SENT]
    [(identity, sent)] = machine.identities.items()
    assert sent == [Op("k1", 1)] * 2, f"{identity} was not resent"
    assert deliver(machine, "D") == [Outcome.DUPLICATE]  # the same message: not again
    machine.quiesce()
    return machine


def an_event_entry_failed(
    client: Any, *, transport: str = "events", code: str = "InternalFailure"
) -> ChainMachine:
    """PutEvents fails the outbox's entry (``code`` in its result entry, ``FailedEntryCount``
    1, the call itself a success): the record owes the event; the redelivery puts it again,
    and D applies it once."""
    machine = started(client, transport=transport)
    machine.send_new("k1")
    machine.faults["U"].arm(Fault("outbox-events", "failed", code))
    deliver(machine, "U")
    machine.quiesce()
    return machine


def _identity_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 2: ``once.source`` is the record id, the same for every operation on a key."""
    import once.identity

    monkeypatch.setattr(once.identity, "source_of", lambda record_id, token: record_id)


def _staged_raise_never_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 3: a staged copy that ends without its commit is never read against the
    record: its own reason (here business code's raise) stands."""
    monkeypatch.setattr(staged.StagedRunner, "_refused_by_record", lambda self, *a, **k: None)


def _sns_envelope_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 4: a SOURCE_KEY consumer hashes SNS's notification as it came, per-publish
    fields and all."""
    import once.payload

    monkeypatch.setattr(once.payload, "without_transport", lambda body: body)


def _event_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 5: a SOURCE_KEY consumer hashes an EventBridge event as it came, its ``id`` and
    ``time`` (new on every ``PutEvents``) and all."""
    import once.payload

    monkeypatch.setattr(once.payload, "without_event_transport", lambda body: body)


def _event_entries_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 6: the outbox takes a ``PutEvents`` that answered for a success, whatever its
    result entries' ``ErrorCode``s and ``FailedEntryCount`` say."""
    import once.outbox

    monkeypatch.setattr(once.outbox, "_events_outcome", lambda response, entries: SENT)


#: (the sequence of the machine's rules, the defect put back, the invariant that catches it)
CONTROLS: dict[str, tuple[Callable[[Any], ChainMachine], Callable[..., None], str]] = {
    "an identity that names the key: an operation past U's retention dropped by D": (
        a_key_reused_past_upstream_retention,
        _identity_of_the_key,
        "applied_not_once",
    ),
    "the same, the message naming its order: a CONFLICT downstream": (
        lambda client: a_key_reused_past_upstream_retention(client, tagged=True),
        _identity_of_the_key,
        "applied_not_once",
    ),
    "the same through SNS with raw delivery off, U staged": (
        lambda client: a_key_reused_past_upstream_retention(
            client, transport="sns-envelope", upstream="staged"
        ),
        _identity_of_the_key,
        "applied_not_once",
    ),
    "a staged copy that raises, never judged by the record: the outbox owed forever": (
        an_owed_staged_operation_redelivered,
        _staged_raise_never_judged,
        "owed_forever",
    ),
    "the same through SNS with raw delivery on": (
        lambda client: an_owed_staged_operation_redelivered(client, transport="sns-raw"),
        _staged_raise_never_judged,
        "owed_forever",
    ),
    "SNS's envelope hashed downstream: a resend is a CONFLICT": (
        a_resend_after_a_failed_clear,
        _sns_envelope_hashed,
        "conflict_on_resend",
    ),
    "the same, U staged": (
        lambda client: a_resend_after_a_failed_clear(client, upstream="staged"),
        _sns_envelope_hashed,
        "conflict_on_resend",
    ),
    "EventBridge's event hashed downstream: a resend is a CONFLICT": (
        lambda client: a_resend_after_a_failed_clear(client, transport="events"),
        _event_hashed,
        "conflict_on_resend",
    ),
    "PutEvents' failed entry taken for sent: its operation never applied": (
        an_event_entry_failed,
        _event_entries_unread,
        "applied_not_once",
    ),
}


@pytest.mark.parametrize("control", CONTROLS)
def test_the_chain_model_catches_each_control(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch, control: str
) -> None:
    sequence, defect, invariant = CONTROLS[control]
    defect(monkeypatch)
    with pytest.raises(Violation) as caught:
        sequence(moto_client)
    assert caught.value.name == invariant, caught.value


@pytest.mark.parametrize("control", CONTROLS)
def test_the_runtime_passes_each_control_sequence(moto_client: Any, control: str) -> None:
    sequence, _, _ = CONTROLS[control]
    machine = sequence(moto_client)
    assert all(q.empty for q in machine.queues.values())
    for key in machine.ops:
        record = machine._record("U", key)
        assert record is not None and not record.outbox, key


#: (the defect put back, the transport the suite's search runs, the invariant it must break)
SEARCHED: dict[str, tuple[Callable[..., None], str, str]] = {
    "an identity that names the key": (_identity_of_the_key, "sqs", "applied_not_once"),
    "a staged copy that raises, never judged by the record": (
        _staged_raise_never_judged,
        "sns-raw",
        "owed_forever",
    ),
    "SNS's envelope hashed downstream": (
        _sns_envelope_hashed,
        "sns-envelope",
        "conflict_on_resend",
    ),
    "EventBridge's event hashed downstream": (_event_hashed, "events", "conflict_on_resend"),
    "PutEvents' failed entry taken for sent": (
        _event_entries_unread,
        "events-detail",
        "applied_not_once",
    ),
}


@pytest.mark.parametrize("control", SEARCHED)
def test_the_suites_own_search_finds_each_defect(
    moto_client: Any, monkeypatch: pytest.MonkeyPatch, control: str
) -> None:
    """Not only a sequence written for it: the bounded run's own derandomized examples end
    in the violation (unshrunk: the first counterexample is enough)."""
    defect, transport, invariant = SEARCHED[control]
    defect(monkeypatch)
    with pytest.raises(Violation) as caught:
        run_state_machine_as_test(
            machine_on(moto_client, (transport,)),
            settings=_settings(SUITE_EXAMPLES, shrink=False),
        )
    assert caught.value.name == invariant, caught.value


# --- the transports, each resend recognised downstream --------------------------------------


@pytest.mark.parametrize("upstream", chain_model.MODES)
@pytest.mark.parametrize("transport", chain_model.TRANSPORTS)
def test_a_resend_after_a_failed_clear_is_a_duplicate_downstream(
    moto_client: Any, transport: str, upstream: str
) -> None:
    a_resend_after_a_failed_clear(moto_client, transport=transport, upstream=upstream)


@pytest.mark.parametrize("transport", chain_model.TRANSPORTS)
def test_a_key_reused_past_upstream_retention_is_applied_again_downstream(
    moto_client: Any, transport: str
) -> None:
    machine = a_key_reused_past_upstream_retention(moto_client, transport=transport)
    committed, applied = machine._counts()
    assert committed == applied == {Op("k1", 1): 1, Op("k1", 2): 1}


@pytest.mark.parametrize("code", aws_faults.EVENTS_ENTRY_CODES)
@pytest.mark.parametrize("transport", chain_model.EVENT_TRANSPORTS)
def test_an_entry_putevents_failed_is_owed_and_put_again(
    moto_client: Any, transport: str, code: str
) -> None:
    """PutEvents answers the call with the outbox's entry failed (its ``ErrorCode``,
    ``FailedEntryCount`` 1): the record owes it, nothing reached D; the redelivery puts it
    again under the same identity, and D applies it once."""
    machine = started(moto_client, transport=transport)
    machine.send_new("k1")
    machine.faults["U"].arm(Fault("outbox-events", "failed", code))
    assert deliver(machine, "U") == [Outcome.OWED]
    assert not machine.queues["D"].messages, "a failed entry reached D"
    machine.advance(chain_model.VISIBILITY_S + 1)
    assert deliver(machine, "U") == [Outcome.OWED_SENT]
    assert deliver(machine, "D") == [Outcome.PROCESSED]
    machine.quiesce()
