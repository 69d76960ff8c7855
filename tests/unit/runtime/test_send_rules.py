"""What ``attempt.send`` refuses at the call because SQS or SNS would refuse it (``once.effects``):
each rule is AWS's own, so a message AWS would refuse is never committed as owed, and a
message AWS takes is never refused. The Hypothesis properties hold ``attempt.send`` to
reference predicates written here from AWS's documented rules, over the whole of Unicode
(controls and lone surrogates included). Pure: no I/O."""

from __future__ import annotations

import string
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from once import constants as c
from once import identity
from once.effects import OUTBOX_MAX_BYTES, Effects
from once.identity import deduplication_id
from once.sendrules import DATA_TYPES, SNS_MESSAGE_MAX_BYTES, SQS_MESSAGE_MAX_BYTES

RECORD_ID = "payments#p-1"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify"
FIFO_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/notify.fifo"
TOPIC = "arn:aws:sns:us-east-1:123456789012:notify"
FIFO_TOPIC = "arn:aws:sns:us-east-1:123456789012:notify.fifo"
SECRET = "card-4111-1111"  # a value of the body no refusal may quote


@pytest.fixture(autouse=True)
def _function_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """The function runs in us-east-1, where every destination above is."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def effects() -> Effects:
    return Effects(table_name="idempotency", record_id=RECORD_ID)


def refused(destination: str, body: Any = "body", **kwargs: Any) -> str:
    """The refusal of one send, checked to stage nothing."""
    staged = effects()
    with pytest.raises(ValueError) as error:
        staged.send(destination, body, **kwargs)
    assert not staged.messages
    return str(error.value)


def taken(destination: str, body: Any = "body", **kwargs: Any) -> bool:
    staged = effects()
    try:
        staged.send(destination, body, **kwargs)
    except ValueError:
        assert not staged.messages
        return False
    return len(staged.messages) == 1


# --- reference predicates, from AWS's documented rules ----------------------------------------


def sqs_takes_text(text: str) -> bool:
    """SendMessage: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF, and not
    empty."""
    return bool(text) and all(
        ord(ch) in (0x9, 0xA, 0xD)
        or 0x20 <= ord(ch) <= 0xD7FF
        or 0xE000 <= ord(ch) <= 0xFFFD
        or 0x10000 <= ord(ch) <= 0x10FFFF
        for ch in text
    )


def sns_takes_text(text: str) -> bool:
    """Publish: UTF-8 text, and not empty."""
    return bool(text) and not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def aws_takes_group_id(group_id: str) -> bool:
    """MessageGroupId: 1-128 of a-z, A-Z, 0-9 and !"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~."""
    allowed = string.ascii_letters + string.digits + string.punctuation
    return 1 <= len(group_id) <= 128 and all(ch in allowed for ch in group_id)


def aws_takes_number(value: int | float) -> bool:
    """Number: up to 38 digits of precision (leading and trailing zeros trimmed), between
    10^-128 and 10^+126; or 0. A float's digits are its shortest repr's."""
    if value == 0:
        return True
    # The number AWS parses is the text sent: a float's shortest repr.
    magnitude = abs(Fraction(value if isinstance(value, int) else repr(value)))
    if not Fraction(1, 10**128) <= magnitude <= 10**126:
        return False
    text = str(abs(value)) if isinstance(value, int) else repr(abs(value))
    mantissa = text.lower().split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) <= 38


# Every code point, with the edges of each rule drawn often.
_EDGES = [0x0, 0x8, 0x9, 0xA, 0xB, 0xC, 0xD, 0xE, 0x1F, 0x20, 0x7F, 0xD7FF, 0xD800, 0xDBFF]
_EDGES += [0xDC00, 0xDFFF, 0xE000, 0xFFFD, 0xFFFE, 0xFFFF, 0x10000, 0x10FFFF, 0xE9, 0x20AC]
_any_character = st.one_of(
    st.integers(min_value=0, max_value=0x10FFFF), st.sampled_from(_EDGES)
).map(chr)
_any_text = st.text(_any_character, max_size=12)
_group_character = st.one_of(
    _any_character, st.sampled_from(string.ascii_letters + string.digits + string.punctuation)
)


# --- body characters ---------------------------------------------------------------------------


@pytest.mark.parametrize("character", ["\x00", "\x08", "\x0b", "\x0c", "\x1f", "\ufffe", "\uffff"])
def test_a_str_body_with_a_control_character_is_refused_at_the_call(character: str) -> None:
    message = refused(QUEUE, f"{SECRET}{character}")
    assert "SQS refuses" in message
    assert SECRET not in message


