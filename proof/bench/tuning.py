"""What a change to the Lambda code buys in CPU per record and in cold start, measured
against another copy of that code: ``python -m proof.bench.tuning --before DIR``.

``DIR`` holds a copy of ``functions/`` from before the change (``git worktree``, or a copy
taken before editing). Two figures, each measured for both copies in the same run:

- **CPU per new record**: the consumer's process CPU (``time.process_time``, every thread)
  per new record, one-record batches and batches of 10, no injected latency and no business
  time, on DynamoDB Local warmed up first. Each copy runs in its own interpreter (its own
  import of ``once``), the copies alternating round by round so that drifting load hits both
  alike; medians over the rounds. Logs go to /dev/null, at INFO (once's default) and at
  WARNING.
  The same with every call answered in the client before it is sent (a ``before-send``
  hook): botocore's building, signing and parsing, without the HTTP path and the engine.
- **Cold start**: import + ``make_handler`` + the first record in a fresh interpreter
  (``coldstart.first_record``), for a minimal once module of each copy and for Powertools'.

``--sdk DIR`` measures with the boto3 and botocore in ``DIR`` instead of the installed ones
(the release a Lambda runtime bundles, say); ``--append`` adds the run to the saved ones.
The results go to ``docs/perf_tuning.json`` (with ``--notes``: what the change was, in
markdown); ``section`` renders them in ``docs/performance.md`` under "Where once's time
goes", where ``make bench`` keeps them. The load average before and after is part of the
figures: on a shared machine, compare only figures measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from oncecli.project import ROOT

RESULT = "perf_tuning.json"
#: (where the calls go, log level, batch size) of each row.
CELLS = (
    ("engine", "INFO", 1),
    ("engine", "INFO", 10),
    ("engine", "WARNING", 1),
    ("engine", "WARNING", 10),
    ("canned", "INFO", 1),
    ("canned", "INFO", 10),
)


def _canned(request: Any, **_: Any) -> Any:
    """A ``before-send`` hook: an empty success for every call, without sending it."""
    import zlib

    from botocore.awsrequest import AWSResponse

    class Raw:
        def stream(self, **_: Any) -> Any:
            yield b"{}"

    headers = {
        "x-amzn-RequestId": "canned",
        "x-amz-crc32": str(zlib.crc32(b"{}") & 0xFFFFFFFF),
        "Content-Type": "application/x-amz-json-1.0",
    }
    return AWSResponse(request.url, 200, headers, Raw())


def _child(tree: Path, endpoint: str, records: int, batch: int, canned: bool) -> dict[str, float]:
    """In this process, imported from ``tree``: CPU and wall per new record. ``canned``: every
    call is answered in the client, before it is sent (botocore's work, without the HTTP
    path's)."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    from oncecli.aws import local_env

    os.environ.update({k: v for k, v in local_env().items() if k not in os.environ})
    import once
    from proof.bench.subjects import Subjects, body, business, invoke, new_keys
    from proof.bench.wire import Wire

    if not str(Path(once.__file__).resolve()).startswith(str(tree.resolve())):
        raise RuntimeError(f"once imported from {once.__file__}, not from {tree}")
    wire = Wire()
    if canned:
        wire.session.events.register("before-send.dynamodb", _canned)
    handler = Subjects(wire).build("once", business(0))
    for key in new_keys(20):
        invoke(handler, [body(key)])
    keys = new_keys(records)
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, records, batch):
        invoke(handler, [body(k) for k in keys[start : start + batch]])
    return {
        "cpu_ms": (time.process_time() - cpu) * 1000 / records,
        "wall_ms": (time.perf_counter() - wall) * 1000 / records,
    }


