"""``ConsumerSettings`` with a team's usual values, and the refusal a change of them gets:
what the settings tests share."""

from __future__ import annotations

import pytest

from once_cdk.settings import ConfigurationError, ConsumerSettings


def settings(**overrides) -> ConsumerSettings:
    values = {
        "service_name": "orders", "fifo": False, "timeout_s": 30, "memory_mb": 512,
        "batch_size": 10, "batching_window_s": 0, "max_concurrency": None,
        "reserved_concurrency": None, "max_receive_count": None,
    }  # fmt: skip
    return ConsumerSettings(**{**values, **overrides})


def refusal(**overrides) -> str:
    with pytest.raises(ConfigurationError) as refused:
        settings(**overrides)
    return str(refused.value)
