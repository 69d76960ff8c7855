"""The orders handler across crashes, with once.testing's ``once_env``: an invocation killed
after the carrier shipped, and before once recorded it, ships nothing twice, because the
order id travels to the carrier as its idempotency key (``attempt.key``)."""

from __future__ import annotations

import json

from once.testing import OnceEnv

ORDER = {"orderId": "o-crash", "customerId": "c-1", "items": [{"sku": "book", "quantity": 1}]}


def test_an_order_shipped_before_a_crash_ships_once_after_the_takeover(
    once_env: OnceEnv, handler, carrier
):
    killed = once_env.deliver(handler, [ORDER], crash="after_process", fifo_group="c-1")
    assert killed.killed_at == "after_process"
    assert len(carrier.shipments) == 1  # the carrier shipped; the invocation died after it
    assert once_env.record("o-crash").status == "IN_PROGRESS"

    early = once_env.deliver(handler, [ORDER], fifo_group="c-1")
    assert early.outcomes == ["busy"]  # the dead invocation's lease still holds the order

    once_env.expire_leases()
    retry = once_env.deliver(handler, [ORDER], fifo_group="c-1")

    [result] = retry.results
    assert (result.outcome, result.fence, result.takeover) == ("processed", 2, True)
    assert [key for key, _ in carrier.requests] == ["o-crash", "o-crash"]  # asked twice...
    assert len(carrier.shipments) == 1  # ...shipped once: the key was the same
    record = once_env.record("o-crash")
    assert record.status == "COMPLETED"
    assert json.loads(record.result) == {"shipmentId": carrier.shipments["o-crash"]["shipmentId"]}


def test_a_crash_while_recording_the_shipment_is_a_duplicate_on_redelivery(
    once_env: OnceEnv, handler, carrier
):
    once_env.deliver(handler, [ORDER], crash="before_finalize", fifo_group="c-1")
    assert once_env.record("o-crash").status == "COMPLETED"  # the write landed, unacknowledged

    redelivery = once_env.deliver(handler, [ORDER], fifo_group="c-1")

    assert redelivery.receive_counts == [2]
    assert redelivery.outcomes == ["duplicate"]
    assert len(carrier.requests) == 1  # not even asked again
