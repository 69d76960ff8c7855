"""The bridge to Powertools' records where it meets the rest of once and of Powertools: a
team's data hashed with Powertools' own encoder, an outbox owed in the deploy window, the
transaction's element budget, a Powertools claim that expired mid-flight, a hold that
outlasts Powertools' expiry, a response over once's cap, a failed write to the Powertools
table. Each was first shown wrong by a script, and is pinned here as the behaviour it must
keep (docs/migrating.md, docs/design.md "A Powertools record beside it")."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.serialization.dataclass import (
    DataclassSerializer,
)
from botocore.exceptions import ReadTimeoutError

from once import PowertoolsBridge, make_handler
from once import constants as c
from once.models import Outcome
from once.outbox import Outbox
from once.payload import describe_error
from once.powertools import ONCE_OWNER_ATTR
from once.store import Claimed, RecordStore
from tests.chaos.aws_faults import client_error
from tests.conftest import LEDGER, TABLE, Clock, FakeContext, build_event
from tests.integration.powertools_team import (
    KEY_JMESPATH,
    OLD_FUNCTION,
    POWERTOOLS_TABLE,
    bridge,
    charge_element,
    charge_on,
    charges,
    create_powertools_table,
    once_build,
    powertools_build,
    powertools_holds,
)

MODES = ["any", "staged"]


@pytest.fixture
def team(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", OLD_FUNCTION)
    create_powertools_table(aws.dynamodb)
    return aws


def _powertools_item(team: Any) -> dict[str, Any]:
    (item,) = team.dynamodb.scan(TableName=POWERTOOLS_TABLE, ConsistentRead=True)["Items"]
    return item


# --- the id, hashed as Powertools hashes it -----------------------------------------------


def _parsed_with_decimals(record: Any) -> Any:
    """What a team's record handler gave its function: the body, money as ``Decimal``."""
    return json.loads(record["body"], parse_float=Decimal)


@pytest.mark.parametrize("effects", MODES)
def test_a_renewal_whose_data_powertools_hashed_with_its_encoder_is_a_duplicate(
    team: Any, effects: str
) -> None:
    persistence = DynamoDBPersistenceLayer(table_name=POWERTOOLS_TABLE, boto3_client=team.dynamodb)
    config = IdempotencyConfig(event_key_jmespath="", payload_validation_jmespath="amount")
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(
        data_keyword_argument="renewal", config=config, persistence_store=persistence
    )
    def renew(renewal: dict[str, Any]) -> dict[str, Any]:
        charge_on(team.dynamodb, LEDGER, renewal["renewalId"])
        return {"renewal": renewal["renewalId"]}

    def old(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event,
            record_handler=lambda record: renew(renewal=_parsed_with_decimals(record.raw_event)),
            processor=processor,
            context=context,
        )

    event = build_event(['{"renewalId": "r-1", "amount": 10.50}'])
    assert old(event, FakeContext()) == {"batchItemFailures": []}
    powertools = PowertoolsBridge(
        table_name=POWERTOOLS_TABLE,
        key_prefix=f"{OLD_FUNCTION}.{renew.__module__}.{renew.__qualname__}",
        data=_parsed_with_decimals,
        payload_validation_jmespath="amount",
    )
    new = once_build(LEDGER, TABLE, powertools, effects=effects, validate=None)
    (handled,) = new.handle(event, FakeContext()).records
    assert (handled.outcome, charges(team.dynamodb, LEDGER, "r-1")) == (Outcome.DUPLICATE, 1)


@pytest.mark.parametrize("effects", MODES)
def test_a_message_whose_powertools_id_cannot_be_derived_fails_and_says_why(
    team: Any, effects: str
) -> None:
    """Never the bridge off in silence for one message (its copy would run as new)."""

    def unreadable(record: Any) -> Any:
        return {"when": object()}  # no JSON text, for Powertools' encoder either

    powertools = PowertoolsBridge(
        table_name=POWERTOOLS_TABLE, key_prefix="subscriptions-fn.app.renew", data=unreadable
    )
    new = once_build(LEDGER, TABLE, powertools, effects=effects)
    (handled,) = new.handle(build_event([{"renewalId": "r-1", "amount": 1}]), FakeContext()).records
    assert handled.outcome is Outcome.FAILED
    assert handled.reason is not None and "could not be derived at its hash" in handled.reason
    assert charges(team.dynamodb, LEDGER, "r-1") == 0


