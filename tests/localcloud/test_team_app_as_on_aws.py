"""A team's app behaves on ``OnceCloud`` as it would on AWS where moto alone would not hold
it to AWS's rules: a team app in a folder of its own, one stack, two consumers.

- ``Publisher``: its outbox publishes to an SNS topic (``attempt.send(topic_arn, ...)``, the
  ARN from the function's environment, ``topic.grant_publish(consumer.function)``), and a
  plain queue is subscribed to the topic with CDK's ``SqsSubscription`` (raw delivery off).
  A message to the consumer ends with the published message in that queue, in SNS's
  envelope, once's ``once.source``/``once.seq`` among its ``MessageAttributes``. The same
  send to a second topic, never granted, is refused by the function's role as AWS refuses it
  (``AuthorizationError``): the record completes with its outbox owed.
- ``Sender``: business code sends to a FIFO queue of the app (``grant_send_messages``) with
  its own boto3 client. A ``MessageGroupId`` with a space is refused as SQS refuses it
  (``InvalidParameterValue``, which moto alone accepts); a valid group id goes through.

Nothing waits on time: each test polls for its condition, with a generous limit.
"""

from __future__ import annotations

import json
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from once import constants as c
from once.identity import named
from once.models import Record, record_id
from oncecli.testing.cloud import OnceCloud, StrippedResourceWarning
from tests.localcloud.helpers import write_project

PUBLISHER = """
import os

from once import make_handler


def announce(order, attempt):
    topic = os.environ["UNGRANTED_TOPIC" if order.get("ungranted") else "PLACED_TOPIC"]
    attempt.send(topic, {"orderId": order["orderId"], "placed": True})
    return {"announced": order["orderId"]}


handler = make_handler(announce, key="orderId")
"""

SENDER = '''
import os

import boto3
from botocore.exceptions import ClientError
from once import make_handler


def forward(order, attempt):
    """Business code calling SQS itself: what SQS says of the call is the result."""
    try:
        boto3.client("sqs").send_message(
            QueueUrl=os.environ["SHIPMENTS_QUEUE"],
            MessageBody=order["sendId"],
            MessageGroupId=order["group"],
        )
    except ClientError as error:
        return {"code": error.response["Error"]["Code"]}
    return {"code": None}


handler = make_handler(forward, key="sendId")
'''

APP = """
import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
stack = cdk.Stack(app, "Shop")
placed = sns.Topic(stack, "Placed")
ungranted = sns.Topic(stack, "Ungranted")
subscriber = sqs.Queue(stack, "Subscriber")
placed.add_subscription(subscriptions.SqsSubscription(subscriber))
shipments = sqs.Queue(stack, "Shipments", fifo=True, content_based_deduplication=True)
publisher = OnceConsumer(
    stack, "Publisher", code_dir="src", handler="shop.publisher.handler",
    service_name="publisher", timeout=cdk.Duration.seconds(3),
    environment={"PLACED_TOPIC": placed.topic_arn, "UNGRANTED_TOPIC": ungranted.topic_arn},
)
placed.grant_publish(publisher.function)
sender = OnceConsumer(
    stack, "Sender", code_dir="src", handler="shop.sender.handler", service_name="sender",
    timeout=cdk.Duration.seconds(3), environment={"SHIPMENTS_QUEUE": shipments.queue_url},
)
shipments.grant_send_messages(sender.function)
add_cli_outputs(publisher)
cdk.CfnOutput(stack, "SubscriberUrl", value=subscriber.queue_url)
app.synth()
"""

STACK = "Shop"
#: Generous: the machine may be loaded (a deploy, a worker's start, a redelivery).
LIMIT_S = 120.0

