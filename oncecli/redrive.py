"""Move messages from a DLQ back to its source queue, one by one.

Why not always StartMessageMoveTask: it is missing on the local engines, and it moves
everything, while a message the runtime quarantined because a lease expired mid-effect
(``once.reason=LEASE_EXPIRED``) needs a person's review before it runs again. ``move``
leaves those in the DLQ unless told to include them.

Each message is copied (body, attributes, its message group; to a FIFO source queue the DLQ
message's own id as the deduplication id) and deleted from the DLQ only once its copy is
sent, so a failure midway loses nothing. Whether the source is FIFO is the source queue's
own say (its name: "A FIFO queue name must end with the .fifo suffix",
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html),
never the message's: a fair (standard) queue's messages carry a group id too, and SQS
refuses a deduplication id on a standard queue. A message SQS refuses to take back stays in
the DLQ, is named, and the others move. The move is bounded by what the DLQ held when it
started: a message that the consumer quarantines again at once must not bounce between the
two queues forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from once import constants as c
from once.payload import describe_error
from once.sendrules import is_fifo
from oncecli.aws import queue_depth

#: How long a received DLQ message stays hidden while it is copied.
_VISIBILITY_S = 60


@dataclass(frozen=True)
class Moved:
    """What a move did: messages moved, and LEASE_EXPIRED messages left in the DLQ."""

    moved: int
    lease_expired_left: int
    #: The messages moved, as the DLQ gave them (attributes included).
    messages: tuple[dict[str, Any], ...] = ()
    #: The messages SQS would not take back, left in the DLQ: (DLQ message id, why, in
    #: AWS's words: the error's class and code).
    refused: tuple[tuple[str, str], ...] = ()


def is_lease_expired(message: dict[str, Any]) -> bool:
    """Whether the runtime quarantined this message for a person's review: a lease expired
    mid-effect (``LEASE_EXPIRED``), or, under ``on_expired_lease="quarantine"``, business
    code returned and its commit landed nothing (``WRITE_REFUSED`` or ``COMMIT_FAILED``
    with the review's ``once.fence``). Each is left in the DLQ as a LEASE_EXPIRED one is."""
    attributes = message.get("MessageAttributes") or {}
    reason = (attributes.get(c.QUARANTINE_ATTR_REASON) or {}).get("StringValue")
    if reason == c.REASON_LEASE_EXPIRED:
        return True
    return reason in c.REVIEW_REASONS and c.QUARANTINE_ATTR_FENCE in attributes


def move(
    sqs: Any,
    dlq_url: str,
    source_url: str,
    limit: int | None = None,
    *,
    include_lease_expired: bool = False,
) -> Moved:
    """Move at most ``limit`` messages (default: all the DLQ holds now); LEASE_EXPIRED ones
    stay in the DLQ unless ``include_lease_expired``."""
    seen_budget = queue_depth(sqs, dlq_url).visible
    limit = seen_budget if limit is None else limit
    moved = seen = for_review = 0
    left: list[str] = []
    done: list[dict[str, Any]] = []
    refused: list[tuple[str, str]] = []
    # On a FIFO DLQ, a message left behind holds the rest of its group with it, in order: SQS
    # hands several messages of one group in one receive, and a later one moved ahead would
    # run before it (across receives SQS holds the group itself while one is in flight).
    held: set[str | None] = set()
    fifo_dlq = is_fifo(dlq_url)
    try:
        while moved < limit and seen < seen_budget:
            messages = sqs.receive_message(
                QueueUrl=dlq_url,
                MaxNumberOfMessages=min(10, limit - moved, seen_budget - seen),
                WaitTimeSeconds=0,
                VisibilityTimeout=_VISIBILITY_S,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                seen += 1
                group = (message.get("Attributes") or {}).get("MessageGroupId")
                if fifo_dlq and group in held:
                    left.append(message["ReceiptHandle"])
                    continue
                if is_lease_expired(message) and not include_lease_expired:
                    left.append(message["ReceiptHandle"])
                    for_review += 1
                    held.add(group)
                    continue
                try:
                    sqs.send_message(**_copy(message, source_url))
                except (ClientError, BotoCoreError) as error:
                    # Refused (or not answered): it stays in the DLQ, named; the others move
                    # (on a FIFO DLQ, those of other groups).
                    refused.append((message["MessageId"], describe_error(error)))
                    left.append(message["ReceiptHandle"])
                    held.add(group)
                    continue
                sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
                moved += 1
                done.append(message)
    finally:
        # Visible again at once: left for a person, not hidden for the next minute.
        for handle in left:
            sqs.change_message_visibility(
                QueueUrl=dlq_url, ReceiptHandle=handle, VisibilityTimeout=0
            )
    return Moved(moved, for_review, tuple(done), tuple(refused))


def _copy(message: dict[str, Any], source_url: str) -> dict[str, Any]:
    """The SendMessage request that puts a DLQ message back on the source queue."""
    copy: dict[str, Any] = {"QueueUrl": source_url, "MessageBody": message["Body"]}
    if message.get("MessageAttributes"):
        copy["MessageAttributes"] = message["MessageAttributes"]
    system = message.get("Attributes", {})
    if system.get("MessageGroupId"):
        copy["MessageGroupId"] = system["MessageGroupId"]  # a FIFO or a fair queue's group
    if is_fifo(source_url):
        # The DLQ message's own id, never the original send's deduplication id: within
        # 5 minutes of that send SQS would accept the copy and drop it, and the DLQ message
        # would be deleted. Unique per DLQ message, and the same when its move is retried.
        copy["MessageDeduplicationId"] = message["MessageId"]
    return copy
