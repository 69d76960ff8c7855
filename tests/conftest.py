"""Shared fixtures for the unit and integration suites, all on in-process moto.

Nothing here reaches AWS: fake credentials and region are set before anything imports boto3,
endpoint overrides and profiles are dropped, and every AWS fixture runs inside
``moto.mock_aws``. The fixtures build realistic SQS events for Lambda, a fake Lambda context,
a controllable clock for the record store, and a counter of DynamoDB calls on the wire.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

# Before boto3 is imported anywhere: the suites must never touch real AWS.
os.environ.update(
    {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }
)
for _name in (
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_LAMBDA_FUNCTION_NAME",
):
    os.environ.pop(_name, None)
# The Lambda environment of the example service (read when payments.handler is imported).
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "payments")
os.environ.setdefault("IDEMPOTENCY_TABLE_NAME", "idempotency")
os.environ.setdefault("LEDGER_TABLE_NAME", "ledger")
os.environ.setdefault("DLQ_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/dlq")

import boto3  # noqa: E402
import pytest  # noqa: E402
from boto3.dynamodb.types import TypeDeserializer  # noqa: E402
from moto import mock_aws  # noqa: E402

from once import constants as c  # noqa: E402
from once import make_handler  # noqa: E402
from once.handler import Handler  # noqa: E402
from once.invocation import Process  # noqa: E402
from once.models import Outcome  # noqa: E402
from once.sqsrecord import SqsRecord  # noqa: E402
from once.store import RecordStore  # noqa: E402
from once.testing import strict  # noqa: E402

TABLE = "idempotency"
LEDGER = "ledger"
PREFIX = "test"
REGION = "us-east-1"
ACCOUNT = "123456789012"

_deserializer = TypeDeserializer()


def plain(item: dict[str, Any]) -> dict[str, Any]:
    """A low-level DynamoDB item as plain Python (numbers as int)."""

    def convert(value: Any) -> Any:
        return int(value) if isinstance(value, Decimal) else value

    return {k: convert(_deserializer.deserialize(v)) for k, v in item.items()}


@dataclass
class Aws:
    """The moto account of one test: clients, table names and queue URLs."""

    dynamodb: Any
    sqs: Any
    dlq_url: str
    fifo_dlq_url: str
    missing_queue_url: str = field(
        default=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/no-such-queue"
    )

    def record(self, key: str | int, prefix: str = PREFIX) -> dict[str, Any] | None:
        """The idempotency record of one business key, read strongly consistent."""
        item = self.dynamodb.get_item(
            TableName=TABLE, Key={c.ATTR_ID: {"S": f"{prefix}#{key}"}}, ConsistentRead=True
        ).get("Item")
        return plain(item) if item else None

    def records(self) -> list[dict[str, Any]]:
        return [plain(i) for i in self.dynamodb.scan(TableName=TABLE)["Items"]]

    def dlq(self, url: str | None = None) -> list[dict[str, Any]]:
        """Every message in a DLQ, with all its message attributes."""
        messages: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=url or self.dlq_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                AttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            messages.extend(batch)


def _table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}],
    )


@pytest.fixture(scope="session")
def _session() -> boto3.Session:
    """One boto3 session for the whole run, its service models loaded once.

    ``mock_aws`` resets ``boto3.DEFAULT_SESSION``, so every client the code under test makes
    would otherwise reload the models from disk. Clients still get their own event hooks.
    """
    return boto3.Session(region_name=REGION)


@pytest.fixture
def aws(_session: boto3.Session) -> Iterator[Aws]:
    """moto with the idempotency and ledger tables, a standard DLQ and a FIFO DLQ; held to
    AWS's documented rules (``once.testing.strict``), as ``once_env`` and the local cloud
    are, whichever test runs first."""
    strict.install()
    with mock_aws():
        boto3.DEFAULT_SESSION = _session  # moto puts its own value back on exit
        dynamodb, sqs = _session.client("dynamodb"), _session.client("sqs")
        _table(dynamodb, TABLE)
        _table(dynamodb, LEDGER)
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        fifo = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        assert dlq == os.environ[c.ENV_DLQ_URL]
        yield Aws(dynamodb=dynamodb, sqs=sqs, dlq_url=dlq, fifo_dlq_url=fifo)


class FakeContext:
    """What the Lambda runtime hands the handler, with a remaining time we choose.

    ``remaining_ms`` is a number, or a callable asked at every call (to make time run out
    in the middle of a batch).
    """

    def __init__(self, remaining_ms: int | Callable[[], int] = 60_000) -> None:
        self._remaining = remaining_ms
        self.aws_request_id = str(uuid.uuid4())
        self.function_name = "once-consumer-Function-1A2B3C"
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = (
            f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"
        )
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "2024/01/01/[$LATEST]abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining() if callable(self._remaining) else self._remaining


@pytest.fixture
def context() -> type[FakeContext]:
    return FakeContext


class Clock:
    """A clock for the record store that moves only when told to."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _as_body(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body)


