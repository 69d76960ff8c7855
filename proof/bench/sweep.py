"""The memory sweep: each consumer at Lambda's CPU share of each memory size, its batch
time, its CPU per record and what a million messages cost there.

    python -m proof.bench.sweep [--scale full|quick|smoke] [--memory 128,512,...]
                                  [--reps 10:5,100:2] [--engine dynamodb-local|moto]
                                  [--docs DIR] [--json PATH] [--render JSON] [--no-page]

Why: every other figure of docs/performance.md is taken on a whole core of this machine,
which a Lambda under 1,769 MB never has (``cpushare.py``). Here each consumer (Powertools,
``once`` two-phase, ``once`` staged) runs in a process of its own (``sweep_child.py``) in a
cgroup holding it to the share of a memory size (128 to 3,008 MB), and once on whole cores
for comparison. Per consumer and memory size, one process:

- **Cold start**: interpreter, the consumer's import and its handler's construction at a
  full core (Lambda's init phase), its first record (one new message) at the share.
- **Batches**, back to back at the share, as a busy queue invokes a function (idle time
  between batches would refill the quota and hide it): per variant of ``cost.py`` (no staged
  write, one staged write, an outbox of one) and batch size, batches of new keys, each
  followed by the same batch again (duplicates). Wall time, the process's CPU
  (``time.process_time``) and the cgroup's ``cpu.stat`` (periods throttled).

DynamoDB work per message (calls, write and read units, SQS requests) does not depend on
the CPU: it is counted once, in this process, by ``cost.counts``. The tables are on the
engine (DynamoDB Local in a private network namespace, warmed up first, or moto), the
outbox's queues on moto's server; ``RTT_MS`` before every request and ``BUSINESS_MS`` of
business time, as in the other sections. ``make bench`` runs it; its section of the page
(``sweep_page.py``, which also holds the arithmetic: a page renders from results) sits below
the kept-sections marker, between comments of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from rich.console import Console

from oncecli.aws import create_table, local_env
from oncecli.localcloud import engines
from oncecli.project import ROOT
from proof.bench import atomic, cost, cpushare, prices, sweep_page
from proof.bench.subjects import KEY_PREFIX
from proof.bench.wire import Wire

#: The memory sizes swept (MB): Lambda's least, the share's doublings, one vCPU, and 3,008.
MEMORY_MB = (128, 256, 512, 1024, 1769, 3008)
CONSUMERS = cost.CONSUMERS
RTT_MS = atomic.RTT_MS
BUSINESS_MS = atomic.BUSINESS_MS


@dataclass(frozen=True)
class Plan:
    """Memory sizes; batches per batch size (each new batch followed by its duplicate);
    warm-up batches of 10 per consumer and variant; records per count; and whether the
    consumers also run on whole cores."""

    memory: tuple[int, ...]
    reps: dict[int, int]
    warm: int
    count: int
    unthrottled: bool


def plan(scale: str) -> Plan:
    if scale == "smoke":
        return Plan((512,), {4: 1}, warm=0, count=4, unthrottled=False)
    if scale == "quick":
        return Plan((128, 512, 1769), {10: 2, 100: 1}, warm=10, count=10, unthrottled=True)
    return Plan(MEMORY_MB, {10: 4, 100: 2}, warm=30, count=20, unthrottled=True)


def tick(step: str) -> None:
    print(f"sweep: {step}", file=sys.stderr, flush=True)


# --- one consumer at one memory size -----------------------------------------------------


@contextlib.contextmanager
def _no_quota() -> Iterator[None]:
    yield


def run_child(
    consumer: str, memory_mb: int | None, p: Plan, period_us: int = cpushare.PERIOD_US
) -> dict[str, Any]:
    """``sweep_child`` for ``consumer`` in a cgroup at ``memory_mb``'s share (on whole cores
    when ``memory_mb`` is None); its figures, with the quota it ran under."""
    quota = cpushare.Quota(memory_mb or cpushare.FULL_VCPU_MB, period_us)
    with quota if memory_mb else _no_quota(), tempfile.TemporaryFile("w+") as err:
        config = {
            "consumer": consumer,
            "memory_mb": memory_mb or sweep_page.UNTHROTTLED_PRICED_MB,
            "rtt_ms": RTT_MS,
            "business_ms": BUSINESS_MS,
            "reps": {str(k): v for k, v in p.reps.items()},
            "variants": [v.label for v in cost.VARIANTS],
            "once_table": atomic.TABLE,
            "pt_table": cost.PT_TABLE,
            "key_prefix": KEY_PREFIX,
            "cgroup": str(quota.dir) if memory_mb and quota.applied else "",
        }
        argv = [sys.executable, "-m", "proof.bench.sweep_child", json.dumps(config)]
        if memory_mb:
            quota.init()
            argv = quota.admit_argv(argv)
        started = time.time()
        # As Lambda sets them for an on-demand function (once primes its handler in INIT):
        # https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html
        lambda_env = {
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(config["memory_mb"]),
        }
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=ROOT,
            env={**os.environ, **lambda_env},
        )
        assert proc.stdin is not None and proc.stdout is not None
        got: dict[str, Any] = {}
        switch = {"init": quota.share, "first": quota.init, "ready": quota.share}
        for line in proc.stdout:
            message = json.loads(line)
            got[message.pop("phase")] = message
            if memory_mb and "done" not in got:
                switch.get(next(reversed(got)), lambda: None)()
            if "done" not in got:
                proc.stdin.write("go\n")
                proc.stdin.flush()
        stat = quota.stat() if memory_mb else {}
        if proc.wait() != 0 or "done" not in got:
            err.seek(0)
            tail = err.read()[-3000:]
            raise RuntimeError(f"{consumer} at {memory_mb} MB failed ({proc.returncode}):\n{tail}")
    init = got["init"]
    return {
        "consumer": consumer,
        "memory_mb": memory_mb,
        "throttled": bool(memory_mb) and quota.applied,
        "quota": cpushare.describe(quota) if memory_mb else "whole cores (no quota)",
        "vcpus": cpushare.vcpus(memory_mb) if memory_mb else None,
        "quota_us": quota.quota_us if memory_mb else None,
        "period_us": period_us,
        "cold": {
            "start_ms": (init["exec_at"] - started) * 1000,
            "import_ms": init["import_ms"],
            "build_ms": init["build_ms"],
            "first_ms": got["first"]["first_ms"],
        },
        "rows": got["done"]["rows"],
        "cpu_stat": stat,
    }


# --- the run ------------------------------------------------------------------------------


def warm_up(wire: Wire, sqs: Any, batches_each: int) -> None:
    """Every consumer and variant, ``batches_each`` batches of 10 new keys, no RTT, in this
    process: DynamoDB Local's JIT compiles each request path before anything is timed."""
    if batches_each <= 0:
        return
    outbound = atomic.Outbound(sqs, "bench-sweep-warm")
    for consumer in CONSUMERS:
        for variant in cost.VARIANTS:
            deliver = cost.build(consumer, variant, wire, sqs, outbound, 0)
            outcome = None if consumer == "powertools" else "processed"
            for _ in range(batches_each):
                deliver(atomic.new_keys(10), outcome)
            outbound.empty()
    for url in outbound.urls:
        sqs.delete_queue(QueueUrl=url)


