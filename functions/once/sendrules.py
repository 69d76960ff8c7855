"""The rules SQS, SNS and EventBridge hold a message (an event) to, from their documentation
and botocore's service models, so that once refuses at the call exactly what AWS refuses and
nothing it accepts.

A message AWS would refuse, staged by ``attempt.send``, would be committed as owed and never
sent (``owed`` on every redelivery until the DLQ); a DLQ copy SQS would refuse would fail the
quarantine on every try. So each rule is written once, here, each AWS's own and cited where
it is defined (botocore's models carry no min/max/pattern on these shapes, only their
documentation), and every module holds a message to it from here: ``effects`` refuses at
``attempt.send``, ``quarantine`` leaves out of the DLQ copy what SQS would not take,
``outbox`` sizes its batches, ``payload`` escapes the characters SQS refuses.

Pure: no I/O, nothing of once imported. Its regular expressions are compiled at their first
use (``pattern``), not at import: a record that sends nothing and fails in nothing uses none of
them, and compiling them all is about a millisecond of every cold start.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit


@functools.cache
def pattern(text: str, flags: int = 0) -> re.Pattern[str]:
    """The regular expression ``text``, compiled once, at its first use."""
    return re.compile(text, flags)


# --- Destinations ------------------------------------------------------------------------------


def is_topic(destination: str) -> bool:
    """An SNS topic's ARN (``arn:<partition>:sns:...``); anything else sent to is a queue URL."""
    parts = destination.split(":")
    return len(parts) >= 6 and parts[0] == "arn" and parts[2] == "sns"


def is_fifo(destination: str) -> bool:
    """A FIFO queue's URL or a FIFO topic's ARN: "A FIFO queue name must end with the .fifo
    suffix", and so must a FIFO topic's.
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html
    https://docs.aws.amazon.com/sns/latest/api/API_CreateTopic.html"""
    return destination.endswith(".fifo")


#: The region of an SQS queue URL's host: ``sqs.<region>.amazonaws.com`` (``.com.cn``,
#: ``sqs-fips.``, a VPC endpoint's ``...sqs.<region>.vpce.amazonaws.com``, dual-stack
#: ``sqs.<region>.api.aws``) and the legacy ``<region>.queue.amazonaws.com``;
#: ``queue.amazonaws.com`` is us-east-1. Another host (a local engine) names no region.
#: https://docs.aws.amazon.com/general/latest/gr/sqs-service.html
_SQS_HOST = r"(?:.+\.)?sqs(?:-fips)?\.([a-z0-9-]+)\.(?:vpce\.)?(?:amazonaws\.com(?:\.cn)?|api\.aws)"
_LEGACY_SQS_HOST = r"([a-z0-9-]+)\.queue\.amazonaws\.com(?:\.cn)?"


def destination_region(destination: str) -> str | None:
    """The region a topic's or a bus's ARN or a queue URL names, or None if it names none."""
    if is_topic(destination) or is_event_bus(destination):
        return destination.split(":")[3] or None
    host = (urlsplit(destination).hostname or "").lower()
    if host == "queue.amazonaws.com":
        return "us-east-1"
    match = pattern(_SQS_HOST).fullmatch(host) or pattern(_LEGACY_SQS_HOST).fullmatch(host)
    return match.group(1) if match else None


def other_region(destination: str, region: str | None) -> str | None:
    """The region of ``destination`` when a client in ``region`` cannot send to it (None when
    it can, or when either region is unknown).

    SNS: "You can publish messages only to topics and endpoints in the same Amazon Web
    Services Region" (https://docs.aws.amazon.com/sns/latest/api/API_Publish.html, botocore
    sns/2010-03-31 operation Publish). SQS: a queue is in its region's endpoint, and another
    region's URL is not found there (QueueDoesNotExist / InvalidAddress;
    https://docs.aws.amazon.com/general/latest/gr/sqs-service.html). EventBridge: a bus is a
    resource of its region's endpoint ("Only the rules that are associated with this event bus
    are used"; a bus in another region is reached through a global endpoint, which once does
    not use: botocore events/2015-10-07 PutEventsRequestEntry.EventBusName)."""
    there = destination_region(destination)
    return there if region is not None and there is not None and there != region else None


