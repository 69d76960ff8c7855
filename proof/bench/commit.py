"""What atomic effects cost: ``attempt.write``'s commit transaction against the plain
completion, and an outbox (``attempt.send``) of 1 and of 10 messages.

    python -m proof.bench.commit [--engine dynamodb-local|moto] [--scale full|quick|smoke]
                                   [--docs DIR] [--json PATH] [--no-page]

``make bench`` runs it after ``python -m proof.bench``. Its section of
``docs/performance.md`` sits below the page's kept-sections marker, between comments of its
own, so that the main renderer keeps it and this script rewrites only it.

Five variants of one business function, the same but for the effects it stages: none (the
plain fenced ``UpdateItem`` completion), one write (a ``Put`` of a ledger entry), two writes
(the ledger's shape: ``Put`` entry + ``Update ADD balance``), and two writes with an outbox
of 1 and of 10 messages to an SQS queue. Every record credits an account of its own, so no
two transactions of a batch touch one item (a shared account would measure contention, not
cost). The table is on the engine (DynamoDB Local in a private network namespace, or moto),
the outbox's queue on moto's server.

- **Counts** (no RTT): a batch of new keys, asking DynamoDB for ``ReturnConsumedCapacity=
  TOTAL`` on every item call (``Wire(capacity=True)``: once does not ask for it itself) and
  summing what comes back; calls are counted on the wire, DynamoDB's and SQS's apart. Then
  the same batch again (duplicates). For an outbox, also a batch whose sends fail (its queue
  does not exist yet: the records are COMPLETED and owe their outbox) and, once the queue
  exists, its redelivery, which sends what is owed and clears it.
- **Timing** (capacity not asked for): batches of new keys with ``RTT_MS`` before every
  DynamoDB and SQS request and ``BUSINESS_MS`` of business time, as the "Big batches"
  section; the variants alternate batch by batch after the engine's warm-up. Per batch: wall
  time, the consumer's CPU (``time.process_time``), each engine's CPU (``/proc``) and the
  rest of the machine's.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import boto3
from rich.console import Console

from oncecli.aws import create_table, local_env
from oncecli.localcloud import engines
from oncecli.project import ROOT
from proof.bench import batches, commit_page, cost
from proof.bench.atomic import (
    BUSINESS_MS,
    LEDGER,
    RTT_MS,
    TABLE,
    Meters,
    Outbound,
    counts,
    plan,
    stdout_discarded,
    timing,
    warm_up,
)
from proof.bench.report import machine
from proof.bench.wire import Wire

# --- the run ------------------------------------------------------------------------------


def tick(step: str) -> None:
    print(f"commit bench: {step}", file=sys.stderr, flush=True)


#: What a run measures: the atomic effects section, and the cost section (``cost.py``).
PARTS = ("effects", "cost")


def measure(engine: str, scale: str, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """The engines' start, then ``parts``: the counts, the warm-up (always, when timing
    follows) and the timing of the atomic effects, then the cost section's figures."""
    p = plan(scale)
    started = time.monotonic()
    result: dict[str, Any] = {
        "engine": engine,
        "scale": scale,
        "rtt_ms": RTT_MS,
        "business_ms": BUSINESS_MS,
        "cores": os.cpu_count(),
        "machine": machine(),
        "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d at %H:%M UTC"),
        "load_before": os.getloadavg(),
        "count_records": p.count,
        "parts": list(parts),
    }
    os.environ.update({k: v for k, v in local_env().items() if k not in os.environ})
    with contextlib.ExitStack() as stack:
        moto = stack.enter_context(engines.MotoServer())
        table_engine = moto if engine == "moto" else stack.enter_context(engines.DynamoDBLocal())
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = table_engine.endpoint
        os.environ["AWS_ENDPOINT_URL_SQS"] = moto.endpoint
        wire = Wire(capacity=True)
        wire.also_count("sqs")
        wire.also_count("sns")
        ddb = wire.client()
        for name in (TABLE, LEDGER):
            create_table(ddb, name)
        sqs = wire.session.client("sqs")
        queue_url = sqs.create_queue(QueueName="bench-commit-notify")["QueueUrl"]
        # On moto one server is both engines: its CPU is the table engine's column.
        pids = {"dynamodb": batches.engine_pid(table_engine.port)}
        if table_engine is not moto:
            pids["sqs"] = batches.engine_pid(moto.port)
        meters = Meters(pids)
        with stdout_discarded():
            # Off the wire: a session of its own, so its reads are neither counted nor delayed.
            reader = boto3.session.Session().client("dynamodb", endpoint_url=table_engine.endpoint)
            if "effects" in parts:
                tick("counts: calls and write units per record")
                result["counts"] = counts(wire, reader, sqs, queue_url, p.count)
            wire.capacity_on = False
            tick(f"warm-up: {p.warm_least}-{p.warm_most} records per variant")
            outbound = Outbound(sqs, "bench-commit-timed")
            result["warm_up"] = warm_up(wire, meters, outbound, p.warm_least, p.warm_most)
            if "effects" in parts:
                result["rows"] = timing(wire, meters, outbound, p.reps, tick)
            outbound.empty()
            if "cost" in parts:
                result["cost"] = cost.measure(wire, reader, meters, sqs, queue_url, scale, tick)
    result["load_after"] = os.getloadavg()
    result["seconds"] = time.monotonic() - started
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proof.bench.commit", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--engine", choices=engines.ENGINES, default="dynamodb-local")
    parser.add_argument("--scale", choices=("smoke", "quick", "full"), default="full")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: rewrite the section from a --json of an earlier run",
    )
    parser.add_argument("--no-page", action="store_true", help="print the tables only")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="what to measure: effects (atomic effects), cost (what a million messages cost)",
    )
    args = parser.parse_args(argv)
    if args.render:
        result = json.loads(args.render.read_text())
    else:
        if args.engine == "dynamodb-local":
            engines.enter_private_netns(
                sys.argv[1:] if argv is None else argv, "proof.bench.commit"
            )
        parts = tuple(p for p in args.parts.split(",") if p)
        unknown = set(parts) - set(PARTS)
        if unknown:
            parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
        result = measure(args.engine, args.scale, parts)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
    markdown = commit_page.render(
        result, Console(width=max(160, Console().width)), None if args.no_page else args.docs
    )
    if not args.no_page:
        print(f"wrote {commit_page.write_section(args.docs, markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
