"""``OnceConsumer(..., snap_start=True)``: Lambda SnapStart on a published version that an
alias ``live`` points at, the event source mapping invoking the alias.

Off by default, the template holds no SnapStart, no version and no alias (the snapshots hold
the rest). On, it adds those three and moves the mapping to the alias; everything else (the
role and its statements, the alarms on the function's metrics) is the default template,
byte for byte. The stack with it on is synthesized once for the module, with cdk-nag, and
has the same name and code as the bare standard consumer, so the two compare as a whole.
"""

from __future__ import annotations

import copy
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_lambda as lambda_

from infra.app import add_compliance_checks
from once_cdk import ConfigurationError, OnceConsumer
from once_cdk import consumer as consumer_module
from once_cdk.consumer import snap_start_problem
from tests.infra.conftest import BARE_STACK, Synth, code_dir
from tests.infra.test_infra_snapshot import masked

FUNCTION = "AWS::Lambda::Function"
VERSION = "AWS::Lambda::Version"
ALIAS = "AWS::Lambda::Alias"
MAPPING = "AWS::Lambda::EventSourceMapping"
ALARM = "AWS::CloudWatch::Alarm"
HANDLER = "orders.handler.lambda_handler"


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The bare standard consumer with snap_start=True, cdk-nag on."""
    root = tmp_path_factory.mktemp("bare-snapstart")
    app = cdk.App(outdir=str(root / "cdk.out"))
    stack = cdk.Stack(app, BARE_STACK)
    consumer = OnceConsumer(stack, "Orders", code_dir=code_dir(root), handler=HANDLER,
                            service_name="orders", snap_start=True)  # fmt: skip
    add_compliance_checks(app)
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    template = assembly.get_stack_by_name(stack.stack_name).template
    return Synth("bare-snapstart", stack, consumer, template, Path(app.outdir))


def _code(root: Path) -> Path:
    (root / "orders").mkdir()
    (root / "orders" / "handler.py").write_text("lambda_handler = None\n")
    return root


# --- off -----------------------------------------------------------------------------------
def test_off_by_default_leaves_no_snapstart_version_or_alias(bare_standard):
    template = bare_standard.assertions
    template.has_resource_properties(FUNCTION, {"SnapStart": assertions.Match.absent()})
    template.resource_count_is(VERSION, 0)
    template.resource_count_is(ALIAS, 0)
    function_id = bare_standard.logical_id(bare_standard.consumer.function)
    template.has_resource_properties(MAPPING, {"FunctionName": {"Ref": function_id}})
    assert bare_standard.consumer.alias is None


# --- on ------------------------------------------------------------------------------------
def test_on_sets_snapstart_on_published_versions(snap):
    snap.assertions.has_resource_properties(
        FUNCTION, {"SnapStart": {"ApplyOn": "PublishedVersions"}}
    )


def test_on_publishes_one_version_and_one_live_alias_of_it(snap):
    template = snap.assertions
    template.resource_count_is(VERSION, 1)
    template.resource_count_is(ALIAS, 1)
    function_id = snap.logical_id(snap.consumer.function)
    version_id, _ = snap.one(VERSION)
    template.has_resource_properties(VERSION, {"FunctionName": {"Ref": function_id}})
    template.has_resource_properties(
        ALIAS,
        {
            "Name": "live",
            "FunctionName": {"Ref": function_id},
            "FunctionVersion": {"Fn::GetAtt": [version_id, "Version"]},
        },
    )
    assert snap.consumer.alias is not None
    assert snap.logical_id(snap.consumer.alias) == snap.one(ALIAS)[0]


def test_on_the_mapping_invokes_the_alias_not_latest(snap):
    alias_id, _ = snap.one(ALIAS)
    _, mapping = snap.one(MAPPING)
    function_name = mapping["Properties"]["FunctionName"]
    # The alias's qualified name, <function name>:live, taken from the alias's ARN.
    assert {"Ref": alias_id} in _references(function_name)
    assert function_name["Fn::Join"][1][-1] == ":live"
    assert {"Ref": snap.logical_id(snap.consumer.function)} not in _references(function_name)


def test_on_changes_only_the_function_version_alias_and_mapping_target(snap, bare_standard):
    """The role, its statements, the queues, the table and the alarms are the default
    consumer's, byte for byte but for asset hashes (same stack name, same code; the hashes
    are masked so that a runtime edited between the two synths does not fail this)."""
    template = copy.deepcopy(snap.template)
    resources = template["Resources"]
    for logical_id in [*snap.resources(VERSION), *snap.resources(ALIAS)]:
        del resources[logical_id]
    function_id = snap.logical_id(snap.consumer.function)
    del resources[function_id]["Properties"]["SnapStart"]
    mapping_id, _ = snap.one(MAPPING)
    resources[mapping_id]["Properties"]["FunctionName"] = {"Ref": function_id}
    assert masked(template) == masked(bare_standard.template)


def test_on_the_function_alarms_still_read_every_invocation_of_the_function(snap):
    """Lambda's metrics by FunctionName alone add up all versions and aliases: the alias's
    invocations count in FunctionErrors and FunctionThrottles."""
    function_id = snap.logical_id(snap.consumer.function)
    for name in ("FunctionErrors", "FunctionThrottles"):
        alarm = snap.props(snap.consumer.alarms[name])
        assert alarm["Namespace"] == "AWS/Lambda"
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]


def test_on_cdk_nag_finds_nothing_new_and_cfn_lint_passes(snap, cfn_lint):
    for plugin in snap.validation_report()["pluginReports"]:
        assert plugin["violations"] == [], plugin["violations"]
        assert plugin["conclusion"] == "success"
    assert snap.acknowledged_findings() == snap.construct_acknowledgments()
    cfn_lint([snap.template_path])


# --- refused -------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_snap_start_takes_a_bool(tmp_path, value):
    stack = cdk.Stack(cdk.App(), "Refused")
    with pytest.raises(ConfigurationError, match=r"snap_start=.*: pass True") as refused:
        OnceConsumer(stack, "Orders", code_dir=_code(tmp_path), handler=HANDLER,
                     service_name="orders", snap_start=value)  # fmt: skip
    assert repr(value) in str(refused.value)
    assert stack.node.children == []


def test_a_runtime_older_than_python_3_12_refuses_snap_start(tmp_path, monkeypatch):
    monkeypatch.setattr(consumer_module, "RUNTIME", lambda_.Runtime.PYTHON_3_11)
    stack = cdk.Stack(cdk.App(), "Refused")
    with pytest.raises(ConfigurationError) as refused:
        OnceConsumer(stack, "Orders", code_dir=_code(tmp_path), handler=HANDLER,
                     service_name="orders", snap_start=True)  # fmt: skip
    message = str(refused.value)
    assert "needs the python3.12 runtime or later" in message
    assert "runs on python3.11" in message
    assert stack.node.children == []  # no half-built consumer left behind


@pytest.mark.parametrize(
    ("runtime", "refused"),
    [(lambda_.Runtime.PYTHON_3_9, True), (lambda_.Runtime.PYTHON_3_11, True),
     (lambda_.Runtime.PYTHON_3_12, False), (lambda_.Runtime.PYTHON_3_13, False),
     (lambda_.Runtime.NODEJS_20_X, True)],
)  # fmt: skip
def test_snap_start_needs_python_3_12_or_later(runtime, refused):
    assert (snap_start_problem(True, runtime) is not None) is refused
    assert snap_start_problem(False, runtime) is None  # off, any runtime will do


def test_the_shipped_runtime_supports_snap_start():
    assert snap_start_problem(True, consumer_module.RUNTIME) is None


def _references(value: object) -> list[dict]:
    """Every {"Ref": ...} inside a CloudFormation value."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return [value]
        return [ref for item in value.values() for ref in _references(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _references(item)]
    return []
