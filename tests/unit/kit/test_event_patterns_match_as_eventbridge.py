"""A rule delivers the events its pattern matches as EventBridge matches them, in ``once_env``
(and on the local cloud's moto server: the same ``once.testing.strict_events``), with
``once.event_patterns``, EventBridge's matcher written again (moto's is never asked).

Pinned: exact values are compared at their JSON text (EventBridge: "Number matching is at the
string representation level. For example, 300, 300.0, and 3.0e2 are not considered equal",
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html; Event Ruler,
EventBridge's matching library, https://github.com/aws/event-ruler README "JSON text
matching": ``true`` "would match only the JSON literal ``true``"); a numeric filter matches
JSON numbers only; a field inside an array of objects is matched element-wise (README "JSON
Array Matching"), two fields never taken from different elements; the pattern is run on the
event as AWS holds it (``time`` its ISO text: the README's ``{"time": [{"prefix":
"2017-10-02"}]}``); a disabled rule delivers nothing. The adversarial review of issue 41
proved each of the first five against moto's matcher (``[true]`` matched ``1``, ``[300]``
matched ``300.0``, ``numeric`` matched ``true``, an array of objects was never looked into,
``time`` was an epoch number).

Then each filter of
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html
on the matcher itself (pure: ``matches``), one assertion per documented behaviour.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from once.event_patterns import matches
from once.testing.env import OnceEnv


@pytest.fixture(scope="module")
def env() -> Iterator[OnceEnv]:
    with OnceEnv() as environment:
        yield environment


@pytest.fixture(scope="module")
def clients(env: OnceEnv) -> tuple[Any, Any]:
    return boto3.client("events"), boto3.client("sqs")


def _delivered(
    clients: tuple[Any, Any],
    pattern: dict[str, Any],
    detail: Any,
    *,
    disabled: bool = False,
    **entry: Any,
) -> int:
    """How many messages a rule with ``pattern`` (and a fresh source) delivers to its queue
    for one event of ``detail``."""
    events, sqs = clients
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=f"matched-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    name = f"rule-{uuid.uuid4().hex[:8]}"
    events.put_rule(
        Name=name,
        EventPattern=json.dumps({"source": [source], **pattern}),
        State="DISABLED" if disabled else "ENABLED",
    )
    events.put_targets(Rule=name, Targets=[{"Id": "q", "Arn": arn}])
    answer = events.put_events(
        Entries=[{"Source": source, "DetailType": "T", "Detail": json.dumps(detail), **entry}]
    )
    assert answer["FailedEntryCount"] == 0, answer
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return len(got.get("Messages", []))


# --- through PutRule and PutEvents (the review's proofs) -------------------------------------


def test_a_field_inside_an_array_of_objects_is_matched_element_wise(
    clients: tuple[Any, Any],
) -> None:
    detail = {"items": [{"sku": "A-1"}, {"sku": "B-2"}]}
    assert _delivered(clients, {"detail": {"items": {"sku": ["B-2"]}}}, detail) == 1


def test_the_literal_true_does_not_match_the_number_1(clients: tuple[Any, Any]) -> None:
    assert _delivered(clients, {"detail": {"paid": [True]}}, {"paid": 1}) == 0


def test_the_number_300_does_not_match_300_point_0(clients: tuple[Any, Any]) -> None:
    assert _delivered(clients, {"detail": {"total": [300]}}, {"total": 300.0}) == 0


def test_a_numeric_filter_does_not_match_a_boolean(clients: tuple[Any, Any]) -> None:
    assert _delivered(clients, {"detail": {"count": [{"numeric": [">", 0]}]}}, {"count": True}) == 0


def test_a_prefix_on_time_matches_the_event_s_iso_time(clients: tuple[Any, Any]) -> None:
    at = datetime(2017, 10, 2, 16, 24, 49, tzinfo=UTC)
    pattern = {"time": [{"prefix": "2017-10-02"}]}
    assert _delivered(clients, pattern, {"n": 1}, Time=at) == 1


def test_a_disabled_rule_delivers_nothing(clients: tuple[Any, Any]) -> None:
    """DisableRule: "A disabled rule won't match any events"
    (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_DisableRule.html)."""
    assert _delivered(clients, {}, {"n": 1}, disabled=True) == 0


def test_a_pattern_on_a_custom_bus_s_other_targets_is_matched_here_too(
    clients: tuple[Any, Any],
) -> None:
    """A rule with a target moto delivers (a log group) is matched by our matcher as well: an
    event its pattern does not match reaches neither target."""
    events = clients[0]
    logs = boto3.client("logs")
    group = f"/aws/events/matched-{uuid.uuid4().hex[:8]}"
    logs.create_log_group(logGroupName=group)
    group_arn = f"arn:aws:logs:{events.meta.region_name}:123456789012:log-group:{group}"
    source = f"shop.{uuid.uuid4().hex[:8]}"
    name = f"rule-{uuid.uuid4().hex[:8]}"
    events.put_rule(
        Name=name, EventPattern=json.dumps({"source": [source], "detail": {"paid": [True]}})
    )
    events.put_targets(Rule=name, Targets=[{"Id": "l", "Arn": group_arn}])
    for paid in (1, True):
        events.put_events(
            Entries=[{"Source": source, "DetailType": "T", "Detail": json.dumps({"paid": paid})}]
        )
    streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    logged = [
        json.loads(e["message"])["detail"]
        for s in streams
        for e in logs.get_log_events(logGroupName=group, logStreamName=s["logStreamName"])["events"]
    ]
    assert logged == [{"paid": True}]


# --- the matcher, filter by filter ---------------------------------------------------------

EVENT: dict[str, Any] = {
    "version": "0",
    "id": "e-1",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2017-10-02T16:24:49Z",
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-0a"],
    "detail": {
        "c-count": 5,
        "x-limit": 301.8,
        "source-ip": "10.0.0.33",
        "state": "running",
        "paid": True,
        "note": None,
        "nested": {"c1": 100},
        "empty": [],
        "employees": [
            {"firstName": "John", "lastName": "Doe"},
            {"firstName": "Anna", "lastName": "Smith"},
        ],
        "tags": ["a", "b"],
        "file": "dir/report.PNG",
    },
}

MATCHED: dict[str, dict[str, Any]] = {
    "exact string": {"detail": {"state": ["running"]}},
    "one of several": {"detail": {"state": ["pending", "running"]}},
    "true": {"detail": {"paid": [True]}},
    "null": {"detail": {"note": [None]}},
    "array intersects": {"resources": ["x", "arn:aws:ec2:us-east-1:123456789012:instance/i-0a"]},
    "scalar array element": {"detail": {"tags": ["b"]}},
    "prefix": {"time": [{"prefix": "2017-10-02"}]},
    "prefix ignoring case": {"detail": {"state": [{"prefix": {"equals-ignore-case": "RUN"}}]}},
    "suffix": {"detail": {"file": [{"suffix": ".PNG"}]}},
    "suffix ignoring case": {"detail": {"file": [{"suffix": {"equals-ignore-case": ".png"}}]}},
    "equals-ignore-case": {"source": [{"equals-ignore-case": "AWS.EC2"}]},
    "wildcard": {"detail": {"file": [{"wildcard": "dir/*.PNG"}]}},
    "anything-but string": {"detail": {"state": [{"anything-but": "stopped"}]}},
    "anything-but list": {"detail": {"state": [{"anything-but": ["stopped", "pending"]}]}},
    "anything-but numbers": {"detail": {"c-count": [{"anything-but": [1, 2, 3]}]}},
    "anything-but prefix": {"detail": {"state": [{"anything-but": {"prefix": "stop"}}]}},
    "anything-but suffix": {"detail": {"file": [{"anything-but": {"suffix": ".jpg"}}]}},
    "anything-but ignoring case": {
        "detail": {"state": [{"anything-but": {"equals-ignore-case": ["STOPPED"]}}]}
    },
    "anything-but wildcard": {"detail": {"file": [{"anything-but": {"wildcard": "*.jpg"}}]}},
    "numeric range": {"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}]}},
    "numeric equals": {"detail": {"x-limit": [{"numeric": ["=", 3.018e2]}]}},
    "numeric below": {"detail": {"c-count": [{"numeric": ["<", 10]}]}},
    "cidr": {"detail": {"source-ip": [{"cidr": "10.0.0.0/24"}]}},
    "exists": {"detail": {"c-count": [{"exists": True}]}},
    "absent": {"detail": {"d-count": [{"exists": False}]}},
    "exists false on an object (leaves only)": {"detail": {"nested": [{"exists": False}]}},
    "a field of an object": {"detail": {"nested": {"c1": [100]}}},
    "one element's two fields": {
        "detail": {"employees": {"firstName": ["Anna"], "lastName": ["Smith"]}}
    },
    "$or": {"$or": [{"source": ["aws.s3"]}, {"detail": {"state": ["running"]}}]},
    "$or nested": {"detail": {"$or": [{"c-count": [{"numeric": [">", 9]}]}, {"paid": [True]}]}},
}

UNMATCHED: dict[str, dict[str, Any]] = {
    "another string": {"detail": {"state": ["stopped"]}},
    "string vs number": {"detail": {"c-count": ["5"]}},
    "5 vs 5.0": {"detail": {"c-count": [5.0]}},
    'true vs "true"': {"detail": {"paid": ["true"]}},
    "null vs absent": {"detail": {"d-count": [None]}},
    "prefix on a number": {"detail": {"c-count": [{"prefix": "5"}]}},
    "prefix is case-sensitive": {"detail": {"state": [{"prefix": "RUN"}]}},
    "suffix is case-sensitive": {"detail": {"file": [{"suffix": ".png"}]}},
    "wildcard is whole": {"detail": {"state": [{"wildcard": "run"}]}},
    "anything-but the value": {"detail": {"state": [{"anything-but": ["running"]}]}},
    "anything-but a number, numerically": {"detail": {"c-count": [{"anything-but": 5.0}]}},
    "anything-but an absent field": {"detail": {"d-count": [{"anything-but": "x"}]}},
    "anything-but prefix": {"detail": {"state": [{"anything-but": {"prefix": "run"}}]}},
    "numeric out of range": {"detail": {"c-count": [{"numeric": [">", 5]}]}},
    "numeric on a string": {"detail": {"state": [{"numeric": [">", 0]}]}},
    "cidr elsewhere": {"detail": {"source-ip": [{"cidr": "10.0.1.0/24"}]}},
    "exists on an object (leaves only)": {"detail": {"nested": [{"exists": True}]}},
    "exists on an empty array": {"detail": {"empty": [{"exists": True}]}},
    "absent but present": {"detail": {"c-count": [{"exists": False}]}},
    "fields of two elements": {
        "detail": {"employees": {"firstName": ["Anna"], "lastName": ["Doe"]}}
    },
    "one field fails the and": {"source": ["aws.ec2"], "detail": {"state": ["stopped"]}},
    "no branch of $or": {"$or": [{"source": ["aws.s3"]}, {"detail": {"state": ["stopped"]}}]},
}


@pytest.mark.parametrize("pattern", MATCHED.values(), ids=list(MATCHED))
def test_the_matcher_matches_what_eventbridge_matches(pattern: dict[str, Any]) -> None:
    assert matches(pattern, EVENT)


@pytest.mark.parametrize("pattern", UNMATCHED.values(), ids=list(UNMATCHED))
def test_the_matcher_does_not_match_what_eventbridge_does_not(pattern: dict[str, Any]) -> None:
    assert not matches(pattern, EVENT)


def test_a_wildcard_escapes_its_asterisk_and_backslash() -> None:
    event = {"detail": {"a": "x*y", "b": "x\\y"}}
    assert matches({"detail": {"a": [{"wildcard": "x\\*y"}]}}, event)
    assert not matches({"detail": {"a": [{"wildcard": "x\\*y"}]}}, {"detail": {"a": "xzy"}})
    assert matches({"detail": {"b": [{"wildcard": "x\\\\y"}]}}, event)


def test_an_ipv6_address_matches_its_cidr() -> None:
    event = {"detail": {"ip": "2001:db8::1"}}
    assert matches({"detail": {"ip": [{"cidr": "2001:db8::/32"}]}}, event)
    assert not matches({"detail": {"ip": [{"cidr": "10.0.0.0/8"}]}}, event)