def build_event(
    bodies: list[Any],
    fifo_groups: list[str] | None = None,
    message_attributes: dict[str, dict[str, Any]] | None = None,
    queue: str | None = None,
) -> dict[str, Any]:
    """An SQS event as Lambda delivers it. Bodies that are not str are JSON-encoded."""
    fifo = fifo_groups is not None
    queue = queue or ("orders.fifo" if fifo else "orders")
    sent = int(time.time() * 1000)
    records = []
    for index, raw in enumerate(bodies):
        body = _as_body(raw)
        attributes = {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(sent + index),
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": str(sent + index + 5),
        }
        if fifo:
            assert fifo_groups is not None
            attributes |= {
                "MessageGroupId": fifo_groups[index],
                "MessageDeduplicationId": hashlib.sha256(f"{index}:{body}".encode()).hexdigest(),
                "SequenceNumber": str(18_849_496_460_467_696_128 + index),
            }
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "AQEB" + uuid.uuid4().hex * 4,
                "body": body,
                "attributes": attributes,
                "messageAttributes": message_attributes or {},
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}",
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


@pytest.fixture
def sqs_event() -> Callable[..., dict[str, Any]]:
    return build_event


def message_ids(event: dict[str, Any]) -> list[str]:
    return [r["messageId"] for r in event["Records"]]


def failed_ids(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def outcomes(handler: Handler, event: dict[str, Any], context: Any = None) -> list[Outcome]:
    """Run a batch through the handler's processor; outcomes in the batch's order."""
    handled = {
        h.message_id: h.outcome
        for h in handler.processor.run([SqsRecord(r) for r in event["Records"]], context)
    }
    return [handled[m] for m in message_ids(event)]


class Calls:
    """Every DynamoDB request a client puts on the wire (retries included), by operation."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def hook(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        self.sent.append(target.rsplit(".", 1)[-1])

    def reset(self) -> None:
        self.sent.clear()

    @property
    def count(self) -> Counter[str]:
        return Counter(self.sent)

    def __len__(self) -> int:
        return len(self.sent)


def count_calls(client: Any, event: str = "before-send.dynamodb") -> Calls:
    """Count a client's requests as they leave (``before-send``: one per HTTP attempt)."""
    calls = Calls()
    client.meta.events.register(event, calls.hook)
    return calls


def store_client(handler: Handler) -> Any:
    return handler.processor._store._client


@pytest.fixture
def once_handler(aws: Aws) -> Callable[..., Handler]:
    """``make_handler`` with the suite's defaults (key ``orderId``, prefix ``test``, the
    standard DLQ); ``clock=`` puts the store on a controllable clock."""

    def build(
        process: Process, *, clock: Callable[[], float] | None = None, **options: Any
    ) -> Handler:
        settings: dict[str, Any] = {
            "key": "orderId",
            "key_prefix": PREFIX,
            "table_name": TABLE,
            "dlq_url": aws.dlq_url,
        } | options
        handler = make_handler(process, **settings)
        if clock is not None:
            store = RecordStore(
                boto3.client("dynamodb"),
                settings["table_name"],
                retention_s=handler.retention_s,
                clock=clock,
            )
            handler.bind(store=store)
        return handler

    return build


class Spy:
    """A business function that records what it was called with and returns a result."""

    def __init__(self, result: Callable[[Any, Any], Any] | None = None) -> None:
        self.calls: list[tuple[Any, Any]] = []
        self._result = result

    def __call__(self, body: Any, attempt: Any) -> Any:
        self.calls.append((body, attempt))
        if self._result is not None:
            return self._result(body, attempt)
        return {"orderId": body.get("orderId"), "fence": attempt.fence}

    @property
    def keys(self) -> list[Any]:
        return [body.get("orderId") for body, _ in self.calls]


@pytest.fixture
def spy() -> Spy:
    return Spy()


#: The modules that take longest (a minute or more each, mostly waiting: a harness run, a
#: demo, a model search; ``make test`` prints the slowest), run first. ``make test`` hands a
#: whole module to each process in collection order (``--no-loadscope-reorder``), two at a
#: time to each: the four longest start at once, a shorter one queued behind each, so that
#: the suite ends when its longest module does, not later.
SLOW_FIRST = (
    "tests/chaos/test_harness_fifo.py",
    "tests/chaos/test_harness_atomic.py",
    "tests/chaos/test_record_model.py",
    "tests/chaos/test_harness.py",
    "tests/chaos/test_message_model.py",
    "tests/chaos/test_harness_retention.py",
    "tests/localcloud/test_demo.py",
    "tests/localcloud/test_demo_fifo.py",
    "tests/localcloud/test_demo_dynamodb_local.py",
    "tests/chaos/test_chain_model.py",
    "tests/localcloud/test_refunds_app.py",
    "tests/bench/test_retry_bench.py",
    "tests/localcloud/test_alarms_on_local_cloud.py",
    "tests/bench/test_bench_smoke.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first (``SLOW_FIRST``), the rest in their order."""
    rank = {module: n for n, module in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
