"""One consumer at one memory size's CPU share, in a process of its own: the memory sweep's
child (``proof.bench.sweep`` starts it inside a cgroup, ``cpushare.Quota``).

A process of its own because the quota is a process's: the engines, the parent and the
other consumers stay outside it. Its first lines import only the standard library, so that
its cold start is the consumer's: the consumer's import and its handler's construction (at
a full core, Lambda's init phase), then its first record (at the share). The rest of the
bench (``cost.py``'s consumers, the outbox's queues) is imported after, at a full core and
untimed, then the batches run back to back at the share, as a busy queue invokes a function.

It talks to the parent on its stdout (one JSON line per phase; the consumers' own log lines
go to /dev/null, as the other benches discard them) and waits for a line on stdin at each
phase, while the parent changes its quota.
"""

from __future__ import annotations

import time

EXEC_AT = time.time()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def _proto() -> Any:
    """The parent's channel (the real stdout); fd 1 goes to /dev/null for the log lines."""
    channel = os.fdopen(os.dup(1), "w")
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.close(sink)
    return channel


class _Context:
    """Lambda's context, as much of it as the consumers use (the tooling's own,
    ``oncecli.localcloud.invocation.LambdaContext``, is not imported before the cold start)."""

    function_name = "bench-sweep"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:bench-sweep"
    function_version = "$LATEST"
    log_group_name = "/aws/lambda/bench-sweep"
    log_stream_name = "local"

    def __init__(self, memory_mb: int) -> None:
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.deadline = time.time() + 300

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.time()) * 1000))


def _event(key: str) -> dict[str, Any]:
    body = json.dumps({"paymentId": key, "account": f"acct-{key}", "amount": 100})
    now = str(int(time.time() * 1000))
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": uuid.uuid4().hex,
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": now,
                    "SenderId": "AIDA",
                    "ApproximateFirstReceiveTimestamp": now,
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:payments",
                "awsRegion": "us-east-1",
            }
        ]
    }


def _business(ms: float) -> Any:
    def process(payment: dict[str, Any], attempt: Any) -> dict[str, Any]:
        time.sleep(ms / 1000)
        return {"paymentId": payment["paymentId"], "amount": payment["amount"]}

    return process


def _cgroup_stat(directory: str) -> dict[str, int]:
    if not directory:
        return {}
    try:
        lines = (Path(directory) / "cpu.stat").read_text().split("\n")
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split() for line in lines if line.strip())}


def main() -> None:
    config = json.loads(sys.argv[1])
    proto = _proto()

    def phase(name: str, **figures: Any) -> None:
        proto.write(json.dumps({"phase": name, **figures}) + "\n")
        proto.flush()
        sys.stdin.readline()

    consumer, rtt, business_ms = config["consumer"], config["rtt_ms"], config["business_ms"]
    # --- init, at a full core: the consumer's import and its handler's construction.
    t0 = time.perf_counter()
    wire: Any = None
    if consumer == "powertools":
        from proof.bench.wire import Wire
        from proof.chaos.peers import powertools

        t1 = time.perf_counter()
        wire = Wire(latency_ms=rtt)
        cold = powertools.make_handler(
            _business(business_ms),
            table_name=config["pt_table"],
            key="paymentId",
            client=wire.client(),
        )
    else:
        import once

        t1 = time.perf_counter()
        # Lambda sets AWS_LAMBDA_INITIALIZATION_TYPE=on-demand (the parent does here): once
        # builds its processor and its DynamoDB client (boto3 included) in INIT.
        cold = once.make_handler(
            _business(business_ms),
            key="paymentId",
            table_name=config["once_table"],
            key_prefix=config["key_prefix"],
            dlq_url=None,
            effects="staged" if consumer == "once-staged" else "any",
        )
    t2 = time.perf_counter()
    phase(
        "init",
        exec_at=EXEC_AT,
        import_ms=(t1 - t0) * 1000,
        build_ms=(t2 - t1) * 1000,
    )
    # --- the first record, at the share. The bench's wire (latency and call counting) is
    # scaffolding: made before the clock starts, not counted as the consumer's.
    if wire is None:
        from proof.bench.wire import Wire

        wire = Wire(latency_ms=rtt)
    t3 = time.perf_counter()
    response = cold(_event(uuid.uuid4().hex), _Context(config["memory_mb"]))
    first_ms = (time.perf_counter() - t3) * 1000
    if response.get("batchItemFailures"):
        raise RuntimeError(f"{consumer}: the first record failed; no figure")
    phase("first", first_ms=first_ms)
    # --- the bench's scaffolding, at a full core, untimed.
    wire.also_count("sqs")
    from proof.bench import atomic, cost

    sqs = wire.session.client("sqs")
    wire.latency_ms = 0.0
    outbound = atomic.Outbound(sqs, f"bench-sweep-{os.getpid()}")
    wire.latency_ms = rtt
    variants = [v for v in cost.VARIANTS if v.label in config["variants"]]
    delivers = {
        v.label: cost.build(consumer, v, wire, sqs, outbound, business_ms) for v in variants
    }
    new_outcome = None if consumer == "powertools" else "processed"
    dup_outcome = None if consumer == "powertools" else "duplicate"
    phase("ready")
    # --- the batches, back to back, at the share.
    cgroup = config.get("cgroup", "")

    def sample(action: Any) -> dict[str, float]:
        s0, w0, c0 = _cgroup_stat(cgroup), time.perf_counter(), time.process_time()
        action()
        w1, c1, s1 = time.perf_counter(), time.process_time(), _cgroup_stat(cgroup)
        return {
            "wall_ms": (w1 - w0) * 1000,
            "cpu_ms": (c1 - c0) * 1000,
            "periods": s1.get("nr_periods", 0) - s0.get("nr_periods", 0),
            "throttled": s1.get("nr_throttled", 0) - s0.get("nr_throttled", 0),
            "throttled_ms": (s1.get("throttled_time", 0) - s0.get("throttled_time", 0)) / 1e6,
        }

    rows = []
    for v in variants:
        deliver = delivers[v.label]
        for size_text, reps in config["reps"].items():
            size = int(size_text)
            deliver(atomic.new_keys(min(size, 10)), new_outcome)  # untimed: pools, caches
            new, dup = [], []
            for _ in range(reps):
                keys = atomic.new_keys(size)
                new.append(sample(partial(deliver, keys, new_outcome)))
                dup.append(sample(partial(deliver, keys, dup_outcome)))
            if v.messages:
                wire.latency_ms = 0.0
                outbound.empty()
                wire.latency_ms = rtt
            rows.append({"variant": v.label, "batch": size, "new": new, "duplicate": dup})
    proto.write(json.dumps({"phase": "done", "rows": rows}) + "\n")
    proto.flush()


if __name__ == "__main__":
    main()
