"""The consumers under benchmark, built alike: same business function, same engine, same
hooked boto3 session; plus the SQS events and Lambda context they are invoked with.

Each consumer gets its own table (``once``'s record, Powertools' record and the naive lock
have different attributes but the same key ``id``), so that their records never mix.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import once
from oncecli.bench.engine import create_table
from oncecli.bench.wire import Wire
from oncecli.peers import naive, powertools

CONSUMERS = ("once", "powertools", "naive")
TABLES = {name: f"bench-{name}" for name in CONSUMERS}
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class Context:
    """The part of a Lambda context the consumers read."""

    function_name = "bench"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:bench"

    def __init__(self, timeout_ms: int = 300_000) -> None:
        self.aws_request_id = uuid.uuid4().hex
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def business(ms: float) -> Callable[[Any, Any], Any]:
    """A business function that takes ``ms`` (the downstream call) and returns a small
    result shaped like the ledger's."""

    def process(body: Any, attempt: Any) -> dict[str, Any]:
        if ms:
            time.sleep(ms / 1000)
        return {
            "paymentId": body["paymentId"],
            "account": body.get("account"),
            "amount": body.get("amount"),
            "fence": attempt.fence,
            "applied": "now",
        }

    return process


def body(key: str, amount: int = 100) -> str:
    return f'{{"paymentId": "{key}", "account": "acct-{key[:4]}", "amount": {amount}}}'


def sqs_event(bodies: Sequence[str]) -> dict[str, Any]:
    """A standard-queue SQS event as Lambda delivers it."""
    now = str(int(time.time() * 1000))
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": uuid.uuid4().hex,
                "body": text,
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
            for text in bodies
        ]
    }


def invoke(handler: Handler, bodies: Sequence[str]) -> dict[str, Any]:
    """Deliver one batch; a failed invocation (Powertools raises when every record failed)
    counts as every record reported failed, as SQS takes it."""
    event = sqs_event(bodies)
    try:
        return handler(event, Context())
    except Exception:
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}


def new_keys(n: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(n)]


@dataclass
class Subjects:
    """Builds handlers for one engine whose tables exist."""

    wire: Wire

    def create_tables(self) -> None:
        client = self.wire.client()
        for table in TABLES.values():
            create_table(client, table)

    def build(
        self, name: str, process: Callable[[Any, Any], Any], *, max_workers: int | None = None
    ) -> Handler:
        """A handler of consumer ``name``; ``max_workers`` (``once`` only) overrides its
        default."""
        if name == "once":
            return once.make_handler(
                process,
                key="paymentId",
                table_name=TABLES["once"],
                key_prefix="bench",
                dlq_url=None,
                **({} if max_workers is None else {"max_workers": max_workers}),
            )
        if name == "powertools":
            return powertools.make_handler(
                process, table_name=TABLES["powertools"], key="paymentId", client=self.wire.client()
            )
        if name == "naive":
            return naive.make_handler(
                process, table_name=TABLES["naive"], key="paymentId", client=self.wire.client()
            )
        raise ValueError(f"unknown consumer {name!r}")
