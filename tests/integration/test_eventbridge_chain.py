"""once → EventBridge bus → rule → SQS → once (``SOURCE_KEY``), on ``once_env``'s moto as a team
tests it: a staged consumer publishes a domain event with its write; two rules on a custom bus
feed two queues, one with the whole event (the target's default), one with ``InputPath:
"$.detail"``; each downstream applies each operation once, through a failed PutEvents entry
(the outbox owed, then resent), a failed clear (the events put twice) and a key reused after
the upstream's retention (a new operation, applied again).

PutEvents per entry: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html;
a rule's SQS target: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-targets.html.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from once import SOURCE_KEY, Attempt, make_handler
from once.models import Outcome
from once.testing import OnceEnv
from tests.integration import hops

STOCK = "stock"
SOURCE = "shop.reservations"
DETAIL_TYPE = "ReservationMade"


def events_client(env: OnceEnv) -> Any:
    """The kit's EventBridge client, which the outbox uses too."""
    if env.events is None:
        env.events = boto3.client("events", region_name=env.sqs.meta.region_name)
    return env.events


def bus_with_two_rules(env: OnceEnv) -> tuple[str, str, str]:
    """A custom bus whose rule sends ``ReservationMade`` events to two queues: the whole
    event to one, its detail alone (``InputPath``) to the other."""
    events = events_client(env)
    bus = events.create_event_bus(Name="reservations")["EventBusArn"]
    whole, detail = hops.queue(env, "audit"), hops.queue(env, "ship")
    pattern = json.dumps({"source": [SOURCE], "detail-type": [DETAIL_TYPE]})
    for name, url, extra in (
        ("to-audit", whole, {}),
        ("to-ship", detail, {"InputPath": "$.detail"}),
    ):
        events.put_rule(Name=name, EventBusName="reservations", EventPattern=pattern)
        events.put_targets(
            Rule=name,
            EventBusName="reservations",
            Targets=[{"Id": "queue", "Arn": hops.queue_arn(env, url), **extra}],
        )
    return str(bus), whole, detail


@pytest.fixture
def stock(once_env: OnceEnv) -> str:
    once_env.dynamodb.create_table(
        TableName=STOCK,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return STOCK


def reserve_handler(bus: str) -> Any:
    def reserve(order: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        attempt.write({"Update": {"TableName": STOCK, "Key": {"id": {"S": order["sku"]}},
                                  "UpdateExpression": "ADD reserved :q",
                                  "ExpressionAttributeValues": {":q": {"N": "1"}}}})  # fmt: skip
        attempt.send(bus, {"orderId": order["orderId"], "sku": order["sku"]},
                     source=SOURCE, detail_type=DETAIL_TYPE)  # fmt: skip
        return {"reserved": order["orderId"]}

    return make_handler(reserve, key="orderId", effects="staged", key_prefix="reserve")


def downstream(prefix: str, applied: list[str], read: str) -> Any:
    def apply(body: dict[str, Any], attempt: Attempt) -> str:
        detail = body["detail"] if read == "whole" else body
        applied.append(detail["orderId"])
        return detail["orderId"]

    return make_handler(apply, key=SOURCE_KEY, key_prefix=prefix)


def reserved(env: OnceEnv, sku: str) -> int:
    item = env.dynamodb.get_item(TableName=STOCK, Key={"id": {"S": sku}}).get("Item")
    return int(item["reserved"]["N"]) if item else 0


def test_a_domain_event_is_applied_once_by_each_rules_consumer_through_failures_and_resends(
    once_env: OnceEnv, stock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus, whole, detail = bus_with_two_rules(once_env)
    reserve = reserve_handler(bus)
    audited: list[str] = []
    shipped: list[str] = []
    audit, ship = downstream("audit", audited, "whole"), downstream("ship", shipped, "detail")
    order = {"orderId": "o-1", "sku": "book"}

    # PutEvents fails the entry: the write is committed, the event owed.
    failed = fail_entries(events_client(once_env), times=1)
    assert once_env.deliver(reserve, [order]).outcomes == [Outcome.OWED]
    assert failed == [1] and reserved(once_env, "book") == 1
    assert hops.take(once_env, whole) == []
    # The redelivery sends it (no business code runs again), and a producer's retry of the
    # same order is a duplicate that puts nothing.
    assert once_env.deliver(reserve, [order]).outcomes == [Outcome.OWED_SENT]
    assert once_env.deliver(reserve, [order]).outcomes == [Outcome.DUPLICATE]
    assert reserved(once_env, "book") == 1

    # The event reached both queues. Put the stored event twice more, as after a failed
    # clear: EventBridge gives each put a new id and time.
    first_whole, first_detail = hops.take(once_env, whole), hops.take(once_env, detail)
    assert len(first_whole) == len(first_detail) == 1
    stored = json.loads(first_whole[0]["Body"])["detail"]
    assert json.loads(first_detail[0]["Body"]) == stored  # InputPath: the detail alone
    again = {"Source": SOURCE, "DetailType": DETAIL_TYPE, "EventBusName": bus,
             "Detail": json.dumps(stored)}  # fmt: skip
    assert events_client(once_env).put_events(Entries=[again, again])["FailedEntryCount"] == 0
    resent_whole, resent_detail = hops.take(once_env, whole), hops.take(once_env, detail)
    assert {json.loads(m["Body"])["id"] for m in first_whole + resent_whole}.__len__() == 3

    # Each downstream applies the operation once: the copies are duplicates, never conflicts.
    for url_messages, handler in (
        (first_whole + resent_whole, audit),
        (first_detail + resent_detail, ship),
    ):
        hops.forward(once_env, url_messages)
        outcomes = once_env.deliver_waiting(handler, same_batch=False).outcomes
        assert outcomes == [Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.DUPLICATE]
    assert audited == ["o-1"] and shipped == ["o-1"]


class _Answered:
    """The HTTP answer botocore reads a ``before-call`` handler's response with."""

    status_code = 200
    headers: dict[str, str] = {}


def fail_entries(client: Any, times: int) -> list[int]:
    """The next ``times`` PutEvents calls fail every entry with ``InternalFailure`` (a
    retryable code: PutEventsResultEntry) and deliver none, as EventBridge answers an entry
    it did not take; answered before the request is made, so nothing reaches a bus."""
    failed: list[int] = []

    def answer(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        if len(failed) >= times:
            return None
        failed.append(1)
        entries = [{"ErrorCode": "InternalFailure", "ErrorMessage": "injected"}] * len(
            params["Entries"]
        )
        return _Answered(), {"FailedEntryCount": len(entries), "Entries": entries}

    client.meta.events.register("before-call.events.PutEvents", answer)
    return failed


def test_a_key_reused_after_the_upstreams_retention_is_a_new_event_applied_again(
    once_env: OnceEnv, stock: str
) -> None:
    bus, whole, _ = bus_with_two_rules(once_env)
    reserve = make_handler(
        reserve_handler(bus)._process,
        key="orderId",
        effects="staged",
        key_prefix="reserve",
        retention_s=60,
    )
    audited: list[str] = []
    audit = downstream("audit", audited, "whole")
    order = {"orderId": "o-9", "sku": "pen"}
    for _ in range(2):
        assert once_env.deliver(reserve, [order]).outcomes == [Outcome.PROCESSED]
        hops.forward(once_env, hops.take(once_env, whole))
        assert once_env.deliver_waiting(audit).outcomes == [Outcome.PROCESSED]
        once_env.advance(120)  # past the upstream's record; the downstream's is younger
    assert audited == ["o-9", "o-9"] and reserved(once_env, "pen") == 2
