"""The one stack, ``Once-<stage>``: it composes the constructs and names the outputs.

The outputs' keys (``QueueUrl``, ``DlqUrl``, ...) are read by the CLI and the docs: they
are fixed names, not generated ones.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, DefaultStackSynthesizer, Stack, Tags
from constructs import Construct

from infra.consumer import Consumer
from infra.monitoring import Monitoring
from infra.queues import Queues
from infra.stages import StageSettings
from infra.tables import Tables

OUTPUT_KEYS = (
    "QueueUrl",
    "DlqUrl",
    "IdempotencyTableName",
    "LedgerTableName",
    "FunctionName",
    "DashboardUrl",
)


class OnceStack(Stack):
    """Queues, tables, the consumer and its alarms for one stage."""

    def __init__(self, scope: Construct, *, settings: StageSettings) -> None:
        super().__init__(
            scope,
            settings.stack_name,
            description=f"once ({settings.stage}): an SQS consumer whose operations take "
            "effect once, with a fenced idempotency table on DynamoDB.",
            # The local cloud deploys the local stage's template on moto: no bootstrap there.
            synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False)
            if settings.stage == "local"
            else None,
            termination_protection=settings.retain_data,
        )
        self.settings = settings
        Tags.of(self).add("project", "once")
        Tags.of(self).add("stage", settings.stage)

        self.queues = Queues(self, "Queues", settings=settings)
        self.tables = Tables(self, "Tables", settings=settings)
        self.consumer = Consumer(
            self,
            "Consumer",
            settings=settings,
            source=self.queues.source,
            dlq=self.queues.dlq,
            idempotency_table=self.tables.idempotency,
            ledger_table=self.tables.ledger,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            settings=settings,
            source=self.queues.source,
            dlq=self.queues.dlq,
            function=self.consumer.function,
        )

        dashboard_url = (
            f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
            f"#dashboards:name={self.monitoring.dashboard.dashboard_name}"
        )
        values = {
            "QueueUrl": self.queues.source.queue_url,
            "DlqUrl": self.queues.dlq.queue_url,
            "IdempotencyTableName": self.tables.idempotency.table_name,
            "LedgerTableName": self.tables.ledger.table_name,
            "FunctionName": self.consumer.function.function_name,
            "DashboardUrl": dashboard_url,
        }
        for key in OUTPUT_KEYS:
            CfnOutput(self, key, value=values[key])
