"""The bridge to Powertools' records, proven against Powertools itself: records its own
``idempotent_function`` wrote are honoured by once, and records once wrote are honoured by
the Powertools build after a rollback, in both of once's modes (docs/migrating.md)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from once import constants as c
from once.models import Outcome
from once.powertools import ONCE_OWNER_ATTR, PowertoolsKeyError
from once.store import Claimed, RecordStore
from tests.conftest import LEDGER, TABLE, Clock, FakeContext, build_event
from tests.integration.powertools_team import (
    OLD_FUNCTION,
    POWERTOOLS_TABLE,
    bridge,
    charges,
    create_powertools_table,
    once_build,
    powertools_build,
    powertools_holds,
)

MODES = ["any", "staged"]


@pytest.fixture
def team(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto with the Powertools table, and the old function's name as Lambda set it while
    the Powertools build ran (Powertools prefixes its ids with it)."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", OLD_FUNCTION)
    create_powertools_table(aws.dynamodb)
    return aws


def _renewal(renewal: str, amount: int = 10) -> dict[str, Any]:
    return build_event([{"renewalId": renewal, "amount": amount}])


def _outcome(handler: Any, event: dict[str, Any]) -> Outcome:
    (handled,) = handler.handle(event, FakeContext()).records
    return handled.outcome


def _powertools_items(team: Any) -> list[dict[str, Any]]:
    return team.dynamodb.scan(TableName=POWERTOOLS_TABLE, ConsistentRead=True)["Items"]


@pytest.mark.parametrize("effects", MODES)
def test_a_renewal_powertools_completed_is_a_duplicate_under_once(team: Any, effects: str) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    event = _renewal("r-1")
    assert old.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert charges(team.dynamodb, LEDGER, "r-1") == 1
    new = once_build(LEDGER, TABLE, bridge(old), effects=effects)
    # SQS redelivers the renewal after the deploy: once takes Powertools' record for it.
    assert _outcome(new, event) is Outcome.DUPLICATE
    assert charges(team.dynamodb, LEDGER, "r-1") == 1
    # once's own record now holds it, with Powertools' response, for once's retention.
    record = team.record("r-1", prefix="subscriptions")
    assert record is not None and record["status"] == c.STATUS_COMPLETED
    assert json.loads(record["result"]) == {"renewal": "r-1", "charged": 10}


@pytest.mark.parametrize("effects", MODES)
def test_a_renewal_once_completed_is_a_duplicate_under_the_powertools_build_after_a_rollback(
    team: Any, effects: str
) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    new = once_build(LEDGER, TABLE, bridge(old), effects=effects)
    event = _renewal("r-2", amount=12)
    assert _outcome(new, event) is Outcome.PROCESSED
    assert charges(team.dynamodb, LEDGER, "r-2") == 1
    # Rolled back: the Powertools build meets the copy SQS redelivers.
    assert old.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert charges(team.dynamodb, LEDGER, "r-2") == 1
    (item,) = _powertools_items(team)
    assert item["status"]["S"] == "COMPLETED"
    assert ONCE_OWNER_ATTR not in item
    assert json.loads(item["data"]["S"]) == {"renewal": "r-2", "charged": 12}


@pytest.mark.parametrize("effects", MODES)
def test_a_renewal_new_to_both_is_charged_once_and_recorded_for_both(
    team: Any, effects: str
) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    new = once_build(LEDGER, TABLE, bridge(old), effects=effects)
    event = _renewal("r-3")
    assert [_outcome(new, event) for _ in range(3)] == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.DUPLICATE,
    ]
    assert old.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert charges(team.dynamodb, LEDGER, "r-3") == 1


def test_a_renewal_powertools_holds_in_progress_is_busy_until_its_in_progress_expiry(
    team: Any,
) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    event = _renewal("r-4")
    # Powertools' own persistence layer takes the record, as its handler does before it
    # runs the function (and then the invocation dies).
    powertools_holds(team.dynamodb, old, event["Records"][0], 30_000)
    new = once_build(LEDGER, TABLE, bridge(old))
    clock = Clock()
    new.bind(store=RecordStore(team.dynamodb, TABLE, clock=clock))
    assert _outcome(new, event) is Outcome.BUSY
    assert charges(team.dynamodb, LEDGER, "r-4") == 0
    # Released by the refusal: once's record does not hold the key meanwhile.
    assert team.record("r-4", prefix="subscriptions")["status"] == c.STATUS_FAILED
    clock.advance(31)  # past the in-progress expiry Powertools wrote
    assert _outcome(new, event) is Outcome.PROCESSED
    assert charges(team.dynamodb, LEDGER, "r-4") == 1


@pytest.mark.parametrize("effects", MODES)
def test_another_payload_under_powertools_validation_is_a_conflict_in_the_dlq(
    team: Any, effects: str
) -> None:
    validation = "powertools_json(body).amount"
    old = powertools_build(team.dynamodb, LEDGER, validation=validation)
    assert old.handler(_renewal("r-5", amount=10), FakeContext()) == {"batchItemFailures": []}
    new = once_build(
        LEDGER, TABLE, bridge(old, validation=validation), effects=effects, validate=None
    )
    assert _outcome(new, _renewal("r-5", amount=99)) is Outcome.CONFLICT
    assert charges(team.dynamodb, LEDGER, "r-5") == 1
    assert len(team.dlq()) == 1
    # The same payload is a duplicate: the validation hash once computes is Powertools'.
    assert _outcome(new, _renewal("r-5", amount=10)) is Outcome.DUPLICATE


@pytest.mark.parametrize("effects", MODES)
def test_a_powertools_record_past_its_expiry_is_new(team: Any, effects: str) -> None:
    old = powertools_build(team.dynamodb, LEDGER, expires_after_seconds=60)
    event = _renewal("r-6")
    assert old.handler(event, FakeContext()) == {"batchItemFailures": []}
    new = once_build(LEDGER, TABLE, bridge(old, expires_after_seconds=60), effects=effects)
    clock = Clock()
    clock.advance(120)
    new.bind(store=RecordStore(team.dynamodb, TABLE, clock=clock))
    # Powertools itself would run it again: the bridge honours what Powertools promised.
    assert _outcome(new, event) is Outcome.PROCESSED
    assert charges(team.dynamodb, LEDGER, "r-6") == 2


def test_a_failed_once_run_leaves_the_key_to_once_and_busy_for_the_powertools_build(
    team: Any,
) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    calls = {"n": 0}

    def flaky(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("the payments API is down")
        attempt.write(
            {
                "Update": {
                    "TableName": LEDGER,
                    "Key": {"id": {"S": f"charge#{body['renewalId']}"}},
                    "UpdateExpression": "ADD charges :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            }
        )
        return {"ok": True}

    from once import make_handler

    new = make_handler(
        flaky, key="renewalId", table_name=TABLE, key_prefix="subscriptions", powertools=bridge(old)
    )
    event = _renewal("r-7")
    assert _outcome(new, event) is Outcome.FAILED
    # The Powertools build, still polling during the deploy, waits for once's lease: its
    # function raises IdempotencyAlreadyInProgressError, and a batch whose every record
    # failed raises from process_partial_response (SQS redelivers it).
    with pytest.raises(BatchProcessingError, match="All records failed"):
        old.handler(event, FakeContext())
    assert charges(team.dynamodb, LEDGER, "r-7") == 0
    # once's next delivery takes its own hold again at once.
    assert _outcome(new, event) is Outcome.PROCESSED
    assert charges(team.dynamodb, LEDGER, "r-7") == 1


def test_a_powertools_takeover_of_an_expired_once_claim_loses_once_its_commit(
    team: Any,
) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    event = _renewal("r-8")
    companion = bridge(old).record_for(event["Records"][0])
    assert companion is not None
    clock = Clock(start=time.time() - 600)  # once's claim, ten minutes ago, for 30 s
    store = RecordStore(team.dynamodb, TABLE, clock=clock)
    claim = store.claim(
        "subscriptions#r-8", payload_hash="h", message_id="m", lease_ms=30_000, companion=companion
    )
    assert isinstance(claim, Claimed)
    # Past once's lease, the Powertools build takes the record over and charges.
    assert old.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert charges(team.dynamodb, LEDGER, "r-8") == 1
    # The zombie's commit lands nothing: the Powertools record is no longer its.
    assert store.complete("subscriptions#r-8", claim, '{"late": true}') is False
    assert team.record("r-8", prefix="subscriptions")["status"] == c.STATUS_IN_PROGRESS
    (item,) = _powertools_items(team)
    assert json.loads(item["data"]["S"])["charged"] == 10


def test_a_message_powertools_kept_no_record_for_runs_without_the_bridge(team: Any) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    b = bridge(old)
    # Powertools skips persistence where its key expression finds nothing.
    assert b.record_for(build_event([{"renewalId": None, "amount": 1}])["Records"][0]) is None
    # Where Powertools itself raised, the bridge says so rather than run the copy as new.
    with pytest.raises(PowertoolsKeyError, match="event_key_jmespath"):
        b.record_for(build_event(["not json"])["Records"][0])
    assert b.record_for(_renewal("r-9")["Records"][0]) is not None
