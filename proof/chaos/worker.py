"""One harness worker: a real process that polls the queue like the event source mapping,
runs one consumer under test with the probe and the client faults installed, and applies
AWS's partial batch response rules (``once.batchresponse``), deleting what is
done ten at a time.

A worker may be killed (SIGKILL) or stopped (SIGSTOP) by its own probe at any moment; its
in-flight messages then come back after the visibility timeout, as in Lambda. Like Lambda,
it kills an invocation that outlives the function timeout (the whole process: the next
invocation is a cold start). Its delivery faults: a batch whose visibility timeout is
shorter than the function timeout, and a delete that fails after the consumer succeeded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from once import constants as c
from once import sendrules
from once.batchresponse import decide
from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION, local_env
from oncecli.localcloud.cloud import routing_env
from oncecli.localcloud.invocation import LambdaContext
from oncecli.localcloud.mapping import event_record
from proof import example
from proof.chaos.faults import Dice, Injector
from proof.chaos.probe import History, Probe
from proof.chaos.retrytimes import NOT_DONE
from proof.chaos.traffic import harness_id


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs; plain data, so it crosses a spawn."""

    impl: str  # once, once-nobackoff, once-unfenced, powertools, naive, naive-unordered,
    # once-atomic, once-staged, once-atomic-sns, once-atomic-events, powertools-two-hop
    worker: str
    seed: int
    sqs_endpoint: str
    dynamodb_endpoint: str
    queue_url: str
    dlq_url: str
    tables: dict[str, str]  # idempotency, ledger
    history_path: str
    rates: dict[str, float]
    skew_s: float
    pause_s: float
    timeout_s: float
    batch_size: int
    fifo: bool = False
    visibility_s: int = 5
    #: Records kept this long (None: each consumer's default); the harness sweeps them.
    retention_s: int | None = None
    #: A pause after once's claim lasts until a takeover, this long at most (None: pause_s).
    pause_max_s: float | None = None
    #: The file whose existence is an open DynamoDB outage window.
    outage_flag: str = ""
    #: The file whose existence arms one: the next DynamoDB call opens it (``Injector.outage``).
    outage_armed: str = ""
    #: The prefix of the run's owed-fault files (``faults.owe``): each enabled drawn fault
    #: fires on the run's first event that can fire it, in whichever worker.
    owed: str = ""
    #: The two-hop workload (``twohop.py``): the notifications queue hop 1 sends to and hop
    #: 2 consumes, and its DLQ ("": a one-hop consumer).
    notify_url: str = ""
    notify_dlq_url: str = ""
    #: ``once-atomic-sns``: the SNS topic hop 1's outbox publishes to, which feeds
    #: ``notify_url`` with raw message delivery off; ``once-atomic-events``: the EventBridge
    #: bus it puts events on, a rule of which targets ``notify_url`` ("": hop 1 sends to
    #: ``notify_url``).
    notify_via: str = ""


class Timeout:
    """Lambda's function timeout: a thread that kills the process if an invocation outlives
    it, and records that it did first. The pause fault extends the running invocation's
    deadline (the misconfiguration it stands for: a real run longer than the lease), so the
    stopped process is not killed the moment it resumes."""

    def __init__(self, history: History) -> None:
        self._history = history
        self._deadline: float | None = None
        self._changed = threading.Condition()
        threading.Thread(target=self._watch, name="timeout", daemon=True).start()

    def arm(self, seconds: float) -> None:
        with self._changed:
            self._deadline = time.monotonic() + seconds
            self._changed.notify()

    def extend(self, seconds: float) -> None:
        with self._changed:
            if self._deadline is not None:
                self._deadline += seconds

    def disarm(self) -> None:
        with self._changed:
            self._deadline = None

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._deadline is None:
                    self._changed.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                self._history.add("fault", kind="timeout")
                os.kill(os.getpid(), signal.SIGKILL)