def _cpu_per_record(
    trees: dict[str, Path],
    rounds: int,
    records: int,
    warm_records: int,
    sdk: Path | None,
    tick: Any,
) -> list[dict[str, Any]]:
    """The copies alternating on one warmed-up DynamoDB Local: one row per batch size and
    log level, each copy's median CPU ms per record."""
    from oncecli.aws import local_env
    from oncecli.localcloud.engines import engine_named

    os.environ.update({k: v for k, v in local_env().items() if k not in os.environ})
    rows = []
    with engine_named("dynamodb-local") as engine:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = engine.endpoint
        from proof.bench.subjects import Subjects, body, business, invoke, new_keys
        from proof.bench.wire import Wire

        subjects = Subjects(Wire())
        subjects.create_tables()
        tick("warming DynamoDB Local up")
        warm = subjects.build("once", business(0))
        keys = new_keys(warm_records)
        # The warm-up's log lines go where the measured children's go: nowhere.
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        try:
            for start in range(0, len(keys), 10):
                invoke(warm, [body(k) for k in keys[start : start + 10]])
            sys.stdout.flush()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
        for where, level, batch in CELLS:
            samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
            for n in range(rounds):
                tick(f"CPU per record, {where}, batch {batch}, {level}: round {n + 1}/{rounds}")
                for name, tree in trees.items():
                    samples[name].append(
                        _run_child(tree, engine.endpoint, records, batch, level, where, sdk)
                    )
            rows.append(
                {
                    "calls": where,
                    "batch": batch,
                    "level": level,
                    "records": records,
                    "rounds": rounds,
                    **{
                        name: {
                            "cpu_ms": statistics.median(s["cpu_ms"] for s in runs),
                            "cpu_ms_min": min(s["cpu_ms"] for s in runs),
                            "cpu_ms_max": max(s["cpu_ms"] for s in runs),
                        }
                        for name, runs in samples.items()
                    },
                }
            )
    return rows


