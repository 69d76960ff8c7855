"""cdk-nag (AwsSolutions and Serverless packs) and cfn-lint on every synthesized template."""

from __future__ import annotations

import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs

from infra.app import add_compliance_checks

#: Every acknowledged cdk-nag finding: (rule, construct path below the stack). Adding one
#: is a reviewed change: it must appear here, and its reason sits next to the resource.
EXPECTED_ACKNOWLEDGMENTS = {
    ("AwsSolutions-IAM5[Resource::*]", "Consumer/Role/DefaultPolicy/Resource"),
    ("AwsSolutions-L1", "Consumer/Function/Resource"),
    ("Serverless-LambdaLatestVersion", "Consumer/Function/Resource"),
    ("Serverless-LambdaDLQ", "Consumer/Function/Resource"),
    ("Serverless-LambdaEventSourceMappingDestination", "Consumer/Mapping/Resource"),
    ("Serverless-SQSRedrivePolicy", "Queues/Dlq/Resource"),
}
#: Only with an alarm e-mail subscription.
EMAIL_ACKNOWLEDGMENT = (
    "Serverless-SNSRedrivePolicy",
    "Monitoring/AlarmTopic/oncall@example.com/Resource",
)


def test_cdk_nag_reports_no_unacknowledged_finding(synth):
    report = synth.validation_report()
    plugins = {plugin["pluginName"]: plugin for plugin in report["pluginReports"]}
    assert set(plugins) == {"AwsSolutions", "Serverless"}
    for plugin in plugins.values():
        assert plugin["violations"] == [], plugin["violations"]
        assert plugin["conclusion"] == "success"


def test_every_acknowledged_finding_is_expected_and_gives_its_reason(synth):
    found = set()
    for plugin in synth.validation_report()["pluginReports"]:
        for suppressed in plugin.get("suppressedViolations", []):
            assert len(suppressed["reason"].split()) >= 12, suppressed["reason"]
            for construct in suppressed["violatingConstructs"]:
                path = construct["constructPath"].removeprefix(f"{synth.stack.stack_name}/")
                found.add((suppressed["ruleName"], path))
    expected = set(EXPECTED_ACKNOWLEDGMENTS)
    if synth.settings.alarm_email:
        expected.add(EMAIL_ACKNOWLEDGMENT)
    assert found == expected


def test_an_unacknowledged_finding_stops_synthesis(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Careless")
    sqs.Queue(stack, "Plain", encryption=sqs.QueueEncryption.UNENCRYPTED)
    add_compliance_checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()


#: cfn-lint's console script, run with this interpreter (cfnlint has no __main__).
CFN_LINT = "import sys; from cfnlint.runner import main; sys.argv[0] = 'cfn-lint'; sys.exit(main())"


def test_cfn_lint_finds_no_error_or_warning_in_any_template(all_stages):
    templates = [str(synth.template_path) for synth in all_stages]
    # W3005 (a DependsOn that a GetAtt already implies) is how CDK writes every function.
    result = subprocess.run(
        [sys.executable, "-c", CFN_LINT, "--ignore-checks", "W3005", "--", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
    errors, warnings = result.returncode & 2, result.returncode & 4
    assert not errors and not warnings, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