def _skew_clock(skew_s: float, *, powertools: bool) -> None:
    """Shift this process's wall clock by ``skew_s`` seconds: ``time.time``, which once and
    the naive pattern read, and (``powertools``) ``datetime.now`` as Powertools'
    idempotency reads it."""
    real = time.time
    time.time = lambda: real() + skew_s
    if not powertools:
        return
    import datetime
    import types

    from aws_lambda_powertools.utilities.idempotency.persistence import base, dynamodb

    class Skewed(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
            return datetime.datetime.now(tz) + datetime.timedelta(seconds=skew_s)

    shifted = types.ModuleType("datetime")
    shifted.__dict__.update(vars(datetime))
    shifted.datetime = Skewed  # type: ignore[attr-defined]
    for module in (base, dynamodb):
        module.dt = shifted  # type: ignore[attr-defined]


def _business(history: History, ledger_table: str) -> Any:
    """The fenced-downstream credit (``fenced.py``), observed: every run and every ledger
    answer."""
    import boto3

    from proof.chaos.fenced import Ledger

    ledgers: list[Ledger] = []

    def process(body: dict[str, Any], attempt: Any) -> Any:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        history.add("exec", key=str(body.get("paymentId")), hash=digest, message=attempt.message_id)
        if body.get("poison"):
            raise RuntimeError("poison payment: this account cannot be credited")
        if not ledgers:  # one client per process, created at the first payment
            ledgers.append(Ledger(boto3.client("dynamodb"), ledger_table))
        result = ledgers[0].credit(body, attempt)
        history.add("credit", key=body["paymentId"], applied=result["applied"])
        return result

    return process


_SPEC_RETENTION: Any = object()


def _once(
    spec: WorkerSpec,
    process: Any,
    *,
    key: str,
    key_prefix: str,
    dlq_url: str,
    retention_s: int | None = _SPEC_RETENTION,
) -> Any:
    """A once handler as the harness runs it: its lease, backoff and retention shrunk (the
    retention: ``spec.retention_s`` unless given; None is once's default);
    ``once-staged`` builds it with ``effects="staged"``."""
    from once.handler import make_handler
    from proof.chaos.twohop import ONCE_EFFECTS

    return make_handler(
        process,
        key=key,
        table_name=spec.tables["idempotency"],
        dlq_url=dlq_url,
        key_prefix=key_prefix,
        lease_margin_s=1,
        # once-nobackoff: failed and BUSY records wait for the queue's visibility timeout.
        backoff_base_s=None if spec.impl == "once-nobackoff" else c.DEFAULT_BACKOFF_BASE_S,
        # The harness shrinks time (a 5 s visibility timeout, 3 s function timeout): its
        # backoff is capped at the visibility timeout rather than at minutes.
        backoff_max_s=spec.visibility_s,
        retention_s=spec.retention_s if retention_s is _SPEC_RETENTION else retention_s,
        effects=ONCE_EFFECTS.get(spec.impl, "any"),  # type: ignore[arg-type]
    )


def _two_hop_handlers(spec: WorkerSpec, history: History) -> tuple[Any, Any]:
    """Hop 1's and hop 2's handlers of the two-hop workload (``twohop.py``)."""
    from proof.chaos import twohop

    ledger = spec.tables["ledger"]
    if spec.impl in twohop.ONCE_EFFECTS:
        from once import SOURCE_KEY
        from payments import SERVICE_NAME

        hop1 = _once(
            spec,
            twohop.once_hop1(history, ledger, spec.notify_via or spec.notify_url),
            key="paymentId",
            key_prefix=SERVICE_NAME,
            dlq_url=spec.dlq_url,
        )
        # Hop 2 keeps its records for once's default retention, whatever hop 1's: a
        # downstream keeps them at least as long as its upstream (the design's rule), and
        # with a short ``--retention-s`` a payment id used again past hop 1's retention then
        # meets hop 2's record of the first operation, still live.
        hop2 = _once(
            spec,
            twohop.once_hop2(history, ledger),
            key=SOURCE_KEY,
            key_prefix=twohop.NOTIFY_PREFIX,
            dlq_url=spec.notify_dlq_url,
            retention_s=None,
        )
        return hop1, hop2
    import boto3

    from proof.chaos.peers.powertools import DEFAULT_EXPIRES_AFTER_S
    from proof.chaos.peers.powertools import make_handler as powertools_handler

    ddb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    table = spec.tables["idempotency"]
    kept = DEFAULT_EXPIRES_AFTER_S if spec.retention_s is None else spec.retention_s
    hop1 = powertools_handler(
        twohop.powertools_hop1(history, ledger, spec.notify_url, ddb, sqs),
        table_name=table,
        fifo=spec.fifo,
        expires_after_seconds=kept,
    )
    hop2 = powertools_handler(
        twohop.powertools_hop2(history, ledger, ddb),
        table_name=table,
        key_prefix=twohop.NOTIFY_PREFIX,
        expires_after_seconds=kept,
    )
    return hop1, hop2


def _handler(spec: WorkerSpec, process: Any) -> Any:
    table = spec.tables["idempotency"]
    if spec.impl.startswith("once"):
        from payments import SERVICE_NAME  # the example's service name: the record prefix

        handler = _once(
            spec, process, key="paymentId", key_prefix=SERVICE_NAME, dlq_url=spec.dlq_url
        )
        if spec.impl == "once-unfenced":
            import boto3
            from botocore.config import Config

            from proof.chaos.unfenced import UnfencedRecordStore

            # The same retries as the handler's own client: only the condition differs.
            config = Config(retries={"mode": "standard", "max_attempts": 3})
            client = boto3.client("dynamodb", config=config)
            handler.bind(store=UnfencedRecordStore(client, table, retention_s=handler.retention_s))
        return handler
    if spec.impl == "powertools":
        from proof.chaos.peers.powertools import make_handler as powertools_handler

        if spec.retention_s is None:
            return powertools_handler(process, table_name=table, fifo=spec.fifo)
        return powertools_handler(
            process, table_name=table, fifo=spec.fifo, expires_after_seconds=spec.retention_s
        )
    from proof.chaos.peers.naive import make_handler as naive_handler

    # naive-unordered: the control of FIFO runs, a loop that ignores message groups.
    fifo = spec.fifo and spec.impl != "naive-unordered"
    if spec.retention_s is None:
        return naive_handler(process, table_name=table, fifo=fifo)
    return naive_handler(process, table_name=table, fifo=fifo, retention_s=spec.retention_s)


def run(spec: WorkerSpec) -> None:
    """The worker's main loop; returns only when the harness kills it."""
    os.environ.update(
        {
            **local_env(),
            # Every service on the local engines (the SQS endpoint is moto's), never AWS.
            **routing_env(spec.sqs_endpoint, spec.dynamodb_endpoint),
            "LEDGER_TABLE_NAME": spec.tables["ledger"],
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "ERROR",
            "POWERTOOLS_IDEMPOTENCY_DISABLED": "false",
        }
    )
    # The consumers' logs and metrics are not the report: keep the terminal for the harness.
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    _skew_clock(spec.skew_s, powertools=spec.impl == "powertools")
    rng = random.Random(f"{spec.seed}-{spec.worker}")
    history = History(spec.history_path, spec.worker)
    dice = Dice(rng, spec.owed or None)
    faults = Injector(None, on_fault=lambda kind: history.add("fault", kind=kind), dice=dice)
    # The two-hop consumers' commits are transactions: throttled and with answers lost too.
    commits = ("TransactWriteItems",) if spec.notify_url else ()
    faults.throttle(
        spec.rates.get("throttle", 0.0), ("UpdateItem", "PutItem", "DeleteItem", *commits)
    )
    faults.lose_responses(spec.rates.get("lost_response", 0.0), ("UpdateItem", "PutItem", *commits))
    if spec.notify_url:
        # Where hop 1 sends: hop 2's queue, or the SNS topic or EventBridge bus that feeds it.
        destination = spec.notify_via or spec.notify_url
        faults.fail_sends(spec.rates.get("send_failed", 0.0), destination)
        faults.duplicate_sends(spec.rates.get("send_duplicated", 0.0), destination)
        if sendrules.is_event_bus(destination):
            faults.fail_event_entries(spec.rates.get("event_entry_failed", 0.0), destination)
        faults.throttle_clears(spec.rates.get("throttle_clear", 0.0))
    if spec.outage_flag:
        faults.outage(spec.outage_flag, spec.outage_armed)
    timeout = Timeout(history)
    probe = Probe(
        history,
        spec.tables["idempotency"],
        spec.rates,
        spec.pause_s,
        dice,
        spec.skew_s,
        pause_max_s=spec.pause_max_s,
    )
    # A zombie resumes with a full function timeout still to run: it outlives its lease by
    # the pause, however slowly a busy machine lets it finish.
    probe.on_pause = lambda paused_s: timeout.extend(paused_s + spec.timeout_s)
    probe.install()
    import boto3

    example.require()  # the checkout's functions/ (inherited from the harness, or found here)
    sqs: Any = boto3.client("sqs")
    if spec.notify_url:
        from proof.chaos.twohop import notification_id

        first, second = _two_hop_handlers(spec, history)
        hops = [
            Hop(spec.queue_url, first, harness_id, ""),
            Hop(spec.notify_url, second, notification_id, "2"),
        ]
    else:
        hops = [
            Hop(
                spec.queue_url,
                _handler(spec, _business(history, spec.tables["ledger"])),
                harness_id,
                "",
            )
        ]
    busy = False
    while True:
        # One queue waits for messages while the other has none; two poll each other's turn.
        was_busy, busy = busy, False
        for hop in hops:
            wait = 1 if len(hops) == 1 or not (was_busy or busy) else 0
            try:
                messages = sqs.receive_message(
                    QueueUrl=hop.queue_url,
                    MaxNumberOfMessages=spec.batch_size,
                    WaitTimeSeconds=wait,
                    MessageAttributeNames=["All"],
                    AttributeNames=["All"],
                ).get("Messages", [])
            except (BotoCoreError, ClientError):
                # moto's server answers 500 now and then under load: poll again, as Lambda does.
                time.sleep(0.2)
                continue
            if not messages:
                continue
            busy = True
            history.add(
                "deliver" + hop.events, count=len(messages), hids=[hop.ids(m) for m in messages]
            )
            if dice.roll("short_visibility", spec.rates.get("short_visibility", 0.0)):
                _shorten_visibility(hop, sqs, messages, history)
            _invoke(spec, hop, sqs, messages, history, dice, timeout, probe)


@dataclass(frozen=True)
class Hop:
    """One queue a worker consumes and the handler it runs: hop 1 (the payments, whose
    events are ``deliver``, ``ack``, ``retry``) or hop 2 of the two-hop workload (the
    notifications: ``deliver2``, ``ack2``, ``retry2``, ids the paymentIds announced)."""

    queue_url: str
    handler: Any
    ids: Callable[[dict[str, Any]], str | None]
    events: str


#: The visibility timeout of a misconfigured delivery: shorter than the function timeout.
SHORT_VISIBILITY_S = 1


def _shorten_visibility(
    hop: Hop, sqs: Any, messages: list[dict[str, Any]], history: History
) -> None:
    """This delivery's messages come back while the invocation still runs them, as on a
    queue whose visibility timeout is shorter than the function timeout."""
    history.add("fault", kind="short_visibility")
    # If the change does not take, the delivery keeps the queue's own timeout.
    with contextlib.suppress(BotoCoreError, ClientError):
        sqs.change_message_visibility_batch(
            QueueUrl=hop.queue_url,
            Entries=[
                {
                    "Id": str(i),
                    "ReceiptHandle": m["ReceiptHandle"],
                    "VisibilityTimeout": SHORT_VISIBILITY_S,
                }
                for i, m in enumerate(messages)
            ],
        )


#: once's outcomes the two-hop figures count: the outbox owed (not acknowledged), and owed
#: messages sent by a later delivery without running business code.
_OUTBOX_OUTCOMES = ("owed", "owed_sent")


def _invoke(
    spec: WorkerSpec,
    hop: Hop,
    sqs: Any,
    messages: list[dict[str, Any]],
    history: History,
    dice: Dice,
    timeout: Timeout,
    probe: Probe | None = None,
) -> None:
    queue_arn = f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:{hop.queue_url.rsplit('/', 1)[-1]}"
    event = {"Records": [event_record(m, queue_arn, LOCAL_REGION) for m in messages]}
    context = LambdaContext.starting_now(spec.impl, spec.timeout_s, memory_mb=256)
    by_id = {m["MessageId"]: m for m in messages}
    timeout.arm(spec.timeout_s)
    try:
        if spec.impl.startswith("once"):
            # once says how each record ended; a BUSY or FAILED one (Outcome "busy",
            # "failed") starts a retry time (``retrytimes``), its ack ends it.
            handled = hop.handler.handle(event, context)
            response, error = handled.response, None
            outcomes: dict[str, int] = {}
            for end in handled.records:
                outcomes[str(end.outcome)] = outcomes.get(str(end.outcome), 0) + 1
            history.add("outcomes" + hop.events, counts=outcomes)
            for end in handled.records:
                if end.outcome in NOT_DONE:
                    history.add(
                        "retry" + hop.events,
                        hid=hop.ids(by_id[end.message_id]),
                        kind=str(end.outcome),
                    )
                elif str(end.outcome) in _OUTBOX_OUTCOMES:
                    history.add("outbox", kind=str(end.outcome), key=end.key)
        else:
            response, error = hop.handler(event, context), None
        response = json.loads(json.dumps(response))
    except Exception as raised:
        response, error = None, type(raised).__name__
    timeout.disarm()
    if probe is not None:
        calls = probe.take_calls()
        if calls:
            history.add("calls", counts=calls)
    decision = decide([m["MessageId"] for m in messages], response, error=error)
    done = []
    for message_id in decision.delete:
        if dice.roll("delete_failed", spec.rates.get("delete_failed", 0.0)):
            # The mapping's delete failed after a success: the message comes back, done.
            history.add("fault", kind="delete_failed")
            continue
        done.append(by_id[message_id])
    _delete(hop, sqs, done, history)


def _delete(hop: Hop, sqs: Any, done: list[dict[str, Any]], history: History) -> None:
    """Delete what the batch response says is done, ten at a time, as the event source
    mapping does; a message whose delete fails comes back and is handled again."""
    for start in range(0, len(done), 10):
        chunk = {str(i): m for i, m in enumerate(done[start : start + 10])}
        # Before the call: a worker stopped at the end of the run (the harness kills them
        # once the queues are empty) may have its delete land and never record its ``ack``.
        history.add("delete_sent" + hop.events, hids=[hop.ids(m) for m in chunk.values()])
        try:
            answer = sqs.delete_message_batch(
                QueueUrl=hop.queue_url,
                Entries=[{"Id": i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in chunk.items()],
            )
        except (BotoCoreError, ClientError) as error:
            history.add("delete_error", error=type(error).__name__)
            continue
        for entry in answer.get("Successful", []):
            history.add("ack" + hop.events, hid=hop.ids(chunk[entry["Id"]]))
        for entry in answer.get("Failed", []):
            # The receipt is stale: the message was received again meanwhile.
            history.add("stale_receipt", code=entry.get("Code"))
