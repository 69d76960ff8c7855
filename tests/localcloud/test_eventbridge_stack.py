"""A team's stack with an EventBridge bus runs on the local cloud, as on AWS: a custom bus,
a rule on it whose SQS target is a consumer's queue (``InputPath: $.detail``), the bus's
grant to a function (``bus.grant_put_events_to``) and its name in that function's
environment. Before, each of these broke something else: the bus dropped every alarm of
every ``OnceConsumer`` ("cannot resolve its properties ('PhysicalResourceId')"), the grant
crashed every worker of the granted function (an ``IndexError`` reading its role), the rule
failed the deploy with a bare HTTP 500 (exit 1), and the name in the environment made
``GetFunctionConfiguration`` answer HTTP 500.

``Relay``'s business code puts an event on the bus it is told (by name, by ARN, or the
default bus); ``Sink`` consumes what the custom bus's rule sends it (the detail alone), and
``Probe``, granted nothing, is refused as AWS refuses it. A rule on the default bus sends
whole events to a plain queue (``Shapes``): AWS's shape, and a rule with an input
transformer to another (``Shaped``).

And the class: a resource moto fails to create fails the deploy with exit 8 and moto's own
cause, naming the resource.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from once.models import Record
from oncecli.testing.cloud import OnceCloud, StrippedResourceWarning
from tests.localcloud.helpers import write_project

HANDLER = '''
"""Relay puts an order's event on a bus; Sink records what a rule delivers."""

import json
import os

import boto3
from botocore.exceptions import ClientError
from once import make_handler

events = boto3.client("events")


def relay(order, attempt):
    entry = {
        "Source": "shop.orders",
        "DetailType": "OrderPlaced",
        "Detail": json.dumps({"orderId": "e-" + order["orderId"]}),
    }
    if order["bus"] != "default":
        entry["EventBusName"] = os.environ["BUS_NAME" if order["bus"] == "name" else "BUS_ARN"]
    try:
        answer = events.put_events(Entries=[entry])
    except ClientError as error:
        refused = error.response["Error"]
        return {"code": refused["Code"], "message": refused["Message"]}
    return {"failed": answer["FailedEntryCount"]}


def sink(event, attempt):
    return {"seen": event["orderId"]}


