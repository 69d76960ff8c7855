"""The example's notifications queue: where ``payments`` announces each credited payment,
through once's outbox (``attempt.send``), for whatever service consumes it.

Built like every queue of the project (``once_cdk.OnceConsumer``'s own): SQS-managed
encryption, TLS enforced, and a DLQ of its own behind it, for its consumer's poison messages.
The example deploys no consumer of it: ``make demo`` reads it back to check that each
credited payment was announced once.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: once's outbox sends with SendMessageBatch, which IAM authorizes as sqs:SendMessage: exactly
#: that, on this queue only (no GetQueueUrl or GetQueueAttributes: the URL is in the
#: function's environment).
NOTIFICATIONS_QUEUE_ACTIONS: Final = ("sqs:SendMessage",)
#: A notification its consumer fails this many times goes to the notifications DLQ.
MAX_RECEIVE_COUNT: Final = 5
#: Long enough for a consumer's outage over a weekend; the DLQ keeps what it receives the
#: longest SQS allows, since a message's age counts from its first enqueue.
RETENTION: Final = Duration.days(4)
DLQ_RETENTION: Final = Duration.days(14)


class Notifications(Construct):
    """The notifications queue (``queue``) and its DLQ (``dlq``)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        Validations.of(self.dlq).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-SQSRedrivePolicy",
                reason="This queue is the dead-letter queue of the notifications queue: the "
                "end of the line. Its messages wait 14 days for a human to inspect and "
                "redrive them; a further DLQ behind it would only move the question along.",
            )
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=MAX_RECEIVE_COUNT
            ),
        )

    def grant_send(self, function: lambda_.IFunction) -> None:
        """Exactly the action once's outbox needs, on the notifications queue only."""
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(NOTIFICATIONS_QUEUE_ACTIONS), resources=[self.queue.queue_arn]
            )
        )
