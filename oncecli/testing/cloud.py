"""``OnceCloud``, what the ``once_cloud`` fixture yields: a team's own CDK app, synthesized and
deployed on the local cloud, for integration tests of what ``once_env`` cannot see.

Why: ``once_env`` runs a handler against a table and a DLQ the kit makes; it cannot tell
whether the stack that ships wires it right. ``OnceCloud`` deploys the synthesized app on
moto (``oncecli.localcloud``: no AWS, no Docker) and runs each ``OnceConsumer``'s event
source mapping with the template's settings (batch size, partial batch responses,
environment, visibility timeout, maxReceiveCount, the DLQ) and the code actually bundled.
A test sends messages, waits for the queues to drain, then reads records, the DLQ and the
outcome counts the function published, of the same types as ``once_env``'s (a
``once.models.Record``, ``once.testing.Quarantined``)::

    def test_a_repeated_payment_is_charged_once(once_cloud):
        once_cloud.send("Payments", [payment, payment])
        once_cloud.drain()
        record = once_cloud.record("Payments", payment["paymentId"])
        assert record.status == "COMPLETED" and json.loads(record.result) == {"charged": 30}
        assert once_cloud.metrics("Payments")["Duplicate"] == 1
        (dead,) = once_cloud.dlq_messages("Payments")
        assert dead.reason == "PERMANENT_ERROR"

The cloud lives for the session: ``metrics`` and ``dlq_messages`` hold every test's so
far, so a test compares before and after, or looks for its own keys.

Where a stack holds several consumers, each method of a consumer takes ``consumer=`` (its
construct id).
``names(stack)`` gives a consumer's queue and DLQ URLs, table and function names as the
local cloud deployed them (``ConsumerNames``); ``outputs(stack)`` the stack's
CloudFormation outputs, as ``DescribeStacks`` has them (``once_cdk.add_cli_outputs``'s and
the team's own, each ``CfnOutput``).

Every AWS call the functions make reaches the local cloud, never AWS: once's outbox to an
SNS topic, the business code's S3, SecretsManager or STS calls (a service moto does not
emulate answers with an error at once). ``client(service)`` reaches the same from the
test, to set up or read what the business code calls.

What the local cloud does not run (the stack's alarms, queue and topic policies, a
dashboard, an SNS subscription of a protocol other than SQS...) is never dropped in
silence: starting the cloud warns with a ``StrippedResourceWarning`` per stack, naming each
part and why (``once up`` names them too). A team that has read them may filter it
(``filterwarnings = ["ignore::oncecli.testing.cloud.StrippedResourceWarning"]``).

It needs the ``once`` command's local cloud: ``pip install "once[local,testing]"``. It stands
on the local cloud and on ``once status``'s reading of the metrics (``oncecli.operate``), above
the runtime, which never imports it (``oncecli.testing``'s docstring).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from once import constants as c
from once.models import Record, record_id
from once.testing import Quarantined
from oncecli.aws import queue_depth
from oncecli.errors import UsageError
from oncecli.localcloud.cloud import Consumer, LocalCloud
from oncecli.localcloud.emf import Shipper
from oncecli.localcloud.mapping import Mapping
from oncecli.operate import outcome_counts
from oncecli.project import Project


class StrippedResourceWarning(UserWarning):
    """Parts of the team's stacks the local cloud does not run (``LocalCloud.stripped``):
    what they do on AWS, the tests on ``once_cloud`` do not see."""


def _warn_of_stripped(cloud: LocalCloud) -> None:
    """One ``StrippedResourceWarning`` per stack with parts the local cloud does not run."""
    by_stack: dict[str, list[str]] = {}
    for part in cloud.stripped:
        by_stack.setdefault(part.stack, []).append(str(part).removeprefix(f"{part.stack}: "))
    for stack, parts in by_stack.items():
        listed = "\n".join(f"  - {part}" for part in parts)
        warnings.warn(
            StrippedResourceWarning(
                f"the local cloud does not run {len(parts)} part(s) of stack {stack} "
                f"(on AWS they run; `once up` lists them too):\n{listed}"
            ),
            stacklevel=3,
        )


#: How long ``drain`` waits by default: a few redeliveries of a short-timeout function.
DRAIN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ConsumerNames:
    """Where one consumer lives on the local cloud: what a test passes to ``client(service)``
    calls of its own (a queue's attributes, a scan of the table, the function's
    configuration)."""

    stack: str
    #: Its construct id within the stack (what ``consumer=`` names).
    consumer: str
    #: The queue its event source mapping reads.
    queue_url: str
    #: Where once quarantines (the function's ``DLQ_URL``).
    dlq_url: str
    #: Its idempotency table (the function's ``IDEMPOTENCY_TABLE_NAME``).
    table_name: str
    function_name: str


def _names(target: Consumer) -> ConsumerNames:
    """What the local cloud knows of a consumer's names: the queue its mapping reads, the
    function's environment (which once reads too), the function it deployed."""
    env = target.function.environment
    return ConsumerNames(
        stack=target.stack,
        consumer=target.name,
        queue_url=target.mapping.queue_url,
        dlq_url=env[c.ENV_DLQ_URL],
        table_name=env[c.ENV_TABLE_NAME],
        function_name=target.function.name,
    )


