"""PutEvents with an entry for a bus that does not exist answers that entry with an
``EventId`` and delivers it nowhere, and the request's other entries are delivered: the
request never fails as a whole after delivering some of them (``once.testing.strict_events``,
in ``once_env`` and on the local cloud's moto server).

AWS: PutEvents reports failures per entry ("If an individual entry within a request fails,
EventBridge continues processing the rest",
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html), and
``ResourceNotFoundException`` is not among its errors
(https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html); for an unknown
bus AWS answers HTTP 200, ``FailedEntryCount: 0`` and an ``EventId``, the event dropped (seen
from AWS in aws/aws-cli#9186 and aws/aws-sdk#186). The adversarial review of issue 41 proved
that moto delivered entry 0, then raised ``ResourceNotFoundException`` on entry 1's bus: the
caller saw the whole request refused, and once's outbox would send entry 0 again.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import boto3
import pytest

from once.testing.env import OnceEnv


@pytest.fixture(scope="module")
def env() -> Iterator[OnceEnv]:
    with OnceEnv() as environment:
        yield environment


@pytest.mark.parametrize(
    "bus", ["no-such-bus", "arn:aws:events:us-east-1:123456789012:event-bus/gone"]
)
def test_an_entry_for_an_unknown_bus_is_answered_and_the_others_delivered(
    env: OnceEnv, bus: str
) -> None:
    events, sqs = boto3.client("events"), boto3.client("sqs")
    source = f"shop.{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=f"known-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rule = f"known-{uuid.uuid4().hex[:8]}"
    events.put_rule(Name=rule, EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule=rule, Targets=[{"Id": "q", "Arn": arn}])
    entry = {"Source": source, "DetailType": "T", "Detail": "{}"}

    outcome = events.put_events(Entries=[entry, {**entry, "EventBusName": bus}, entry])

    assert outcome["FailedEntryCount"] == 0
    assert [sorted(e) for e in outcome["Entries"]] == [["EventId"]] * 3
    assert len({e["EventId"] for e in outcome["Entries"]}) == 3
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert len(got) == 2
