"""cdk-nag (AwsSolutions and Serverless packs) and cfn-lint on every variant of the example.

The example adds the ledger, the notifications queue and their grants to an OnceConsumer:
it must add no finding, so the acknowledgments are exactly the construct's own and the one
every DLQ takes (the notifications DLQ has no DLQ of its own).
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs

from infra.app import add_compliance_checks

#: Only with an alarm e-mail subscription.
EMAIL_ACKNOWLEDGMENT = (
    "Serverless-SNSRedrivePolicy",
    "Payments/Monitoring/AlarmTopic/oncall@example.com/Resource",
)

#: The example's own: its notifications DLQ is the end of the line, like the consumer's.
EXAMPLE_ACKNOWLEDGMENTS = {("Serverless-SQSRedrivePolicy", "Notifications/Dlq/Resource")}


def test_cdk_nag_reports_no_unacknowledged_finding(synth):
    report = synth.validation_report()
    plugins = {plugin["pluginName"]: plugin for plugin in report["pluginReports"]}
    assert set(plugins) == {"AwsSolutions", "Serverless"}
    for plugin in plugins.values():
        assert plugin["violations"] == [], plugin["violations"]
        assert plugin["conclusion"] == "success"


def test_the_only_acknowledged_findings_are_the_constructs_and_the_notification_dlqs(synth):
    expected = synth.construct_acknowledgments() | EXAMPLE_ACKNOWLEDGMENTS
    if synth.stack.settings.alarm_email:
        expected.add(EMAIL_ACKNOWLEDGMENT)
    assert synth.acknowledged_findings() == expected


def test_an_unacknowledged_finding_stops_synthesis(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Careless")
    sqs.Queue(stack, "Plain", encryption=sqs.QueueEncryption.UNENCRYPTED)
    add_compliance_checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()


def test_cfn_lint_finds_no_error_or_warning_in_any_template(all_variants, cfn_lint):
    cfn_lint([synth.template_path for synth in all_variants])