relay_handler = make_handler(relay, key="orderId")
sink_handler = make_handler(sink, key="orderId")
'''

APP = """
import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
stack = cdk.Stack(app, "Shop")
bus = events.EventBus(stack, "Bus")
default_bus = events.EventBus.from_event_bus_name(stack, "DefaultBus", "default")
env = {"BUS_NAME": bus.event_bus_name, "BUS_ARN": bus.event_bus_arn}
common = dict(code_dir="src", timeout=cdk.Duration.seconds(3))
sink = OnceConsumer(stack, "Sink", handler="shop.handler.sink_handler", service_name="sink",
                    **common)
relay = OnceConsumer(stack, "Relay", handler="shop.handler.relay_handler",
                     service_name="relay", environment=env, **common)
probe = OnceConsumer(stack, "Probe", handler="shop.handler.relay_handler",
                     service_name="probe", environment=env, **common)
placed = events.EventPattern(source=["shop.orders"])
events.Rule(stack, "Placed", event_bus=bus, event_pattern=placed, targets=[
    targets.SqsQueue(sink.queue, message=events.RuleTargetInput.from_event_path("$.detail"))
])
shapes, shaped = sqs.Queue(stack, "Shapes"), sqs.Queue(stack, "Shaped")
events.Rule(stack, "OnDefault", event_pattern=placed, targets=[targets.SqsQueue(shapes)])
events.Rule(stack, "Transformed", event_bus=bus, event_pattern=placed, targets=[
    targets.SqsQueue(shaped, message=events.RuleTargetInput.from_object(
        {"order": events.EventField.from_path("$.detail.orderId"),
         "kind": events.EventField.detail_type}))
])
bus.grant_put_events_to(relay.function)
default_bus.grant_put_events_to(relay.function)
add_cli_outputs(relay)
cdk.CfnOutput(stack, "ShapesUrl", value=shapes.queue_url)
cdk.CfnOutput(stack, "ShapedUrl", value=shaped.queue_url)
app.synth()
"""

STACK = "Shop"
CONSUMERS = ("Sink", "Relay", "Probe")
#: An OnceConsumer's alarms, and how many of them the local cloud evaluates
#: (docs/localcloud.md, "Alarms").
ALARMS, EVALUATED = 9, 5
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _project(root: Path, app: str) -> Path:
    return write_project(
        root,
        {
            "src/shop/__init__.py": "",
            "src/shop/handler.py": HANDLER,
            "app.py": app,
            "cdk.json": '{"app": "python3 app.py"}\n',
        },
    )


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OnceCloud]:
    project = _project(tmp_path_factory.mktemp("eventbridge") / "shop", APP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StrippedResourceWarning)
        with OnceCloud(project, workers=1) as cloud:
            yield cloud


def _settled(cloud: OnceCloud, key: str, consumer: str, timeout_s: float = 90) -> Record:
    """The consumer's record of ``key`` once it is no longer IN_PROGRESS."""
    deadline = time.monotonic() + timeout_s
    record = None
    while time.monotonic() < deadline:
        record = cloud.record(STACK, key, consumer=consumer)
        if record is not None and record.status != "IN_PROGRESS":
            return record
        time.sleep(0.25)
    raise AssertionError(f"{consumer} {key}: still {record} after {timeout_s} s")


def _result(record: Record) -> Any:
    assert record.result is not None, record
    return json.loads(record.result)


def _bodies(cloud: OnceCloud, url: str, want: int, timeout_s: float = 60) -> list[Any]:
    """At least ``want`` bodies from ``url``, each received once (deleted)."""
    sqs = cloud.client("sqs")
    found: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(found) < want and time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in got.get("Messages", []):
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def test_every_consumer_keeps_its_nine_alarms_beside_a_bus(shop: OnceCloud) -> None:
    assert shop.cloud is not None
    assert len(shop.cloud.alarm_names) == ALARMS * len(CONSUMERS)
    unresolved = [str(p) for p in shop.cloud.stripped if "cannot resolve" in p.why]
    assert not unresolved, unresolved
    evaluated = [n for n in shop.cloud.notes if "alarm(s) created" in n]
    assert evaluated and f"{EVALUATED * len(CONSUMERS)} evaluated" in evaluated[0], evaluated


def test_the_bus_s_name_reaches_the_function_s_environment(shop: OnceCloud) -> None:
    environment = shop.consumer(STACK, "Relay").function.environment
    name = shop.client("events").describe_event_bus(Name=environment["BUS_NAME"])["Name"]
    assert name == environment["BUS_NAME"] and name != "default"
    assert environment["BUS_ARN"].endswith(f":event-bus/{name}")


@pytest.mark.parametrize("bus", ["name", "arn"])
def test_an_event_the_granted_function_puts_on_the_bus_reaches_the_rule_s_consumer(
    shop: OnceCloud, bus: str
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.send(STACK, [{"orderId": order, "bus": bus}], consumer="Relay")
    relayed = _settled(shop, order, "Relay")
    assert relayed.status == "COMPLETED" and _result(relayed) == {"failed": 0}
    # The rule's InputPath ($.detail): the sink's body is the detail alone.
    sunk = _settled(shop, f"e-{order}", "Sink")
    assert sunk.status == "COMPLETED" and _result(sunk) == {"seen": f"e-{order}"}


def test_events_on_the_default_bus_arrive_in_aws_s_shape_and_transformed(
    shop: OnceCloud,
) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    bodies = [{"orderId": order, "bus": "default"}, {"orderId": f"{order}-custom", "bus": "name"}]
    shop.send(STACK, bodies, consumer="Relay")
    assert _result(_settled(shop, order, "Relay")) == {"failed": 0}
    outputs = shop.outputs(STACK)
    (event,) = [
        e for e in _bodies(shop, outputs["ShapesUrl"], 1) if e["detail"]["orderId"] == f"e-{order}"
    ]
    assert set(event) == {"version", "id", "detail-type", "source", "account", "time", "region",
                          "resources", "detail"}  # fmt: skip
    assert (event["version"], event["source"]) == ("0", "shop.orders")
    assert event["detail-type"] == "OrderPlaced"
    assert ISO_TIME.fullmatch(event["time"]) and event["resources"] == []
    shaped = _bodies(shop, outputs["ShapedUrl"], 1)
    assert {"order": f"e-{order}-custom", "kind": "OrderPlaced"} in shaped, shaped


def test_a_function_granted_nothing_is_refused_on_the_bus_s_arn(shop: OnceCloud) -> None:
    order = f"o-{uuid.uuid4().hex[:8]}"
    shop.send(STACK, [{"orderId": order, "bus": "name"}], consumer="Probe")
    result = _result(_settled(shop, order, "Probe"))
    bus = shop.consumer(STACK, "Probe").function.environment["BUS_ARN"]
    assert result["code"] == "AccessDeniedException", result
    assert f"events:PutEvents on resource: {bus}" in result["message"], result


ORPHAN_RULE = APP.replace(
    "app.synth()",
    'events.CfnRule(stack, "Orphan", event_bus_name="no-such-bus", '
    'event_pattern={"source": ["x"]})\napp.synth()',
)


def test_a_resource_moto_fails_to_create_fails_the_deploy_with_exit_8_and_moto_s_cause(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path / "shop", ORPHAN_RULE)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    up = subprocess.run(
        [str(Path(sys.executable).parent / "once"), "up", "--port", "0", "--no-mapping",
         "--for", "1"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = up.stdout + up.stderr
    assert up.returncode == 8, output[-3000:]
    assert "the local deploy of Shop failed" in output, output[-3000:]
    assert "Orphan (AWS::Events::Rule)" in output and "no-such-bus does not exist" in output
    assert "Traceback" not in output, output[-3000:]
