"""Powertools logger, metrics and tracing for the layer, each once's own.

Every record gets one log line with ``message_id``, ``key``, ``fence`` and ``outcome``, at
the outcome's level (``Outcome.log_level``: INFO when done or waiting for a live claim,
WARNING otherwise); no payload values are logged at INFO. Each outcome is an EMF metric (names in
``once.constants``); of these, the stack alarms on ``LeaseLost``, ``Conflict`` and
``LeaseExpired``.

The service the logs and metrics are named after (``POWERTOOLS_SERVICE_NAME``) and the
metrics' namespace are read when a handler is built at its first invocation
(``name_service``), not at import: ``once`` is imported early (pytest loads ``once.testing``
before any conftest runs), and the environment a test or a Lambda sets afterwards must win.

once's metrics, logs and traces are its own; a team's Powertools in business code keeps its
own too. Powertools shares state between instances, so once uses none of that state:

- Metrics: ``Metrics`` keeps metrics, dimensions, metadata and default dimensions in class
  attributes shared by every instance, so a team's ``set_default_dimensions``,
  ``add_dimension`` or ``add_metadata`` would reach once's EMF (and the stack's alarms, which
  read dimensions exactly ``[service]``, would miss it), and once's flush would publish the
  team's metrics in namespace ``Once`` and clear the team's dimensions. once publishes each
  batch through a Powertools EMF provider of its own (``AmazonCloudWatchEMFProvider`` with
  its own sets): one blob in once's namespace, dimension ``service`` only, once's metric
  names only. Whatever a team does with ``Metrics`` (its own namespace, dimensions, metadata,
  flushes, ``log_metrics`` around once's handler, the cold start metric) stays in the team's
  blobs. ``POWERTOOLS_METRICS_DISABLED`` (and ``POWERTOOLS_DEV``) turn once's metrics off as
  they turn Powertools' off. The namespace comes from ``POWERTOOLS_METRICS_NAMESPACE`` if set,
  a variable the team's ``Metrics()`` without a namespace reads too.
- Logs: once's Python logger is always ``once``, with its own handler and formatter, so
  ``append_keys``, ``inject_lambda_context``, ``set_correlation_id`` or ``clear_state`` on a
  team's Logger (of whatever service) never reach once's lines, and once's keys
  (``request_id``, ``message_id``, ``key``, ``fence``, ``outcome``, ``reason``) never reach
  the team's. ``thread_safe_append_keys`` keeps its keys in one context variable read by every
  Powertools Logger: once's formatter does not read it. Powertools' Logger also filters the
  root logger's handlers (Lambda's own) by substring: once's would have dropped every line of
  a logger whose name merely contains "once" (``nonce``, ``concerts``); once filters its own
  logger's names exactly instead. Not isolated, by the team's explicit choice: a team Logger
  whose service is ``once`` is once's logger, and ``copy_config_to_registered_loggers``
  gives every registered logger, ``once`` included, the team's handler and keys (pass
  ``exclude={"once"}`` to keep once's lines once's). ``POWERTOOLS_LOG_LEVEL`` and the other
  Powertools variables apply to both.
- Traces: ``Tracer`` keeps one class-level configuration, and constructing one patches every
  supported library (``patch_all``) unless told otherwise, which would override a team's
  ``Tracer(patch_modules=[...])``. once builds no Tracer: it opens its subsegment with the
  X-Ray recorder Powertools' Tracer itself uses, patches nothing and configures nothing, so a
  team's Tracer, created before or after once's first batch, patches what the team asks. A
  team's ``Tracer(disabled=True)`` turns the X-Ray SDK off for the process, once's
  subsegments included.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.filters import SuppressFilter
from aws_lambda_powertools.logging.formatter import THREAD_LOCAL_KEYS, LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)

from once import constants as c
from once.models import METRIC_NAMES, RecordResult

#: The Python logger once logs to, whatever the service is called.
_LOGGER_NAME = c.DEFAULT_SERVICE_NAME
#: Powertools' truthy values (``strtobool``), without its ValueError on anything else.
_TRUTHY = ("1", "y", "yes", "t", "true", "on")
_recorder: Any = None


class _OwnKeysFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON lines with once's keys only: the keys of any Logger's
    ``thread_safe_append_keys`` (one context variable for every Powertools Logger) are not
    read while once's line is formatted."""

    def format(self, record: logging.LogRecord) -> str:
        token = THREAD_LOCAL_KEYS.set({})
        try:
            return super().format(record)
        finally:
            THREAD_LOCAL_KEYS.reset(token)


