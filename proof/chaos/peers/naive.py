"""The naive idempotency pattern, as the usual articles show it: a peer for comparison.

Per record: a conditional ``PutItem`` (``attribute_not_exists(id)``) claims the key; on
success of the business code an unconditional ``UpdateItem`` marks it ``COMPLETED``; on a
failure an unconditional ``DeleteItem`` releases it. The lock item carries a TTL so that a
lock left by a crashed worker goes away eventually. Records run one after the other in a
BatchProcessor-style loop that returns ``batchItemFailures``.

It is written charitably: a refused claim reads the old item from the same call
(``ReturnValuesOnConditionCheckFailure``) and acknowledges only a ``COMPLETED`` record;
an ``IN_PROGRESS`` one is retried later. What it lacks on purpose is what ``once`` adds:
no fence, no owner check on the final writes, no payload check, no lease takeover.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import boto3
import jmespath
from botocore.exceptions import ClientError

from oncecli.aws import record_id
from proof.chaos.peers.attempt import Attempt

Process = Callable[[Any, Attempt], Any]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"


class Busy(Exception):
    """The key is locked by another delivery: try again later."""


def make_handler(
    process: Process,
    *,
    table_name: str,
    key: str = "paymentId",
    key_prefix: str = "naive",
    client: Any = None,
    lock_ttl_s: int = 900,
    retention_s: int = 7 * 86_400,
    fifo: bool = False,
) -> Handler:
    """An SQS batch handler with the naive lock; ``key`` is a JMESPath over the JSON body.

    ``fifo=False`` on a FIFO queue is the mistake of a loop that ignores message groups: it
    goes on past a failure, so a later payment of the group runs before an earlier one."""
    key_path = jmespath.compile(key)
    clients: list[Any] = [client] if client is not None else []

    def dynamodb() -> Any:
        if not clients:
            clients.append(boto3.client("dynamodb"))
        return clients[0]

    def handle(record: dict[str, Any]) -> None:
        body = json.loads(record["body"])
        business_key = str(key_path.search(body))
        item_key = {"id": {"S": record_id(key_prefix, business_key)}}
        now = int(time.time())
        try:
            dynamodb().put_item(
                TableName=table_name,
                Item={
                    **item_key,
                    "status": {"S": IN_PROGRESS},
                    "expires_at": {"N": str(now + lock_ttl_s)},
                },
                ConditionExpression="attribute_not_exists(id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            old: Any = error.response.get("Item") or {}
            if old.get("status", {}).get("S") == COMPLETED:
                return  # already done: acknowledge
            raise Busy(business_key) from None
        attempt = Attempt(
            key=business_key, fence=0, message_id=record["messageId"], takeover=False, record=None
        )
        try:
            result = process(body, attempt)
        except Exception:
            dynamodb().delete_item(TableName=table_name, Key=item_key)
            raise
        dynamodb().update_item(
            TableName=table_name,
            Key=item_key,
            UpdateExpression="SET #status = :done, #result = :result, expires_at = :expires",
            ExpressionAttributeNames={"#status": "status", "#result": "result"},
            ExpressionAttributeValues={
                ":done": {"S": COMPLETED},
                ":result": {"S": json.dumps(result, default=str)},
                ":expires": {"N": str(int(time.time()) + retention_s)},
            },
        )

    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        failures: list[dict[str, str]] = []
        for record in event.get("Records", []):
            if fifo and failures:
                failures.append({"itemIdentifier": record["messageId"]})
                continue
            try:
                handle(record)
            except Exception:
                failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}

    return lambda_handler
