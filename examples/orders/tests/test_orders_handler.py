"""The orders handler on once.testing's ``once_env``: each order ships once, in order per
customer; an order that cannot ship goes to the DLQ with its reason; a carrier outage is
retried. Every delivery comes from the FIFO queue, in the customer's message group."""

from __future__ import annotations

import json

import pytest
from once.testing import OnceEnv

ORDER = {"orderId": "o-1", "customerId": "c-1", "items": [{"sku": "book", "quantity": 2}]}


def order(order_id: str) -> dict:
    return {**ORDER, "orderId": order_id}


def test_an_order_delivered_twice_ships_once(once_env: OnceEnv, handler, carrier):
    first = once_env.deliver(handler, [order("o-twice"), order("o-twice")], fifo_group="c-1")
    again = once_env.deliver(handler, [order("o-twice")], fifo_group="c-1")

    assert first.outcomes == ["processed", "duplicate"]
    assert again.outcomes == ["duplicate"]
    assert first.batch_item_failures == again.batch_item_failures == []
    assert len(carrier.requests) == 1
    record = once_env.record("o-twice")
    assert record.status == "COMPLETED"
    assert json.loads(record.result) == {"shipmentId": "s-o-twice"}


def test_the_order_id_goes_to_the_carrier_as_the_idempotency_key(
    once_env: OnceEnv, handler, carrier
):
    once_env.deliver(handler, [order("o-key")], fifo_group="c-1")
    [(key, body)] = carrier.requests
    assert key == "o-key" == body["orderId"]
    assert body["customerId"] == "c-1"


def test_one_customers_orders_ship_in_the_order_they_were_placed(
    once_env: OnceEnv, handler, carrier
):
    orders = [order(f"o-seq-{n}") for n in range(5)]
    delivery = once_env.deliver(handler, orders, fifo_group="c-1")
    assert delivery.outcomes == ["processed"] * 5
    assert [key for key, _ in carrier.requests] == [f"o-seq-{n}" for n in range(5)]


@pytest.mark.parametrize(
    "bad",
    [
        {"orderId": "o-no-items", "customerId": "c-1", "items": []},
        {"orderId": "o-no-customer", "items": [{"sku": "book", "quantity": 1}]},
        {"orderId": "o-zero", "customerId": "c-1", "items": [{"sku": "book", "quantity": 0}]},
    ],
)
def test_an_order_that_cannot_ship_goes_to_the_dlq_and_is_not_retried(
    once_env: OnceEnv, handler, carrier, bad
):
    delivery = once_env.deliver(handler, [bad], fifo_group="c-1")
    assert delivery.outcomes == ["quarantined"]
    assert delivery.batch_item_failures == []  # acknowledged: it is in the DLQ
    [dead] = once_env.dlq_messages()
    assert dead.json() == bad
    assert dead.reason == "PERMANENT_ERROR"
    assert carrier.requests == []


def test_an_order_the_carrier_refuses_goes_to_the_dlq(once_env: OnceEnv, handler, carrier):
    carrier.status = 422
    delivery = once_env.deliver(handler, [order("o-refused")], fifo_group="c-1")
    assert delivery.outcomes == ["quarantined"]
    [dead] = once_env.dlq_messages()
    assert (dead.json()["orderId"], dead.reason) == ("o-refused", "PERMANENT_ERROR")
    assert "HTTP 422" in dead.error


def test_a_carrier_outage_is_retried_and_the_customers_next_orders_wait_for_it(
    once_env: OnceEnv, handler, carrier
):
    orders = [order("o-outage"), order("o-after")]
    carrier.status = 503
    outage = once_env.deliver(handler, orders, fifo_group="c-1")
    assert outage.outcomes == ["failed", "skipped"]  # the next order does not overtake it
    assert outage.batch_item_failures == outage.message_ids  # both come back
    assert once_env.record("o-outage").status == "FAILED"

    carrier.status = 200
    retry = once_env.deliver(handler, orders, fifo_group="c-1")

    assert retry.receive_counts == [2, 2]  # the same messages, redelivered
    assert retry.outcomes == ["processed", "processed"]
    assert [key for key, _ in carrier.requests] == ["o-outage", "o-outage", "o-after"]
    assert set(carrier.shipments) == {"o-outage", "o-after"}
    assert once_env.record("o-outage").status == "COMPLETED"