# --- Sizes -------------------------------------------------------------------------------------

#: SQS: one message, body and attributes together, takes at most 1 MiB (since 2025).
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
#: (botocore sqs/2012-11-05 SendMessageRequest.MessageBody; MessageAttributeValue: "All parts
#: of the message attribute, including Name, Type, and Value, are part of the message size
#: restriction (1 MiB or 1,048,576 bytes)").
SQS_MESSAGE_MAX_BYTES = 1024 * 1024
#: SNS: one message, body and attributes together, takes at most 256 KiB (the topic's default
#: ``MaximumMessageSize``; a topic may be set higher, up to 1 MiB, which once cannot see at the
#: call, so it holds every topic to the default).
#: https://docs.aws.amazon.com/sns/latest/api/API_Publish.html (botocore sns/2010-03-31
#: PublishInput.Message, MessageAttributeValue).
SNS_MESSAGE_MAX_BYTES = 256 * 1024
#: SendMessageBatch: "the maximum total payload size (the sum of the individual lengths of all
#: of the batched messages) [is] 1 MiB".
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html
#: (botocore sqs/2012-11-05 operation SendMessageBatch).
SQS_BATCH_MAX_BYTES = 1024 * 1024
#: PublishBatch: "the maximum total payload size ... [is] 256 KiB" by default, "including each
#: message's body and attributes".
#: https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html (botocore sns/2010-03-31
#: operation PublishBatch).
SNS_BATCH_MAX_BYTES = 256 * 1024
#: Entries in one SendMessageBatch or PublishBatch ("up to 10 messages"):
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html
#: https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html
BATCH_MAX_ENTRIES = 10


def message_max_bytes(destination: str) -> int:
    """The largest message ``destination`` takes (body and attributes)."""
    return SNS_MESSAGE_MAX_BYTES if is_topic(destination) else SQS_MESSAGE_MAX_BYTES


def batch_max_bytes(destination: str) -> int:
    """The largest payload of one SendMessageBatch or PublishBatch to ``destination``."""
    return SNS_BATCH_MAX_BYTES if is_topic(destination) else SQS_BATCH_MAX_BYTES


def _utf8_bytes(text: str) -> int:
    # Total: a lone surrogate (no service takes one: ``text_taken``) counts as its 3 bytes.
    return len(text.encode("utf-8", errors="surrogatepass"))


def attribute_bytes(name: str, data_type: str, value: str | bytes) -> int:
    """What one attribute adds to a message's size, as AWS counts it: its name, its data type
    and its value ("All parts of the message attribute, including Name, Type, and Value, are
    part of the message size restriction": MessageAttributeValue, SQS and SNS)."""
    size = _utf8_bytes(name) + _utf8_bytes(data_type)
    return size + (len(value) if isinstance(value, bytes) else _utf8_bytes(value))


def message_bytes(body: str, attributes: Iterable[tuple[str, str, str | bytes]]) -> int:
    """A message's size as SQS and SNS count it: the body's UTF-8 bytes and every attribute's
    name, data type and value (``attribute_bytes``)."""
    return _utf8_bytes(body) + sum(attribute_bytes(*a) for a in attributes)


