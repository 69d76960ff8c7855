"""The DynamoDB tables: the idempotency table (the protocol's records) and the ledger.

Plain ``aws_dynamodb.Table`` (AWS::DynamoDB::Table), never ``TableV2``: the local cloud
deploys this very template on moto, which skips global tables. The partition key and the
TTL attribute are the shared constants that ``functions/once`` reads and writes.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.stages import StageSettings
from once import constants as c


def _table(
    scope: Construct, construct_id: str, settings: StageSettings, ttl_attribute: str | None
) -> dynamodb.Table:
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=c.PARTITION_KEY, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute=ttl_attribute,
        removal_policy=RemovalPolicy.RETAIN if settings.retain_data else RemovalPolicy.DESTROY,
        deletion_protection=settings.retain_data,
    )


class Tables(Construct):
    """``idempotency`` holds one record per business key; ``ledger`` the example's entries."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: StageSettings) -> None:
        super().__init__(scope, construct_id)
        self.idempotency = _table(self, "Idempotency", settings, c.TTL_ATTRIBUTE)
        # Ledger entries are the business effect: they never expire.
        self.ledger = _table(self, "Ledger", settings, None)
