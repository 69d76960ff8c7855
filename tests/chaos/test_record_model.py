"""Model-based test of the record store on DynamoDB Local.

Several simulated workers claim, complete and fail one key while a simulated clock moves
past leases, workers' clocks are skewed within the lease margin, responses to applied
writes are lost (so the SDK retries them) and TTL sweeps delete expired records. After
every step the item in DynamoDB must equal a plain-Python model of docs/design.md (The
record, Transitions), and the record invariants must hold.

The control runs the same machine on a store whose finalize ignores the fence, and must
catch the zombie's write: by construction, on hand-written sequences of steps that end in
a stale finalize, and by the search itself, run derandomized so that whether it finds one
does not depend on the seed of the day.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, replace

import boto3
import pytest
from botocore.config import Config
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from once import constants as c
from once.models import Outcome, Record
from once.store import Claimed, RecordStore, Rejected
from proof.chaos.faults import Injector
from proof.chaos.unfenced import UnfencedRecordStore

WORKERS = 3
LEASE_MS = 10_000
MARGIN_S = 2.0  # skew stays within the lease margin
RETENTION_S = 60  # short, so that expiry and TTL sweeps happen within a run
PAYLOADS = ("A", "B")


def _hash(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()


class StaleWrite(AssertionError):
    """A finalize landed that the protocol must refuse: its claim no longer owns the record."""


@dataclass(frozen=True)
class Model:
    """What docs/design.md says the item holds."""

    status: str
    fence: int
    owner: str
    lease_expires_at: int | None
    expires_at: int
    payload_hash: str
    result: str | None


class RecordMachine(RuleBasedStateMachine):
    endpoint: str
    table: str
    store_class: type[RecordStore] = RecordStore
    lost_responses = 0

    def __init__(self) -> None:
        super().__init__()
        # Fresh clients per run: botocore's retry quota would otherwise drain across runs.
        config = Config(retries={"mode": "standard", "max_attempts": 3})
        self.client = boto3.client("dynamodb", endpoint_url=self.endpoint, config=config)
        self.lossy_client = boto3.client("dynamodb", endpoint_url=self.endpoint, config=config)
        self.injector = Injector(self.lossy_client)
        self.injector.lose_responses(1.0, operations=("UpdateItem",))
        self.key = f"model#{uuid.uuid4().hex}"
        self.now = 1_900_000_000.0
        self.skew = [0.0] * WORKERS
        self.stores = [self._store(w, self.client) for w in range(WORKERS)]
        self.lossy = [self._store(w, self.lossy_client) for w in range(WORKERS)]
        self.claims: list[Claimed | None] = [None] * WORKERS
        self.model: Model | None = None
        self.swept = False
        self.completed: tuple[int, str] | None = None  # (fence, result) while live

    def _store(self, worker: int, client: object) -> RecordStore:
        return self.store_class(
            client,
            self.table,
            retention_s=RETENTION_S,
            clock=lambda: self.now + self.skew[worker],
        )

    def _clock(self, worker: int) -> tuple[int, int]:
        t = self.now + self.skew[worker]
        return int(t), int(t * 1000)

    # --- rules -------------------------------------------------------------------------
    @rule(worker=st.integers(0, WORKERS - 1), payload=st.sampled_from(PAYLOADS), lost=st.booleans())
    def claim(self, worker: int, payload: str, lost: bool) -> None:
        store = (self.lossy if lost else self.stores)[worker]
        ph = _hash(payload)
        now_s, now_ms = self._clock(worker)
        got = store.claim(self.key, payload_hash=ph, message_id=f"m{worker}", lease_ms=LEASE_MS)
        m = self.model
        accept = (
            m is None
            or m.expires_at < now_s
            or (
                (
                    m.status == c.STATUS_FAILED
                    or (m.status == c.STATUS_IN_PROGRESS and (m.lease_expires_at or 0) < now_ms)
                )
                and m.payload_hash == ph
            )
        )
        if accept:
            assert isinstance(got, Claimed), got
            fence = (m.fence if m else 0) + 1
            assert got.fence == fence
            if m is not None and m.expires_at < now_s:
                self.completed = None
            self.model = Model(
                c.STATUS_IN_PROGRESS,
                fence,
                got.owner,
                now_ms + LEASE_MS,
                now_s + RETENTION_S,
                ph,
                None,
            )
            self.claims[worker] = got
            return
        assert m is not None and isinstance(got, Rejected), got
        expected = (
            Outcome.CONFLICT
            if m.payload_hash != ph
            else Outcome.DUPLICATE
            if m.status == c.STATUS_COMPLETED
            else Outcome.BUSY
        )
        assert got.outcome is expected, (got.outcome, expected)

    @precondition(lambda self: any(self.claims))
    @rule(worker=st.integers(0, WORKERS - 1), lost=st.booleans(), complete=st.booleans())
    def finalize(self, worker: int, lost: bool, complete: bool) -> None:
        claim = self.claims[worker]
        if claim is None:
            return
        store = (self.lossy if lost else self.stores)[worker]
        now_s, _ = self._clock(worker)
        value = f"r{claim.fence}-{claim.owner[:6]}"
        ok = (
            store.complete(self.key, claim, value)
            if complete
            else store.fail(self.key, claim, "Boom: injected")
        )
        m = self.model
        mine = (
            m is not None
            and m.owner == claim.owner
            and m.fence == claim.fence
            and m.status == c.STATUS_IN_PROGRESS
        )
        if ok and not mine:
            raise StaleWrite(f"a finalize by fence {claim.fence} landed on {m}")
        assert ok == mine, (ok, m, claim)
        self.claims[worker] = None
        if not mine:
            return
        assert m is not None
        if complete:
            self.model = replace(
                m,
                status=c.STATUS_COMPLETED,
                result=value,
                lease_expires_at=None,
                expires_at=now_s + RETENTION_S,
            )
            self.completed = (claim.fence, value)
        else:
            self.model = replace(m, status=c.STATUS_FAILED, lease_expires_at=None)

    @rule(seconds=st.floats(0, 2 * LEASE_MS / 1000))
    def pause_past_the_lease(self, seconds: float) -> None:
        self.now += seconds

    @rule(worker=st.integers(0, WORKERS - 1), skew=st.floats(-MARGIN_S, MARGIN_S))
    def skew_clock(self, worker: int, skew: float) -> None:
        self.skew[worker] = skew

    @rule()
    def ttl_sweep(self) -> None:
        """What DynamoDB's TTL process does, some time after expiry: delete the item."""
        if self.model is None or self.model.expires_at >= int(self.now):
            return
        self.client.delete_item(
            TableName=self.table,
            Key={c.ATTR_ID: {"S": self.key}},
            ConditionExpression="#e < :now",
            ExpressionAttributeNames={"#e": c.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":now": {"N": str(int(self.now))}},
        )
        self.model, self.completed, self.swept = None, None, True

    # --- invariants ----------------------------------------------------------------------
    def teardown(self) -> None:
        RecordMachine.lost_responses += self.injector.counts.get("lost_response", 0)

    def all_invariants_hold(self) -> None:
        """Every invariant, for a sequence of steps replayed by hand."""
        self.the_item_is_what_the_protocol_says()
        self.at_most_one_claim_can_still_finalize()
        self.a_completed_result_never_changes_while_the_record_lives()

    @invariant()
    def the_item_is_what_the_protocol_says(self) -> None:
        actual = self.stores[0].get(self.key)
        m = self.model
        if m is None:
            assert actual is None
            return
        assert actual is not None
        assert (
            actual.status,
            actual.fence,
            actual.owner,
            actual.lease_expires_at,
            actual.expires_at,
            actual.payload_hash,
            actual.result,
        ) == (
            m.status,
            m.fence,
            m.owner,
            m.lease_expires_at,
            m.expires_at,
            m.payload_hash,
            m.result,
        )

    @invariant()
    def at_most_one_claim_can_still_finalize(self) -> None:
        m = self.model
        holders = [
            cl
            for cl in self.claims
            if cl is not None
            and m is not None
            and cl.owner == m.owner
            and cl.fence == m.fence
            and m.status == c.STATUS_IN_PROGRESS
        ]
        assert len(holders) <= 1

    @invariant()
    def a_completed_result_never_changes_while_the_record_lives(self) -> None:
        actual: Record | None = self.stores[0].get(self.key)
        if (
            self.completed is not None
            and actual is not None
            and actual.status == c.STATUS_COMPLETED
        ):
            assert (actual.fence, actual.result) == self.completed


