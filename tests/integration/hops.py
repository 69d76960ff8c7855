"""What the chain tests do to the queues and topics of ``once_env``'s moto between two
consumers: create them, take what an upstream sent, hand it to the downstream as an SQS hop
would, and make a call fail as an outage would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3

from once.testing import OnceEnv


def queue(env: OnceEnv, name: str) -> str:
    """A queue (FIFO when its name says so)."""
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    return str(env.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def queue_arn(env: OnceEnv, url: str) -> str:
    attributes = env.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])


def sns(env: OnceEnv) -> Any:
    """The kit's SNS client, which the outbox uses too."""
    if env.sns is None:
        env.sns = boto3.client("sns", region_name=env.sqs.meta.region_name)
    return env.sns


def topic(env: OnceEnv, name: str) -> str:
    """A topic (FIFO when its name says so)."""
    attributes = {"FifoTopic": "true"} if name.endswith(".fifo") else {}
    return str(sns(env).create_topic(Name=name, Attributes=attributes)["TopicArn"])


def topic_to_source_queue(env: OnceEnv, name: str) -> str:
    """A topic whose subscription (raw message delivery off: SNS's default and CDK's
    ``SqsSubscription``'s) is the kit's source queue."""
    arn = topic(env, name)
    sns(env).subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn(env, env.queue_url),
        Attributes={"RawMessageDelivery": "false"},
    )
    return arn


def take(env: OnceEnv, url: str) -> list[dict[str, Any]]:
    """Every message of a queue (deleted as read), with its attributes."""
    taken: list[dict[str, Any]] = []
    while batch := env.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
    ).get("Messages", []):
        for message in batch:
            taken.append(message)
            env.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return taken


def attribute(message: dict[str, Any], name: str) -> str:
    """A String message attribute of a message ReceiveMessage gave."""
    return str(message["MessageAttributes"][name]["StringValue"])


def forward(env: OnceEnv, messages: list[dict[str, Any]]) -> None:
    """What an SQS hop hands the downstream consumer: each message, with its attributes, on
    the kit's source queue (then ``deliver_waiting``)."""
    for message in messages:
        attributes = {
            name: {k: v for k, v in value.items() if k in ("DataType", "StringValue")}
            for name, value in message.get("MessageAttributes", {}).items()
        }
        env.sqs.send_message(
            QueueUrl=env.queue_url, MessageBody=message["Body"], MessageAttributes=attributes
        )


def fail(
    client: Any,
    operation: str,
    *,
    times: int = 1,
    when: Callable[[dict[str, Any]], bool] = lambda params: True,
) -> list[int]:
    """The next ``times`` calls of ``operation`` (that match ``when``) fail as an outage
    would (no answer); the list counts the failures made."""
    failed: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if len(failed) < times and when(params):
            failed.append(1)
            raise ConnectionError("injected: the call did not reach AWS")

    client.meta.events.register(f"provide-client-params.*.{operation}", hook)
    return failed


def is_clear(params: dict[str, Any]) -> bool:
    """An UpdateItem that clears a record's outbox."""
    update = params.get("UpdateExpression", "")
    return "REMOVE #outbox" in update and "SET #status" not in update
