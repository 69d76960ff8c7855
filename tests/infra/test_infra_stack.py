"""The example stack: an OnceConsumer for the payments handler, the ledger, the
notifications queue, the grants between them, and the outputs the CLI and the docs read."""

from __future__ import annotations

import json

from infra.ledger import LEDGER_TABLE_ACTIONS
from infra.notifications import MAX_RECEIVE_COUNT, NOTIFICATIONS_QUEUE_ACTIONS
from infra.stack import HANDLER, KEPT_LOGICAL_IDS, OUTPUT_KEYS
from once import constants as c
from once_cdk import permissions
from payments import ENV_LEDGER_TABLE_NAME, ENV_NOTIFICATIONS_QUEUE_URL, SERVICE_NAME


def test_the_consumer_runs_the_payments_handler_with_the_ledger_and_queue_named(synth):
    props = synth.props(synth.consumer.function)
    assert props["Handler"] == HANDLER == "payments.handler.lambda_handler"
    env = props["Environment"]["Variables"]
    assert env[ENV_LEDGER_TABLE_NAME] == {"Ref": synth.logical_id(synth.stack.ledger)}
    notifications = synth.logical_id(synth.stack.notifications.queue)
    assert env[ENV_NOTIFICATIONS_QUEUE_URL] == {"Ref": notifications}
    assert env[c.ENV_SERVICE_NAME] == SERVICE_NAME == "payments"
    assert env[c.ENV_TABLE_NAME] == {"Ref": synth.logical_id(synth.consumer.table)}


def test_the_asset_ships_the_example_beside_the_runtime(dev):
    asset = dev.asset_dir()
    assert (asset / "payments" / "handler.py").is_file()
    assert (asset / "payments" / "ledger.py").is_file()
    assert (asset / "once" / "processor.py").is_file()


def test_the_role_adds_exactly_the_ledger_and_notification_actions_to_the_consumers(synth):
    _, policy = synth.one("AWS::IAM::Policy")
    found = {}
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        resource = statement["Resource"]
        key = "*" if resource == "*" else resource["Fn::GetAtt"][0]
        actions = statement["Action"]
        found[key] = sorted([actions] if isinstance(actions, str) else actions)
    consumer = synth.consumer
    assert found == {
        synth.logical_id(synth.stack.ledger): sorted(LEDGER_TABLE_ACTIONS),
        synth.logical_id(synth.stack.notifications.queue): sorted(NOTIFICATIONS_QUEUE_ACTIONS),
        synth.logical_id(consumer.table): sorted(permissions.IDEMPOTENCY_TABLE_ACTIONS),
        synth.logical_id(consumer.queue): sorted(permissions.SOURCE_QUEUE_ACTIONS),
        synth.logical_id(consumer.dlq): sorted(permissions.DLQ_ACTIONS),
        synth.logical_id(consumer.log_group): sorted(permissions.LOG_GROUP_ACTIONS),
        "*": sorted(permissions.XRAY_ACTIONS),
    }
    for actions in found.values():
        assert not [a for a in actions if "Delete" in a and a.startswith("dynamodb")]
    # once commits the ledger's writes; nothing in the function reads the ledger.
    assert "dynamodb:GetItem" not in found[synth.logical_id(synth.stack.ledger)]


def test_the_notifications_queue_is_encrypted_tls_only_with_its_own_dlq(synth):
    notifications = synth.stack.notifications
    queue, dlq = synth.props(notifications.queue), synth.props(notifications.dlq)
    for props in (queue, dlq):
        assert props["SqsManagedSseEnabled"] is True
        assert "FifoQueue" not in props  # standard in every variant: no order to keep
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [synth.logical_id(notifications.dlq), "Arn"]},
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    }
    assert queue["MessageRetentionPeriod"] < dlq["MessageRetentionPeriod"]
    tls_only = {}
    for _, policy in synth.resources("AWS::SQS::QueuePolicy").items():
        [target] = policy["Properties"]["Queues"]
        [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
        tls_only[target["Ref"]] = (statement["Effect"], statement["Condition"])
    for construct in (notifications.queue, notifications.dlq):
        assert tls_only[synth.logical_id(construct)] == (
            "Deny",
            {"Bool": {"aws:SecureTransport": "false"}},
        )


def test_ledger_entries_never_expire_and_are_kept_like_the_records(synth):
    ledger = synth.template["Resources"][synth.logical_id(synth.stack.ledger)]
    props = ledger["Properties"]
    assert "TimeToLiveSpecification" not in props
    assert props["KeySchema"] == [{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    records = synth.template["Resources"][synth.logical_id(synth.consumer.table)]
    assert ledger["DeletionPolicy"] == records["DeletionPolicy"]
    assert synth.resources("AWS::DynamoDB::GlobalTable") == {}


def test_outputs_carry_the_names_the_cli_reads(synth):
    outputs = synth.template["Outputs"]
    consumer = synth.consumer
    assert set(outputs) == set(OUTPUT_KEYS) == {
        "QueueUrl", "DlqUrl", "IdempotencyTableName", "LedgerTableName", "FunctionName",
        "DashboardUrl", "ServiceName", "NotificationsQueueUrl",
    }  # fmt: skip
    assert outputs["QueueUrl"]["Value"] == {"Ref": synth.logical_id(consumer.queue)}
    assert outputs["DlqUrl"]["Value"] == {"Ref": synth.logical_id(consumer.dlq)}
    assert outputs["IdempotencyTableName"]["Value"] == {"Ref": synth.logical_id(consumer.table)}
    assert outputs["LedgerTableName"]["Value"] == {"Ref": synth.logical_id(synth.stack.ledger)}
    assert outputs["NotificationsQueueUrl"]["Value"] == {
        "Ref": synth.logical_id(synth.stack.notifications.queue)
    }
    assert outputs["FunctionName"]["Value"] == {"Ref": synth.logical_id(consumer.function)}
    assert outputs["ServiceName"]["Value"] == consumer.settings.service_name == "payments"
    dashboard_url = json.dumps(outputs["DashboardUrl"]["Value"])
    assert "console.aws.amazon.com/cloudwatch" in dashboard_url
    assert synth.logical_id(consumer.dashboard) in dashboard_url
    assert synth.props(consumer.dashboard)["DashboardName"] == f"{synth.stack.stack_name}-Payments"


def test_alarms_are_named_after_the_stack(synth):
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    names = {alarm["Properties"]["AlarmName"] for alarm in alarms}
    assert f"{synth.stack.stack_name}-Payments-DlqDepth" in names
    assert f"{synth.stack.stack_name}-Payments-FailedRecords" in names
    assert len(names) == 9


def test_alarm_email_from_context_subscribes_to_the_topic(prod, dev):
    _, subscription = prod.one("AWS::SNS::Subscription")
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"
    assert subscription["Properties"]["TopicArn"] == {
        "Ref": prod.logical_id(prod.consumer.alarm_topic)
    }
    assert dev.resources("AWS::SNS::Subscription") == {}


def test_stateful_resources_keep_the_logical_ids_of_the_first_deployment(synth):
    # A deployed stack updates in place: same tables (and records), same queues.
    resources = synth.template["Resources"]
    for attribute, kept in KEPT_LOGICAL_IDS.items():
        assert synth.logical_id(getattr(synth.consumer, attribute)) == kept
        assert kept in resources
    assert synth.logical_id(synth.stack.ledger) == "TablesLedgerF9806C8B"
