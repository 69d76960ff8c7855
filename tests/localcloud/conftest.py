"""A local cloud (moto, the local stage's own template) shared by the CLI command tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from oncecli.localcloud.cloud import LocalCloud
from tests.localcloud.helpers import CONTEXT


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    saved = dict(os.environ)
    local = LocalCloud(engine="moto", context=CONTEXT).start()
    try:
        yield local
    finally:
        local.stop()
        os.environ.clear()
        os.environ.update(saved)