T = TypeVar("T")


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OnceCloud]:
    project = tmp_path_factory.mktemp("as-on-aws") / "shop"
    write_project(
        project,
        {
            "src/shop/__init__.py": "",
            "src/shop/publisher.py": PUBLISHER,
            "src/shop/sender.py": SENDER,
            "app.py": APP,
            "cdk.json": '{"app": "python3 app.py"}\n',
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StrippedResourceWarning)
        with OnceCloud(project, workers=1) as cloud:
            yield cloud


def _poll(what: str, probe: Callable[[], T | None], timeout_s: float = LIMIT_S) -> T:
    """``probe()`` once it is truthy; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout_s:g} s: {what}")


def _record(shop: OnceCloud, consumer: str, key: str, done: Callable[[Record], bool]) -> Record:
    def probe() -> Record | None:
        record = shop.record(STACK, key, consumer=consumer)
        return record if record is not None and done(record) else None

    return _poll(f"{consumer}'s record {key}", probe)


def _completed(record: Record) -> bool:
    return record.status == "COMPLETED"


def _receive_all(shop: OnceCloud, url: str, want: int) -> list[dict[str, Any]]:
    """Every message of a queue nobody consumes, once ``want`` of them are there."""
    sqs = shop.client("sqs")
    got: dict[str, dict[str, Any]] = {}

    def probe() -> list[dict[str, Any]] | None:
        for message in sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            VisibilityTimeout=600,  # read once: the test keeps what it received
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", []):
            got[message["MessageId"]] = message
        return list(got.values()) if len(got) >= want else None

    return _poll(f"{want} message(s) in {url}", probe)


def _log_lines(shop: OnceCloud, consumer: str) -> list[dict[str, Any]]:
    assert shop.cloud is not None
    path = Path(shop.cloud.log_dir) / shop.consumer(STACK, consumer).log_name
    lines = []
    for line in path.read_text().splitlines() if path.is_file() else ():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            lines.append(parsed)
    return lines


def test_an_outbox_publish_reaches_the_subscribed_queue_in_sns_s_envelope(shop: OnceCloud) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.send(STACK, [{"orderId": order}], consumer="Publisher")

    # Completed, and the outbox cleared: every message of it was published.
    record = _record(shop, "Publisher", order, lambda r: _completed(r) and not r.outbox)
    assert json.loads(record.result) == {"announced": order}
    subscriber = shop.outputs(STACK)["SubscriberUrl"]
    messages = _receive_all(shop, subscriber, want=1)
    ours = [m for m in messages if order in m["Body"]]
    assert len(ours) == 1, messages
    envelope = json.loads(ours[0]["Body"])
    placed = shop.consumer(STACK, "Publisher").function.environment["PLACED_TOPIC"]
    assert envelope["Type"] == "Notification" and envelope["TopicArn"] == placed
    assert json.loads(envelope["Message"]) == {"orderId": order, "placed": True}
    carried = envelope["MessageAttributes"]
    assert set(carried) == {c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ}
    assert carried[c.OUTBOX_ATTR_SOURCE]["Type"] == "String"
    assert named(carried[c.OUTBOX_ATTR_SOURCE]["Value"]) == record_id("publisher", order)
    assert carried[c.OUTBOX_ATTR_SEQ] == {"Type": "Number", "Value": "0"}
    # Raw delivery off: the identity is in the envelope, not on the SQS message itself.
    assert not ours[0].get("MessageAttributes")


def test_the_same_publish_to_a_topic_never_granted_is_owed_with_authorization_error(
    shop: OnceCloud,
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    (message_id,) = shop.send(STACK, [{"orderId": order, "ungranted": True}], consumer="Publisher")

    def refused() -> list[dict[str, Any]]:
        return [
            line
            for line in _log_lines(shop, "Publisher")
            if line.get("message_id") == message_id
            and str(line.get("message", "")).startswith("outbox not sent")
        ]

    (first, *_) = _poll(f"the outbox of {order} refused", refused)
    # As botocore raises it from AWS: SNS's modeled error class, then AWS's code and status.
    assert first["error"] == "AuthorizationErrorException (AuthorizationError, HTTP 403)", first
    # Business code ran once and its record completed; the message is owed, not lost.
    record = shop.record(STACK, order, consumer="Publisher")
    assert record is not None and _completed(record), record
    assert json.loads(record.result) == {"announced": order}
    assert record.outbox, record


@pytest.mark.parametrize(
    ("group", "code"),
    [
        pytest.param("ada lovelace", "InvalidParameterValue", id="a space: refused as SQS does"),
        pytest.param("ada-lovelace", None, id="control: a valid group id goes through"),
    ],
)
def test_business_code_fifo_group_id_with_a_space_is_invalid_parameter_value(
    shop: OnceCloud, group: str, code: str | None
) -> None:
    send_id = f"s-{uuid.uuid4().hex[:8]}"
    shop.send(STACK, [{"sendId": send_id, "group": group}], consumer="Sender")

    record = _record(shop, "Sender", send_id, _completed)
    assert json.loads(record.result) == {"code": code}
    shipments = shop.consumer(STACK, "Sender").function.environment["SHIPMENTS_QUEUE"]
    assert shipments.endswith(".fifo")
    if code is None:
        (shipped,) = [m for m in _receive_all(shop, shipments, want=1) if m["Body"] == send_id]
        assert shipped["Attributes"]["MessageGroupId"] == group
    else:  # the call returned its refusal before the record completed: nothing was queued
        left = shop.client("sqs").receive_message(
            QueueUrl=shipments, MaxNumberOfMessages=10, VisibilityTimeout=0
        )
        assert not [m for m in left.get("Messages", []) if m["Body"] == send_id]
