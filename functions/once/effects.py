"""What business code stages with ``attempt.write`` and ``attempt.send``: the elements of the
commit and the messages of the outbox, each checked where it is staged against DynamoDB's
limits and, for a message, against every rule SQS or SNS holds a message to (AWS's own, each
cited in ``once.sendrules``), so that a commit DynamoDB would refuse, or a message AWS would
never take, fails at the call that made it so (with the rule in its message) and not after
business code returned.

Nothing here does I/O. The store commits what is staged (``store.py``), the outbox sends it
(``outbox.py``).
"""

from __future__ import annotations

import base64
import copy
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from once import constants as c
from once import identity
from once import sendrules as rules
from once.identity import identity_attributes

#: The operations a TransactWriteItems element may hold.
OPERATIONS = ("Put", "Update", "Delete", "ConditionCheck")
#: What business code may ask of a staged write whose condition DynamoDB refuses at commit.
Refused = Literal["retry", "quarantine"]
#: Room on the record for everything but the result and the outbox (the id, hashes, owner,
#: message id, numbers), counted generously.
_RECORD_OVERHEAD_BYTES = 4 * 1024
#: What the outbox may take on the record: the item's limit less the largest stored result
#: and the record's other attributes.
OUTBOX_MAX_BYTES = c.ITEM_MAX_BYTES - c.RESULT_CAP_BYTES - _RECORD_OVERHEAD_BYTES
#: How deep once holds an event's detail: PutEvents reads JSON "up to 1100 levels deep" (an
#: earlier page: 1000; ``sendrules.PUT_EVENTS_MAX_DEPTH``), but once reads it with Python's
#: parser, by recursion within the interpreter's limit of 1000 frames, shared with the stack
#: business code calls ``attempt.send`` from; and a downstream ``SOURCE_KEY`` consumer reads
#: the whole event, one level deeper. Half the limit leaves room for both.
DETAIL_MAX_DEPTH = 500
#: once's own attribute names (its identity attributes), refused to business code.
_ONCE_PREFIX = "once."