def request_message_bytes(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> int:
    """``message_bytes`` of a message in the request's shape: ``MessageAttributes`` as
    SendMessage, SendMessageBatch and PublishBatch take them (``{"DataType": ...,
    "StringValue": ...}`` or ``"BinaryValue"``)."""
    return message_bytes(
        body,
        (
            (name, a["DataType"], a.get("StringValue", a.get("BinaryValue", b"")))
            for name, a in attributes.items()
        ),
    )


# --- Characters --------------------------------------------------------------------------------

#: The characters SQS refuses in a body and in a String (or Number) attribute value. It takes
#: XML 1.0's ``#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF``; any other is
#: refused (``InvalidMessageContents``). Written as the characters it refuses (controls but
#: tab, newline and carriage return; surrogates; U+FFFE, U+FFFF): the same set as the negation
#: of the ranges above, and a class re compiles in well under a millisecond, where the negated
#: one over the whole of Unicode takes several. Its text: ``pattern`` compiles it.
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
#: (botocore sqs/2012-11-05 SendMessageRequest.MessageBody; MessageAttributeValue: "the Value
#: attribute has the same restrictions on the content as the message body").
SQS_REFUSED_CHARACTER = "[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]"
#: SNS states no character set: "messages must be UTF-8 encoded strings", and a String
#: attribute value "has the same restrictions on the content as the message body". What is not
#: UTF-8 is a lone surrogate (a str holding one cannot be encoded).
#: https://docs.aws.amazon.com/sns/latest/api/API_Publish.html
#: https://docs.aws.amazon.com/sns/latest/api/API_MessageAttributeValue.html
#: (botocore sns/2010-03-31 PublishInput.Message, MessageAttributeValue).
_SNS_REFUSED_CHARACTER = "[\ud800-\udfff]"


def text_taken(text: str, *, to_topic: bool) -> bool:
    """Whether SQS (or SNS, ``to_topic``) takes ``text`` as a body or a String value: not
    empty, and every character one it takes ("Name, type, value and the message body must not
    be empty or null": MessageAttributeValue, both services)."""
    refused = _SNS_REFUSED_CHARACTER if to_topic else SQS_REFUSED_CHARACTER
    return bool(text) and pattern(refused).search(text) is None


# --- Message attributes ------------------------------------------------------------------------

#: "A message can contain up to 10 metadata attributes" (SQS).
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
#: (SNS delivers at most 10 to an SQS subscription with raw delivery:
#: https://docs.aws.amazon.com/sns/latest/dg/sns-message-attributes.html)
MAX_ATTRIBUTES = 10

#: A message attribute's name, SQS's and SNS's rule alike: ``A-Z a-z 0-9 _ - .``, up to 256
#: characters, case-sensitive; not starting with ``AWS.`` or ``Amazon.`` in any casing; not
#: starting or ending with a period, no two periods in succession.
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html#message-attribute-components
#: https://docs.aws.amazon.com/sns/latest/dg/sns-message-attributes.html
_ATTRIBUTE_NAME = r"[A-Za-z0-9_\-.]{1,256}"
#: AWS's reserved prefixes (same pages), compared in lower case.
_RESERVED_PREFIXES = ("aws.", "amazon.")


def attribute_name_taken(name: str) -> bool:
    """Whether SQS and SNS take ``name`` as a message attribute's name."""
    return (
        pattern(_ATTRIBUTE_NAME).fullmatch(name) is not None
        and not name.lower().startswith(_RESERVED_PREFIXES)
        and not name.startswith(".")
        and not name.endswith(".")
        and ".." not in name
    )


#: The data types, SQS's: ``String``, ``Number``, ``Binary`` (SNS takes these three too, and
#: adds ``String.Array``, which once never sends), each optionally with a custom label after
#: a period (``Number.float``: SQS); case-sensitive, up to 256 characters, with the body's
#: restrictions on characters.
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html#sqs-message-attributes
#: https://docs.aws.amazon.com/sns/latest/dg/sns-message-attributes.html#SNSMessageAttributes.DataTypes
DATA_TYPES = ("String", "Number", "Binary")
DATA_TYPE_MAX_CHARS = 256
_DATA_TYPE = rf"({'|'.join(DATA_TYPES)})(\..+)?"


def data_type_base(data_type: str) -> str | None:
    """The type (``String``, ``Number``, ``Binary``) of a data type SQS takes, its custom label
    aside (``Number.float`` is a ``Number``); None for one it refuses."""
    if len(data_type) > DATA_TYPE_MAX_CHARS or not text_taken(data_type, to_topic=False):
        return None
    kind = pattern(_DATA_TYPE, re.DOTALL).fullmatch(data_type)
    return kind.group(1) if kind else None


#: A Number attribute, SQS's and SNS's rule alike: "A number can have up to 38 digits of
#: precision, and it can be between 10^-128 and 10^+126" ("Leading and trailing zeroes are
#: trimmed"); both ends taken. 0 is a number. Its value is written as a decimal number.
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html#sqs-message-attributes
#: https://docs.aws.amazon.com/sns/latest/dg/sns-message-attributes.html#SNSMessageAttributes.DataTypes
NUMBER_MAX_DIGITS = 38
NUMBER_MIN = Decimal(1).scaleb(-128)
NUMBER_MAX = Decimal(1).scaleb(126)
_NUMBER_TEXT = r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?"


def number_taken(number: Decimal) -> bool:
    """Whether SQS and SNS take ``number`` as a Number: 0, or up to 38 digits of precision
    (leading and trailing zeros trimmed) between 10^-128 and 10^+126 in magnitude."""
    if not number.is_finite():
        return False
    if number.is_zero():
        return True
    digits = "".join(map(str, number.as_tuple().digits)).strip("0")
    # ``copy_abs``: exact, where ``abs`` would round to the context's 28 digits.
    return len(digits) <= NUMBER_MAX_DIGITS and NUMBER_MIN <= number.copy_abs() <= NUMBER_MAX


def number_text_taken(text: str) -> bool:
    """Whether SQS and SNS take ``text`` as a Number attribute's value."""
    if pattern(_NUMBER_TEXT).fullmatch(text) is None:
        return False
    try:
        number = Decimal(text)
    except (InvalidOperation, ValueError):  # an exponent past what Decimal holds
        return False
    return number_taken(number)


def value_taken(data_type: str, value: str | bytes, *, to_topic: bool) -> bool:
    """Whether SQS (or SNS, ``to_topic``) takes ``value`` as an attribute's value of type
    ``data_type`` (``data_type_base``'s): a Binary one non-empty bytes, a String one text it
    takes (``text_taken``), a Number one also a number it takes."""
    if data_type == "Binary":
        return isinstance(value, bytes) and bool(value)
    if not isinstance(value, str) or not text_taken(value, to_topic=to_topic):
        return False
    return data_type != "Number" or number_text_taken(value)


# --- Message group ids ------------------------------------------------------------------------

#: A message group id, SQS's (FIFO queues; standard queues take one too, for fair queues) and
#: SNS's (FIFO topics; a standard topic takes one too, forwarded to SQS standard
#: subscriptions: "When provided, the same validation rules apply as for FIFO topics") alike:
#: 1 to 128 characters, alphanumeric (a-z, A-Z, 0-9) and punctuation
#: ``!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~``.
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
#: https://docs.aws.amazon.com/sns/latest/api/API_Publish.html (botocore
#: SendMessageRequest.MessageGroupId, PublishInput.MessageGroupId, PublishBatchRequestEntry).
_GROUP_ID = r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}"
#: (A FIFO target's ``MessageDeduplicationId`` takes the same characters, up to 128: once's is
#: 64 hex digits, ``effects.deduplication_id``.)