def _on(machine: type[RecordMachine], dynamodb_local: dict) -> type[RecordMachine]:
    machine.endpoint = dynamodb_local["endpoint"]
    machine.table = dynamodb_local["table"]
    return machine


def _run(
    machine: type[RecordMachine],
    dynamodb_local: dict,
    examples: int,
    shrink: bool = True,
    derandomize: bool = False,
) -> None:
    _on(machine, dynamodb_local)
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)
    machine.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=30,
        deadline=None,
        database=None,
        phases=phases,
        report_multiple_bugs=False,
        derandomize=derandomize,
    )
    machine.TestCase().runTest()


Step = tuple[str, dict[str, object]]


def _zombie(*, lost: bool, complete: bool) -> list[Step]:
    """Worker 0 claims, stalls past its lease, worker 1 takes the record over, and then the
    zombie finalizes (its response lost, so the SDK retries, when ``lost``); the new owner
    finalizes last. The protocol must refuse the zombie's write and accept the owner's."""
    return [
        ("claim", {"worker": 0, "payload": "A", "lost": False}),
        ("pause_past_the_lease", {"seconds": LEASE_MS / 1000 + MARGIN_S + 1}),
        ("claim", {"worker": 1, "payload": "A", "lost": False}),
        ("finalize", {"worker": 0, "lost": lost, "complete": complete}),
        ("finalize", {"worker": 1, "lost": False, "complete": True}),
    ]


