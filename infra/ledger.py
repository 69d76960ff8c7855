"""The example's business resource: the ledger table, and the grant that lets the consumer
apply payments to it.

This is the part of the app that ``once_cdk`` knows nothing about: a team's own resources
and the permissions its business code needs, written next to the consumer that uses them.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from once import constants as c

#: payments/ledger.py's elements, which once commits in its TransactWriteItems: a
#: conditional Put (the entry) and an Update (the balance). IAM authorizes a transaction by
#: its per-item actions. The function never reads the ledger (no GetItem), and never
#: deletes from it.
LEDGER_TABLE_ACTIONS: Final = ("dynamodb:PutItem", "dynamodb:UpdateItem")


def ledger_table(scope: Construct, construct_id: str, *, retain_data: bool) -> dynamodb.Table:
    """Balances and payment entries, keyed like ``payments.ledger`` writes them. Plain
    ``Table`` (never ``TableV2``): the local cloud deploys this template on moto, which skips
    global tables. Entries are the business effect: they never expire."""
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=c.PARTITION_KEY, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY,
        deletion_protection=retain_data,
    )


def grant_ledger(table: dynamodb.ITable, function: lambda_.IFunction) -> None:
    """Exactly the actions the ledger's writes need, on this table only."""
    function.add_to_role_policy(
        iam.PolicyStatement(actions=list(LEDGER_TABLE_ACTIONS), resources=[table.table_arn])
    )
