"""What business code stages with ``attempt.write`` and ``attempt.send``: the elements of the
commit and the messages of the outbox, each checked against DynamoDB's limits where it is
staged, so that a commit DynamoDB would refuse fails at the call that made it so (with the
limit in its message) and not after business code returned.

Nothing here does I/O. The store commits what is staged (``store.py``), the outbox sends it
(``outbox.py``).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from once import constants as c

#: The operations a TransactWriteItems element may hold.
OPERATIONS = ("Put", "Update", "Delete", "ConditionCheck")
#: What business code may ask of a staged write whose condition DynamoDB refuses at commit.
Refused = Literal["retry", "quarantine"]
#: The largest message body ``attempt.send`` takes: SNS's limit, and SQS's until 2025.
MESSAGE_MAX_BYTES = 256 * 1024
#: Room on the record for everything but the result and the outbox (the id, hashes, owner,
#: message id, numbers), counted generously.
_RECORD_OVERHEAD_BYTES = 4 * 1024
#: What the outbox may take on the record: the item's limit less the largest stored result
#: and the record's other attributes.
OUTBOX_MAX_BYTES = c.ITEM_MAX_BYTES - c.RESULT_CAP_BYTES - _RECORD_OVERHEAD_BYTES
#: SQS takes 10 message attributes on a message; once's identity takes two of them.
MAX_ATTRIBUTES = 8
#: A message attribute's name, as SQS and SNS accept it (``once.`` is once's own prefix).
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_\-.]{1,256}")
_RESERVED_PREFIXES = ("once.", "aws.", "amazon.")


@dataclass(frozen=True)
class OutboxMessage:
    """One message ``attempt.send`` staged: stored on the record, sent after the commit."""

    destination: str
    body: str
    group_id: str | None = None
    #: (name, data type, value): String and Number values as text, Binary as bytes.
    attributes: tuple[tuple[str, str, str | bytes], ...] = ()

    def to_json(self) -> str:
        """How the message is stored in the record's ``outbox`` list (one string each)."""
        stored: dict[str, Any] = {"d": self.destination, "b": self.body}
        if self.group_id is not None:
            stored["g"] = self.group_id
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
        )

    @property
    def fifo(self) -> bool:
        return self.destination.endswith(".fifo")

    @property
    def to_topic(self) -> bool:
        return is_topic(self.destination)


def is_topic(destination: str) -> bool:
    """An SNS topic's ARN (``arn:<partition>:sns:...``); anything else sent to is a queue URL."""
    parts = destination.split(":")
    return len(parts) >= 6 and parts[0] == "arn" and parts[2] == "sns"


