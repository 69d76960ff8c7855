"""The harness's worker processes: Lambda's timeout kills an invocation that outlives it,
and a worker that dies any other way stops the run as a failure of the harness."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import time
from pathlib import Path

import pytest

from proof.chaos.harness import Supervisor
from proof.chaos.probe import History
from proof.chaos.worker import Timeout, WorkerSpec
from proof.errors import HarnessFailed


def _outlive(history_path: str, timeout_s: float, run_s: float, extend_s: float) -> None:
    timeout = Timeout(History(history_path, "w0"))
    timeout.arm(timeout_s)
    timeout.extend(extend_s)
    time.sleep(run_s)
    timeout.disarm()


def _run_in_process(tmp_path: Path, timeout_s: float, run_s: float, extend_s: float = 0.0):
    history = tmp_path / "history.jsonl"
    proc = multiprocessing.get_context("spawn").Process(
        target=_outlive, args=(str(history), timeout_s, run_s, extend_s)
    )
    proc.start()
    proc.join(30)
    events = (
        [json.loads(line) for line in history.read_text().splitlines()] if history.exists() else []
    )
    return proc.exitcode, events


def test_an_invocation_that_outlives_the_function_timeout_is_killed_and_says_so(
    tmp_path: Path,
) -> None:
    code, events = _run_in_process(tmp_path, timeout_s=0.3, run_s=5)
    assert code == -signal.SIGKILL
    assert [e["kind"] for e in events if e["e"] == "fault"] == ["timeout"]


def test_an_invocation_that_ends_in_time_is_not_killed(tmp_path: Path) -> None:
    code, events = _run_in_process(tmp_path, timeout_s=2, run_s=0.2)
    assert code == 0
    assert events == []


def test_a_paused_invocation_runs_past_its_lease_until_its_extended_deadline(
    tmp_path: Path,
) -> None:
    code, _ = _run_in_process(tmp_path, timeout_s=0.3, run_s=0.8, extend_s=2)
    assert code == 0


def test_a_worker_that_dies_of_anything_but_a_kill_stops_the_run(tmp_path: Path) -> None:
    spec = WorkerSpec(
        impl="once",
        worker="w0",
        seed=1,
        sqs_endpoint="http://127.0.0.1:9",
        dynamodb_endpoint="http://127.0.0.1:9",
        queue_url="http://127.0.0.1:9/queue",
        dlq_url="http://127.0.0.1:9/dlq",
        tables={"idempotency": "t", "ledger": "l"},
        # The history cannot be opened: the worker raises at start and exits with code 1.
        history_path=os.fspath(tmp_path / "missing" / "history.jsonl"),
        rates={},
        skew_s=0.0,
        pause_s=1.0,
        timeout_s=1.0,
        batch_size=10,
    )
    supervisor = Supervisor([spec])
    supervisor.start()
    try:
        deadline = time.monotonic() + 60
        with pytest.raises(HarnessFailed, match=re.escape("w0 (once) exited with code 1")):
            while time.monotonic() < deadline:
                supervisor.tend()
                time.sleep(0.2)
    finally:
        supervisor.stop()
