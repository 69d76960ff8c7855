"""OnceConsumer on its own: a stack that holds only the construct, standard and FIFO.

What it builds, what it derives, what its role may do, what it alarms on, and that cdk-nag
and cfn-lint find nothing in it that the user would inherit.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk import assertions

from once import constants as c
from once.models import METRIC_NAMES
from once_cdk import permissions
from once_cdk.monitoring import FAILED_SHARE_MINUTES, FAILED_SHARE_PERCENT
from once_cdk.settings import DEFAULT_BACKOFF, VISIBILITY_TIMEOUT_FACTOR, retry_window_s


# --- compliance ---------------------------------------------------------------------------
def test_cdk_nag_finds_nothing_unacknowledged_in_a_bare_consumer(bare):
    plugins = {p["pluginName"]: p for p in bare.validation_report()["pluginReports"]}
    assert set(plugins) == {"AwsSolutions", "Serverless"}
    for plugin in plugins.values():
        assert plugin["violations"] == [], plugin["violations"]
        assert plugin["conclusion"] == "success"


def test_its_acknowledgments_are_the_reviewed_ones_inside_the_construct(bare):
    assert bare.acknowledged_findings() == bare.construct_acknowledgments()
    assert ("AwsSolutions-L1", "Orders/Function/Resource") in bare.acknowledged_findings()


def test_cfn_lint_finds_no_error_or_warning(bare_standard, bare_fifo, cfn_lint):
    cfn_lint([bare_standard.template_path, bare_fifo.template_path])


# --- queues -------------------------------------------------------------------------------
def test_queue_and_dlq_are_encrypted_and_refuse_plain_http(bare):
    consumer = bare.consumer
    for queue in (consumer.queue, consumer.dlq):
        assert bare.props(queue)["SqsManagedSseEnabled"] is True
    protected = set()
    for policy in bare.resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement["Condition"] == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                protected.add(statement["Resource"]["Fn::GetAtt"][0])
    assert protected == {bare.logical_id(consumer.queue), bare.logical_id(consumer.dlq)}


def test_visibility_timeout_is_six_function_timeouts_plus_the_batching_window(bare):
    queue = bare.props(bare.consumer.queue)
    timeout = bare.props(bare.consumer.function)["Timeout"]
    window = bare.props(bare.consumer.mapping).get("MaximumBatchingWindowInSeconds", 0)
    assert queue["VisibilityTimeout"] == VISIBILITY_TIMEOUT_FACTOR * timeout + window == 180


def test_max_receive_count_is_derived_so_retries_last_five_visibility_timeouts(bare):
    settings = bare.consumer.settings
    redrive = bare.props(bare.consumer.queue)["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == settings.receive_count == 10
    assert redrive["deadLetterTargetArn"] == {
        "Fn::GetAtt": [bare.logical_id(bare.consumer.dlq), "Arn"]
    }
    # 2+4+...+256 = 510 s after 8 receives, 810 s after 9, 1110 s after 10 >= 5 x 180 s.
    assert retry_window_s(settings.receive_count, DEFAULT_BACKOFF, 180) == 1110 >= 5 * 180


def test_dlq_keeps_messages_14_days_longer_than_the_queue_and_has_no_dlq_itself(bare):
    queue, dlq = bare.props(bare.consumer.queue), bare.props(bare.consumer.dlq)
    assert dlq["MessageRetentionPeriod"] == c.DLQ_RETENTION_S == 14 * c.DAY_S
    assert queue["MessageRetentionPeriod"] == c.DEFAULT_SOURCE_RETENTION_S
    assert "RedrivePolicy" not in dlq


def test_fifo_builds_a_fifo_pair_deduplicated_by_content(bare_fifo, bare_standard):
    for queue in (bare_fifo.consumer.queue, bare_fifo.consumer.dlq):
        props = bare_fifo.props(queue)
        assert props["FifoQueue"] is True
        assert props["ContentBasedDeduplication"] is True
    for queue in (bare_standard.consumer.queue, bare_standard.consumer.dlq):
        assert "FifoQueue" not in bare_standard.props(queue)


# --- table --------------------------------------------------------------------------------
def test_table_is_on_demand_with_pitr_and_ttl_on_the_runtime_attribute(bare):
    bare.assertions.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": c.TTL_ATTRIBUTE, "Enabled": True},
        },
    )
    assert len(bare.resources("AWS::DynamoDB::Table")) == 1


def test_data_is_destroyed_with_the_stack_unless_retain_data(bare):
    table = bare.template["Resources"][bare.logical_id(bare.consumer.table)]
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is False


# --- function and mapping -----------------------------------------------------------------
def test_function_runs_the_given_handler_with_the_runtime_configured(bare):
    props = bare.props(bare.consumer.function)
    consumer = bare.consumer
    assert props["Handler"] == "orders.handler.lambda_handler"
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["x86_64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert (props["Timeout"], props["MemorySize"]) == (30, 512)
    assert "ReservedConcurrentExecutions" not in props
    assert props["Environment"]["Variables"] == {
        c.ENV_TABLE_NAME: {"Ref": bare.logical_id(consumer.table)},
        c.ENV_DLQ_URL: {"Ref": bare.logical_id(consumer.dlq)},
        c.ENV_SERVICE_NAME: "orders",
        c.ENV_METRICS_NAMESPACE: c.DEFAULT_METRICS_NAMESPACE,
        c.ENV_RETENTION_S: str(c.DEFAULT_RETENTION_S),
        c.ENV_BACKOFF: f"{c.DEFAULT_BACKOFF_BASE_S},{c.DEFAULT_BACKOFF_MAX_S}",
    }
    assert props["LoggingConfig"]["LogGroup"] == {"Ref": bare.logical_id(consumer.log_group)}
    assert bare.props(consumer.log_group)["RetentionInDays"] == 14


def test_mapping_reports_partial_batch_failures_after_the_role_may_poll(bare):
    _, mapping = bare.one("AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == 10
    assert props["MaximumBatchingWindowInSeconds"] == 0
    assert props["EventSourceArn"] == {"Fn::GetAtt": [bare.logical_id(bare.consumer.queue), "Arn"]}
    policy_id, _ = bare.one("AWS::IAM::Policy")
    assert policy_id in mapping["DependsOn"]


# --- IAM ----------------------------------------------------------------------------------
def actions_by_resource(synth) -> dict[str, list[str]]:
    _, policy = synth.one("AWS::IAM::Policy")
    found: dict[str, list[str]] = {}
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        resource = statement["Resource"]
        key = "*" if resource == "*" else resource["Fn::GetAtt"][0]
        assert key not in found, f"two statements for {key}"
        found[key] = sorted([actions] if isinstance(actions, str) else actions)
    return found


def test_role_may_do_exactly_what_the_protocol_needs_on_each_resource(bare):
    consumer = bare.consumer
    assert actions_by_resource(bare) == {
        # It writes with UpdateItem only; GetItem: a staged copy refused reads its record once.
        bare.logical_id(consumer.table): ["dynamodb:GetItem", "dynamodb:UpdateItem"],
        bare.logical_id(consumer.queue): [
            "sqs:ChangeMessageVisibility",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:ReceiveMessage",
        ],
        bare.logical_id(consumer.dlq): ["sqs:SendMessage"],
        bare.logical_id(consumer.log_group): sorted(permissions.LOG_GROUP_ACTIONS),
        "*": sorted(permissions.XRAY_ACTIONS),
    }
    role = bare.props(consumer.role)
    assert "ManagedPolicyArns" not in role
    assert len(bare.resources("AWS::IAM::Role")) == 1


# --- alarms and dashboard -----------------------------------------------------------------
def alarms(synth) -> dict[str, dict]:
    return {a["Properties"]["AlarmName"]: a["Properties"]
            for a in synth.resources("AWS::CloudWatch::Alarm").values()}  # fmt: skip


def test_every_alarm_has_a_stable_name_built_from_the_stack_name(bare):
    assert sorted(alarms(bare)) == sorted(
        f"Bare-Orders-{signal}"
        for signal in ("DlqDepth", "OldestMessageAge", "FunctionErrors", "FunctionThrottles",
                       "FailedRecords", "LeaseLost", "Conflict", "LeaseExpired",
                       "InternalError")
    )  # fmt: skip


def test_every_alarm_notifies_the_encrypted_topic_and_ignores_missing_data(bare):
    topic_id = bare.logical_id(bare.consumer.alarm_topic)
    for alarm in alarms(bare).values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmDescription"]
    key_id, _ = bare.one("AWS::KMS::Key")
    assert bare.props(bare.consumer.alarm_topic)["KmsMasterKeyId"] == {
        "Fn::GetAtt": [key_id, "Arn"]
    }
    assert bare.resources("AWS::SNS::Subscription") == {}


@pytest.mark.parametrize(
    ("alarm", "metric"),
    [("LeaseLost", c.METRIC_LEASE_LOST), ("Conflict", c.METRIC_CONFLICT),
     ("LeaseExpired", c.METRIC_LEASE_EXPIRED), ("InternalError", c.METRIC_INTERNAL_ERROR)],
)  # fmt: skip
def test_protocol_alarms_fire_on_one_event_of_the_service_metric(bare, alarm, metric):
    props = alarms(bare)[f"Bare-Orders-{alarm}"]
    assert (props["Namespace"], props["MetricName"]) == (c.DEFAULT_METRICS_NAMESPACE, metric)
    assert props["Dimensions"] == [{"Name": "service", "Value": "orders"}]
    assert (props["Statistic"], props["Threshold"], props["EvaluationPeriods"]) == ("Sum", 0, 1)


def test_one_message_in_the_dlq_raises_an_alarm(bare):
    props = alarms(bare)["Bare-Orders-DlqDepth"]
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert props["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [bare.logical_id(bare.consumer.dlq),
                                                       "QueueName"]}}
    ]  # fmt: skip
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 0)


def test_oldest_message_alarm_fires_past_every_allowed_retry_and_before_expiry(bare):
    props = alarms(bare)["Bare-Orders-OldestMessageAge"]
    queue = bare.props(bare.consumer.queue)
    worst_case = queue["RedrivePolicy"]["maxReceiveCount"] * queue["VisibilityTimeout"]
    assert props["Threshold"] == worst_case < queue["MessageRetentionPeriod"]


def test_failed_records_alarm_is_a_sustained_share_not_a_single_failure(bare):
    props = alarms(bare)["Bare-Orders-FailedRecords"]
    assert props["Threshold"] == FAILED_SHARE_PERCENT
    assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == FAILED_SHARE_MINUTES > 1
    [expression] = [m for m in props["Metrics"] if "Expression" in m]
    assert expression["ReturnData"] is True
    inputs = {m["Id"]: m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m}
    names = {stat["Metric"]["MetricName"]: metric_id for metric_id, stat in inputs.items()}
    # Failed and Owed (not done, back again) over every per-record outcome the runtime
    # counts but OwedSent (a redelivery of a record counted once already), each filled with 0.
    failed, owed = names[c.METRIC_FAILED], names[c.METRIC_OWED]
    assert expression["Expression"].startswith(f"100 * (FILL({failed}, 0) + FILL({owed}, 0)) / (")
    total = expression["Expression"].split("/ ")[1]
    counted = set(METRIC_NAMES.values()) - {c.METRIC_OWED_SENT}
    assert set(names) == counted
    for name in counted:
        assert f"FILL({names[name]}, 0)" in total
    # CloudWatch refuses a metric-math alarm that reads more than 10 metrics.
    assert len(inputs) <= 10
    for stat in inputs.values():
        assert stat["Metric"]["Dimensions"] == [{"Name": "service", "Value": "orders"}]
        assert (stat["Stat"], stat["Period"]) == ("Sum", 60)


def test_dashboard_has_a_stable_name_and_shows_every_alarm(bare):
    _, dashboard = bare.one("AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "Bare-Orders"
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for alarm_id in bare.resources("AWS::CloudWatch::Alarm"):
        assert alarm_id in body, alarm_id


def test_the_template_asserts_as_one_consumer(bare):
    template = bare.assertions
    template.resource_count_is("AWS::SQS::Queue", 2)
    template.resource_count_is("AWS::Lambda::Function", 1)
    template.resource_count_is("AWS::Lambda::EventSourceMapping", 1)
    template.resource_count_is("AWS::CloudWatch::Alarm", 9)
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"FunctionResponseTypes": ["ReportBatchItemFailures"],
         "EventSourceArn": assertions.Match.any_value()},
    )  # fmt: skip
