"""Alarms, their topic, the dashboard and the stack outputs."""

from __future__ import annotations

import json

import pytest

from infra.stack import OUTPUT_KEYS
from once import constants as c


def _alarms(synth):
    return {
        alarm["Properties"]["MetricName"]: alarm["Properties"]
        for alarm in synth.resources("AWS::CloudWatch::Alarm").values()
    }


def _function_env(synth):
    _, function = synth.one("AWS::Lambda::Function")
    return function["Properties"]["Environment"]["Variables"]


def test_six_alarms_watch_dlq_age_errors_throttles_lease_lost_and_conflict(synth):
    assert sorted(_alarms(synth)) == sorted([
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "Errors",
        "Throttles",
        c.METRIC_LEASE_LOST,
        c.METRIC_CONFLICT,
    ])  # fmt: skip


def test_every_alarm_notifies_the_alarm_topic_and_ignores_missing_data(synth):
    topic_id, _ = synth.one("AWS::SNS::Topic")
    for alarm in _alarms(synth).values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmDescription"]


def test_a_single_message_in_the_dlq_raises_the_alarm(synth):
    alarm = _alarms(synth)["ApproximateNumberOfMessagesVisible"]
    dlq_id = synth.logical_id(synth.stack.queues.dlq)
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}
    ]
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0
    assert alarm["EvaluationPeriods"] == 1


def test_oldest_message_alarm_fires_only_past_every_allowed_retry(synth):
    alarm = _alarms(synth)["ApproximateAgeOfOldestMessage"]
    source_id = synth.logical_id(synth.stack.queues.source)
    source = synth.template["Resources"][source_id]["Properties"]
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [source_id, "QueueName"]}}
    ]
    retries = source["RedrivePolicy"]["maxReceiveCount"] * source["VisibilityTimeout"]
    assert alarm["Threshold"] == retries
    assert alarm["Threshold"] < source["MessageRetentionPeriod"]


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_any_function_error_or_throttle_raises_an_alarm(synth, metric):
    alarm = _alarms(synth)[metric]
    function_id = synth.logical_id(synth.stack.consumer.function)
    assert alarm["Namespace"] == "AWS/Lambda"
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 0


@pytest.mark.parametrize("metric", [c.METRIC_LEASE_LOST, c.METRIC_CONFLICT])
def test_protocol_alarms_read_the_metrics_the_function_emits(synth, metric):
    alarm = _alarms(synth)[metric]
    env = _function_env(synth)
    assert alarm["Namespace"] == env[c.ENV_METRICS_NAMESPACE]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env[c.ENV_SERVICE_NAME]}]
    assert alarm["Statistic"] == "Sum"
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0


def test_alarm_topic_is_encrypted_with_a_rotated_key_cloudwatch_may_use(synth):
    _, topic = synth.one("AWS::SNS::Topic")
    key_id, key = synth.one("AWS::KMS::Key")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    cloudwatch = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert len(cloudwatch) == 1
    assert sorted(cloudwatch[0]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]


def test_alarm_topic_refuses_publishing_without_tls(synth):
    topic_id, _ = synth.one("AWS::SNS::Topic")
    _, policy = synth.one("AWS::SNS::TopicPolicy")
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert statement["Resource"] == {"Ref": topic_id}


def test_alarm_email_from_context_subscribes_to_the_topic(prod):
    topic_id, _ = prod.one("AWS::SNS::Topic")
    _, subscription = prod.one("AWS::SNS::Subscription")
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"
    assert subscription["Properties"]["TopicArn"] == {"Ref": topic_id}


def test_without_alarm_email_there_is_no_subscription(dev):
    assert dev.resources("AWS::SNS::Subscription") == {}


def test_dashboard_shows_the_same_signals_as_the_alarms(synth):
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in _alarms(synth):
        assert f'\\"{metric}\\"' in body, metric
    for alarm_id in synth.resources("AWS::CloudWatch::Alarm"):
        assert alarm_id in body, f"alarm {alarm_id} is not on the dashboard"


def test_outputs_carry_the_names_the_cli_reads(synth):
    outputs = synth.template["Outputs"]
    stack = synth.stack
    assert (
        set(outputs)
        == set(OUTPUT_KEYS)
        == {
            "QueueUrl",
            "DlqUrl",
            "IdempotencyTableName",
            "LedgerTableName",
            "FunctionName",
            "DashboardUrl",
        }
    )
    assert outputs["QueueUrl"]["Value"] == {"Ref": synth.logical_id(stack.queues.source)}
    assert outputs["DlqUrl"]["Value"] == {"Ref": synth.logical_id(stack.queues.dlq)}
    assert outputs["IdempotencyTableName"]["Value"] == {
        "Ref": synth.logical_id(stack.tables.idempotency)
    }
    assert outputs["LedgerTableName"]["Value"] == {"Ref": synth.logical_id(stack.tables.ledger)}
    assert outputs["FunctionName"]["Value"] == {"Ref": synth.logical_id(stack.consumer.function)}
    dashboard_url = json.dumps(outputs["DashboardUrl"]["Value"])
    assert "console.aws.amazon.com/cloudwatch" in dashboard_url
    assert synth.logical_id(stack.monitoring.dashboard) in dashboard_url
