"""Per-stage settings (dev, prod, local) and the rules that derive timeouts from them.

One place decides what differs between stages, so the stack's constructs only read
settings and never branch on a stage name. Numbers that are derived from other numbers
(the visibility timeout, the record retention, the age alarm) are computed here, never
typed in by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from once import constants as c

STAGES = ("dev", "prod", "local")
DEFAULT_STAGE = "dev"

#: SQS must hide a message for at least this many function timeouts (AWS's guidance for
#: Lambda consumers), plus the batching window, so that a slow batch is not redelivered
#: while it is still running.
VISIBILITY_TIMEOUT_FACTOR = 6
#: Below this, a poison message reaches the DLQ after too few attempts.
MIN_MAX_RECEIVE_COUNT = 5
#: Below this, an SQS event source mapping cannot poll (Lambda's lower bound).
MIN_MAX_CONCURRENCY = 2


@dataclasses.dataclass(frozen=True)
class StageSettings:
    """Everything a stage decides. Derived values are properties."""

    stage: str
    function_timeout_s: int
    memory_mb: int
    batch_size: int
    max_batching_window_s: int
    max_concurrency: int
    max_receive_count: int
    reserved_concurrency: int | None
    retain_data: bool
    log_retention_days: int
    source_retention_s: int = c.DEFAULT_SOURCE_RETENTION_S
    dlq_retention_s: int = c.DLQ_RETENTION_S
    service_name: str = c.DEFAULT_SERVICE_NAME
    metrics_namespace: str = c.DEFAULT_METRICS_NAMESPACE
    alarm_email: str | None = None

    def __post_init__(self) -> None:
        if self.max_receive_count < MIN_MAX_RECEIVE_COUNT:
            raise ValueError(f"max_receive_count must be >= {MIN_MAX_RECEIVE_COUNT}")
        if self.max_concurrency < MIN_MAX_CONCURRENCY:
            raise ValueError(f"max_concurrency must be >= {MIN_MAX_CONCURRENCY}")
        if self.dlq_retention_s <= self.source_retention_s:
            raise ValueError("the DLQ must keep messages longer than the source queue")
        if self.reserved_concurrency is not None and (
            self.reserved_concurrency < self.max_concurrency
        ):
            raise ValueError("reserved_concurrency below max_concurrency throttles the poller")

    @property
    def visibility_timeout_s(self) -> int:
        """6 x function timeout + batching window (the design's rule)."""
        return VISIBILITY_TIMEOUT_FACTOR * self.function_timeout_s + self.max_batching_window_s

    @property
    def record_retention_s(self) -> int:
        """A record outlives both queues by a day, so a late redrive is still deduplicated."""
        return self.source_retention_s + self.dlq_retention_s + c.DAY_S

    @property
    def oldest_message_alarm_s(self) -> int:
        """A message older than every retry it is allowed is stuck, not merely retried."""
        return self.max_receive_count * self.visibility_timeout_s

    @property
    def stack_name(self) -> str:
        return f"Once-{self.stage}"


_BASE: dict[str, dict[str, Any]] = {
    "dev": {
        "function_timeout_s": 30,
        "memory_mb": 512,
        "batch_size": 10,
        "max_batching_window_s": 1,
        "max_concurrency": 5,
        "max_receive_count": 5,
        "reserved_concurrency": None,
        "retain_data": False,
        "log_retention_days": 14,
    },
    "prod": {
        "function_timeout_s": 30,
        "memory_mb": 1024,
        "batch_size": 10,
        "max_batching_window_s": 2,
        "max_concurrency": 10,
        "max_receive_count": 5,
        "reserved_concurrency": 20,
        "retain_data": True,
        "log_retention_days": 90,
    },
    # What the local cloud deploys: short timeouts, so a redelivery takes seconds.
    "local": {
        "function_timeout_s": 2,
        "memory_mb": 512,
        "batch_size": 10,
        "max_batching_window_s": 0,
        "max_concurrency": 2,
        "max_receive_count": 5,
        "reserved_concurrency": None,
        "retain_data": False,
        "log_retention_days": 1,
    },
}

#: Context keys (``-c key=value``) that override a stage's setting, with their types.
CONTEXT_OVERRIDES: dict[str, type] = {
    "function_timeout_s": int,
    "memory_mb": int,
    "batch_size": int,
    "max_batching_window_s": int,
    "max_concurrency": int,
    "max_receive_count": int,
    "reserved_concurrency": int,
    "log_retention_days": int,
    "service_name": str,
    "metrics_namespace": str,
    "alarm_email": str,
}


def settings_for(stage: str, context: Mapping[str, Any] | None = None) -> StageSettings:
    """The settings of ``stage`` with the context's overrides applied (CLI values are str)."""
    if stage not in _BASE:
        raise ValueError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
    values: dict[str, Any] = dict(_BASE[stage])
    for key, kind in CONTEXT_OVERRIDES.items():
        raw = (context or {}).get(key)
        if raw is None or raw == "":
            continue
        values[key] = kind(raw)
    return StageSettings(stage=stage, **values)
