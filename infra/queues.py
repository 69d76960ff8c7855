"""The source queue and its dead-letter queue.

Both are encrypted (SSE-SQS) and refuse plain HTTP. The DLQ keeps messages 14 days, longer
than the source queue, and the visibility timeout comes from the stage's derived rule, so
that a batch still running is never delivered a second time because of the queue itself.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.stages import StageSettings


class Queues(Construct):
    """``source`` feeds the consumer; ``dlq`` holds what failed too often or was quarantined."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: StageSettings) -> None:
        super().__init__(scope, construct_id)
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.seconds(settings.dlq_retention_s),
        )
        Validations.of(self.dlq).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-SQSRedrivePolicy",
                reason="This queue is the dead-letter queue: the end of the line. Its "
                "messages wait 14 days for a human to inspect and redrive them; a further "
                "DLQ behind it would only move the same question one queue along.",
            )
        )
        self.source = sqs.Queue(
            self,
            "Source",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.seconds(settings.source_retention_s),
            visibility_timeout=Duration.seconds(settings.visibility_timeout_s),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=settings.max_receive_count
            ),
        )