@pytest.mark.parametrize("destination", [QUEUE, TOPIC])
def test_a_str_body_with_a_lone_surrogate_is_refused_at_the_call(destination: str) -> None:
    message = refused(destination, f"{SECRET}\ud800")
    assert "surrogate" in message
    assert SECRET not in message


def test_a_str_body_of_tab_newline_return_and_any_character_sqs_takes_is_taken() -> None:
    assert taken(QUEUE, "\t\n\r \x7f\ud7ff\ue000\ufffd\U00010000\U0010ffff é€ 😀")


def test_a_str_body_with_a_control_character_is_taken_by_a_topic() -> None:
    # SNS asks UTF-8 text only (Publish); it documents no narrower character set.
    assert taken(TOPIC, "a\x00b\x1f")


@pytest.mark.parametrize("destination", [QUEUE, TOPIC])
def test_a_json_body_is_sent_escaped_so_controls_and_surrogates_in_it_are_taken(
    destination: str,
) -> None:
    staged = effects()
    staged.send(destination, {"note": "a\x00b\ud800c\uffff"})
    [message] = staged.messages
    assert message.body == '{"note":"a\\u0000b\\ud800c\\uffff"}'


@given(_any_text)
@example("")
@example("\ud800")
@example("\x00")
def test_a_str_body_is_taken_by_a_queue_exactly_when_sqs_takes_it(body: str) -> None:
    assert taken(QUEUE, body) == sqs_takes_text(body)


@given(_any_text)
@example("\udfff")
def test_a_str_body_is_taken_by_a_topic_exactly_when_sns_takes_it(body: str) -> None:
    assert taken(TOPIC, body) == sns_takes_text(body)


# --- attribute names, data types and values ----------------------------------------------------


def test_an_attribute_name_of_256_characters_is_taken_and_of_257_refused() -> None:
    assert taken(QUEUE, attributes={"a" * 256: "v"})
    assert "is not an attribute name" in refused(QUEUE, attributes={"a" * 257: "v"})


@pytest.mark.parametrize("name", ["AWS.x", "aws.x", "Aws.x", "Amazon.x", "AMAZON.x", "amazon.x"])
def test_an_attribute_name_with_a_reserved_prefix_in_any_case_is_refused_at_the_call(
    name: str,
) -> None:
    assert "is not an attribute name" in refused(TOPIC, attributes={name: "v"})


@pytest.mark.parametrize("name", ["", "é", "a b", "a\x00", "a:b", ".a", "a.", "a..b", "a\ud800"])
def test_an_attribute_name_aws_refuses_is_refused_without_quoting_what_is_not_text(
    name: str,
) -> None:
    message = refused(QUEUE, attributes={name: "v"})
    assert "is not an attribute name" in message
    assert "\x00" not in message and "\ud800" not in message


@pytest.mark.parametrize("name", ["a.b", "A-b_c.d", "awsx", "amazon", "x.AWS.y", "0"])
def test_an_attribute_name_aws_takes_is_taken(name: str) -> None:
    assert taken(QUEUE, attributes={name: "v"})
    assert taken(TOPIC, attributes={name: "v"})


def test_every_attribute_is_sent_with_a_data_type_sqs_and_sns_take() -> None:
    staged = effects()
    staged.send(QUEUE, "b", attributes={"s": "t", "i": 1, "f": 0.5, "x": b"\x00"})
    [message] = staged.messages
    assert {kind for _, kind, _ in message.attributes} == set(DATA_TYPES)
    assert set(DATA_TYPES) <= {"String", "Number", "Binary"}  # SQS's three; SNS takes them too


@pytest.mark.parametrize("character", ["\x00", "\x1f", "\ufffe", "\ud800"])
def test_an_attribute_value_with_a_character_sqs_refuses_is_refused_at_the_call(
    character: str,
) -> None:
    message = refused(QUEUE, attributes={"note": SECRET + character})
    assert "attribute 'note'" in message and "SQS refuses" in message
    assert SECRET not in message


def test_an_attribute_value_with_a_lone_surrogate_is_refused_by_a_topic_and_a_control_taken() -> (
    None
):
    assert "SNS refuses" in refused(TOPIC, attributes={"note": "a\udc00"})
    assert taken(TOPIC, attributes={"note": "a\x00"})


@given(_any_text)
def test_a_string_attribute_is_taken_exactly_when_the_service_takes_it(value: str) -> None:
    assert taken(QUEUE, attributes={"a": value}) == sqs_takes_text(value)
    assert taken(TOPIC, attributes={"a": value}) == sns_takes_text(value)


