"""The consumer: the Lambda function, its role, its log group and its SQS event source mapping.

The role is written out by hand, one explicit statement per resource with the actions
listed in ``infra/permissions.py``, instead of ``grant_*`` helpers or a managed policy, so
that the function can do what the protocol needs and nothing else.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import permissions
from infra.bundling import ARCHITECTURE, RUNTIME, function_code
from infra.stages import StageSettings
from once import constants as c

HANDLER = "payments.handler.lambda_handler"

#: CloudWatch Logs accepts only these retentions (days).
_RETENTION_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def log_retention(days: int) -> logs.RetentionDays:
    """The CloudWatch Logs retention for ``days``, which must be one Logs accepts."""
    try:
        return _RETENTION_DAYS[days]
    except KeyError:
        raise ValueError(
            f"log_retention_days={days}: expected one of {sorted(_RETENTION_DAYS)}"
        ) from None


class Consumer(Construct):
    """The function that runs every record through the once protocol."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: StageSettings,
        source: sqs.IQueue,
        dlq: sqs.IQueue,
        idempotency_table: dynamodb.ITable,
        ledger_table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if settings.retain_data else RemovalPolicy.DESTROY
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention(settings.log_retention_days),
            removal_policy=removal,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="The once consumer: its tables, its queues and its own log group only.",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=function_code(),
            timeout=Duration.seconds(settings.function_timeout_s),
            memory_size=settings.memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            role=self.role,
            reserved_concurrent_executions=settings.reserved_concurrency,
            environment={
                c.ENV_TABLE_NAME: idempotency_table.table_name,
                c.ENV_LEDGER_TABLE_NAME: ledger_table.table_name,
                c.ENV_DLQ_URL: dlq.queue_url,
                c.ENV_SERVICE_NAME: settings.service_name,
                c.ENV_METRICS_NAMESPACE: settings.metrics_namespace,
                c.ENV_RETENTION_S: str(settings.record_retention_s),
            },
            description="once: SQS consumer with a fenced lock/finalize protocol on DynamoDB.",
        )
        self._allow(permissions.IDEMPOTENCY_TABLE_ACTIONS, idempotency_table.table_arn)
        self._allow(permissions.LEDGER_TABLE_ACTIONS, ledger_table.table_arn)
        self._allow(permissions.SOURCE_QUEUE_ACTIONS, source.queue_arn)
        self._allow(permissions.DLQ_ACTIONS, dlq.queue_arn)
        self._allow(permissions.LOG_GROUP_ACTIONS, self.log_group.log_group_arn)

        self.mapping = lambda_.EventSourceMapping(
            self,
            "Mapping",
            target=self.function,
            event_source_arn=source.queue_arn,
            batch_size=settings.batch_size,
            max_batching_window=Duration.seconds(settings.max_batching_window_s),
            report_batch_item_failures=True,
            max_concurrency=settings.max_concurrency,
        )
        # The mapping polls with the role: create it only once the role may read the queue.
        self.mapping.node.add_dependency(self.role)
        self._acknowledge_findings()

    def _allow(self, actions: tuple[str, ...], resource_arn: str) -> None:
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=[resource_arn])
        )

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings on this construct that are deliberate, each with its reason."""
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray tracing (Tracing.ACTIVE) needs xray:PutTraceSegments and "
                "xray:PutTelemetryRecords, which X-Ray grants on Resource '*' only: the "
                "service has no resource-level permissions. Every other statement names "
                "its resource.",
            )
        )
        runtime_reason = (
            "The runtime is pinned to Python 3.13 together with the bundling, which installs "
            "cp313 manylinux wheels (infra/bundling.py). Moving to a newer runtime is a "
            "deliberate change of both, tested before it ships."
        )
        Validations.of(self.function).acknowledge(
            Acknowledgment(id="AwsSolutions::AwsSolutions-L1", reason=runtime_reason),
            Acknowledgment(id="Serverless::Serverless-LambdaLatestVersion", reason=runtime_reason),
            Acknowledgment(
                id="Serverless::Serverless-LambdaDLQ",
                reason="A function dead-letter queue only catches asynchronous invocations. "
                "This function is invoked synchronously by its SQS event source mapping "
                "only; failed records go back to the source queue, whose redrive policy "
                "moves them to the DLQ after maxReceiveCount receives.",
            ),
        )
        Validations.of(self.mapping).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-LambdaEventSourceMappingDestination",
                reason="Lambda supports on-failure destinations for stream and Kafka sources, "
                "not for SQS. For an SQS source the failure destination is the queue's own "
                "redrive policy to the DLQ, which this stack configures.",
            )
        )
