"""The stack outputs the ``once`` command reads (``once status``, ``inspect``, ``send``,
``redrive``, ``logs``, ``invoke``), with the fixed keys it looks for
(``once.constants.OUTPUT_KEYS``; the command's reader is ``oncecli.consumers``).

A stack with one consumer holds them under the plain keys (``QueueUrl``...). Each consumer
given outputs in a stack that already holds another's puts its construct id first
(``RefundsQueueUrl``...), and the first one's outputs are renamed so too: every consumer of
the stack is then named the same way, by ``--consumer NAME``. Each output's description
names its consumer (``once consumer Refunds: ...``), so that the command names the one
consumer of a stack too.
"""

from __future__ import annotations

import re

from aws_cdk import Aws, CfnOutput, Stack

from once import constants as c
from once_cdk.consumer import OnceConsumer
from once_cdk.settings import ConfigurationError

#: Output keys, as the CLI and the docs name them.
OUTPUT_KEYS = c.OUTPUT_KEYS
#: What each output is, after its consumer's name in its description.
_MEANING = {
    "QueueUrl": "its source queue",
    "DlqUrl": "its dead-letter queue",
    "IdempotencyTableName": "its idempotency table",
    "FunctionName": "its function",
    "DashboardUrl": "its CloudWatch dashboard",
    "ServiceName": "its records' key prefix",
}


def dashboard_url(consumer: OnceConsumer) -> str:
    """The console address of the consumer's dashboard, in the stack's region."""
    return (
        f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
        f"#dashboards:name={consumer.dashboard.dashboard_name}"
    )


def add_cli_outputs(consumer: OnceConsumer) -> dict[str, CfnOutput]:
    """Add the outputs the ``once`` command reads to the consumer's stack.

    The command counts, inspects and redrives the consumer's DLQ: a consumer whose DLQ is
    unknown (an imported ``queue=``) is refused."""
    if consumer.dlq is None:
        raise ConfigurationError(
            f"add_cli_outputs({consumer.node.path}): the once command reads the consumer's "
            "DLQ (DlqUrl) to count, inspect and redrive what it gave up on, and the queue "
            f"{consumer.queue.node.path} was imported, so its DLQ is unknown to the "
            "construct; define the queue in this app (an sqs.Queue with its "
            "dead_letter_queue) to run the once command on this consumer"
        )
    stack = Stack.of(consumer)
    name = consumer_name(consumer)
    values = {
        "QueueUrl": consumer.queue.queue_url,
        "DlqUrl": consumer.dlq.queue_url,
        "IdempotencyTableName": consumer.table.table_name,
        "FunctionName": consumer.function.function_name,
        "DashboardUrl": dashboard_url(consumer),
        "ServiceName": consumer.settings.service_name,
    }
    others = _outputs_by_consumer(stack)
    prefix = _key_prefix(name)
    if others:
        taken = {_key_prefix(other): other for other in others}
        if prefix in taken:
            raise ConfigurationError(
                f"add_cli_outputs({consumer.node.path}): its outputs would be named like "
                f"those of {taken[prefix]!r} ({prefix}QueueUrl...): give the two consumers "
                "construct ids that differ in their letters or digits"
            )
        for other, outputs in others.items():  # every consumer of the stack, by its name
            for key, output in outputs.items():
                output.override_logical_id(_key_prefix(other) + key)
    return {
        key: CfnOutput(
            stack,
            f"{prefix}{key}" if others else key,
            value=values[key],
            description=f"{c.OUTPUT_DESCRIPTION_PREFIX}{name}: {_MEANING[key]}",
        )
        for key in OUTPUT_KEYS
    }


def consumer_name(consumer: OnceConsumer) -> str:
    """The consumer's name in its stack (what ``--consumer`` takes): its construct path
    below the stack, its construct id when it is a child of the stack."""
    below = consumer.node.path.removeprefix(Stack.of(consumer).node.path)
    return below.strip("/")


def _key_prefix(name: str) -> str:
    """A CloudFormation output's logical id takes letters and digits only."""
    return re.sub(r"[^A-Za-z0-9]", "", name)


def _outputs_by_consumer(stack: Stack) -> dict[str, dict[str, CfnOutput]]:
    """The outputs ``add_cli_outputs`` gave the stack's consumers so far, by consumer."""
    found: dict[str, dict[str, CfnOutput]] = {}
    for child in stack.node.children:
        if not isinstance(child, CfnOutput) or not child.description:
            continue
        description = child.description
        if not description.startswith(c.OUTPUT_DESCRIPTION_PREFIX):
            continue
        name = description[len(c.OUTPUT_DESCRIPTION_PREFIX) :].split(":", 1)[0]
        key = child.node.id.removeprefix(_key_prefix(name))
        found.setdefault(name, {})[key] = child
    return found
