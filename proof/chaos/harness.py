"""The fault-injection harness: the same seeded workload and faults against each consumer.

For each consumer under test it makes fresh queues (on moto's server; FIFO queues with the
account as message group when asked) and tables (on DynamoDB Local by default), starts
worker processes (``worker.py``), produces the workload in two waves with a DLQ redrive
between them, opens DynamoDB outage windows, respawns killed workers, sweeps expired
records as DynamoDB's TTL would, waits for the queue to drain, and checks the invariants
(``invariants.py``) on the recorded history and the final state.

Every enabled fault is injected at least once in every run, by construction rather than by
luck or by the clock: the faults drawn at a rate fire on the run's first chance too
(``faults.Dice``), an outage window opens on a DynamoDB call (``OutageWindows``), and with
a short retention the first wave lasts until a sweep has deleted a record (``_SweepOwed``).

A worker that dies of anything but a kill (its probe's, or its function timeout's) is a
failure of the harness, not of the consumer: the run stops with ``HarnessFailed``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from once import constants as c
from oncecli import redrive
from oncecli.aws import create_queue_with_dlq, create_table, local_client, queue_depth
from proof import example
from proof.chaos import invariants, retrytimes, twohop
from proof.chaos.faults import owe
from proof.chaos.probe import History
from proof.chaos.traffic import HID, REUSE_WAVE, Send, Workload, add_reuse, build, harness_id
from proof.chaos.worker import WorkerSpec, run
from proof.errors import HarnessFailed
from proof.ledger import read_ledger

IMPLEMENTATIONS = ("once", "once-nobackoff", "powertools", "naive")
#: A Lambda function timeout short enough for leases to run out within a run.
TIMEOUT_S = 3.0
VISIBILITY_S = 5
MAX_RECEIVE = 5
PAUSE_S = 6.0  # longer than once's lease (timeout + 1 s margin) and Powertools' (timeout)
#: A pause after once's claim lasts until the record is claimed anew, this long at most.
PAUSE_MAX_S = 12.0
MAX_SKEW_S = 0.4  # within once's 1 s lease margin
BACKLOG = 300  # messages kept in the queue while the producer feeds it
TTL_ATTRIBUTES = {
    "once": "expires_at",
    "once-nobackoff": "expires_at",
    "once-unfenced": "expires_at",
    "powertools": "expiration",
    "naive": "expires_at",
    "naive-unordered": "expires_at",
    "once-atomic": "expires_at",
    "once-staged": "expires_at",
    "once-atomic-sns": "expires_at",
    "once-atomic-events": "expires_at",
    "powertools-two-hop": "expiration",
}
#: How long a DynamoDB outage window stays open.
OUTAGE_S = 3.0
#: How often the harness sweeps expired records, as DynamoDB's TTL would.
SWEEP_S = 2.0
DEFAULT_RATES = {
    "kill_after_claim": 0.004,
    "kill_after_effect": 0.004,
    "kill_before_finalize": 0.004,
    "pause": 0.003,
    "throttle": 0.03,
    "lost_response": 0.03,
    "outage": 0.005,  # windows armed per second of run, each opened by a DynamoDB call
    "delete_failed": 0.005,
    "short_visibility": 0.005,
    # The outbox's (two-hop consumers only): a kill between its sends and its clear, a send
    # refused, a send applied with its answer lost (the message then sent twice), a clear
    # throttled past the SDK's retries; and, to a bus, an entry of PutEvents failed.
    "kill_before_clear": 0.004,
    "send_failed": 0.005,
    "send_duplicated": 0.01,
    "throttle_clear": 0.004,
    "event_entry_failed": 0.005,
}


@dataclass
class Run:
    """One consumer's run: what was injected and what the invariants found."""

    impl: str
    deliveries: int = 0
    executions: int = 0
    unique_executed: int = 0
    lost: int = 0
    violations: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: once only: time from a BUSY or failed delivery to the message done (``retrytimes``).
    to_completion: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The two-hop workload's hop 2 (``twohop.py``): its deliveries, business executions,
    #: notifications acknowledged, left in its DLQ, and redriven mid-run (empty: one hop).
    notifications: dict[str, int] = field(default_factory=dict)
    #: once only: how each delivery ended (``Outcome``), per hop ("processed", "duplicate",
    #: ...; hop 2's prefixed "notify "), from the invocations that returned.
    outcomes: dict[str, int] = field(default_factory=dict)
    #: The DynamoDB API calls the workers made, by operation, from the invocations that
    #: returned (a killed one's are not counted).
    dynamodb_calls: dict[str, int] = field(default_factory=dict)
    #: Where the run's history and final state were kept ("": deleted with the run).
    history: str = ""

    def figures(self) -> str:
        """The run's figures, for a person reading why a check of it failed: deliveries,
        every violation count, lost, owed, the faults fired and the workload sent, the
        outcomes, and the run's time, with where its history was kept."""
        broken = {name: n for name, n in self.violations.items() if n}
        fired = {
            name: n
            for name, n in sorted(self.faults.items())
            if n and not name.startswith("workload_")
        }
        sent = {
            name.removeprefix("workload_"): n
            for name, n in sorted(self.faults.items())
            if name.startswith("workload_")
        }
        lines = [
            f"{self.impl}: {self.deliveries} deliveries, {self.executions} business executions "
            f"({self.executions - self.unique_executed} beyond one per key), "
            f"{self.seconds:.1f} s",
            f"  violations: {broken or 'none'} (checked: {', '.join(self.violations)})",
            f"  lost {self.lost}, owed at the end {self.violations.get('owed_at_end', '-')}",
            f"  faults fired: {fired}",
            f"  workload sent: {sent} ({sum(sent.values())} messages)",
        ]
        if self.notifications:
            lines.append(f"  hop 2: {self.notifications}")
        if self.outcomes:
            lines.append(f"  outcomes: {dict(sorted(self.outcomes.items()))}")
        lines.append(f"  history: {self.history or 'not kept (pass history_dir to keep it)'}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "deliveries": self.deliveries,
            "executions": self.executions,
            "extra_executions": self.executions - self.unique_executed,
            "lost": self.lost,
            "violations": self.violations,
            "faults": self.faults,
            "seconds": round(self.seconds, 1),
            "to_completion": self.to_completion,
            **({"notifications": self.notifications} if self.notifications else {}),
            **({"outcomes": self.outcomes} if self.outcomes else {}),
            **({"dynamodb_calls": self.dynamodb_calls} if self.dynamodb_calls else {}),
        }


