"""``make demo`` as the README runs it: a subprocess, its exit code, its report (``demo``),
and what every run of it must show (``check``). Each demo is a test module of its own, so
that ``make test`` runs them side by side (one module to each process)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from oncecli.project import ROOT
from tests.localcloud.helpers import CONTEXT

ARGS = [
    "--messages",
    "40",
    "--bad-rate",
    "0.1",
    "--duplicate-rate",
    "0.25",
    *[f"-c{k}={v}" for k, v in CONTEXT.items()],
]


def demo(tmp_path, *extra: str) -> dict:
    out = tmp_path / "report.json"
    began = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "proof.demo", *ARGS, *extra, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    report["test_wall_s"] = time.monotonic() - began
    assert "every message took effect once" in run.stdout
    return report


def check(report: dict) -> None:
    assert report["sent"] == 40
    assert report["lost"] == 0
    assert report["ledger_ok"] is True
    assert report["executions"] == report["unique_keys"]
    assert report["notifications_ok"] is True  # each credited payment announced, by identity
    assert report["notifications"] - report["notifications_resent"] == report["unique_keys"]
    assert report["dlq"] >= 3  # malformed, mismatch, poison at least
    assert report["dlq_reasons"].get("maxReceiveCount exceeded", 0) >= 1  # the poison
    assert report["acknowledged"] + report["dlq_reasons"]["maxReceiveCount exceeded"] == 40
