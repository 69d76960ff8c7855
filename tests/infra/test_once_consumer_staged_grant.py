"""``OnceConsumer.grant_staged_writes``: what a handler stages on a table with
``attempt.write`` is allowed, exactly, by the synthesized role, as IAM authorizes a
TransactWriteItems (each element by its operation's action on its table), judged by moto's
IAM policy engine; and ``grant_write_data``, which the README once advised, is shown short."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_dynamodb as dynamodb
from moto.iam.access_control import IAMPolicy, PermissionResult

from once import constants as c
from once_cdk import OnceConsumer, permissions

LEDGER_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Ledger"


def _stack(tmp_path: Any) -> tuple[cdk.Stack, OnceConsumer, dynamodb.Table]:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "handler.py").write_text("lambda_handler = None\n")
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(account="123456789012", region="us-east-1"))
    consumer = OnceConsumer(
        stack, "Orders", code_dir=tmp_path, handler="shop.handler.lambda_handler",
        service_name="shop",
    )  # fmt: skip
    ledger = dynamodb.Table(
        stack,
        "Ledger",
        table_name="Ledger",
        partition_key=dynamodb.Attribute(name=c.PARTITION_KEY, type=dynamodb.AttributeType.STRING),
    )
    return stack, consumer, ledger


def _role_policy(stack: cdk.Stack) -> IAMPolicy:
    """The consumer role's policy as IAM would read it, the ledger's ARN resolved."""
    template = assertions.Template.from_stack(stack).to_json()
    statements = []
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy":
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                arn = statement["Resource"]
                if isinstance(arn, dict):  # Fn::GetAtt of a table: only the ledger is named
                    arn = LEDGER_ARN if "Ledger" in json.dumps(arn) else "arn:other"
                statements.append({**statement, "Resource": arn})
    return IAMPolicy(json.dumps({"Version": "2012-10-17", "Statement": statements}))


def _allowed(policy: IAMPolicy, action: str) -> bool:
    return policy.is_action_permitted(action, LEDGER_ARN) is PermissionResult.PERMITTED


def test_every_operation_a_handler_stages_is_allowed_on_its_table_and_nothing_else(tmp_path):
    stack, consumer, ledger = _stack(tmp_path)
    consumer.grant_staged_writes(ledger)

    policy = _role_policy(stack)
    for action in permissions.STAGED_WRITE_ACTIONS.values():
        assert _allowed(policy, action), action
    for action in ("dynamodb:GetItem", "dynamodb:BatchWriteItem", "dynamodb:Scan"):
        assert not _allowed(policy, action), action


def test_a_grant_names_only_the_operations_asked_for(tmp_path):
    stack, consumer, ledger = _stack(tmp_path)
    consumer.grant_staged_writes(ledger, ["Update", "ConditionCheck"])

    policy = _role_policy(stack)
    assert _allowed(policy, "dynamodb:UpdateItem")
    assert _allowed(policy, "dynamodb:ConditionCheckItem")
    assert not _allowed(policy, "dynamodb:PutItem")
    assert not _allowed(policy, "dynamodb:DeleteItem")


def test_grant_write_data_lacks_the_condition_check_a_staged_write_may_need(tmp_path):
    # Why the construct has its own grant: CDK's helper leaves a ConditionCheck denied.
    stack, consumer, ledger = _stack(tmp_path)
    ledger.grant_write_data(consumer.function)

    assert not _allowed(_role_policy(stack), "dynamodb:ConditionCheckItem")


@pytest.mark.parametrize("operations", [["Get"], [], ["put"]])
def test_an_operation_transact_write_items_does_not_hold_is_refused(tmp_path, operations):
    _, consumer, ledger = _stack(tmp_path)
    with pytest.raises(ValueError, match="Put, Update, Delete, ConditionCheck"):
        consumer.grant_staged_writes(ledger, operations)


def test_the_idempotency_table_takes_no_staged_write_grant(tmp_path):
    _, consumer, _ = _stack(tmp_path)
    with pytest.raises(ValueError, match="idempotency table"):
        consumer.grant_staged_writes(consumer.table)
