"""Move messages from a DLQ back to its source queue, where StartMessageMoveTask is missing.

Each message is copied (body, attributes, FIFO group id; for a FIFO queue the DLQ message's
own id as the deduplication id) and deleted from the DLQ only once its copy is sent, so a
failure midway loses nothing. The move is
bounded by what the DLQ held when it started: a message that the consumer quarantines
again at once must not bounce between the two queues forever.
"""

from __future__ import annotations

from typing import Any

from oncecli.aws import queue_depth


def move(sqs: Any, dlq_url: str, source_url: str, limit: int | None = None) -> int:
    """Move at most ``limit`` messages (default: the DLQ's depth now); returns how many."""
    budget = queue_depth(sqs, dlq_url).visible if limit is None else limit
    moved = 0
    while moved < budget:
        messages = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=min(10, budget - moved),
            WaitTimeSeconds=0,
            VisibilityTimeout=60,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            break
        for message in messages:
            copy: dict[str, Any] = {"QueueUrl": source_url, "MessageBody": message["Body"]}
            if message.get("MessageAttributes"):
                copy["MessageAttributes"] = message["MessageAttributes"]
            system = message.get("Attributes", {})
            if system.get("MessageGroupId"):
                copy["MessageGroupId"] = system["MessageGroupId"]
                # The DLQ message's own id, never the original send's deduplication id:
                # within 5 minutes of that send SQS would accept the copy and drop it, and
                # the DLQ message would be deleted below. Unique per DLQ message, and the
                # same when the move of that message is retried.
                copy["MessageDeduplicationId"] = message["MessageId"]
            sqs.send_message(**copy)  # raises: the original stays in the DLQ
            sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
            moved += 1
    return moved