@dataclass(frozen=True)
class Endpoints:
    sqs: str
    dynamodb: str


def _clients(endpoints: Endpoints) -> tuple[Any, Any]:
    """Clients of the local engines."""
    return local_client("sqs", endpoints.sqs), local_client("dynamodb", endpoints.dynamodb)


def _make_resources(
    impl: str, tag: str, endpoints: Endpoints, *, fifo: bool
) -> tuple[str, str, dict, tuple[str, str, str]]:
    """The queue and its DLQ, the tables, and for a two-hop consumer the notifications
    queue and its DLQ (standard queues, whatever the source's kind) and, for one whose hop 1
    publishes to SNS or EventBridge, the topic or the bus that feeds that queue (else ``""``;
    a one-hop consumer: ``("", "", "")``)."""
    sqs, ddb = _clients(endpoints)
    queue, dlq = create_queue_with_dlq(
        sqs, tag, visibility_s=VISIBILITY_S, max_receive=MAX_RECEIVE, fifo=fifo
    )
    notify = ("", "", "")
    if impl in twohop.IMPLEMENTATIONS:
        notify_url, notify_dlq = create_queue_with_dlq(
            sqs, f"{tag}-notify", visibility_s=VISIBILITY_S, max_receive=MAX_RECEIVE
        )
        via = ""
        if impl in twohop.SNS_IMPLEMENTATIONS:
            via = _subscribe_raw_off(local_client("sns", endpoints.sqs), sqs, tag, notify_url)
        elif impl in twohop.EVENTS_IMPLEMENTATIONS:
            via = _route_events(local_client("events", endpoints.sqs), sqs, tag, notify_url)
        notify = (notify_url, notify_dlq, via)
    tables = {"idempotency": f"{tag}-idempotency", "ledger": f"{tag}-ledger"}
    for name in tables.values():
        create_table(ddb, name)
    # No TTL on the table: the harness is its one sweeper (``_ttl_sweep``, conditional, as
    # DynamoDB's is), counted in the run's figures. DynamoDB Local runs a TTL of its own
    # (expired items vanish within seconds) whose deletes the harness could neither count
    # nor hold to that condition.
    return queue, dlq, tables, notify


def _subscribe_raw_off(sns: Any, sqs: Any, tag: str, queue_url: str) -> str:
    """A standard topic on moto's SNS, and ``queue_url`` subscribed to it with raw message
    delivery off (SNS's default, and CDK's ``SqsSubscription``'s): each publish reaches the
    queue as SNS's notification document (``Type``, ``MessageId``, ``TopicArn``, ``Message``,
    ``Timestamp``, ``SignatureVersion``, ``Signature``, ``SigningCertURL``, ``UnsubscribeURL``,
    ``MessageAttributes`` as ``{"Type", "Value"}``), a message id, timestamp and signature of
    its own on every publish, and no SQS message attributes
    (https://docs.aws.amazon.com/sns/latest/dg/sns-sqs-as-subscriber.html). Returns the
    topic's ARN; refuses to go on if the subscription is not what it asked for."""
    topic = sns.create_topic(Name=f"{tag}-notify")["TopicArn"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    subscription = sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"RawMessageDelivery": "false"},
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    raw = sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"].get(
        "RawMessageDelivery", "false"
    )
    if str(raw).lower() != "false":
        raise HarnessFailed(f"the SNS subscription of {queue_url} delivers raw ({raw})")
    return str(topic)


