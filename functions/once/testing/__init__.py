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

``once_cloud`` (session-scoped, needs ``once[local]``) deploys the team's own CDK app, the
one of the ``cdk.json`` at or above pytest's root directory, on the local cloud and runs its
consumers as the stack wires them: ``send``, ``drain``, ``record``, ``dlq_messages``,
``metrics`` (``once.testing.cloud.OnceCloud``).

The fixture needs moto and pytest, which a team's test environment has; the Lambda never
imports this package. pytest imports it at startup, before any conftest runs, so it imports
the kit (boto3, the runtime) only when a test asks for ``once_env`` or one of its names:
a conftest may still set the environment (``POWERTOOLS_SERVICE_NAME``...) the handler reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from once.testing.cloud import OnceCloud
    from once.testing.crash import CRASH_POINTS, InvocationKilled
    from once.testing.env import Delivery, OnceEnv, Quarantined

__all__ = [
    "CRASH_POINTS",
    "Delivery",
    "InvocationKilled",
    "OnceCloud",
    "OnceEnv",
    "Quarantined",
    "install_hint",
    "once_cloud",
    "once_cloud_context",
    "once_env",
]

#: Where each public name lives.
_MODULES = {
    "CRASH_POINTS": "once.testing.crash",
    "InvocationKilled": "once.testing.crash",
    "Delivery": "once.testing.env",
    "OnceEnv": "once.testing.env",
    "Quarantined": "once.testing.env",
    "OnceCloud": "once.testing.cloud",
}


def install_hint(extras: str) -> str:
    """The install line for once's ``extras``, one that works where this once came from:
    its checkout, for an install from a source tree (once is not on PyPI)."""
    source = Path(__file__).resolve().parents[3]
    where = str(source) if (source / "pyproject.toml").is_file() else "<your once checkout>"
    return f'pip install "{where}[{extras}]"'


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


@pytest.fixture(scope="session")
def once_cloud_context() -> dict[str, str]:
    """CDK context for the app ``once_cloud`` synthesizes (as ``cdk synth -c key=value``);
    a conftest overrides this fixture to give some, such as a fake service's URL."""
    return {}


@pytest.fixture(scope="session")
def once_cloud(
    request: pytest.FixtureRequest, once_cloud_context: dict[str, str]
) -> Iterator[OnceCloud]:
    """The team's CDK app (the ``cdk.json`` at or above pytest's root directory) deployed on
    the local cloud for the session, each consumer's mapping running; torn down after."""
    try:
        from once.testing.cloud import OnceCloud
    except ImportError as error:
        raise pytest.UsageError(
            f"once_cloud runs the local cloud, which the [local] extra brings: "
            f"{install_hint('local,testing')} ({error})"
        ) from error
    with OnceCloud(request.config.rootpath, context=once_cloud_context) as cloud:
        yield cloud
