"""``once.testing``: a pytest plugin with which a team tests its own handler against
duplicates, redeliveries, crashes and lease takeovers, on moto, without AWS.

Installing the ``once`` package registers it (the ``pytest11`` entry point ``once``), so a
test only asks for the fixture::

    from once import make_handler

    def test_a_crash_after_the_effect_ships_once(once_env):
        handler = make_handler(ship, key="orderId")
        once_env.deliver(handler, [order], crash="after_process")  # effect done, then killed
        once_env.expire_leases()                                   # the dead lease runs out
        d = once_env.deliver(handler, [order])                     # taken over, runs again
        assert d.outcomes == ["processed"]
        assert warehouse.shipments(order["orderId"]) == 1          # carried attempt.key

The fixture needs moto and pytest, which a team's test environment has; the Lambda never
imports this package.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from once.testing.crash import CRASH_POINTS, InvocationKilled
from once.testing.env import Delivery, OnceEnv, Quarantined

__all__ = ["CRASH_POINTS", "Delivery", "InvocationKilled", "OnceEnv", "Quarantined", "once_env"]


@pytest.fixture
def once_env() -> Iterator[OnceEnv]:
    """An idempotency table and a DLQ on moto, the environment ``make_handler`` reads, and a
    clock for leases and retention; ``deliver`` runs a handler as SQS and Lambda would."""
    with OnceEnv() as env:
        yield env
