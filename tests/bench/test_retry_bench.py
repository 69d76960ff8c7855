"""The retry benchmark end to end at a tiny size, on moto (sanity only: the times it
prints are not asserted, only that every message was done and each mode timed a BUSY
duplicate or a failed first attempt)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_retry_benchmark_times_both_modes(tmp_path: Path) -> None:
    out = tmp_path / "retry.json"
    plot = tmp_path / "retry.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.bench.retry",
            "--engine",
            "moto",
            "--pairs",
            "2",
            "--failing",
            "2",
            "--workers",
            "2",
            "--json",
            str(out),
            "--plot",
            str(plot),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Time from a BUSY or failed delivery to done" in done.stdout
    rows = {row["mode"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"backoff", "no backoff"}
    for row in rows.values():
        assert row["done"] == row["messages"] == 6
        assert row["failed"]["count"] == 2
    assert plot.stat().st_size > 0
