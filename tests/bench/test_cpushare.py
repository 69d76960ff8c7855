"""Lambda's CPU share in the bench (``proof/bench/cpushare.py``): under the 512 MB quota a
CPU-bound process is throttled (the cgroup's ``cpu.stat`` says so; nothing is timed), and
where the cgroup cannot be written the bench says it ran unthrottled, never silently. Also
the memory sweep's arithmetic, and the bench's modules importing each other in no circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proof.bench import cost, cpushare, sweep_page

ROOT = Path(__file__).resolve().parents[2]
#: Iterations of the CPU-bound loop: far more than 5.8 ms of CPU (512 MB's quota per 20 ms
#: period) on any machine, so some periods must be throttled.
SPIN = 20_000_000


def test_the_512_mb_quota_throttles_a_cpu_bound_process() -> None:
    with cpushare.Quota(512) as quota:
        if not quota.applied:
            pytest.skip(f"no writable cgroup v1 cpu controller here: {quota.reason}")
        assert quota.quota_us == round(cpushare.PERIOD_US * 512 / 1769)
        assert (quota.dir / "cpu.cfs_quota_us").read_text().strip() == str(quota.quota_us)
        assert quota.stat()["nr_throttled"] == 0
        loop = f"x = 0\nfor i in range({SPIN}): x += i"
        done = subprocess.run(quota.admit_argv([sys.executable, "-c", loop]), check=False)
        assert done.returncode == 0
        stat = quota.stat()
        assert stat["nr_throttled"] > 0, stat
        assert stat["throttled_time"] > 0, stat
        made = quota.dir
    assert not made.exists(), "the run's cgroup is removed after it"


def test_init_lifts_the_share_to_a_full_core_and_share_restores_it() -> None:
    with cpushare.Quota(256) as quota:
        if not quota.applied:
            pytest.skip(f"no writable cgroup v1 cpu controller here: {quota.reason}")
        read = lambda: int((quota.dir / "cpu.cfs_quota_us").read_text())  # noqa: E731
        quota.init()
        assert read() == cpushare.PERIOD_US
        quota.share()
        assert read() == quota.quota_us < cpushare.PERIOD_US


def test_a_cgroup_that_cannot_be_made_is_reported_and_the_process_runs_unthrottled(
    tmp_path: Path,
) -> None:
    not_a_controller = tmp_path / "cpu"
    not_a_controller.write_text("a file, not a cgroup hierarchy")
    with cpushare.Quota(512, root=not_a_controller) as quota:
        assert not quota.applied
        assert str(not_a_controller) in quota.reason
        argv = [sys.executable, "-c", "pass"]
        assert quota.admit_argv(argv) == argv, "run as is, not under a shell that fails"
        quota.init()
        quota.share()
        assert quota.stat() == {}
    line = cpushare.describe(quota)
    assert "NOT throttled" in line and quota.reason in line
    # ... and the page says so above the figures.
    point = {"memory_mb": 512, "throttled": False, "quota": line}
    text = sweep_page._quotas({"points": [point]})
    assert "could not be throttled" in text and "NOT throttled" in text


def _count(wcu: float, rcu: float = 0.0, sqs_calls: float = 0.0) -> dict[str, Any]:
    return {"wcu_reported": 0.0, "wcu_rules": wcu, "rcu_reported": rcu, "sqs_calls": sqs_calls}


def test_the_sweep_prices_every_component_at_the_memory_size() -> None:
    count = _count(wcu=2, rcu=1, sqs_calls=1)
    parts = sweep_page.bill(count, batch_ms=200, memory_mb=1024, batch=10)
    assert parts["gb_s_per_million"] == pytest.approx(0.2 * 1.0 / 10 * 1e6)
    assert parts["lambda_duration"] == pytest.approx(parts["gb_s_per_million"] * 0.0000166667)
    assert parts["dynamodb_writes"] == pytest.approx(2 * 0.625), "by DynamoDB's rules"
    assert parts["total"] == pytest.approx(sum(parts[k] for k in cost.COMPONENTS))
    half = sweep_page.bill(_count(wcu=2), batch_ms=200, memory_mb=512, batch=10)
    assert half["lambda_duration"] == pytest.approx(parts["lambda_duration"] / 2)


def test_the_cheapest_memory_size_is_the_one_of_least_dollars() -> None:
    def row(memory: int | None, usd: float) -> dict[str, Any]:
        path = {"usd": {"total": usd}}
        return {
            "consumer": "once",
            "variant": "v",
            "batch": 10,
            "memory_mb": memory,
            "new": path,
            "duplicate": path,
        }

    best = sweep_page.cheapest([row(128, 3.0), row(512, 1.0), row(1024, 2.0), row(None, 0.1)])
    assert best[("once", "v", 10, "new")]["memory_mb"] == 512, "whole cores is no memory size"


def test_the_bench_modules_import_each_other_in_no_circle() -> None:
    bench = ROOT / "proof" / "bench"
    names = {p.stem for p in bench.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in bench.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if module == "proof.bench":
                    deps |= {a.name for a in node.names}
                elif module.startswith("proof.bench."):
                    deps.add(module.split(".")[2])
            elif isinstance(node, ast.Import):
                dotted = [a.name for a in node.names if a.name.startswith("proof.bench.")]
                deps |= {name.split(".")[2] for name in dotted}
        graph[path.stem] = deps & names
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, "import circle: " + " -> ".join([*path, name])
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    pages = {n for n in names if n.endswith("_page") or n in ("page", "report")}
    for measurement in ("atomic", "cost", "sweep_child", "cpushare"):
        assert not graph[measurement] & pages, f"{measurement} imports a page"
