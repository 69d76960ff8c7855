"""Issue 23's atomicity claims on DynamoDB Local, AWS's own engine (moto's transactions are not
atomic): the commit of staged writes with the record's completion is one TransactWriteItems,
all of it or none of it.

- a refused business condition leaves no other staged write behind, wherever it stands;
- a zombie's commit lands nothing, and a zombie's commit racing the takeover lands exactly
  one of the two attempts' writes, never part of one;
- an SDK retry of a commit that landed is recognised: by DynamoDB through the commit's
  ClientRequestToken, and past the token's window by the record's own-retry rule;
- no staged write: the plain fenced UpdateItem;
- the largest outbox beside the largest result fits the record.

The handlers run on the engine through ``Handler.bind`` (a record store on the test's clock, an
outbox that records what it was asked to send). Nothing depends on timing: leases pass by the
clock, the race's two sides start together at a barrier and every interleaving must satisfy
the same invariants. Run inside a private network namespace (``make test``, or
``unshare -n sh -c 'ip link set lo up && exec .venv/bin/python -m pytest <this file>'``).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

import once.store
from once import Attempt, make_handler
from once import constants as c
from once.awserrors import Sent
from once.effects import Effects, OutboxMessage
from once.handler import Handler
from once.models import Outcome, Record, RecordResult, record_id
from once.outbox import Outbox
from once.quarantine import Quarantine
from once.store import Claimed, RecordStore
from oncecli.aws import create_table, local_client
from proof.chaos.faults import Injector
from tests.conftest import Clock, FakeContext, build_event, count_calls

pytestmark = pytest.mark.dynamodb_local

WAIT_S = 60  # a bound on a hang, never a pacing: every wait is for an event
RETENTION_S = 30 * 24 * 3600  # far beyond every clock move of these tests
LEASE_PASSES_S = 600  # past any lease of a 60 s context and its margin
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"


class RecordingOutbox(Outbox):
    """Accepts every send and keeps it: what the record's outbox handed over, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[OutboxMessage, ...]]] = []
        self._lock = threading.Lock()

    def send(self, source: str, messages: Sequence[OutboxMessage]) -> Sent:
        with self._lock:
            self.sent.append((source, tuple(messages)))
        return Sent(True)


class Engine:
    """One test's view of DynamoDB Local: a client, the idempotency table, a ledger table of
    its own, a key prefix of its own and a clock that moves only when told."""

    def __init__(self, endpoint: str, table: str) -> None:
        self.endpoint = endpoint
        self.client = local_client("dynamodb", endpoint)
        self.table = table
        self.ledger = f"ledger-{uuid.uuid4().hex[:12]}"
        self.prefix = f"atomic-{uuid.uuid4().hex[:12]}"
        self.clock = Clock(start=1_900_000_000.0)
        create_table(self.client, self.ledger)

    def handler(
        self,
        process: Callable[[Any, Attempt], Any],
        *,
        store_class: type[RecordStore] = RecordStore,
        client: Any = None,
        outbox: Outbox | None = None,
    ) -> Handler:
        handler = make_handler(
            process,
            key="id",
            key_prefix=self.prefix,
            table_name=self.table,
            dlq_url=None,
            retention_s=RETENTION_S,
            max_workers=1,
            backoff_base_s=None,  # no SQS here: a failed record comes back as it is
        )
        handler.bind(
            store=store_class(
                client or self.client, self.table, retention_s=RETENTION_S, clock=self.clock
            ),
            quarantine=Quarantine(None, None),
            outbox=outbox or RecordingOutbox(),
        )
        return handler

    def run(self, handler: Handler, bodies: list[dict[str, Any]]) -> list[RecordResult]:
        return list(handler.handle(build_event(bodies), FakeContext(remaining_ms=60_000)).records)

    def items(self) -> dict[str, dict[str, Any]]:
        pages = self.client.get_paginator("scan").paginate(
            TableName=self.ledger, ConsistentRead=True
        )
        return {item["id"]["S"]: item for page in pages for item in page["Items"]}

    def record(self, key: str) -> Record | None:
        return RecordStore(self.client, self.table, clock=self.clock).get(
            record_id(self.prefix, key)
        )

    def put(self, key: str, **attributes: dict[str, str]) -> None:
        self.client.put_item(TableName=self.ledger, Item={"id": {"S": key}, **attributes})


