"""Per-stage settings of the example app (dev, prod, local), and the context overrides.

One place decides what differs between stages, so the stack only reads settings and never
branches on a stage name. Nothing here is derived: ``OnceConsumer`` derives the visibility
timeout, maxReceiveCount, retentions and alarm thresholds from these values, and refuses a
combination that breaks a rule (``once_cdk.settings``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration

from payments import SERVICE_NAME

STAGES = ("dev", "prod", "local")
DEFAULT_STAGE = "dev"


@dataclasses.dataclass(frozen=True)
class StageSettings:
    """Everything a stage decides."""

    stage: str
    function_timeout_s: int
    memory_mb: int
    batch_size: int
    max_batching_window_s: int
    max_concurrency: int | None
    reserved_concurrency: int | None
    retain_data: bool
    log_retention_days: int
    max_receive_count: int | None = None
    fifo: bool = False
    service_name: str = SERVICE_NAME
    alarm_email: str | None = None

    @property
    def stack_name(self) -> str:
        return f"Once-{self.stage}"

    def consumer_arguments(self) -> dict[str, Any]:
        """The ``OnceConsumer`` keyword arguments of this stage."""
        return {
            "service_name": self.service_name,
            "fifo": self.fifo,
            "timeout": Duration.seconds(self.function_timeout_s),
            "memory_size": self.memory_mb,
            "batch_size": self.batch_size,
            "max_batching_window": Duration.seconds(self.max_batching_window_s),
            "max_concurrency": self.max_concurrency,
            "reserved_concurrency": self.reserved_concurrency,
            "max_receive_count": self.max_receive_count,
            "retain_data": self.retain_data,
            "log_retention": self.log_retention_days,
            "alarm_email": self.alarm_email,
        }


_BASE: dict[str, dict[str, Any]] = {
    "dev": {
        "function_timeout_s": 30,
        "memory_mb": 512,
        "batch_size": 10,
        "max_batching_window_s": 1,
        "max_concurrency": 5,
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
        "reserved_concurrency": None,
        "retain_data": False,
        "log_retention_days": 1,
    },
}

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _flag(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE + _FALSE:
        return text in _TRUE
    raise ValueError(f"expected true or false, got {raw!r}")


#: Context keys (``-c key=value``) that override a stage's setting, with their parsers.
CONTEXT_OVERRIDES: dict[str, Any] = {
    "fifo": _flag,
    "function_timeout_s": int,
    "memory_mb": int,
    "batch_size": int,
    "max_batching_window_s": int,
    "max_concurrency": int,
    "max_receive_count": int,
    "reserved_concurrency": int,
    "log_retention_days": int,
    "service_name": str,
    "alarm_email": str,
}


def settings_for(stage: str, context: Mapping[str, Any] | None = None) -> StageSettings:
    """The settings of ``stage`` with the context's overrides applied (CLI values are str).

    ``fifo=true`` deploys the FIFO variant: a FIFO queue pair, whose producers set the
    account as the message group, so that each account's payments apply in order. FIFO
    sources take no batching window, so the variant runs without one.
    """
    if stage not in _BASE:
        raise ValueError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
    values: dict[str, Any] = dict(_BASE[stage])
    for key, parse in CONTEXT_OVERRIDES.items():
        raw = (context or {}).get(key)
        if raw is None or raw == "":
            continue
        try:
            values[key] = parse(raw)
        except ValueError as error:
            raise ValueError(f"context {key}={raw!r}: {error}") from None
    if values.get("fifo") and "max_batching_window_s" not in (context or {}):
        values["max_batching_window_s"] = 0
    return StageSettings(stage=stage, **values)
