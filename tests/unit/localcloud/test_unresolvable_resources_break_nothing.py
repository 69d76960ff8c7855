"""A resource the local cloud cannot resolve breaks nothing else: moto deploys some types
without a physical id (``AWS::Events::EventBus`` did, ``AWS::Lambda::Version`` still does),
and that must cost only what refers to it, never a stack's alarms or a function's role.

Before: one resource without a ``PhysicalResourceId`` made every alarm of the stack
"cannot resolve its properties ('PhysicalResourceId')", and a role statement on a bus's
``Arn`` crashed every worker of the function (an ``IndexError`` reading a queue's URL out
of the bus's empty id). And PutEvents is judged on each entry's bus ARN.
"""

from __future__ import annotations

from typing import Any

from oncecli.localcloud import resolve, roles

BUS_ARN = "arn:aws:events:us-east-1:123456789012:event-bus/"


class _Stack:
    """``describe_stack_resources`` as moto answers it: a resource deployed without a
    physical id has no ``PhysicalResourceId``."""

    def describe_stack_resources(self, StackName: str) -> dict[str, Any]:
        return {
            "StackResources": [
                {"LogicalResourceId": "Topic", "PhysicalResourceId": "arn:aws:sns:r:1:Alarms"},
                {"LogicalResourceId": "Version"},
            ]
        }


def test_a_resource_without_a_physical_id_leaves_the_rest_resolvable() -> None:
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"},
                              "Version": {"Type": "AWS::Lambda::Version"}}}  # fmt: skip
    resolver = resolve.deployed("Shop", template, _Stack(), sqs=None, unresolved=resolve.RAISE)
    assert resolver.resolve({"Ref": "Topic"}) == "arn:aws:sns:r:1:Alarms"
    try:
        resolver.resolve({"Ref": "Version"})
    except resolve.Unresolvable as error:
        assert "Version" in str(error)
    else:
        raise AssertionError("a resource without a physical id resolved")


def _template(resource: str) -> dict[str, Any]:
    return {
        "Resources": {
            "Fn": {"Type": "AWS::Lambda::Function",
                   "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Bus": {"Type": "AWS::Events::EventBus"},
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "Role"}],
                    "PolicyDocument": {"Statement": [{
                        "Effect": "Allow", "Action": "events:PutEvents",
                        "Resource": {"Fn::GetAtt": [resource, "Arn"]},
                    }]},
                },
            },
        }
    }  # fmt: skip


def test_a_grant_on_a_bus_s_arn_is_judged_on_the_bus() -> None:
    policy = roles.role_from_template(
        _template("Bus"), "Fn", {"Fn": "shop-fn", "Role": "shop-role", "Bus": "orders"}
    )
    assert policy.allows("events:PutEvents", BUS_ARN + "orders")
    assert not policy.allows("events:PutEvents", BUS_ARN + "default")


def test_a_grant_on_a_resource_without_a_physical_id_matches_nothing_and_is_noted() -> None:
    policy = roles.role_from_template(
        _template("Bus"), "Fn", {"Fn": "shop-fn", "Role": "shop-role", "Bus": ""}
    )
    assert not policy.allows("events:PutEvents", BUS_ARN + "orders")
    assert any("Bus.Arn not resolved" in note for note in policy.notes), policy.notes


def test_put_events_needs_put_events_on_each_entry_s_bus() -> None:
    entries = [{"EventBusName": "orders"}, {"EventBusName": BUS_ARN + "audit"}, {}]
    assert roles.checks("events", "PutEvents", {"Entries": entries}) == [
        roles.Check("events:PutEvents", BUS_ARN + "orders"),
        roles.Check("events:PutEvents", BUS_ARN + "audit"),
        roles.Check("events:PutEvents", BUS_ARN + "default"),  # EventBusName left out
    ]