@pytest.fixture
def engine(dynamodb_local: dict) -> Iterator[Engine]:
    yield Engine(dynamodb_local["endpoint"], dynamodb_local["table"])


def entry(ledger: str, key: str, fence: int) -> dict[str, Any]:
    """A Put that may land once: the attempt's entry."""
    return {
        "Put": {
            "TableName": ledger,
            "Item": {"id": {"S": f"entry#{key}#{fence}"}, "fence": {"N": str(fence)}},
            "ConditionExpression": "attribute_not_exists(id)",
        }
    }


def credit(ledger: str, key: str, fence: int) -> dict[str, Any]:
    """The account's counter, and the fence that last moved it."""
    return {
        "Update": {
            "TableName": ledger,
            "Key": {"id": {"S": f"account#{key}"}},
            "UpdateExpression": "ADD credits :one SET last_fence = :f",
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":f": {"N": str(fence)}},
        }
    }


def audit(ledger: str, key: str, fence: int) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": ledger,
            "Item": {"id": {"S": f"audit#{key}#{fence}"}, "fence": {"N": str(fence)}},
        }
    }


def attempt_writes(ledger: str, key: str, fence: int | None) -> list[dict[str, Any]]:
    """The attempt's three writes; ``fence``: its claim's (these handlers are two-phase)."""
    assert fence is not None
    return [entry(ledger, key, fence), credit(ledger, key, fence), audit(ledger, key, fence)]


# --- a refused element leaves no other staged write ------------------------------------------


@pytest.mark.parametrize("position", [0, 2, 4], ids=["first", "middle", "last"])
def test_a_refused_element_leaves_no_other_staged_write(engine: Engine, position: int) -> None:
    engine.put("account#k-1", credits={"N": "41"}, last_fence={"N": "0"})
    before = engine.items()
    refusing = {
        "ConditionCheck": {
            "TableName": engine.ledger,
            "Key": {"id": {"S": "limit#k-1"}},  # no such item
            "ConditionExpression": "attribute_exists(id)",
        }
    }

    def business(body: dict[str, Any], attempt: Attempt) -> str:
        writes = [
            *attempt_writes(engine.ledger, body["id"], attempt.fence),
            {
                "Put": {
                    "TableName": engine.ledger,
                    "Item": {"id": {"S": "other#k-1"}},
                }
            },
        ]
        writes.insert(position, refusing)
        for element in writes:
            attempt.write(element)
        attempt.send(QUEUE, {"id": body["id"]})
        return "credited"

    outbox = RecordingOutbox()
    [result] = engine.run(engine.handler(business, outbox=outbox), [{"id": "k-1"}])

    assert (result.outcome, result.reason) == (Outcome.FAILED, c.REASON_WRITE_REFUSED)
    assert engine.items() == before  # not one of the four other writes landed
    assert outbox.sent == []
    record = engine.record("k-1")
    assert record is not None
    assert (record.status, record.outbox) == (c.STATUS_FAILED, ())
    assert record.error == (
        f"{c.REASON_WRITE_REFUSED}: staged write {position} (ConditionCheck on table "
        f"{engine.ledger}) was refused by its condition"
    )


def test_a_refused_put_condition_on_an_existing_item_leaves_no_other_staged_write(
    engine: Engine,
) -> None:
    engine.put("entry#k-1#1", fence={"N": "99"})  # the entry exists already
    before = engine.items()

    def business(body: dict[str, Any], attempt: Attempt) -> str:
        for element in attempt_writes(engine.ledger, body["id"], attempt.fence):
            attempt.write(element)
        return "credited"

    [result] = engine.run(engine.handler(business), [{"id": "k-1"}])

    assert result.reason == c.REASON_WRITE_REFUSED
    assert engine.items() == before


