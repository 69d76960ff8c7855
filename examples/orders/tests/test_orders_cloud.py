"""The Orders stack as app.py deploys it, on ``once_cloud`` (the pytest plugin
``oncecli.testing``, with ``once[local]``): its FIFO queue, its event source mapping, its DLQ
and its function, built from the synthesized asset and shipping to the fake carrier
(``carrier_url``, conftest.py). What once_env cannot see: that the stack wires the handler
right. Retries are once_env's: here they would wait for real visibility timeouts."""

from __future__ import annotations

import json

from oncecli.testing.cloud import OnceCloud

STACK = "Orders"


def order(order_id: str, customer: str) -> dict:
    return {"orderId": order_id, "customerId": customer, "items": [{"sku": "book", "quantity": 1}]}


def asked(carrier, customer: str) -> list[str]:
    return [key for key, body in carrier.requests if body["customerId"] == customer]


def test_an_order_sent_twice_ships_once(once_cloud: OnceCloud, carrier):
    twice = order("o-cloud-twice", "c-cloud-twice")
    duplicates = once_cloud.metrics(STACK).get("Duplicate", 0)
    # Serialized twice as different text, as a producer's retry may: the FIFO queue's
    # content-based deduplication lets both through; once sees the same order.
    texts = [json.dumps(twice), json.dumps(twice, indent=1)]
    once_cloud.send(STACK, texts, group_id="c-cloud-twice")
    once_cloud.drain()

    assert asked(carrier, "c-cloud-twice") == ["o-cloud-twice"]
    record = once_cloud.record(STACK, "o-cloud-twice")
    assert record.status == "COMPLETED"
    assert json.loads(record.result) == {"shipmentId": "s-o-cloud-twice"}
    assert once_cloud.metrics(STACK)["Duplicate"] == duplicates + 1


def test_an_order_with_no_items_lands_in_the_dlq_with_its_reason(once_cloud: OnceCloud, carrier):
    empty = {**order("o-cloud-empty", "c-cloud-empty"), "items": []}
    once_cloud.send(STACK, [empty], group_id=lambda o: o["customerId"])
    once_cloud.drain()

    [dead] = [m for m in once_cloud.dlq_messages(STACK) if m.json() == empty]
    assert dead.reason == "PERMANENT_ERROR"
    assert asked(carrier, "c-cloud-empty") == []


def test_each_customers_orders_ship_in_the_order_they_were_placed(once_cloud: OnceCloud, carrier):
    placed = {
        customer: [order(f"o-{customer}-{n}", customer) for n in range(6)]
        for customer in ("c-cloud-a", "c-cloud-b")
    }
    interleaved = [o for pair in zip(*placed.values(), strict=True) for o in pair]
    once_cloud.send(STACK, interleaved, group_id=lambda o: o["customerId"])
    once_cloud.drain()

    for customer, orders in placed.items():
        assert asked(carrier, customer) == [o["orderId"] for o in orders]
