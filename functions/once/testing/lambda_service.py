"""What the Lambda service hands a function consuming SQS: the event and the context.

``SourceQueue`` plays the queue and the event source mapping: it turns bodies into SQS
event records as Lambda delivers them (message id, receipt handle, receive count, the
queue's ARN, FIFO group, deduplication id and sequence number), and remembers every message
the function did not acknowledge, so that delivering the same body again is a redelivery of
that message (same id, receive count one higher), as SQS does after a failure or a crash.
A body delivered again after it was acknowledged is a new message: a producer's duplicate.

``LambdaContext`` is the context object, its remaining time counted down on the test's
clock from the function's timeout.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: The SenderId Lambda shows for a message sent by an IAM user (an example value).
_SENDER_ID = "AIDAIENQZJOLO23YVJ4VO"


@dataclass
class Message:
    """One SQS message, across its deliveries."""

    message_id: str
    body: str
    group: str | None
    sent_ms: int
    sequence: int
    receive_count: int = 0
    first_receive_ms: int | None = None


class SourceQueue:
    """One source queue (standard, or FIFO when its name ends in ``.fifo``)."""

    def __init__(self, arn: str, clock: Callable[[], float]) -> None:
        self.arn = arn
        self.region = arn.split(":")[3]
        self.fifo = arn.endswith(".fifo")
        self._clock = clock
        self._sequence = 0
        #: Messages delivered and not acknowledged, by (body, group): SQS will deliver them again.
        self._unacknowledged: dict[tuple[str, str | None], list[Message]] = {}

    def receive(self, bodies: Iterable[str], group: str | None) -> list[Message]:
        """The messages of one delivery: redeliveries first, new messages for the rest."""
        now_ms = int(self._clock() * 1000)
        messages = []
        for body in bodies:
            waiting = self._unacknowledged.get((body, group))
            message = waiting.pop(0) if waiting else self._send(body, group, now_ms)
            message.receive_count += 1
            if message.first_receive_ms is None:
                message.first_receive_ms = now_ms
            messages.append(message)
        return messages

    def settle(self, messages: Iterable[Message], acknowledged: set[str]) -> None:
        """After an invocation: what it did not acknowledge comes back later."""
        for message in messages:
            if message.message_id not in acknowledged:
                self._unacknowledged.setdefault((message.body, message.group), []).append(message)

    def record(self, message: Message) -> dict[str, Any]:
        """The message as one record of the Lambda event."""
        attributes = {
            "ApproximateReceiveCount": str(message.receive_count),
            "SentTimestamp": str(message.sent_ms),
            "SenderId": _SENDER_ID,
            "ApproximateFirstReceiveTimestamp": str(message.first_receive_ms),
        }
        if self.fifo:
            attributes |= {
                "MessageGroupId": message.group or "",
                "MessageDeduplicationId": hashlib.sha256(message.message_id.encode()).hexdigest(),
                "SequenceNumber": str(18_849_496_460_467_696_128 + message.sequence),
            }
        return {
            "messageId": message.message_id,
            "receiptHandle": "AQEB" + uuid.uuid4().hex * 4,
            "body": message.body,
            "attributes": attributes,
            "messageAttributes": {},
            "md5OfBody": hashlib.md5(message.body.encode(), usedforsecurity=False).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.arn,
            "awsRegion": self.region,
        }

    def _send(self, body: str, group: str | None, now_ms: int) -> Message:
        self._sequence += 1
        return Message(str(uuid.uuid4()), body, group, now_ms, self._sequence)


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