# --- zombies --------------------------------------------------------------------------------


def test_a_zombies_commit_lands_nothing(engine: Engine) -> None:
    """The zombie's lease passes while its business code runs; the redelivery takes the key
    over and commits; then the zombie returns, and its commit is refused whole."""
    takeover_outbox, zombie_outbox = RecordingOutbox(), RecordingOutbox()
    takeovers: list[list[RecordResult]] = []

    def stage(body: dict[str, Any], attempt: Attempt) -> None:
        for element in attempt_writes(engine.ledger, body["id"], attempt.fence):
            attempt.write(element)
        attempt.send(QUEUE, {"fence": attempt.fence})

    def takeover_business(body: dict[str, Any], attempt: Attempt) -> str:
        stage(body, attempt)
        return "takeover"

    takeover = engine.handler(takeover_business, outbox=takeover_outbox)

    def zombie_business(body: dict[str, Any], attempt: Attempt) -> str:
        stage(body, attempt)
        engine.clock.advance(LEASE_PASSES_S)
        takeovers.append(engine.run(takeover, [body]))
        return "zombie"

    zombie = engine.handler(zombie_business, outbox=zombie_outbox)

    [result] = engine.run(zombie, [{"id": "k-1"}])

    assert result.outcome is Outcome.LEASE_LOST
    assert [[r.outcome for r in rs] for rs in takeovers] == [[Outcome.PROCESSED]]
    items = engine.items()
    assert set(items) == {"entry#k-1#2", "account#k-1", "audit#k-1#2"}  # none of fence 1
    assert items["account#k-1"]["credits"] == {"N": "1"}
    assert items["account#k-1"]["last_fence"] == {"N": "2"}
    assert zombie_outbox.sent == []
    assert [[json.loads(m.body) for m in ms] for _, ms in takeover_outbox.sent] == [[{"fence": 2}]]
    record = engine.record("k-1")
    assert record is not None
    assert (record.status, record.fence, record.result) == (c.STATUS_COMPLETED, 2, '"takeover"')


RACES = 24


def test_concurrent_zombie_and_takeover_commits_land_exactly_one_never_partially(
    engine: Engine,
) -> None:
    """Per key: a zombie (fence 1) holds its staged writes past its lease; then its commit and
    a redelivery's takeover (claim, business code, commit) start together. Whichever wins,
    exactly one attempt's three writes land, all of them; a race that left the key unfinished
    (a transaction conflict) is finished by a later redelivery, and the same holds."""
    combos: Counter[tuple[str, str]] = Counter()
    for index in range(RACES):
        key = f"k-{index}"
        combos[_race(engine, key)] += 1
        _settle(engine, key)

        record = engine.record(key)
        assert record is not None and record.status == c.STATUS_COMPLETED
        fence = record.fence
        items = {k: v for k, v in engine.items().items() if k.split("#")[1] == key}
        assert set(items) == {f"entry#{key}#{fence}", f"account#{key}", f"audit#{key}#{fence}"}
        assert items[f"account#{key}"]["credits"] == {"N": "1"}
        assert items[f"account#{key}"]["last_fence"] == {"N": str(fence)}
    # Every interleaving is allowed; none may land two attempts (asserted in _race).
    print(f"zombie/takeover outcomes over {RACES} races: {dict(combos)}")


