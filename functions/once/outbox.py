"""The outbox's sends: the messages a record's commit stored, sent after the commit.

Each message carries its identity (``once.source``: the record id; ``once.seq``: its index
in the outbox), the same on every send of it, so that a resend after a crash or a failed
send is recognised downstream: by SQS's or SNS's deduplication on a FIFO target (the
deduplication id is derived from the identity), and by a downstream once consumer keyed on
the identity (``make_handler(key=SOURCE_KEY)``). Messages to one destination go ten at a
time (``SendMessageBatch``, ``PublishBatch``), in the order they were staged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from once import constants as c
from once.effects import OutboxMessage, deduplication_id, is_topic

#: Entries in one SendMessageBatch or PublishBatch.
_BATCH_ENTRIES = 10
#: Payload of one batch call (bodies and attributes), SNS's and SQS's long-standing limit.
_BATCH_MAX_BYTES = 256 * 1024

#: Builds (or returns the process's) client for a service: ``"sqs"`` or ``"sns"``.
ClientFor = Callable[[str], Any]


class Outbox:
    """Sends what a record owes. Total: any error means "not all sent" (False), and the
    record keeps its outbox until a later delivery sends it."""

    def __init__(self, client_for: ClientFor) -> None:
        self._client_for = client_for

    def send(self, source: str, messages: Sequence[OutboxMessage]) -> bool:
        """Send every message of ``source``'s outbox; True only if each one was accepted."""
        try:
            return all(
                self._send_batch(destination, batch)
                for destination, batch in _batches(source, messages)
            )
        except Exception:
            return False

    def _send_batch(self, destination: str, entries: list[dict[str, Any]]) -> bool:
        if is_topic(destination):
            response = self._client_for("sns").publish_batch(
                TopicArn=destination, PublishBatchRequestEntries=entries
            )
        else:
            response = self._client_for("sqs").send_message_batch(
                QueueUrl=destination, Entries=entries
            )
        return not response.get("Failed") and len(response.get("Successful", ())) == len(entries)


def _batches(
    source: str, messages: Sequence[OutboxMessage]
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The batch calls that send ``messages``: per destination, in staging order, at most ten
    entries and 256 KiB each."""
    by_destination: dict[str, list[dict[str, Any]]] = {}
    for seq, message in enumerate(messages):
        by_destination.setdefault(message.destination, []).append(_entry(source, seq, message))
    batches: list[tuple[str, list[dict[str, Any]]]] = []
    for destination, entries in by_destination.items():
        batch: list[dict[str, Any]] = []
        size = 0
        for entry in entries:
            entry_size = _entry_bytes(entry)
            if batch and (len(batch) == _BATCH_ENTRIES or size + entry_size > _BATCH_MAX_BYTES):
                batches.append((destination, batch))
                batch, size = [], 0
            batch.append(entry)
            size += entry_size
        batches.append((destination, batch))
    return batches


def _entry(source: str, seq: int, message: OutboxMessage) -> dict[str, Any]:
    """One batch entry, in the shape both SQS and SNS take but for the body's name."""
    attributes: dict[str, dict[str, Any]] = {
        name: {"DataType": kind, ("BinaryValue" if kind == "Binary" else "StringValue"): value}
        for name, kind, value in message.attributes
    }
    attributes[c.OUTBOX_ATTR_SOURCE] = {"DataType": "String", "StringValue": source}
    attributes[c.OUTBOX_ATTR_SEQ] = {"DataType": "Number", "StringValue": str(seq)}
    entry: dict[str, Any] = {
        "Id": str(seq),
        ("Message" if message.to_topic else "MessageBody"): message.body,
        "MessageAttributes": attributes,
    }
    if message.group_id is not None:
        entry["MessageGroupId"] = message.group_id
    if message.fifo:
        entry["MessageDeduplicationId"] = deduplication_id(source, seq)
    return entry


def _entry_bytes(entry: dict[str, Any]) -> int:
    body = entry.get("MessageBody", entry.get("Message", ""))
    size = len(body.encode("utf-8"))
    for name, attribute in entry["MessageAttributes"].items():
        value = attribute.get("StringValue", attribute.get("BinaryValue", b""))
        size += len(name.encode("utf-8")) + len(attribute["DataType"])
        size += len(value) if isinstance(value, bytes) else len(value.encode("utf-8"))
    return size
