"""The consumers under benchmark, built alike: same business function, same engine, same
hooked boto3 session; plus the SQS events and Lambda context they are invoked with.

Each consumer gets its own table (``once``'s record, Powertools' record and the naive lock
have different attributes but the same key ``id``), so that their records never mix.
``once-staged`` is ``once`` under ``effects="staged"``: business code first, then one
conditional write (no claim), the same business function.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import once
from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION, create_table
from oncecli.localcloud.invocation import LambdaContext
from proof.bench.wire import Wire
from proof.chaos.peers import naive, powertools

CONSUMERS = ("once", "once-staged", "powertools", "naive")
TABLES = {name: f"bench-{name}" for name in CONSUMERS}
#: once's record key prefix in the benchmarks.
KEY_PREFIX = "bench"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def context(timeout_s: float = 300.0) -> LambdaContext:
    """The Lambda context the consumers are invoked with."""
    return LambdaContext.starting_now("bench", timeout_s, memory_mb=1024)


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
                "eventSourceARN": f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:payments",
                "awsRegion": LOCAL_REGION,
            }
            for text in bodies
        ]
    }


def invoke(handler: Handler, bodies: Sequence[str]) -> dict[str, Any]:
    """Deliver one batch; a failed invocation (Powertools raises when every record failed)
    counts as every record reported failed, as SQS takes it."""
    event = sqs_event(bodies)
    try:
        return handler(event, context())
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
        """A handler of consumer ``name``; ``max_workers`` (``once`` and ``once-staged``
        only) overrides its default."""
        if name in ("once", "once-staged"):
            return once.make_handler(
                process,
                key="paymentId",
                table_name=TABLES[name],
                key_prefix=KEY_PREFIX,
                dlq_url=None,
                effects="staged" if name == "once-staged" else "any",
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