def _race(engine: Engine, key: str) -> tuple[str, str]:
    start = threading.Barrier(2, timeout=WAIT_S)
    staged = threading.Event()

    def stage(body: dict[str, Any], attempt: Attempt) -> None:
        for element in attempt_writes(engine.ledger, body["id"], attempt.fence):
            attempt.write(element)

    def zombie_business(body: dict[str, Any], attempt: Attempt) -> str:
        stage(body, attempt)
        staged.set()
        start.wait()  # returns with the takeover's start: its commit races the takeover
        return "zombie"

    def takeover_business(body: dict[str, Any], attempt: Attempt) -> str:
        stage(body, attempt)
        return "takeover"

    # Each side its own client, as two Lambda instances have.
    zombie = engine.handler(zombie_business, client=local_client("dynamodb", engine.endpoint))
    takeover = engine.handler(takeover_business, client=local_client("dynamodb", engine.endpoint))
    ended: dict[str, Outcome] = {}

    def run_zombie() -> None:
        [result] = engine.run(zombie, [{"id": key}])
        ended["zombie"] = result.outcome

    def run_takeover() -> None:
        start.wait()
        [result] = engine.run(takeover, [{"id": key}])
        ended["takeover"] = result.outcome

    zombie_thread = threading.Thread(target=run_zombie)
    zombie_thread.start()
    assert staged.wait(WAIT_S)
    engine.clock.advance(LEASE_PASSES_S)  # the zombie's lease has passed
    takeover_thread = threading.Thread(target=run_takeover)
    takeover_thread.start()
    zombie_thread.join(WAIT_S)
    takeover_thread.join(WAIT_S)
    assert not zombie_thread.is_alive() and not takeover_thread.is_alive()

    outcomes = (ended["zombie"], ended["takeover"])
    assert outcomes != (Outcome.PROCESSED, Outcome.PROCESSED)  # never both
    assert ended["zombie"] in (Outcome.PROCESSED, Outcome.LEASE_LOST, Outcome.FAILED)
    if ended["zombie"] is Outcome.PROCESSED:
        assert ended["takeover"] in (Outcome.DUPLICATE, Outcome.FAILED)
    return (ended["zombie"].value, ended["takeover"].value)


def _settle(engine: Engine, key: str) -> None:
    """Redeliver until the key is finished, as SQS would, leases passing in between."""

    def again(body: dict[str, Any], attempt: Attempt) -> str:
        for element in attempt_writes(engine.ledger, body["id"], attempt.fence):
            attempt.write(element)
        return "settled"

    for _ in range(3):
        record = engine.record(key)
        if record is not None and record.status == c.STATUS_COMPLETED:
            return
        engine.clock.advance(LEASE_PASSES_S)
        engine.run(engine.handler(again), [{"id": key}])


# --- SDK retries of a commit that landed -------------------------------------------------------


def _answers(client: Any) -> list[str]:
    """The final answer of each TransactWriteItems call: "ok" or its error code."""
    answers: list[str] = []
    client.meta.events.register(
        "after-call.dynamodb.TransactWriteItems",
        lambda parsed, **_: answers.append(parsed.get("Error", {}).get("Code", "ok")),
    )
    return answers


def _crediting(engine: Engine) -> Callable[[dict[str, Any], Attempt], str]:
    def business(body: dict[str, Any], attempt: Attempt) -> str:
        for element in attempt_writes(engine.ledger, body["id"], attempt.fence):
            attempt.write(element)
        return "credited"

    return business


def test_an_sdk_retry_of_a_landed_commit_is_recognised_by_its_client_request_token(
    engine: Engine,
) -> None:
    client = local_client("dynamodb", engine.endpoint)
    answers = _answers(client)
    wire = count_calls(client)
    injector = Injector(client)  # applies the first attempt for real, then drops its answer
    injector.lose_responses(1.0, operations=("TransactWriteItems",))

    [result] = engine.run(engine.handler(_crediting(engine), client=client), [{"id": "k-1"}])

    assert result.outcome is Outcome.PROCESSED
    assert injector.counts == {"lost_response": 1}
    assert wire.count["TransactWriteItems"] == 2  # the same commit went out twice
    assert answers == ["ok"]  # DynamoDB recognised the token: success, nothing applied again
    assert engine.items()["account#k-1"]["credits"] == {"N": "1"}


