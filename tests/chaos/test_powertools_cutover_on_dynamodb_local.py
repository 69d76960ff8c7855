"""The deploy window of a migration, on DynamoDB Local (whose conditional writes and
transactions are atomic, as DynamoDB's are): the Powertools build and the once build poll
one queue at once, SQS delivers every renewal twice, invocations race on threads, and both
builds die mid-flight; every renewal is charged exactly once (docs/migrating.md, "Two
consumers at once").

The Powertools build is Powertools' own code (``tests/integration/powertools_team.py``); it
dies after taking its record and before charging (a kill after the charge is Powertools'
own window, which no bridge can close: the charge and its record are two writes). once dies
at each of its crash points (``once.testing.crash``). A copy that is not acknowledged comes
back, as SQS returns it, until each is done; the time that takes is no part of the claim.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from once.handler import Handler
from once.quarantine import Quarantine
from once.testing.crash import (
    AFTER_PROCESS,
    BEFORE_FINALIZE,
    CrashingStore,
    InvocationKilled,
    KillSwitch,
)
from oncecli.aws import create_table, local_client
from tests.conftest import FakeContext, build_event
from tests.integration import powertools_team as team

RENEWALS = 16
COPIES = 2
#: Each invocation's time left: once's lease and Powertools' in-progress expiry both follow
#: it, so a dead invocation's hold passes within a second.
REMAINING_MS = 1_000
#: How long the copies may take to be done, at most (a livelock, not slowness, would pass it).
PATIENCE_S = 180


class Killed(BaseException):
    """The Powertools build's invocation dies (as a SIGKILL: no ``except Exception`` sees it)."""


class Queue:
    """The source queue, as far as the consumers see it: copies out, unacknowledged copies
    back (after a pause, as a visibility timeout returns them)."""

    def __init__(self, bodies: list[dict[str, Any]], seed: int) -> None:
        self._copies = [b for b in bodies for _ in range(COPIES)]
        random.Random(seed).shuffle(self._copies)
        self._lock = threading.Lock()
        self._out = 0

    def take(self) -> dict[str, Any] | None:
        with self._lock:
            if not self._copies:
                return None
            self._out += 1
            return self._copies.pop()

    def settle(self, body: dict[str, Any], done: bool) -> None:
        with self._lock:
            self._out -= 1
            if not done:
                self._copies.insert(0, body)

    def drained(self) -> bool:
        with self._lock:
            return not self._copies and not self._out


@pytest.fixture
def tables(dynamodb_local: dict) -> Iterator[tuple[Any, str, str]]:
    client = local_client("dynamodb", dynamodb_local["endpoint"])
    ledger = f"ledger-{uuid.uuid4().hex[:12]}"
    create_table(client, ledger)
    suffix = uuid.uuid4().hex[:8]
    team_table = f"{team.POWERTOOLS_TABLE}-{suffix}"
    create_table(client, team_table)
    yield client, ledger, team_table


def test_both_builds_on_one_queue_charge_each_renewal_once(
    tables: tuple[Any, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, ledger, powertools_table = tables
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", team.OLD_FUNCTION)
    monkeypatch.setattr(team, "POWERTOOLS_TABLE", powertools_table)
    renewals = [f"r-{i}" for i in range(RENEWALS)]
    bodies = [{"renewalId": r, "amount": i} for i, r in enumerate(renewals)]
    rng = random.Random(48)
    chosen = rng.sample(renewals, 2 * (RENEWALS // 3))
    # A third of the renewals: the Powertools build takes their copies until it has died
    # once holding one, before the charge; another third: once takes theirs until it has
    # died once after business code ran (its effects staged, not landed) or with its commit
    # on the wire (landed, never answered): the points every run of either mode reaches.
    powertools_dies = set(chosen[: RENEWALS // 3])
    points = (AFTER_PROCESS, BEFORE_FINALIZE)
    once_dies = {r: points[i % 2] for i, r in enumerate(chosen[RENEWALS // 3 :])}
    killed_charges = {"n": 0}
    lock = threading.Lock()

    def route(renewal: str, coin: float) -> tuple[str, str | None]:
        """Which build takes this copy, and where once dies (None: it does not)."""
        with lock:
            if renewal in once_dies:
                return "once", once_dies[renewal]
            if renewal in powertools_dies:
                return "powertools", None
        return ("powertools" if coin < 0.5 else "once"), None

    def charge(dynamodb: Any, ledger_name: str, renewal: str) -> None:
        with lock:
            dies = renewal in powertools_dies
            powertools_dies.discard(renewal)
            killed_charges["n"] += dies
        if dies:
            raise Killed(renewal)
        dynamodb.update_item(**team.charge_element(ledger_name, renewal))

    monkeypatch.setattr(team, "charge_on", charge)
    old = team.powertools_build(client, ledger)
    bridge = team.bridge(old)
    queue = Queue(bodies, seed=48)
    prefix = f"subscriptions-{uuid.uuid4().hex[:8]}"
    crashes = {"once": 0}

    def once_run(handler: Handler, body: dict[str, Any], point: str | None) -> bool:
        switch = KillSwitch(point)
        handler.bind(
            store=CrashingStore(
                client, "idempotency", retention_s=86_400, clock=time.time, switch=switch
            ),
            quarantine=Quarantine(None, None),
        )
        try:
            result = handler.handle(build_event([body]), FakeContext(remaining_ms=REMAINING_MS))
        except InvocationKilled:
            with lock:
                once_dies.pop(body["renewalId"], None)
                crashes["once"] += 1
            return False
        return all(r.outcome.acknowledged for r in result.records)

    def powertools_run(old: team.PowertoolsBuild, body: dict[str, Any]) -> bool:
        try:
            response = old.handler(build_event([body]), FakeContext(remaining_ms=REMAINING_MS))
        except (Killed, BatchProcessingError):
            return False
        return not response["batchItemFailures"]

    def worker(seed: int, effects: str) -> None:
        own = random.Random(seed)
        # One Lambda instance of each build per thread: Powertools' BatchProcessor and its
        # persistence layer hold one invocation's state, as a Lambda instance runs one.
        old = team.powertools_build(client, ledger)
        handler = team.once_build(
            ledger,
            "idempotency",
            bridge,
            effects=effects,
            key_prefix=prefix,
            dlq_url=None,
            lease_margin_s=0,
            min_remaining_ms=100,
            max_workers=1,
            backoff_base_s=None,
        )
        deadline = time.monotonic() + PATIENCE_S
        while not queue.drained() and time.monotonic() < deadline:
            body = queue.take()
            if body is None:
                time.sleep(0.02)
                continue
            build, point = route(body["renewalId"], own.random())
            done = (
                powertools_run(old, body)
                if build == "powertools"
                else once_run(handler, body, point)
            )
            queue.settle(body, done)
            if not done:
                time.sleep(0.05)

    threads = [
        threading.Thread(target=worker, args=(seed, effects))
        for seed, effects in enumerate(["any", "staged", "any", "staged"])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert queue.drained(), "copies were still coming back after the patience ran out"
    charged = {r: team.charges(client, ledger, r) for r in renewals}
    assert charged == dict.fromkeys(renewals, 1)
    # The faults happened: the run proves something.
    assert not powertools_dies, powertools_dies
    assert killed_charges["n"] == RENEWALS // 3
    assert not once_dies, once_dies
    assert crashes["once"] >= RENEWALS // 3