def deduplication_id(source: str, seq: int) -> str:
    """A FIFO target's deduplication id for message ``seq`` of the outbox of ``source``: the
    same on every send of that message (a resend after a crash is deduplicated by SQS or
    SNS within their five minutes, and by a downstream once consumer keyed on
    ``once.source`` and ``once.seq`` for good)."""
    return hashlib.sha256(f"{source}#{seq}".encode()).hexdigest()


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
    return json.dumps(key, sort_keys=True, default=repr)


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
    break that key's protocol), so staging one raises.
    """

    table_name: str | None = None
    record_id: str | None = None
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
        if len(self.writes) + 1 >= c.TRANSACTION_MAX_ELEMENTS:
            raise ValueError(
                f"attempt.write: one commit takes at most {c.TRANSACTION_MAX_ELEMENTS} elements "
                f"and the record's completion is one of them: {c.TRANSACTION_MAX_ELEMENTS - 1} "
                "staged writes at most"
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
        total = self._bytes + size + c.ITEM_MAX_BYTES  # the record, at its largest
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
    ) -> None:
        """Stage one message for the outbox; raise ``ValueError`` if it cannot be sent or
        would push the record past DynamoDB's item size. See ``Attempt.send``."""
        message = OutboxMessage(
            destination=_check_destination(destination, group_id),
            body=_body_text(body),
            group_id=group_id,
            attributes=_check_attributes(attributes or {}),
        )
        size = len(message.body.encode("utf-8"))
        if size > MESSAGE_MAX_BYTES:
            raise ValueError(
                f"attempt.send: the body is {size} bytes; a message takes at most "
                f"{MESSAGE_MAX_BYTES} bytes"
            )
        total = outbox_bytes([*self.messages, message])
        if total > OUTBOX_MAX_BYTES:
            raise ValueError(
                f"attempt.send: the outbox would take {total} bytes on the record; it is "
                f"stored on the record, which DynamoDB holds to {c.ITEM_MAX_BYTES} bytes, so "
                f"the outbox takes at most {OUTBOX_MAX_BYTES}. Send less per operation (a "
                "reference to the data, not the data)"
            )
        self.messages.append(message)


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
        is_topic(destination) or destination.startswith(("https://", "http://"))
    ):
        raise ValueError(
            "attempt.send: the destination must be an SQS queue URL (https://...) or an SNS "
            f"topic ARN (arn:aws:sns:...), got {type(destination).__name__}"
        )
    fifo = destination.endswith(".fifo")
    if group_id is not None and (not isinstance(group_id, str) or not 0 < len(group_id) <= 128):
        raise ValueError("attempt.send: group_id must be a string of 1 to 128 characters")
    if fifo and group_id is None:
        raise ValueError("attempt.send: a FIFO queue or topic needs group_id (its message group)")
    if is_topic(destination) and not fifo and group_id is not None:
        raise ValueError("attempt.send: a standard SNS topic takes no group_id")
    return destination


def _body_text(body: Any) -> str:
    """A message body: a string as it is, anything else as its JSON."""
    if isinstance(body, str):
        text = body
    else:
        # Imported here: ``once`` is imported when pytest starts (the testing kit's plugin),
        # where importing Powertools would cost every test session.
        from aws_lambda_powertools.shared.json_encoder import Encoder

        try:
            text = json.dumps(body, cls=Encoder, separators=(",", ":"), allow_nan=False)
        except Exception as error:
            raise ValueError(
                f"attempt.send: the body ({type(body).__name__}) cannot be sent as JSON "
                f"({type(error).__name__}); pass a string or a JSON value"
            ) from None
    if not text:
        raise ValueError("attempt.send: SQS and SNS take no empty body")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("attempt.send: the body holds a lone surrogate") from None
    return text


def _check_attributes(
    attributes: Mapping[str, str | int | float | bytes],
) -> tuple[tuple[str, str, str | bytes], ...]:
    if len(attributes) > MAX_ATTRIBUTES:
        raise ValueError(
            f"attempt.send: at most {MAX_ATTRIBUTES} attributes (SQS takes 10 and once's "
            f"{c.OUTBOX_ATTR_SOURCE} and {c.OUTBOX_ATTR_SEQ} are two of them)"
        )
    checked: list[tuple[str, str, str | bytes]] = []
    for name, value in attributes.items():
        if (
            not isinstance(name, str)
            or not _ATTRIBUTE_NAME.fullmatch(name)
            or name.lower().startswith(_RESERVED_PREFIXES)
            or ".." in name
            or name.startswith(".")
            or name.endswith(".")
        ):
            raise ValueError(
                f"attempt.send: {name!r} is not an attribute name SQS takes (letters, digits, "
                "_ - ., not starting with once., AWS. or Amazon.)"
            )
        if isinstance(value, bool):
            raise ValueError(f"attempt.send: attribute {name!r} is a bool; send it as a string")
        if isinstance(value, str) and value:
            checked.append((name, "String", value))
        elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            checked.append((name, "Number", repr(value)))
        elif isinstance(value, bytes) and value:
            checked.append((name, "Binary", value))
        else:
            raise ValueError(
                f"attempt.send: attribute {name!r} must be a non-empty str, an int, a finite "
                f"float or non-empty bytes (got {type(value).__name__})"
            )
    return tuple(checked)
