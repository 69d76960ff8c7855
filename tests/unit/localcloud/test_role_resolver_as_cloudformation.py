"""A role's grants resolve as CloudFormation resolves them: ``AWS::StackName`` among the
pseudo parameters, and ``Fn::Select`` over a value the local cloud cannot resolve stands
unresolved (named, matching nothing) while the rest of the role stands. Proved by the
adversarial review of issue 44 (the stack name was unresolved; an ``IndexError`` lost the
whole role)."""

from __future__ import annotations

import json
from typing import Any

from oncecli.localcloud.roles import deployed_role, role_from_template

ACCOUNT, REGION, STACK = "123456789012", "us-east-1", "Shop"  # the local cloud's (oncecli.aws)
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/idempotency"


def _template(resource: Any) -> dict[str, Any]:
    return {
        "Resources": {
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}},
            },
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "PolicyName": "P",
                    "Roles": [{"Ref": "Role"}],
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": "dynamodb:GetItem",
                                "Resource": {"Fn::GetAtt": ["Table", "Arn"]},
                            },
                            {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": resource},
                        ],
                    },
                },
            },
        }
    }


class _Cfn:
    """The local cloud's CloudFormation, as ``deployed_role`` reads it: one stack."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.template = template

    def list_stacks(self, **_: Any) -> dict[str, Any]:
        return {"StackSummaries": [{"StackName": STACK}]}

    def list_exports(self, **_: Any) -> dict[str, Any]:
        return {"Exports": []}

    def list_stack_resources(self, **_: Any) -> dict[str, Any]:
        ids = {"Fn": "shop-fn", "Role": "shop-role", "Table": "idempotency"}
        kinds = {k: r["Type"] for k, r in self.template["Resources"].items()}
        return {
            "StackResourceSummaries": [
                {"LogicalResourceId": k, "PhysicalResourceId": v, "ResourceType": kinds[k]}
                for k, v in ids.items()
            ]
        }

    def get_template(self, **_: Any) -> dict[str, Any]:
        return {"TemplateBody": json.dumps(self.template)}


def test_a_grant_named_by_the_stack_name_grants_the_stacks_queue() -> None:
    jobs = {"Fn::Sub": "arn:aws:sqs:${AWS::Region}:${AWS::AccountId}:${AWS::StackName}-jobs"}
    policy = deployed_role(_Cfn(_template(jobs)), "shop-fn")

    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-jobs"
    assert policy.allows("sqs:SendMessage", queue), (policy.documents, policy.notes)


def test_a_select_over_an_unresolved_import_stands_unresolved_and_the_rest_of_the_role_stands() -> (
    None
):
    imported = {"Fn::ImportValue": "Other:JobsQueueArn"}  # no stack exports it
    name = {"Fn::Select": [5, {"Fn::Split": [":", imported]}]}
    jobs = {"Fn::Join": ["", [f"arn:aws:sqs:{REGION}:{ACCOUNT}:", name]]}
    template = _template(jobs)
    physical = {"Fn": "shop-fn", "Role": "shop-role", "Table": "idempotency"}

    policy = role_from_template(template, "Fn", physical, account=ACCOUNT, region=REGION)

    assert policy.allows("dynamodb:GetItem", TABLE)
    assert policy.notes, "the unresolved import is named in a note"
