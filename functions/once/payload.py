"""What the protocol derives from a message and from a result: the parsed and unwrapped
body, the business key, the payload hash, the stored result and the stored error.

Everything here is pure and cheap. A body that cannot yield a key is a permanent failure
(`BadMessage`), never an exception that escapes the batch.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import socket
import urllib.error
from dataclasses import dataclass
from typing import Any

import jmespath
from aws_lambda_powertools.shared.json_encoder import Encoder
from aws_lambda_powertools.utilities.jmespath_utils import PowertoolsFunctions
from jmespath.parser import ParsedResult

from once import constants as c
from once.awserrors import error_code
from once.models import PermanentError, TransientError
from once.sendrules import SQS_REFUSED_CHARACTER, pattern

#: Sentinel for ``validate``: hash the whole body.
WHOLE_BODY = "@"
#: The key of what is stored for a value that cannot be stored as JSON: its type.
_UNENCODABLE = "unencodable"
#: Longest type name kept in a stand-in or an error description.
_TYPE_NAME_MAX_CHARS = 100


class BadMessage(Exception):
    """The body cannot be processed at all: not JSON, no match for the envelope, no usable
    key, a part to validate that cannot be computed. Quarantined with ``reason``; the
    message is ours, free of body values."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Parsed:
    """A body ready for the protocol."""

    body: Any
    key: str
    payload_hash: str
    #: The hash an earlier version of once gave this body, where the rule changed since: a
    #: ``SOURCE_KEY`` consumer behind SNS without raw delivery hashed SNS's whole
    #: notification (``without_transport``). A record written then is met under it
    #: (``protocol.hashed_before``), so a deploy turns no retry into a CONFLICT.
    previous_hash: str | None = None

    def under_previous_hash(self) -> Parsed:
        """This body as the earlier version hashed it."""
        assert self.previous_hash is not None
        return Parsed(self.body, self.key, self.previous_hash)