def _run_child(
    tree: Path,
    endpoint: str,
    records: int,
    batch: int,
    level: str,
    where: str,
    sdk: Path | None,
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cpu.json"
        argv = [
            sys.executable,
            "-m",
            "proof.bench.tuning",
            "--child",
            str(tree),
            "--endpoint",
            endpoint,
            "--records",
            str(records),
            "--batch",
            str(batch),
            *(["--canned"] if where == "canned" else []),
            "--out",
            str(out),
        ]
        env = dict(os.environ, POWERTOOLS_LOG_LEVEL=level)
        env["PYTHONPATH"] = os.pathsep.join(
            [*([str(sdk)] if sdk is not None else []), str(tree), str(ROOT)]
        )
        done = subprocess.run(
            argv,
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"measuring {tree} failed:\n{done.stderr[-3000:]}")
        result: dict[str, float] = json.loads(out.read_text())
        return result


def _botocore(sdk: Path | None) -> str:
    """The version of the botocore the children import."""
    path = [str(sdk)] if sdk is not None else []
    done = subprocess.run(
        [sys.executable, "-c", "import botocore; print(botocore.__version__)"],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([*path, str(ROOT)])),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def measure(
    before: Path,
    rounds: int,
    records: int,
    runs: int,
    warm_records: int,
    sdk: Path | None,
    tick: Any,
) -> dict[str, Any]:
    """One run: CPU per record and cold start, before and after, with one botocore."""
    from proof.bench import coldstart

    trees = {"before": before, "after": ROOT / "functions"}
    started, load_start = time.monotonic(), os.getloadavg()
    result: dict[str, Any] = {
        "botocore": _botocore(sdk),
        "python": sys.version.split()[0],
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": _cpu_per_record(trees, rounds, records, warm_records, sdk, tick),
    }
    tick("cold start: first record")
    result["cold"] = coldstart.first_record(
        {
            "before": ("once_handler", trees["before"]),
            "after": ("once_handler", trees["after"]),
            "powertools": ("powertools_handler", trees["after"]),
        },
        runs,
        sdk,
    )
    result["load"] = {"start": load_start, "end": os.getloadavg()}
    result["seconds"] = time.monotonic() - started
    return result


# --- the page -----------------------------------------------------------------------------


def _run_lines(r: dict[str, Any]) -> list[str]:
    load = r["load"]
    lines = [
        f"**botocore {r['botocore']}** (Python {r['python']}), {r['measured_at']}; load "
        f"average {', '.join(f'{x:.2f}' for x in load['start'])} at the start, "
        f"{', '.join(f'{x:.2f}' for x in load['end'])} at the end (1, 5, 15 min), 2 cores.",
        "",
        "CPU per new record: ms of the consumer's process CPU, no RTT, no business time, "
        "logs to /dev/null; median over rounds (min-max). Calls to DynamoDB Local, or "
        "answered in the client before they are sent (botocore's work without the HTTP "
        "path's):",
        "",
        "| calls | batch | logs | before | after | change |",
        "|---|---|---|---|---|---|",
    ]
    for row in r["cpu"]:
        b, a = row["before"], row["after"]
        calls = (
            "DynamoDB Local" if row.get("calls", "engine") == "engine" else "answered in the client"
        )
        lines.append(
            f"| {calls} | {row['batch']} | {row['level']} "
            f"| {b['cpu_ms']:.2f} ({b['cpu_ms_min']:.2f}-{b['cpu_ms_max']:.2f}) "
            f"| {a['cpu_ms']:.2f} ({a['cpu_ms_min']:.2f}-{a['cpu_ms_max']:.2f}) "
            f"| {(a['cpu_ms'] / b['cpu_ms'] - 1) * 100:+.0f}% |"
        )
    cold = r["cold"]
    lines += [
        "",
        "Cold start: import + `make_handler` + one new record in a fresh interpreter, ms, "
        f"median of {cold['after']['runs']} (against a local endpoint that answers at once):",
        "",
        "| code | import | first record | total (min-max) | CPU |",
        "|---|---|---|---|---|",
    ]
    for name, label in (
        ("before", "once, before"),
        ("after", "once, after"),
        ("powertools", "Powertools (documented minimal)"),
    ):
        c = cold[name]
        lines.append(
            f"| {label} | {c['import_ms_median']:.0f} | {c['first_ms_median']:.0f} "
            f"| {c['total_ms_median']:.0f} ({c['total_ms_min']:.0f}-{c['total_ms_max']:.0f}) "
            f"| {c['cpu_ms_median']:.0f} |"
        )
    return lines


def section(docs: Path) -> str | None:
    """The subsection of "Where once's time goes" that ``docs/perf_tuning.json`` holds, in
    markdown; None without one."""
    path = docs / RESULT
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    lines = [
        "### What the client settings and the lighter start bought",
        "",
        "Measured by `python -m proof.bench.tuning --before DIR` (`DIR`: the Lambda code "
        "before the change), before and after in the same run, alternating.",
    ]
    for run in saved["runs"]:
        lines += ["", *_run_lines(run)]
    if saved.get("notes"):
        lines += ["", saved["notes"].strip()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proof.bench.tuning", description=__doc__)
    parser.add_argument("--before", type=Path, help="a copy of functions/ from before")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--runs", type=int, default=9, help="fresh interpreters per cold start")
    parser.add_argument("--warm", type=int, default=3000, help="records that warm the engine up")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument(
        "--notes",
        type=Path,
        help="markdown saying what the change was, rendered under the tables (default: the "
        "saved notes)",
    )
    parser.add_argument(
        "--sdk",
        type=Path,
        help="a directory holding another boto3 and botocore to measure with (the one a "
        "Lambda runtime bundles, say)",
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="add this run to the saved ones (another botocore) instead of replacing them",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--canned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        result = _child(args.child, args.endpoint, args.records, args.batch, args.canned)
        args.out.write_text(json.dumps(result))
        return 0
    if args.before is None:
        parser.error("--before DIR is required")
    from oncecli.localcloud.engines import in_private_netns, netns_argv

    if not in_private_netns():
        # DynamoDB Local runs in a network namespace of its own (as in `make bench`).
        script = [sys.executable, "-m", "proof.bench.tuning", *(argv or sys.argv[1:])]
        return subprocess.run(netns_argv(script), cwd=ROOT, check=False).returncode

    def tick(step: str) -> None:
        sys.stderr.write(f"{step}\n")
        sys.stderr.flush()

    result = measure(args.before, args.rounds, args.records, args.runs, args.warm, args.sdk, tick)
    path = args.docs / RESULT
    saved = json.loads(path.read_text()) if path.is_file() else {"runs": []}
    saved["runs"] = [*saved["runs"], result] if args.append else [result]
    if args.notes is not None:
        saved["notes"] = args.notes.read_text()
    path.write_text(json.dumps(saved, indent=1) + "\n")
    print(section(args.docs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
