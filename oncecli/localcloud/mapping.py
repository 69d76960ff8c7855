"""The event source mapping emulator: polls the source queue and invokes worker processes.

Why our own: moto's mapping invokes Lambda through Docker (absent here) and bumps receive
counts on every SendMessage, so the local cloud strips it from the template and this module
plays its part, with the settings the template gave it: batch size, batching window,
maximum concurrency, ReportBatchItemFailures, FilterCriteria; the queue keeps its own
visibility timeout and redrive policy (maxReceiveCount), which SQS, not the mapping, applies
on receive.

Per invocation: receive up to the batch size (waiting at most the batching window), delete
each message no filter keeps without invoking for it (``once.event_filters``: Lambda's event
filtering, the rule ``once_env`` applies too), invoke
one warm worker with the SQS event and a deadline of the function timeout, delete what the
response says succeeded (``once.batchresponse``: Lambda's rule, the one the test kit applies
too), and leave the rest to reappear after the
visibility timeout. A worker that times out or crashes is killed and replaced, and its whole
batch fails, as on Lambda.

The mapping never sets a message's visibility itself, so a ChangeMessageVisibility made by
the function (once's retry backoff) stands, as on AWS. On a FIFO queue, SQS's own rule
keeps the order: a message group with a message in flight is not delivered (moto's server
is patched to apply it as SQS does, see ``motoserver``), and a batch is one receive, with
no batching window, so a failed record holds back its group until it comes back.
"""

from __future__ import annotations

import base64
import contextlib
import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from once import event_filters
from once.batchresponse import decide, parse
from oncecli.errors import EngineFailed
from oncecli.localcloud.invocation import Invocation, serve

#: Seconds a worker may take to import the handler (Lambda's init phase allows 10).
INIT_TIMEOUT_S = 60.0
#: Long poll of one receive when nothing is buffered (short, so that stop() is prompt).
POLL_WAIT_S = 1


@dataclass(frozen=True)
class FunctionConfig:
    """The deployed function, as the local CloudFormation resolved it."""

    name: str
    arn: str
    handler: str
    timeout_s: int
    memory_mb: int
    environment: dict[str, str]
    #: The function's asset on disk, which its handler is imported from (None: from the
    #: running environment, as for a template without asset metadata).
    code_dir: str | None = None
    #: Its CloudWatch Logs group (``LoggingConfig.LogGroup``): where its lines are shipped.
    log_group: str = ""


@dataclass(frozen=True)
class MappingConfig:
    """The event source mapping and its queue, as the template declares them."""

    queue_url: str
    queue_arn: str
    region: str
    batch_size: int = 10
    batching_window_s: float = 0.0
    max_concurrency: int | None = None
    report_batch_item_failures: bool = False
    visibility_timeout_s: int = 30
    max_receive_count: int | None = None
    #: The mapping's filter patterns (``FilterCriteria``, read with
    #: ``once.event_filters.from_criteria``); none: every message is delivered.
    filters: tuple[dict[str, Any], ...] = ()


@dataclass
class Stats:
    """What the mapping did, for the progress bar and the report."""

    invocations: int = 0
    records: int = 0
    deleted: int = 0
    retried: int = 0
    full_failures: int = 0
    timeouts: int = 0
    crashes: int = 0
    in_flight: int = 0
    busy_s: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)
    deleted_ids: set[str] = field(default_factory=set)
    #: Messages no filter kept, deleted without an invocation.
    filtered: int = 0
    filtered_ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def filters_of(properties: dict[str, Any], where: str) -> tuple[dict[str, Any], ...]:
    """The filter patterns of a mapping, from its template properties (``FilterCriteria``,
    each ``Pattern`` a JSON text); none without. One Lambda would refuse (a template changed
    past the construct's checks) fails the deploy here, as it would on AWS."""
    try:
        return event_filters.from_criteria(properties.get("FilterCriteria"))
    except event_filters.FiltersRefused as error:
        raise EngineFailed(f"the event source mapping {where}: {error}") from None


