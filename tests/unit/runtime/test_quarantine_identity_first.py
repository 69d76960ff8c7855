"""The DLQ copy keeps what a redrive and a review need before the team's own attributes:
once's quarantine attributes, then the upstream identity (``once.source``/``once.seq``),
then the team's, in order. What SQS would refuse (more than 10 attributes, a value SQS does
not take, more than 1 MiB with the body) is dropped from the team's, never the body, and the
copy names what it dropped in ``once.dropped``. A send that fails says why (``Sent``)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from once import constants as c
from once.awserrors import SENT, Sent
from once.quarantine import QUARANTINE_ATTR_DROPPED, Quarantine

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-dlq"
SOURCE = {"stringValue": "payments#p-1", "dataType": "String"}
SEQ = {"stringValue": "0", "dataType": "Number"}
IDENTITY = {c.OUTBOX_ATTR_SOURCE: SOURCE, c.OUTBOX_ATTR_SEQ: SEQ}
MAX_BYTES = 1_048_576


def record(
    attributes: dict[str, dict[str, Any]] | None = None, body: str = "not json"
) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": attributes or {},
    }


def team(count: int, prefix: str = "a") -> dict[str, dict[str, Any]]:
    return {f"{prefix}{i}": {"stringValue": str(i), "dataType": "String"} for i in range(count)}


def request(
    attributes: dict[str, dict[str, Any]] | None = None,
    *,
    body: str = "not json",
    fence: int | None = None,
) -> dict[str, Any]:
    return Quarantine._request(URL, record(attributes, body), "INVALID_KEY", "bad key", fence)


def dropped(req: dict[str, Any]) -> list[str]:
    attribute = req["MessageAttributes"].get(QUARANTINE_ATTR_DROPPED)
    return json.loads(attribute["StringValue"]) if attribute else []


def size(req: dict[str, Any]) -> int:
    total = len(req["MessageBody"].encode())
    for name, attribute in req["MessageAttributes"].items():
        value = attribute.get("StringValue", attribute.get("BinaryValue"))
        value = value.encode() if isinstance(value, str) else value
        total += len(name.encode()) + len(attribute["DataType"].encode()) + len(value)
    return total


class Client:
    """An SQS client that records requests and answers with what it is given, in turn."""

    def __init__(self, *answers: Exception | None) -> None:
        self.requests: list[dict[str, Any]] = []
        self._answers = list(answers)

    def send_message(self, **req: Any) -> dict[str, Any]:
        self.requests.append(req)
        answer = self._answers.pop(0) if self._answers else None
        if answer is not None:
            raise answer
        return {"MessageId": "d-1"}


def refused(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "value 'secret'"}}, "SendMessage")


# --- Defect 4: identity first ------------------------------------------------------------


def test_eight_team_attributes_and_the_identity_keep_the_identity_in_the_dlq_copy() -> None:
    req = request(team(8) | IDENTITY)
    attributes = req["MessageAttributes"]

    assert len(attributes) <= 10
    assert attributes[c.OUTBOX_ATTR_SOURCE] == {"DataType": "String", "StringValue": "payments#p-1"}
    assert attributes[c.OUTBOX_ATTR_SEQ] == {"DataType": "Number", "StringValue": "0"}
    assert attributes[c.QUARANTINE_ATTR_REASON]["StringValue"] == "INVALID_KEY"
    assert {c.QUARANTINE_ATTR_MESSAGE_ID, c.QUARANTINE_ATTR_ERROR} <= set(attributes)


def test_what_is_dropped_is_the_teams_last_attributes_and_the_copy_names_them() -> None:
    req = request(IDENTITY | team(8))  # identity first this time: position does not matter

    kept = [name for name in req["MessageAttributes"] if name.startswith("a")]
    # 3 of ours + 2 identity + once.dropped leave 4 team attributes, the first four.
    assert kept == ["a0", "a1", "a2", "a3"]
    assert dropped(req) == ["a4", "a5", "a6", "a7"]


def test_nothing_dropped_means_no_dropped_attribute_and_every_team_attribute_kept() -> None:
    req = request(team(5) | IDENTITY)

    assert QUARANTINE_ATTR_DROPPED not in req["MessageAttributes"]
    assert len(req["MessageAttributes"]) == 10


def test_a_takeover_fence_is_kept_before_the_teams_attributes() -> None:
    req = request(team(9) | IDENTITY, fence=4)
    attributes = req["MessageAttributes"]

    assert attributes[c.QUARANTINE_ATTR_FENCE] == {"DataType": "Number", "StringValue": "4"}
    assert {c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ} <= set(attributes)
    assert len(attributes) == 10


def test_a_redriven_copy_keeps_the_earlier_dropped_names() -> None:
    first = request(team(9) | IDENTITY)
    carried = {
        name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
        for name, value in first["MessageAttributes"].items()
    }

    again = request(carried)

    assert dropped(again) == dropped(first)
    assert (
        again["MessageAttributes"][c.OUTBOX_ATTR_SOURCE]
        == first["MessageAttributes"][c.OUTBOX_ATTR_SOURCE]
    )


names = st.from_regex(r"\A[a-z][a-z0-9_-]{0,11}\Z", fullmatch=True).filter(
    lambda name: not name.startswith(("aws", "amazon"))
)
values = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30
)
teams = st.dictionaries(
    names, values.map(lambda text: {"stringValue": text, "dataType": "String"}), max_size=8
)


@settings(max_examples=300, deadline=None)
@given(
    team_attributes=teams,
    identity_first=st.booleans(),
    fence=st.none() | st.integers(1, 10**6),
    redriven=st.booleans(),
)
def test_any_ten_incoming_attributes_keep_the_identity_and_the_reason_within_ten(
    team_attributes: dict[str, dict[str, Any]],
    identity_first: bool,
    fence: int | None,
    redriven: bool,
) -> None:
    ours = (
        {
            c.QUARANTINE_ATTR_REASON: {"stringValue": "CONFLICT", "dataType": "String"},
            c.QUARANTINE_ATTR_MESSAGE_ID: {"stringValue": "m-0", "dataType": "String"},
        }
        if redriven
        else {}
    )
    incoming = IDENTITY | team_attributes if identity_first else team_attributes | IDENTITY
    incoming = dict(list((ours | incoming).items())[:10])  # at most 10, as SQS delivers them
    if not {c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ} <= set(incoming):
        incoming = IDENTITY | dict(list(team_attributes.items())[:6])

    req = request(incoming, fence=fence)
    attributes = req["MessageAttributes"]

    assert len(attributes) <= 10
    assert attributes[c.OUTBOX_ATTR_SOURCE]["StringValue"] == "payments#p-1"
    assert attributes[c.OUTBOX_ATTR_SEQ]["StringValue"] == "0"
    assert attributes[c.QUARANTINE_ATTR_REASON]["StringValue"] == "INVALID_KEY"
    assert req["MessageBody"] == "not json"
    carried = [name for name in incoming if name in team_attributes]
    kept = [name for name in carried if name in attributes]
    lost = [name for name in carried if name not in attributes]
    assert dropped(req) == lost  # named, in order
    for name in kept:
        assert attributes[name]["StringValue"] == incoming[name]["stringValue"]


# --- Defect 4: what SQS would refuse ------------------------------------------------------


def test_custom_types_and_binary_values_are_carried_as_sqs_takes_them() -> None:
    carried = {
        "kind": {"stringValue": "a", "dataType": "String.custom"},
        "ratio": {"stringValue": "1.5e3", "dataType": "Number.x"},
        "sig": {"binaryValue": base64.b64encode(b"\x00\xff").decode(), "dataType": "Binary.gz"},
    }

    attributes = request(carried | IDENTITY)["MessageAttributes"]

    assert attributes["kind"] == {"DataType": "String.custom", "StringValue": "a"}
    assert attributes["ratio"] == {"DataType": "Number.x", "StringValue": "1.5e3"}
    assert attributes["sig"] == {"DataType": "Binary.gz", "BinaryValue": b"\x00\xff"}


@pytest.mark.parametrize("value", ["1e126", "-1E+126", "1" + "0" * 126, "1e-128", "0e999"])
def test_a_number_at_the_edges_aws_takes_is_carried(value: str) -> None:
    # "between 10^-128 and 10^+126", both ends: the rule attempt.send holds a Number to.
    carried = {"n": {"stringValue": value, "dataType": "Number"}}

    attributes = request(carried | IDENTITY)["MessageAttributes"]

    assert attributes["n"] == {"DataType": "Number", "StringValue": value}


@pytest.mark.parametrize("value", ["1.1e126", "1e127", "9e-129", "1e999999999999999999999"])
def test_a_number_past_the_edges_is_dropped(value: str) -> None:
    req = request({"n": {"stringValue": value, "dataType": "Number"}} | IDENTITY)

    assert "n" not in req["MessageAttributes"]
    assert dropped(req) == ["n"]


@pytest.mark.parametrize(
    "name, attribute",
    [
        ("empty", {"stringValue": "", "dataType": "String"}),
        ("control", {"stringValue": "a\x00b", "dataType": "String"}),
        ("surrogate", {"stringValue": "a\ud800", "dataType": "String"}),
        ("nan", {"stringValue": "NaN", "dataType": "Number"}),
        ("words", {"stringValue": "twelve", "dataType": "Number.int"}),
        ("underscored", {"stringValue": "1_000", "dataType": "Number"}),
        ("huge", {"stringValue": "1e200", "dataType": "Number"}),
        ("precise", {"stringValue": "1." + "1" * 40, "dataType": "Number"}),
        ("not-base64", {"binaryValue": "***", "dataType": "Binary"}),
        ("no-value", {"dataType": "String"}),
        ("typeless", {"stringValue": "x"}),
        ("odd-type", {"stringValue": "x", "dataType": "Text"}),
        ("empty-label", {"stringValue": "x", "dataType": "String."}),
        ("AWS.reserved", {"stringValue": "x", "dataType": "String"}),
        ("bad..name", {"stringValue": "x", "dataType": "String"}),
        ("spa ce", {"stringValue": "x", "dataType": "String"}),
        ("x" * 257, {"stringValue": "x", "dataType": "String"}),
    ],
)
def test_an_attribute_sqs_would_refuse_is_dropped_and_named_not_sent(
    name: str, attribute: dict[str, Any]
) -> None:
    req = request({"ok": {"stringValue": "1", "dataType": "String"}, name: attribute} | IDENTITY)

    assert name not in req["MessageAttributes"]
    assert req["MessageAttributes"]["ok"]["StringValue"] == "1"
    assert len(dropped(req)) == 1
    assert {c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ} <= set(req["MessageAttributes"])


def test_a_body_near_one_mib_drops_the_teams_attributes_and_keeps_the_body_exactly() -> None:
    big = {f"b{i}": {"stringValue": "v" * 2_000, "dataType": "String"} for i in range(4)}
    body = "x" * (MAX_BYTES - 4_000)

    req = request(big | IDENTITY, body=body)

    assert req["MessageBody"] == body
    assert size(req) <= MAX_BYTES
    assert {c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ, c.QUARANTINE_ATTR_REASON} <= set(
        req["MessageAttributes"]
    )
    assert dropped(req)  # the big ones, named


def test_a_refused_send_is_retried_once_with_only_onces_attributes() -> None:
    client = Client(refused("InvalidParameterValue"))
    quarantine = Quarantine(client, URL)

    sent = quarantine.send(record(team(3) | IDENTITY), "INVALID_KEY", "bad key")

    assert sent == SENT
    first, second = client.requests
    assert {"a0", "a1", "a2"} <= set(first["MessageAttributes"])
    assert not {"a0", "a1", "a2"} & set(second["MessageAttributes"])
    assert {c.OUTBOX_ATTR_SOURCE, c.OUTBOX_ATTR_SEQ} <= set(second["MessageAttributes"])
    assert json.loads(second["MessageAttributes"][QUARANTINE_ATTR_DROPPED]["StringValue"]) == [
        "a0",
        "a1",
        "a2",
    ]
    assert second["MessageBody"] == first["MessageBody"]


# --- Defect 7: a send that fails says why -------------------------------------------------


def test_a_send_without_a_dlq_says_so() -> None:
    sent = Quarantine(None, None).send(record(), "INVALID_JSON", "body is not JSON")

    assert isinstance(sent, Sent) and not sent
    assert sent.error == "no DLQ configured"


def test_a_refused_send_says_which_error_and_never_its_message() -> None:
    client = Client(refused("AccessDenied"))

    sent = Quarantine(client, URL).send(record(team(2)), "INVALID_JSON", "body is not JSON")

    assert not sent
    assert sent.error == "ClientError (AccessDenied)"
    assert len(client.requests) == 1  # a refusal of the caller, not of the request: no retry


def test_a_content_refusal_of_the_minimal_copy_too_says_why() -> None:
    client = Client(refused("InvalidParameterValue"), refused("InvalidParameterValue"))

    sent = Quarantine(client, URL).send(record(team(2)), "INVALID_JSON", "body is not JSON")

    assert not sent and sent.error == "ClientError (InvalidParameterValue)"
    assert len(client.requests) == 2


def test_a_sent_copy_is_sent() -> None:
    client = Client()

    sent = Quarantine(client, URL).send(record(), "INVALID_JSON", "body is not JSON")

    assert sent and sent == SENT and len(client.requests) == 1


def test_a_message_too_large_for_sqs_even_alone_is_not_sent_and_says_why() -> None:
    client = Client()

    sent = Quarantine(client, URL).send(record(body="x" * MAX_BYTES), "INVALID_JSON", "x")

    assert not sent and sent.error is not None and "1 MiB" in sent.error
    assert client.requests == []


def test_the_dlq_copy_with_identity_first_reaches_a_real_queue(aws) -> None:
    sent = Quarantine(aws.sqs, aws.dlq_url).send(
        record(team(8) | IDENTITY), "INVALID_KEY", "bad key"
    )

    assert sent
    [dead] = aws.dlq()
    assert dead["MessageAttributes"][c.OUTBOX_ATTR_SEQ] == {
        "StringValue": "0",
        "DataType": "Number",
    }
    assert len(dead["MessageAttributes"]) == 10
