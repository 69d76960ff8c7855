"""An outbox message as the record stores it (``OutboxMessage.to_json``/``from_json``, the
record's ``outbox`` list) and as it goes on the wire (``outbox._batches``): what business code
staged comes back whole, and every send of it carries the same identity. Pure: no I/O."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from once import constants as c
from once.effects import Effects, OutboxMessage
from once.identity import deduplication_id
from once.models import Record
from once.outbox import _batches

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"
FIFO_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify.fifo"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notify"
SOURCE = "payments#p-1"

#: Any text SQS takes (SendMessage: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
#: #x10000-#x10FFFF); what it refuses is refused at the call
#: (tests/unit/runtime/test_send_rules.py).
_unicode = st.text(
    st.characters(exclude_categories=["Cs"]).filter(
        lambda ch: ch in "\t\n\r" or (ord(ch) >= 0x20 and ch not in "\ufffe\uffff")
    )
)
_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,20}", fullmatch=True)
_values = st.one_of(
    _unicode.filter(bool),
    st.integers(min_value=-(10**30), max_value=10**30),
    # A Number SQS and SNS take: 0, or between 10^-128 and 10^+126.
    st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: f == 0 or 1e-128 <= abs(f) <= 1e126
    ),
    st.binary(min_size=1, max_size=64),
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _unicode,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_unicode, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def staged_messages(draw: Any) -> OutboxMessage:
    """A message as ``attempt.send`` stages it, from any body and attributes it takes."""
    destination = draw(st.sampled_from((QUEUE, FIFO_QUEUE, TOPIC)))
    group = draw(_names) if destination == FIFO_QUEUE else None
    body = draw(
        st.one_of(
            _unicode.filter(bool),
            st.lists(_json, max_size=4),
            st.dictionaries(_unicode, _json, max_size=4),
        )
    )
    attributes = draw(st.dictionaries(_names, _values, max_size=8))
    staged = Effects()
    staged.send(destination, body, group_id=group, attributes=attributes)
    [message] = staged.messages
    return message


@given(staged_messages())
def test_an_outbox_message_of_any_body_and_attributes_round_trips(message: OutboxMessage) -> None:
    assert OutboxMessage.from_json(message.to_json()) == message


@given(st.lists(staged_messages(), min_size=1, max_size=5))
def test_a_records_outbox_list_reads_back_as_staged_in_order(messages: list[OutboxMessage]) -> None:
    item = {
        c.ATTR_ID: {"S": SOURCE},
        c.ATTR_STATUS: {"S": c.STATUS_COMPLETED},
        c.ATTR_FENCE: {"N": "1"},
        c.ATTR_OUTBOX: {"L": [{"S": m.to_json()} for m in messages]},
    }
    assert Record.from_item(item).outbox == tuple(messages)


def test_a_record_without_an_outbox_owes_nothing() -> None:
    item = {
        c.ATTR_ID: {"S": SOURCE},
        c.ATTR_STATUS: {"S": c.STATUS_COMPLETED},
        c.ATTR_FENCE: {"N": "1"},
    }
    assert Record.from_item(item).outbox == ()


def test_a_body_is_sent_as_given_when_a_string_and_as_json_otherwise() -> None:
    staged = Effects()
    staged.send(QUEUE, '{"as": "is"}')
    staged.send(QUEUE, {"paymentId": "p-1", "amount": 12})
    staged.send(QUEUE, [1, "two"])
    assert [m.body for m in staged.messages] == [
        '{"as": "is"}',
        '{"paymentId":"p-1","amount":12}',
        '[1,"two"]',
    ]


def test_attributes_are_typed_string_number_or_binary() -> None:
    staged = Effects()
    staged.send(QUEUE, "b", attributes={"s": "text", "i": 7, "f": 2.5, "x": b"\x00\xff"})
    [message] = staged.messages
    assert message.attributes == (
        ("s", "String", "text"),
        ("i", "Number", "7"),
        ("f", "Number", "2.5"),
        ("x", "Binary", b"\x00\xff"),
    )


@given(st.lists(staged_messages(), min_size=1, max_size=25))
def test_every_entry_carries_its_identity_and_a_fifo_entry_its_deduplication_id(
    messages: list[OutboxMessage],
) -> None:
    sent: dict[int, tuple[str, dict[str, Any]]] = {}
    for destination, batch in _batches(SOURCE, messages):
        assert 1 <= len(batch) <= 10
        for entry in batch:
            seq = int(entry["MessageAttributes"][c.OUTBOX_ATTR_SEQ]["StringValue"])
            assert seq not in sent
            sent[seq] = (destination, entry)
    assert sorted(sent) == list(range(len(messages)))  # each message once, under its index
    for seq, (destination, entry) in sent.items():
        message = messages[seq]
        attributes = entry["MessageAttributes"]
        assert destination == message.destination
        assert attributes[c.OUTBOX_ATTR_SOURCE] == {"DataType": "String", "StringValue": SOURCE}
        assert attributes[c.OUTBOX_ATTR_SEQ] == {"DataType": "Number", "StringValue": str(seq)}
        assert entry["Message" if message.to_topic else "MessageBody"] == message.body
        assert entry.get("MessageGroupId") == message.group_id
        if message.fifo:
            expected = hashlib.sha256(f"{SOURCE}#{seq}".encode()).hexdigest()
            assert entry["MessageDeduplicationId"] == expected == deduplication_id(SOURCE, seq)
        else:
            assert "MessageDeduplicationId" not in entry
        own = {n: v for n, v in attributes.items() if not n.startswith("once.")}
        assert len(own) == len(message.attributes)


@given(st.lists(staged_messages(), min_size=1, max_size=25))
def test_messages_to_one_destination_keep_their_staging_order(
    messages: list[OutboxMessage],
) -> None:
    by_destination: dict[str, list[int]] = {}
    for destination, batch in _batches(SOURCE, messages):
        by_destination.setdefault(destination, []).extend(int(e["Id"]) for e in batch)
    for seqs in by_destination.values():
        assert seqs == sorted(seqs)


def test_the_identity_of_a_message_is_the_same_on_every_send() -> None:
    staged = Effects()
    staged.send(FIFO_QUEUE, {"n": 1}, group_id="g")
    first, again = _batches(SOURCE, staged.messages), _batches(SOURCE, staged.messages)
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    assert deduplication_id(SOURCE, 0) != deduplication_id(SOURCE, 1)
    assert deduplication_id(SOURCE, 0) != deduplication_id("payments#p-2", 0)
