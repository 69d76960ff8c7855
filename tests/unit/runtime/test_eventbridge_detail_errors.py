"""``attempt.send`` to an EventBridge bus refuses a detail in PutEvents' terms (``Detail`` is
"A valid JSON object": botocore events/2015-10-07 PutEventsRequestEntry.Detail), never in
SQS's or SNS's (proved by the adversarial review of issue 41: an empty detail was refused with
"SQS and SNS take no empty body")."""

from __future__ import annotations

import pytest

from once.effects import Effects

REGION = "us-east-1"
BUS = f"arn:aws:events:{REGION}:123456789012:event-bus/reservations"


@pytest.fixture(autouse=True)
def _region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", REGION)


@pytest.mark.parametrize("detail", ["", '{"note": "\ud800"}'], ids=["empty", "lone-surrogate"])
def test_a_refused_detail_is_explained_in_eventbridges_terms(detail: str) -> None:
    effects = Effects(table_name="once", record_id="reservations#r-1")
    with pytest.raises(ValueError) as raised:
        effects.send(BUS, detail, source="shop.reservations", detail_type="Shipped")
    said = str(raised.value)
    assert "SNS" not in said and "SQS" not in said, (
        f"an event to a bus refused with SQS/SNS wording: {said!r}"
    )
    assert "detail" in said.lower()
