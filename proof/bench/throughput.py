"""Throughput through the local cloud: messages per second against the number of workers.

One local cloud per engine (the stack deployed on moto, tables on the engine), through the
local cloud's own pieces (``LocalCloud``, the event source mapping emulator ``Mapping``)
rather than ``make demo``, so the cloud starts once per engine, not once per point. For
each worker count: fill the queue with N new payments, start the mapping (its workers'
init is not timed), and time until it has deleted all N. The stack's maximum concurrency
is raised by CDK context so that it does not cap the workers.

Run as ``python -m proof.bench.throughput --engine E --out F`` (under ``unshare -n`` for
DynamoDB Local); ``proof.bench`` does that.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

from oncecli.localcloud.engines import ENGINES
from proof import example

WORKERS = {"smoke": (1,), "goal": (1,), "quick": (1, 2), "full": (1, 2, 4)}
MESSAGES = {"smoke": 20, "goal": 100, "quick": 100, "full": 300}


def steps(scale: str) -> int:
    return len(WORKERS[scale])


def tick(step: str) -> None:
    sys.stderr.write(json.dumps({"step": step}) + "\n")
    sys.stderr.flush()


def _drain(cloud: Any, workers: int, messages: int, timeout_s: float) -> dict[str, Any]:
    config = cloud.mapping_config()
    sqs = cloud.client("sqs")
    for start in range(0, messages, 10):
        sqs.send_message_batch(
            QueueUrl=config.queue_url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": json.dumps(
                        {"paymentId": uuid.uuid4().hex, "account": f"acct-{i % 7}", "amount": 100}
                    ),
                }
                for i in range(start, min(messages, start + 10))
            ],
        )
    mapping = cloud.mapping(workers, "bench-workers.log")
    with mapping:
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if mapping.snapshot()["deleted"] >= messages:
                break
            time.sleep(0.02)
        seconds = time.monotonic() - started
        stats = mapping.snapshot()
    return {
        "workers": mapping.concurrency,
        "messages": stats["deleted"],
        "seconds": seconds,
        "messages_per_s": stats["deleted"] / seconds,
        "invocations": stats["invocations"],
        "mean_invocation_ms": stats["mean_invocation_ms"],
    }


def measure(engine: str, scale: str) -> list[dict[str, Any]]:
    from oncecli.localcloud.cloud import LocalCloud

    example.require()  # the example app of the checkout is what the local cloud deploys
    top = max(WORKERS[scale])
    rows = []
    with LocalCloud(engine=engine, context={"max_concurrency": str(top)}) as cloud:
        for workers in WORKERS[scale]:
            tick(f"throughput {engine} workers={workers}")
            rows.append(
                {"engine": engine, **_drain(cloud, workers, MESSAGES[scale], timeout_s=120)}
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--scale", choices=tuple(WORKERS), default="full")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with open(args.out, "w") as out:
        json.dump(measure(args.engine, args.scale), out)


if __name__ == "__main__":
    main()
