"""Footprint: what a consumer writes to its logs per record, and the memory a warm one holds.

Both are measured for the minimal once module (``lambdas/once_handler.py``) beside the
minimal Powertools one (``lambdas/powertools_handler.py``), each in fresh interpreters
against ``coldstart._answers()``, the local endpoint that answers every AWS call with an
empty success: every idempotency claim and write succeeds, so every record is new and
handled (each batch response is checked to have no ``batchItemFailures``).

Each probe imports the module, handles a batch of one (the cold invocation, not counted),
then a batch of each size in ``batches`` (10, then 100), each of new records. Its stdout and
stderr go to one file, which is all Lambda would ship to CloudWatch Logs; the probe notes
that file's size around each batch (and writes its own result to another file), so a
batch's bytes are exactly what it wrote. Lines that are JSON objects with an ``_aws`` key
are EMF metric blobs and are counted apart from log lines. Powertools and once run at INFO
(``POWERTOOLS_LOG_LEVEL``, once's default), once also at WARNING.

Memory is the process's peak RSS (``ru_maxrss``) before the last batch and after it. The
figures are medians of ``runs`` probes per configuration, the configurations alternating.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from proof.bench import coldstart

#: (label, module, POWERTOOLS_LOG_LEVEL) of each configuration, in the order they alternate.
CONFIGS = (
    ("once (minimal)", "once_handler", "INFO"),
    ("Powertools (documented minimal)", "powertools_handler", "INFO"),
    ("once (minimal), WARNING", "once_handler", "WARNING"),
)
BATCHES = (10, 100)
#: Variables that would change what either logger writes: the measurement sets its own.
_LOGGING_ENV = (
    "POWERTOOLS_LOG",
    "POWERTOOLS_DEV",
    "POWERTOOLS_DEBUG",
    "POWERTOOLS_METRICS",
    "LOG_LEVEL",
    "AWS_LAMBDA_LOG_",
)
#: A fresh interpreter: import the module, then handle each event of the events file.
_PROBE = """
import json, os, resource, sys


class Context:
    function_name = "footprint"
    memory_limit_in_mb = 1024
    aws_request_id = "footprint-request"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:footprint"

    def get_remaining_time_in_millis(self):
        return 60000


def written():
    sys.stdout.flush()
    sys.stderr.flush()
    return os.fstat(1).st_size


with open(os.environ["FOOTPRINT_EVENTS"]) as events_file:
    EVENTS = json.load(events_file)
import {module} as handler_module
offsets, peaks = [written()], []
for event in EVENTS:
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    response = handler_module.lambda_handler(event, Context())
    assert response == {{"batchItemFailures": []}}, response
    offsets.append(written())
peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
with open(os.environ["FOOTPRINT_OUT"], "w") as out:
    json.dump({{"offsets": offsets, "peaks_kib": peaks}}, out)