def canonical_json(value: Any) -> str:
    """One JSON text per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Powertools' JMESPath functions (``powertools_json``, ``powertools_base64``,
#: ``powertools_base64_gzip``), available in the envelope, key and validate expressions.
_OPTIONS = jmespath.Options(custom_functions=PowertoolsFunctions())


class BodyReader:
    """Parses bodies with the compiled JMESPath expressions of one handler."""

    def __init__(self, key: str, validate: str | None, envelope: str | None = None) -> None:
        #: None: the key is the upstream outbox message's identity (``SOURCE_KEY``).
        self._key: ParsedResult | None = None if key == c.SOURCE_KEY else jmespath.compile(key)
        self._validate: ParsedResult | None = (
            jmespath.compile(validate) if validate is not None else None
        )
        self._envelope: ParsedResult | None = (
            jmespath.compile(envelope) if envelope is not None else None
        )

    def read(self, raw_body: str, attributes: dict[str, Any] | None = None) -> Parsed:
        """The body, its key and its payload hash; or ``BadMessage`` for this body alone.
        ``attributes``: the message's attributes in Lambda's shape, where a ``SOURCE_KEY``
        reader finds the key (or, behind SNS without raw delivery, in the body's SNS
        envelope: see ``_source_key``).

        Total by design: whatever the body holds and whatever the expressions do with it
        (a JMESPath type error, a lone surrogate, nesting past the recursion limit), the
        failure is this body's bad input, never an exception that fails the whole batch.
        The detail names the failing step and the error's class, never a body value.
        """
        try:
            body = json.loads(raw_body)
        except RecursionError:
            # A body nested deeper than Python's recursion limit (``[[[[...``, well within
            # SQS's 1 MiB).
            raise BadMessage(c.REASON_INVALID_JSON, "body is nested too deeply") from None
        except Exception as error:
            raise BadMessage(c.REASON_INVALID_JSON, f"body is not JSON ({_name(error)})") from None
        message = body  # as SQS holds it: an SNS notification keeps its attributes here
        if self._envelope is not None:
            body = self._unwrap(body)
        hashed, previous = body, None
        if self._key is not None:
            key = self._key_of(body)
        else:
            key, carrier = _source_key(attributes, message)
            # What the identity names is hashed, never how SNS or EventBridge carried it.
            if carrier == _SNS:
                hashed = without_transport(body)
                previous = self._hash(body) if hashed is not body else None
            elif carrier == _EVENT:
                hashed = without_event_transport(body)
        return Parsed(body, str(key), self._hash(hashed), previous)

    def _hash(self, body: Any) -> str:
        """The payload hash: sha256 of the canonical JSON of the validated part of ``body``."""
        try:
            validated = (
                self._validate.search(body, _OPTIONS) if self._validate is not None else None
            )
        except Exception as error:
            raise BadMessage(
                c.REASON_INVALID_PAYLOAD,
                f"validate expression failed on this body ({_name(error)})",
            ) from None
        try:
            return sha256(canonical_json(validated))
        except UnicodeEncodeError:
            raise BadMessage(
                c.REASON_INVALID_JSON, "body holds a lone surrogate: it is not Unicode text"
            ) from None
        except Exception as error:
            raise BadMessage(
                c.REASON_INVALID_JSON, f"body cannot be hashed ({_name(error)})"
            ) from None

    def _unwrap(self, body: Any) -> Any:
        """What the envelope expression finds in the body: the payload that the key, the
        validation and business code see."""
        assert self._envelope is not None
        try:
            inner = self._envelope.search(body, _OPTIONS)
        except Exception as error:
            raise BadMessage(
                c.REASON_INVALID_ENVELOPE, f"envelope failed on this body ({_name(error)})"
            ) from None
        if inner is None:
            raise BadMessage(c.REASON_INVALID_ENVELOPE, "envelope matched nothing in this body")
        return inner

    def _key_of(self, body: Any) -> str | int:
        assert self._key is not None
        try:
            key = self._key.search(body, _OPTIONS) if isinstance(body, dict) else None
        except Exception as error:
            raise BadMessage(
                c.REASON_INVALID_KEY, f"key expression failed on this body ({_name(error)})"
            ) from None
        # bool is an int to Python, but never a business key.
        if isinstance(key, bool) or not (isinstance(key, int) or (isinstance(key, str) and key)):
            raise BadMessage(
                c.REASON_INVALID_KEY,
                f"key is not a non-empty string or an integer (got {_name(key)})",
            )
        try:
            size = len(str(key).encode("utf-8"))
        except UnicodeEncodeError:
            raise BadMessage(
                c.REASON_INVALID_KEY, "key holds a lone surrogate: it is not Unicode text"
            ) from None
        _check_key_size(size)
        return key


def _check_key_size(size: int) -> None:
    if size > c.MAX_KEY_BYTES:
        raise BadMessage(c.REASON_INVALID_KEY, f"key is longer than {c.MAX_KEY_BYTES} bytes")


#: Where a ``SOURCE_KEY`` identity was found, when not in SQS's message attributes: an SNS
#: notification's ``MessageAttributes``, a whole EventBridge event's ``detail.once``, or the
#: top-level ``once`` of the part of an event a rule's target delivered.
_SNS = "sns"
_EVENT = "event"
_EVENT_PART = "event-part"


def _source_key(attributes: Any, message: Any) -> tuple[str, str | None]:
    """The identity an upstream once outbox gave the message: ``<once.source>#<once.seq>``,
    and where it was found beside SQS's attributes (``_SNS``: the body is SNS's notification;
    ``_EVENT``: the body is an EventBridge event, or the part of one a rule's target kept).

    Where it is found, first that holds both:

    - the SQS message's attributes (``attributes``, Lambda's shape: ``stringValue``): a
      queue the outbox sends to, or an SNS subscription with raw message delivery on, which
      turns SNS's message attributes into SQS's;
    - else the SNS envelope that is the body (``message``, the body as SQS holds it, before
      ``envelope`` unwraps it) when the body is an SNS notification
      (``"Type": "Notification"``) with ``MessageAttributes``: with raw message delivery
      off, SNS's default and CDK's ``SqsSubscription``'s, the SQS message has no message
      attributes, and SNS writes them into its JSON document as
      ``"MessageAttributes": {"once.source": {"Type": "String", "Value": "..."},
      "once.seq": {"Type": "Number", "Value": "0"}}`` beside ``"Message"``
      (https://docs.aws.amazon.com/sns/latest/dg/sns-large-payload-raw-message-delivery.html;
      https://docs.aws.amazon.com/sns/latest/dg/firehose-archived-message-format-S3.html
      lists ``MessageAttributes`` among the metadata SNS adds when raw delivery is off). Only
      the ``String`` and ``Number`` types carry an identity (SNS's types are ``String``,
      ``String.Array``, ``Number`` and ``Binary``, the last base64 text:
      https://docs.aws.amazon.com/sns/latest/api/API_MessageAttributeValue.html). A DLQ copy
      of such a message, redriven, is found the same way: its body is kept exactly;
    - else the event's detail: an event has no message attributes, and a rule's SQS target
      sets none (its ``SqsParameters`` hold a ``MessageGroupId`` only:
      https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_SqsParameters.html), so
      the outbox writes the identity into the detail, ``"once": {"source": ..., "seq": ...}``
      (``effects.event_detail``). A rule's target delivers the whole event by default
      (``detail.once``: https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html),
      the detail alone with ``InputPath: "$.detail"``, or what an input transformer writes,
      which must keep ``once`` at its top. The top-level ``once`` is read first: a whole
      event has none (its members are EventBridge's), nor has an SNS notification, while the
      team's detail may be either, forwarded (its own ``detail.once`` or
      ``MessageAttributes`` are another operation's identity).

    The SQS attributes win when more than one holds an identity. Every form gives one key for
    one identity: the same checks apply to all. Reading the body trusts no one more than
    reading SQS's attributes does: whoever may send the body to the queue may set its
    attributes too.
    """
    sqs = attributes if isinstance(attributes, dict) else {}
    source = _sqs_string(sqs.get(c.OUTBOX_ATTR_SOURCE))
    seq = _sqs_string(sqs.get(c.OUTBOX_ATTR_SEQ))
    carrier: str | None = None
    if source is None or seq is None:
        # The top-level ``once`` first: the outbox wrote it at the top of what this target
        # delivered (``InputPath: "$.detail"``, a transformer), and neither a whole event nor
        # an SNS notification has one, while a team's detail may hold either, forwarded.
        part = (
            _carried_identity(message.get(c.EVENT_IDENTITY)) if isinstance(message, dict) else None
        )
        sns = _sns_identity(message) if part is None else None
        event = _event_identity(message) if part is None and sns is None else None
        if part is not None:
            (source, seq), carrier = part, _EVENT_PART
        elif sns is not None:
            (source, seq), carrier = sns, _SNS
        elif event is not None:
            (source, seq), carrier = event, _EVENT
    if not isinstance(source, str) or not source or not isinstance(seq, str):
        raise BadMessage(
            c.REASON_INVALID_KEY,
            f"no {c.OUTBOX_ATTR_SOURCE} and {c.OUTBOX_ATTR_SEQ} attributes (in SQS's message "
            f'attributes or an SNS envelope) and no "{c.EVENT_IDENTITY}" in an EventBridge '
            "event's detail: this consumer keys on the identity of messages sent by "
            "attempt.send",
        )
    if not (seq.isascii() and seq.isdigit()):
        raise BadMessage(c.REASON_INVALID_KEY, f"{c.OUTBOX_ATTR_SEQ} is not a whole number")
    key = f"{source}#{int(seq)}"
    try:
        _check_key_size(len(key.encode("utf-8")))
    except UnicodeEncodeError:
        raise BadMessage(
            c.REASON_INVALID_KEY, "key holds a lone surrogate: it is not Unicode text"
        ) from None
    return key, carrier


#: What an SNS notification (raw message delivery off) holds of what its publisher sent: the
#: rest of its fields (``MessageId``, ``Timestamp``, ``SequenceNumber``, ``SignatureVersion``,
#: ``Signature``, ``SigningCertURL``, ``UnsubscribeURL``) are SNS's own, new on every publish
#: or per subscription ("MessageId: ... unique for each message published", "Timestamp: The
#: time (GMT) when the notification was published", the signature over both:
#: https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html; the same document
#: is what SQS receives with raw delivery off:
#: https://docs.aws.amazon.com/sns/latest/dg/firehose-archived-message-format-S3.html).
_SNS_PUBLISHED = ("Type", "TopicArn", "Subject", "Message", "MessageAttributes")


def without_transport(body: Any) -> Any:
    """What a ``SOURCE_KEY`` consumer whose identity came in an SNS notification (raw message
    delivery off: ``_source_key``) hashes of its body: the body itself where ``envelope=``
    unwrapped it, else only what the publisher sent (``_SNS_PUBLISHED``): the topic, the
    subject, the message and its attributes (once's identity among them). Every publish of
    one outbox message (its resend after a failed clear) is then one payload, a duplicate
    downstream, never a CONFLICT. The ``validate`` expression applies to what this returns."""
    if not isinstance(body, dict) or body.get("Type") != "Notification":
        return body
    return {name: body[name] for name in _SNS_PUBLISHED if name in body}


#: What an EventBridge event holds of what its publisher sent (PutEvents' ``Source``,
#: ``DetailType``, ``Detail`` and ``Resources``); the rest is EventBridge's own: ``id`` and
#: ``time`` new on every PutEvents ("id: A Version 4 UUID generated for every event"; "time:
#: ... If not provided, the time stamp of the PutEvents call"), ``version``, ``account`` and
#: ``region`` the bus's, and fields a replay adds (``replay-name``).
#: https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html
_EVENT_PUBLISHED = ("source", "detail-type", "detail", "resources")


def without_event_transport(body: Any) -> Any:
    """What a ``SOURCE_KEY`` consumer whose identity came in an EventBridge event hashes of its
    body: only what the publisher sent (``_EVENT_PUBLISHED``) of a whole event; the body itself
    where a rule's target (``InputPath``, an input transformer) or ``envelope=`` kept a part.
    Every PutEvents of one outbox event (its resend after a failed clear) is then one payload,
    a duplicate downstream, never a CONFLICT."""
    if not _is_event(body):
        return body
    return {name: body[name] for name in _EVENT_PUBLISHED if name in body}


def _is_event(body: Any) -> bool:
    """An EventBridge event as a rule's target delivers it by default."""
    return (
        isinstance(body, dict)
        and isinstance(body.get("detail"), dict)
        and isinstance(body.get("detail-type"), str)
        and isinstance(body.get("source"), str)
    )


def _event_identity(message: Any) -> tuple[str | None, str | None] | None:
    """``(once.source, once.seq)`` from a whole event's detail (``detail.once``); None when the
    body is no event or its detail holds none."""
    return (
        _carried_identity(message["detail"].get(c.EVENT_IDENTITY)) if _is_event(message) else None
    )


def _carried_identity(carried: Any) -> tuple[str | None, str | None] | None:
    """``(once.source, once.seq)`` from the ``once`` member an outbox wrote into an event's
    detail (``{"source": ..., "seq": <number>}``); None when ``carried`` is no such object."""
    if not isinstance(carried, dict):
        return None
    source, seq = carried.get(c.EVENT_IDENTITY_SOURCE), carried.get(c.EVENT_IDENTITY_SEQ)
    # The outbox writes once.seq as a JSON number; bool is an int to Python, never a seq.
    seq_text = str(seq) if isinstance(seq, int) and not isinstance(seq, bool) else None
    return (source if isinstance(source, str) else None), seq_text


#: The SNS message attribute types whose ``Value`` is the text itself (``Binary``'s is base64,
#: ``String.Array``'s a JSON array).
_SNS_TEXT_TYPES = ("String", "Number")


def _sqs_string(attribute: Any) -> str | None:
    """An SQS message attribute's text (Lambda's ``stringValue``), if it has one."""
    value = attribute.get("stringValue") if isinstance(attribute, dict) else None
    return value if isinstance(value, str) else None


def _sns_identity(message: Any) -> tuple[str | None, str | None] | None:
    """``(once.source, once.seq)`` from an SNS notification's ``MessageAttributes`` (raw
    delivery off); None when the body is no SNS notification or holds neither attribute."""
    if not isinstance(message, dict) or message.get("Type") != "Notification":
        return None
    carried = message.get("MessageAttributes")
    if not isinstance(carried, dict):
        return None
    found = (
        _sns_string(carried.get(c.OUTBOX_ATTR_SOURCE)),
        _sns_string(carried.get(c.OUTBOX_ATTR_SEQ)),
    )
    return found if found != (None, None) else None


def _sns_string(attribute: Any) -> str | None:
    """An SNS envelope's message attribute's text: ``{"Type": "String"|"Number", "Value":
    ...}``."""
    if not isinstance(attribute, dict) or attribute.get("Type") not in _SNS_TEXT_TYPES:
        return None
    value = attribute.get("Value")
    return value if isinstance(value, str) else None


def _name(value: Any) -> str:
    return type(value).__name__


class _TotalEncoder(Encoder):
    """Powertools' encoder (Decimals as their exact text, dataclasses and pydantic models as
    Powertools' idempotency utility encodes them) that never gives up on a value: whatever it
    cannot encode (a set, bytes, an object whose ``json`` attribute is not pydantic's, a
    dataclass whose fields raise) is stored as ``{"unencodable": "<type>"}`` in its place,
    and its type is noted in ``stand_ins``."""

    def __init__(self, *args: Any, stand_ins: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stand_ins = stand_ins

    def default(self, obj: Any) -> Any:
        try:
            return super().default(obj)
        except Exception:
            self.stand_ins.append(type_name(obj))
            return {_UNENCODABLE: type_name(obj)}


@dataclass(frozen=True)
class StoredResult:
    """What is stored as ``result`` and what had to give way for it to be stored."""

    text: str
    #: The types of the values stored as ``{"unencodable": "<type>"}``, in place or whole.
    stand_ins: tuple[str, ...] = ()
    #: The error that made the whole result a stand-in (its class), if one did.
    error: str | None = None


def encode_result(result: Any, cap_bytes: int = c.RESULT_CAP_BYTES) -> StoredResult:
    """The JSON stored as ``result``; over the cap, only its size and sha256. Total: it
    returns for every value and never raises.

    A value that cannot be encoded is stored as ``{"unencodable": "<type>"}`` in its place
    (``_TotalEncoder``); a result that cannot be encoded at all (a circular reference, keys
    that cannot be sorted, NaN or infinity, which strict JSON has no text for, an integer
    too long to print, a lone surrogate, a ``dict`` whose methods raise) is stored whole as
    that stand-in. Business code returned, so its effect happened: the record completes
    with what can be stored, and the caller says so in a warning.
    """
    stand_ins: list[str] = []
    try:
        text = json.dumps(
            result,
            cls=_TotalEncoder,
            stand_ins=stand_ins,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
        size = len(text.encode("utf-8"))
    except Exception as error:
        return StoredResult(stand_in(result), (type_name(result),), _name(error))
    if size <= cap_bytes:
        return StoredResult(text, tuple(stand_ins))
    capped = canonical_json({"capped": True, "size": size, "sha256": sha256(text)})
    return StoredResult(capped, tuple(stand_ins))


def stand_in(value: Any) -> str:
    """What is stored for a result that cannot be stored at all: its type, nothing of its
    value (a value the encoder cannot take is stored so in its place, see ``encode_result``)."""
    return canonical_json({_UNENCODABLE: type_name(value)})


def type_name(value: Any) -> str:
    """A value's type name, safe to store, log and send: any type may be named anything
    (``type("\\ud800", (), {})``), so the name is cut short and made valid text."""
    return clean_text(type(value).__name__)[:_TYPE_NAME_MAX_CHARS]


def clean_text(text: str) -> str:
    """``text`` with every character that DynamoDB or an SQS message attribute would refuse
    (``sendrules.SQS_REFUSED_CHARACTER``: a lone surrogate; control characters but tab, newline
    and carriage return; U+FFFE and U+FFFF) written as its ``\\uXXXX`` escape, so that storing
    or sending it cannot fail."""
    return pattern(SQS_REFUSED_CHARACTER).sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def describe_error(error: BaseException) -> str:
    """What a FAILED record, the DLQ's ``once.error`` and the logs say of an error, cut short.

    Its class, always, and what says why without a value of the payload (``why``): AWS's
    error code and HTTP status, an HTTP status, an errno's name, a ``URLError``'s reason (its
    class and errno), the same of the error it was raised from. Its message only for a
    ``PermanentError`` or a ``TransientError`` (and their subclasses), whose text business
    code writes for operators (docs/handler.md asks to keep it free of payload values): any
    other message may quote the payload, as Python's own do (``invalid literal for int() with
    base 10: '...'``), and so may a URL, a host name or a server's reason phrase, which are
    never kept. What is kept is cut to ``ERROR_MAX_CHARS``.
    """
    if isinstance(error, PermanentError | TransientError):
        try:
            text = f"{type_name(error)}: {error}"
        except Exception:  # a __str__ that raises: the class says what it can
            text = type_name(error)
        return clean_text(text)[: c.ERROR_MAX_CHARS]
    detail = why(error)
    text = f"{type_name(error)} ({detail})" if detail else type_name(error)
    return text[: c.ERROR_MAX_CHARS]


#: How many errors down a chain ``why`` looks (a ``requests`` call refused: its
#: ``ConnectionError`` wraps urllib3's ``MaxRetryError``, whose reason is a
#: ``NewConnectionError`` raised from the socket's ``ConnectionRefusedError``).
_CAUSES = 4


def why(error: BaseException, depth: int = 0) -> str | None:
    """What says why ``error`` happened, made only of codes, numbers and class names (never
    a message, a URL, a host or a reason phrase): AWS's error code and HTTP status (botocore's
    ``ClientError``), an HTTP status (``urllib.error.HTTPError``'s ``code``, a ``requests``
    error's ``response.status_code``), an ``OSError``'s errno by name (``ECONNREFUSED``,
    ``EAI_NONAME`` for a name that does not resolve), then the same of the error beneath it
    (``_beneath``), ``_CAUSES`` deep. None when none of these is known."""
    parts: list[str] = []
    response: Any = getattr(error, "response", None)
    code = error_code(error)
    if code:
        parts.append(clean_text(code)[:_TYPE_NAME_MAX_CHARS])
    status = _http_status(error, response)
    if status is not None:
        parts.append(f"HTTP {status}")
    errno_name = _errno_name(error)
    if errno_name:
        parts.append(errno_name)
    beneath = _beneath(error) if depth < _CAUSES else None
    if beneath is not None:
        label, inner = beneath
        said = why(inner, depth + 1)
        parts.append(f"{label} {type_name(inner)}" + (f" ({said})" if said else ""))
    return ", ".join(parts) or None


def _beneath(error: BaseException) -> tuple[str, BaseException] | None:
    """The error beneath ``error``, and how it is: its ``reason`` (``URLError``'s, urllib3's
    ``MaxRetryError``'s), the error it wraps (``requests``' ``ConnectionError`` holds
    urllib3's as its argument; botocore's ``EndpointConnectionError`` holds it as ``error``),
    the one it was raised from (``__cause__``), or the one being handled when it was raised
    (``__context__``: libraries raise their own error inside ``except`` without ``from``)."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        return "reason", reason
    kwargs = getattr(error, "kwargs", None)
    wrapped = kwargs.get("error") if isinstance(kwargs, dict) else None
    if not isinstance(wrapped, BaseException) and error.args:
        wrapped = error.args[0]
    if isinstance(wrapped, BaseException):
        return "wrapping", wrapped
    if error.__cause__ is not None:
        return "from", error.__cause__
    if error.__context__ is not None and not error.__suppress_context__:
        return "from", error.__context__
    return None


def _http_status(error: BaseException, response: Any) -> int | None:
    status: Any = None
    if isinstance(response, dict):
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    elif response is not None:
        status = getattr(response, "status_code", None)
    if status is None and isinstance(error, urllib.error.HTTPError):
        status = error.code
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return status
    return None


def _errno_name(error: BaseException) -> str | None:
    """An ``OSError``'s errno by its symbolic name (``errno.errorcode``), or a resolver's
    (``socket.gaierror``: ``EAI_*``); a number no table names is kept as the number."""
    number = getattr(error, "errno", None) if isinstance(error, OSError) else None
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    if isinstance(error, socket.gaierror):
        return _eai_names().get(number, f"EAI {number}")
    return errno.errorcode.get(number, f"errno {number}")


@functools.cache
def _eai_names() -> dict[int, str]:
    return {
        value: name
        for name, value in vars(socket).items()
        if name.startswith("EAI_") and isinstance(value, int)
    }
