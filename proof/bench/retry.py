"""Retry backoff in the local cloud: the time from a BUSY or failed delivery to the moment
that message is done, with once's backoff and without it.

Without backoff a record reported in ``batchItemFailures`` comes back after the queue's
visibility timeout (six times the function timeout); with it, after
``min(max, base * 2**(n-1))`` s, and a BUSY one no later than the holder's lease ends
(+1 s). This measures what that buys, on the local cloud's engines (moto's server for SQS,
DynamoDB Local or moto for the table) through the event source mapping emulator, which
leaves a visibility change made by the function standing, as SQS does.

Per mode (``backoff``, ``no backoff``), on a fresh queue and table: ``--pairs`` keys sent
twice, side by side, so that the copies race (business code holds a key ``HOLD_S``, so the
loser is BUSY), and ``--failing`` keys whose first attempt fails. The function's timeout is
``TIMEOUT_S`` (2 s, the local stage's; the queue's visibility timeout is six times that).
Each invocation records how its records ended (``retry_function``); the times are taken
from those marks (``proof.chaos.retrytimes``: first BUSY/failed delivery to done).

    python -m proof.bench.retry [--engine dynamodb-local|moto] [--pairs N] [--failing N]
                                  [--workers N] [--json PATH] [--plot PNG]

For DynamoDB Local it re-executes itself in a private network namespace (``unshare -n``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from once import constants as c
from oncecli.aws import (
    LOCAL_ACCOUNT,
    LOCAL_REGION,
    create_queue_with_dlq,
    create_table,
    local_client,
    local_env,
)
from oncecli.localcloud import engines
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig
from proof.bench import retry_function
from proof.chaos import retrytimes

#: The local stage's function timeout, and SQS's visibility timeout of six times it.
TIMEOUT_S = 2
VISIBILITY_S = 6 * TIMEOUT_S
#: High enough that no message reaches the DLQ within a run.
MAX_RECEIVE = 10
#: One message per invocation, so that the two copies of a key go to different workers.
BATCH_SIZE = 1
MODES = {"backoff": "with_backoff", "no backoff": "without_backoff"}
HANDLER_MODULE = retry_function.__name__


def _workload(pairs: int, failing: int) -> list[dict[str, Any]]:
    """Bodies in send order: each pair's two copies side by side, then the failing keys."""
    run = uuid.uuid4().hex[:8]
    bodies: list[dict[str, Any]] = []
    for n in range(pairs):
        body = {"id": f"busy-{run}-{n}"}
        bodies += [body, body]
    bodies += [{"id": f"fail-{run}-{n}", "fail_first": True} for n in range(failing)]
    return bodies


def _resources(sqs: Any, ddb: Any, tag: str) -> tuple[str, str, str]:
    """A fresh queue (with its DLQ and redrive policy) and idempotency table."""
    queue, _dlq = create_queue_with_dlq(
        sqs, tag, visibility_s=VISIBILITY_S, max_receive=MAX_RECEIVE
    )
    table = f"{tag}-idempotency"
    create_table(ddb, table, key=c.ATTR_ID)
    return queue, f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:{tag}", table


def run_mode(
    mode: str,
    endpoints: dict[str, str],
    *,
    pairs: int,
    failing: int,
    workers: int,
    workdir: Path,
    timeout_s: float = 180.0,
) -> dict[str, Any]:
    """One mode on a fresh queue and table; returns its retry times and counts."""
    sqs = local_client("sqs", endpoints["sqs"])
    ddb = local_client("dynamodb", endpoints["dynamodb"])
    tag = f"retry-{mode.replace(' ', '')}-{uuid.uuid4().hex[:6]}"
    queue, queue_arn, table = _resources(sqs, ddb, tag)
    marks_path = workdir / f"{tag}.jsonl"
    marks_path.touch()
    function = FunctionConfig(
        name=tag,
        arn=f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT}:function:{tag}",
        handler=f"{HANDLER_MODULE}.{MODES[mode]}",
        timeout_s=TIMEOUT_S,
        memory_mb=256,
        environment={c.ENV_TABLE_NAME: table, c.ENV_SERVICE_NAME: "retrybench"},
    )
    config = MappingConfig(
        queue_url=queue,
        queue_arn=queue_arn,
        region=LOCAL_REGION,
        batch_size=BATCH_SIZE,
        report_batch_item_failures=True,
        visibility_timeout_s=VISIBILITY_S,
        max_receive_count=MAX_RECEIVE,
    )
    env = {
        **local_env(),
        "AWS_ENDPOINT_URL_SQS": endpoints["sqs"],
        "AWS_ENDPOINT_URL_DYNAMODB": endpoints["dynamodb"],
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        retry_function.MARKS_ENV: str(marks_path),
    }
    mapping = Mapping(
        config,
        function,
        sqs_factory=lambda: local_client("sqs", endpoints["sqs"]),
        workers=workers,
        env=env,
        log_path=str(workdir / f"{tag}-workers.log"),
    )
    bodies = _workload(pairs, failing)
    started = time.monotonic()
    with mapping:
        # The workers are warm: what follows is what a deployed function sees.
        for start in range(0, len(bodies), 10):
            sqs.send_message_batch(
                QueueUrl=queue,
                Entries=[
                    {"Id": str(n), "MessageBody": json.dumps(body)}
                    for n, body in enumerate(bodies[start : start + 10])
                ],
            )
        while time.monotonic() - started < timeout_s:
            if mapping.snapshot()["deleted"] >= len(bodies):
                break
            time.sleep(0.1)
        seconds = time.monotonic() - started
        stats = mapping.snapshot()
    marks = [
        retrytimes.Mark(m["message"], m["t"], m["kind"])
        for m in map(json.loads, marks_path.read_text().splitlines())
    ]
    return {
        "mode": mode,
        "messages": len(bodies),
        "done": stats["deleted"],
        "invocations": stats["invocations"],
        "seconds": round(seconds, 1),
        **retrytimes.summarize(marks),
    }