"""


def _record(n: int) -> dict[str, Any]:
    """One new SQS record, as Lambda delivers it (``coldstart._one_record_event``'s)."""
    record: dict[str, Any] = json.loads(coldstart._one_record_event())["Records"][0]
    record["messageId"] = f"footprint-{n:06d}-{os.urandom(4).hex()}"
    record["receiptHandle"] = f"footprint-receipt-{n:06d}"
    return record


def _events(sizes: Sequence[int]) -> list[dict[str, Any]]:
    """One SQS event per size, every record new (its own message id and ``paymentId``)."""
    events, n = [], 0
    for size in sizes:
        events.append({"Records": [_record(n + i) for i in range(size)]})
        n += size
    return events


def _split(output: bytes) -> dict[str, int]:
    """Bytes and lines of ``output``, EMF blobs apart from log lines."""
    counts = {"log_bytes": 0, "log_lines": 0, "emf_bytes": 0, "emf_lines": 0}
    for line in output.splitlines(keepends=True):
        try:
            emf = "_aws" in json.loads(line)
        except (ValueError, TypeError):
            emf = False
        kind = "emf" if emf else "log"
        counts[f"{kind}_bytes"] += len(line)
        counts[f"{kind}_lines"] += 1
    return counts


def _probe(module: str, env: dict[str, str], sizes: Sequence[int]) -> dict[str, Any]:
    """One fresh interpreter: each batch's output counts and the peak RSS (KiB) before each
    batch and at the end, plus the last batch's first log line (a sample)."""
    with tempfile.TemporaryDirectory() as tmp:
        events, out, logs = (Path(tmp) / name for name in ("events.json", "out.json", "logs"))
        events.write_text(json.dumps(_events([1, *sizes])))
        env = {**env, "FOOTPRINT_EVENTS": str(events), "FOOTPRINT_OUT": str(out)}
        with logs.open("wb") as sink:
            done = subprocess.run(
                [sys.executable, "-c", _PROBE.format(module=module)],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                check=False,
            )
        written = logs.read_bytes()
        if done.returncode != 0 or not out.exists():
            tail = written[-2000:].decode(errors="replace")
            raise RuntimeError(f"footprint probe of {module} failed:\n{tail}")
        result = json.loads(out.read_text())
    offsets = result["offsets"]
    batches = [_split(written[a:b]) for a, b in pairwise(offsets[1:])]
    last = written[offsets[-2] : offsets[-1]].splitlines()
    sample = next((line for line in last if b'"_aws"' not in line), b"")
    return {
        "import_bytes": offsets[0],
        "batches": batches,
        "peaks_kib": result["peaks_kib"],
        "sample": sample.decode(errors="replace"),
    }


def _env(url: str, level: str, functions: Path) -> dict[str, str]:
    """``coldstart.endpoint_env`` without the logging settings of our own environment, at
    ``level``."""
    env = {
        k: v
        for k, v in coldstart.endpoint_env(functions, url).items()
        if not k.startswith(_LOGGING_ENV)
    }
    env.update({"POWERTOOLS_LOG_LEVEL": level, "PYTHONUNBUFFERED": "1"})
    return env


def _summary(
    label: str, module: str, level: str, sizes: Sequence[int], probes: list[dict[str, Any]]
) -> dict[str, Any]:
    """Medians over ``probes`` of one configuration."""
    batches = []
    for i, size in enumerate(sizes):
        median = {
            key: statistics.median(p["batches"][i][key] for p in probes)
            for key in probes[0]["batches"][i]
        }
        per_record = {f"{key}_per_record": value / size for key, value in median.items()}
        batches.append({"batch": size, **median, **per_record})
    before, after = ([p["peaks_kib"][i] / 1024 for p in probes] for i in (-2, -1))
    return {
        "label": label,
        "module": module,
        "level": level,
        "import_bytes": statistics.median(p["import_bytes"] for p in probes),
        "batches": batches,
        "rss_before_mib": statistics.median(before),
        "rss_peak_mib": statistics.median(after),
        "rss_peak_mib_min": min(after),
        "rss_peak_mib_max": max(after),
        "sample_line": probes[-1]["sample"],
    }


def steps(runs: int) -> int:
    """How many ticks ``run`` emits: one per round of the configurations."""
    return runs


def run(
    runs: int,
    tick: Callable[[str], None],
    functions: Path = coldstart.FUNCTIONS,
    batches: Sequence[int] = BATCHES,
) -> dict[str, Any]:
    """Log bytes per record and peak RSS of each configuration of ``CONFIGS``, ``runs``
    fresh interpreters each, alternating; ``batches``: the sizes handled after the cold
    batch of one (the RSS is around the last)."""
    probes: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in CONFIGS}
    with coldstart._answers() as url:
        envs = {label: _env(url, level, functions) for label, _, level in CONFIGS}
        for n in range(runs):
            tick(f"footprint: round {n + 1} of {runs}")
            for label, module, _ in CONFIGS:
                probes[label].append(_probe(module, envs[label], batches))
    return {
        "runs": runs,
        "batches": list(batches),
        "configs": [
            _summary(label, module, level, batches, probes[label])
            for label, module, level in CONFIGS
        ],
    }
