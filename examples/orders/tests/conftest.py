"""Fixtures for the orders service's tests: moto for the idempotency table and the DLQ, a
fake carrier on 127.0.0.1, and SQS batches as Lambda delivers them. The crash tests use
``once_env`` (from once.testing, registered when once is installed) instead of ``cloud``.

No AWS account and no network beyond loopback: fake credentials are set before boto3 is
imported, and the handler reads its configuration from the environment as it does in Lambda.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REGION = "us-east-1"
TABLE = "orders-idempotency"
os.environ.update(
    {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_SERVICE_NAME": "orders",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "IDEMPOTENCY_TABLE_NAME": TABLE,
    }
)
for _name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
    os.environ.pop(_name, None)

import boto3  # noqa: E402
import pytest  # noqa: E402
from moto import mock_aws  # noqa: E402


@dataclass
class FakeCarrier:
    """Makes one shipment per idempotency key; can be told to fail or refuse."""

    shipments: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200

    def reset(self) -> None:
        self.shipments.clear()
        self.requests.clear()
        self.status = 200

    def post(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append((key, body))
        if self.status != 200:
            return self.status, {"error": "unavailable"}
        if key not in self.shipments:
            self.shipments[key] = {"shipmentId": f"s-{len(self.shipments) + 1}", **body}
        return 200, self.shipments[key]


@pytest.fixture(scope="session")
def _carrier() -> Iterator[FakeCarrier]:
    """The fake carrier's server, started once; ``CARRIER_URL`` points the handler at it."""
    fake = FakeCarrier()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, answer = fake.post(self.headers["Idempotency-Key"], body)
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["CARRIER_URL"] = f"http://127.0.0.1:{server.server_port}"
    yield fake
    server.shutdown()


@dataclass
class Cloud:
    """The moto account: the idempotency table and the FIFO DLQ."""

    dynamodb: Any
    sqs: Any
    dlq_url: str

    def record(self, order_id: str) -> dict[str, Any] | None:
        item = self.dynamodb.get_item(
            TableName=TABLE, Key={"id": {"S": f"orders#{order_id}"}}, ConsistentRead=True
        ).get("Item")
        return {name: next(iter(value.values())) for name, value in item.items()} if item else None

    def dlq(self) -> list[dict[str, Any]]:
        """Every message in the DLQ, taken out of it (a FIFO group stays blocked while one of
        its messages is in flight)."""
        messages = self.sqs.receive_message(
            QueueUrl=self.dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", [])
        for message in messages:
            self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=message["ReceiptHandle"])
        return messages


@pytest.fixture(scope="session")
def _moto() -> Iterator[Cloud]:
    with mock_aws():
        dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
        dynamodb.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        dlq_url = sqs.create_queue(
            QueueName="orders-dlq.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        os.environ["DLQ_URL"] = dlq_url
        yield Cloud(dynamodb, sqs, dlq_url)


@pytest.fixture
def carrier(_carrier: FakeCarrier) -> FakeCarrier:
    """The fake carrier, with no shipment and no request yet."""
    _carrier.reset()
    return _carrier


@pytest.fixture
def cloud(_moto: Cloud, carrier: FakeCarrier) -> Cloud:
    """moto and the carrier, the DLQ emptied for each test."""
    _moto.dlq()
    return _moto


class LambdaContext:
    """What the handler reads from Lambda's context."""

    function_name = "orders"
    aws_request_id = "test"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _batch(*orders: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": str(uuid.uuid4()),
                "body": json.dumps(order),
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "MessageGroupId": str(order.get("customerId", "none")),
                    "MessageDeduplicationId": str(uuid.uuid4()),
                },
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:orders.fifo",
                "awsRegion": REGION,
            }
            for order in orders
        ]
    }


@pytest.fixture
def batch() -> Callable[..., dict[str, Any]]:
    """Builds one SQS batch from the FIFO queue, grouped by customer as producers send it."""
    return _batch


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()
