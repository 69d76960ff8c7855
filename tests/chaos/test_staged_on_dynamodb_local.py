"""``effects="staged"``'s race on DynamoDB Local, AWS's own engine (moto's conditional writes
and transactions are not atomic): copies of one message in flight at once may all run
business code, and exactly one commit lands.

Eight copies of one message, each a handler of its own with a client of its own (eight
Lambda instances), run business code together: each stages its effects, then all wait at a
barrier, so that every copy has run business code before any commits, and the commits
race. In three shapes: nothing staged (the commit is one conditional ``UpdateItem``);
staged writes to a ledger (one ``TransactWriteItems``, the record last); staged writes and
an outbox message. And a deploy that switches modes: a two-phase claim
(``effects="any"``) against staged copies of the same key.

Whatever the interleaving: exactly one commit lands (one copy PROCESSED, its staged effects
once, an unguarded counter at 1); every other copy ends a duplicate (``duplicate``, or
``owed_sent`` when it found the winner's outbox still owed and sent it), or, where DynamoDB
canceled its transaction for a conflict past the store's tries or the two-phase claim was
live (``failed``, ``busy``), comes back and then ends so: nothing is FAILED for good, and
no record is ever IN_PROGRESS or FAILED under staged copies alone. Nothing waits on time:
the record store's clock moves only when told, every wait is for an event (``WAIT_S`` bounds
a hang), and each shape repeats ``ROUNDS`` times for the interleavings' sake, each asserting
the same. Run inside a private network namespace (``make test``, or
``unshare -n sh -c 'ip link set lo up && exec .venv/bin/python -m pytest <this file>'``).

DynamoDB's rules relied on: a conditional write is applied only if its condition holds when
it is applied (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/
WorkingWithItems.html#WorkingWithItems.ConditionalUpdate); a ``TransactWriteItems`` applies
all of its elements or none, and a concurrent write to one of its items may cancel it with
``TransactionConflict`` (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/
API_TransactWriteItems.html).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from once import Attempt, make_handler
from once import constants as c
from once.handler import EffectsMode, Handler
from once.models import Outcome, Record, RecordResult, record_id
from once.quarantine import Quarantine
from once.store import RecordStore
from oncecli.aws import create_table, local_client
from tests.chaos.test_atomic_on_dynamodb_local import RecordingOutbox
from tests.conftest import Clock, FakeContext, build_event

pytestmark = pytest.mark.dynamodb_local

COPIES = 8
ROUNDS = 6
WAIT_S = 60  # a bound on a hang, never a pacing: every wait is for an event
RETENTION_S = 30 * 24 * 3600  # far beyond every clock move of these tests
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"
#: A copy that lost the race: the winner's commit refused its own (its outbox sent, or not).
DUPLICATES = (Outcome.DUPLICATE, Outcome.OWED_SENT)
#: A copy that comes back: its transaction canceled for a conflict past the store's tries
#: (nothing of it landed), or the key held by a live two-phase claim.
COMES_BACK = (Outcome.FAILED, Outcome.BUSY)


class Engine:
    """One test's view of DynamoDB Local: the idempotency table, a ledger table and a key
    prefix of its own, one outbox every copy sends through, and a clock moved only when told."""

    def __init__(self, endpoint: str, table: str) -> None:
        self.endpoint = endpoint
        self.client = local_client("dynamodb", endpoint)
        self.table = table
        self.ledger = f"ledger-{uuid.uuid4().hex[:12]}"
        self.prefix = f"staged-{uuid.uuid4().hex[:12]}"
        self.clock = Clock(start=1_900_000_000.0)
        self.outbox = RecordingOutbox()
        create_table(self.client, self.ledger)

    def handler(self, process: Callable[[Any, Attempt], Any], effects: EffectsMode) -> Handler:
        """A handler of its own, with a client of its own: one Lambda instance."""
        handler = make_handler(
            process,
            key="id",
            key_prefix=self.prefix,
            table_name=self.table,
            dlq_url=None,
            retention_s=RETENTION_S,
            max_workers=1,
            backoff_base_s=None,  # no SQS here: a failed copy comes back as it is
            effects=effects,
        )
        client = local_client("dynamodb", self.endpoint)
        handler.bind(
            store=RecordStore(client, self.table, retention_s=RETENTION_S, clock=self.clock),
            quarantine=Quarantine(None, None),
            outbox=self.outbox,
        )
        return handler

    def run(self, handler: Handler, body: dict[str, Any]) -> RecordResult:
        [result] = handler.handle(build_event([body]), FakeContext(remaining_ms=60_000)).records
        return result

    def items(self, key: str) -> dict[str, dict[str, Any]]:
        """The ledger's items of ``key``."""
        pages = self.client.get_paginator("scan").paginate(
            TableName=self.ledger, ConsistentRead=True
        )
        return {
            item["id"]["S"]: item
            for page in pages
            for item in page["Items"]
            if item["id"]["S"].split("#")[1] == key
        }

    def record(self, key: str) -> Record | None:
        return RecordStore(self.client, self.table, clock=self.clock).get(
            record_id(self.prefix, key)
        )