class _NotOnce(logging.Filter):
    """What Powertools' ``SuppressFilter("once")`` means on the root logger's handlers (once's
    lines have once's own handler), without its substring match, which also dropped the
    lines of a team's ``nonce`` or ``concerts`` logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        return name != _LOGGER_NAME and not name.startswith(_LOGGER_NAME + ".")


_NOT_ONCE = _NotOnce()


def _own_logger() -> Logger:
    built = Logger(service=_LOGGER_NAME, logger_formatter=_OwnKeysFormatter())
    for handler in logging.root.handlers:
        for added in list(handler.filters):
            if isinstance(added, SuppressFilter) and added.logger == _LOGGER_NAME:
                handler.removeFilter(added)
                handler.addFilter(_NOT_ONCE)
    return built


logger = _own_logger()


@dataclass
class _Names:
    """What once's metrics are published under: set by ``name_service``."""

    service: str = c.DEFAULT_SERVICE_NAME
    namespace: str = c.DEFAULT_METRICS_NAMESPACE


_names = _Names()


def log_safely(to: logging.Logger | Any, level: str, message: str, **extra: Any) -> None:
    """Log one line at ``level``; a logger that raises (a team's filter or handler on it) is
    ignored: a log line is never a reason to lose a record's outcome or the batch response.
    The line's location is the caller's."""
    with contextlib.suppress(Exception):
        getattr(to, level)(message, extra=extra, stacklevel=3)


def _service() -> str:
    return os.getenv(c.ENV_SERVICE_NAME) or c.DEFAULT_SERVICE_NAME


def name_service() -> str:
    """Name the logs and metrics after the service the environment gives now (else
    ``once``), and put the metrics in its namespace; returns the service."""
    service = _service()
    logger.append_keys(service=service)
    _names.service = service
    _names.namespace = os.getenv(c.ENV_METRICS_NAMESPACE) or c.DEFAULT_METRICS_NAMESPACE
    return service


def _tracing_on() -> bool:
    """X-Ray only in Lambda with active tracing, unless Powertools' switch turns it off; not
    in SAM's or Chalice's local emulation (where Powertools' Tracer turns itself off)."""
    disabled = os.getenv("POWERTOOLS_TRACE_DISABLED", "").lower() in _TRUTHY
    emulated = bool(os.getenv("AWS_SAM_LOCAL") or os.getenv("AWS_CHALICE_CLI_MODE"))
    in_lambda = bool(os.getenv("LAMBDA_TASK_ROOT"))
    return bool(os.getenv("_X_AMZN_TRACE_ID")) and in_lambda and not (disabled or emulated)


def subsegment(name: str) -> AbstractContextManager[Any]:
    """An X-Ray subsegment when tracing is on, from the recorder Powertools' Tracer uses.
    aws_xray_sdk (the largest import of the layer, about 100 ms) is imported at the first
    traced batch, never at import and never when tracing is off."""
    global _recorder
    if not _tracing_on():
        return nullcontext(None)
    if _recorder is None:
        from aws_xray_sdk.core import xray_recorder  # type: ignore[import-untyped]

        _recorder = xray_recorder
    return _recorder.in_subsegment(name)


#: Counted beside a record's outcome.
_BESIDE = {c.METRIC_TAKEOVER, c.METRIC_INTERNAL_ERROR, c.METRIC_WRITE_REFUSED}


def publish(handled: Iterable[RecordResult]) -> None:
    """Count each record's outcome (and ``Takeover``, ``InternalError`` and ``WriteRefused``
    beside it: the last for each message whose operation's commit a staged write's condition
    refused, a copy that followed it in the batch included) and
    flush one EMF blob for the batch. A batch that handled no record has nothing to count:
    no blob (Powertools would warn of it). The blob's metrics, dimensions and metadata are
    this batch's only: the provider and its sets are new for each batch, never Powertools'
    shared ``Metrics`` sets."""
    counts: Counter[str] = Counter()
    for record in handled:
        counts[METRIC_NAMES[record.outcome]] += 1
        counts[c.METRIC_TAKEOVER] += int(record.takeover)
        counts[c.METRIC_INTERNAL_ERROR] += int(record.internal_error)
        counts[c.METRIC_WRITE_REFUSED] += int(record.reason == c.REASON_WRITE_REFUSED)
    if not counts:
        return
    metrics = AmazonCloudWatchEMFProvider(
        metric_set={},
        dimension_set={},
        metadata_set={},
        default_dimensions={},
        namespace=_names.namespace,
        service=_names.service,
    )
    for name in set(METRIC_NAMES.values()) | _BESIDE:
        if counts[name]:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=counts[name])
    metrics.flush_metrics(raise_on_empty_metrics=False)
