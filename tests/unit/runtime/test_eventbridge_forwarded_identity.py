"""A ``SOURCE_KEY`` consumer behind a rule with ``InputPath: "$.detail"`` keys an event on the
identity the outbox wrote at the top of that detail, even when the team's detail is itself an
event or an SNS notification it forwards (proved by the adversarial review of issue 41: the
reader took the forwarded message's identity, and two operations forwarding one event
collapsed into one effect downstream).

docs/design.md, "An event on an EventBridge bus": the outbox writes ``"once": {"source",
"seq"}`` first in the detail; "A rule's SQS target keeps the identity whatever it delivers:
... the detail alone (``InputPath: "$.detail"``; ``once`` at the top)". The team's detail may
hold anything but a top-level ``once``; a nested one (a forwarded event's) is another
operation's. The reader takes the top-level ``once`` first: neither a whole event nor an SNS
notification has one.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from once import SOURCE_KEY, Attempt, make_handler
from once.effects import Effects
from once.models import Outcome
from once.outbox import Outbox
from once.payload import WHOLE_BODY, BodyReader
from once.testing import OnceEnv

REGION = "us-east-1"
BUS = f"arn:aws:events:{REGION}:123456789012:event-bus/reservations"
AUDIT_BUS = f"arn:aws:events:{REGION}:123456789012:event-bus/audit"


@pytest.fixture(autouse=True)
def _region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", REGION)


class Events:
    """A PutEvents client answering as EventBridge does (every entry accepted)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.entries.extend(Entries)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": str(uuid.uuid4())} for _ in Entries]}


def published(
    record_id: str, detail: Any, bus: str = BUS, detail_type: str = "Shipped"
) -> dict[str, Any]:
    """The PutEvents entry the outbox sends for one event staged under ``record_id``."""
    effects = Effects(table_name="once", record_id=record_id)
    effects.send(bus, detail, source="shop.reservations", detail_type=detail_type)
    client = Events()
    assert Outbox(lambda service: client).send(record_id, effects.messages)
    (entry,) = client.entries
    return entry


def whole_event(entry: dict[str, Any]) -> dict[str, Any]:
    """What a rule's SQS target delivers by default for a PutEvents entry (AWS's shape:
    https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html)."""
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
    }


def input_path_detail(entry: dict[str, Any]) -> dict[str, Any]:
    """What a rule's SQS target with ``InputPath: "$.detail"`` delivers: the detail alone."""
    return json.loads(entry["Detail"])


def written_identity(entry: dict[str, Any]) -> str:
    """The identity the outbox wrote into the event (``detail.once``), as a key."""
    once = json.loads(entry["Detail"])["once"]
    return f"{once['source']}#{once['seq']}"


def read(body: Any) -> Any:
    return BodyReader(SOURCE_KEY, WHOLE_BODY).read(json.dumps(body), {})


def test_a_forwarded_event_under_input_path_is_keyed_on_this_operations_identity() -> None:
    """A consumer forwards the whole event it was handed (a team detail shaped like an
    EventBridge event, holding the upstream's ``detail.once`` one level down). Behind
    ``InputPath: "$.detail"`` the downstream must key on the identity the outbox wrote at the
    top of this detail (docs/design.md); it keys on the upstream's instead."""
    upstream = published("reservations#r-1", {"reservationId": "r-1"})
    received = whole_event(upstream)  # what an audit consumer's business code was handed
    forwarded = published("audit#" + received["id"], received, bus=AUDIT_BUS, detail_type="Audited")

    parsed = read(input_path_detail(forwarded))

    assert parsed.key == written_identity(forwarded), (
        f"keyed on {parsed.key!r}, the forwarded upstream event's identity "
        f"({written_identity(upstream)!r}), not the outbox's ({written_identity(forwarded)!r})"
    )


def test_a_forwarded_sns_notification_under_input_path_is_keyed_on_this_operations_identity() -> (
    None
):
    """A consumer behind SNS (raw delivery off, no envelope: its body is SNS's notification)
    forwards what it received as an event's detail. Behind ``InputPath: "$.detail"`` the
    downstream keys on the SNS notification's ``MessageAttributes`` (another operation's
    identity) instead of the ``once`` the outbox wrote at the detail's top."""
    notification = {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": f"arn:aws:sns:{REGION}:123456789012:orders",
        "Message": json.dumps({"orderId": "o-1"}),
        "Timestamp": "2026-11-28T12:00:00.000Z",
        "MessageAttributes": {
            "once.source": {"Type": "String", "Value": "orders#o-1@" + "a" * 32},
            "once.seq": {"Type": "Number", "Value": "0"},
        },
    }
    forwarded = published("router#n-1", notification, detail_type="Routed")

    parsed = read(input_path_detail(forwarded))

    assert parsed.key == written_identity(forwarded), (
        f"keyed on {parsed.key!r} (the forwarded SNS notification's identity), not the "
        f"outbox's ({written_identity(forwarded)!r})"
    )


def test_two_operations_forwarding_one_event_are_both_applied_downstream(
    once_env: OnceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end on ``once_env``: two once consumers (an audit and an archive, each fed the
    whole event by its own rule, the documented default) forward the event they received to a
    bus, each in its own operation with its own outbox identity. A third consumer, keyed on
    ``SOURCE_KEY`` behind ``InputPath: "$.detail"``, must apply both (two operations, two
    identities: docs/handler.md "applies each *operation's* message once"). It applies one:
    both are keyed on the upstream event's identity and hash alike (``without_event_transport``
    strips the detail to the forwarded event's ``source``/``detail-type``/``detail``, dropping
    the outbox's own ``once``), so the second is a DUPLICATE and its effect is lost."""
    client = Events()
    monkeypatch.setattr(
        once_env, "_client_for", lambda service: client
    )  # once_env routes no "events"

    upstream = published("reservations#r-1", {"reservationId": "r-1"})
    event = whole_event(upstream)

    def forwarder(detail_type: str) -> Any:
        def forward(body: dict[str, Any], attempt: Attempt) -> str:
            attempt.send(AUDIT_BUS, body, source="shop.audit", detail_type=detail_type)
            return "forwarded"

        return make_handler(
            forward, key=SOURCE_KEY, effects="staged", key_prefix=detail_type, max_workers=1
        )

    for detail_type in ("Audited", "Archived"):
        delivery = once_env.deliver(forwarder(detail_type), [event])
        assert delivery.outcomes == [Outcome.PROCESSED]
    assert len(client.entries) == 2
    identities = {written_identity(entry) for entry in client.entries}
    assert len(identities) == 2  # two operations, two identities, as the outbox wrote them

    applied: list[str] = []
    downstream = make_handler(
        lambda body, attempt: applied.append(attempt.key), key=SOURCE_KEY, max_workers=1
    )
    delivery = once_env.deliver(
        downstream, [input_path_detail(entry) for entry in client.entries], same_batch=False
    )

    assert delivery.outcomes == [Outcome.PROCESSED, Outcome.PROCESSED], (
        f"outcomes {delivery.outcomes}: the second operation's event was taken for the first's"
    )
    assert sorted(applied) == sorted(identities)