# --- an outbox owed in the deploy window -----------------------------------------------------


def _throttled_sqs() -> Any:
    client = boto3.client("sqs")

    def throttle(**_: Any) -> None:
        raise client_error("ThrottlingException", "SendMessageBatch")

    client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", throttle)
    return client


@pytest.mark.parametrize("effects", MODES)
def test_an_owed_outbox_keeps_the_powertools_build_off_the_renewal_until_it_is_sent(
    team: Any, effects: str
) -> None:
    receipts = team.sqs.create_queue(QueueName="receipts")["QueueUrl"]
    old = powertools_build(team.dynamodb, LEDGER)

    def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        attempt.write({"Update": charge_element(LEDGER, body["renewalId"])})
        attempt.send(receipts, {"receipt": body["renewalId"]})
        return {"renewal": body["renewalId"]}

    new = make_handler(
        renew,
        key="renewalId",
        table_name=TABLE,
        key_prefix="subscriptions",
        effects=effects,  # type: ignore[arg-type]
        powertools=bridge(old),
    )
    new.bind(outbox=Outbox(lambda service: _throttled_sqs()))
    event = build_event([{"renewalId": "r-1", "amount": 10}])
    (first,) = new.handle(event, FakeContext()).records
    assert first.outcome is Outcome.OWED
    # The deploy window: the copy reaches the Powertools build, which takes the renewal for
    # one in progress (its function raises IdempotencyAlreadyInProgressError), never for a
    # duplicate it would delete: SQS brings the copy back.
    with pytest.raises(BatchProcessingError, match="All records failed"):
        old.handler(event, FakeContext())
    assert _powertools_item(team)["status"]["S"] == "INPROGRESS"
    # The copy comes back to once, which sends what it owes and completes the Powertools
    # record; from then on the Powertools build takes a copy for a duplicate.
    new.bind(outbox=None)
    (again,) = new.handle(event, FakeContext()).records
    assert again.outcome is Outcome.OWED_SENT
    sent = team.sqs.receive_message(QueueUrl=receipts, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"]) for m in sent] == [{"receipt": "r-1"}]
    item = _powertools_item(team)
    assert item["status"]["S"] == "COMPLETED" and ONCE_OWNER_ATTR not in item
    assert old.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert charges(team.dynamodb, LEDGER, "r-1") == 1


# --- the transaction's elements ----------------------------------------------------------------


@pytest.mark.parametrize("effects", MODES)
def test_with_the_bridge_a_commit_takes_one_staged_write_fewer(team: Any, effects: str) -> None:
    old = powertools_build(team.dynamodb, LEDGER)

    def lines(count: int) -> Any:
        def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
            for i in range(count):
                item = {"id": {"S": f"line#{body['renewalId']}#{i}"}}
                attempt.write({"Put": {"TableName": LEDGER, "Item": item}})
            return {"ok": True}

        return make_handler(
            renew,
            key="renewalId",
            table_name=TABLE,
            key_prefix=f"subscriptions-{count}",
            effects=effects,  # type: ignore[arg-type]
            powertools=bridge(old),
        )

    (fits,) = lines(98).handle(build_event([{"renewalId": "r-98"}]), FakeContext()).records
    assert fits.outcome is Outcome.PROCESSED
    # The 99th is refused at attempt.write, where business code made it, never at commit.
    (over,) = lines(99).handle(build_event([{"renewalId": "r-99"}]), FakeContext()).records
    assert (over.outcome, over.reason) == (Outcome.FAILED, "ValueError")


# --- takeovers and holds ---------------------------------------------------------------------


def test_a_powertools_claim_that_expired_mid_flight_is_a_takeover(team: Any) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    event = build_event([{"renewalId": "r-1", "amount": 10}])
    # The Powertools build took the record, charged, and was killed before save_success.
    powertools_holds(team.dynamodb, old, event["Records"][0], 5_000)
    charge_on(team.dynamodb, LEDGER, "r-1")
    ran: list[bool] = []

    def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        ran.append(attempt.takeover)
        return {"ok": True}

    def handler(policy: str) -> Any:
        made = make_handler(
            renew,
            key="renewalId",
            table_name=TABLE,
            key_prefix=f"subscriptions-{policy}",
            on_expired_lease=policy,  # type: ignore[arg-type]
            powertools=bridge(old),
        )
        clock = Clock()
        clock.advance(10)  # past the killed invocation's in-progress expiry
        made.bind(store=RecordStore(team.dynamodb, TABLE, clock=clock))
        return made

    (quarantined,) = handler("quarantine").handle(event, FakeContext()).records
    assert quarantined.outcome is Outcome.LEASE_EXPIRED and ran == []
    assert len(team.dlq()) == 1


def test_a_run_that_took_over_a_powertools_claim_is_told_so(team: Any) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    event = build_event([{"renewalId": "r-2", "amount": 10}])
    powertools_holds(team.dynamodb, old, event["Records"][0], 5_000)
    seen: list[bool] = []
    new = make_handler(
        lambda body, attempt: seen.append(attempt.takeover),
        key="renewalId",
        table_name=TABLE,
        key_prefix="subscriptions",
        powertools=bridge(old),
    )
    clock = Clock()
    clock.advance(10)
    new.bind(store=RecordStore(team.dynamodb, TABLE, clock=clock))
    (handled,) = new.handle(event, FakeContext()).records
    assert (handled.outcome, handled.takeover, seen) == (Outcome.PROCESSED, True, [True])


def test_once_s_hold_on_a_powertools_record_lasts_as_long_as_its_lease(team: Any) -> None:
    """Powertools' condition lets anyone in past a record's ``expiration``: once's hold never
    ends before its lease does, whatever ``expires_after_seconds`` says."""
    old = powertools_build(team.dynamodb, LEDGER, expires_after_seconds=1)
    event = build_event([{"renewalId": "r-1", "amount": 10}])
    companion = bridge(old, expires_after_seconds=1).record_for(event["Records"][0])
    clock = Clock(start=time.time() - 5)  # claimed 5 s ago, for 60 s: still held
    store = RecordStore(team.dynamodb, TABLE, clock=clock)
    claim = store.claim(
        "subscriptions#r-1", payload_hash="h", message_id="m", lease_ms=60_000, companion=companion
    )
    assert isinstance(claim, Claimed)
    with pytest.raises(BatchProcessingError, match="All records failed"):
        old.handler(event, FakeContext())  # in progress, not taken over
    assert charges(team.dynamodb, LEDGER, "r-1") == 0
    assert store.complete("subscriptions#r-1", claim, '{"ok": true}') is True


# --- the response a rollback reads -----------------------------------------------------------


@dataclass
class Receipt:
    renewal: str
    lines: list[str]


def _lines(renewal: str) -> list[str]:
    return [f"{renewal} line {i:05d} ........................" for i in range(2_000)]


@pytest.mark.parametrize("effects", MODES)
def test_a_response_over_once_s_cap_reaches_the_powertools_build_whole(
    team: Any, effects: str
) -> None:
    persistence = DynamoDBPersistenceLayer(table_name=POWERTOOLS_TABLE, boto3_client=team.dynamodb)
    config = IdempotencyConfig(event_key_jmespath=KEY_JMESPATH)
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(
        data_keyword_argument="record",
        config=config,
        persistence_store=persistence,
        output_serializer=DataclassSerializer(model=Receipt),
    )
    def renew(record: Any) -> Receipt:
        body = json.loads(record.body)
        charge_on(team.dynamodb, LEDGER, body["renewalId"])
        return Receipt(body["renewalId"], _lines(body["renewalId"]))

    def old(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event,
            record_handler=lambda record: renew(record=record),
            processor=processor,
            context=context,
        )

    def renew_on_once(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        attempt.write({"Update": charge_element(LEDGER, body["renewalId"])})
        return {"renewal": body["renewalId"], "lines": _lines(body["renewalId"])}

    new = make_handler(
        renew_on_once,
        key="renewalId",
        table_name=TABLE,
        key_prefix="subscriptions",
        effects=effects,  # type: ignore[arg-type]
        powertools=PowertoolsBridge(
            table_name=POWERTOOLS_TABLE,
            key_prefix=f"{OLD_FUNCTION}.{renew.__module__}.{renew.__qualname__}",
            event_key_jmespath=KEY_JMESPATH,
        ),
    )
    event = build_event([{"renewalId": "r-1"}])
    (handled,) = new.handle(event, FakeContext()).records
    assert handled.outcome is Outcome.PROCESSED
    # once's own record keeps its capped stand-in; Powertools' gets the response whole.
    stored = team.record("r-1", prefix="subscriptions")["result"]
    assert json.loads(stored)["capped"] is True
    assert len(json.loads(_powertools_item(team)["data"]["S"])["lines"]) == 2_000
    assert old(event, FakeContext()) == {"batchItemFailures": []}  # rolled back: a duplicate
    assert charges(team.dynamodb, LEDGER, "r-1") == 1


# --- a failed write to the Powertools table ---------------------------------------------------

DENIED = client_error("AccessDeniedException", "PutItem")
TIMEOUT = ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com/")


@pytest.mark.parametrize("error", [DENIED, TIMEOUT], ids=["AccessDenied", "ReadTimeout"])
def test_a_failed_powertools_write_is_stored_and_logged_with_its_code(
    team: Any, error: Exception
) -> None:
    old = powertools_build(team.dynamodb, LEDGER)
    handler = make_handler(
        lambda body, attempt: {"ok": True},
        key="renewalId",
        table_name=TABLE,
        key_prefix="subscriptions",
        powertools=bridge(old),
    )
    client = boto3.client("dynamodb")

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == POWERTOOLS_TABLE:
            raise error

    client.meta.events.register("before-parameter-build.dynamodb.PutItem", refuse)
    handler.bind(store=RecordStore(client, TABLE))
    (handled,) = handler.handle(build_event([{"renewalId": "r-1"}]), FakeContext()).records
    record = team.record("r-1", prefix="subscriptions")
    assert handled.reason == describe_error(error)
    # once's claim is released at once, saying why in the same words.
    assert record["status"] == c.STATUS_FAILED
    assert record["error"] == f"{c.REASON_POWERTOOLS}: {describe_error(error)}"


# --- a claim given back --------------------------------------------------------------------------


def test_a_takeover_whose_powertools_write_failed_is_still_reviewed(team: Any) -> None:
    """A takeover is never given back as a plain failure: its lease decides again, and the
    next claim is a takeover, quarantined for review."""
    old = powertools_build(team.dynamodb, LEDGER)
    event = build_event([{"renewalId": "r-1", "amount": 10}])
    clock = Clock()
    ran: list[bool] = []

    def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        ran.append(attempt.takeover)
        charge_on(team.dynamodb, LEDGER, body["renewalId"])  # an effect with no key
        return {"ok": True}

    def handler(client: Any) -> Any:
        made = make_handler(
            renew,
            key="renewalId",
            table_name=TABLE,
            key_prefix="subscriptions",
            on_expired_lease="quarantine",
            powertools=bridge(old),
        )
        made.bind(store=RecordStore(client, TABLE, clock=clock))
        return made

    def refusing(operation: str, error: Exception, table: str | None = None) -> Any:
        client = boto3.client("dynamodb")

        def refuse(params: dict[str, Any], **_: Any) -> None:
            if table is None or params.get("TableName") == table:
                raise error

        client.meta.events.register(f"before-parameter-build.dynamodb.{operation}", refuse)
        return client

    # Copy 1 charges; its commit's answer never comes: IN_PROGRESS under its lease.
    timeout = refusing("TransactWriteItems", ReadTimeoutError(endpoint_url="https://dynamodb"))
    handler(timeout).handle(event, FakeContext())
    clock.advance(120)
    # Copy 2 takes over; the Powertools table refuses its put.
    throttled = client_error("ProvisionedThroughputExceededException", "PutItem")
    (second,) = (
        handler(refusing("PutItem", throttled, POWERTOOLS_TABLE))
        .handle(event, FakeContext())
        .records
    )
    assert second.outcome is Outcome.FAILED
    assert team.record("r-1", prefix="subscriptions")["status"] == c.STATUS_IN_PROGRESS
    clock.advance(120)
    ran.clear()
    (third,) = handler(team.dynamodb).handle(event, FakeContext()).records
    assert (third.outcome, ran) == (Outcome.LEASE_EXPIRED, [])
    assert charges(team.dynamodb, LEDGER, "r-1") == 1


def test_a_copy_refused_as_a_conflict_leaves_the_key_to_the_payload_powertools_completed(
    team: Any,
) -> None:
    validation = "powertools_json(body).amount"
    old = powertools_build(team.dynamodb, LEDGER, validation=validation)
    original = build_event([{"renewalId": "r-1", "amount": 10}])
    assert old.handler(original, FakeContext()) == {"batchItemFailures": []}
    new = once_build(LEDGER, TABLE, bridge(old, validation=validation))
    (other,) = new.handle(build_event([{"renewalId": "r-1", "amount": 11}]), FakeContext()).records
    assert other.outcome is Outcome.CONFLICT
    (copy,) = new.handle(original, FakeContext()).records
    assert copy.outcome is Outcome.DUPLICATE
    assert charges(team.dynamodb, LEDGER, "r-1") == 1


# --- the clear and the settling, one transaction -----------------------------------------------


@pytest.mark.parametrize("effects", MODES)
def test_an_owed_outbox_sent_by_a_later_delivery_leaves_the_whole_response(
    team: Any, effects: str
) -> None:
    receipts = team.sqs.create_queue(QueueName="receipts")["QueueUrl"]

    def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        attempt.send(receipts, {"receipt": body["renewalId"]})
        return {"renewal": body["renewalId"], "lines": _lines(body["renewalId"])}

    new = make_handler(
        renew,
        key="renewalId",
        table_name=TABLE,
        key_prefix="subscriptions",
        effects=effects,  # type: ignore[arg-type]
        powertools=bridge(powertools_build(team.dynamodb, LEDGER)),
    )
    new.bind(outbox=Outbox(lambda service: _throttled_sqs()))
    event = build_event([{"renewalId": "r-1"}])
    assert [r.outcome for r in new.handle(event, FakeContext()).records] == [Outcome.OWED]
    new.bind()
    assert [r.outcome for r in new.handle(event, FakeContext()).records] == [Outcome.OWED_SENT]
    item = _powertools_item(team)
    assert item["status"]["S"] == "COMPLETED"
    assert len(json.loads(item["data"]["S"])["lines"]) == 2_000


def test_a_clear_that_fails_leaves_the_powertools_record_held(team: Any) -> None:
    """The clear and the settling are one transaction: a refused clear leaves the record
    owing and the Powertools record held, so that the copy still comes back to once."""
    receipts = team.sqs.create_queue(QueueName="receipts")["QueueUrl"]
    old = powertools_build(team.dynamodb, LEDGER)

    def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        attempt.send(receipts, {"receipt": body["renewalId"]})
        return {"renewal": body["renewalId"]}

    new = make_handler(
        renew, key="renewalId", table_name=TABLE, key_prefix="subscriptions", powertools=bridge(old)
    )
    client = boto3.client("dynamodb")
    calls = {"transactions": 0}

    def refuse_the_second(**_: Any) -> None:
        calls["transactions"] += 1
        if calls["transactions"] == 2:  # the commit is the first, the clear the second
            raise client_error("ThrottlingException", "TransactWriteItems")

    client.meta.events.register(
        "before-parameter-build.dynamodb.TransactWriteItems", refuse_the_second
    )
    new.bind(store=RecordStore(client, TABLE))
    event = build_event([{"renewalId": "r-1", "amount": 10}])
    (first,) = new.handle(event, FakeContext()).records
    assert first.outcome is Outcome.OWED
    assert team.record("r-1", prefix="subscriptions").get("outbox")
    assert _powertools_item(team)["status"]["S"] == "INPROGRESS"
    with pytest.raises(BatchProcessingError, match="All records failed"):
        old.handler(event, FakeContext())  # in progress: the copy comes back
    new.bind()
    assert [r.outcome for r in new.handle(event, FakeContext()).records] == [Outcome.OWED_SENT]
    assert not team.record("r-1", prefix="subscriptions").get("outbox")
    assert _powertools_item(team)["status"]["S"] == "COMPLETED"
