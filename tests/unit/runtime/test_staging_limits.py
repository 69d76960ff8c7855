"""What ``attempt.write`` and ``attempt.send`` refuse at the call (``once.effects``): every
limit of one commit DynamoDB would refuse later, raised where it is made, with the limit in
its message; and a refused call stages nothing. Pure: no I/O."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from once import constants as c
from once.effects import OUTBOX_MAX_BYTES, Effects, item_bytes, outbox_bytes
from once.models import Attempt
from once.sendrules import SQS_MESSAGE_MAX_BYTES

TABLE = "idempotency"
LEDGER = "ledger"
RECORD_ID = "test#k-1"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"
FIFO_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify.fifo"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notify"
FIFO_TOPIC = "arn:aws:sns:us-east-1:123456789012:notify.fifo"


def effects() -> Effects:
    return Effects(table_name=TABLE, record_id=RECORD_ID)


def attempt() -> Attempt:
    """An attempt as the processor builds it: its staging knows once's table."""
    return Attempt(
        key="k-1", fence=1, message_id="m-1", takeover=False, record=None, effects=effects()
    )


def put(key: str, table: str = LEDGER, **extra: Any) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": {"id": {"S": key}, **extra}}}


def update(key: str, table: str = LEDGER) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": {"id": {"S": key}},
            "UpdateExpression": "ADD balance :a",
            "ExpressionAttributeValues": {":a": {"N": "1"}},
        }
    }


def delete(key: str, table: str = LEDGER) -> dict[str, Any]:
    return {"Delete": {"TableName": table, "Key": {"id": {"S": key}}}}


def check(key: str, table: str = LEDGER) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {"id": {"S": key}},
            "ConditionExpression": "attribute_exists(id)",
        }
    }


OPERATIONS = {"Put": put, "Update": update, "Delete": delete, "ConditionCheck": check}


def big_item(key: str, size: int) -> dict[str, Any]:
    """A Put whose item DynamoDB counts as about ``size`` bytes."""
    return put(key, data={"S": "x" * (size - len("id") - len(key) - len("data"))})


def snapshot(staged: Effects) -> tuple[int, int, int]:
    return len(staged.writes), len(staged.refusals), len(staged.messages)


# --- bullet 2: each limit raises at the call, naming the limit --------------------------------


def test_ninety_nine_staged_writes_fit_and_the_hundredth_element_is_refused_at_the_call() -> None:
    staged = attempt()
    for index in range(c.TRANSACTION_MAX_ELEMENTS - 1):
        staged.write(put(f"k-{index}"))
    with pytest.raises(ValueError, match=rf"at most {c.TRANSACTION_MAX_ELEMENTS} elements"):
        staged.write(put("one-too-many"))
    assert len(staged.effects.writes) == c.TRANSACTION_MAX_ELEMENTS - 1


def test_a_commit_past_four_megabytes_with_the_record_is_refused_at_the_call() -> None:
    staged = attempt()
    size = 300 * 1024  # under the item limit: only the transaction's total can refuse it
    added = 0
    with pytest.raises(ValueError, match=rf"at most {c.TRANSACTION_MAX_BYTES} bytes"):
        for index in range(c.TRANSACTION_MAX_ELEMENTS):
            staged.write(big_item(f"k-{index}", size))
            added += 1
    # Room for the record at its largest is kept: the writes alone stay under 4 MB.
    assert added == (c.TRANSACTION_MAX_BYTES - c.ITEM_MAX_BYTES) // size
    assert len(staged.effects.writes) == added


def test_a_put_item_over_four_hundred_kilobytes_is_refused_at_the_call() -> None:
    staged = attempt()
    staged.write(big_item("fits", c.ITEM_MAX_BYTES))
    with pytest.raises(ValueError, match=rf"at most {c.ITEM_MAX_BYTES} bytes per item"):
        staged.write(big_item("too-big", c.ITEM_MAX_BYTES + 1))
    assert len(staged.effects.writes) == 1


