"""The AWS facts and calls every command shares, each written once.

Why a module: the local cloud, the demo, the harness, the benchmarks and the commands that
operate a stack all reach SQS and DynamoDB, on the local engines or on AWS. The local
engines' region, account and credentials, the clients built for them, a queue's depth and
a table scan live here; so does the idempotency record's key, re-exported from the runtime
(``once.models.record_id``) so that the tooling and the function build it the same way.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

# The idempotency record's partition key is the runtime's, re-exported for the tooling.
from once.models import record_id as record_id

#: The environment variable that names the stack the commands operate on (``--stack``).
STACK_ENV = "ONCE_STACK"
#: The local cloud's region: what `once up` prints, and what every command given
#: ``--endpoint-url`` uses unless told otherwise.
LOCAL_REGION = "us-east-1"
#: Where ``once up`` serves its endpoint unless ``--port`` says otherwise: fixed, so that a
#: profile, a script or ``once env``'s exports keep working from one run to the next.
LOCAL_PORT = 4577
#: The account moto puts in every ARN.
LOCAL_ACCOUNT = "123456789012"
#: Credentials for the local engines (they accept anything, but boto3 wants some).
LOCAL_ACCESS_KEY_ID = LOCAL_SECRET_ACCESS_KEY = "local"
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": LOCAL_ACCESS_KEY_ID,
    "AWS_SECRET_ACCESS_KEY": LOCAL_SECRET_ACCESS_KEY,
}


def local_env() -> dict[str, str]:
    """The environment a process needs to reach the local engines with the standard chain."""
    return {**LOCAL_CREDENTIALS, "AWS_REGION": LOCAL_REGION, "AWS_DEFAULT_REGION": LOCAL_REGION}


#: boto3's default session builds clients from shared state that is not thread-safe:
#: ``local_client`` builds one at a time, so that threads may each build their own.
_CLIENT_LOCK = threading.Lock()


def local_client(service: str, endpoint: str, *, pool: int = 20) -> Any:
    """A client for a local engine: the local region and credentials, standard retries."""
    with _CLIENT_LOCK:
        # Any service by name: the stubs' overloads know literal names only.
        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=endpoint,
            region_name=LOCAL_REGION,
            aws_access_key_id=LOCAL_ACCESS_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET_ACCESS_KEY,
            config=Config(
                retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=pool
            ),
        )


@dataclass(frozen=True)
class QueueDepth:
    """A queue's approximate message counts."""

    visible: int
    in_flight: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight


def queue_depth(sqs: Any, url: str) -> QueueDepth:
    """Messages waiting and messages in flight (received, not yet deleted or back)."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return QueueDepth(
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


def scan(ddb: Any, table: str) -> Iterator[dict[str, Any]]:
    """Every item of a table, with consistent reads (for tables of a demo's or a run's size)."""
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        yield from page.get("Items", [])


def create_table(ddb: Any, name: str, key: str = "id") -> None:
    """An on-demand table keyed by the string attribute ``key`` (the shape of once's,
    Powertools' and the naive pattern's records, and of the ledger)."""
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
    )


def create_queue_with_dlq(
    sqs: Any, name: str, *, visibility_s: int, max_receive: int, fifo: bool = False
) -> tuple[str, str]:
    """A queue ``name`` whose redrive policy sends to a new ``<name>-dlq`` after
    ``max_receive`` receives; returns (queue URL, DLQ URL). ``fifo``: both are FIFO queues
    (their names end in ``.fifo``)."""
    suffix = ".fifo" if fifo else ""
    fifo_attributes = {"FifoQueue": "true"} if fifo else {}
    dlq = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=fifo_attributes)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue = sqs.create_queue(
        QueueName=f"{name}{suffix}",
        Attributes={
            **fifo_attributes,
            "VisibilityTimeout": str(visibility_s),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive)}
            ),
        },
    )["QueueUrl"]
    return queue, dlq
