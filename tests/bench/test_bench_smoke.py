"""`make bench` in miniature: every benchmark driver runs end to end on both engines, the
page and its plots are written, and the protocol's call counts hold (2 per new key, 1 per
duplicate, 0 for a duplicate inside the batch; under ``effects="staged"`` 1 per new key and 1
per duplicate).

The local-cloud throughput driver is left out: starting the local cloud alone takes longer
than this whole test may.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proof.bench import batches

ROOT = Path(__file__).resolve().parents[2]


def test_bench_smoke(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.bench",
            "--scale",
            "smoke",
            "--sections",
            "work,batches,latency,profile,coldstart",
            "--docs",
            str(tmp_path),
            "--json",
            str(results),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "performance.md").read_text()
    for heading in (
        "## Tuning goal",
        "## Big batches: DynamoDB Local",
        "## Batch latency: moto server",
        "## Batch latency: DynamoDB Local",
        "## DynamoDB work per record",
        "### The bridge to Powertools' records",
        "## Cold start",
        "## What bounds each figure",
    ):
        assert heading in page
    for plot in ("perf_latency.png", "perf_work.png", "perf_coldstart.png", "perf_batches.png"):
        assert (tmp_path / plot).stat().st_size > 1000
    data = json.loads(results.read_text())
    paths = data["engines"]["dynamodb-local"]["paths"]
    assert paths["once"]["new"]["calls"] == 2
    assert paths["once"]["duplicate"]["calls"] == 1
    assert paths["once"]["in-batch duplicate"]["calls"] == 0
    assert paths["powertools"]["new"]["calls"] == 2
    assert paths["once"]["new"]["wru_reported"] == 2
    # effects="staged": one conditional write per new message, one refused per duplicate.
    assert paths["once-staged"]["new"]["calls"] == 1
    assert paths["once-staged"]["duplicate"]["calls"] == 1
    assert paths["once-staged"]["in-batch duplicate"]["calls"] == 0
    units = data["engines"]["dynamodb-local"]["write_units"]
    assert units["once-staged"]["none"]["calls"] == 1
    assert units["once-staged"]["one write"]["operations"] == {"TransactWriteItems": 1}
    assert units["once"]["one write"]["calls"] == 2
    assert "DynamoDB calls per new message / duplicate, staged | 1 / 1" in page
    assert "write units per new message, staged" in page
    assert "## Big batches: DynamoDB Local" in page and "once staged" in page
    for engine in ("moto", "dynamodb-local"):
        for row in data["engines"][engine]["latency"]:
            assert row["once"]["median_ms"] > 0 and row["powertools"]["median_ms"] > 0
    big = data["engines"]["dynamodb-local"]["batches"]
    assert [row["batch"] for row in big["rows"]] == list(batches.plan("smoke").reps)
    for row in big["rows"]:
        for name in batches.TIMED:
            assert len(row[name]["samples"]) == row["reps"]
            assert row[name]["cpu_ms_per_record"] > 0
            assert row[name]["engine_cpu_ms_per_call"] >= 0
            assert 0 <= row[name]["other_cpu_share"] <= 1
        assert row["floor"]["floor_ms"] >= row["floor"]["waits_ms"] > 0
        assert row["floor_staged"]["waits_ms"] < row["floor"]["waits_ms"]
    swept = {(row["batch"], row["max_workers"]) for row in big["sweep"]}
    plan = batches.plan("smoke")
    assert swept == {(size, w) for size in plan.sweep_sizes for w in plan.sweep}
    warm = data["engines"]["dynamodb-local"]["warm_up"]
    assert plan.warm_least <= warm["records"] <= plan.warm_most
    assert warm["first"]["engine_cpu_ms_per_call"] > 0