def _route_events(events: Any, sqs: Any, tag: str, queue_url: str) -> str:
    """A custom bus on moto's EventBridge, and a rule on it that matches the notifications
    (their ``source`` and ``detail-type``: ``twohop.EVENT_SOURCE``, ``twohop.CREDITED``) with
    ``queue_url`` as its SQS target, given no ``Input``, ``InputPath`` or
    ``InputTransformer``: each event matched reaches the queue whole (``version``, ``id``,
    ``detail-type``, ``source``, ``account``, ``time``, ``region``, ``resources``, ``detail``;
    https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_Target.html,
    https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html), an ``id``
    and a ``time`` of its own on every ``PutEvents``, and the SQS message has no attributes
    (``SqsParameters`` holds a ``MessageGroupId`` only). moto delivers each ``PutEvents`` entry
    to the targets of the rules it matches (``Rule.send_to_targets``). Returns the bus's ARN;
    refuses to go on if the target is not what it asked for."""
    name = f"{tag}-notify"
    bus = events.create_event_bus(Name=name)["EventBusArn"]
    pattern = {"source": [twohop.EVENT_SOURCE], "detail-type": [twohop.CREDITED]}
    events.put_rule(Name=name, EventBusName=name, EventPattern=json.dumps(pattern))
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events.put_targets(
        Rule=name, EventBusName=name, Targets=[{"Id": "notifications", "Arn": queue_arn}]
    )
    targets = events.list_targets_by_rule(Rule=name, EventBusName=name)["Targets"]
    shaped = [t for t in targets if {"Input", "InputPath", "InputTransformer"} & set(t)]
    if [t["Arn"] for t in targets] != [queue_arn] or shaped:
        raise HarnessFailed(f"the rule on {bus} does not send the whole event to {queue_url}")
    return str(bus)


def _send(sqs: Any, queue: str, sends: list[Send], *, fifo: bool) -> None:
    for start in range(0, len(sends), 10):
        chunk = sends[start : start + 10]
        entries = []
        for i, send in enumerate(chunk):
            entry: dict[str, Any] = {
                "Id": str(i),
                "MessageBody": send.body,
                "MessageAttributes": {HID: {"DataType": "String", "StringValue": send.hid}},
            }
            if fifo:
                # Every send is its own message, duplicates included: SQS must deliver them.
                entry |= {"MessageGroupId": send.group, "MessageDeduplicationId": send.hid}
            entries.append(entry)
        refused = sqs.send_message_batch(QueueUrl=queue, Entries=entries).get("Failed", [])
        if refused:
            raise HarnessFailed(
                f"the queue refused {len(refused)} of the harness's own sends "
                f"({refused[0].get('Code')}: {refused[0].get('Message')})"
            )


def _ttl_sweep(
    ddb: Any, table: str, attribute: str, swept: Callable[[str, bool], None] | None = None
) -> int:
    """Delete what DynamoDB's TTL would: items whose TTL attribute is in the past.

    Each delete is conditional on the item being past its TTL still, as DynamoDB's own TTL
    deletes are: between the scan and the delete a consumer may claim the expired record
    again, and an unconditional delete would then remove a live lease, letting a second
    owner in that no consumer caused. ``swept`` is told the id of each item it deleted, and
    whether it still held an outbox (once's records: what it owed is gone with it)."""
    now = {":now": {"N": str(int(time.time()))}}
    names = {"#t": attribute}
    deleted = 0
    for page in ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="#t < :now",
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=now,
    ):
        for item in page["Items"]:
            try:
                ddb.delete_item(
                    TableName=table,
                    Key={"id": item["id"]},
                    ConditionExpression="#t < :now",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=now,
                )
            except ddb.exceptions.ConditionalCheckFailedException:
                continue  # written again since the scan: live, not swept
            deleted += 1
            if swept is not None:
                swept(item[c.ATTR_ID]["S"], c.ATTR_OUTBOX in item)
    return deleted


class _SweepOwed:
    """With a retention shorter than a run (``--retention-s``), the first wave is not over
    until a TTL sweep has deleted a record, so that the second wave's repeats meet expired
    and swept records.

    Why: records expire by the clock, so a run that drains its first wave within the
    retention (a fast machine, a small workload) would otherwise sweep nothing, or nothing
    before the repeats. Every record was written before the wave drained, so each has
    expired ``retention_s`` (+ skew, + 1 s of rounding) after that, and a sweep then
    deletes it; if it deletes nothing from a table that holds items, the engine is broken
    (``HarnessFailed``)."""

    def __init__(
        self, retention_s: int | None, sweep: Callable[[], int], holds_items: Callable[[], bool]
    ) -> None:
        self._retention_s = retention_s
        self._sweep = sweep
        self._holds_items = holds_items
        self._deadline: float | None = None

    def drained(self) -> None:
        if self._retention_s is not None and self._deadline is None:
            self._deadline = time.monotonic() + self._retention_s + MAX_SKEW_S + 1

    def waits(self, swept: int) -> bool:
        """Whether the wave must go on: no sweep has deleted a record yet."""
        if self._retention_s is None or swept:
            return False
        if self._deadline is None or time.monotonic() < self._deadline:
            return True
        if self._sweep() or not self._holds_items():
            return False  # swept now; or nothing was ever written, so nothing to sweep
        raise HarnessFailed(
            f"no record was swept although every record of the run is past its "
            f"{self._retention_s} s retention: the DynamoDB engine's scan does not see the "
            "expiry times the consumer wrote"
        )