def group_id_taken(group_id: str) -> bool:
    """Whether SQS and SNS take ``group_id`` as a ``MessageGroupId``."""
    return pattern(_GROUP_ID).fullmatch(group_id) is not None


# --- EventBridge -------------------------------------------------------------------------------

#: An event bus's ARN, as PutEvents' ``EventBusName`` takes it (botocore events/2015-10-07
#: ``NonPartnerEventBusNameOrArn``: 1 to 1600 characters, pattern
#: ``(arn:aws[\w-]*:events:[a-z]+-[a-z]+-[\w-]+:[0-9]{12}:event-bus\/)?[\.\-_A-Za-z0-9]+``).
#: once sends to a bus named by its ARN only: the ARN says the bus's region, which must be the
#: function's.
#: https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsRequestEntry.html
_EVENT_BUS_ARN = r"arn:aws[\w-]*:events:([a-z]+-[a-z]+-[\w-]+):[0-9]{12}:event-bus/[.\-_A-Za-z0-9]+"
EVENT_BUS_NAME_MAX_CHARS = 1600


def is_event_bus(destination: str) -> bool:
    """An EventBridge event bus's ARN (``arn:<partition>:events:<region>:<account>:event-bus/
    <name>``), as PutEvents takes it."""
    return (
        isinstance(destination, str)
        and len(destination) <= EVENT_BUS_NAME_MAX_CHARS
        and pattern(_EVENT_BUS_ARN, re.ASCII).fullmatch(destination) is not None
    )


