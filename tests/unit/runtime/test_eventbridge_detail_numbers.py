"""A ``Detail`` holding a number past a double's range (``1e400``) is refused, at
``attempt.send`` and by the strict PutEvents alike, never delivered as text that is not JSON
(``Infinity``): an event is JSON ("Events are represented as JSON objects",
https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html), and Python
reads ``1e400`` as infinity. Proved by the adversarial review of issue 41."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from once.testing.env import OnceEnv


@pytest.fixture(scope="module")
def env() -> Iterator[OnceEnv]:
    with OnceEnv() as environment:
        yield environment


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_huge_number_in_the_detail_is_refused_by_put_events_never_delivered_as_infinity(
    env: OnceEnv,
) -> None:
    events, sqs = boto3.client("events"), boto3.client("sqs")
    source = f"huge.{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=f"huge-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name="huge-huge", EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule="huge-huge", Targets=[{"Id": "q", "Arn": arn}])
    answer = events.put_events(
        Entries=[{"Source": source, "DetailType": "T", "Detail": '{"amount": 1e400}'}]
    )
    if answer["FailedEntryCount"]:
        assert answer["Entries"][0]["ErrorCode"] == "MalformedDetail"
        return
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    try:
        _strict_json(message["Body"])
    except ValueError as error:
        pytest.fail(f"delivered a body that is not JSON ({error}): {message['Body']}")


def test_attempt_send_refuses_a_number_past_a_doubles_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from once.effects import Effects

    monkeypatch.setenv("AWS_REGION", "us-east-1")
    effects = Effects(table_name="once", record_id="r#1")
    bus = "arn:aws:events:us-east-1:123456789012:event-bus/b"
    for detail in ('{"amount": 1e400}', '{"amount": -1e400}', {"amount": float("inf")}):
        with pytest.raises(ValueError):
            effects.send(bus, detail, source="s", detail_type="t")
    assert not effects.messages
