"""``python -m proof.bench.deliver`` runs end to end and prints one row per delivery kind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_deliver_benchmark_prints_a_median_for_every_kind_of_delivery() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "proof.bench.deliver", "--n", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    rows = re.findall(r"^\| (.+?) \| ([\d.]+) \| ([\d.]+) \|$", done.stdout, re.MULTILINE)
    assert [name for name, _, _ in rows] == [
        "OnceEnv setup and teardown",
        "new key, 1 body",
        "duplicate, 1 body",
        "10 new keys, one batch",
        'crash="after_process", 1 body',
        "takeover after expire_leases",
    ]
    assert all(float(median) > 0 for _, median, _ in rows)
    assert '"level"' not in done.stdout  # the runtime's log lines are not in the table