def test_an_sdk_retry_past_the_tokens_window_is_recognised_by_the_own_retry_rule(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DynamoDB remembers a token for ten minutes; a retry after that (or one DynamoDB did not
    match) is refused by the record's condition, which holds my own completion."""
    monkeypatch.setattr(once.store, "client_request_token", lambda owner, fence: uuid.uuid4().hex)

    class RetriedAfterTheWindow(RecordStore):
        """Each commit lands, its answer is lost, and the retry comes with another token."""

        first_answers: list[bool] = []

        def complete(
            self, record_id: str, claim: Claimed, result: str, effects: Effects | None = None
        ) -> bool:
            self.first_answers.append(super().complete(record_id, claim, result, effects))
            return super().complete(record_id, claim, result, effects)

    client = local_client("dynamodb", engine.endpoint)
    answers = _answers(client)
    handler = engine.handler(_crediting(engine), store_class=RetriedAfterTheWindow, client=client)

    [result] = engine.run(handler, [{"id": "k-1"}])

    assert result.outcome is Outcome.PROCESSED
    assert RetriedAfterTheWindow.first_answers == [True]
    assert answers == ["ok", "TransactionCanceledException"]  # the rule, not the token
    assert engine.items()["account#k-1"]["credits"] == {"N": "1"}  # applied once
    record = engine.record("k-1")
    assert record is not None and record.status == c.STATUS_COMPLETED


# --- calls on the wire -------------------------------------------------------------------------


def test_a_record_without_staged_writes_completes_with_one_update_item(engine: Engine) -> None:
    client = local_client("dynamodb", engine.endpoint)
    wire = count_calls(client)

    plain = engine.handler(lambda body, attempt: "plain", client=client)
    engine.run(plain, [{"id": "plain"}])
    without = list(wire.sent)
    wire.reset()
    engine.run(engine.handler(_crediting(engine), client=client), [{"id": "k-1"}])
    with_writes = list(wire.sent)
    wire.reset()
    engine.run(engine.handler(_crediting(engine), client=client), [{"id": "k-1"}])
    duplicate = list(wire.sent)

    assert without == ["UpdateItem", "UpdateItem"]  # claim, the plain fenced completion
    assert with_writes == ["UpdateItem", "TransactWriteItems"]  # claim, commit
    assert duplicate == ["UpdateItem"]


# --- the record's item size --------------------------------------------------------------------


def _fill_outbox(attempt: Attempt) -> None:
    """Messages up to the outbox's limit: the largest the staging accepts."""
    attempt.send(QUEUE, "x" * 250_000)
    low, high = 1, 256 * 1024
    while low < high:
        size = (low + high + 1) // 2
        # The same record and token: each message is stored with its identity, which counts.
        staged = attempt.effects
        probe = Effects(
            record_id=staged.record_id, token=staged.token, messages=list(staged.messages)
        )
        try:
            probe.send(QUEUE, "y" * size)
            low = size
        except ValueError:
            high = size - 1
    attempt.send(QUEUE, "y" * low)


@pytest.mark.parametrize("with_writes", [False, True], ids=["update-item", "transaction"])
def test_the_largest_outbox_beside_the_largest_result_fits_the_record(
    engine: Engine, with_writes: bool
) -> None:
    def business(body: dict[str, Any], attempt: Attempt) -> str:
        if with_writes:
            assert attempt.fence is not None  # a two-phase handler: claimed first
            attempt.write(credit(engine.ledger, body["id"], attempt.fence))
        _fill_outbox(attempt)
        return "r" * (c.RESULT_CAP_BYTES - 2)  # stored with its quotes: at the cap

    outbox = RecordingOutbox()
    key = "k-" + "9" * 200  # a long key, too
    [result] = engine.run(engine.handler(business, outbox=outbox), [{"id": key}])

    assert result.outcome is Outcome.PROCESSED
    [(_, sent)] = outbox.sent
    assert len(sent[0].body) == 250_000
    record = engine.record(key)
    assert record is not None and record.status == c.STATUS_COMPLETED
