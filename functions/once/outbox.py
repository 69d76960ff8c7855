"""The outbox's sends: the messages a record's commit stored, sent after the commit.

Each message carries its identity (``once.source``: the operation that committed it, as
stored with it; ``once.seq``: its index in the outbox: ``once.identity``), the same on every
send of it, so that a resend after a crash or a failed send is recognised downstream: by
SQS's or SNS's deduplication on a FIFO target (the deduplication id is derived from the
identity), and by a downstream once consumer keyed on the identity
(``make_handler(key=SOURCE_KEY)``). An event to an EventBridge bus has no attributes: it
carries the identity in its detail (``effects.event_detail``). Messages to one destination go
ten at a time (``SendMessageBatch``, ``PublishBatch``, ``PutEvents``), in the order they were
staged, each batch within its service's payload limit (SQS 1 MiB, SNS 256 KiB, EventBridge
1 MB: ``once.sendrules``).

A send that fails says why (``once.awserrors.Sent``): the error's class and AWS's code, or the
first failed entry's code, never a value of the message. A failed entry leaves the whole
outbox owed, whatever its code: the next delivery sends every message again under the same
identity, which a downstream recognises. PutEvents documents ``InternalFailure`` and
``ThrottlingException`` as retryable and the rest (``AccessDeniedException``,
``NotAuthorizedForSourceException``...) as not: those need an operator (the runbook's
``owed``), and once refuses at ``attempt.send`` every entry PutEvents would fail for its
content (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from once import sendrules as rules
from once.awserrors import SENT, Sent
from once.effects import OutboxMessage, event_detail
from once.identity import deduplication_id, identity_attributes, legacy_source
from once.payload import describe_error

#: Builds (or returns the process's) client for a service: ``"sqs"``, ``"sns"`` or
#: ``"events"``.
ClientFor = Callable[[str], Any]


class Outbox:
    """Sends what a record owes. Total: any error means "not all sent" (a falsy ``Sent`` that
    says why), and the record keeps its outbox until a later delivery sends it."""

    def __init__(self, client_for: ClientFor) -> None:
        self._client_for = client_for

    def send(self, record_id: str, messages: Sequence[OutboxMessage]) -> Sent:
        """Send every message of record ``record_id``'s outbox: ``SENT`` only if each one was
        accepted; else ``Sent(False, why)``, from the first batch that was not (later ones are
        not tried). Never raises."""
        try:
            for destination, batch in _batches(record_id, messages):
                sent = self._send_batch(destination, batch)
                if not sent:
                    return sent
            return SENT
        except Exception as error:
            return Sent(False, describe_error(error))

    def _send_batch(self, destination: str, entries: list[dict[str, Any]]) -> Sent:
        if rules.is_event_bus(destination):
            response = self._client_for("events").put_events(Entries=entries)
            return _events_outcome(response, len(entries))
        if rules.is_topic(destination):
            response = self._client_for("sns").publish_batch(
                TopicArn=destination, PublishBatchRequestEntries=entries
            )
        else:
            response = self._client_for("sqs").send_message_batch(
                QueueUrl=destination, Entries=entries
            )
        return _outcome(response, len(entries))


def _outcome(response: Any, entries: int) -> Sent:
    """A batch response as a ``Sent``: a ``Failed`` entry's code (the first one's; its
    ``Message`` may quote the message, so it is never kept), or too few ``Successful``."""
    failed = response.get("Failed") or ()
    if failed:
        code = failed[0].get("Code") if isinstance(failed[0], dict) else None
        return Sent(False, f"Failed {code}" if code else "Failed")
    successful = len(response.get("Successful") or ())
    if successful != entries:
        return Sent(False, f"Successful {successful} of {entries}")
    return SENT


def _events_outcome(response: Any, entries: int) -> Sent:
    """A PutEvents response as a ``Sent``: the first failed entry's ``ErrorCode`` (its
    ``ErrorMessage`` may quote the event, so it is never kept), or too few ``EventId``s. "The
    response Entries array always includes the same number of entries as the request array"
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html)."""
    results = response.get("Entries") or ()
    for result in results:
        code = result.get("ErrorCode") if isinstance(result, dict) else None
        if code:
            return Sent(False, f"Failed {code}")
    accepted = sum(1 for r in results if isinstance(r, dict) and r.get("EventId"))
    if response.get("FailedEntryCount") or accepted != entries:
        return Sent(False, f"Accepted {accepted} of {entries}")
    return SENT


def _batches(
    record_id: str, messages: Sequence[OutboxMessage]
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The batch calls that send ``messages``: per destination, in staging order, at most ten
    entries and the service's batch payload each (SQS 1 MiB, SNS 256 KiB, attributes
    included: ``sendrules.batch_max_bytes``; EventBridge less than 1 MB:
    ``sendrules.EVENTS_REQUEST_MAX_BYTES``)."""
    by_destination: dict[str, list[dict[str, Any]]] = {}
    for seq, message in enumerate(messages):
        by_destination.setdefault(message.destination, []).append(_entry(record_id, seq, message))
    batches: list[tuple[str, list[dict[str, Any]]]] = []
    for destination, entries in by_destination.items():
        to_bus = rules.is_event_bus(destination)
        # PutEvents: the entries' total "must be less than" its limit.
        limit = rules.EVENTS_REQUEST_MAX_BYTES - 1 if to_bus else rules.batch_max_bytes(destination)
        most = rules.EVENTS_MAX_ENTRIES if to_bus else rules.BATCH_MAX_ENTRIES
        batch: list[dict[str, Any]] = []
        size = 0
        for entry in entries:
            entry_size = rules.event_entry_bytes(entry) if to_bus else _entry_bytes(entry)
            if batch and (len(batch) == most or size + entry_size > limit):
                batches.append((destination, batch))
                batch, size = [], 0
            batch.append(entry)
            size += entry_size
        batches.append((destination, batch))
    return batches


def _entry(record_id: str, seq: int, message: OutboxMessage) -> dict[str, Any]:
    """One batch entry, in the shape both SQS and SNS take but for the body's name (or
    PutEvents' entry, for an event), under the identity stored with the message (or, stored
    without one, the one it was sent with before identities named their operation)."""
    source = message.source or legacy_source(record_id, message.destination)
    if message.event is not None:
        event_source, detail_type = message.event
        return {
            "Source": event_source,
            "DetailType": detail_type,
            "Detail": event_detail(message.body, source, seq),
            "EventBusName": message.destination,
        }
    attributes: dict[str, dict[str, Any]] = {
        name: {"DataType": kind, ("BinaryValue" if kind == "Binary" else "StringValue"): value}
        for name, kind, value in (*message.attributes, *identity_attributes(source, seq))
    }
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
    """An entry's size as SQS and SNS count it (``sendrules.message_bytes``, the rule
    ``attempt.send`` checked)."""
    body = entry.get("MessageBody", entry.get("Message", ""))
    return rules.request_message_bytes(body, entry["MessageAttributes"])