def _expire_for_reuse(
    ddb: Any,
    table: str,
    prefix: str,
    keys: list[str],
    attribute: str,
    events: History,
    sweep: Callable[[], int],
) -> set[str]:
    """Let hop 1's retention pass for the records of ``keys`` (the reuse wave's ids,
    ``traffic.add_reuse``), as a clock would: each one's TTL attribute is set an hour into
    the past, so that once counts it absent (its claim condition: ``expires_at < now``), and
    the sweep deletes it as DynamoDB's TTL would. Only a record whose operation is over
    (COMPLETED, owing no outbox), and only once the queues drained: nothing is in flight on
    it. Each one is recorded (``expired``, with the key) for the checks that judge a record's
    lifetime. Returns the keys expired; a record in another state (its payment parked in
    the DLQ, say) is left as it is, and its key is not used again.

    Why not a short retention for every record (``--retention-s``): under load a message
    whose deliveries keep failing stays away longer than a short retention, and its record
    expires while its operation is unfinished, even while it still owes its outbox: the
    design forbids that configuration (a record outlives its messages), and what it makes
    (an operation run again, a notification never sent) would bury what this wave is for.
    Expiring these records exactly, once done, makes every reuse send a new operation on an
    old key, by construction."""
    past = {":past": {"N": str(int(time.time()) - 3600)}}
    expired: set[str] = set()
    for key in dict.fromkeys(keys):
        record = f"{prefix}#{key}"
        try:
            ddb.update_item(
                TableName=table,
                Key={c.ATTR_ID: {"S": record}},
                UpdateExpression="SET #t = :past",
                ConditionExpression="#status = :completed AND attribute_not_exists(#outbox)",
                ExpressionAttributeNames={
                    "#t": attribute,
                    "#status": c.ATTR_STATUS,
                    "#outbox": c.ATTR_OUTBOX,
                },
                ExpressionAttributeValues={**past, ":completed": {"S": c.STATUS_COMPLETED}},
            )
        except ddb.exceptions.ConditionalCheckFailedException:
            continue
        events.add("expired", item=record, key=key)
        expired.add(key)
    sweep()
    left = [
        key
        for key in expired
        if "Item"
        in ddb.get_item(
            TableName=table, Key={c.ATTR_ID: {"S": f"{prefix}#{key}"}}, ConsistentRead=True
        )
    ]
    if left:
        raise HarnessFailed(
            f"{len(left)} records past their expiry (e.g. {prefix}#{left[0]}) were not swept: "
            "the DynamoDB engine's scan does not see the expiry times the harness wrote"
        )
    return expired


def _holds_items(ddb: Any, table: str) -> bool:
    return bool(ddb.scan(TableName=table, Select="COUNT", Limit=1)["Count"])


