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
        assert d.results[0].takeover and d.results[0].fence == 2   # Handler.handle's results
        assert warehouse.shipments(order["orderId"]) == 1          # carried attempt.key

``deliver`` runs the handler through ``Handler.handle``, the public seam whose per-record
results (``once.models.RecordResult``) it returns as ``Delivery.results``.

``once_cloud``, a team's CDK app deployed on the local cloud, is not here: it runs the ``once``
command's local cloud, and the runtime imports nothing above itself. It is the plugin
``oncecli.testing`` (its type: ``oncecli.testing.cloud.OnceCloud``), which installing
``once`` registers too.

This package may import ``once`` and the libraries a test environment has (pytest, moto,
boto3); never ``once_cdk`` or ``oncecli`` (``tests/unit/house/test_layering.py``). Inside it,
imports go one way: this plugin imports the kit (``env``), the kit imports its parts
(``crash``, ``lambda_service``, ``strict``), never this plugin.

The fixture needs moto and pytest, which a team's test environment has; the Lambda never
imports this package. pytest imports it at startup, before any conftest runs, so it imports
the kit (boto3, the runtime) only when a test asks for ``once_env`` or one of its names:
a conftest may still set the environment (``POWERTOOLS_SERVICE_NAME``...) the handler reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from once.testing.crash import CRASH_POINTS, InvocationKilled
    from once.testing.env import (
        Delivery,
        DroppedResponseWarning,
        OnceEnv,
        Quarantined,
        install_hint,
    )

__all__ = [
    "CRASH_POINTS",
    "Delivery",
    "DroppedResponseWarning",
    "InvocationKilled",
    "OnceEnv",
    "Quarantined",
    "install_hint",
    "once_env",
]

#: Where each public name lives.
_MODULES = {
    "CRASH_POINTS": "once.testing.crash",
    "InvocationKilled": "once.testing.crash",
    "Delivery": "once.testing.env",
    "DroppedResponseWarning": "once.testing.env",
    "OnceEnv": "once.testing.env",
    "Quarantined": "once.testing.env",
    "install_hint": "once.testing.env",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(_MODULES[name]), name)
    raise AttributeError(f"module 'once.testing' has no attribute {name!r}")


@pytest.fixture
def once_env() -> Iterator[OnceEnv]:
    """An idempotency table and a DLQ on moto, the environment ``make_handler`` reads, and a
    clock for leases and retention; ``deliver`` runs a handler as SQS and Lambda would."""
    from once.testing.env import OnceEnv

    with OnceEnv() as env:
        yield env