def looks_like_event_bus(destination: str) -> bool:
    """Whether ``destination`` is meant as an event bus's ARN (its service is ``events``),
    taken or not: ``attempt.send`` says why it refuses one it does not take."""
    parts = destination.split(":")
    return len(parts) >= 6 and parts[0] == "arn" and parts[2] == "events"


#: Entries in one PutEvents request: 1 to 10 (botocore events/2015-10-07
#: ``PutEventsRequestEntryList``: min 1, max 10).
#: https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html
EVENTS_MAX_ENTRIES = 10
#: "The total entry size must be less than" the payload limit, for all the entries of one
#: request together, each counted as the calculation page counts it (``event_entry_bytes``).
#: The limit is 1 MB since January 2026 ("AWS has raised the maximum payload size from 256 KB
#: to 1 MB for ... Amazon EventBridge",
#: https://aws.amazon.com/blogs/compute/more-room-to-build-serverless-services-now-support-payloads-up-to-1-mb);
#: older pages still say 256 KB. No page says whether a MB is 1,000,000 or 1,048,576 bytes:
#: once reads the smaller, so that nothing it accepts is refused.
#: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html
EVENTS_REQUEST_MAX_BYTES = 1_000_000
#: A PutEventsRequestEntry's ``Time``, when given, counts 14 bytes (same page). once sends none:
#: EventBridge stamps the event with the time of the PutEvents call.
_EVENT_TIME_BYTES = 14
#: ``DetailType``: "Free-form string, with a maximum of 128 characters" (botocore
#: events/2015-10-07 PutEventsRequestEntry.DetailType).
DETAIL_TYPE_MAX_CHARS = 128
#: "Customer-generated events can have any value [as their source], as long as it doesn't
#: begin with 'aws.'" (the ``source`` field, https://docs.aws.amazon.com/eventbridge/latest/
#: ref/overiew-event-structure.html), compared in lower case.
_AWS_SOURCE_PREFIX = "aws."
#: "PutEvents will only process nested JSON up to 1100 levels deep" (the API reference; an
#: earlier page says 1000: the smaller is taken). once holds its own events to less
#: (``effects.DETAIL_MAX_DEPTH``).
#: https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html
PUT_EVENTS_MAX_DEPTH = 1000
#: "For the JSON number (integer) data type, the constraints are: a minimum value of
#: -9,223,372,036,854,775,808 and a maximum value of 9,223,372,036,854,775,807" (same page).
DETAIL_INT_MIN = -(2**63)
DETAIL_INT_MAX = 2**63 - 1


def event_entry_bytes(entry: Mapping[str, Any]) -> int:
    """A PutEventsRequestEntry's size as EventBridge counts it: ``Time`` 14 bytes if given; the
    UTF-8 bytes of ``Source``, ``DetailType``, ``Detail`` and each of ``Resources``.
    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html"""
    size = _EVENT_TIME_BYTES if entry.get("Time") is not None else 0
    for name in ("Source", "DetailType", "Detail"):
        value = entry.get(name)
        if isinstance(value, str):
            size += _utf8_bytes(value)
    for resource in entry.get("Resources") or ():
        if isinstance(resource, str):
            size += _utf8_bytes(resource)
    return size


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is past a double's range")
    return number