def test_a_number_past_38_digits_of_precision_is_refused_at_the_call() -> None:
    assert taken(QUEUE, attributes={"n": 10**38 - 1})  # 38 nines
    message = refused(QUEUE, attributes={"n": 10**38 + 1})  # 39 digits
    assert "38 digits of precision" in message


def test_trailing_zeros_are_not_digits_of_precision() -> None:
    staged = effects()
    staged.send(QUEUE, "b", attributes={"n": 10**40})
    assert staged.messages[0].attributes == (("n", "Number", "1" + "0" * 40),)


@pytest.mark.parametrize("value", [10**127, -(10**127), 1e127, 1e-129, -1e-129, 5e-324, 1e308])
def test_a_number_outside_ten_to_the_minus_128_and_126_is_refused_at_the_call(
    value: int | float,
) -> None:
    assert "between 10^-128 and 10^+126" in refused(TOPIC, attributes={"n": value})


@pytest.mark.parametrize(
    ("value", "text"),
    [(1e20, "100000000000000000000"), (1e-7, "0.0000001"), (2.5, "2.5"), (-0.0, "0"), (7, "7")],
)
def test_a_number_is_sent_in_plain_decimal_as_aws_parses_it(value: float, text: str) -> None:
    staged = effects()
    staged.send(QUEUE, "b", attributes={"n": value})
    assert staged.messages[0].attributes == (("n", "Number", text),)


def test_ten_to_the_126_and_ten_to_the_minus_128_are_taken() -> None:
    assert taken(QUEUE, attributes={"n": 10**126})
    assert taken(QUEUE, attributes={"n": 1e-128})


@given(
    st.one_of(
        st.integers(min_value=-(10**130), max_value=10**130),
        st.integers(min_value=10**36, max_value=10**40),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([10**126, 10**126 + 1, 1e-128, 9e-129, 1e126, 10**38 - 1, 10**38 + 1]),
    )
)
def test_a_number_attribute_is_taken_exactly_when_aws_takes_it(value: int | float) -> None:
    assert taken(QUEUE, attributes={"n": value}) == aws_takes_number(value)


@given(st.binary(min_size=1, max_size=64))
def test_any_non_empty_binary_value_is_taken(value: bytes) -> None:
    assert taken(QUEUE, attributes={"b": value})
    assert taken(TOPIC, attributes={"b": value})


# --- message group ids -------------------------------------------------------------------------


@pytest.mark.parametrize("destination", [FIFO_QUEUE, FIFO_TOPIC, QUEUE])
def test_a_group_id_with_a_space_is_refused_at_the_call(destination: str) -> None:
    assert "group_id must be" in refused(destination, group_id="tenant 1")


@pytest.mark.parametrize("destination", [FIFO_QUEUE, FIFO_TOPIC, QUEUE])
def test_a_group_id_with_a_non_ascii_letter_is_refused_at_the_call(destination: str) -> None:
    assert "group_id must be" in refused(destination, group_id="café")


@pytest.mark.parametrize("group_id", ["", "g" * 129, "a\x00", "a\ud800", "a\tb"])
def test_a_group_id_aws_refuses_is_refused_at_the_call(group_id: str) -> None:
    assert "group_id must be" in refused(FIFO_QUEUE, group_id=group_id)


@pytest.mark.parametrize("destination", [FIFO_QUEUE, FIFO_TOPIC])
def test_a_group_id_of_128_letters_digits_and_every_punctuation_is_taken(destination: str) -> None:
    assert taken(destination, group_id=string.punctuation)
    assert taken(destination, group_id="g" * 128)


def test_a_group_id_to_a_standard_queue_is_taken_for_fair_queues() -> None:
    assert taken(QUEUE, group_id="tenant-1")


@given(st.text(_group_character, max_size=130))
@example("g" * 128)
@example("g" * 129)
def test_a_group_id_is_taken_exactly_when_sqs_and_sns_take_it(group_id: str) -> None:
    assert taken(FIFO_QUEUE, group_id=group_id) == aws_takes_group_id(group_id)
    assert taken(FIFO_TOPIC, group_id=group_id) == aws_takes_group_id(group_id)


@given(st.text(min_size=1), st.integers(min_value=0, max_value=10**6))
def test_a_deduplication_id_is_one_sqs_and_sns_take(source: str, seq: int) -> None:
    assert aws_takes_group_id(deduplication_id(source.encode("utf-8", "replace").decode(), seq))


