"""The harness's probe and ``once-staged``'s invariant, on the requests the record store really
makes (moto in-process: only the requests are read here, never a race): a staged commit is a
completion with no claim before it, whose fence is unknown; its outbox's clear is a clear
(by owner), not a second completion; a two-phase claim is still a claim. And
``staged_not_one_write`` counts every write a staged consumer must never make."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from once import constants as c
from once.effects import Effects
from once.store import Committed, RecordStore
from oncecli.aws import create_table
from proof.chaos import invariants
from proof.chaos.faults import Dice
from proof.chaos.probe import History, Probe
from proof.chaos.twohop import TwoHopState

TABLE = "idempotency"
LEDGER = "ledger"


@pytest.fixture
def requests() -> Iterator[tuple[RecordStore, list[tuple[str, dict[str, Any]]]]]:
    """A record store on moto, and every request its client builds (operation, params)."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE, key=c.ATTR_ID)
        create_table(client, LEDGER)
        made: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register(
            "before-parameter-build.dynamodb",
            lambda params, model, **_: made.append((model.name, dict(params))),
        )
        yield RecordStore(client, TABLE), made


def _probe(tmp_path: Path) -> Probe:
    return Probe(History(str(tmp_path / "h.jsonl"), "w0"), TABLE, {}, 0.0, Dice(random.Random(0)))


def _staged_effects(record: str, *, send: bool) -> Effects:
    effects = Effects(table_name=TABLE, record_id=record)
    effects.write(
        {
            "Update": {
                "TableName": LEDGER,
                "Key": {"id": {"S": "account#a"}},
                "UpdateExpression": "ADD balance :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
    )
    if send:
        effects.send("https://sqs.us-east-1.amazonaws.com/123456789012/notify", {"n": 1})
    return effects


@pytest.mark.parametrize("staged_writes", [False, True], ids=["update-item", "transaction"])
def test_the_probe_takes_a_staged_commit_for_a_completion_with_no_claim(
    requests: tuple[RecordStore, list[tuple[str, dict[str, Any]]]],
    tmp_path: Path,
    staged_writes: bool,
) -> None:
    store, made = requests
    effects = _staged_effects("p#1", send=True) if staged_writes else None
    committed = store.commit_staged(
        "p#1", payload_hash="h", message_id="m-1", result="{}", effects=effects
    )
    assert isinstance(committed, Committed)
    probe = _probe(tmp_path)
    [(operation, params)] = made
    assert operation == ("TransactWriteItems" if staged_writes else "UpdateItem")

    call = probe._classify(operation, params)

    assert call is not None
    assert (call["kind"], call["op"], call["item"]) == ("finalize", "complete", "p#1")
    assert (call["claim"], call["fence"], call["staged"]) == (committed.owner, None, True)


def test_the_probe_takes_a_staged_outboxs_clear_by_owner_for_a_clear(
    requests: tuple[RecordStore, list[tuple[str, dict[str, Any]]]], tmp_path: Path
) -> None:
    store, made = requests
    committed = store.commit_staged(
        "p#1",
        payload_hash="h",
        message_id="m-1",
        result="{}",
        effects=_staged_effects("p#1", send=True),
    )
    assert isinstance(committed, Committed)
    made.clear()
    assert store.clear_outbox("p#1", committed.fence, owner=committed.owner)
    [(operation, params)] = made

    call = _probe(tmp_path)._classify(operation, params)

    assert call == {"kind": "clear", "item": "p#1", "fence": None, "owner": committed.owner}


def test_the_probe_still_takes_a_two_phase_claim_for_a_claim(
    requests: tuple[RecordStore, list[tuple[str, dict[str, Any]]]], tmp_path: Path
) -> None:
    store, made = requests
    store.claim("p#1", payload_hash="h", message_id="m-1", lease_ms=5000)
    [(operation, params)] = made

    call = _probe(tmp_path)._classify(operation, params)

    assert call is not None and call["kind"] == "claim" and "staged" not in call


def test_staged_not_one_write_counts_claims_fails_and_records_left_unfinished() -> None:
    commit: dict[str, Any] = {"e": "finalize", "op": "complete", "staged": True, "item": "p#1"}
    history: list[dict[str, Any]] = [
        commit,
        {"e": "clear", "item": "p#1"},
        {"e": "claim", "item": "p#2"},
        {"e": "finalize", "op": "fail", "item": "p#2"},
        {"e": "finalize", "op": "complete", "item": "p#2"},  # a two-phase completion
    ]
    state = TwoHopState(statuses={c.STATUS_COMPLETED: 3, c.STATUS_IN_PROGRESS: 1})

    assert invariants.staged_not_one_write(history, state) == 4
    assert invariants.staged_not_one_write([commit], TwoHopState(statuses={"COMPLETED": 1})) == 0
