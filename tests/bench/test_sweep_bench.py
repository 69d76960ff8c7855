"""The memory sweep (``python -m proof.bench.sweep``) end to end on moto, in miniature: each
consumer runs in a process of its own at 512 MB's share (or, where no cgroup can be written,
unthrottled and said so), and the page gets its tables, its plot and its cold start between
its own comments, below the kept-sections marker. Timings are not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proof.bench import cost, sweep_page
from proof.bench.page import KEPT_SECTIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_measures_every_consumer_at_the_share_and_writes_its_section(
    tmp_path: Path,
) -> None:
    (tmp_path / "performance.md").write_text(f"# Performance\n\nmain\n\n{KEPT_SECTIONS}\n")
    results = tmp_path / "sweep.json"
    argv = [sys.executable, "-m", "proof.bench.sweep", "--engine", "moto", "--scale", "smoke"]
    done = subprocess.run(
        [*argv, "--docs", str(tmp_path), "--json", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(results.read_text())
    points = result["points"]
    assert {(p["consumer"], p["memory_mb"]) for p in points} == {(c, 512) for c in cost.CONSUMERS}
    for point in points:
        assert point["throttled"] or "NOT throttled" in point["quota"]
        if point["throttled"]:
            assert point["cpu_stat"]["nr_periods"] > 0, "the process ran in its cgroup"
        assert {r["variant"] for r in point["rows"]} == {v.label for v in cost.VARIANTS}
        assert point["cold"]["first_ms"] > 0
    assert len(result["load_start"]) == len(result["load_end"]) == 3
    page = (tmp_path / "performance.md").read_text()
    assert page.index(KEPT_SECTIONS) < page.index(sweep_page.BEGIN) < page.index(sweep_page.END)
    assert "## On Lambda's CPU: the memory sweep" in page
    assert "Cold start at each memory size's share" in page
    assert (tmp_path / sweep_page.PLOT).stat().st_size > 1000
