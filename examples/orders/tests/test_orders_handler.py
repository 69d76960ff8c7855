"""The orders handler on moto: each order ships once, bad orders go to the DLQ, a carrier
outage is retried."""

from __future__ import annotations

import json

import pytest

ORDER = {"orderId": "o-1", "customerId": "c-1", "items": [{"sku": "book", "quantity": 2}]}


@pytest.fixture
def handler(cloud):
    from orders.handler import lambda_handler

    return lambda_handler


def failed(response) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


def test_an_order_delivered_twice_ships_once(handler, cloud, carrier, context, batch):
    order = {**ORDER, "orderId": "o-twice"}
    assert failed(handler(batch(order), context)) == []
    assert failed(handler(batch(order), context)) == []
    assert len(carrier.requests) == 1
    record = cloud.record("o-twice")
    assert record["status"] == "COMPLETED"
    assert json.loads(record["result"]) == {"shipmentId": "s-1"}


def test_the_order_id_goes_to_the_carrier_as_the_idempotency_key(
    handler, cloud, carrier, context, batch
):
    order = {**ORDER, "orderId": "o-key"}
    handler(batch(order), context)
    [(key, body)] = carrier.requests
    assert key == "o-key" == body["orderId"]
    assert body["customerId"] == "c-1"


def test_one_customers_orders_ship_in_the_order_they_were_placed(
    handler, cloud, carrier, context, batch
):
    orders = [{**ORDER, "orderId": f"o-seq-{n}"} for n in range(3)]
    assert failed(handler(batch(*orders), context)) == []
    assert [key for key, _ in carrier.requests] == ["o-seq-0", "o-seq-1", "o-seq-2"]


@pytest.mark.parametrize(
    "bad",
    [
        {"orderId": "o-no-items", "customerId": "c-1", "items": []},
        {"orderId": "o-no-customer", "items": [{"sku": "book", "quantity": 1}]},
        {"orderId": "o-zero", "customerId": "c-1", "items": [{"sku": "book", "quantity": 0}]},
    ],
)
def test_an_order_that_cannot_ship_goes_to_the_dlq_and_is_not_retried(
    handler, cloud, carrier, context, batch, bad
):
    assert failed(handler(batch(bad), context)) == []  # acknowledged: it is in the DLQ
    [message] = cloud.dlq()
    assert json.loads(message["Body"]) == bad
    assert message["MessageAttributes"]["once.reason"]["StringValue"]
    assert carrier.requests == []


def test_a_carrier_outage_is_retried_and_ships_once_when_it_is_back(
    handler, cloud, carrier, context, batch
):
    order = {**ORDER, "orderId": "o-outage"}
    carrier.status = 503
    events = batch(order)
    assert failed(handler(events, context)) == [events["Records"][0]["messageId"]]
    assert cloud.record("o-outage")["status"] == "FAILED"
    carrier.status = 200
    assert failed(handler(batch(order), context)) == []
    assert len(carrier.shipments) == 1
    assert cloud.record("o-outage")["status"] == "COMPLETED"