class OnceCloud:
    """The app at ``project`` deployed locally, its mappings running; a context manager.

    ::

        with OnceCloud(project) as cloud:              # what the once_cloud fixture yields
            cloud.send("Orders", [order, order])       # consumer=NAME where a stack has two
            cloud.drain()
            cloud.record("Orders", "o-1")              # a once.models.Record, or None
            cloud.dlq_messages("Orders")               # [once.testing.Quarantined]
            cloud.metrics("Orders")                    # {"Processed": 1, "Duplicate": 1}
            cloud.names("Orders").table_name           # and queue_url, dlq_url, function_name
            cloud.outputs("Orders")                    # the stack's CloudFormation outputs
            cloud.client("s3")                         # a boto3 client on the local cloud
    """

    def __init__(
        self,
        project: Path | str,
        *,
        context: dict[str, str] | None = None,
        workers: int = 2,
        app: str | None = None,
    ) -> None:
        self._project = Project.find(Path(project), app=app)
        self._context = dict(context or {})
        self._workers = workers
        self._saved_env: dict[str, str] = {}
        self.cloud: LocalCloud | None = None
        self._mappings: list[Mapping] = []
        self._shipper: Shipper | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> OnceCloud:
        self._saved_env = dict(os.environ)
        self.cloud = LocalCloud(context=self._context, project=self._project).start()
        try:
            _warn_of_stripped(self.cloud)
            self._shipper = Shipper(self.cloud.client("cloudwatch"), self.cloud.client("logs"))
            self._mappings = self.cloud.run_consumers(
                lambda c: min(self._workers, c.mapping.max_concurrency or self._workers),
                self._shipper,
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for mapping in self._mappings:
            mapping.stop()
        self._mappings = []
        if self.cloud is not None:
            self.cloud.stop()
        os.environ.clear()
        os.environ.update(self._saved_env)

    # --- what a test uses ------------------------------------------------------------------
    @property
    def stacks(self) -> list[str]:
        """The deployed stacks that hold a consumer."""
        return sorted({c.stack for c in self._cloud.consumers})

    def consumer(self, stack: str, name: str | None = None) -> Consumer:
        """The consumer of ``stack`` (``name``: its construct id, when the stack has two)."""
        return self._cloud.consumer(stack, name)

    def send(
        self,
        stack: str,
        bodies: Iterable[Any],
        *,
        consumer: str | None = None,
        group_id: str | Callable[[Any], str] | None = None,
        dedup_id: str | Callable[[Any], str] | None = None,
    ) -> list[str]:
        """Send each body (a str, or anything JSON-encodable) to the consumer's queue, in
        order; returns the message ids. A FIFO queue needs ``group_id``: one group, or a
        function of the body. ``dedup_id`` (FIFO): the deduplication id, a str or a function
        of the body; without it SQS deduplicates by content, as ``OnceConsumer``'s FIFO
        queue does, so the same body sent twice within 5 minutes is one message: pass a
        new id per send (``dedup_id=lambda body: str(uuid.uuid4())``) to play a producer
        whose retry SQS does not recognize."""
        target = self.consumer(stack, consumer)
        sqs = self._cloud.client("sqs")
        fifo = target.mapping.queue_url.endswith(".fifo")
        if fifo and group_id is None:
            raise ValueError(f"{stack}'s queue is FIFO: pass group_id (a str or a function)")
        ids = []
        for body in bodies:
            request: dict[str, Any] = {
                "QueueUrl": target.mapping.queue_url,
                "MessageBody": body if isinstance(body, str) else json.dumps(body),
            }
            if group_id is not None:
                request["MessageGroupId"] = group_id(body) if callable(group_id) else group_id
            if dedup_id is not None:
                request["MessageDeduplicationId"] = (
                    dedup_id(body) if callable(dedup_id) else dedup_id
                )
            ids.append(sqs.send_message(**request)["MessageId"])
        return ids

    def client(self, service: str) -> Any:
        """A client of ``service`` on the local cloud, where the functions' own calls go
        (every service on moto, DynamoDB on its engine): to set up or read what the business
        code calls, e.g. a topic's subscriber queue, an S3 object, a secret."""
        return self._cloud.client(service)

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Wait until every consumer's queue is empty (nothing waiting, nothing in flight or
        delayed by a backoff) and no invocation runs: each message is done or in the DLQ.
        Raises ``TimeoutError`` saying what is left."""
        sqs = self._cloud.client("sqs")
        deadline = time.monotonic() + timeout_s
        quiet = 0
        left: dict[str, int] = {}
        while time.monotonic() < deadline:
            left = {}
            for consumer in self._cloud.consumers:
                count = queue_depth(sqs, consumer.mapping.queue_url).total
                if count:
                    left[f"{consumer.stack} ({consumer.name})"] = count
            busy = any(m.stats.in_flight for m in self._mappings)
            quiet = quiet + 1 if not left and not busy else 0
            if quiet >= 2:  # twice in a row: a receive in progress has had time to show
                self._ship()
                return
            time.sleep(0.25)
        raise TimeoutError(f"not drained after {timeout_s:g} s: messages left {left}")

    def record(self, stack: str, key: str | int, *, consumer: str | None = None) -> Record | None:
        """The idempotency record of a business key (None: none), a ``once.models.Record``
        as ``once_env.record`` returns it: as stored, strongly consistent (``is_live`` tells
        whether the protocol still sees it); its ``result`` is the JSON text business code's
        return value was stored as (``json.loads(record.result)``). The key's prefix is the
        function's ``POWERTOOLS_SERVICE_NAME``, as ``make_handler`` reads it."""
        target = self.consumer(stack, consumer)
        service = target.function.environment.get(c.ENV_SERVICE_NAME, c.DEFAULT_SERVICE_NAME)
        item = (
            self._cloud.client("dynamodb")
            .get_item(
                TableName=_names(target).table_name,
                Key={c.ATTR_ID: {"S": record_id(service, str(key))}},
                ConsistentRead=True,
            )
            .get("Item")
        )
        return Record.from_item(item) if item else None

    def dlq_messages(self, stack: str, *, consumer: str | None = None) -> list[Quarantined]:
        """Every message in the consumer's DLQ so far, oldest first, as ``once_env``'s
        ``dlq_messages`` gives them (``once.testing.Quarantined``: its body and message
        attributes, with ``reason``, ``error`` and ``original_message_id``); reading leaves
        them in the DLQ."""
        url = self.names(stack, consumer=consumer).dlq_url
        sqs = self._cloud.client("sqs")
        seen: dict[str, dict[str, Any]] = {}
        handles = []
        for _ in range(100):
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                break
            for m in messages:
                handles.append(m["ReceiptHandle"])
                seen[m["MessageId"]] = m
        for handle in handles:  # visible again: the messages stay for the next look
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
        oldest_first = sorted(
            seen.values(), key=lambda m: int(m.get("Attributes", {}).get("SentTimestamp", 0))
        )
        return [
            Quarantined(
                m["Body"],
                {
                    name: value.get("StringValue", "")
                    for name, value in (m.get("MessageAttributes") or {}).items()
                },
            )
            for m in oldest_first
        ]

    def metrics(self, stack: str, *, consumer: str | None = None) -> dict[str, int]:
        """Each outcome's count (``Processed``, ``Duplicate``, ...) the consumer's function
        published, read back from CloudWatch as ``once status`` reads it."""
        target = self.consumer(stack, consumer)
        self._ship()
        env = target.function.environment
        return outcome_counts(
            self._cloud.client("cloudwatch"),
            env.get(c.ENV_METRICS_NAMESPACE, c.DEFAULT_METRICS_NAMESPACE),
            env.get(c.ENV_SERVICE_NAME, c.DEFAULT_SERVICE_NAME),
        )

    def names(self, stack: str, *, consumer: str | None = None) -> ConsumerNames:
        """The consumer's queue and DLQ URLs, table and function names, as the local cloud
        deployed them (``ConsumerNames``): for a test's own calls through ``client``."""
        return _names(self.consumer(stack, consumer))

    def outputs(self, stack: str) -> dict[str, str]:
        """The stack's CloudFormation outputs (key to value), as ``DescribeStacks`` has
        them: ``add_cli_outputs``'s and each of the stack's own ``CfnOutput`` (a topic's ARN,
        a subscriber queue's URL). Any deployed stack, with a consumer or not."""
        try:
            return dict(self._cloud.outputs_of(stack))
        except KeyError:
            deployed = ", ".join(s.name for s in self._cloud.stacks)
            raise UsageError(f"no stack {stack} on the local cloud; it runs: {deployed}") from None

    # --- internals -------------------------------------------------------------------------
    @property
    def _cloud(self) -> LocalCloud:
        if self.cloud is None:
            raise RuntimeError("OnceCloud is not started: use it as a context manager")
        return self.cloud

    def _ship(self) -> None:
        if self._shipper is not None:
            self._shipper.ship()
