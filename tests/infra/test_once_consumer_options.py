"""OnceConsumer with every argument away from its default, and two consumers in one stack:
each argument lands where it should, and names never collide."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions
from aws_cdk import aws_logs as logs

from once import constants as c
from once.backoff import Backoff
from once_cdk import OnceConsumer

NAMESPACE = "Shop"


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """A stack with a fully configured consumer and a second, default one."""
    root = tmp_path_factory.mktemp("custom")
    (root / "shop").mkdir()
    (root / "shop" / "handler.py").write_text("lambda_handler = None\n")
    app = cdk.App(outdir=str(root / "cdk.out"))
    stack = cdk.Stack(app, "Shop")
    configured = OnceConsumer(
        stack,
        "Orders",
        code_dir=str(root),
        handler="shop.handler.lambda_handler",
        service_name="shop-orders",
        timeout=Duration.seconds(60),
        memory_size=1024,
        batch_size=100,
        max_batching_window=Duration.seconds(5),
        max_concurrency=5,
        reserved_concurrency=10,
        max_receive_count=7,
        backoff=Backoff(30, 900),  # 1830 s after 6 receives >= 5 x 365 s
        retain_data=True,
        log_retention=logs.RetentionDays.ONE_MONTH,
        alarm_email="oncall@example.com",
        environment={c.ENV_METRICS_NAMESPACE: NAMESPACE, "TZ": "UTC"},
    )
    second = OnceConsumer(
        stack, "Refunds", code_dir=root, handler="shop.handler.lambda_handler",
        service_name="shop-refunds",
    )  # fmt: skip
    return stack, configured, second, assertions.Template.from_stack(stack)


def _props(stack, construct):
    template = assertions.Template.from_stack(stack).to_json()
    logical_id = stack.resolve(stack.get_logical_id(construct.node.default_child))
    return template["Resources"][logical_id]


def test_function_mapping_and_queue_follow_the_arguments(custom):
    stack, configured, _, _ = custom
    function = _props(stack, configured.function)["Properties"]
    assert (function["Timeout"], function["MemorySize"]) == (60, 1024)
    assert function["ReservedConcurrentExecutions"] == 10
    env = function["Environment"]["Variables"]
    assert env["TZ"] == "UTC"
    assert env[c.ENV_METRICS_NAMESPACE] == NAMESPACE
    assert env[c.ENV_SERVICE_NAME] == "shop-orders"
    mapping = _props(stack, configured.mapping)["Properties"]
    assert mapping["BatchSize"] == 100
    assert mapping["MaximumBatchingWindowInSeconds"] == 5
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 5}
    queue = _props(stack, configured.queue)["Properties"]
    assert queue["VisibilityTimeout"] == 6 * 60 + 5
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 7


def test_the_declared_backoff_checks_max_receive_count_and_reaches_the_function(custom):
    stack, configured, second, _ = custom
    assert configured.settings.backoff == Backoff(30, 900)
    assert configured.settings.receive_count == 7  # the default backoff derives 13, refuses 7
    assert second.settings.receive_count == 10  # the default backoff's, for a 30 s timeout
    for consumer, declared in ((configured, "30,900"), (second, "2,300")):
        env = _props(stack, consumer.function)["Properties"]["Environment"]["Variables"]
        assert env[c.ENV_BACKOFF] == declared  # make_handler runs it (test_backoff_declared_once)


def test_retain_data_keeps_the_table_and_logs_and_protects_the_table(custom):
    stack, configured, second, _ = custom
    table = _props(stack, configured.table)
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert _props(stack, configured.log_group)["DeletionPolicy"] == "Retain"
    assert _props(stack, configured.log_group)["Properties"]["RetentionInDays"] == 30
    assert _props(stack, second.table)["DeletionPolicy"] == "Delete"


def test_protocol_alarms_read_the_namespace_and_service_the_function_writes(custom):
    _, configured, _, template = custom
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"AlarmName": "Shop-Orders-Conflict", "Namespace": NAMESPACE,
         "Dimensions": [{"Name": "service", "Value": "shop-orders"}]},
    )  # fmt: skip
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {"Protocol": "email", "Endpoint": "oncall@example.com"},
    )
    assert configured.alarm_topic is not None


def test_two_consumers_in_one_stack_have_their_own_names_and_resources(custom):
    _, _, _, template = custom
    names = [a["Properties"]["AlarmName"]
             for a in template.find_resources("AWS::CloudWatch::Alarm").values()]  # fmt: skip
    assert len(names) == len(set(names)) == 18
    assert {n.rsplit("-", 1)[0] for n in names} == {"Shop-Orders", "Shop-Refunds"}
    dashboards = template.find_resources("AWS::CloudWatch::Dashboard").values()
    assert {d["Properties"]["DashboardName"] for d in dashboards} == {"Shop-Orders", "Shop-Refunds"}
    template.resource_count_is("AWS::SQS::Queue", 4)
    template.resource_count_is("AWS::DynamoDB::Table", 2)