def function_region() -> str | None:
    """The function's region, where once's SQS and SNS clients are: ``AWS_REGION`` (Lambda
    sets it), else ``AWS_DEFAULT_REGION``; None outside both."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def number_text(value: int | float) -> str | None:
    """An int or a finite float as the Number attribute once sends (plain decimal notation, the
    float's shortest repr: the digits AWS parses), or None if AWS refuses it
    (``sendrules.number_taken``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value == 0:
        return "0"
    if isinstance(value, int):
        # Compared as ints, before Decimal(): a huge int is slow to convert (or to compare with
        # a Decimal), and has more digits than AWS takes anyway.
        if abs(value) > int(rules.NUMBER_MAX):
            return None
        number = Decimal(value)
    else:
        number = Decimal(repr(value))
    return format(number, "f") if rules.number_taken(number) else None


#: The attributes business code may send on one message: SQS's ten less once's identity.
MAX_ATTRIBUTES = rules.MAX_ATTRIBUTES - len(identity_attributes("", 0))


@dataclass(frozen=True)
class OutboxMessage:
    """One message ``attempt.send`` staged: stored on the record, sent after the commit."""

    destination: str
    body: str
    group_id: str | None = None
    #: (name, data type, value): String and Number values as text, Binary as bytes.
    attributes: tuple[tuple[str, str, str | bytes], ...] = ()
    #: ``once.source``: the operation that staged it (``identity.source_of``), stored with it
    #: so that every send of it says the same. None in an outbox stored before identities
    #: named their operation: it is sent as then (``identity.legacy_source``).
    source: str | None = None
    #: To an event bus: the event's ``Source`` and ``DetailType`` (the body is its detail).
    event: tuple[str, str] | None = None

    def to_json(self) -> str:
        """How the message is stored in the record's ``outbox`` list (one string each)."""
        stored: dict[str, Any] = {"d": self.destination, "b": self.body}
        if self.group_id is not None:
            stored["g"] = self.group_id
        if self.source is not None:
            stored["s"] = self.source
        if self.event is not None:
            stored["e"] = list(self.event)
        if self.attributes:
            stored["a"] = [
                [
                    name,
                    kind,
                    base64.b64encode(value).decode() if isinstance(value, bytes) else value,
                ]
                for name, kind, value in self.attributes
            ]
        return json.dumps(stored, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> OutboxMessage:
        stored = json.loads(text)
        return cls(
            destination=stored["d"],
            body=stored["b"],
            group_id=stored.get("g"),
            attributes=tuple(
                (name, kind, base64.b64decode(value) if kind == "Binary" else value)
                for name, kind, value in stored.get("a", ())
            ),
            source=stored.get("s"),
            event=(stored["e"][0], stored["e"][1]) if "e" in stored else None,
        )

    @property
    def fifo(self) -> bool:
        return not self.to_bus and rules.is_fifo(self.destination)

    @property
    def to_topic(self) -> bool:
        return rules.is_topic(self.destination)

    @property
    def to_bus(self) -> bool:
        return self.event is not None


def item_bytes(attributes: Mapping[str, Any]) -> int:
    """The size DynamoDB counts for an item (or any map of attribute values), rounded up
    where DynamoDB's own rule is an approximation (numbers)."""
    return sum(
        len(name.encode("utf-8")) + _value_bytes(value) for name, value in attributes.items()
    )


def _value_bytes(value: Mapping[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode("utf-8"))
    if kind == "N":
        return len(data) // 2 + 2
    if kind == "B":
        return len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in data)
    if kind == "NS":
        return sum(len(n) // 2 + 2 for n in data)
    if kind == "BS":
        return sum(len(b) for b in data)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _value_bytes(v) for k, v in data.items())
    raise ValueError(f"{kind!r} is not a DynamoDB attribute type")


def outbox_bytes(messages: list[OutboxMessage]) -> int:
    """What the record's ``outbox`` list takes on the item."""
    return item_bytes({c.ATTR_OUTBOX: {"L": [{"S": m.to_json()} for m in messages]}})


def _table_name(table: str) -> str:
    """A table's name, whether given as a name or as an ARN (``...:table/<name>``)."""
    return table.rsplit(":table/", 1)[-1] if table.startswith("arn:") else table


def _key_text(key: Mapping[str, Any]) -> str:
    """One text per item a key names. Numbers are compared as DynamoDB compares them, by
    value: ``{"N": "1"}``, ``{"N": "1.0"}`` and ``{"N": "1e0"}`` name one item ("Leading
    and trailing zeroes are trimmed", https://docs.aws.amazon.com/amazondynamodb/latest/
    developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number)."""
    return json.dumps(
        {name: _key_value(value) for name, value in key.items()}, sort_keys=True, default=repr
    )


def _key_value(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {"N"} and isinstance(value["N"], str):
        try:
            number = Decimal(value["N"])
        except InvalidOperation:
            return value
        if number.is_finite():
            return {"N": "0" if number.is_zero() else str(number.normalize())}
    return value


@dataclass
class _Staged:
    operation: str
    table: str
    #: The element's Key, or a Put's whole Item (its key attributes are not known here).
    key_or_item: dict[str, Any]


@dataclass
class Effects:
    """The writes and messages one attempt staged, in the order it staged them.

    ``table_name`` and ``record_id`` are the idempotency table and this attempt's record:
    once's table takes no business write (its items are records, and a write to one would
    break that key's protocol), so staging one raises. ``token`` is this attempt's own: the
    identity of every message it stages names the operation by it (``identity.source_of``).
    """

    table_name: str | None = None
    record_id: str | None = None
    #: The elements of the commit once writes itself: the record's completion, and, while
    #: the bridge to Powertools' records is on, the message's Powertools record.
    reserved: int = 1
    token: str = field(default_factory=lambda: identity.new_token())
    writes: list[dict[str, Any]] = field(default_factory=list)
    #: For each write, what business code asked for if DynamoDB refuses its condition.
    refusals: list[Refused] = field(default_factory=list)
    messages: list[OutboxMessage] = field(default_factory=list)
    _staged: list[_Staged] = field(default_factory=list, repr=False)
    _bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.writes or self.messages)

    def write(self, element: Mapping[str, Any], *, refused: Refused = "retry") -> None:
        """Stage one TransactWriteItems element; raise ``ValueError`` if the commit could not
        take it. See ``Attempt.write``."""
        if refused not in ("retry", "quarantine"):
            raise ValueError(f'refused must be "retry" or "quarantine" (got {refused!r})')
        # What commits is the element as staged now: business code may reuse and change its
        # dict after the call, as it may reuse the body it passed to ``send``.
        captured = copy.deepcopy(dict(element))
        staged = _check_element(captured)
        if self.table_name is not None and _table_name(staged.table) == _table_name(
            self.table_name
        ):
            raise ValueError(
                f"attempt.write: {staged.table!r} is once's idempotency table; its items are "
                "records, and a write to one would break that key's protocol. Keep business "
                "data in a table of its own."
            )
        if len(self.writes) + self.reserved >= c.TRANSACTION_MAX_ELEMENTS:
            theirs = (
                "the record's completion is one of them"
                if self.reserved == 1
                else "the record's completion and the message's Powertools record are two of "
                "them (the bridge is on)"
            )
            raise ValueError(
                f"attempt.write: one commit takes at most {c.TRANSACTION_MAX_ELEMENTS} elements "
                f"and {theirs}: {c.TRANSACTION_MAX_ELEMENTS - self.reserved} staged writes at most"
            )
        for index, earlier in enumerate(self._staged):
            if _same_item(earlier, staged, self._staged):
                raise ValueError(
                    f"attempt.write: this {staged.operation} is on the item that staged write "
                    f"{index} ({earlier.operation}) already names, in table {staged.table!r}; "
                    "DynamoDB takes one operation per item in a transaction: merge them"
                )
        size = _element_bytes(captured, staged.operation)
        if staged.operation == "Put" and size > c.ITEM_MAX_BYTES:
            raise ValueError(
                f"attempt.write: the Put's item is about {size} bytes; DynamoDB takes at most "
                f"{c.ITEM_MAX_BYTES} bytes per item"
            )
        total = self._bytes + size + self.reserved * c.ITEM_MAX_BYTES  # once's, at their largest
        if total > c.TRANSACTION_MAX_BYTES:
            raise ValueError(
                f"attempt.write: the commit would hold about {total} bytes with the record; "
                f"DynamoDB takes at most {c.TRANSACTION_MAX_BYTES} bytes in one transaction"
            )
        self._bytes += size
        self._staged.append(staged)
        self.writes.append(captured)
        self.refusals.append(refused)

    def send(
        self,
        destination: str,
        body: Any,
        *,
        group_id: str | None = None,
        attributes: Mapping[str, str | int | float | bytes] | None = None,
        source: str | None = None,
        detail_type: str | None = None,
    ) -> None:
        """Stage one message for the outbox; raise ``ValueError`` if it cannot be sent or
        would push the record past DynamoDB's item size. See ``Attempt.send``."""
        once_source = (
            identity.source_of(self.record_id, self.token) if self.record_id is not None else None
        )
        if isinstance(destination, str) and rules.looks_like_event_bus(destination):
            if group_id is not None or attributes:
                raise ValueError(
                    "attempt.send: an EventBridge event has no group_id and no message "
                    "attributes (PutEvents takes a Source, a DetailType and a detail): put "
                    "what they carry in the detail"
                )
            seq = len(self.messages)
            message = _event(destination, body, once_source, seq, source, detail_type)
        else:
            if source is not None or detail_type is not None:
                raise ValueError(
                    "attempt.send: source= and detail_type= are an EventBridge event's; this "
                    "destination is an SQS queue or an SNS topic (send to an event bus's ARN)"
                )
            message = self._message(destination, body, once_source, group_id, attributes)
        total = outbox_bytes([*self.messages, message])
        if total > OUTBOX_MAX_BYTES:
            raise ValueError(
                f"attempt.send: the outbox would take {total} bytes on the record; it is "
                f"stored on the record, which DynamoDB holds to {c.ITEM_MAX_BYTES} bytes, so "
                f"the outbox takes at most {OUTBOX_MAX_BYTES}. Send less per operation (a "
                "reference to the data, not the data)"
            )
        self.messages.append(message)

    def _message(
        self,
        destination: str,
        body: Any,
        once_source: str | None,
        group_id: str | None,
        attributes: Mapping[str, str | int | float | bytes] | None,
    ) -> OutboxMessage:
        """A message to an SQS queue or an SNS topic, held to the service's rules."""
        destination = _check_destination(destination, group_id)
        to_topic = rules.is_topic(destination)
        message = OutboxMessage(
            destination=destination,
            body=_body_text(body, to_topic=to_topic),
            group_id=group_id,
            attributes=_check_attributes(attributes or {}, to_topic=to_topic),
            source=once_source,
        )
        # Counted as AWS counts it, with once's own two attributes: the operation's identity
        # and this message's index in the outbox (``outbox._entry``).
        once_own = identity_attributes(once_source or "", len(self.messages))
        size = rules.message_bytes(message.body, (*message.attributes, *once_own))
        limit = rules.message_max_bytes(destination)
        if size > limit:
            service = "an SNS topic" if to_topic else "an SQS queue"
            raise ValueError(
                f"attempt.send: the message is {size} bytes (its body and its attributes' "
                f"names, types and values, once's {c.OUTBOX_ATTR_SOURCE} and "
                f"{c.OUTBOX_ATTR_SEQ} included); {service} takes at most {limit} bytes in one "
                "message. Send less (a reference to the data, not the data)"
            )
        return message


def event_detail(detail: str, once_source: str, seq: int) -> str:
    """The ``Detail`` once sends for an event whose team's detail is ``detail`` (a JSON
    object's text): the same text with once's identity as its first member, ``"once":
    {"source": <once.source>, "seq": <once.seq>}``, where a rule's target finds it
    (``$.detail.once``) and a ``SOURCE_KEY`` consumer reads it. Written into the text, not
    parsed and dumped again, so that every send of one stored event carries the same detail."""
    own = json.dumps(
        {c.EVENT_IDENTITY_SOURCE: once_source, c.EVENT_IDENTITY_SEQ: seq}, separators=(",", ":")
    )
    inner = detail.strip()[1:]  # past the object's "{"
    return f'{{"{c.EVENT_IDENTITY}":{own}' + ("" if inner.strip() == "}" else ",") + inner


def _event(
    destination: str,
    body: Any,
    once_source: str | None,
    seq: int,
    source: str | None,
    detail_type: str | None,
) -> OutboxMessage:
    """An event to an EventBridge bus, held to PutEvents' rules (``sendrules``: the bus's ARN
    in the function's region, ``Source`` and ``DetailType`` required and taken, the detail a
    JSON object, the entry within the request's size with once's identity in it)."""
    if not rules.is_event_bus(destination):
        raise ValueError(
            "attempt.send: an event bus is named by its ARN, "
            "arn:aws:events:<region>:<account>:event-bus/<name> (the name: letters, digits "
            "and . - _; botocore's EventBusName pattern), at most "
            f"{rules.EVENT_BUS_NAME_MAX_CHARS} characters"
        )
    here = function_region()
    there = rules.other_region(destination, here)
    if there is not None:
        raise ValueError(
            f"attempt.send: the event bus is in {there} and this function in {here}; once "
            "sends with the function's region's client, where PutEvents does not reach "
            f"another region's bus. Send to a bus in {here} (a rule there may forward to it)"
        )
    for problem in (rules.source_problem(source), rules.detail_type_problem(detail_type)):
        if problem is not None:
            raise ValueError(
                f"attempt.send: to an event bus, pass source= and detail_type= as PutEvents "
                f"takes them: {problem} (https://docs.aws.amazon.com/eventbridge/latest/"
                "APIReference/API_PutEventsRequestEntry.html)"
            )
    assert source is not None and detail_type is not None
    text = _detail_text(body)
    too_deep = ValueError(
        f"attempt.send: the event's detail is nested deeper than {DETAIL_MAX_DEPTH} levels, "
        "which once holds a detail to (PutEvents reads 1000; once's own reader, here and "
        "downstream, reads JSON by recursion within Python's limit): send a flatter detail"
    )
    try:
        detail = rules.parse_detail(text)
    except RecursionError:
        raise too_deep from None
    except ValueError:
        raise ValueError(
            "attempt.send: an event's detail must be a JSON object (a dict, or its JSON text; "
            "PutEventsRequestEntry.Detail); this body is not JSON"
        ) from None
    problem = rules.detail_problem(detail, max_depth=DETAIL_MAX_DEPTH)
    if problem is not None and "nested" in problem:
        raise too_deep
    if problem is not None:
        raise ValueError(
            f"attempt.send: EventBridge would refuse this detail: {problem} (a dict, or its "
            "JSON text; PutEventsRequestEntry.Detail)"
        )
    if c.EVENT_IDENTITY in detail:
        raise ValueError(
            f"attempt.send: the detail's \"{c.EVENT_IDENTITY}\" member is once's own (the "
            "operation's identity, which once adds to every event); rename yours"
        )
    entry = {
        "Source": source,
        "DetailType": detail_type,
        "Detail": event_detail(text, once_source or "", seq),
    }
    size = rules.event_entry_bytes(entry)
    if size >= rules.EVENTS_REQUEST_MAX_BYTES:
        raise ValueError(
            f"attempt.send: the event is {size} bytes (its Source, DetailType and detail, "
            "once's identity included); PutEvents takes less than "
            f"{rules.EVENTS_REQUEST_MAX_BYTES} bytes in one request. Send less (a reference "
            "to the data, not the data)"
        )
    return OutboxMessage(
        destination=destination, body=text, source=once_source, event=(source, detail_type)
    )


def _check_element(element: Mapping[str, Any]) -> _Staged:
    if not isinstance(element, Mapping) or len(element) != 1:
        raise ValueError(
            "attempt.write takes one TransactWriteItems element: a dict with exactly one of "
            f"{', '.join(OPERATIONS)}"
        )
    ((operation, body),) = element.items()
    if operation not in OPERATIONS or not isinstance(body, Mapping):
        raise ValueError(
            f"attempt.write: {operation!r} is not one of {', '.join(OPERATIONS)} with its "
            "parameters (the low-level client's shape)"
        )
    table = body.get("TableName")
    if not isinstance(table, str) or not table:
        raise ValueError(f"attempt.write: the {operation} names no TableName")
    part = "Item" if operation == "Put" else "Key"
    key_or_item = body.get(part)
    if not isinstance(key_or_item, Mapping) or not key_or_item:
        raise ValueError(f"attempt.write: the {operation} on {table!r} has no {part}")
    if operation == "Update" and not isinstance(body.get("UpdateExpression"), str):
        raise ValueError(f"attempt.write: the Update on {table!r} has no UpdateExpression")
    if operation == "ConditionCheck" and not isinstance(body.get("ConditionExpression"), str):
        raise ValueError(
            f"attempt.write: the ConditionCheck on {table!r} has no ConditionExpression"
        )
    try:
        item_bytes(key_or_item)
    except Exception:
        raise ValueError(
            f"attempt.write: the {operation}'s {part} on {table!r} is not in the low-level "
            'client\'s shape ({"name": {"S": "..."}})'
        ) from None
    return _Staged(operation, table, dict(key_or_item))


def _key_names(table: str, staged: list[_Staged]) -> set[str] | None:
    """The key attributes of ``table``, as any keyed element staged on it names them."""
    for earlier in staged:
        if earlier.operation != "Put" and _table_name(earlier.table) == _table_name(table):
            return set(earlier.key_or_item)
    return None


def _same_item(a: _Staged, b: _Staged, staged: list[_Staged]) -> bool:
    """Whether two elements name one item. A Put's key is its item's key attributes: known
    once any keyed element on its table is staged. Two Puts on a table no keyed element
    names share an item for certain only when their items are equal; any other pair is left
    to DynamoDB, which knows the table's key and refuses the commit whole (nothing lands,
    the record fails with ``CommitCanceled``: the runbook's ``ValidationException``)."""
    if _table_name(a.table) != _table_name(b.table):
        return False
    names = _key_names(a.table, [*staged, b])
    if names is None:
        return a.operation == b.operation == "Put" and _key_text(a.key_or_item) == _key_text(
            b.key_or_item
        )

    def key(s: _Staged) -> str | None:
        if s.operation != "Put":
            return _key_text(s.key_or_item)
        if not names <= set(s.key_or_item):
            return None
        return _key_text({n: s.key_or_item[n] for n in names})

    return key(a) is not None and key(a) == key(b)


def _element_bytes(element: Mapping[str, Any], operation: str) -> int:
    """What the element adds to the transaction's size, from what the request holds (an
    Update's existing item is not known here)."""
    body = element[operation]
    if operation == "Put":
        return item_bytes(body["Item"])
    values = body.get("ExpressionAttributeValues") or {}
    return item_bytes(body["Key"]) + item_bytes(values)


def _check_destination(destination: str, group_id: str | None) -> str:
    if not isinstance(destination, str) or not (
        rules.is_topic(destination) or destination.startswith(("https://", "http://"))
    ):
        raise ValueError(
            "attempt.send: the destination must be an SQS queue URL (https://...), an SNS "
            "topic ARN (arn:aws:sns:...) or an EventBridge bus ARN (arn:aws:events:...), got "
            f"{type(destination).__name__}"
        )
    if not rules.text_taken(destination, to_topic=True):
        raise ValueError(
            "attempt.send: the destination holds a lone surrogate, which no request can carry "
            "(SQS and SNS take UTF-8): pass the queue URL or topic ARN as text"
        )
    # once's SQS and SNS clients are in the function's region.
    here = function_region()
    there = rules.other_region(destination, here)
    if there is not None:
        kind = "topic" if rules.is_topic(destination) else "queue"
        raise ValueError(
            f"attempt.send: the {kind} is in {there} and this function in {here}; once sends "
            f"with the function's region's client, where AWS refuses another region's {kind}. "
            f"Send to a {kind} in {here}"
        )
    fifo = rules.is_fifo(destination)
    if group_id is not None and (
        not isinstance(group_id, str) or not rules.group_id_taken(group_id)
    ):
        raise ValueError(
            "attempt.send: group_id must be 1 to 128 characters, each an ASCII letter or digit "
            "or one of !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ (SQS's and SNS's MessageGroupId: no "
            "space, no other letter)"
        )
    if fifo and group_id is None:
        raise ValueError("attempt.send: a FIFO queue or topic needs group_id (its message group)")
    # A standard queue or topic takes a group id too (``sendrules.group_id_taken``).
    return destination


def _detail_text(body: Any) -> str:
    """An event's detail as text: a string as it is, anything else as its JSON, refused in
    PutEvents' terms when it cannot be one (empty, or not UTF-8)."""
    try:
        text = body if isinstance(body, str) else _json_text(body)
    except RecursionError:
        raise ValueError(
            f"attempt.send: the event's detail is nested deeper than {DETAIL_MAX_DEPTH} levels, "
            "which once holds a detail to: send a flatter detail"
        ) from None
    if not text.strip():
        raise ValueError(
            "attempt.send: an event's detail must be a JSON object (a dict, or its JSON text; "
            "PutEventsRequestEntry.Detail); this one is empty"
        )
    if not rules.text_taken(text, to_topic=True):
        raise ValueError(
            "attempt.send: the event's detail holds a lone surrogate, and PutEvents takes UTF-8 "
            "text only: send valid text (or a dict, whose JSON escapes it)"
        )
    return text


def _json_text(body: Any) -> str:
    """``body`` as compact JSON, Powertools' encoder's way (Decimals as their exact text...).
    Raises ``RecursionError`` for a value nested past Python's limit, ``ValueError`` for one
    JSON cannot hold."""
    # Imported here: ``once`` is imported when pytest starts (the testing kit's plugin),
    # where importing Powertools would cost every test session.
    from aws_lambda_powertools.shared.json_encoder import Encoder

    try:
        return json.dumps(body, cls=Encoder, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise
    except Exception as error:
        raise ValueError(
            f"attempt.send: the body ({type(body).__name__}) cannot be sent as JSON "
            f"({type(error).__name__}); pass a string or a JSON value"
        ) from None


def _body_text(body: Any, *, to_topic: bool) -> str:
    """A message body: a string as it is, anything else as its JSON (ASCII: JSON escapes
    control characters and every non-ASCII one, so SQS and SNS take any JSON body)."""
    try:
        text = body if isinstance(body, str) else _json_text(body)
    except RecursionError:
        raise ValueError(
            f"attempt.send: the body ({type(body).__name__}) cannot be sent as JSON "
            "(RecursionError); pass a string or a JSON value"
        ) from None
    if not text:
        raise ValueError("attempt.send: SQS and SNS take no empty body")
    if not rules.text_taken(text, to_topic=to_topic):
        if to_topic:
            raise ValueError(
                "attempt.send: the body holds a lone surrogate, and SNS takes UTF-8 text only; "
                "send valid text (or a JSON value, which escapes it)"
            )
        raise ValueError(
            "attempt.send: the body holds a character SQS refuses (it takes #x9, #xA, #xD, "
            "#x20-#xD7FF, #xE000-#xFFFD and #x10000-#x10FFFF: no other control character, "
            "no lone surrogate, no U+FFFE/U+FFFF); remove it, or send a JSON value, which "
            "escapes it"
        )
    return text


def _check_attributes(
    attributes: Mapping[str, str | int | float | bytes], *, to_topic: bool
) -> tuple[tuple[str, str, str | bytes], ...]:
    if len(attributes) > MAX_ATTRIBUTES:
        raise ValueError(
            f"attempt.send: at most {MAX_ATTRIBUTES} attributes (SQS takes "
            f"{rules.MAX_ATTRIBUTES} and once's "
            f"{c.OUTBOX_ATTR_SOURCE} and {c.OUTBOX_ATTR_SEQ} are two of them)"
        )
    checked: list[tuple[str, str, str | bytes]] = []
    for name, value in attributes.items():
        if (
            not isinstance(name, str)
            or not rules.attribute_name_taken(name)
            or name.startswith(_ONCE_PREFIX)
        ):
            shown = (
                repr(name)
                if isinstance(name, str) and name.isascii() and name.isprintable()
                else f"this {type(name).__name__}"
            )
            raise ValueError(
                f"attempt.send: {shown} is not an attribute name SQS and SNS take (1 to 256 "
                "letters, digits, _ - and ., no leading or trailing period, no '..', not "
                "starting with AWS. or Amazon. in any case; once. is once's own)"
            )
        if isinstance(value, bool):
            raise ValueError(f"attempt.send: attribute {name!r} is a bool; send it as a string")
        if isinstance(value, str):
            if not value:
                raise ValueError(
                    f"attempt.send: attribute {name!r} is empty; SQS and SNS take no empty value"
                )
            if not rules.text_taken(value, to_topic=to_topic):
                service = "SNS" if to_topic else "SQS"
                raise ValueError(
                    f"attempt.send: attribute {name!r} holds a character {service} refuses "
                    "in a String value (the body's rule: "
                    + (
                        "UTF-8 text, no lone surrogate"
                        if to_topic
                        else "#x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF only"
                    )
                    + "); remove it, or send it as bytes (a Binary attribute)"
                )
            checked.append((name, "String", value))
        elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            text = number_text(value)
            if text is None:
                raise ValueError(
                    f"attempt.send: attribute {name!r} is a number SQS and SNS refuse: a Number "
                    f"takes up to {rules.NUMBER_MAX_DIGITS} digits of precision, between "
                    "10^-128 and 10^+126 (or 0); send it as a string"
                )
            checked.append((name, "Number", text))
        elif isinstance(value, bytes) and rules.value_taken("Binary", value, to_topic=to_topic):
            checked.append((name, "Binary", value))
        else:
            raise ValueError(
                f"attempt.send: attribute {name!r} must be a non-empty str, an int, a finite "
                f"float or non-empty bytes (got {type(value).__name__})"
            )
    return tuple(checked)
