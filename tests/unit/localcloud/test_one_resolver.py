"""The local cloud has one resolver of CloudFormation's functions (``oncecli.localcloud.resolve``).

A role's grants (``roles``), an SNS subscription's properties (``subscriptions``) and an
alarm's (``alarms``) read the same template expression to the same value; what cannot be
resolved follows the one policy each caller chose (a role names it and its grant matches
nothing; a subscription or an alarm raises, and is named as not created). And no other
module of the local cloud evaluates ``Fn::`` functions or spells the pseudo parameters.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from oncecli.localcloud import alarms, resolve, roles, subscriptions
from oncecli.localcloud.template import AlarmResource, Subscription

LOCALCLOUD = Path(__file__).resolve().parents[3] / "oncecli" / "localcloud"
QUEUE_URL = "http://localhost:5000/123456789012/Shop-Orders-ABC"
TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:Shop-Placed-XYZ"
PHYSICAL = {"Queue": QUEUE_URL, "Topic": TOPIC_ARN, "Fn": "Shop-Fn-1", "Role": "Shop-Role-1"}
EXPORTS = {"Shared:Bus": "orders"}

#: Expressions, each of every function the resolver evaluates, and their value.
EXPRESSIONS: list[tuple[Any, str]] = [
    ({"Ref": "Topic"}, TOPIC_ARN),
    ({"Fn::GetAtt": ["Queue", "Arn"]}, "arn:aws:sqs:us-east-1:123456789012:Shop-Orders-ABC"),
    ({"Fn::GetAtt": "Queue.QueueName"}, "Shop-Orders-ABC"),
    ({"Fn::GetAtt": ["Topic", "TopicName"]}, "Shop-Placed-XYZ"),
    (
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":x:", {"Ref": "AWS::Region"}]]},
        "arn:aws:x:us-east-1",
    ),
    (
        {"Fn::Sub": "${Queue.Arn}/${AWS::AccountId}"},
        "arn:aws:sqs:us-east-1:123456789012:Shop-Orders-ABC/123456789012",
    ),
    ({"Fn::Sub": ["${Name}-${!Literal}", {"Name": {"Ref": "Topic"}}]}, f"{TOPIC_ARN}-${{Literal}}"),
    ({"Fn::Select": [1, {"Fn::Split": [":", {"Ref": "Topic"}]}]}, "aws"),
    ({"Fn::ImportValue": "Shared:Bus"}, "orders"),
]
UNRESOLVABLE: list[Any] = [
    {"Ref": "Missing"},
    {"Fn::GetAtt": ["Topic", "Nonsense"]},
    {"Fn::If": ["Cond", "a", "b"]},
    {"Fn::ImportValue": "Nobody:Exports"},
]


def _template(resource: Any = "*") -> dict[str, Any]:
    return {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Topic": {"Type": "AWS::SNS::Topic"},
            "Fn": {"Type": "AWS::Lambda::Function",
                   "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"Policies": [{
                "PolicyName": "p",
                "PolicyDocument": {"Statement": [
                    {"Effect": "Allow", "Action": "sns:Publish", "Resource": resource}
                ]},
            }]}},
        }
    }  # fmt: skip


class _Cfn:
    def describe_stack_resources(self, StackName: str) -> dict[str, Any]:
        listed = [{"LogicalResourceId": k, "PhysicalResourceId": v} for k, v in PHYSICAL.items()]
        return {"StackResources": listed}

    def get_paginator(self, name: str) -> Any:
        exports = [{"Name": k, "Value": v} for k, v in EXPORTS.items()]
        return type("P", (), {"paginate": lambda self: [{"Exports": exports}]})()


class _Sqs:
    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        name = QueueUrl.rsplit("/", 1)[-1]
        return {"Attributes": {"QueueArn": f"arn:aws:sqs:us-east-1:123456789012:{name}"}}


class _Sns:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def subscribe(self, **request: Any) -> dict[str, str]:
        self.calls.append(request)
        return {"SubscriptionArn": "arn:aws:sns:us-east-1:123456789012:Placed:1"}


class _CloudWatch:
    def __init__(self) -> None:
        self.alarms: list[dict[str, Any]] = []

    def put_metric_alarm(self, **request: Any) -> None:
        self.alarms.append(request)

    def set_alarm_state(self, **_: Any) -> None:
        pass


def _by_role(expression: Any) -> tuple[str, tuple[str, ...]]:
    policy = roles.role_from_template(_template(expression), "Fn", PHYSICAL, exports=EXPORTS)
    (document,) = policy.documents
    return json.loads(document)["Statement"][0]["Resource"], policy.notes


def _by_subscription(expression: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    sns = _Sns()
    _, left_out = subscriptions.create(
        "Shop",
        [
            Subscription(
                "Sub", {"Protocol": "sqs", "TopicArn": {"Ref": "Topic"}, "Endpoint": expression}
            )
        ],
        resolve.deployed("Shop", _template(), _Cfn(), _Sqs(), unresolved=resolve.RAISE),
        sns,
    )
    return sns.calls, left_out


def _by_alarm(expression: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    cloudwatch = _CloudWatch()
    properties = {
        "Namespace": "Once", "MetricName": "Conflict", "Statistic": "Sum", "Period": 60,
        "EvaluationPeriods": 1, "Threshold": 0, "ComparisonOperator": "GreaterThanThreshold",
        "Dimensions": [{"Name": "service", "Value": expression}],
    }  # fmt: skip
    resolver = resolve.deployed("Shop", _template(), _Cfn(), _Sqs(), unresolved=resolve.RAISE)
    created = alarms.create("Shop", [AlarmResource("Alarm", properties)], resolver, cloudwatch)
    return cloudwatch.alarms, created.left_out


@pytest.mark.parametrize(("expression", "value"), EXPRESSIONS)
def test_roles_subscriptions_and_alarms_resolve_an_expression_alike(
    expression: Any, value: str
) -> None:
    resource, notes = _by_role(expression)
    (subscribed,), _ = _by_subscription(expression)
    (alarm,), _ = _by_alarm(expression)
    assert (resource, notes) == (value, ())
    assert subscribed["Endpoint"] == value
    assert alarm["Dimensions"] == [{"Name": "service", "Value": value}]


@pytest.mark.parametrize("expression", UNRESOLVABLE)
def test_what_cannot_be_resolved_follows_each_caller_s_one_policy(expression: Any) -> None:
    with pytest.raises(resolve.Unresolvable) as raised:
        resolve.Resolver(_template(), PHYSICAL, exports=EXPORTS, unresolved=resolve.RAISE).resolve(
            expression
        )
    with pytest.raises(resolve.Unresolvable) as in_shop:  # a deployed stack's: named
        resolve.deployed("Shop", _template(), _Cfn(), _Sqs(), unresolved=resolve.RAISE).resolve(
            expression
        )
    named = resolve.Resolver(_template(), PHYSICAL, exports=EXPORTS, unresolved=resolve.NAME)
    assert named.resolve(expression).startswith(resolve.PLACEHOLDER + ":")
    assert named.notes == [f"{raised.value}: matches nothing"]
    # A role names it, and its grant matches nothing; the role stands.
    resource, notes = _by_role(expression)
    assert resource.startswith(resolve.PLACEHOLDER + ":")
    assert notes == (f"{raised.value}: matches nothing",)
    # A subscription or an alarm is not created, and named with the same reason.
    calls, left_out = _by_subscription(expression)
    assert not calls and str(in_shop.value) in left_out[0].why
    put, refused = _by_alarm(expression)
    assert not put and str(in_shop.value) in refused[0].why


#: Spelled only where CloudFormation's functions are evaluated.
_RESOLVER_ONLY = {
    "Fn::Join", "Fn::Sub", "Fn::Select", "Fn::Split", "Fn::ImportValue", "Fn::If",
    "AWS::AccountId", "AWS::Region", "AWS::Partition", "AWS::URLSuffix", "AWS::NoValue",
    "AWS::StackName",
}  # fmt: skip


def test_no_other_module_of_the_local_cloud_resolves() -> None:
    offenders: list[str] = []
    for path in sorted(LOCALCLOUD.rglob("*.py")):
        if path.name == "resolve.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text in _RESOLVER_ONLY or any(f"${{{p}}}" in text for p in _RESOLVER_ONLY):
                    offenders.append(f"{path.name}:{node.lineno}: {text!r}")
            if isinstance(node, ast.ClassDef) and "resolver" in node.name.lower():
                offenders.append(f"{path.name}:{node.lineno}: class {node.name}")
    assert not offenders, offenders


def test_each_caller_gets_the_one_resolver() -> None:
    made = resolve.deployed("Shop", _template(), _Cfn(), _Sqs(), unresolved=resolve.RAISE)
    assert type(made) is resolve.Resolver and made.unresolved is resolve.RAISE