ZOMBIES = {
    f"zombie-{'completes' if complete else 'fails'}{'-response-lost' if lost else ''}": _zombie(
        lost=lost, complete=complete
    )
    for complete in (True, False)
    for lost in (False, True)
}


def _replay(machine: type[RecordMachine], steps: list[Step]) -> None:
    """Run ``steps`` on one machine, checking every invariant after each, as the search does."""
    state = machine()
    try:
        state.all_invariants_hold()
        for name, arguments in steps:
            getattr(state, name)(**arguments)
            state.all_invariants_hold()
    finally:
        state.teardown()


def test_record_store_matches_the_model_under_faults(dynamodb_local: dict) -> None:
    _run(RecordMachine, dynamodb_local, examples=40)
    assert RecordMachine.lost_responses > 0


@pytest.mark.parametrize("steps", ZOMBIES.values(), ids=ZOMBIES.keys())
def test_the_fence_refuses_a_zombie_finalize(dynamodb_local: dict, steps: list[Step]) -> None:
    _replay(_on(RecordMachine, dynamodb_local), steps)


class UnfencedMachine(RecordMachine):
    store_class = UnfencedRecordStore


@pytest.mark.parametrize("steps", ZOMBIES.values(), ids=ZOMBIES.keys())
def test_the_model_catches_a_zombie_finalize_without_its_fence(
    dynamodb_local: dict, steps: list[Step]
) -> None:
    """Control, by construction: these steps end in a stale write the model must catch."""
    with pytest.raises(StaleWrite):
        _replay(_on(UnfencedMachine, dynamodb_local), steps)


def test_the_model_catches_a_finalize_without_its_fence(dynamodb_local: dict) -> None:
    """Control of the search: with the fence condition switched off, the search must find a
    zombie's write. Derandomized, so it explores the same examples on every run."""
    with pytest.raises(StaleWrite):
        _run(UnfencedMachine, dynamodb_local, examples=2000, shrink=False, derandomize=True)
