"""PutRule refuses, with ``InvalidEventPatternException``, a pattern EventBridge cannot
compile, in ``once_env`` and on the local cloud's moto server (``once.testing.strict_events``
checks it with ``once.event_patterns``); a misspelt filter never matches every event.

AWS's PutRule answers such a pattern "The event pattern is not valid"
(https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html), by the rules
of Event Ruler, EventBridge's matching library (https://github.com/aws/event-ruler: README,
and ``JsonRuleCompiler``): only the filters of
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html;
no "consecutive wildcard characters"; an anything-but list "entirely strings or entirely
numerics"; a numeric bound a number; a pattern a JSON object whose fields are objects or
non-empty arrays. The adversarial review of issue 41 proved that moto 5.2.5 took the first
three, and that its matcher then answered True for a filter it did not know
(``{"prefx": ...}`` matched every event).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from once.event_patterns import InvalidPattern, parse, problem
from once.testing.env import OnceEnv


@pytest.fixture(scope="module")
def env() -> Iterator[OnceEnv]:
    with OnceEnv() as environment:
        yield environment


REFUSED: dict[str, Any] = {
    "unknown match type": {"detail": {"state": [{"prefx": "run"}]}},
    "consecutive wildcards": {"source": [{"wildcard": "shop.**orders"}]},
    "anything-but of strings and numbers": {"detail": {"state": [{"anything-but": ["a", 1]}]}},
    "numeric bound not a number": {"detail": {"n": [{"numeric": [">", "5"]}]}},
    "numeric bound a boolean": {"detail": {"n": [{"numeric": ["<", True]}]}},
    "numeric unknown operator": {"detail": {"n": [{"numeric": ["!=", 5]}]}},
    "numeric upper then lower": {"detail": {"n": [{"numeric": ["<", 5, ">", 1]}]}},
    "numeric equals with more": {"detail": {"n": [{"numeric": ["=", 5, "<", 9]}]}},
    "numeric empty range": {"detail": {"n": [{"numeric": [">", 9, "<", 1]}]}},
    "a leaf that is a string": {"source": "shop"},
    "a leaf that is a number": {"detail": {"n": 5}},
    "an empty array": {"source": []},
    "an empty object": {"detail": {}},
    "an array in a field's array": {"source": [["shop"]]},
    "two keys in a filter": {"source": [{"prefix": "a", "suffix": "b"}]},
    "prefix not a string": {"source": [{"prefix": 5}]},
    "exists not a boolean": {"source": [{"exists": "true"}]},
    "cidr not a network": {"detail": {"ip": [{"cidr": "10.0.0.300/8"}]}},
    "anything-but of null": {"detail": {"s": [{"anything-but": None}]}},
    "anything-but of an unknown filter": {"detail": {"s": [{"anything-but": {"exists": True}}]}},
    "anything-but an empty prefix": {"detail": {"s": [{"anything-but": {"prefix": ""}}]}},
    "wildcard escaping a letter": {"source": [{"wildcard": "shop\\.orders"}]},
    "$or of one object": {"$or": [{"source": ["a"]}]},
    "$or of no array": {"$or": {"source": ["a"]}},
    "a filter's name as a field in $or": {"$or": [{"prefix": ["a"]}, {"source": ["b"]}]},
}


@pytest.mark.parametrize("pattern", REFUSED.values(), ids=list(REFUSED))
def test_put_rule_refuses_a_pattern_aws_cannot_compile(env: OnceEnv, pattern: Any) -> None:
    events = boto3.client("events")
    with pytest.raises(ClientError) as refused:
        events.put_rule(Name=f"refused-{uuid.uuid4().hex[:8]}", EventPattern=json.dumps(pattern))
    assert refused.value.response["Error"]["Code"] == "InvalidEventPatternException"


@pytest.mark.parametrize("text", ["[]", '"source"', "{", '{"n": [NaN]}'])
def test_a_pattern_that_is_no_json_object_is_refused(text: str) -> None:
    with pytest.raises(InvalidPattern):
        parse(text)


TAKEN: dict[str, Any] = {
    "exact values of each kind": {"detail": {"a": ["s", 1, 2.5, True, None]}},
    "numeric range": {"detail": {"n": [{"numeric": [">=", 0, "<", 5]}]}},
    "anything-but numbers": {"detail": {"n": [{"anything-but": [1, 2.5]}]}},
    "anything-but a prefix": {"detail": {"s": [{"anything-but": {"prefix": "a"}}]}},
    "anything-but wildcards": {"detail": {"s": [{"anything-but": {"wildcard": ["a*", "*b"]}}]}},
    "prefix ignoring case": {"source": [{"prefix": {"equals-ignore-case": "SHOP"}}]},
    "escaped wildcard": {"source": [{"wildcard": "a\\*b*\\\\"}]},
    "cidr v6": {"detail": {"ip": [{"cidr": "2001:db8::/32"}]}},
    "$or": {"$or": [{"source": ["a"]}, {"detail": {"s": [{"exists": False}]}}]},
}


@pytest.mark.parametrize("pattern", TAKEN.values(), ids=list(TAKEN))
def test_a_pattern_aws_compiles_is_taken(env: OnceEnv, pattern: Any) -> None:
    assert problem(pattern) is None
    boto3.client("events").put_rule(
        Name=f"taken-{uuid.uuid4().hex[:8]}", EventPattern=json.dumps(pattern)
    )


def test_a_misspelt_filter_never_matches_every_event(env: OnceEnv) -> None:
    events, sqs = boto3.client("events"), boto3.client("sqs")
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=f"typo-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    pattern = {"source": [source], "detail": {"state": [{"prefx": "run"}]}}
    with pytest.raises(ClientError):
        events.put_rule(Name="typo", EventPattern=json.dumps(pattern))
    with pytest.raises(ClientError):  # no rule was made to target
        events.put_targets(Rule="typo", Targets=[{"Id": "q", "Arn": arn}])
    events.put_events(
        Entries=[{"Source": source, "DetailType": "T", "Detail": json.dumps({"state": "stopped"})}]
    )
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []
