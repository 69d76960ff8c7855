"""The quarantine fast path: a permanent failure goes to the DLQ now, not after
``maxReceiveCount`` redeliveries.

The message keeps its body and as many of its own attributes as SQS allows beside ours
(the producer's original message id, reason code, short error; for a quarantined takeover,
the fence of the record it failed). It keeps its message
group; on a FIFO DLQ its deduplication id is its own message id. The caller acknowledges
the message only if this send succeeded.
"""

from __future__ import annotations

import base64
from typing import Any

from once import constants as c

#: SQS allows at most 10 message attributes on a message.
_MAX_ATTRIBUTES = 10
#: Ours, kept out of the carried ones: an earlier quarantine's values never survive a new one.
_OURS = (
    c.QUARANTINE_ATTR_MESSAGE_ID,
    c.QUARANTINE_ATTR_REASON,
    c.QUARANTINE_ATTR_ERROR,
    c.QUARANTINE_ATTR_FENCE,
)


def _carried_attributes(record: dict[str, Any], room: int) -> dict[str, dict[str, Any]]:
    """At most ``room`` of the record's own message attributes, in the shape SendMessage
    takes."""
    carried: dict[str, dict[str, Any]] = {}
    for name, attribute in (record.get("messageAttributes") or {}).items():
        if name in _OURS or len(carried) == room:
            continue
        data_type = attribute.get("dataType", "String")
        if attribute.get("stringValue") is not None:
            carried[name] = {"DataType": data_type, "StringValue": attribute["stringValue"]}
        elif attribute.get("binaryValue") is not None:
            # Lambda hands binary values over base64-encoded; SendMessage wants the bytes.
            carried[name] = {
                "DataType": data_type,
                "BinaryValue": base64.b64decode(attribute["binaryValue"]),
            }
    return carried


def _original_message_id(record: dict[str, Any]) -> str:
    """The producer's message: kept from an earlier quarantine when a message redriven from
    the DLQ is quarantined again, so that the chain of custody is never lost."""
    earlier = (record.get("messageAttributes") or {}).get(c.QUARANTINE_ATTR_MESSAGE_ID) or {}
    return earlier.get("stringValue") or record["messageId"]


class Quarantine:
    """Sends permanently failed records to the DLQ."""

    def __init__(self, client: Any, dlq_url: str | None) -> None:
        self._client = client
        self._url = dlq_url

    def send(
        self, record: dict[str, Any], reason: str, error: str, *, fence: int | None = None
    ) -> bool:
        """True when the record is safely in the DLQ; False means: report it failed.
        ``fence``: the FAILED record's, on a quarantined takeover (``once.fence``).

        Total: whatever refuses the send (SQS, the SDK's checks of the request, a carried
        attribute that cannot be decoded), the message is not in the DLQ, and the answer is
        False."""
        if not self._url:
            return False
        try:
            self._client.send_message(**self._request(self._url, record, reason, error, fence))
        except Exception:
            return False
        return True

    @staticmethod
    def _request(
        url: str, record: dict[str, Any], reason: str, error: str, fence: int | None
    ) -> dict[str, Any]:
        """The SendMessage request that puts ``record`` in the DLQ at ``url``."""
        ours = {
            c.QUARANTINE_ATTR_MESSAGE_ID: {
                "DataType": "String",
                "StringValue": _original_message_id(record),
            },
            c.QUARANTINE_ATTR_REASON: {"DataType": "String", "StringValue": reason},
            c.QUARANTINE_ATTR_ERROR: {"DataType": "String", "StringValue": error or reason},
        }
        if fence is not None:
            ours[c.QUARANTINE_ATTR_FENCE] = {"DataType": "Number", "StringValue": str(fence)}
        attributes = _carried_attributes(record, _MAX_ATTRIBUTES - len(ours)) | ours
        request: dict[str, Any] = {
            "QueueUrl": url,
            "MessageBody": record["body"],
            "MessageAttributes": attributes,
        }
        group = (record.get("attributes") or {}).get("MessageGroupId")
        if group:
            # A FIFO message keeps its group; so does a fair (standard) queue's tenant.
            request["MessageGroupId"] = group
        if url.endswith(".fifo"):
            # Unique per source message and the same on each of its redeliveries: a retried
            # quarantine of one message is deduplicated, two messages never are (the
            # producer's own deduplication id may be shared by different messages).
            # Standard queues take no deduplication id.
            request["MessageDeduplicationId"] = record["messageId"]
        return request
