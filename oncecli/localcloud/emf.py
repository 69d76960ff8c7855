"""The workers' log lines and metrics, kept where ``once logs``, the dashboard and ``once
status`` read them.

Why: on AWS, a function's lines go to its CloudWatch Logs group, and CloudWatch Logs turns
its EMF lines (once's outcome counts, and the business code's own Powertools metrics) into
CloudWatch metrics. Locally the workers write their lines to a log file; this module reads
each new line of that file, puts it in the function's log group in moto's CloudWatch Logs,
parses the EMF blobs (``parse``) and puts their values in moto's CloudWatch (``Shipper``),
so that ``once logs`` and ``once status`` read them the same way from both.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: How often the shipper reads the logs, in seconds.
SHIP_EVERY_S = 0.5
#: PutMetricData takes at most this many values in one call.
_PUT_BATCH = 1000
#: PutLogEvents takes at most 10,000 events and 1,048,576 bytes (each event's UTF-8 bytes
#: plus 26) in one call (CloudWatch Logs API reference, PutLogEvents).
_LOG_BATCH = 10_000
_LOG_BATCH_BYTES = 1_048_576
_LOG_EVENT_OVERHEAD = 26
#: The log stream the local cloud writes each function's lines to.
LOG_STREAM = "local/[$LATEST]workers"


@dataclass(frozen=True)
class Datum:
    """One metric value of an EMF blob."""

    namespace: str
    name: str
    unit: str
    value: float
    dimensions: tuple[tuple[str, str], ...]
    timestamp_ms: int

    def as_put(self) -> dict[str, Any]:
        return {
            "MetricName": self.name,
            "Dimensions": [{"Name": k, "Value": v} for k, v in self.dimensions],
            "Value": self.value,
            "Unit": self.unit,
            "Timestamp": datetime.fromtimestamp(self.timestamp_ms / 1000, UTC),
        }


def parse(line: str) -> list[Datum]:
    """The metric values of one log line: none unless it is an EMF blob. Each metric is
    reported once per dimension set it declares, as CloudWatch does."""
    text = line.strip()
    if not text.startswith("{") or '"_aws"' not in text:
        return []
    try:
        blob = json.loads(text)
        meta = blob["_aws"]
        timestamp = int(meta["Timestamp"])
        found = []
        for directive in meta["CloudWatchMetrics"]:
            for dimension_set in directive.get("Dimensions") or [[]]:
                dimensions = tuple((str(d), str(blob[d])) for d in dimension_set)
                for metric in directive["Metrics"]:
                    values = blob[metric["Name"]]
                    for value in values if isinstance(values, list) else [values]:
                        found.append(
                            Datum(
                                namespace=str(directive["Namespace"]),
                                name=str(metric["Name"]),
                                unit=str(metric.get("Unit", "None")),
                                value=float(value),
                                dimensions=dimensions,
                                timestamp_ms=timestamp,
                            )
                        )
        return found
    except (KeyError, TypeError, ValueError):
        return []  # not EMF after all: a log line that looks like it


class Shipper:
    """A thread that ships the EMF lines of log files to a CloudWatch client."""

    def __init__(self, cloudwatch: Any, logs: Any = None) -> None:
        self._cloudwatch = cloudwatch
        self._logs = logs
        self._offsets: dict[Path, int] = {}
        self._groups: dict[Path, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.shipped = 0

    def follow(self, path: Path, log_group: str | None = None) -> None:
        """Ship what ``path`` gets from now on: what it holds already is an earlier run's,
        whose metrics went to an earlier cloud. With ``log_group`` (and a logs client), its
        lines go to that group too."""
        with self._lock:
            self._offsets.setdefault(path, path.stat().st_size if path.is_file() else 0)
            if log_group and self._logs is not None:
                self._groups[path] = log_group
                _ensure_stream(self._logs, log_group)

    def start(self) -> Shipper:
        self._thread = threading.Thread(target=self._run, daemon=True, name="emf-shipper")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ship what is left, then stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.ship()

    def _run(self) -> None:
        while not self._stop.wait(SHIP_EVERY_S):
            with contextlib.suppress(Exception):  # the engine is going away: next time
                self.ship()

    def ship(self) -> int:
        """Read every followed file's new complete lines and put their metrics."""
        data: list[Datum] = []
        with self._lock:
            for path, offset in self._offsets.items():
                if not path.is_file():
                    continue
                with path.open("rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
                complete = chunk[: chunk.rfind(b"\n") + 1]
                self._offsets[path] = offset + len(complete)
                lines = complete.decode(errors="replace").splitlines()
                for line in lines:
                    data.extend(parse(line))
                if path in self._groups and lines:
                    _put_lines(self._logs, self._groups[path], lines)
        by_namespace: dict[str, list[Datum]] = {}
        for datum in data:
            by_namespace.setdefault(datum.namespace, []).append(datum)
        for namespace, values in by_namespace.items():
            for start in range(0, len(values), _PUT_BATCH):
                chunk_values = values[start : start + _PUT_BATCH]
                self._cloudwatch.put_metric_data(
                    Namespace=namespace, MetricData=[d.as_put() for d in chunk_values]
                )
        self.shipped += len(data)
        return len(data)


def _ensure_stream(logs: Any, group: str) -> None:
    """The group (its template may have made it) and the local cloud's stream in it."""
    for call, request in (
        (logs.create_log_group, {"logGroupName": group}),
        (logs.create_log_stream, {"logGroupName": group, "logStreamName": LOG_STREAM}),
    ):
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            call(**request)


def _put_lines(logs: Any, group: str, lines: list[str]) -> None:
    """The lines as log events, now, in as few PutLogEvents calls as its limits allow."""
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    batch: list[dict[str, Any]] = []
    size = 0
    for line in lines:
        cost = len(line.encode()) + _LOG_EVENT_OVERHEAD
        if batch and (len(batch) == _LOG_BATCH or size + cost > _LOG_BATCH_BYTES):
            logs.put_log_events(logGroupName=group, logStreamName=LOG_STREAM, logEvents=batch)
            batch, size = [], 0
        batch.append({"timestamp": now_ms, "message": line})
        size += cost
    if batch:
        logs.put_log_events(logGroupName=group, logStreamName=LOG_STREAM, logEvents=batch)
