"""``once_env``'s moto runs EventBridge as AWS does (``once.testing.strict_events``): a rule on
a custom or the default bus delivers a matching event to its SQS target in AWS's shape, with
its ``InputPath`` or input transformer applied; PutEvents holds AWS's rules, failing a bad
entry alone. Each test uses a plain boto3 client made inside the environment, as a team's
test or business code would.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from once import sendrules
from once.testing.env import OnceEnv

#: "time": ISO 8601 in UTC to the second, as EventBridge writes it.
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
#: The fields of an event EventBridge sends to a target, no more.
_EVENT_FIELDS = {"version", "id", "detail-type", "source", "account", "time", "region",
                 "resources", "detail"}  # fmt: skip


@pytest.fixture(scope="module")
def env() -> Iterator[OnceEnv]:
    with OnceEnv() as environment:
        yield environment


@pytest.fixture(scope="module")
def events(env: OnceEnv) -> Any:
    return boto3.client("events")


@pytest.fixture(scope="module")
def sqs(env: OnceEnv) -> Any:
    return boto3.client("sqs")


def _queue(sqs: Any) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=f"target-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return str(url), str(arn["QueueArn"])


def _rule(events: Any, sqs: Any, bus: str, source: str, **target: Any) -> str:
    """A rule on ``bus`` matching ``source``, its target a new queue (returned)."""
    url, arn = _queue(sqs)
    name = f"rule-{uuid.uuid4().hex[:8]}"
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "q", "Arn": arn, **target}])
    return url


def _bodies(sqs: Any, url: str) -> list[Any]:
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def _entry(source: str, detail: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"Source": source, "DetailType": "OrderPlaced", "Detail": json.dumps(detail), **more}


def test_an_event_reaches_an_sqs_target_in_aws_s_shape(events: Any, sqs: Any) -> None:
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = _rule(events, sqs, "default", source)
    answer = events.put_events(Entries=[_entry(source, {"orderId": "o-1"}, Resources=["r:1"])])
    assert answer["FailedEntryCount"] == 0
    (event,) = _bodies(sqs, url)
    assert set(event) == _EVENT_FIELDS  # moto's "ingestion-time" is not AWS's
    assert event["version"] == "0" and event["id"] == answer["Entries"][0]["EventId"]
    assert (event["source"], event["detail-type"]) == (source, "OrderPlaced")
    assert (
        event["account"]
        == sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ].split(":")[4]
    )
    assert event["region"] == events.meta.region_name
    assert _ISO_TIME.fullmatch(event["time"]), event["time"]
    assert event["resources"] == ["r:1"] and event["detail"] == {"orderId": "o-1"}


def test_input_path_sends_the_detail_alone_from_a_custom_bus_named_or_by_arn(
    events: Any, sqs: Any
) -> None:
    bus = f"orders-{uuid.uuid4().hex[:8]}"
    arn = events.create_event_bus(Name=bus)["EventBusArn"]
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = _rule(events, sqs, bus, source, InputPath="$.detail")
    events.put_events(
        Entries=[
            _entry(source, {"orderId": "by-name"}, EventBusName=bus),
            _entry(source, {"orderId": "by-arn"}, EventBusName=arn),
            _entry(source, {"orderId": "default bus"}),  # not this bus's: not delivered
        ]
    )
    assert sorted(b["orderId"] for b in _bodies(sqs, url)) == ["by-arn", "by-name"]


def test_an_input_transformer_shapes_what_the_target_gets(events: Any, sqs: Any) -> None:
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = _rule(
        events,
        sqs,
        "default",
        source,
        InputTransformer={
            "InputPathsMap": {"order": "$.detail.orderId", "kind": "$.detail-type"},
            "InputTemplate": '{"orderId": "<order>", "kind": "<kind>"}',
        },
    )
    events.put_events(Entries=[_entry(source, {"orderId": "o-7"})])
    assert _bodies(sqs, url) == [{"orderId": "o-7", "kind": "OrderPlaced"}]


def test_an_input_transformer_quotes_a_string_that_stands_as_a_json_value(
    events: Any, sqs: Any
) -> None:
    """CDK's ``RuleTargetInput.from_object`` writes ``{"order":<detail-orderId>}``: AWS puts
    the string in quotes there, and its text inside a string (moto: unquoted, invalid)."""
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = _rule(
        events,
        sqs,
        "default",
        source,
        InputTransformer={
            "InputPathsMap": {"order": "$.detail.orderId", "detail": "$.detail"},
            "InputTemplate": '{"order":<order>,"all":<detail>,"text":"order <order> \\"x\\""}',
        },
    )
    events.put_events(Entries=[_entry(source, {"orderId": "o-8"})])
    assert _bodies(sqs, url) == [
        {"order": "o-8", "all": {"orderId": "o-8"}, "text": 'order o-8 "x"'}
    ]


def test_a_pattern_that_does_not_match_sends_nothing(events: Any, sqs: Any) -> None:
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = _rule(events, sqs, "default", source)
    events.put_events(Entries=[_entry(f"{source}.other", {"orderId": "o-1"})])
    events.put_events(Entries=[_entry(source, {"orderId": "o-2"})])  # positive control
    assert [b["detail"]["orderId"] for b in _bodies(sqs, url)] == ["o-2"]


def test_more_than_ten_entries_fail_the_request(events: Any) -> None:
    entries = [_entry("shop.many", {"n": n}) for n in range(sendrules.EVENTS_MAX_ENTRIES + 1)]
    with pytest.raises(ClientError) as refused:
        events.put_events(Entries=entries)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert events.put_events(Entries=entries[:-1])["FailedEntryCount"] == 0


def test_entries_reaching_the_request_s_size_limit_fail_the_request(events: Any) -> None:
    half = sendrules.EVENTS_REQUEST_MAX_BYTES // 2
    entry = _entry("shop.big", {"pad": "x" * half})
    assert sendrules.event_entry_bytes(entry) * 2 >= sendrules.EVENTS_REQUEST_MAX_BYTES
    with pytest.raises(ClientError) as refused:
        events.put_events(Entries=[entry, entry])
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert events.put_events(Entries=[entry])["FailedEntryCount"] == 0  # one alone is taken


def test_an_entry_aws_refuses_fails_alone_and_the_others_are_sent(events: Any, sqs: Any) -> None:
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = _rule(events, sqs, "default", source, InputPath="$.detail")
    refused = [
        {**_entry(source, {"orderId": "array"}), "Detail": "[1, 2]"},
        _entry("aws.shop", {"orderId": "aws source"}),
        {**_entry(source, {}), "DetailType": "x" * (sendrules.DETAIL_TYPE_MAX_CHARS + 1)},
    ]
    entries = [_entry(source, {"orderId": "first"}), *refused, _entry(source, {"orderId": "last"})]
    answer = events.put_events(Entries=entries)
    assert answer["FailedEntryCount"] == len(refused)
    results = answer["Entries"]
    assert "EventId" in results[0] and "EventId" in results[-1]  # the request's order
    for entry, result in zip(refused, results[1:-1], strict=True):
        assert (result["ErrorCode"], result["ErrorMessage"]) == sendrules.event_entry_problem(entry)
    assert sorted(b["orderId"] for b in _bodies(sqs, url)) == ["first", "last"]
