"""The mapping emulator keeps what SQS and Lambda do with a batch: a visibility change made
by the function stands, and a FIFO queue's order holds per message group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncecli.aws import LOCAL_REGION, local_client, local_env
from oncecli.localcloud.engines import MotoServer
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    with MotoServer() as server:
        yield server.endpoint


def _mapping(endpoint: str, queue: str, handler: str, history: Path) -> Mapping:
    sqs = local_client("sqs", endpoint)
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    function = FunctionConfig(
        name="fn",
        arn="arn:aws:lambda:us-east-1:123456789012:function:fn",
        handler=f"tests.localcloud.fake_handlers.{handler}",
        timeout_s=5,
        memory_mb=128,
        environment={"HISTORY": str(history), "QUEUE_URL": url},
    )
    config = MappingConfig(
        queue_url=url,
        queue_arn=attributes["QueueArn"],
        region=LOCAL_REGION,
        report_batch_item_failures=True,
        visibility_timeout_s=int(attributes["VisibilityTimeout"]),
    )
    return Mapping(
        config,
        function,
        sqs_factory=lambda: local_client("sqs", endpoint),
        workers=2,
        env={**local_env(), "AWS_ENDPOINT_URL_SQS": endpoint},
    )


def _wait_for(history: Path, lines: int, timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = history.read_text().splitlines() if history.exists() else []
        if len(seen) >= lines:
            return seen
        time.sleep(0.1)
    return history.read_text().splitlines() if history.exists() else []


def test_a_visibility_change_made_by_the_function_stands(moto, tmp_path):
    sqs = local_client("sqs", moto)
    url = sqs.create_queue(QueueName="backoff", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    history = tmp_path / "history"
    with _mapping(moto, "backoff", "back_off_one_second", history):
        # The queue would hide the failed message for 60 s; the function asked for 1 s.
        assert _wait_for(history, 2, timeout_s=15) == ["m 1", "m 2"]


def test_fifo_a_failed_record_blocks_its_group_until_it_comes_back(moto, tmp_path):
    sqs = local_client("sqs", moto)
    url = sqs.create_queue(
        QueueName="orders.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "true",
            "VisibilityTimeout": "2",
        },
    )["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": body, "MessageBody": body, "MessageGroupId": body[0]}
            for body in ("A1", "A2", "A3", "B1", "B2")
        ],
    )
    history = tmp_path / "history"
    with _mapping(moto, "orders.fifo", "fifo_fail_a2_once", history):
        done = _wait_for(history, 5, timeout_s=20)
    assert sorted(done) == ["A1", "A2", "A3", "B1", "B2"]
    assert [b for b in done if b.startswith("A")] == ["A1", "A2", "A3"]
    assert [b for b in done if b.startswith("B")] == ["B1", "B2"]
    # Group B went on while A2 waited out its visibility timeout.
    assert done.index("B2") < done.index("A2")


class _QuietQueue:
    """One message, then nothing: each empty receive long-polls its WaitTimeSeconds."""

    def __init__(self) -> None:
        self.calls = 0

    def receive_message(self, **request):
        self.calls += 1
        if self.calls == 1:
            return {"Messages": [{"MessageId": "m-1", "Body": "{}"}]}
        time.sleep(request["WaitTimeSeconds"])
        return {}


def test_the_last_second_of_a_batching_window_is_waited_out_not_short_polled():
    """SQS long polls in whole seconds: the window's last fraction must not become a loop of
    zero-second receives."""
    config = MappingConfig(
        queue_url="q", queue_arn="arn", region=LOCAL_REGION, batching_window_s=1.5
    )
    function = FunctionConfig("fn", "arn:fn", "h.h", timeout_s=5, memory_mb=128, environment={})
    mapping = Mapping(config, function, sqs_factory=_QuietQueue, workers=1, env={})
    queue = _QuietQueue()
    started = time.monotonic()

    batch = mapping._receive(queue)

    assert [m["MessageId"] for m in batch] == ["m-1"]
    assert queue.calls <= 4
    assert 1.4 <= time.monotonic() - started <= 2.0
