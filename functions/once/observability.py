"""Powertools logger, metrics and tracer for the layer, created once per process.

Every record gets one log line with ``message_id``, ``key``, ``fence`` and ``outcome``; no
payload values are logged at INFO. Each outcome is an EMF metric (names in
``once.constants``); of these, the stack alarms on ``LeaseLost``, ``Conflict`` and
``LeaseExpired``.

The service the logs and metrics are named after (``POWERTOOLS_SERVICE_NAME``) and the
metrics' namespace are read when a handler is built at its first invocation
(``name_service``), not at import: ``once`` is imported early (pytest loads ``once.testing``
before any conftest runs), and the environment a test or a Lambda sets afterwards must win.
The Python logger itself is always ``once``, so it never shares its handlers and keys with
a Powertools logger of the user's own service.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from once import constants as c
from once.models import METRIC_NAMES

logger = Logger(service=c.DEFAULT_SERVICE_NAME)
metrics = Metrics(namespace=c.DEFAULT_METRICS_NAMESPACE, service=c.DEFAULT_SERVICE_NAME)
_tracer: Any = None


def _service() -> str:
    return os.getenv(c.ENV_SERVICE_NAME) or c.DEFAULT_SERVICE_NAME


def name_service() -> str:
    """Name the logs and metrics after the service the environment gives now (else
    ``once``), and put the metrics in its namespace; returns the service."""
    service = _service()
    logger.append_keys(service=service)
    metrics.service = service
    metrics.namespace = os.getenv(c.ENV_METRICS_NAMESPACE) or c.DEFAULT_METRICS_NAMESPACE
    return service


def _tracing_on() -> bool:
    """X-Ray only in Lambda with active tracing, unless Powertools' switch turns it off."""
    disabled = os.getenv("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true")
    return bool(os.getenv("_X_AMZN_TRACE_ID")) and not disabled


def subsegment(name: str) -> AbstractContextManager[Any]:
    """An X-Ray subsegment when tracing is on. The Tracer (and aws_xray_sdk, the largest
    import of the layer, about 100 ms) is created at the first traced batch, never at import
    and never when tracing is off."""
    global _tracer
    if not _tracing_on():
        return nullcontext(None)
    if _tracer is None:
        from aws_lambda_powertools import Tracer

        _tracer = Tracer(service=_service())
    return _tracer.provider.in_subsegment(name)


def publish(outcomes: Iterable[tuple[str, bool]]) -> None:
    """Count each (metric name, takeover) pair and flush one EMF blob for the batch. A batch
    that handled no record has nothing to count: no blob (Powertools would warn of it)."""
    counts: Counter[str] = Counter()
    for name, takeover in outcomes:
        counts[name] += 1
        counts[c.METRIC_TAKEOVER] += int(takeover)
    if not counts:
        return
    for name in set(METRIC_NAMES.values()) | {c.METRIC_TAKEOVER}:
        if counts[name]:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=counts[name])
    metrics.flush_metrics(raise_on_empty_metrics=False)
