"""The stack outputs the ``once`` command reads (``once status``, ``inspect``, ``send``,
``redrive``), with the fixed keys it looks for.

A stack holds them once: for the consumer the command should operate on.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Stack

from once_cdk.consumer import OnceConsumer

#: Output keys, as the CLI and the docs name them.
OUTPUT_KEYS = (
    "QueueUrl",
    "DlqUrl",
    "IdempotencyTableName",
    "FunctionName",
    "DashboardUrl",
    # The records' key prefix (``<service>#<key>``): what ``once inspect KEY`` looks up.
    "ServiceName",
)


def dashboard_url(consumer: OnceConsumer) -> str:
    """The console address of the consumer's dashboard, in the stack's region."""
    return (
        f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
        f"#dashboards:name={consumer.dashboard.dashboard_name}"
    )


def add_cli_outputs(consumer: OnceConsumer) -> dict[str, CfnOutput]:
    """Add the outputs the ``once`` command reads to the consumer's stack."""
    stack = Stack.of(consumer)
    values = {
        "QueueUrl": consumer.queue.queue_url,
        "DlqUrl": consumer.dlq.queue_url,
        "IdempotencyTableName": consumer.table.table_name,
        "FunctionName": consumer.function.function_name,
        "DashboardUrl": dashboard_url(consumer),
        "ServiceName": consumer.settings.service_name,
    }
    return {key: CfnOutput(stack, key, value=values[key]) for key in OUTPUT_KEYS}