def event_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One SQS message as Lambda puts it in the event (camelCase, base64 binary values)."""
    attributes: dict[str, Any] = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        binary = value.get("BinaryValue")
        attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": base64.b64encode(binary).decode() if binary is not None else None,
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value.get("DataType", "String"),
        }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def response_of(kind: str, payload: str) -> tuple[Any, str | None]:
    """A worker's answer (``invocation.answer_of``) as the event source mapping reads it:
    (the response parsed from its payload, ``MALFORMED`` when it is no JSON; or None and the
    function's error)."""
    if kind == "error":
        return None, payload
    return parse(payload), None


class Worker:
    """The parent's handle on one worker process; replaces it after a timeout or crash."""

    def __init__(self, function: FunctionConfig, env: dict[str, str], log_path: str | None):
        self._function = function
        self._env = env
        self._log = log_path
        self._mp = multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._conn: Connection | None = None

    def launch(self) -> None:
        """Start the process (without waiting for its init)."""
        parent, child = self._mp.Pipe()
        self._proc = self._mp.Process(
            target=serve,
            daemon=True,
            name="once-worker",
            args=(child, self._function.handler, self._env, self._log, self._function.code_dir),
        )
        self._proc.start()
        child.close()
        self._conn = parent

    def wait_ready(self) -> None:
        """Wait for the handler import to finish; a failed init is a broken deployment."""
        assert self._conn is not None
        if not self._conn.poll(INIT_TIMEOUT_S):
            self.kill()
            raise EngineFailed(f"a worker did not import {self._function.handler} in time")
        try:
            self._conn.recv()
        except EOFError:
            hint = f"; see {self._log}" if self._log else ""
            raise EngineFailed(
                f"a worker failed to import {self._function.handler}{hint}"
            ) from None
        return None

    def kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None

    def close(self) -> None:
        """Ask the process to exit, then make sure it did."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send(None)
        if self._proc is not None:
            self._proc.join(2)
        self.kill()

    def _restart(self) -> None:
        self.kill()
        self.launch()
        self.wait_ready()

    def invoke(self, event: dict[str, Any]) -> tuple[Any, str | None, str | None]:
        """Run one invocation. Returns (parsed response, error, what went wrong with the
        process: "timeout", "crash" or None)."""
        assert self._conn is not None
        timeout_s = self._function.timeout_s
        deadline_ms = int(time.time() * 1000) + timeout_s * 1000
        invocation = Invocation(
            event, deadline_ms, self._function.name, self._function.arn, self._function.memory_mb
        )
        try:
            self._conn.send(invocation)
        except (OSError, EOFError):  # the process died between invocations
            self._restart()
            return None, "Runtime.ExitError: the worker process died", "crash"
        if not self._conn.poll(timeout_s + 0.05):
            self._restart()
            return None, f"Task timed out after {timeout_s} seconds", "timeout"
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            self._restart()
            return None, "Runtime.ExitError: the worker process died", "crash"
        response, error = response_of(kind, payload)
        return response, error, None


class Mapping:
    """Pollers, one per concurrent invocation, each with its own warm worker."""

    def __init__(
        self,
        config: MappingConfig,
        function: FunctionConfig,
        *,
        sqs_factory: Callable[[], Any],
        workers: int,
        env: dict[str, str],
        log_path: str | None = None,
    ) -> None:
        self.config = config
        self.function = function
        self.concurrency = max(1, min(workers, config.max_concurrency or workers))
        self.stats = Stats()
        self._sqs_factory = sqs_factory
        self._env = {**function.environment, **env}
        self._log = log_path
        self._stop = threading.Event()
        self._workers: list[Worker] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> Mapping:
        """Start the workers (in parallel), wait for their init, then start polling."""
        return self.launch().ready()

    def launch(self) -> Mapping:
        """Start the workers' processes, without waiting for their init: the workers of
        several mappings import their handlers at once (``ready``)."""
        self._workers = [
            Worker(self.function, self._env, self._log) for _ in range(self.concurrency)
        ]
        for worker in self._workers:
            worker.launch()
        return self

    def ready(self) -> Mapping:
        """Wait for the launched workers' init, then start polling."""
        for worker in self._workers:
            worker.wait_ready()
        for n, worker in enumerate(self._workers):
            thread = threading.Thread(
                target=self._poll, args=(worker,), daemon=True, name=f"poller-{n}"
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(self.function.timeout_s + POLL_WAIT_S + 5)
        for worker in self._workers:
            worker.close()
        self._threads, self._workers = [], []

    def __enter__(self) -> Mapping:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _receive(self, sqs: Any) -> list[dict[str, Any]]:
        """Fill one batch: up to the batch size, within the batching window, with the
        messages a filter keeps (the others deleted as they arrive)."""
        batch: list[dict[str, Any]] = []
        window_ends = None
        while len(batch) < self.config.batch_size and not self._stop.is_set():
            wait = POLL_WAIT_S
            if window_ends is not None:
                left = window_ends - time.monotonic()
                if left < 1:
                    # SQS long polls in whole seconds: wait out the window's last fraction,
                    # then take what is there, rather than short-poll in a loop until it ends.
                    self._stop.wait(max(0.0, left))
                    wait = 0
                else:
                    wait = int(min(POLL_WAIT_S, left))
            response = sqs.receive_message(
                QueueUrl=self.config.queue_url,
                MaxNumberOfMessages=min(10, self.config.batch_size - len(batch)),
                WaitTimeSeconds=wait,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages = response.get("Messages", [])
            if self.config.filters:
                messages = self._filtered(sqs, messages)
            if messages and not batch:
                window_ends = time.monotonic() + self.config.batching_window_s
            batch.extend(messages)
            if batch and (window_ends is None or time.monotonic() >= window_ends):
                break
        return batch

    def _poll(self, worker: Worker) -> None:
        sqs = self._sqs_factory()
        while not self._stop.is_set():
            try:
                batch = self._receive(sqs)
            except Exception as error:  # the engine is going away, or a hiccup: try again
                self._count(reason=f"receive failed: {type(error).__name__}")
                time.sleep(0.5)
                continue
            if not batch:
                continue
            with self.stats.lock:
                self.stats.in_flight += 1
            try:
                self._invoke(sqs, worker, batch)
            except Exception as error:  # never let a poller die: the batch comes back
                self._count(reason=f"invoke failed: {type(error).__name__}: {error}"[:200])
            finally:
                with self.stats.lock:
                    self.stats.in_flight -= 1

    def _filtered(self, sqs: Any, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The received messages a filter keeps. The others are deleted without an
        invocation, as Lambda's event filtering removes them from the queue; they never join
        a batch, so a batch of nothing but them invokes nothing."""
        config = self.config
        kept: list[dict[str, Any]] = []
        dropped: list[dict[str, Any]] = []
        for message in batch:
            record = event_record(message, config.queue_arn, config.region)
            (kept if event_filters.keeps(config.filters, record) else dropped).append(message)
        deleted = self._delete(sqs, {m["MessageId"]: m["ReceiptHandle"] for m in dropped})
        with self.stats.lock:
            self.stats.filtered += len(deleted)
            self.stats.filtered_ids.update(deleted)
        return kept

    def _delete(self, sqs: Any, receipts: dict[str, str]) -> list[str]:
        """Delete these messages (id: receipt handle), ten a request; the ids deleted."""
        ids = list(receipts)
        deleted: list[str] = []
        for start in range(0, len(ids), 10):
            chunk = ids[start : start + 10]
            result = sqs.delete_message_batch(
                QueueUrl=self.config.queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": receipts[mid]} for n, mid in enumerate(chunk)
                ],
            )
            deleted.extend(chunk[int(ok["Id"])] for ok in result.get("Successful", []))
        return deleted

    def _invoke(self, sqs: Any, worker: Worker, batch: list[dict[str, Any]]) -> None:
        event = {
            "Records": [event_record(m, self.config.queue_arn, self.config.region) for m in batch]
        }
        began = time.monotonic()
        response, error, fault = worker.invoke(event)
        took = time.monotonic() - began
        decision = decide(
            [m["MessageId"] for m in batch],
            response,
            error=error,
            report_batch_item_failures=self.config.report_batch_item_failures,
        )
        receipts = {m["MessageId"]: m["ReceiptHandle"] for m in batch}
        deleted = self._delete(sqs, {mid: receipts[mid] for mid in decision.delete})
        with self.stats.lock:
            self.stats.invocations += 1
            self.stats.busy_s += took
            self.stats.records += len(batch)
            self.stats.deleted += len(deleted)
            self.stats.deleted_ids.update(deleted)
            self.stats.retried += len(decision.retry)
            self.stats.full_failures += int(decision.full_failure)
            self.stats.timeouts += int(fault == "timeout")
            self.stats.crashes += int(fault == "crash")
            if decision.retry:
                self.stats.reasons[decision.reason] += 1

    def snapshot(self) -> dict[str, Any]:
        """The counters, for the report."""
        with self.stats.lock:
            s = self.stats
            return {
                "invocations": s.invocations,
                "records": s.records,
                "deleted": s.deleted,
                "retried": s.retried,
                "full_failures": s.full_failures,
                "timeouts": s.timeouts,
                "crashes": s.crashes,
                "filtered": s.filtered,
                "concurrency": self.concurrency,
                "reasons": dict(s.reasons),
                "mean_invocation_ms": round(1000 * s.busy_s / max(1, s.invocations)),
            }

    def _count(self, reason: str) -> None:
        with self.stats.lock:
            self.stats.reasons[reason] += 1
