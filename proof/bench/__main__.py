"""``make bench``: every benchmark, then ``docs/performance.md`` and its plots.

    python -m proof.bench [--scale full|quick|smoke] [--engines moto,dynamodb-local]
                            [--sections work,batches,latency,profile,coldstart,footprint,throughput]

Each engine's measurements run in a child process (``proof.bench.run``), under
``unshare -n`` for DynamoDB Local, with stdout discarded (the consumers log each record
there, as in Lambda); the children report progress on stderr and results as JSON. Cold
start, footprint and throughput run from here. ``--functions DIR`` puts another copy of the Lambda
code first on the path of every child: that is how a tuning change is measured before it
is applied.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from oncecli.errors import CliError
from oncecli.localcloud.engines import ENGINES, in_private_netns, netns_argv
from oncecli.project import ROOT
from proof import example
from proof.bench import coldstart, footprint, run, throughput
from proof.bench.page import KEPT_SECTIONS
from proof.bench.report import machine, render

ALL_SECTIONS = ("work", "batches", "latency", "profile", "coldstart", "footprint", "throughput")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "once-bench"


def _engine_sections(engine: str, engines: list[str], sections: list[str]) -> list[str]:
    """Latency on every engine; work, big batches and profile once, on DynamoDB Local when
    it runs (it reports consumed capacity and serves calls in parallel; moto's figures are
    not DynamoDB's)."""
    home = "dynamodb-local" if "dynamodb-local" in engines else engines[0]
    return [
        s
        for s in ("work", "batches", "latency", "profile")
        if s in sections and (s == "latency" or engine == home)
    ]


def _child_env(functions: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if functions is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(functions), *filter(None, [env.get("PYTHONPATH")])]
        )
    return env


def _child(
    module: str, engine: str, args: list[str], functions: Path | None, progress: Progress, task: Any
) -> Any:
    """Run ``python -m module --engine E ARGS --out F`` and return F's JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        argv = [sys.executable, "-m", module, "--engine", engine, *args, "--out", str(out)]
        if engine == "dynamodb-local" and not in_private_netns():
            argv = netns_argv(argv)
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=_child_env(functions),
        )
        other: list[str] = []
        assert proc.stderr is not None
        for line in proc.stderr:
            try:
                step = json.loads(line)["step"]
            except (ValueError, KeyError, TypeError):
                other.append(line.rstrip())
                continue
            progress.update(task, description=f"{engine}: {step}", advance=1)
        if proc.wait() != 0 or not out.exists():
            tail = "\n".join(other[-25:])
            raise RuntimeError(f"{module} on {engine} failed (exit {proc.returncode}):\n{tail}")
        return json.loads(out.read_text())


def _write_page(docs: Path, page: str) -> None:
    path = docs / "performance.md"
    old = path.read_text() if path.is_file() else ""
    kept = old[old.index(KEPT_SECTIONS) :] if KEPT_SECTIONS in old else ""
    path.write_text(page.rstrip("\n") + "\n\n" + kept if kept else page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proof.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", choices=("smoke", "goal", "quick", "full"), default="full")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--sections", default=",".join(ALL_SECTIONS))
    parser.add_argument(
        "--docs", type=Path, default=ROOT / "docs", help="where performance.md and the plots go"
    )
    parser.add_argument("--json", type=Path, help="also write every raw result here")
    parser.add_argument(
        "--functions",
        type=Path,
        help="Lambda code to measure instead of functions/ (a patched copy, for tuning)",
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: rewrite the page from a --json of an earlier run",
    )
    args = parser.parse_args(argv)
    if args.render:
        results = json.loads(args.render.read_text())
        _write_page(args.docs, render(results, args.docs, Console()))
        return 0
    # The benchmarks measure the example app of the checkout (its handler, its stack).
    functions = example.require()
    engines = [e for e in args.engines.split(",") if e]
    sections = [s for s in args.sections.split(",") if s]
    console = Console(stderr=True)
    started = time.monotonic()
    load_start = os.getloadavg()
    plan = {e: _engine_sections(e, engines, sections) for e in engines}
    total = sum(run.steps(e, s, args.scale) for e, s in plan.items())
    total += len(coldstart.MODULES) + 3 if "coldstart" in sections else 0
    fresh_runs = {"smoke": 2, "goal": 5, "quick": 5, "full": 15}[args.scale]
    total += footprint.steps(fresh_runs) if "footprint" in sections else 0
    total += throughput.steps(args.scale) * len(engines) if "throughput" in sections else 0
    results: dict[str, Any] = {"engines": {}}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("bench", total=total)

        def tick(step: str) -> None:
            progress.update(task, description=step, advance=1)

        for engine, engine_sections in plan.items():
            if engine_sections:
                results["engines"][engine] = _child(
                    "proof.bench.run",
                    engine,
                    ["--sections", ",".join(engine_sections), "--scale", args.scale],
                    args.functions,
                    progress,
                    task,
                )
        if "coldstart" in sections:
            results["coldstart"] = coldstart.run(
                fresh_runs,
                CACHE,
                tick,
                functions=args.functions or functions,
                install=args.scale != "smoke",
            )
        if "footprint" in sections:
            results["footprint"] = footprint.run(
                fresh_runs, tick, functions=args.functions or functions
            )
        if "throughput" in sections:
            results["throughput"] = {
                "rows": [
                    row
                    for engine in engines
                    for row in _child(
                        "proof.bench.throughput",
                        engine,
                        ["--scale", args.scale],
                        args.functions,
                        progress,
                        task,
                    )
                ]
            }
    seconds = time.monotonic() - started
    command = "python -m proof.bench" + (f" --scale {args.scale}" if args.scale != "full" else "")
    results["meta"] = {
        "scale": args.scale,
        "seconds": seconds,
        "machine": machine(),
        "command": command,
        "load": {"start": load_start, "end": os.getloadavg()},
    }
    args.docs.mkdir(parents=True, exist_ok=True)
    _write_page(args.docs, render(results, args.docs, Console()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    console.print(f"wrote {args.docs / 'performance.md'} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CliError as error:
        print(f"python -m proof.bench: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
