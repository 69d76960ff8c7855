"""One engine's measurements, in a process of their own: ``python -m proof.bench.run``.

``proof.bench`` starts this once per engine (under ``unshare -n`` for DynamoDB Local) with
stdout discarded, because the consumers log every record to stdout as they would in Lambda.
Progress goes to stderr as one JSON line per step; the results go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import boto3

from oncecli.aws import local_env
from oncecli.localcloud.engines import ENGINES, engine_named
from proof.bench import batches, latency, profile, work
from proof.bench.subjects import Subjects
from proof.bench.wire import Wire

SECTIONS = ("work", "batches", "latency", "profile")
#: Batches per consumer measured on the engine before its warm-up.
COLD_REPS = 5


def tick(step: str) -> None:
    sys.stderr.write(json.dumps({"step": step}) + "\n")
    sys.stderr.flush()


def _warms(engine: str, sections: list[str]) -> bool:
    """DynamoDB Local's JIT needs a warm-up before anything is timed on it; moto has none."""
    return engine == "dynamodb-local" and bool({"batches", "latency"} & set(sections))


def steps(engine: str, sections: list[str], scale: str) -> int:
    """How many ticks a run emits (for the parent's progress bar)."""
    return (
        (3 if "work" in sections else 0)
        + (1 if "profile" in sections else 0)
        + (batches.steps(scale) if "batches" in sections else 0)
        + (len(latency.matrix(scale)) if "latency" in sections else 0)
        + (2 if _warms(engine, sections) else 0)
    )


def measure(engine: str, sections: list[str], scale: str) -> dict[str, Any]:
    results: dict[str, Any] = {"engine": engine, "scale": scale}
    os.environ.update({k: v for k, v in local_env().items() if k not in os.environ})
    with engine_named(engine) as eng:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = eng.endpoint
        # Capacity is asked for only in the work section: it changes the request a little.
        subjects = Subjects(Wire(capacity="work" in sections))
        subjects.create_tables()
        started = time.monotonic()
        if "work" in sections:
            tick("work: record sizes")
            results["record_sizes"] = work.record_sizes(subjects)
            tick("work: paths")
            results["paths"] = work.paths(subjects, n=4 if scale == "smoke" else 10)
            tick("work: write units, two-phase and staged")
            # Off the wire: a session of its own, so its reads are neither counted nor delayed.
            reader = boto3.session.Session().client("dynamodb", endpoint_url=eng.endpoint)
            results["write_units"] = work.write_units(subjects, reader)
            subjects.wire.capacity_on = False
        meter = batches.Meter(batches.engine_pid(eng.port))
        if _warms(engine, sections):
            # The smallest batch before the warm-up, then the warm-up every later figure
            # relies on (the cold row shows what the warm-up is worth).
            plan = batches.plan(scale)
            cold_size = min(plan.reps)
            tick(f"cold engine: {cold_size} records")
            results["cold"] = batches.run_size(subjects, meter, cold_size, COLD_REPS)
            tick(f"warm-up: {plan.warm_least}-{plan.warm_most} records per consumer")
            results["warm_up"] = batches.warm_up(subjects, meter, plan.warm_least, plan.warm_most)
        if "batches" in sections:
            results["batches"] = batches.run(subjects, meter, scale, tick)
        if "latency" in sections:
            results["latency"] = latency.run(subjects, scale, tick)
        if "profile" in sections:
            tick("profile: once, one-record batches")
            results["profile"] = profile.run(subjects, 20 if scale == "smoke" else 300)
            results["profile"]["engine"] = engine
        results["seconds"] = time.monotonic() - started
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--scale", choices=("smoke", "goal", "quick", "full"), default="full")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    results = measure(args.engine, args.sections.split(","), args.scale)
    with open(args.out, "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()
