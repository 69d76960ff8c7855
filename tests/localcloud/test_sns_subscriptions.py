"""A team's app whose consumers are fed by an SNS topic, through plain CDK
``SqsSubscription``s, runs on the local cloud: moto's CloudFormation cannot create the
subscriptions, so the local cloud creates them through SNS's API after the deploy, and a
publish to the topic completes the consumer's record, under ``once up`` and ``once_cloud``.

- ``Wrapped``: raw delivery off (CDK's default), so the queue gets SNS's JSON envelope; its
  handler reads the body with ``envelope="powertools_json(Message)"``. Its template sets
  ``POWERTOOLS_LOG_LEVEL=INFO``: its INFO lines are in its worker log.
- ``Raw``: raw delivery on, a filter policy on the message attribute ``kind`` and a
  redrive policy (the consumer's DLQ); its handler reads the body as it is. Its template
  sets ``POWERTOOLS_LOG_LEVEL=WARNING``.

Each handler would fail on the other's form (the key is not where it looks), so a record
completed is the proof of the form delivered. What the local cloud does not run (the
alarms, the queue and topic policies, the dashboard) is named by both: ``once up``'s
printout, ``once_cloud``'s ``StrippedResourceWarning``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from once import constants as c
from oncecli.aws import local_client
from tests.localcloud.helpers import write_project

HANDLER = '''
"""Orders placed on a topic: each one placed once."""

from aws_lambda_powertools import Logger
from once import make_handler

logger = Logger(service="orders-team")


def place(order, attempt):
    logger.info("placing order", extra={"order": attempt.key})
    return {"placed": order["orderId"]}


wrapped = make_handler(place, key="orderId", envelope="powertools_json(Message)")
raw = make_handler(place, key="orderId")
'''

APP = """
import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
stack = cdk.Stack(app, "Orders")
topic = sns.Topic(stack, "Placed")
wrapped = OnceConsumer(
    stack, "Wrapped", code_dir="src", handler="orders.handler.wrapped", service_name="wrapped",
    timeout=cdk.Duration.seconds(3), environment={"POWERTOOLS_LOG_LEVEL": "INFO"},
)
raw = OnceConsumer(
    stack, "Raw", code_dir="src", handler="orders.handler.raw", service_name="raw",
    timeout=cdk.Duration.seconds(3), environment={"POWERTOOLS_LOG_LEVEL": "WARNING"},
)
topic.add_subscription(subscriptions.SqsSubscription(wrapped.queue))
topic.add_subscription(
    subscriptions.SqsSubscription(
        raw.queue,
        raw_message_delivery=True,
        filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["order"])},
        dead_letter_queue=raw.dlq,
    )
)
add_cli_outputs(wrapped)  # the outputs `once inspect` reads: one consumer's per stack
cdk.CfnOutput(stack, "TopicArn", value=topic.topic_arn)
app.synth()
"""

STACK = "Orders"
QUEUE_RESOURCE = {"Type": "AWS::SQS::Queue"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sns-team") / "orders"
    write_project(
        root,
        {
            "src/orders/__init__.py": "",
            "src/orders/handler.py": HANDLER,
            "app.py": APP,
            "cdk.json": '{"app": "python3 app.py"}\n',
        },
    )
    return root


def _publish(sns: Any, topic: str, order_id: str, kind: str) -> None:
    sns.publish(
        TopicArn=topic,
        Message=json.dumps({"orderId": order_id, "kind": kind}),
        MessageAttributes={"kind": {"DataType": "String", "StringValue": kind}},
    )


def test_once_up_names_what_it_does_not_run_and_a_publish_completes_the_record(
    project: Path,
) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    up = subprocess.Popen(
        [str(Path(sys.executable).parent / "once"), "up", "--port", "0"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        assert up.stdout is not None
        for line in up.stdout:
            lines.append(line)
            if "Ctrl-C stops" in line:
                break
        output = "".join(lines)
        assert "Ctrl-C stops" in output, output[-3000:]
        created = re.findall(r"local patch: Orders: SNS subscription .*created", output)
        assert len(created) == 2, output
        assert re.search(r"raw delivery on, filter policy\) created", output), output
        for kind in ("AWS::CloudWatch::Alarm", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"):
            assert re.search(rf"not run locally: Orders: stripped {kind} \w+: ", output), kind
        assert "moto does not enforce queue policies" in output
        assert not re.search(r"not run locally: .*AWS::SNS::Subscription", output), output
        endpoint = re.search(r"--endpoint-url (http://127\.0\.0\.1:\d+)", output)
        topic = re.search(r"TopicArn = (arn:aws:sns:\S+)", output)
        assert endpoint and topic, output
        _publish(local_client("sns", endpoint.group(1)), topic.group(1), "o-up", "order")
        where = ["--stack", STACK, "--endpoint-url", endpoint.group(1)]
        deadline = time.monotonic() + 60
        inspected = ""
        while time.monotonic() < deadline and "COMPLETED" not in inspected:
            time.sleep(0.5)
            inspected = subprocess.run(
                [str(Path(sys.executable).parent / "once"), "inspect", "o-up", *where],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        assert "COMPLETED" in inspected, inspected
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
    assert up.returncode in (0, 130)


@pytest.fixture(scope="module")
def cloud(project: Path) -> Iterator[tuple[Any, list[warnings.WarningMessage]]]:
    """The app on ``OnceCloud`` (what the ``once_cloud`` fixture yields), and the warnings
    its start gave."""
    from oncecli.testing.cloud import OnceCloud

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = OnceCloud(project).__enter__()
    try:
        yield started, list(caught)
    finally:
        started.__exit__()


def _topic(once_cloud: Any) -> str:
    return str(once_cloud.outputs(STACK)["TopicArn"])


def test_once_cloud_warns_naming_the_stripped_alarms_and_policies(cloud: tuple) -> None:
    from oncecli.testing.cloud import StrippedResourceWarning

    once_cloud, caught = cloud
    (warning,) = [w for w in caught if issubclass(w.category, StrippedResourceWarning)]
    assert issubclass(StrippedResourceWarning, UserWarning)
    message = str(warning.message)
    assert f"of stack {STACK}" in message
    alarms = [
        logical_id
        for logical_id, resource in once_cloud.cloud.stacks[0].template["Resources"].items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
    ]
    assert len(alarms) >= 2  # both consumers' monitoring
    for alarm in alarms:
        assert f"stripped AWS::CloudWatch::Alarm {alarm}: " in message
    assert "AWS::SQS::QueuePolicy" in message and "moto does not enforce queue policies" in message
    # Positive control: the subscriptions run, so they are not named as left out.
    assert "AWS::SNS::Subscription" not in message


@pytest.mark.parametrize(
    "consumer",
    [
        pytest.param("Wrapped", id="in SNS's envelope, raw delivery off"),
        pytest.param("Raw", id="as published, raw delivery on"),
    ],
)
def test_a_publish_to_the_topic_completes_the_subscribed_consumer_s_record(
    cloud: tuple, consumer: str
) -> None:
    once_cloud, _ = cloud
    order = f"o-{uuid.uuid4().hex[:8]}"
    _publish(once_cloud.client("sns"), _topic(once_cloud), order, "order")
    once_cloud.drain()
    record = once_cloud.record(STACK, order, consumer=consumer)
    assert record is not None and record.status == "COMPLETED", record
    assert json.loads(record.result) == {"placed": order}
    assert not once_cloud.dlq_messages(STACK, consumer=consumer)


def test_each_subscription_carries_the_attributes_its_template_gives_it(cloud: tuple) -> None:
    once_cloud, _ = cloud
    sns = once_cloud.client("sns")
    listed = sns.list_subscriptions_by_topic(TopicArn=_topic(once_cloud))["Subscriptions"]
    by_queue = {}
    for subscription in listed:
        attributes = sns.get_subscription_attributes(
            SubscriptionArn=subscription["SubscriptionArn"]
        )["Attributes"]
        by_queue[attributes["Endpoint"]] = attributes
    wrapped, raw = (once_cloud.consumer(STACK, name).mapping for name in ("Wrapped", "Raw"))
    assert sorted(by_queue) == sorted([wrapped.queue_arn, raw.queue_arn])
    assert by_queue[wrapped.queue_arn]["RawMessageDelivery"] == "false"
    assert "FilterPolicy" not in by_queue[wrapped.queue_arn]
    assert by_queue[raw.queue_arn]["RawMessageDelivery"] == "true"
    assert json.loads(by_queue[raw.queue_arn]["FilterPolicy"]) == {"kind": ["order"]}
    dlq_url = once_cloud.names(STACK, consumer="Raw").dlq_url
    assert dlq_url == once_cloud.consumer(STACK, "Raw").function.environment[c.ENV_DLQ_URL]
    dlq_arn = once_cloud.client("sqs").get_queue_attributes(
        QueueUrl=dlq_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    assert json.loads(by_queue[raw.queue_arn]["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn}


def test_a_filter_policy_that_excludes_a_message_keeps_it_out_of_the_queue(
    cloud: tuple,
) -> None:
    once_cloud, _ = cloud
    kept, excluded = f"o-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    sns = once_cloud.client("sns")
    _publish(sns, _topic(once_cloud), kept, "order")
    _publish(sns, _topic(once_cloud), excluded, "test")
    once_cloud.drain()
    # Positive controls: the excluded message was published (the unfiltered subscription
    # delivered it), and the filtered one lets a matching message through.
    assert once_cloud.record(STACK, excluded, consumer="Wrapped").status == "COMPLETED"
    assert once_cloud.record(STACK, kept, consumer="Raw").status == "COMPLETED"
    assert once_cloud.record(STACK, excluded, consumer="Raw") is None
    assert not any(excluded in m.body for m in once_cloud.dlq_messages(STACK, consumer="Raw"))


def test_a_function_s_own_log_level_stands_in_its_worker_log(cloud: tuple) -> None:
    once_cloud, _ = cloud
    order = f"o-{uuid.uuid4().hex[:8]}"
    _publish(once_cloud.client("sns"), _topic(once_cloud), order, "order")
    once_cloud.drain()
    assert once_cloud.record(STACK, order, consumer="Raw").status == "COMPLETED"
    logs = {
        name: (once_cloud.cloud.log_dir / once_cloud.consumer(STACK, name).log_name).read_text()
        for name in ("Wrapped", "Raw")
    }
    info = [json.loads(line) for line in logs["Wrapped"].splitlines() if order in line]
    assert any(
        line.get("level") == "INFO" and line.get("message") == "placing order" for line in info
    ), logs["Wrapped"][-3000:]
    # Its template's WARNING stands too: Raw placed the order, and logged no INFO line of it.
    assert order not in logs["Raw"]


class _FakeCloudFormation:
    def describe_stack_resources(self, StackName: str) -> dict[str, Any]:
        return {
            "StackResources": [
                {"LogicalResourceId": "Topic", "PhysicalResourceId": "arn:aws:sns:r:1:Placed"},
                {"LogicalResourceId": "Queue", "PhysicalResourceId": "http://h/1/Orders-Q"},
            ]
        }

    def get_paginator(self, name: str) -> Any:
        assert name == "list_exports"
        return type("P", (), {"paginate": lambda self: [{"Exports": [_EXPORT]}]})()


_EXPORT = {"Name": "Shared:TopicArn", "Value": "arn:aws:sns:r:1:Shared"}


class _FakeSqs:
    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        return {"Attributes": {"QueueArn": f"arn:aws:sqs:r:1:{QueueUrl.rsplit('/', 1)[-1]}"}}


class _FakeSns:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def subscribe(self, **request: Any) -> dict[str, str]:
        self.calls.append(request)
        return {"SubscriptionArn": "arn:aws:sns:r:1:Placed:1"}


def test_a_subscription_s_properties_resolve_against_the_stack_or_it_is_named() -> None:
    from oncecli.localcloud import resolve, subscriptions
    from oncecli.localcloud.template import Subscription

    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}, "Queue": QUEUE_RESOURCE}}
    resolver = resolve.deployed(
        "Orders", template, _FakeCloudFormation(), _FakeSqs(), unresolved=resolve.RAISE
    )
    sns = _FakeSns()
    notes, left_out = subscriptions.create(
        "Orders",
        [
            Subscription(
                "Local",
                {
                    "Protocol": "sqs",
                    "TopicArn": {"Ref": "Topic"},
                    "Endpoint": {"Fn::GetAtt": ["Queue", "Arn"]},
                    "RawMessageDelivery": True,
                    "FilterPolicyScope": "MessageBody",
                    "FilterPolicy": {"kind": ["order"]},
                    "RedrivePolicy": {"deadLetterTargetArn": {"Fn::Sub": "${Queue.Arn}"}},
                },
            ),
            Subscription(
                "Imported",
                {
                    "Protocol": "sqs",
                    "TopicArn": {"Fn::ImportValue": "Shared:TopicArn"},
                    "Endpoint": {
                        "Fn::Join": [":", ["arn:aws:sqs", {"Ref": "AWS::Region"}, "1", "Q"]]
                    },
                },
            ),
            Subscription(
                "Unknown",
                {
                    "Protocol": "sqs",
                    "TopicArn": {"Ref": "Topic"},
                    "Endpoint": {"Fn::GetAtt": ["Topic", "Nonsense"]},
                },
            ),
        ],
        resolver,
        sns,
    )
    local, imported = sns.calls
    assert local == {
        "TopicArn": "arn:aws:sns:r:1:Placed",
        "Protocol": "sqs",
        "Endpoint": "arn:aws:sqs:r:1:Orders-Q",
        "Attributes": {
            "RawMessageDelivery": "true",
            "FilterPolicyScope": "MessageBody",
            "FilterPolicy": '{"kind": ["order"]}',
            "RedrivePolicy": '{"deadLetterTargetArn": "arn:aws:sqs:r:1:Orders-Q"}',
        },
        "ReturnSubscriptionArn": True,
    }
    assert imported["TopicArn"] == _EXPORT["Value"]
    assert imported["Endpoint"] == "arn:aws:sqs:us-east-1:1:Q" and imported["Attributes"] == {}
    assert len(notes) == 2
    (unknown,) = left_out
    assert (unknown.kind, unknown.logical_id) == ("AWS::SNS::Subscription", "Unknown")
    assert "cannot resolve its properties (Fn::GetAtt Topic.Nonsense" in unknown.why
