"""The one stack, ``Once-<stage>``: an ``OnceConsumer`` running the payments handler, the
ledger table it credits, the notifications queue it announces credits on (through once's
outbox), and the grants between them.

The outputs' keys (``QueueUrl``, ``DlqUrl``, ...) are read by the CLI and the docs: they
are fixed names, not generated ones.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, DefaultStackSynthesizer, Stack, Tags
from constructs import Construct

from infra.ledger import grant_ledger, ledger_table
from infra.notifications import Notifications
from infra.stages import StageSettings
from once_cdk import OnceConsumer, add_cli_outputs
from once_cdk.outputs import OUTPUT_KEYS as CONSUMER_OUTPUT_KEYS
from payments import ENV_LEDGER_TABLE_NAME, ENV_NOTIFICATIONS_QUEUE_URL

#: The example's code folder: ``payments/`` at its root (``once/`` beside it is the runtime
#: itself, which the construct ships from the installed package).
CODE_DIR = Path(__file__).resolve().parent.parent / "functions"
HANDLER = "payments.handler.lambda_handler"
OUTPUT_KEYS = (*CONSUMER_OUTPUT_KEYS, "LedgerTableName", "NotificationsQueueUrl")
#: The logical ids the stateful resources had when the stack was first deployed, before it
#: was built from OnceConsumer. Kept, so that a deployed stack updates in place: a new
#: idempotency table would forget every record (and duplicates would run again), new queues
#: would strand the messages in flight, and retained tables would be orphaned.
KEPT_LOGICAL_IDS = {
    "table": "TablesIdempotency498FF680",
    "queue": "QueuesSource074CB5B2",
    "dlq": "QueuesDlq9F4B4526",
    "log_group": "ConsumerLogs7B9AAC61",
}


class OnceStack(Stack):
    """The payments consumer, its ledger and its notifications queue for one stage."""

    def __init__(self, scope: Construct, *, settings: StageSettings) -> None:
        super().__init__(
            scope,
            settings.stack_name,
            description=f"once ({settings.stage}{', FIFO' if settings.fifo else ''}): an SQS "
            "consumer whose operations take effect once, with a fenced idempotency table on "
            "DynamoDB.",
            # The local cloud deploys the local stage's template on moto: no bootstrap there.
            synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False)
            if settings.stage == "local"
            else None,
            termination_protection=settings.retain_data,
        )
        self.settings = settings
        Tags.of(self).add("project", "once")
        Tags.of(self).add("stage", settings.stage)

        # Under "Tables", the ledger keeps the logical id it was first deployed with.
        self.ledger = ledger_table(
            Construct(self, "Tables"), "Ledger", retain_data=settings.retain_data
        )
        self.notifications = Notifications(self, "Notifications")
        self.consumer = OnceConsumer(
            self,
            "Payments",
            code_dir=CODE_DIR,
            handler=HANDLER,
            environment={
                ENV_LEDGER_TABLE_NAME: self.ledger.table_name,
                ENV_NOTIFICATIONS_QUEUE_URL: self.notifications.queue.queue_url,
            },
            **settings.consumer_arguments(),
        )
        grant_ledger(self.ledger, self.consumer.function)
        self.notifications.grant_send(self.consumer.function)
        for attribute, kept in KEPT_LOGICAL_IDS.items():
            resource = getattr(self.consumer, attribute).node.default_child
            self.rename_logical_id(self.resolve(self.get_logical_id(resource)), kept)

        add_cli_outputs(self.consumer)
        CfnOutput(self, "LedgerTableName", value=self.ledger.table_name)
        # What `make demo` reads back: each credited payment announced once.
        CfnOutput(self, "NotificationsQueueUrl", value=self.notifications.queue.queue_url)