@pytest.mark.parametrize("first", OPERATIONS)
@pytest.mark.parametrize("second", OPERATIONS)
def test_two_operations_on_one_item_are_refused_at_the_call(first: str, second: str) -> None:
    staged = attempt()
    staged.write(update("anchor"))  # names the table's key attributes for the Puts
    staged.write(OPERATIONS[first]("account#1"))
    with pytest.raises(ValueError, match="one operation per item"):
        staged.write(OPERATIONS[second]("account#1"))
    assert len(staged.effects.writes) == 2


@pytest.mark.parametrize("written", ["1.0", "1e0", "01", "10E-1", "1.000"])
def test_numerically_equal_keys_written_differently_name_one_item(written: str) -> None:
    # DynamoDB compares numbers by value: two operations on one item refuse the whole commit.
    def on(number: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": LEDGER,
                "Key": {"id": {"N": number}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }

    staged = attempt()
    staged.write(on("1"))
    with pytest.raises(ValueError, match="one operation per item"):
        staged.write(on(written))
    staged.write(on("2"))
    assert len(staged.effects.writes) == 2


def test_the_same_key_on_two_tables_is_two_items() -> None:
    staged = attempt()
    staged.write(update("account#1"))
    staged.write(update("account#1", table="audit"))
    assert len(staged.effects.writes) == 2


def test_the_same_table_given_by_name_and_by_arn_is_one_table() -> None:
    staged = attempt()
    staged.write(update("account#1"))
    arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{LEDGER}"
    with pytest.raises(ValueError, match="one operation per item"):
        staged.write(update("account#1", table=arn))


@pytest.mark.parametrize("table", [TABLE, f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}"])
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_write_to_the_idempotency_table_is_refused_at_the_call(
    table: str, operation: str
) -> None:
    staged = attempt()
    with pytest.raises(ValueError, match="once's idempotency table"):
        staged.write(OPERATIONS[operation](RECORD_ID, table=table))
    assert not staged.effects


def test_an_outbox_that_would_push_the_record_past_its_item_size_is_refused_at_the_call() -> None:
    staged = attempt()
    body = "x" * (OUTBOX_MAX_BYTES // 2)
    staged.send(QUEUE, body)
    with pytest.raises(ValueError, match=rf"at most {OUTBOX_MAX_BYTES}") as refused:
        staged.send(QUEUE, body)
    assert str(c.ITEM_MAX_BYTES) in str(refused.value)
    assert len(staged.effects.messages) == 1


def test_the_outbox_limit_leaves_room_for_the_largest_result_on_the_record() -> None:
    assert OUTBOX_MAX_BYTES + c.RESULT_CAP_BYTES < c.ITEM_MAX_BYTES


def test_a_body_larger_than_a_message_takes_is_refused_at_the_call() -> None:
    staged = attempt()
    with pytest.raises(ValueError, match=rf"at most {SQS_MESSAGE_MAX_BYTES} bytes"):
        staged.send(QUEUE, "x" * (SQS_MESSAGE_MAX_BYTES + 1))
    assert not staged.effects


def test_more_than_eight_attributes_are_refused_at_the_call() -> None:
    staged = attempt()
    staged.send(QUEUE, "ok", attributes={f"a{i}": i for i in range(8)})
    with pytest.raises(ValueError, match="at most 8 attributes"):
        staged.send(QUEUE, "no", attributes={f"a{i}": i for i in range(9)})
    assert len(staged.effects.messages) == 1


@pytest.mark.parametrize(
    "name",
    ["once.source", "once.seq", "AWS.trace", "amazon.x", ".lead", "trail.", "a..b", "sp ace"],
)
def test_an_attribute_name_sqs_refuses_or_once_reserves_is_refused_at_the_call(name: str) -> None:
    staged = attempt()
    with pytest.raises(ValueError, match="is not an attribute name"):
        staged.send(QUEUE, "body", attributes={name: "v"})
    assert not staged.effects


@pytest.mark.parametrize("value", [True, "", b"", float("nan"), float("inf"), None, [1]])
def test_an_attribute_value_sqs_cannot_carry_is_refused_at_the_call(value: Any) -> None:
    staged = attempt()
    with pytest.raises(ValueError, match="attribute 'a'"):
        staged.send(QUEUE, "body", attributes={"a": value})
    assert not staged.effects


@pytest.mark.parametrize("destination", [FIFO_QUEUE, FIFO_TOPIC])
def test_a_fifo_target_without_a_group_id_is_refused_at_the_call(destination: str) -> None:
    staged = attempt()
    with pytest.raises(ValueError, match="needs group_id"):
        staged.send(destination, "body")
    staged.send(destination, "body", group_id="g-1")
    assert len(staged.effects.messages) == 1


def test_a_group_id_to_a_standard_topic_is_taken_as_sns_takes_it_for_fair_queues() -> None:
    staged = attempt()
    staged.send(TOPIC, "body", group_id="g-1")
    assert staged.effects.messages[0].group_id == "g-1"


@pytest.mark.parametrize("destination", ["notify", "sqs://notify", "arn:aws:sqs:us-east-1:1:q", 7])
def test_a_destination_that_is_neither_a_queue_url_nor_a_topic_arn_is_refused(
    destination: Any,
) -> None:
    with pytest.raises(
        ValueError, match=r"SQS queue URL .*, an SNS topic ARN .* or an EventBridge bus ARN"
    ):
        attempt().send(destination, "body")


@pytest.mark.parametrize("body", ["", {1, 2}, float("nan"), object()])
def test_a_body_that_cannot_be_sent_is_refused_at_the_call(body: Any) -> None:
    staged = attempt()
    with pytest.raises(ValueError, match=r"attempt\.send"):
        staged.send(QUEUE, body)
    assert not staged.effects


@pytest.mark.parametrize(
    "element",
    [
        {},
        {"Put": {}, "Update": {}},
        {"PutItem": {"TableName": LEDGER, "Item": {"id": {"S": "k"}}}},
        {"Put": {"Item": {"id": {"S": "k"}}}},
        {"Put": {"TableName": LEDGER}},
        {"Update": {"TableName": LEDGER, "Key": {"id": {"S": "k"}}}},
        {"ConditionCheck": {"TableName": LEDGER, "Key": {"id": {"S": "k"}}}},
        {"Put": {"TableName": LEDGER, "Item": {"id": "k"}}},  # the resource's shape
    ],
    ids=[
        "empty",
        "two",
        "not-an-operation",
        "no-table",
        "no-item",
        "no-update",
        "no-condition",
        "not-low-level",
    ],
)
def test_an_element_not_in_the_low_level_shape_is_refused_at_the_call(element: Any) -> None:
    staged = attempt()
    with pytest.raises(ValueError, match=r"attempt\.write"):
        staged.write(element)
    assert not staged.effects


def test_refused_takes_retry_or_quarantine_only() -> None:
    staged = attempt()
    staged.write(put("a"), refused="retry")
    staged.write(put("b"), refused="quarantine")
    with pytest.raises(ValueError, match='"retry" or "quarantine"'):
        staged.write(put("c"), refused="ignore")  # type: ignore[arg-type]
    assert staged.effects.refusals == ["retry", "quarantine"]


# --- properties --------------------------------------------------------------------------------

_keys = st.text(alphabet="abc", min_size=1, max_size=2)
_tables = st.sampled_from((LEDGER, "audit"))
_elements = st.tuples(st.sampled_from(sorted(OPERATIONS)), _keys, _tables)


@given(st.lists(_elements, min_size=1, max_size=30))
def test_any_staged_set_is_accepted_exactly_when_no_two_elements_name_one_item(
    elements: list[tuple[str, str, str]],
) -> None:
    staged = attempt()
    for table in (LEDGER, "audit"):  # the key names of both tables are known
        staged.write(update(f"anchor-{table}", table=table))
    seen: set[tuple[str, str]] = set()
    for operation, key, table in elements:
        item = (table, key)
        if item in seen:
            with pytest.raises(ValueError, match="one operation per item"):
                staged.write(OPERATIONS[operation](key, table=table))
        else:
            staged.write(OPERATIONS[operation](key, table=table))
            seen.add(item)
    assert len(staged.effects.writes) == 2 + len(seen)


@given(st.lists(st.sampled_from(sorted(OPERATIONS)), min_size=2, max_size=5), _keys)
def test_any_staged_set_with_two_elements_on_one_item_is_refused(
    operations: list[str], key: str
) -> None:
    staged = attempt()
    staged.write(update("anchor"))
    staged.write(OPERATIONS[operations[0]](key))
    for operation in operations[1:]:
        with pytest.raises(ValueError, match="one operation per item"):
            staged.write(OPERATIONS[operation](key))
    assert len(staged.effects.writes) == 2


_text = st.text(max_size=40).filter(lambda s: not re.search(r"[\ud800-\udfff]", s))


@given(st.dictionaries(_text.filter(bool), _text, max_size=8))
def test_item_bytes_of_strings_is_the_utf8_length_of_names_and_values(
    attributes: dict[str, str],
) -> None:
    item = {name: {"S": value} for name, value in attributes.items()}
    expected = sum(len(n.encode()) + len(v.encode()) for n, v in attributes.items())
    assert item_bytes(item) == expected


@given(st.integers(min_value=-(10**38), max_value=10**38))
def test_item_bytes_never_counts_a_number_under_dynamodbs_rule(number: int) -> None:
    # DynamoDB: about one byte per two significant digits, plus one.
    digits = len(str(abs(number)).strip("0") or "0")
    assert item_bytes({"n": {"N": str(number)}}) >= 1 + (digits + 1) // 2 + 1


def test_item_bytes_counts_every_attribute_type() -> None:
    assert item_bytes({"b": {"B": b"abc"}}) == 1 + 3
    assert item_bytes({"t": {"BOOL": True}, "z": {"NULL": True}}) == 2 + 2
    assert item_bytes({"ss": {"SS": ["ab", "é"]}}) == 2 + 2 + 2
    assert item_bytes({"bs": {"BS": [b"a", b"bc"]}}) == 2 + 3
    assert item_bytes({"l": {"L": [{"S": "ab"}]}}) == 1 + 3 + 1 + 2
    assert item_bytes({"m": {"M": {"k": {"S": "ab"}}}}) == 1 + 3 + 1 + 1 + 2
    with pytest.raises(ValueError, match="not a DynamoDB attribute type"):
        item_bytes({"x": {"Q": "?"}})


@given(st.lists(st.text(min_size=1, max_size=50).filter(lambda s: s.strip()), max_size=5))
def test_outbox_bytes_grows_with_every_message(bodies: list[str]) -> None:
    staged = effects()
    sizes = [outbox_bytes([])]
    for body in bodies:
        try:
            staged.send(QUEUE, body)
        except ValueError:  # a lone surrogate
            continue
        sizes.append(outbox_bytes(staged.messages))
    assert sizes == sorted(sizes)
    assert len(set(sizes)) == len(sizes)


def test_two_equal_puts_on_a_table_no_keyed_element_names_are_refused_at_the_call() -> None:
    # With no keyed element on the table its key attributes are not known here; two Puts of
    # one item are certain to share their key, whatever the key is.
    staged = attempt()
    staged.write(put("account#1", balance={"N": "1"}))
    with pytest.raises(ValueError, match="one operation per item"):
        staged.write(put("account#1", balance={"N": "1"}))
    assert len(staged.effects.writes) == 1


def test_two_different_puts_on_a_table_no_keyed_element_names_are_left_to_dynamodb() -> None:
    # Which attributes are the key is DynamoDB's to know (no I/O here): the commit is refused
    # whole there, nothing lands and the record fails (pinned in test_atomic_effects.py).
    staged = attempt()
    staged.write(put("account#1", balance={"N": "1"}))
    staged.write(put("account#1", balance={"N": "2"}))
    assert len(staged.effects.writes) == 2


def test_a_staged_element_is_captured_at_the_call() -> None:
    # What is committed is what business code staged at the call, as attempt.send captures
    # its body at the call: reusing (and changing) one element dict must not rewrite it.
    staged = attempt()
    element = put("entry#1", amount={"N": "5"})
    staged.write(element)
    element["Put"]["Item"]["id"] = {"S": "entry#2"}
    element["Put"]["Item"]["amount"]["N"] = "7"
    assert staged.effects.writes == [put("entry#1", amount={"N": "5"})]
