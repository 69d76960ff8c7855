"""What the Lambda service hands a function consuming SQS: the event and the context.

``SourceQueue`` plays the event source mapping on a real queue of the mock: each body is
sent to the queue as a message and received from it, so message ids, receipt handles, MD5
and a FIFO queue's deduplication ids and sequence numbers are the queue's own, and the
function's calls on them (the retry backoff's ``ChangeMessageVisibilityBatch``) work as on
SQS. An acknowledged message is deleted from the queue. The test says what is delivered
when: ``SourceQueue`` remembers every message the function did not acknowledge, so that
delivering the same body again is a redelivery of that message (same id, receive count one
higher), as SQS does after a failure or a crash, whatever its visibility timeout says. A
body delivered again after it was acknowledged is a new message: a producer's duplicate.

``LambdaContext`` is the context object, its remaining time counted down on the test's
clock from the function's timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: The SenderId Lambda shows for a message sent by an IAM user (an example value).
_SENDER_ID = "AIDAIENQZJOLO23YVJ4VO"
#: How long a received message stays hidden from the queue's next receives (1 h): the
#: test, not the clock, says when it is delivered again.
_HIDDEN_S = 3600
#: SQS's most entries in one batch call.
_BATCH = 10
#: Receives of one delivery before giving up on a message the queue does not return.
_MAX_RECEIVES = 20


@dataclass
class Message:
    """One SQS message, across its deliveries."""

    message_id: str
    body: str
    group: str | None
    sent_ms: int
    receipt_handle: str = ""
    md5: str = ""
    attributes: dict[str, str] | None = None
    receive_count: int = 0
    first_receive_ms: int | None = None


class SourceQueue:
    """One source queue of the mock (standard, or FIFO when its name ends in ``.fifo``)."""

    def __init__(self, sqs: Any, url: str, arn: str, clock: Callable[[], float]) -> None:
        self.arn = arn
        self.region = arn.split(":")[3]
        self.fifo = arn.endswith(".fifo")
        self._sqs = sqs
        self._url = url
        self._clock = clock
        #: Messages delivered and not acknowledged, by (body, group): SQS will deliver them again.
        self._unacknowledged: dict[tuple[str, str | None], list[Message]] = {}

    def receive(self, bodies: Iterable[str], group: str | None) -> list[Message]:
        """The messages of one delivery: redeliveries first, new messages for the rest."""
        now_ms = int(self._clock() * 1000)
        messages: list[Message | None] = []
        new: list[tuple[int, str]] = []
        for body in bodies:
            waiting = self._unacknowledged.get((body, group))
            if not waiting:
                new.append((len(messages), body))
            messages.append(waiting.pop(0) if waiting else None)
        for start in range(0, len(new), _BATCH):
            for (index, _), message in zip(
                new[start : start + _BATCH],
                self._send([body for _, body in new[start : start + _BATCH]], group, now_ms),
                strict=True,
            ):
                messages[index] = message
        delivered = [m for m in messages if m is not None]
        self._take(delivered)
        for message in delivered:
            message.receive_count += 1
            if message.first_receive_ms is None:
                message.first_receive_ms = now_ms
        return delivered

    def settle(self, messages: Iterable[Message], acknowledged: set[str]) -> None:
        """After an invocation: the acknowledged messages are deleted (as the event source
        mapping does); the others come back when the test delivers them again."""
        done = []
        for message in messages:
            if message.message_id in acknowledged:
                done.append(message)
            else:
                self._unacknowledged.setdefault((message.body, message.group), []).append(message)
        for start in range(0, len(done), _BATCH):
            self._sqs.delete_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m.receipt_handle}
                    for i, m in enumerate(done[start : start + _BATCH])
                ],
            )

    def record(self, message: Message) -> dict[str, Any]:
        """The message as one record of the Lambda event."""
        attributes = {
            "ApproximateReceiveCount": str(message.receive_count),
            "SentTimestamp": str(message.sent_ms),
            "SenderId": _SENDER_ID,
            "ApproximateFirstReceiveTimestamp": str(message.first_receive_ms),
        }
        if self.fifo:
            received = message.attributes or {}
            attributes |= {
                "MessageGroupId": message.group or "",
                "MessageDeduplicationId": received.get("MessageDeduplicationId", ""),
                "SequenceNumber": received.get("SequenceNumber", ""),
            }
        return {
            "messageId": message.message_id,
            "receiptHandle": message.receipt_handle,
            "body": message.body,
            "attributes": attributes,
            "messageAttributes": {},
            "md5OfBody": message.md5,
            "eventSource": "aws:sqs",
            "eventSourceARN": self.arn,
            "awsRegion": self.region,
        }

    def _send(self, bodies: list[str], group: str | None, now_ms: int) -> list[Message]:
        """New messages, sent in one call (at most ten), in the order of ``bodies``."""
        entries: list[dict[str, Any]] = []
        for index, body in enumerate(bodies):
            entry: dict[str, Any] = {"Id": str(index), "MessageBody": body}
            if self.fifo:
                entry["MessageGroupId"] = group or ""
                entry["MessageDeduplicationId"] = uuid.uuid4().hex  # every send is a message
            entries.append(entry)
        sent = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)
        if sent.get("Failed"):
            raise RuntimeError(f"the source queue refused a message: {sent['Failed'][0]}")
        ids = {entry["Id"]: entry["MessageId"] for entry in sent["Successful"]}
        return [Message(ids[str(i)], body, group, now_ms) for i, body in enumerate(bodies)]

    def _take(self, wanted: list[Message]) -> None:
        """Receive the ``wanted`` messages from the queue (their receipt handles are the
        delivery's). A redelivery is made visible first; so, on a FIFO queue, is every
        message in flight of the same groups, which would hold the group back. Messages
        received but not wanted are hidden again."""
        by_id = {m.message_id: m for m in wanted}
        groups = {m.group for m in wanted}
        in_the_way = [
            message
            for messages in self._unacknowledged.values()
            for message in messages
            if self.fifo and message.group in groups
        ]
        for message in wanted + in_the_way:
            self._show(message)
        missing = set(by_id)
        unwanted: list[dict[str, Any]] = []
        for _ in range(_MAX_RECEIVES):
            if not missing:
                break
            received = self._sqs.receive_message(
                QueueUrl=self._url,
                MaxNumberOfMessages=10,
                AttributeNames=["All"],
                VisibilityTimeout=_HIDDEN_S,
            ).get("Messages", [])
            for item in received:
                taken = by_id.get(item["MessageId"])
                if taken is None or item["MessageId"] not in missing:
                    unwanted.append(item)
                    continue
                missing.discard(item["MessageId"])
                taken.receipt_handle = item["ReceiptHandle"]
                taken.md5 = item["MD5OfBody"]
                taken.attributes = item.get("Attributes") or {}
        for item in unwanted:
            self._sqs.change_message_visibility(
                QueueUrl=self._url, ReceiptHandle=item["ReceiptHandle"], VisibilityTimeout=_HIDDEN_S
            )
        if missing:
            raise RuntimeError(
                f"the source queue did not return {len(missing)} message(s) of this delivery "
                f"after {_MAX_RECEIVES} receives"
            )

    def _show(self, message: Message) -> None:
        """Make a message received earlier visible again (a new one is visible already)."""
        if message.receipt_handle:
            self._sqs.change_message_visibility(
                QueueUrl=self._url, ReceiptHandle=message.receipt_handle, VisibilityTimeout=0
            )


class LambdaContext:
    """The context of one invocation; its remaining time runs on ``clock``."""

    def __init__(self, clock: Callable[[], float], *, timeout_s: float, function_arn: str) -> None:
        self._clock = clock
        self._deadline = clock() + timeout_s
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = function_arn
        self.function_name = function_arn.rsplit(":", 1)[-1]
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"$LATEST/{uuid.uuid4().hex}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))
