"""Lambda entry point of the orders service: ``orders.handler.lambda_handler``.

A message is ``{"orderId": str, "customerId": str, "items": [{"sku": str, "quantity": int}]}``.
The order is shipped once: once deduplicates deliveries by ``orderId``, and the order id
goes to the carrier as the idempotency key (``attempt.key``), so that even a crash between
the shipment and once's record ships nothing twice.

The carrier is an HTTP API, outside DynamoDB: once cannot commit a shipment with its record
(``attempt.write``) nor hold it back until after the commit (``attempt.send`` takes SQS and
SNS only). The shipment happens while ``ship`` runs, so the key carried downstream is what
keeps it single.
"""

from __future__ import annotations

import os
from typing import Any

from once import Attempt, PermanentError, make_handler

from orders.carrier import Carrier

#: The carrier API's base URL, set by the stack.
ENV_CARRIER_URL = "CARRIER_URL"

_carrier: Carrier | None = None


def _get_carrier() -> Carrier:
    """One client per process, created at the first order."""
    global _carrier
    if _carrier is None:
        url = os.environ.get(ENV_CARRIER_URL)
        if not url:
            raise RuntimeError(f"{ENV_CARRIER_URL} is not set: orders cannot be shipped")
        _carrier = Carrier(url)
    return _carrier


def _items(order: dict[str, Any]) -> list[dict[str, Any]]:
    items = order.get("items")
    if not isinstance(items, list) or not items:
        raise PermanentError("items must be a non-empty list")
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("sku"), str):
            raise PermanentError("every item needs a sku")
        quantity = item.get("quantity")
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
            raise PermanentError("every item needs a quantity above zero")
    return items


def ship(order: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
    """Ship the order, carrying its key downstream as the carrier's idempotency key."""
    customer = order.get("customerId")
    if not isinstance(customer, str) or not customer:
        raise PermanentError("customerId must be a non-empty string")
    shipment = _get_carrier().create_shipment(
        {"orderId": attempt.key, "customerId": customer, "items": _items(order)},
        idempotency_key=attempt.key,
    )
    return {"shipmentId": shipment["shipmentId"]}


lambda_handler = make_handler(ship, key="orderId")