def measure(
    engine: str, *, pairs: int, failing: int, workers: int, modes: tuple[str, ...] = tuple(MODES)
) -> list[dict[str, Any]]:
    """Start the engines, then run each mode; a row per mode."""
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="once-retry-")))
        moto = stack.enter_context(engines.MotoServer())
        tables = moto
        if engine == "dynamodb-local":
            tables = stack.enter_context(engines.DynamoDBLocal())
        endpoints = {"sqs": moto.endpoint, "dynamodb": tables.endpoint}
        return [
            run_mode(m, endpoints, pairs=pairs, failing=failing, workers=workers, workdir=tmp)
            for m in modes
        ]


def _cell(found: dict[str, Any], field: str) -> str:
    value = found[field]
    return "-" if value is None else f"{value:.1f}"


def table(rows: list[dict[str, Any]], engine: str) -> Table:
    out = Table(
        title=f"Time from a BUSY or failed delivery to done (local cloud, {engine}; "
        f"function timeout {TIMEOUT_S} s, visibility {VISIBILITY_S} s)"
    )
    for column in ("mode", "delivery", "timed", "median s", "p90 s", "unfinished"):
        out.add_column(column, justify="left" if column in ("mode", "delivery") else "right")
    for row in rows:
        for kind in retrytimes.NOT_DONE:
            found = row[kind]
            out.add_row(
                row["mode"],
                "BUSY" if kind == "busy" else kind,
                str(found["count"]),
                _cell(found, "median_s"),
                _cell(found, "p90_s"),
                str(found["unfinished"]),
            )
    return out


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Grouped bars: median (and p90 whisker) per delivery kind, one bar per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(retrytimes.NOT_DONE)
    width = 0.8 / len(rows)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, row in enumerate(rows):
        medians = [row[k]["median_s"] or 0.0 for k in kinds]
        p90 = [(row[k]["p90_s"] or 0.0) - (row[k]["median_s"] or 0.0) for k in kinds]
        xs = [x + i * width for x in range(len(kinds))]
        ax.bar(xs, medians, width, label=row["mode"], yerr=[[0] * len(kinds), p90], capsize=4)
    ax.axhline(VISIBILITY_S, color="grey", linestyle=":", linewidth=1)
    ax.text(
        0.01,
        VISIBILITY_S,
        "queue's visibility timeout",
        va="bottom",
        transform=ax.get_yaxis_transform(),
    )
    ax.set_xticks([x + width * (len(rows) - 1) / 2 for x in range(len(kinds))])
    ax.set_xticklabels(["BUSY duplicate", "failed first attempt"])
    ax.set_ylabel("seconds to done (median, whisker to p90)")
    ax.set_title(f"Retry backoff: time to completion (function timeout {TIMEOUT_S} s)")
    ax.set_ylim(0, VISIBILITY_S * 1.2)
    ax.legend(loc="center left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m proof.bench.retry",
        description="time from a BUSY or failed delivery to done, with and without backoff",
    )
    parser.add_argument("--engine", choices=engines.ENGINES, default="dynamodb-local")
    parser.add_argument("--pairs", type=int, default=20, help="keys sent twice (default: 20)")
    parser.add_argument(
        "--failing", type=int, default=20, help="keys whose first attempt fails (default: 20)"
    )
    parser.add_argument("--workers", type=int, default=4, help="concurrency (default: 4)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows here")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="also plot to PNG")
    args = parser.parse_args(argv)
    if args.engine == "dynamodb-local":
        engines.enter_private_netns(sys.argv[1:] if argv is None else argv, __spec__.name)
    rows = measure(args.engine, pairs=args.pairs, failing=args.failing, workers=args.workers)
    Console().print(table(rows, args.engine))
    if args.json:
        args.json.write_text(json.dumps({"engine": args.engine, "rows": rows}, indent=2) + "\n")
    if args.plot:
        plot(rows, args.plot)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
