"""An outbox event to an EventBridge bus, from ``attempt.send`` to a downstream ``SOURCE_KEY``
consumer: held at the call to PutEvents' documented rules, sent ten at a time within its
request size, each result entry's ``ErrorCode`` read, and once's identity carried in the
detail (``"once": {"source", "seq"}``), read back from the whole event, from ``InputPath:
"$.detail"`` and from a transformer that keeps it, hashed without EventBridge's per-put
fields.

PutEvents' rules: https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html,
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html,
https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html;
the event's shape: https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from once import SOURCE_KEY
from once import constants as c
from once import sendrules as rules
from once.effects import DETAIL_MAX_DEPTH, Effects, OutboxMessage, event_detail
from once.outbox import Outbox
from once.payload import WHOLE_BODY, BadMessage, BodyReader

REGION = "us-east-1"
BUS = f"arn:aws:events:{REGION}:123456789012:event-bus/reservations"
QUEUE = f"https://sqs.{REGION}.amazonaws.com/123456789012/audit"


@pytest.fixture(autouse=True)
def _region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", REGION)


def staged(*details: Any, record_id: str = "reservations#r-1") -> Effects:
    effects = Effects(table_name="once", record_id=record_id)
    for detail in details:
        effects.send(BUS, detail, source="shop.reservations", detail_type="ReservationShipped")
    return effects


def delivered(entry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The event a rule's SQS target delivers for a PutEvents entry (the default shape)."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": "123456789012",
        "time": "2026-11-28T12:00:00Z",
        "region": REGION,
        "resources": [],
        "detail": json.loads(entry["Detail"]),
        **fields,
    }


class Events:
    """A PutEvents client that answers as EventBridge does: one result entry per request
    entry, in order; ``fail`` names the entries (by index) answered with an ErrorCode."""

    def __init__(self, fail: dict[int, str] | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail = fail or {}

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert 1 <= len(Entries) <= rules.EVENTS_MAX_ENTRIES
        assert sum(map(rules.event_entry_bytes, Entries)) < rules.EVENTS_REQUEST_MAX_BYTES
        self.calls.append(Entries)
        results: list[dict[str, Any]] = []
        for index, entry in enumerate(Entries):
            assert rules.event_entry_problem(entry) is None
            code = self.fail.get(index)
            results.append(
                {"ErrorCode": code, "ErrorMessage": "..."}
                if code
                else {"EventId": str(uuid.uuid4())}
            )
        return {"FailedEntryCount": len(self.fail), "Entries": results}


def sent(effects: Effects, client: Events) -> Any:
    assert effects.record_id is not None
    return Outbox(lambda service: client if service == "events" else None).send(
        effects.record_id, effects.messages
    )


# --- at the call --------------------------------------------------------------------------------


def test_an_event_carries_the_operations_identity_first_in_its_detail() -> None:
    effects = staged({"reservationId": "r-1", "items": [1, 2]}, "{}")
    client = Events()
    assert sent(effects, client)
    (entries,) = client.calls
    source = effects.messages[0].source
    assert source is not None and source.endswith("@" + effects.token)
    assert [json.loads(e["Detail"]) for e in entries] == [
        {"once": {"source": source, "seq": 0}, "reservationId": "r-1", "items": [1, 2]},
        {"once": {"source": source, "seq": 1}},
    ]
    assert {e["EventBusName"] for e in entries} == {BUS}
    assert {(e["Source"], e["DetailType"]) for e in entries} == {
        ("shop.reservations", "ReservationShipped")
    }


def test_a_stored_event_is_sent_the_same_on_every_send() -> None:
    effects = staged({"b": 2, "a": 1})
    stored = [OutboxMessage.from_json(m.to_json()) for m in effects.messages]
    assert stored == effects.messages
    first, second = Events(), Events()
    sent(effects, first)
    Outbox(lambda service: second).send("reservations#r-1", stored)
    assert first.calls == second.calls


@pytest.mark.parametrize(
    ("detail", "kwargs", "says"),
    [
        ([1, 2], {}, "not a JSON object"),
        ("[1]", {}, "not a JSON object"),
        ('{"a": NaN}', {}, "not JSON"),
        ("{not json", {}, "not JSON"),
        ({"once": 1}, {}, "once's own"),
        ({"n": 2**63}, {}, "integer outside"),
        ({"a": 1}, {"source": None}, "Source is a required argument"),
        ({"a": 1}, {"source": "aws.orders"}, "may not begin with 'aws.'"),
        ({"a": 1}, {"detail_type": "x" * 129}, "longer than 128"),
        ({"a": 1}, {"detail_type": ""}, "DetailType is a required argument"),
        ({"a": 1}, {"group_id": "g"}, "no group_id"),
        ({"a": 1}, {"attributes": {"k": "v"}}, "no message attributes"),
        ({"a": "x" * rules.EVENTS_REQUEST_MAX_BYTES}, {}, "less than 1000000 bytes"),
    ],
)
def test_an_event_eventbridge_would_refuse_fails_at_the_call(
    detail: Any, kwargs: dict[str, Any], says: str
) -> None:
    arguments: dict[str, Any] = {"source": "shop.reservations", "detail_type": "Shipped"}
    arguments.update(kwargs)
    effects = Effects(table_name="once", record_id="reservations#r-1")
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        effects.send(BUS, detail, **arguments)
    assert not effects.messages


@pytest.mark.parametrize("depth", [DETAIL_MAX_DEPTH + 1, 990, rules.PUT_EVENTS_MAX_DEPTH + 1, 5000])
@pytest.mark.parametrize("as_text", [True, False])
def test_a_detail_nested_deeper_than_once_holds_fails_at_the_call_in_those_words(
    depth: int, as_text: bool
) -> None:
    body = '{"d":' * (depth - 1) + "{}" + "}" * (depth - 1) if as_text else _nested(depth)
    with pytest.raises(ValueError, match=f"nested deeper than {DETAIL_MAX_DEPTH} levels"):
        staged(body)
    assert rules.detail_problem(_nested(rules.PUT_EVENTS_MAX_DEPTH + 1)) is not None
    assert rules.detail_problem(_nested(rules.PUT_EVENTS_MAX_DEPTH)) is None


def test_a_detail_as_deep_as_once_holds_is_sent_and_read_back_downstream() -> None:
    effects = staged(_nested(DETAIL_MAX_DEPTH))
    client = Events()
    assert sent(effects, client)
    assert read(delivered(client.calls[0][0])).key.endswith("#0")


def _nested(depth: int) -> dict[str, Any]:
    """A detail ``depth`` objects deep (built without recursion)."""
    detail: dict[str, Any] = {}
    for _ in range(depth - 1):
        detail = {"d": detail}
    return detail


@pytest.mark.parametrize(
    ("destination", "says"),
    [
        ("arn:aws:events:eu-west-1:123456789012:event-bus/reservations", "in eu-west-1"),
        ("arn:aws:events:us-east-1:123456789012:rule/reservations", "named by its ARN"),
        ("arn:aws:events:us-east-1:12345:event-bus/reservations", "named by its ARN"),
        ("arn:aws:events:us-east-1:123456789012:event-bus/a b", "named by its ARN"),
    ],
)
def test_a_bus_put_events_cannot_reach_fails_at_the_call(destination: str, says: str) -> None:
    effects = Effects(table_name="once", record_id="reservations#r-1")
    with pytest.raises(ValueError, match=says):
        effects.send(destination, {"a": 1}, source="shop", detail_type="Shipped")


def test_source_and_detail_type_are_refused_for_a_queue_or_a_topic() -> None:
    effects = Effects(table_name="once", record_id="reservations#r-1")
    with pytest.raises(ValueError, match="an EventBridge event's"):
        effects.send(QUEUE, {"a": 1}, source="shop", detail_type="Shipped")


def test_a_bus_named_like_a_fifo_queue_gets_no_deduplication_id() -> None:
    effects = Effects(table_name="once", record_id="reservations#r-1")
    effects.send(BUS + ".fifo", {"a": 1}, source="shop", detail_type="Shipped")
    assert not effects.messages[0].fifo
    client = Events()
    assert sent(effects, client)
    assert set(client.calls[0][0]) == {"Source", "DetailType", "Detail", "EventBusName"}


# --- the send ---------------------------------------------------------------------------------


def test_events_go_ten_to_a_request_in_staging_order_beside_a_queues_messages() -> None:
    effects = staged(*({"n": n} for n in range(23)))
    client = Events()
    assert sent(effects, client)
    assert [len(call) for call in client.calls] == [10, 10, 3]
    seqs = [json.loads(e["Detail"])["once"]["seq"] for call in client.calls for e in call]
    assert seqs == list(range(23))


def test_a_request_holds_less_than_eventbridges_payload_limit() -> None:
    """The record holds the outbox to DynamoDB's item size, well under PutEvents' 1 MB, so
    only an outbox read back whole meets the limit; the batching holds to it all the same."""
    big = json.dumps({"a": "x" * (rules.EVENTS_REQUEST_MAX_BYTES // 3)})
    stored = [
        OutboxMessage(BUS, big, source="reservations#r-1@t", event=("shop", "Shipped"))
        for _ in range(4)
    ]
    client = Events()
    assert Outbox(lambda service: client).send("reservations#r-1", stored)
    assert [len(call) for call in client.calls] == [2, 2]


@pytest.mark.parametrize(
    "code", ["InternalFailure", "ThrottlingException", "AccessDeniedException"]
)
def test_a_failed_entry_leaves_the_outbox_owed_and_says_its_code(code: str) -> None:
    effects = staged({"a": 1}, {"b": 2})
    result = sent(effects, Events(fail={1: code}))
    assert not result
    assert code in result.error
    assert "..." not in result.error  # the ErrorMessage may quote the event: never kept


def test_a_response_missing_an_entry_is_not_taken_as_sent() -> None:
    class Short(Events):
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            answer = super().put_events(Entries)
            return {"FailedEntryCount": 0, "Entries": answer["Entries"][:-1]}

    result = sent(staged({"a": 1}, {"b": 2}), Short())
    assert not result and "Accepted 1 of 2" in result.error


# --- the consumer ---------------------------------------------------------------------------


def read(body: Any, envelope: str | None = None) -> Any:
    return BodyReader(SOURCE_KEY, WHOLE_BODY, envelope).read(json.dumps(body), {})


def one_entry() -> tuple[Effects, dict[str, Any]]:
    effects = staged({"reservationId": "r-1"})
    client = Events()
    sent(effects, client)
    return effects, client.calls[0][0]


def test_a_whole_event_is_keyed_on_the_identity_in_its_detail() -> None:
    effects, entry = one_entry()
    parsed = read(delivered(entry))
    assert parsed.key == f"{effects.messages[0].source}#0"


def test_a_resent_event_has_the_same_hash_though_eventbridge_stamps_it_anew() -> None:
    _, entry = one_entry()
    first = read(delivered(entry))
    resent = read(delivered(entry, time="2026-11-28T12:05:00Z", **{"replay-name": "r"}))
    assert resent.key == first.key and resent.payload_hash == first.payload_hash


def test_a_changed_detail_under_one_identity_has_another_hash() -> None:
    _, entry = one_entry()
    other = dict(entry, Detail=entry["Detail"].replace('"r-1"', '"r-2"'))
    assert read(delivered(entry)).payload_hash != read(delivered(other)).payload_hash


def test_input_path_detail_and_a_transformer_keeping_once_are_keyed_the_same() -> None:
    _effects, entry = one_entry()
    whole = read(delivered(entry))
    detail = json.loads(entry["Detail"])
    assert read(detail).key == whole.key
    transformed = {"once": detail["once"], "reservation": detail["reservationId"]}
    assert read(transformed).key == whole.key
    assert read(delivered(entry), envelope="detail").key == whole.key


@pytest.mark.parametrize(
    "carried",
    [
        None,
        {"source": "", "seq": 0},
        {"source": "s@t", "seq": -1},
        {"source": "s@t", "seq": True},
        {"source": "s@t", "seq": "0x1"},
        {"source": 5, "seq": 0},
        "s@t#0",
    ],
)
def test_an_event_without_a_usable_identity_is_bad_input(carried: Any) -> None:
    _, entry = one_entry()
    event = delivered(entry)
    if carried is None:
        del event["detail"]["once"]
    else:
        event["detail"]["once"] = carried
    with pytest.raises(BadMessage) as raised:
        read(event)
    assert raised.value.reason == c.REASON_INVALID_KEY


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=rules.DETAIL_INT_MIN, max_value=rules.DETAIL_INT_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    detail=st.dictionaries(st.text().filter(lambda k: k != "once"), _JSON, max_size=5),
    as_text=st.booleans(),
    record_id=st.text(min_size=1, max_size=40),
)
def test_any_detail_a_team_stages_is_sent_as_eventbridge_takes_it_and_read_back(
    detail: dict[str, Any], as_text: bool, record_id: str
) -> None:
    """Property: whatever JSON object business code stages (as a dict or as its text, under
    any record id), the entry PutEvents gets is one it takes, its detail is the team's with
    once's identity beside it, and the downstream reader keys on that identity."""
    body = json.dumps(detail, indent=1) if as_text else detail
    effects = staged(body, record_id=record_id)
    client = Events()
    assert sent(effects, client)
    ((entry,),) = client.calls
    assert rules.event_entry_problem(entry) is None
    sent_detail = json.loads(entry["Detail"])
    assert sent_detail.pop("once") == {"source": effects.messages[0].source, "seq": 0}
    assert sent_detail == json.loads(json.dumps(detail))
    assert read(delivered(entry)).key == f"{effects.messages[0].source}#0"


def test_event_detail_keeps_the_teams_text_and_adds_the_identity_first() -> None:
    assert event_detail('  {"a": 1}\n', "s@t", 3) == '{"once":{"source":"s@t","seq":3},"a": 1}'
    assert json.loads(event_detail("{ }", "s@t", 0)) == {"once": {"source": "s@t", "seq": 0}}
