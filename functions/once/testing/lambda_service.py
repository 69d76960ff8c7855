"""What the Lambda service hands a function consuming SQS: the event and the context.

``SourceQueue`` plays the event source mapping on a real queue of the mock: each body is
sent to the queue as a message and received from it, so message ids, receipt handles, MD5
and a FIFO queue's deduplication ids and sequence numbers are the queue's own, and the
function's calls on them (the retry backoff's ``ChangeMessageVisibilityBatch``) work as on
SQS. A message acknowledged is deleted from the queue: one the function's response has
Lambda delete, by Lambda's rule (``once.batchresponse``; the kit's ``env`` decides). The
test says what is delivered when: ``SourceQueue`` remembers every message the function did
not acknowledge, so that delivering the same body again is a redelivery of that message
(same id, receive count one higher), as SQS does after a failure or a crash, whatever its
visibility timeout says. A body delivered again after it was acknowledged is a new message:
a producer's duplicate. A message carries the message attributes it was sent with (a body
with other attributes is another message). Messages the kit did not send (a test's own
producer, ``once redrive``) are delivered as they wait in the queue (``receive_waiting``).
With a ``maxReceiveCount``, a message reported failed on its last receive is moved to the
DLQ, as SQS's redrive policy does (body and attributes, nothing of once's).

``LambdaContext`` is the context object, its remaining time counted down on the test's
clock from the function's timeout.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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
    #: Its message attributes, as SQS returns them (``{"DataType": ..., "StringValue": ...}``).
    message_attributes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def identity(self) -> tuple[str, str | None, str]:
        """What makes two deliveries one message to the kit: body, group and attributes."""
        return self.body, self.group, _attributes_key(self.message_attributes)


def _attributes_key(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    return json.dumps(
        {name: {k: str(v) for k, v in value.items()} for name, value in attributes.items()},
        sort_keys=True,
    )


def sqs_attributes(given: Mapping[str, str | int | float | bytes]) -> dict[str, dict[str, Any]]:
    """A test's message attributes in SendMessage's shape: a str is a String, a number a
    Number, bytes Binary."""
    shaped: dict[str, dict[str, Any]] = {}
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float | bytes):
            raise TypeError(
                f"message attribute {name!r} is a {type(value).__name__}: pass a str, a "
                "number or bytes"
            )
        if isinstance(value, bytes):
            shaped[name] = {"DataType": "Binary", "BinaryValue": value}
        elif isinstance(value, str):
            shaped[name] = {"DataType": "String", "StringValue": value}
        else:
            shaped[name] = {"DataType": "Number", "StringValue": str(value)}
    return shaped


class SourceQueue:
    """One source queue of the mock (standard, or FIFO when its name ends in ``.fifo``)."""

    def __init__(
        self,
        sqs: Any,
        url: str,
        arn: str,
        clock: Callable[[], float],
        *,
        dlq_url: str | None = None,
        max_receive_count: int | None = None,
    ) -> None:
        self.arn = arn
        self.url = url
        self.region = arn.split(":")[3]
        self.fifo = arn.endswith(".fifo")
        self._sqs = sqs
        self._clock = clock
        self._dlq_url = dlq_url
        self._max_receive_count = max_receive_count
        #: Messages delivered and not acknowledged, by identity: SQS will deliver them again.
        self._unacknowledged: dict[tuple[str, str | None, str], list[Message]] = {}

    def receive(
        self,
        bodies: Iterable[str],
        group: str | None,
        attributes: list[dict[str, dict[str, Any]]],
    ) -> list[Message]:
        """The messages of one delivery: redeliveries first, new messages for the rest;
        ``attributes[i]`` are the message attributes of the i-th body."""
        now_ms = int(self._clock() * 1000)
        messages: list[Message | None] = []
        new: list[tuple[int, str, dict[str, dict[str, Any]]]] = []
        for body, own in zip(bodies, attributes, strict=True):
            waiting = self._unacknowledged.get((body, group, _attributes_key(own)))
            if not waiting:
                new.append((len(messages), body, own))
            messages.append(waiting.pop(0) if waiting else None)
        for start in range(0, len(new), _BATCH):
            chunk = new[start : start + _BATCH]
            sent = self._send([(body, own) for _, body, own in chunk], group, now_ms)
            for (index, _, _), message in zip(chunk, sent, strict=True):
                messages[index] = message
        delivered = [m for m in messages if m is not None]
        self._take(delivered)
        self._received(delivered, now_ms)
        return delivered

    def receive_waiting(self) -> list[Message]:
        """Every message waiting in the queue that the kit did not send (a test's own
        producer's, or moved back by ``once redrive``), received for one delivery."""
        now_ms = int(self._clock() * 1000)
        waiting: list[Message] = []
        while received := self._sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=_HIDDEN_S,
        ).get("Messages", []):
            for item in received:
                system = item.get("Attributes") or {}
                message = Message(
                    item["MessageId"],
                    item["Body"],
                    system.get("MessageGroupId"),
                    int(system.get("SentTimestamp") or now_ms),
                    receipt_handle=item["ReceiptHandle"],
                    md5=item["MD5OfBody"],
                    attributes=system,
                    receive_count=int(system.get("ApproximateReceiveCount", "1")) - 1,
                    message_attributes=item.get("MessageAttributes") or {},
                )
                waiting.append(message)
        self._received(waiting, now_ms)
        return waiting

    def settle(self, messages: Iterable[Message], acknowledged: set[str]) -> list[Message]:
        """After an invocation: the acknowledged messages (those Lambda's rule deletes by the
        function's response, ``once.batchresponse``) are deleted, as the event source mapping
        does; the others come back when the test delivers them again, unless they
        used their last receive: those SQS moves to the DLQ (returned)."""
        done: list[Message] = []
        moved: list[Message] = []
        for message in messages:
            if message.message_id in acknowledged:
                done.append(message)
            elif self._max_receive_count and message.receive_count >= self._max_receive_count:
                self._move_to_dlq(message)
                done.append(message)
                moved.append(message)
            else:
                self._unacknowledged.setdefault(message.identity, []).append(message)
        for start in range(0, len(done), _BATCH):
            self._sqs.delete_message_batch(
                QueueUrl=self.url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m.receipt_handle}
                    for i, m in enumerate(done[start : start + _BATCH])
                ],
            )
        return moved

    def _received(self, messages: list[Message], now_ms: int) -> None:
        for message in messages:
            message.receive_count += 1
            if message.first_receive_ms is None:
                message.first_receive_ms = now_ms

    def _move_to_dlq(self, message: Message) -> None:
        """What SQS's redrive policy does at ``maxReceiveCount``: the message, as it was
        sent, into the DLQ."""
        if not self._dlq_url:
            raise RuntimeError("a queue with a maxReceiveCount needs a DLQ")
        request: dict[str, Any] = {"QueueUrl": self._dlq_url, "MessageBody": message.body}
        if message.message_attributes:
            request["MessageAttributes"] = message.message_attributes
        if message.group is not None and self._dlq_url.endswith(".fifo"):
            request["MessageGroupId"] = message.group
            request["MessageDeduplicationId"] = message.message_id
        self._sqs.send_message(**request)

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
            "messageAttributes": _lambda_attributes(message.message_attributes),
            "md5OfBody": message.md5,
            "eventSource": "aws:sqs",
            "eventSourceARN": self.arn,
            "awsRegion": self.region,
        }

    def _send(
        self, bodies: list[tuple[str, dict[str, dict[str, Any]]]], group: str | None, now_ms: int
    ) -> list[Message]:
        """New messages, sent in one call (at most ten), in the order of ``bodies``, each
        with its message attributes."""
        entries: list[dict[str, Any]] = []
        for index, (body, own) in enumerate(bodies):
            entry: dict[str, Any] = {"Id": str(index), "MessageBody": body}
            if own:
                entry["MessageAttributes"] = own
            if self.fifo:
                entry["MessageGroupId"] = group or ""
                entry["MessageDeduplicationId"] = uuid.uuid4().hex  # every send is a message
            entries.append(entry)
        sent = self._sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
        if sent.get("Failed"):
            raise RuntimeError(f"the source queue refused a message: {sent['Failed'][0]}")
        ids = {entry["Id"]: entry["MessageId"] for entry in sent["Successful"]}
        return [
            Message(ids[str(i)], body, group, now_ms, message_attributes=own)
            for i, (body, own) in enumerate(bodies)
        ]

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
                QueueUrl=self.url,
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
                QueueUrl=self.url, ReceiptHandle=item["ReceiptHandle"], VisibilityTimeout=_HIDDEN_S
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
                QueueUrl=self.url, ReceiptHandle=message.receipt_handle, VisibilityTimeout=0
            )


class LambdaContext:
    """The context of one invocation; its remaining time runs on ``clock``."""

    def __init__(self, clock: Callable[[], float], *, timeout_s: float, function_arn: str) -> None:
        self._clock = clock
        #: When Lambda kills the invocation, on ``clock`` (epoch seconds).
        self.deadline_s = clock() + timeout_s
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = function_arn
        self.function_name = function_arn.rsplit(":", 1)[-1]
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"$LATEST/{uuid.uuid4().hex}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline_s - self._clock()) * 1000))


def _lambda_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Message attributes as Lambda hands them over (binary values base64-encoded)."""
    shaped: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        entry: dict[str, Any] = {
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value["DataType"],
        }
        if "BinaryValue" in value:
            entry["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
        else:
            entry["stringValue"] = value["StringValue"]
        shaped[name] = entry
    return shaped