@pytest.fixture
def engine(dynamodb_local: dict) -> Iterator[Engine]:
    yield Engine(dynamodb_local["endpoint"], dynamodb_local["table"])


def stage_credit(ledger: str, key: str, attempt: Attempt) -> None:
    """The credit, staged: the payment's entry (which may be written once) and the account's
    counter, unguarded, so that a second landing shows as 2 instead of being refused."""
    attempt.write(
        {
            "Put": {
                "TableName": ledger,
                "Item": {"id": {"S": f"entry#{key}"}, "message": {"S": attempt.message_id}},
                "ConditionExpression": "attribute_not_exists(id)",
            }
        }
    )
    attempt.write(
        {
            "Update": {
                "TableName": ledger,
                "Key": {"id": {"S": f"account#{key}"}},
                "UpdateExpression": "ADD credits :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
    )


SHAPES = ("nothing staged", "staged writes", "staged writes and an outbox")


def _business(
    engine: Engine, shape: str, ran: list[str], together: threading.Barrier
) -> Callable[[Any, Attempt], Any]:
    def process(body: dict[str, Any], attempt: Attempt) -> Any:
        assert (attempt.fence, attempt.takeover, attempt.record) == (None, False, None)
        if shape != "nothing staged":
            stage_credit(engine.ledger, body["id"], attempt)
        if shape == "staged writes and an outbox":
            attempt.send(QUEUE, {"id": body["id"], "by": attempt.message_id})
        ran.append(attempt.message_id)
        together.wait()  # every copy has run business code before any commits
        return {"by": attempt.message_id}

    return process


def _delivery(engine: Engine, handler: Handler, key: str) -> Callable[[], RecordResult]:
    """One copy's delivery: ``handler`` runs the message of ``key``."""
    return lambda: engine.run(handler, {"id": key})


def _race(runs: list[Callable[[], RecordResult]]) -> list[RecordResult]:
    """Start every copy at once, each on a thread of its own; their results, in order."""
    ended: list[RecordResult | None] = [None] * len(runs)

    def run(index: int) -> None:
        ended[index] = runs[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(runs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads), "a copy hung"
    assert all(result is not None for result in ended), "a copy raised"
    return [result for result in ended if result is not None]


def _settle(engine: Engine, key: str, results: list[RecordResult], again: Handler) -> Counter[str]:
    """Each copy that comes back is redelivered, as SQS would, until it ends: every
    outcome, in the end, of the race and its redeliveries."""
    ended: Counter[str] = Counter()
    for result in results:
        for _ in range(3):
            if result.outcome not in COMES_BACK:
                break
            result = engine.run(again, {"id": key})
        assert result.outcome not in COMES_BACK, f"{key}: still {result.outcome} after retries"
        ended[result.outcome] += 1
    return ended


@pytest.mark.parametrize("shape", SHAPES)
def test_copies_in_flight_all_run_business_code_and_exactly_one_commit_lands(
    engine: Engine, shape: str
) -> None:
    seen: Counter[str] = Counter()
    for index in range(ROUNDS):
        key = f"k-{index}"
        ran: list[str] = []
        together = threading.Barrier(COPIES, timeout=WAIT_S)
        handlers = [
            engine.handler(_business(engine, shape, ran, together), "staged") for _ in range(COPIES)
        ]
        sent_before = len(engine.outbox.sent)
        results = _race([_delivery(engine, h, key) for h in handlers])

        assert len(ran) == COPIES  # every copy ran business code, none was told to wait
        seen.update(str(r.outcome) for r in results)
        winners = [r for r in results if r.outcome is Outcome.PROCESSED]
        assert len(winners) <= 1, f"{key}: {len(winners)} commits landed"
        assert all(r.outcome in (Outcome.PROCESSED, *DUPLICATES, *COMES_BACK) for r in results)
        no_more = threading.Barrier(1)  # a redelivery waits for no one
        again = engine.handler(_business(engine, shape, [], no_more), "staged")
        ended = _settle(engine, key, results, again)
        assert ended[Outcome.PROCESSED] == 1, f"{key}: {dict(ended)}"
        assert sum(ended[o] for o in DUPLICATES) == COPIES - 1

        record = engine.record(key)
        assert record is not None
        assert (record.status, record.fence, record.outbox) == (c.STATUS_COMPLETED, 1, ())
        winner = json.loads(record.result or "null")["by"]
        items = engine.items(key)
        if shape == "nothing staged":
            assert items == {}
        else:
            assert set(items) == {f"entry#{key}", f"account#{key}"}
            assert items[f"account#{key}"]["credits"] == {"N": "1"}  # the effect landed once
            assert items[f"entry#{key}"]["message"] == {"S": winner}  # the winner's
        sends = engine.outbox.sent[sent_before:]
        if shape == "staged writes and an outbox":
            # The winner's message, sent at least once (by the winner, or by a duplicate that
            # found it owed), under the record's identity; never a loser's.
            assert sends, f"{key}: the outbox was never sent"
            for source, messages in sends:
                assert source == record_id(engine.prefix, key)
                assert [json.loads(m.body)["by"] for m in messages] == [winner]
        else:
            assert sends == []
    print(f"{shape}: outcomes over {ROUNDS} races of {COPIES} copies: {dict(seen)}")


@pytest.mark.parametrize("order", ["together", "claim first"])
def test_a_two_phase_claim_against_staged_copies_lands_exactly_one_effect(
    engine: Engine, order: str
) -> None:
    """A deploy that switches modes: one copy claims (``effects="any"``: claim, business
    code, commit), the others commit staged. ``together``: all start at once, any
    interleaving. ``claim first``: the staged copies run business code only once the claim
    landed, and the claim's business code returns only once every staged copy ended, so
    each staged commit meets the live claim. The claim refuses the staged commits while it
    is live (BUSY: they come back), a staged commit that landed refuses the claim
    (DUPLICATE): exactly one effect, whichever wins."""
    seen: Counter[tuple[str, str]] = Counter()
    for index in range(ROUNDS):
        seen[_mode_switch(engine, f"k-{index}", order)] += 1
    print(f"{order}: the claim's outcome, and a staged winner, over {ROUNDS} races: {dict(seen)}")


def _mode_switch(engine: Engine, key: str, order: str) -> tuple[str, str]:
    """One race of the mode switch; (the claim's outcome, whether a staged copy won)."""
    start = threading.Barrier(COPIES, timeout=WAIT_S)
    claimed, staged_ended = threading.Event(), threading.Event()
    ended_copies: list[RecordResult] = []

    def two_phase(body: dict[str, Any], attempt: Attempt) -> Any:
        assert attempt.fence is not None  # claimed: the fence is known
        stage_credit(engine.ledger, body["id"], attempt)
        if order == "claim first":
            claimed.set()
            assert staged_ended.wait(WAIT_S)
        return {"by": attempt.message_id}

    def staged(body: dict[str, Any], attempt: Attempt) -> Any:
        if order == "claim first":
            assert claimed.wait(WAIT_S)
        stage_credit(engine.ledger, body["id"], attempt)
        return {"by": attempt.message_id}

    claiming = engine.handler(two_phase, "any")

    def claim() -> RecordResult:
        start.wait()
        return engine.run(claiming, {"id": key})

    def copy(handler: Handler) -> Callable[[], RecordResult]:
        def run() -> RecordResult:
            start.wait()
            result = engine.run(handler, {"id": key})
            ended_copies.append(result)
            if len(ended_copies) == COPIES - 1:
                staged_ended.set()
            return result

        return run

    copies = [copy(engine.handler(staged, "staged")) for _ in range(COPIES - 1)]
    results = _race([claim, *copies])

    assert sum(r.outcome is Outcome.PROCESSED for r in results) <= 1
    if order == "claim first":
        assert results[0].outcome is Outcome.PROCESSED
        assert {r.outcome for r in results[1:]} == {Outcome.BUSY}
    staged_won = any(r.outcome is Outcome.PROCESSED for r in results[1:])
    ended = _settle(engine, key, results, engine.handler(staged, "staged"))
    assert ended[Outcome.PROCESSED] == 1, f"{key}: {dict(ended)}"
    assert sum(ended[o] for o in DUPLICATES) == COPIES - 1

    record = engine.record(key)
    assert record is not None and record.status == c.STATUS_COMPLETED
    items = engine.items(key)
    assert set(items) == {f"entry#{key}", f"account#{key}"}
    assert items[f"account#{key}"]["credits"] == {"N": "1"}  # exactly one effect
    assert items[f"entry#{key}"]["message"] == {"S": json.loads(record.result or "{}")["by"]}
    return str(results[0].outcome), "a staged copy won" if staged_won else "none"
