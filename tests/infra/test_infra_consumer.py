"""The consumer function, its event source mapping and its IAM role."""

from __future__ import annotations

from infra import permissions
from infra.consumer import HANDLER
from infra.stages import MIN_MAX_CONCURRENCY
from once import constants as c


def _function(synth):
    return synth.template["Resources"][synth.logical_id(synth.stack.consumer.function)]


def test_function_runs_the_payments_handler_on_python_3_13_x86_64(synth):
    props = _function(synth)["Properties"]
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["x86_64"]
    assert props["Handler"] == HANDLER == "payments.handler.lambda_handler"


def test_function_has_explicit_timeout_memory_and_active_tracing(synth):
    props = _function(synth)["Properties"]
    assert props["Timeout"] == synth.settings.function_timeout_s
    assert props["MemorySize"] == synth.settings.memory_mb
    assert props["TracingConfig"] == {"Mode": "Active"}


def test_function_logs_to_its_own_log_group_with_a_retention(synth):
    log_group_id = synth.logical_id(synth.stack.consumer.log_group)
    props = _function(synth)["Properties"]
    assert props["LoggingConfig"]["LogGroup"] == {"Ref": log_group_id}
    retention = synth.template["Resources"][log_group_id]["Properties"]["RetentionInDays"]
    assert retention == synth.settings.log_retention_days


def test_function_environment_names_the_tables_dlq_service_and_namespace(synth):
    env = _function(synth)["Properties"]["Environment"]["Variables"]
    stack = synth.stack
    assert env == {
        c.ENV_TABLE_NAME: {"Ref": synth.logical_id(stack.tables.idempotency)},
        c.ENV_LEDGER_TABLE_NAME: {"Ref": synth.logical_id(stack.tables.ledger)},
        c.ENV_DLQ_URL: {"Ref": synth.logical_id(stack.queues.dlq)},
        c.ENV_SERVICE_NAME: c.DEFAULT_SERVICE_NAME,
        c.ENV_METRICS_NAMESPACE: c.DEFAULT_METRICS_NAMESPACE,
        c.ENV_RETENTION_S: env[c.ENV_RETENTION_S],
    }


def test_record_retention_outlives_both_queues_by_a_day(synth):
    env = _function(synth)["Properties"]["Environment"]["Variables"]
    resources = synth.template["Resources"]
    source = resources[synth.logical_id(synth.stack.queues.source)]["Properties"]
    dlq = resources[synth.logical_id(synth.stack.queues.dlq)]["Properties"]
    expected = source["MessageRetentionPeriod"] + dlq["MessageRetentionPeriod"] + c.DAY_S
    assert int(env[c.ENV_RETENTION_S]) == expected == c.DEFAULT_RETENTION_S


def test_mapping_reports_partial_batch_failures_with_bounded_concurrency(synth):
    _, mapping = synth.one("AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    settings = synth.settings
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == settings.batch_size
    assert props["MaximumBatchingWindowInSeconds"] == settings.max_batching_window_s
    assert props["ScalingConfig"]["MaximumConcurrency"] == settings.max_concurrency
    assert props["ScalingConfig"]["MaximumConcurrency"] >= MIN_MAX_CONCURRENCY
    assert props["EventSourceArn"] == {
        "Fn::GetAtt": [synth.logical_id(synth.stack.queues.source), "Arn"]
    }
    assert props["FunctionName"] == {"Ref": synth.logical_id(synth.stack.consumer.function)}


def test_mapping_is_created_after_the_role_may_read_the_queue(synth):
    _, mapping = synth.one("AWS::Lambda::EventSourceMapping")
    policy_id, _ = synth.one("AWS::IAM::Policy")
    assert policy_id in mapping["DependsOn"]


def _statements(synth):
    _, policy = synth.one("AWS::IAM::Policy")
    return policy["Properties"]["PolicyDocument"]["Statement"]


def _actions_by_resource(synth):
    found = {}
    for statement in _statements(synth):
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        resource = statement["Resource"]
        key = "*" if resource == "*" else resource["Fn::GetAtt"][0]
        assert key not in found, f"two statements for {key}"
        found[key] = sorted(actions)
    return found


def test_role_has_exactly_the_listed_actions_on_each_resource(synth):
    stack = synth.stack
    assert _actions_by_resource(synth) == {
        synth.logical_id(stack.tables.idempotency): sorted(permissions.IDEMPOTENCY_TABLE_ACTIONS),
        synth.logical_id(stack.tables.ledger): sorted(permissions.LEDGER_TABLE_ACTIONS),
        synth.logical_id(stack.queues.source): sorted(permissions.SOURCE_QUEUE_ACTIONS),
        synth.logical_id(stack.queues.dlq): sorted(permissions.DLQ_ACTIONS),
        synth.logical_id(stack.consumer.log_group): sorted(permissions.LOG_GROUP_ACTIONS),
        "*": sorted(permissions.XRAY_ACTIONS),
    }


def test_idempotency_table_actions_are_update_and_get_only(synth):
    assert sorted(permissions.IDEMPOTENCY_TABLE_ACTIONS) == [
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
    ]
    assert sorted(permissions.LEDGER_TABLE_ACTIONS) == [
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    ]
    assert permissions.DLQ_ACTIONS == ("sqs:SendMessage",)


def test_role_can_never_delete_scan_query_or_batch(synth):
    forbidden = ("DeleteItem", "Scan", "Query", "Batch", "DeleteTable", "*")
    for statement in _statements(synth):
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            service, _, name = action.partition(":")
            assert not any(word in name for word in forbidden), action
            assert service in {"dynamodb", "sqs", "logs", "xray"}, action


def test_only_xray_gets_a_wildcard_resource(synth):
    for statement in _statements(synth):
        if statement["Resource"] == "*":
            assert sorted(statement["Action"]) == sorted(permissions.XRAY_ACTIONS)


def test_role_has_no_managed_policies(synth):
    role_id = synth.logical_id(synth.stack.consumer.role)
    role = synth.template["Resources"][role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
        }
    ]
    assert len(synth.resources("AWS::IAM::Role")) == 1
