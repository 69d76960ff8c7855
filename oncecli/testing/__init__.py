"""``oncecli.testing``: the pytest plugin of the ``once_cloud`` fixture, a team's own CDK app
deployed on the local cloud for the test session (an ``oncecli.testing.cloud.OnceCloud``)::

    def test_a_repeated_order_ships_once(once_cloud):
        once_cloud.send("Orders", [order, order])
        once_cloud.drain()
        assert once_cloud.record("Orders", "o-1").status == "COMPLETED"  # a once.models.Record

Installing the ``once`` package registers it beside ``once.testing`` (the ``pytest11`` entry
point ``once_cloud``), so a test only asks for the fixture; the local cloud it starts needs
``once[local]``.

Why here and not in ``once.testing``: the fixture runs the local cloud, and the runtime's
package imports nothing of the ``once`` command (``once`` is the lowest floor; this plugin
stands on ``oncecli.localcloud`` and on ``oncecli.operate``, ``tests/unit/house/test_layering.py``).
It may import ``once``, ``once_cdk``, ``oncecli.localcloud`` and its footing
(``oncecli.aws``, ``oncecli.errors``, ``oncecli.project``), and ``oncecli.operate``; nothing
of the proof (demo, chaos, bench) or of ``oncecli.cli``.

pytest imports this module at startup, before any conftest runs: it imports the local cloud
only when a test asks for ``once_cloud``, so a session that never does pays nothing for it
and runs without the [local] extra. A test that names the type imports it from
``oncecli.testing.cloud``, as it names ``StrippedResourceWarning``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from oncecli.testing.cloud import OnceCloud

__all__ = ["once_cloud", "once_cloud_context"]


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
        from oncecli.testing.cloud import OnceCloud
    except ImportError as error:
        from once.testing.env import install_hint

        raise pytest.UsageError(
            f"once_cloud runs the local cloud, which the [local] extra brings: "
            f"{install_hint('local,testing')} ({error})"
        ) from error
    with OnceCloud(request.config.rootpath, context=once_cloud_context) as cloud:
        yield cloud