def _hids(messages: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> list[str]:
    """The harness ids the messages carry (a message without one is none of the run's)."""
    return [hid for hid in map(harness_id, messages) if hid is not None]


def _drain_dlq(
    sqs: Any, dlq: str, ids: Callable[[dict[str, Any]], str | None] = harness_id
) -> set[str]:
    """The harness ids (or other ``ids``) the DLQ holds at the end, deleted as they are read
    (a FIFO queue hands out no more of a group while its messages are in flight)."""
    return set(_drain_dlq_counts(sqs, dlq, ids))


def _drain_dlq_counts(
    sqs: Any,
    dlq: str,
    ids: Callable[[dict[str, Any]], str | None] = harness_id,
    quarantined: dict[str, int] | None = None,
) -> dict[str, int]:
    """``_drain_dlq``, with how many messages the DLQ held of each id. With ``quarantined``,
    the messages once sent there itself (they carry ``once.reason``: a CONFLICT, a message
    it cannot read) are counted there instead, apart from those SQS moved after
    ``maxReceiveCount`` deliveries."""
    hids: dict[str, int] = {}
    while True:
        messages = sqs.receive_message(
            QueueUrl=dlq,
            MaxNumberOfMessages=10,
            VisibilityTimeout=600,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return hids
        for message in messages:
            found = ids(message)
            if found is None:
                continue
            into = hids
            if quarantined is not None and c.QUARANTINE_ATTR_REASON in (
                message.get("MessageAttributes") or {}
            ):
                into = quarantined
            into[found] = into.get(found, 0) + 1
        sqs.delete_message_batch(
            QueueUrl=dlq,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )


def _left_unapplied(sqs: Any, queue: str, applied: dict[str, int]) -> int:
    """The notifications still in ``queue`` once the workers stopped that hop 2 never
    applied. A copy of one it applied is owed nothing: the outbox sends at least once, and a
    zombie that resumes after the run drained (a staged copy refused by the commit that
    landed, which still found the outbox owed) sends its copy late. A message in flight when
    the workers stopped comes back within the visibility timeout (the backoff is capped at
    it): waited for, then read; one still hidden after that counts as owed."""
    waited = time.monotonic() + 3 * VISIBILITY_S
    while queue_depth(sqs, queue).in_flight and time.monotonic() < waited:
        time.sleep(0.5)
    hidden = queue_depth(sqs, queue).in_flight
    left = _drain_dlq(sqs, queue, twohop.notification_id)
    return hidden + sum(1 for payment in left if not applied.get(payment))


class OutageWindows:
    """DynamoDB outage windows for every worker at once: while the flag file exists, each
    worker's DynamoDB calls fail (``faults.Injector.outage``).

    The windows are scheduled against the traffic, not the clock. The harness arms a
    window (makes the ``armed`` file), and the first DynamoDB call any worker makes after
    that takes it, opens the window and is refused itself; the window stays open
    ``OUTAGE_S`` from then. The first is armed before the workers start, so the run's first
    DynamoDB call opens it; each next one is armed a random half to one and a half times
    ``1 / rate`` after the one before opened, so a busy run has about ``rate`` windows per
    second.

    Why: a window opened by the clock may fall in a stretch where nobody calls DynamoDB
    (the tail of a run, with every message left waiting out its backoff) and inject
    nothing, however long the run. A window opened by a call refuses that call, so every
    run that calls DynamoDB at all has a window and a refused call, on any machine."""

    def __init__(self, flag: Path, armed: Path, rate: float, rng: random.Random) -> None:
        self._flag = flag
        self._armed = armed
        self._rate = rate
        self._rng = rng
        self._arms_at: float | None = None
        #: Windows opened and closed.
        self.opened = 0
        if rate:
            self._armed.touch()

    def tick(self) -> None:
        now = time.monotonic()
        if self._flag.exists():
            opened_at = float(self._flag.read_text())
            if now >= opened_at + OUTAGE_S:
                self._close()
                self._arms_at = opened_at + self._rng.uniform(0.5, 1.5) / self._rate
            return
        if self._arms_at is not None and now >= self._arms_at:
            self._armed.touch()
            self._arms_at = None

    def _close(self) -> None:
        # Only the harness removes the flag: each window is closed, and counted, once.
        try:
            self._flag.unlink()
        except FileNotFoundError:
            return
        self.opened += 1

    def close(self) -> None:
        """The run is over: disarm, and close the window open now, if one is."""
        self._armed.unlink(missing_ok=True)
        self._close()


class Supervisor:
    """Runs one consumer's workers and keeps them alive while the workload drains."""

    def __init__(self, specs: list[WorkerSpec]) -> None:
        self._specs = specs
        self._ctx = multiprocessing.get_context("spawn")
        self._procs: dict[str, multiprocessing.process.BaseProcess] = {}
        self.respawns = 0

    def start(self) -> None:
        for spec in self._specs:
            self._spawn(spec)

    def _spawn(self, spec: WorkerSpec) -> None:
        proc = self._ctx.Process(target=run, args=(spec,), daemon=True)
        proc.start()
        self._procs[spec.worker] = proc

    def tend(self) -> None:
        """Respawn every worker that was killed (by its probe or its function timeout);
        one that died any other way stops the run: that is the harness failing."""
        for spec in self._specs:
            proc = self._procs[spec.worker]
            if proc.is_alive():
                continue
            if proc.exitcode != -signal.SIGKILL:
                raise HarnessFailed(
                    f"chaos worker {spec.worker} ({spec.impl}) exited with code "
                    f"{proc.exitcode}, not by an injected kill; its traceback, if any, is "
                    "above. The run's figures would be meaningless, so it stops here."
                )
            self.respawns += 1
            self._spawn(spec)

    def stop(self) -> None:
        for proc in self._procs.values():
            if proc.pid and proc.is_alive():
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.join(5)


def run_consumer(
    impl: str,
    work: Workload,
    *,
    seed: int,
    endpoints: Endpoints,
    workers: int,
    rates: dict[str, float],
    workdir: Path,
    progress: Callable[[str, float], None],
    fifo: bool = False,
    retention_s: int | None = None,
) -> Run:
    """One consumer under the full workload and fault plan; returns its checked run."""
    # The workers run the example's handler from the checkout; they inherit this sys.path.
    example.require()
    started = time.monotonic()
    tag = f"chaos-{impl}-{seed}-{random.Random().randrange(10**6)}"
    queue, dlq, tables, (notify, notify_dlq, via) = _make_resources(impl, tag, endpoints, fifo=fifo)
    history_path = workdir / f"{tag}.jsonl"
    outage_flag = workdir / f"{tag}.outage"
    outage_armed = workdir / f"{tag}.outage-armed"
    owed = workdir / f"{tag}.owed"
    rng = random.Random(seed)
    specs = [
        WorkerSpec(
            impl=impl,
            worker=f"w{i}",
            seed=seed,
            sqs_endpoint=endpoints.sqs,
            dynamodb_endpoint=endpoints.dynamodb,
            queue_url=queue,
            dlq_url=dlq,
            tables=tables,
            history_path=str(history_path),
            rates=rates,
            skew_s=rng.uniform(-MAX_SKEW_S, MAX_SKEW_S) if rates.get("skew", 1) else 0.0,
            pause_s=PAUSE_S,
            pause_max_s=PAUSE_MAX_S,
            timeout_s=TIMEOUT_S,
            batch_size=10,
            fifo=fifo,
            visibility_s=VISIBILITY_S,
            retention_s=retention_s,
            outage_flag=str(outage_flag),
            outage_armed=str(outage_armed),
            owed=str(owed),
            notify_url=notify,
            notify_dlq_url=notify_dlq,
            notify_via=via,
        )
        for i in range(workers)
    ]
    sqs, ddb = _clients(endpoints)
    # Owed and armed before any worker runs: the first events of the run may take them.
    owed_files = owe(str(owed), rates)
    outages = OutageWindows(
        outage_flag, outage_armed, rates.get("outage", 0.0), random.Random(f"{seed}-outage")
    )
    supervisor = Supervisor(specs)
    supervisor.start()
    harness_events = History(str(history_path), "harness")
    extra = {"redriven": 0, "ttl_swept": 0, "respawns": 0, "outage_windows": 0}
    notify_redriven = 0
    swept_records: list[tuple[str, bool]] = []  # (id, whether it still owed its outbox)
    never_sent: set[str] = set()  # reuse sends left out: their record could not expire
    prefix = _once_prefix(impl)

    def sweep() -> int:
        swept = _ttl_sweep(
            ddb,
            tables["idempotency"],
            TTL_ATTRIBUTES[impl],
            lambda record, owing: swept_records.append((record, owing)),
        )
        extra["ttl_swept"] += swept
        return swept

    try:
        for wave in range(max(s.wave for s in work.sends) + 1):
            pending = [s for s in work.sends if s.wave == wave]
            quiet = 0
            last_sweep = time.monotonic()
            # Only the first wave waits for a sweep: the second's repeats are to meet it.
            owed_sweep = _SweepOwed(
                retention_s if wave == 0 and rates.get("ttl_sweep", 1) else None,
                sweep,
                lambda: _holds_items(ddb, tables["idempotency"]),
            )
            if wave == REUSE_WAVE:
                # The reuse wave uses ids again once their records' retention has passed (a
                # peer's records are not once's: none is expired, the wave is left out).
                expired: set[str] = set()
                if prefix is not None:
                    expired = _expire_for_reuse(
                        ddb,
                        tables["idempotency"],
                        prefix,
                        [s.key for s in pending],
                        TTL_ATTRIBUTES[impl],
                        harness_events,
                        sweep,
                    )
                skipped = [s for s in pending if s.key not in expired]
                never_sent |= {s.hid for s in skipped}
                pending = [s for s in pending if s.key in expired]
                extra["reuse_skipped"] = len({s.key for s in skipped})
            while pending or quiet < 3 or owed_sweep.waits(extra["ttl_swept"]):
                depth = queue_depth(sqs, queue).total
                if notify:
                    depth += queue_depth(sqs, notify).total
                if pending and depth < BACKLOG:
                    # Feed the queue as it drains: moto's receive slows with a deep queue.
                    _send(sqs, queue, pending[:100], fifo=fifo)
                    pending = pending[100:]
                else:
                    time.sleep(0.5)
                outages.tick()
                supervisor.tend()
                if time.monotonic() - last_sweep > SWEEP_S and rates.get("ttl_sweep", 1):
                    sweep()
                    last_sweep = time.monotonic()
                quiet = quiet + 1 if depth == 0 and not pending else 0
                if quiet >= 3:
                    owed_sweep.drained()
                later = sum(1 for s in work.sends if s.wave > wave)
                progress(impl, 1 - (depth + len(pending) + later) / len(work.sends))
            if wave == 0 and rates.get("redrive", 1):
                # the redriven messages drain with the second wave
                # Timed before the move: a moved message may be delivered before it ends.
                redriven_at = time.monotonic_ns()
                moved = redrive.move(sqs, dlq, queue)
                harness_events.add("redrive", t=redriven_at, hids=_hids(moved.messages))
                extra["redriven"] = moved.moved
                if notify:
                    notify_redriven = redrive.move(sqs, notify_dlq, notify).moved
    except (BotoCoreError, ClientError) as error:
        raise HarnessFailed(
            f"the harness's own call to a local engine failed while running {impl}: {error}. "
            "The engines were still starting, were killed, or are starved of CPU; run again "
            "on a quieter machine, with --keep-history to keep the events so far."
        ) from error
    finally:
        # Workers first: none can open a window after the last one is closed.
        supervisor.stop()
        outages.close()
        for path in owed_files:
            path.unlink(missing_ok=True)
    extra["respawns"] = supervisor.respawns
    extra["outage_windows"] = outages.opened
    history = [json.loads(line) for line in history_path.read_text().splitlines() if line]
    # What this consumer's run sent (the workload is shared by the consumers of a run).
    work = Workload([s for s in work.sends if s.hid not in never_sent], work.payments)
    final = _final_state(work, sqs, ddb, dlq, tables)
    two_hop = None
    if notify:
        two_hop = twohop.read_state(
            ddb, tables["ledger"], tables["idempotency"], _once_prefix(impl)
        )
        # Hop 2's DLQ: what SQS moved there after its deliveries failed waits for a person;
        # what once sent there itself (no hop-2 quarantine is ever due) does not.
        two_hop.notify_dlq_counts = _drain_dlq_counts(
            sqs, notify_dlq, twohop.notification_id, two_hop.notify_quarantined
        )
        two_hop.notify_dlq = set(two_hop.notify_dlq_counts)
        two_hop.notify_left = _left_unapplied(sqs, notify, two_hop.notified)
        two_hop.parked = {final.keys[h] for h in final.in_dlq if h in final.keys}
        # Hop 1's records that expired: swept by the harness, or replaced by a claim past
        # their retention (the probe's ``record_replaced``); and whether each still owed.
        replaced = [(e["item"], e["owing"]) for e in history if e["e"] == "record_replaced"]
        for record, owing in swept_records + replaced:
            if prefix is None or not record.startswith(f"{prefix}#"):
                continue
            payment = record.removeprefix(f"{prefix}#")
            two_hop.expired.add(payment)
            if owing:
                two_hop.expired_owing[payment] = two_hop.expired_owing.get(payment, 0) + 1
        acked = {e["hid"] for e in history if e["e"] == "ack"}
        for e in history:
            if e["e"] == "expired":  # the harness let the record's retention pass
                two_hop.expired.add(e["key"])
                two_hop.harness_expired[e["key"]] = two_hop.harness_expired.get(e["key"], 0) + 1
        two_hop.reused = {s.key for s in work.sends if s.kind == "reuse"}
        two_hop.reuse_acked = {s.key for s in work.sends if s.kind == "reuse" and s.hid in acked}
        two_hop.notify_conflicts = sum(
            e["counts"].get("conflict", 0) for e in history if e["e"] == "outcomes2"
        )
        if retention_s is not None or two_hop.harness_expired:
            # A payment id may be credited anew past its record's retention (another amount,
            # maybe): each account's balance is then the sum of every credit of its entries.
            final.ledger_entries = {
                payment: {"account": account, "amount": two_hop.total(payment)}
                for payment, (account, _, _) in two_hop.entries.items()
            }
    # Beside the history, what the run left behind: the two together are the evidence.
    (workdir / f"{tag}.final.json").write_text(
        json.dumps(
            {
                **dataclasses.asdict(final),
                **({"two_hop": dataclasses.asdict(two_hop)} if two_hop else {}),
            },
            default=sorted,
            indent=1,
        )
    )
    result = Run(impl=impl, seconds=time.monotonic() - started)
    result.deliveries = sum(e["count"] for e in history if e["e"] == "deliver")
    poison = {s.key for s in work.sends if s.kind == "poison"}
    execs = [e for e in history if e["e"] == "exec" and e["key"] not in poison]
    result.executions = len(execs)
    result.unique_executed = len({e["key"] for e in execs})
    result.violations = invariants.check(
        history,
        final,
        skew_ms=2 * MAX_SKEW_S * 1000,
        retention_s=retention_s,
        longest_run_s=TIMEOUT_S + PAUSE_MAX_S,
    )
    if two_hop is not None:
        result.violations |= invariants.check_two_hop(two_hop, retention_s=retention_s)
        if twohop.ONCE_EFFECTS.get(impl) == "staged":
            result.violations |= invariants.check_staged(history, two_hop)
            # Business code runs before the record is read: a mismatched copy runs by design,
            # and its commit is refused (CONFLICT). That its effect never lands is what
            # credit_twice and credit_partial check (two payloads landing count twice).
            extra["mismatch_ran"] = result.violations.pop("mismatch_executed")
        result.notifications = {
            "deliveries": sum(e["count"] for e in history if e["e"] == "deliver2"),
            "executions": sum(1 for e in history if e["e"] == "exec2"),
            "acknowledged": sum(1 for e in history if e["e"] == "ack2"),
            "in_dlq": len(two_hop.notify_dlq),
            "quarantined": sum(two_hop.notify_quarantined.values()),
            # payments parked in hop 1's DLQ whose record still owes its notification
            "owed_in_source_dlq": len(two_hop.parked & two_hop.owing_payments()),
            "redriven": notify_redriven,
        }
        if two_hop.reused:
            # The ids used again past hop 1's retention: their second operations, each
            # credited and notified on its own (``reuse_not_applied`` judges them).
            result.notifications |= {
                "reused": len(two_hop.reused),
                "reuse_acknowledged": len(two_hop.reuse_acked),
                "reuse_applied_downstream": sum(
                    1 for key in two_hop.reused if two_hop.notified.get(key, 0) >= 2
                ),
            }
        if two_hop.expired_owing:
            # Notifications no one owes any more: their records expired owing them.
            result.notifications["expired_owing"] = sum(two_hop.expired_owing.values())
    result.lost = result.violations["lost"]
    if result.lost:
        # A lost message no worker ever received is the queue engine's loss, not the
        # consumer's: said beside the count, which stays as it is.
        delivered = {hid for e in history if e["e"] == "deliver" for hid in e.get("hids", [])}
        extra["lost_never_delivered"] = len(invariants.lost_hids(history, final) - delivered)
    faults: dict[str, int] = {}
    for e in history:
        if e["e"] in ("outcomes", "outcomes2", "calls"):
            into = result.dynamodb_calls if e["e"] == "calls" else result.outcomes
            hop = "notify " if e["e"] == "outcomes2" else ""
            for name, n in e["counts"].items():
                into[hop + name] = into.get(hop + name, 0) + n
        elif e["e"] == "fault":
            faults[e["kind"]] = faults.get(e["kind"], 0) + 1
        elif e["e"] == "outbox":  # once's owed and owed_sent outcomes (two-hop only)
            faults[f"outcome_{e['kind']}"] = faults.get(f"outcome_{e['kind']}", 0) + 1
    if impl.startswith("once"):
        result.to_completion = _to_completion(history)
    result.faults = faults | extra | {f"workload_{k}": v for k, v in work.counts().items()}
    return result


def _once_prefix(impl: str) -> str | None:
    """once's hop-1 record key prefix (the example's service name); None for a peer."""
    if not impl.startswith("once"):
        return None
    from payments import SERVICE_NAME

    return str(SERVICE_NAME)


def _to_completion(history: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """From each message's first BUSY/failed delivery to its ack (once's outcomes only)."""
    marks = [
        retrytimes.Mark(e["hid"], e["t"] / 1e9, e["kind"] if e["e"] == "retry" else retrytimes.DONE)
        for e in history
        if e["e"] in ("retry", "ack") and e.get("hid")
    ]
    return retrytimes.summarize(marks)


def _final_state(
    work: Workload, sqs: Any, ddb: Any, dlq: str, tables: dict[str, str]
) -> invariants.FinalState:
    ledger = read_ledger(ddb, tables["ledger"])
    fifo = dlq.endswith(".fifo")
    return invariants.FinalState(
        sent={s.hid for s in work.sends},
        in_dlq=_drain_dlq(sqs, dlq),
        poison={s.hid for s in work.sends if s.kind == "poison"},
        payments=work.payments,
        hid_keys={s.hid: s.key for s in work.sends if s.kind != "poison"},
        ledger_entries={
            key: {"account": account, "amount": amount}
            for key, (account, amount) in ledger.entries.items()
        },
        balances=ledger.balances,
        keys={s.hid: s.key for s in work.sends},
        groups=work.groups() if fifo else {},
    )


def chaos(
    deliveries: int,
    seed: int,
    endpoints: Endpoints,
    *,
    workers: int = 4,
    implementations: tuple[str, ...] = IMPLEMENTATIONS,
    rates: dict[str, float] | None = None,
    progress: Callable[[str, float], None] = lambda impl, done: None,
    history_dir: Path | None = None,
    fifo: bool = False,
    retention_s: int | None = None,
    side_by_side: bool = False,
    reuse: float = 0.0,
) -> list[Run]:
    """Every consumer, one after the other, under the same workload and fault plan.

    ``fifo``: FIFO queues, message group = account. ``retention_s``: records kept that
    long (swept as DynamoDB's TTL does) instead of each consumer's default.
    ``side_by_side``: the consumers run at the same time, each on its own queues and tables
    (a run mostly waits on visibility timeouts and backoffs): the same verdicts sooner,
    but their timings measure a shared machine, so the command runs them one by one.
    ``reuse``: about that share of the first wave's payment ids is sent again in a third
    wave (``traffic.add_reuse``), once the harness let their records' retention pass
    (``_expire_for_reuse``): new operations on old keys (once's consumers only); on the
    two-hop workload, hop 2's records of the first operations are still live then (hop 2
    keeps once's default retention).
    Each consumer's history is a JSON-lines file; it is kept in ``history_dir`` if given
    (to read the events behind a violation; ``Run.history`` says where), and deleted with
    the run otherwise.
    """
    # Redeliveries add about a third on top of the messages sent.
    work = build(max(20, int(deliveries / 1.3)), seed)
    if reuse:
        add_reuse(work, reuse)
    plan = DEFAULT_RATES | (rates or {})
    with tempfile.TemporaryDirectory(prefix="once-chaos-") as tmp:
        workdir = (history_dir or Path(tmp)).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        run = functools.partial(
            run_consumer,
            work=work,
            seed=seed,
            endpoints=endpoints,
            workers=workers,
            rates=plan,
            workdir=workdir,
            progress=progress,
            fifo=fifo,
            retention_s=retention_s,
        )
        if not side_by_side:
            done = [run(impl) for impl in implementations]
        else:
            with ThreadPoolExecutor(len(implementations), thread_name_prefix="chaos") as pool:
                done = list(pool.map(run, implementations))
        for each in done:
            each.history = str(workdir) if history_dir else ""
        return done