# --- destinations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "destination",
    [
        "arn:aws:sns:eu-west-1:123456789012:notify",
        "arn:aws:sns:eu-west-1:123456789012:notify.fifo",
    ],
)
def test_a_topic_in_another_region_is_refused_at_the_call(destination: str) -> None:
    message = refused(destination, group_id="g" if destination.endswith(".fifo") else None)
    assert "in eu-west-1 and this function in us-east-1" in message


@pytest.mark.parametrize(
    "destination",
    [
        "https://sqs.eu-west-1.amazonaws.com/123456789012/notify",
        "https://eu-west-1.queue.amazonaws.com/123456789012/notify",
        "https://sqs.eu-west-1.api.aws/123456789012/notify",
        "https://sqs-fips.us-west-2.amazonaws.com/123456789012/notify",
    ],
)
def test_a_queue_in_another_region_is_refused_at_the_call(destination: str) -> None:
    assert "and this function in us-east-1" in refused(destination)


def test_the_legacy_queue_host_is_us_east_1() -> None:
    assert taken("https://queue.amazonaws.com/123456789012/notify")


def test_the_functions_region_is_aws_region_before_aws_default_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert "this function in eu-west-1" in refused(QUEUE)
    monkeypatch.delenv("AWS_REGION")
    assert taken(QUEUE)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert "this function in ap-south-1" in refused(TOPIC)


def test_a_destination_that_names_no_region_or_a_function_with_none_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert taken("http://127.0.0.1:4566/123456789012/notify")  # a local engine's URL
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert taken("https://sqs.eu-west-1.amazonaws.com/123456789012/notify")


@pytest.mark.parametrize("destination", [QUEUE + "\ud800", TOPIC + "\udfff"])
def test_a_destination_with_a_lone_surrogate_is_refused_at_the_call(destination: str) -> None:
    assert "lone surrogate" in refused(destination)


# --- the size of one message -------------------------------------------------------------------

#: What once's own attributes add to message 0 of RECORD_ID's outbox: name, type and value.
#: (``once.source`` names the operation: the record id, then ``@`` and a 32-digit token.)
IDENTITY_BYTES = len(
    c.OUTBOX_ATTR_SOURCE + "String" + identity.source_of(RECORD_ID, identity.new_token())
) + len(c.OUTBOX_ATTR_SEQ + "Number" + "0")


def test_an_sns_message_past_256_kib_with_its_attributes_is_refused_at_the_call() -> None:
    attributes = {"kind": "credited", "n": 12, "raw": b"\x01\x02"}
    own = len("kind" + "String" + "credited") + len("n" + "Number" + "12") + len("raw" + "Binary")
    own += 2
    room = SNS_MESSAGE_MAX_BYTES - IDENTITY_BYTES - own
    assert taken(TOPIC, "x" * room, attributes=attributes)
    message = refused(TOPIC, "x" * (room + 1), attributes=attributes)
    assert f"at most {SNS_MESSAGE_MAX_BYTES} bytes" in message
    assert "an SNS topic" in message


def test_the_size_counts_the_messages_index_in_the_outbox() -> None:
    room = SNS_MESSAGE_MAX_BYTES - IDENTITY_BYTES  # for message 0: once.seq "0"
    assert taken(TOPIC, "x" * room)
    staged = effects()
    for _ in range(10):
        staged.send(TOPIC, "m")
    with pytest.raises(ValueError, match=f"at most {SNS_MESSAGE_MAX_BYTES} bytes"):
        staged.send(TOPIC, "x" * room)  # message 10: once.seq "10", one byte more
    assert len(staged.messages) == 10


def test_an_sqs_message_past_256_kib_is_taken_up_to_the_records_outbox_limit() -> None:
    body = "x" * (256 * 1024 + 1)
    assert taken(QUEUE, body)
    assert not taken(TOPIC, body)


def test_an_sqs_message_past_1_mib_with_its_attributes_is_refused_at_the_call() -> None:
    room = SQS_MESSAGE_MAX_BYTES - IDENTITY_BYTES
    message = refused(QUEUE, "x" * (room + 1))
    assert f"at most {SQS_MESSAGE_MAX_BYTES} bytes" in message
    assert "an SQS queue" in message
    # Not the outbox's limit: the message's own, counted first.
    assert SQS_MESSAGE_MAX_BYTES > OUTBOX_MAX_BYTES


def test_a_multibyte_body_is_counted_in_utf8_bytes() -> None:
    room = SNS_MESSAGE_MAX_BYTES - IDENTITY_BYTES
    assert taken(TOPIC, "é" * (room // 2))
    assert not taken(TOPIC, "é" * (room // 2 + 1))