def measure(engine: str, p: Plan, period_us: int = cpushare.PERIOD_US) -> dict[str, Any]:
    started = time.monotonic()
    result: dict[str, Any] = {
        "engine": engine,
        "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d at %H:%M UTC"),
        "load_start": os.getloadavg(),
        "cores": os.cpu_count(),
        "rtt_ms": RTT_MS,
        "business_ms": BUSINESS_MS,
        "period_us": period_us,
        "reps": {str(k): v for k, v in p.reps.items()},
        "memory": list(p.memory),
        "count_records": p.count,
        "prices_as_of": prices.AS_OF,
    }
    os.environ.update({k: v for k, v in local_env().items() if k not in os.environ})
    with contextlib.ExitStack() as stack:
        moto = stack.enter_context(engines.MotoServer())
        table_engine = moto if engine == "moto" else stack.enter_context(engines.DynamoDBLocal())
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = table_engine.endpoint
        os.environ["AWS_ENDPOINT_URL_SQS"] = moto.endpoint
        wire = Wire(capacity=True)
        wire.also_count("sqs")
        ddb = wire.client()
        for name in (atomic.TABLE, atomic.LEDGER, cost.PT_TABLE):
            create_table(ddb, name)
        sqs = wire.session.client("sqs")
        queue_url = sqs.create_queue(QueueName="bench-sweep-notify")["QueueUrl"]
        reader = boto3.session.Session().client("dynamodb", endpoint_url=table_engine.endpoint)
        units = atomic.Units(atomic.Refused(wire), atomic.RuleUnits(wire, reader))
        with atomic.stdout_discarded():
            tick(f"counts: {p.count} records per consumer and variant")
            result["counts"] = cost.counts(wire, units, sqs, queue_url, p.count)
            wire.capacity_on = False
            tick(f"warm-up: {p.warm} batches of 10 per consumer and variant")
            warm_up(wire, sqs, p.warm)
        points: list[int | None] = [*p.memory, *([None] if p.unthrottled else [])]
        result["points"] = []
        for memory in points:
            for consumer in CONSUMERS:
                tick(f"{consumer} at {f'{memory} MB' if memory else 'whole cores'}")
                result["points"].append(run_child(consumer, memory, p, period_us))
    result["load_end"] = os.getloadavg()
    result["seconds"] = time.monotonic() - started
    return result


def _reps(text: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in (pair.split(":") for pair in text.split(",") if pair)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proof.bench.sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--engine", choices=engines.ENGINES, default="dynamodb-local")
    parser.add_argument("--scale", choices=("smoke", "quick", "full"), default="full")
    parser.add_argument("--memory", help="memory sizes, MB (default: the scale's)")
    parser.add_argument("--reps", help="batches per batch size, e.g. 10:5,100:2")
    parser.add_argument("--no-unthrottled", action="store_true", help="skip the whole-core run")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--render", type=Path, metavar="JSON", help="measure nothing")
    parser.add_argument("--no-page", action="store_true", help="print the tables only")
    args = parser.parse_args(argv)
    if args.render:
        result = json.loads(args.render.read_text())
    else:
        if args.engine == "dynamodb-local":
            engines.enter_private_netns(sys.argv[1:] if argv is None else argv, "proof.bench.sweep")
        p = plan(args.scale)
        p = Plan(
            tuple(int(m) for m in args.memory.split(",")) if args.memory else p.memory,
            _reps(args.reps) if args.reps else p.reps,
            p.warm,
            p.count,
            p.unthrottled and not args.no_unthrottled,
        )
        result = measure(args.engine, p)
        result["scale"] = args.scale
        result["command"] = "python -m proof.bench.sweep" + " ".join(
            [""] + (sys.argv[1:] if argv is None else list(argv))
        )
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
    markdown = sweep_page.render(
        result, Console(width=max(160, Console().width)), None if args.no_page else args.docs
    )
    if not args.no_page:
        print(f"wrote {sweep_page.write_section(args.docs, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
