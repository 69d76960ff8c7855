"""The quarantine fast path: a permanent failure goes to the DLQ now, not after
``maxReceiveCount`` redeliveries.

The message keeps its body exactly, and its attributes in this order of need, within the
10 that SQS allows on a message:

1. ours, for the review: the producer's original message id, the reason code, a short error
   and, for a quarantine for review, the fence of the record it failed (``once.fence``);
2. the upstream outbox identity, ``once.source`` and ``once.seq``, without which the redrive
   of a ``key=SOURCE_KEY`` consumer's message could never be keyed again;
3. ``once.dropped`` when anything had to be left out: the JSON list of the names of the
   message's own attributes that the copy does not carry (see below);
4. the message's own (the team's) attributes, in their order, as many as fit.

What SQS would refuse is never sent, so that a quarantine cannot fail forever on the same
request: an attribute SQS would not take (a name, type or value outside SQS's rules), the
team's attributes past the count, or past SQS's 1 MiB message size with the body. Only the
team's attributes give way (then ``once.key``, and a too long ``once.error``); the body never
does. A request SQS
still refuses for its content (a DLQ whose ``MaximumMessageSize`` is below 1 MiB, a rule of
SQS's not checked here) is sent once more with once's attributes only.

``once.dropped`` takes one of the 10 slots, at the cost of one more team attribute, only when
something is dropped already: a person who reviews or redrives the copy then knows it is not
a faithful one, and which attributes to restore from the producer; a count would not say
which, and silence would let a redrive lose routing attributes unnoticed. SQS's attribute
names hold no characters that need escaping, so the list stays short (at most 10 names of
256 characters each per quarantine). An earlier quarantine's list is kept on a redriven
message quarantined again, as the original message id is.

It keeps its message group; on a FIFO DLQ its deduplication id is its own message id. The
caller acknowledges the message only if this send succeeded (``Sent`` is truthy).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from once import constants as c
from once import sendrules as rules
from once.awserrors import SENT, Sent, error_code
from once.payload import clean_text, describe_error

# What SQS takes (attribute names, data types, values, the count and the message size) is
# ``once.sendrules``'s, each rule cited there.

#: ``once.dropped``: the names the DLQ copy does not carry, as a JSON list (cut to this many
#: characters, whole names only, should redrives ever pile many up).
QUARANTINE_ATTR_DROPPED = c.QUARANTINE_ATTR_DROPPED
_MAX_DROPPED_CHARS = 4096
#: The upstream outbox identity: carried before the team's attributes.
_IDENTITY = (c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ)
#: Ours, kept out of the carried ones: an earlier quarantine's values never survive a new one
#: as such (the original message id and the dropped names are taken over explicitly).
_OURS = (
    c.QUARANTINE_ATTR_MESSAGE_ID,
    c.QUARANTINE_ATTR_REASON,
    c.QUARANTINE_ATTR_ERROR,
    c.QUARANTINE_ATTR_FENCE,
    c.QUARANTINE_ATTR_KEY,
    QUARANTINE_ATTR_DROPPED,
)
#: AWS's error codes for a request refused for what it holds, not for who sent it or when:
#: worth one more try with once's attributes only. ``InvalidMessageContents`` is SendMessage's
#: modelled error for characters outside the allowed set (botocore's model); SQS answers
#: ``InvalidParameterValue`` for a message over the queue's ``MaximumMessageSize``.
_CONTENT_ERRORS = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidMessageContents",
        "InvalidAttributeName",
        "InvalidAttributeValue",
        "MessageTooLong",
        "ValidationError",
        "ValidationException",
    }
)


def _sendable(name: Any, attribute: Any) -> dict[str, Any] | None:
    """A message attribute in Lambda's shape as SendMessage takes it, or None when SQS would
    refuse it (``once.sendrules``): a name, type or value SQS does not take, an empty value, a
    binary value that is not base64."""
    if not isinstance(name, str) or not rules.attribute_name_taken(name):
        return None
    if not isinstance(attribute, dict):
        return None
    data_type = attribute.get("dataType")
    kind = rules.data_type_base(data_type) if isinstance(data_type, str) else None
    if kind is None:
        return None
    if kind == "Binary":
        encoded = attribute.get("binaryValue")
        if not isinstance(encoded, str):
            return None
        try:
            # Lambda hands binary values over base64-encoded; SendMessage wants the bytes.
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None
        if not rules.value_taken(kind, data, to_topic=False):
            return None
        return {"DataType": data_type, "BinaryValue": data}
    text = attribute.get("stringValue")
    if not isinstance(text, str) or not rules.value_taken(kind, text, to_topic=False):
        return None
    return {"DataType": data_type, "StringValue": text}


def _earlier_string(own: dict[str, Any], name: str) -> str | None:
    value = (own.get(name) or {}).get("stringValue") if isinstance(own.get(name), dict) else None
    return value if isinstance(value, str) and rules.text_taken(value, to_topic=False) else None


def _original_message_id(record: dict[str, Any]) -> str:
    """The producer's message: kept from an earlier quarantine when a message redriven from
    the DLQ is quarantined again, so that the chain of custody is never lost."""
    own = record.get("messageAttributes") or {}
    return _earlier_string(own, c.QUARANTINE_ATTR_MESSAGE_ID) or record["messageId"]


def _earlier_dropped(own: dict[str, Any]) -> list[str]:
    """The names an earlier quarantine of this message already dropped."""
    text = _earlier_string(own, QUARANTINE_ATTR_DROPPED)
    try:
        names = json.loads(text) if text else []
    except ValueError:
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _dropped_value(names: list[str]) -> str:
    """The JSON list of ``names``, whole names only, within ``_MAX_DROPPED_CHARS``."""
    kept: list[str] = []
    for name in dict.fromkeys(clean_text(n) for n in names):
        if len(json.dumps([*kept, name], ensure_ascii=False)) > _MAX_DROPPED_CHARS:
            break
        kept.append(name)
    return json.dumps(kept, ensure_ascii=False)


def _refused_for_content(error: BaseException) -> bool:
    """SQS (or the SDK's own check of the request against the model) refused the request for
    what it holds: another request may go through."""
    if type(error).__name__ == "ParamValidationError":
        return True
    code = error_code(error) or ""
    return code.rsplit("#", 1)[-1].rsplit(".", 1)[-1] in _CONTENT_ERRORS


class Quarantine:
    """Sends permanently failed records to the DLQ."""

    def __init__(self, client: Any, dlq_url: str | None) -> None:
        self._client = client
        self._url = dlq_url

    def send(
        self,
        record: dict[str, Any],
        reason: str,
        error: str,
        *,
        fence: int | None = None,
        key: str | None = None,
    ) -> Sent:
        """``Sent`` (truthy) when the record is safely in the DLQ; otherwise why not, and the
        caller reports it failed. ``fence``: the FAILED record's, on a quarantine for review
        (``once.fence``). ``key``: the business key, where the body yielded one
        (``once.key``).

        Total: whatever refuses the send (SQS, the SDK's checks of the request, a record that
        is not Lambda's shape), the message is not in the DLQ, and the answer says so with
        the error described as every error is (``payload.describe_error``), never a value. A
        request refused for its content is sent once more with once's attributes only."""
        if not self._url:
            return Sent(False, "no DLQ configured")
        try:
            request = self._request(self._url, record, reason, error, fence, key=key)
            size = rules.request_message_bytes(request["MessageBody"], request["MessageAttributes"])
            if size > rules.SQS_MESSAGE_MAX_BYTES:
                return Sent(False, "over SQS's 1 MiB message size with once's attributes")
            try:
                self._client.send_message(**request)
                return SENT
            except Exception as refused:
                minimal = self._request(
                    self._url, record, reason, error, fence, key=key, team=False
                )
                if not _refused_for_content(refused) or minimal == request:
                    return Sent(False, describe_error(refused))
            self._client.send_message(**minimal)
            return SENT
        except Exception as failed:
            return Sent(False, describe_error(failed))

    @staticmethod
    def _request(
        url: str,
        record: dict[str, Any],
        reason: str,
        error: str,
        fence: int | None,
        *,
        key: str | None = None,
        team: bool = True,
    ) -> dict[str, Any]:
        """The SendMessage request that puts ``record`` in the DLQ at ``url``: attributes in
        the order of need (module docstring), what SQS would refuse left out and named.
        ``team=False``: once's attributes only, every team attribute named as dropped."""
        own: dict[str, Any] = record.get("messageAttributes") or {}
        ours: dict[str, dict[str, Any]] = {
            c.QUARANTINE_ATTR_REASON: {"DataType": "String", "StringValue": reason},
            c.QUARANTINE_ATTR_MESSAGE_ID: {
                "DataType": "String",
                "StringValue": _original_message_id(record),
            },
        }
        if fence is not None:
            ours[c.QUARANTINE_ATTR_FENCE] = {"DataType": "Number", "StringValue": str(fence)}
        if key:
            ours[c.QUARANTINE_ATTR_KEY] = {"DataType": "String", "StringValue": clean_text(key)}
        described = clean_text(error or reason)[: c.ERROR_MAX_CHARS]
        ours[c.QUARANTINE_ATTR_ERROR] = {"DataType": "String", "StringValue": described}
        identity: dict[str, dict[str, Any]] = {}
        kept: list[tuple[str, dict[str, Any]]] = []
        for name, attribute in own.items():
            if name in _OURS:
                continue
            sendable = _sendable(name, attribute)
            if sendable is None:
                continue
            if name in _IDENTITY:
                identity[name] = sendable
            elif team:
                kept.append((name, sendable))
        earlier = _earlier_dropped(own)
        body: str = record["body"]

        def attributes() -> dict[str, dict[str, Any]]:
            carried = ours | identity | dict(kept)
            dropped = earlier + [str(n) for n in own if n not in _OURS and n not in carried]
            if not dropped:
                return carried
            value = {"DataType": "String", "StringValue": _dropped_value(dropped)}
            return ours | identity | {QUARANTINE_ATTR_DROPPED: value} | dict(kept)

        def too_large() -> bool:
            return rules.request_message_bytes(body, attributes()) > rules.SQS_MESSAGE_MAX_BYTES

        # Past the count, then past the size: the team's last attributes give way first.
        while kept and len(attributes()) > rules.MAX_ATTRIBUTES:
            kept.pop()
        while kept and too_large():
            kept.pop()
        # Then once's own that the record can do without: the key (once inspect finds the
        # record by the body's key), and the error's text (the reason stays).
        if too_large():
            ours.pop(c.QUARANTINE_ATTR_KEY, None)
        if too_large():
            ours[c.QUARANTINE_ATTR_ERROR]["StringValue"] = reason
        request: dict[str, Any] = {
            "QueueUrl": url,
            "MessageBody": body,
            "MessageAttributes": attributes(),
        }
        group = (record.get("attributes") or {}).get("MessageGroupId")
        if group:
            # A FIFO message keeps its group; so does a fair (standard) queue's tenant.
            request["MessageGroupId"] = group
        if rules.is_fifo(url):
            # Unique per source message and the same on each of its redeliveries: a retried
            # quarantine of one message is deduplicated, two messages never are (the
            # producer's own deduplication id may be shared by different messages).
            # Standard queues take no deduplication id.
            request["MessageDeduplicationId"] = record["messageId"]
        return request