def parse_detail(text: str) -> Any:
    """A ``Detail``'s value, parsed as strict JSON ("A valid JSON object"): Python's parser also
    takes ``NaN`` and ``Infinity``, which JSON has not, and reads a number past a double's
    range (``1e400``) as infinity, which no JSON text can carry on: an event AWS delivers is
    JSON ("Events are represented as JSON objects",
    https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html), so such
    a number is refused too. Raises ``ValueError`` (or ``RecursionError``) for a text that is
    not JSON."""
    return json.loads(text, parse_constant=_not_json, parse_float=_finite)


def detail_problem(detail: Any, max_depth: int = PUT_EVENTS_MAX_DEPTH) -> str | None:
    """Why EventBridge would refuse ``detail`` (the parsed ``Detail``) as an event's detail, or
    None: "A valid JSON object" (botocore events/2015-10-07 PutEventsRequestEntry.Detail),
    nested at most ``max_depth`` levels, its integers within a 64-bit signed range."""
    if not isinstance(detail, dict):
        return "Detail is not a JSON object"
    stack: list[tuple[Any, int]] = [(detail, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            return f"Detail is nested deeper than {max_depth} levels"
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not DETAIL_INT_MIN <= value <= DETAIL_INT_MAX
        ):
            return "Detail holds an integer outside -2^63 .. 2^63-1"
    return None


def source_problem(source: Any) -> str | None:
    """Why EventBridge would refuse ``source`` as an event's ``Source``, or None: required, not
    starting with ``aws.`` (AWS's own events), UTF-8 text."""
    if not isinstance(source, str) or not source:
        return "Source is a required argument"
    if source.lower().startswith(_AWS_SOURCE_PREFIX):
        return "Source may not begin with 'aws.' (AWS's own events)"
    if not text_taken(source, to_topic=True):
        return "Source is not UTF-8 text"
    return None


def detail_type_problem(detail_type: Any) -> str | None:
    """Why EventBridge would refuse ``detail_type`` as an event's ``DetailType``, or None:
    required, at most 128 characters, UTF-8 text."""
    if not isinstance(detail_type, str) or not detail_type:
        return "DetailType is a required argument"
    if len(detail_type) > DETAIL_TYPE_MAX_CHARS:
        return f"DetailType is longer than {DETAIL_TYPE_MAX_CHARS} characters"
    if not text_taken(detail_type, to_topic=True):
        return "DetailType is not UTF-8 text"
    return None


def event_entry_problem(entry: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(ErrorCode, ErrorMessage)`` as PutEvents reports one entry it fails, or None for an
    entry it takes: ``InvalidArgument`` for a missing or refused ``Source`` or ``DetailType``
    or a missing ``Detail`` ("Detail, DetailType, and Source are required ... If you include
    event entries in a request that do not include each of those properties, EventBridge fails
    that entry"), ``MalformedDetail`` for a ``Detail`` that is no valid JSON object ("The JSON
    provided is not valid"). The codes: https://docs.aws.amazon.com/eventbridge/latest/
    APIReference/API_PutEventsResultEntry.html. (An entry past the request's size fails the
    whole request: ``EVENTS_REQUEST_MAX_BYTES``.)"""
    for problem in (
        source_problem(entry.get("Source")),
        detail_type_problem(entry.get("DetailType")),
    ):
        if problem is not None:
            return "InvalidArgument", problem
    text = entry.get("Detail")
    if not isinstance(text, str) or not text:
        return "InvalidArgument", "Detail is a required argument"
    try:
        detail = parse_detail(text)
    except (ValueError, RecursionError):
        return "MalformedDetail", "Detail is malformed."
    problem = detail_problem(detail)
    return ("MalformedDetail", problem) if problem is not None else None
