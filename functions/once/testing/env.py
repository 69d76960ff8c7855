"""``OnceEnv``: an idempotency table, a DLQ and source queues on in-process moto, a clock,
and ``deliver``, which runs a handler the way Lambda and SQS would, crashes included.

The environment enters ``moto.mock_aws`` whether or not a mock is already active: moto
nests its mocks (the backends are reset only when the outermost one starts and stops), so a
test's own tables and queues live in the same mock as ours and survive both. The handler
runs with a record store and a quarantine bound by the kit (``Handler.bind``): the real
ones, on the kit's clock, with the kill switch of the invocation (``crash.py``). The handler
is the one the team ships: the once handler ``make_handler`` made, or a wrapper of it that
keeps ``__wrapped__`` (``functools.wraps``; Powertools' ``inject_lambda_context``,
``log_metrics``, ``capture_lambda_handler``). The kit finds the once handler down that chain
(to bind it, and for its configuration) and invokes the outermost callable with the event
and a Lambda context, so the team's decorators run as in Lambda. Lambda's call goes through
``Handler.handle``; the kit records what it returned during the invocation, so the outcome
of each body is the handler's own result, not a reading of its logs. What is deleted from
the queue is decided, as Lambda decides it, from what the outermost callable returned
(``once.batchresponse``, the rule the local cloud applies too), not from those outcomes: a
wrapper that drops once's response (returns ``None`` or ``{}``) has every message of the
batch deleted, a failed one too, as on AWS, and the kit warns (``DroppedResponseWarning``,
``Delivery.lost``). With ``filters`` (the mapping's, as ``OnceConsumer(filters=)`` takes
them), a message no filter keeps is deleted without an invocation, as Lambda's event
filtering deletes it (``once.event_filters``, the rule the local cloud applies too). Leaving
the environment unbinds every handler it ran, so a module-level handler is whole again for
the next test.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from once import constants as c
from once import event_filters
from once.batchresponse import Decision, decide, judge
from once.handler import Handler
from once.models import BatchResult, Outcome, Record, RecordResult, record_id
from once.outbox import Outbox
from once.store import RecordStore
from once.testing.crash import (
    AFTER_CLAIM,
    TIMEOUT,
    CrashingOutbox,
    CrashingQuarantine,
    CrashingStore,
    InvocationKilled,
    KillSwitch,
    check_crash_point,
)
from once.testing.lambda_service import LambdaContext, Message, SourceQueue, sqs_attributes
from once.testing.staged import guarded, violation

TABLE_NAME = "once-idempotency"
DLQ_NAME = "once-dlq"
#: The DLQ of the FIFO source queue (a FIFO queue's DLQ must be FIFO too).
FIFO_DLQ_NAME = "once-dlq.fifo"
QUEUE_NAME = "once-source"
FIFO_QUEUE_NAME = "once-source.fifo"
FUNCTION_NAME = "once-consumer"
#: The key prefix when the test's environment names no service.
SERVICE_NAME = "once-testing"
DEFAULT_REGION = "us-east-1"
#: The function's timeout: the first remaining time of every invocation (the construct's default).
DEFAULT_TIMEOUT_S = 30
#: A message attribute a test sets: a String, a Number or Binary.
AttributeValue = str | int | float | bytes
#: The Lambda handler as the team ships it: a once ``Handler``, or a wrapper of one that keeps
#: ``__wrapped__`` (``functools.wraps``, Powertools' decorators).
LambdaHandler = Callable[[dict[str, Any], Any], Any]
#: How far ``__wrapped__`` is followed before giving up (a chain that never ends).
_MAX_WRAPPERS = 1000
#: Environment variables that would send the clients elsewhere than moto, removed meanwhile;
#: and every ``AWS_ENDPOINT_URL_<SERVICE>`` set (``_away_from_moto``): business code's SNS,
#: S3 or any other client must reach the mock too.
_AWAY_FROM_MOTO = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL")


def install_hint(extras: str) -> str:
    """The install line for once's ``extras``, one that works where this once came from:
    its checkout, for an install from a source tree (once is not on PyPI). Here, below the
    plugins that say it too (``once.testing``'s, ``oncecli.testing``'s), which import this
    module: never the other way round."""
    source = Path(__file__).resolve().parents[3]
    where = str(source) if (source / "pyproject.toml").is_file() else "<your once checkout>"
    return f'pip install "{where}[{extras}]"'


def _away_from_moto() -> list[str]:
    return [*_AWAY_FROM_MOTO, *(n for n in os.environ if n.startswith("AWS_ENDPOINT_URL_"))]


class DroppedResponseWarning(UserWarning):
    """The response the handler as shipped returned to Lambda does not say what once's
    handler said: Lambda deletes messages once reported failed (they are lost: AWS never
    delivers them again), or retries a whole batch it cannot read."""


class Clock:
    """The record store's time: the wall clock plus what the test advanced. Time still
    passes during an invocation (its remaining time is honest); a lease or a retention
    period passes by ``advance``, without sleeping."""

    def __init__(self) -> None:
        self._offset = 0.0

    def __call__(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"time only moves forward: advance({seconds}) is negative")
        self._offset += seconds

    def advance_to(self, instant_s: float) -> None:
        """Move to ``instant_s`` (epoch seconds) if it is ahead."""
        self.advance(max(0.0, instant_s - self()))


@dataclass(frozen=True)
class Delivery:
    """What one ``deliver`` did.

    ``results[i]`` is how ``bodies[i]`` ended, as the handler's ``handle`` reported it
    (``once.models.RecordResult``: outcome, key, fence, takeover, reason), or ``None`` when
    its invocation was killed, or when no filter kept it (``filtered_out``). ``outcomes[i]``
    is its ``Outcome`` (a ``StrEnum``: it equals ``"processed"``, ``"duplicate"``...).
    ``batch_item_failures`` are the message ids Lambda leaves for redelivery by the
    handler's response, read by Lambda's rule
    (``once.batchresponse``): those it lists, or every message of a batch whose response
    Lambda cannot read; a killed invocation reports nothing, and SQS redelivers all of its
    messages. What Lambda deletes is decided from that response, not from the outcomes.
    """

    results: list[RecordResult | None]
    message_ids: list[str]
    batch_item_failures: list[str]
    #: The handler's return value for each invocation, as Lambda got it from the handler
    #: passed (the outermost wrapper), None for a killed one.
    responses: list[dict[str, Any] | None]
    #: The crash point where an invocation died (``"timeout"``: it outlived the function
    #: timeout and Lambda killed it), or None.
    killed_at: str | None = None
    #: Receive count of each message in this delivery (2 or more: a redelivery).
    receive_counts: list[int] = field(default_factory=list)
    #: Messages of this delivery that used their last receive (``OnceEnv(max_receive_count=)``)
    #: and that SQS moved to the DLQ, as its redrive policy does.
    moved_to_dlq: list[str] = field(default_factory=list)
    #: Messages once reported failed (not acknowledged) that Lambda deleted all the same, as
    #: the response the handler as shipped returned told it to (a wrapper that returned
    #: ``None`` or ``{}``: "success" by Lambda's rule): on AWS they are lost. The kit warns
    #: (``DroppedResponseWarning``) when there are any.
    lost: list[str] = field(default_factory=list)
    #: Messages no filter of ``OnceEnv.filters`` kept: deleted from the queue without an
    #: invocation, never in the DLQ, as Lambda's event filtering does.
    filtered_out: list[str] = field(default_factory=list)

    @property
    def timed_out(self) -> bool:
        """An invocation outlived the function timeout (``OnceEnv(timeout_s=)``): Lambda
        killed it at its deadline. Nothing after the deadline landed (no finalize, no DLQ
        send), no batch response was returned, and its messages come back."""
        return self.killed_at == TIMEOUT

    @property
    def outcomes(self) -> list[Outcome | None]:
        """The ``Outcome`` of each body, in order (``None``: its invocation was killed, or
        no filter kept it)."""
        return [r.outcome if r is not None else None for r in self.results]

    @property
    def response(self) -> dict[str, Any] | None:
        """The handler's return value, when the bodies went in one invocation."""
        if len(self.responses) != 1:
            raise ValueError(
                f"this delivery made {len(self.responses)} invocations (same_batch=False): "
                "read .responses"
            )
        return self.responses[0]


@dataclass(frozen=True)
class Quarantined:
    """A message in the DLQ: its body and its message attributes (string values)."""

    body: str
    attributes: dict[str, str]

    @property
    def reason(self) -> str | None:
        return self.attributes.get(c.QUARANTINE_ATTR_REASON)

    @property
    def error(self) -> str | None:
        return self.attributes.get(c.QUARANTINE_ATTR_ERROR)

    @property
    def original_message_id(self) -> str | None:
        return self.attributes.get(c.QUARANTINE_ATTR_MESSAGE_ID)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _Binding:
    """The store and quarantine a handler runs with, and the switch they obey."""

    handler: Handler
    switch: KillSwitch
    table_name: str
    key_prefix: str
    dlq_url: str | None


class OnceEnv:
    """The test's AWS side of once. Use it as a context manager, or through the
    ``once_env`` pytest fixture."""

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_receive_count: int | None = None,
        role: Any = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """``timeout_s``: the function timeout (an invocation still running at its deadline
        is killed); ``max_receive_count``: the source queues' redrive policy (None: none, a
        message comes back as often as the test delivers it); ``filters``: the mapping's
        filter patterns, as ``OnceConsumer(filters=)`` takes them (None: every message is
        delivered)."""
        if max_receive_count is not None and max_receive_count < 1:
            raise ValueError(f"max_receive_count must be at least 1 (got {max_receive_count})")
        self.timeout_s = timeout_s
        self.max_receive_count = max_receive_count
        #: The function's role, judged on every AWS call an invocation makes (once's and
        #: business code's), as the local cloud judges it: anything whose ``enforced()`` is a
        #: context manager, such as ``oncecli.localcloud.rolekit.role_of(template, ...)``
        #: (``once[local]``). None: calls are not judged. May be set after entering, once
        #: ``table_name`` and ``dlq_url`` are known to name the template's resources.
        self.role = role
        self._patterns: tuple[dict[str, Any], ...] = ()
        self.filters = filters
        self.clock = Clock()
        self.table_name = TABLE_NAME
        self.dlq_url = ""
        self.dynamodb: Any = None
        self.sqs: Any = None
        #: moto's SNS, built at the first outbox message to a topic.
        self.sns: Any = None
        #: moto's EventBridge, built at the first outbox event to a bus.
        self.events: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._mock: Any = None
        self._queues: dict[str, SourceQueue] = {}
        self._bindings: dict[int, _Binding] = {}
        self._tables = {TABLE_NAME}
        self._dlqs: list[str] = []
        self._function_arn = ""

    @property
    def filters(self) -> tuple[dict[str, Any], ...] | None:
        """The mapping's filter patterns, as Lambda reads them (None: no filtering). Set
        them as ``OnceConsumer(filters=)`` takes them, before or after entering, and
        ``deliver`` deletes each message none keeps, without invoking the handler; patterns
        Lambda would refuse raise ``ValueError``, with the construct's reasons."""
        return self._patterns or None

    @filters.setter
    def filters(self, given: Sequence[Mapping[str, Any]] | None) -> None:
        self._patterns = () if given is None else event_filters.patterns(given)

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> OnceEnv:
        try:  # a test dependency: imported when a test asks for it, not when pytest starts
            from moto import mock_aws
        except ImportError as error:
            raise ImportError(
                f"once_env runs on moto: install the test dependencies, {install_hint('testing')}"
            ) from error

        from once.testing import strict, strict_events

        strict.install()  # moto held to AWS's rules (sizes, characters, counts): strict.py
        strict_events.install()  # EventBridge: PutEvents' rules, events in AWS's shape
        self._set_env()
        try:
            self._mock = mock_aws()
            self._mock.start()
            session = _session(os.environ["AWS_DEFAULT_REGION"])
            config = Config(retries={"mode": "standard", "max_attempts": 3})
            self.dynamodb = session.client("dynamodb", config=config)
            self.sqs = session.client("sqs", config=config)
            self._create_table(TABLE_NAME)
            self.dlq_url = self._create_queue(DLQ_NAME)
            self._dlqs.append(self.dlq_url)
            os.environ[c.ENV_DLQ_URL] = self.dlq_url
            account = self._queue(QUEUE_NAME).arn.split(":")[4]
            self._function_arn = (
                f"arn:aws:lambda:{session.region_name}:{account}:function:{FUNCTION_NAME}"
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for binding in self._bindings.values():
            binding.handler.bind()
        self._bindings.clear()
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()

    def _set_env(self) -> None:
        wanted: dict[str, str | None] = {name: None for name in _away_from_moto()}
        wanted[c.ENV_TABLE_NAME] = TABLE_NAME
        wanted[c.ENV_DLQ_URL] = None  # set once the queue exists
        for name, default in (
            (c.ENV_SERVICE_NAME, SERVICE_NAME),
            ("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION") or DEFAULT_REGION),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
        ):
            if not os.environ.get(name):
                wanted[name] = default
        for name, value in wanted.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    # --- delivering ------------------------------------------------------------------------

    def deliver(
        self,
        handler: LambdaHandler,
        bodies: Sequence[dict[str, Any] | str],
        *,
        crash: str | None = None,
        same_batch: bool = True,
        fifo_group: str | None = None,
        message_attributes: (
            Mapping[str, AttributeValue] | Sequence[Mapping[str, AttributeValue]] | None
        ) = None,
    ) -> Delivery:
        """Deliver ``bodies`` to ``handler`` as SQS would: in one batch (or one invocation
        each with ``same_batch=False``), from a FIFO queue in group ``fifo_group`` if given.
        ``handler`` is the Lambda handler as shipped: the once handler, or a wrapper of it
        that keeps ``__wrapped__`` (Powertools' decorators, ``functools.wraps``), invoked as
        Lambda invokes it, decorators and all.
        ``crash`` kills the first invocation that reaches that point (``crash.py``).
        ``message_attributes``: one mapping for every body, or one per body (a str is a
        String attribute, a number a Number, bytes Binary), as a producer or a redrive
        sets them (``once.reason``, ``once.fence``...)."""
        check_crash_point(crash)
        if crash == AFTER_CLAIM and _once_handler(handler).effects == "staged":
            raise ValueError(
                'crash="after_claim" under effects="staged": no claim is made, business code '
                'runs first; crash "after_process" (before the one write) or '
                '"before_finalize" (once it landed)'
            )
        texts = _texts(bodies)
        if fifo_group is not None and same_batch and len(texts) > c.FIFO_MAX_BATCH_SIZE:
            raise ValueError(
                f"{len(texts)} bodies in one batch from a FIFO queue: Lambda hands a FIFO "
                f"consumer at most {c.FIFO_MAX_BATCH_SIZE} records; deliver them in several calls "
                "(or same_batch=False)"
            )
        queue = self._queue(FIFO_QUEUE_NAME if fifo_group is not None else QUEUE_NAME)
        messages = queue.receive(texts, fifo_group, _per_body(message_attributes, len(texts)))
        return self._deliver(handler, queue, messages, crash, same_batch)

    def deliver_waiting(
        self,
        handler: LambdaHandler,
        *,
        fifo: bool = False,
        crash: str | None = None,
        same_batch: bool = True,
    ) -> Delivery:
        """Deliver every message waiting in the source queue (``queue_url``, or
        ``fifo_queue_url``) that ``deliver`` did not send: what a test's own producer sent,
        or what ``once redrive`` moved back from the DLQ, with their message attributes.
        In one batch (from a FIFO queue, batches of at most 10, as Lambda hands them over),
        or one invocation each with ``same_batch=False``. Raises when none is waiting:
        Lambda never invokes with an empty batch. ``handler``: as ``deliver`` takes it."""
        check_crash_point(crash)
        _once_handler(handler)
        queue = self._queue(FIFO_QUEUE_NAME if fifo else QUEUE_NAME)
        messages = queue.receive_waiting()
        if not messages:
            raise ValueError(f"no message is waiting in {queue.url}: nothing to deliver")
        return self._deliver(handler, queue, messages, crash, same_batch)

    @property
    def queue_url(self) -> str:
        """The standard source queue: where a test's own producer sends, and where
        ``once redrive`` moves the DLQ's messages back to (then ``deliver_waiting``)."""
        return self._queue(QUEUE_NAME).url

    @property
    def fifo_queue_url(self) -> str:
        """The FIFO source queue (``deliver(..., fifo_group=)``)."""
        return self._queue(FIFO_QUEUE_NAME).url

    def _deliver(
        self,
        handler: LambdaHandler,
        queue: SourceQueue,
        messages: list[Message],
        crash: str | None,
        same_batch: bool,
    ) -> Delivery:
        kept = self._filtered(queue, messages)
        size = (c.FIFO_MAX_BATCH_SIZE if queue.fifo else max(1, len(kept))) if same_batch else 1
        batches = [kept[start : start + size] for start in range(0, len(kept), size)]
        results: dict[str, RecordResult | None] = {}
        responses: list[dict[str, Any] | None] = []
        failures: list[str] = []
        moved: list[str] = []
        lost: list[str] = []
        killed_at: str | None = None
        receive_counts = [m.receive_count for m in messages]
        for batch in batches:
            invocation, killed, gone = self._invoke(handler, queue, batch, crash)
            if killed is not None:
                crash, killed_at = None, killed  # one kill per delivery
            records = invocation.result.records if invocation is not None else [None] * len(batch)
            results.update(zip((m.message_id for m in batch), records, strict=False))
            responses.append(invocation.response if invocation is not None else None)
            if invocation is not None:
                failures += invocation.decision.retry
                lost += invocation.lost
            moved += gone
        if crash is not None:
            raise AssertionError(
                f"crash={crash!r} was never reached: no record got that far "
                f"(outcomes: {[r.outcome if r else None for r in results.values()]}"
                f"{', every message filtered out' if not kept else ''}); "
                "a crash test that does not crash proves nothing"
            )
        return Delivery(
            results=[results.get(m.message_id) for m in messages],
            message_ids=[m.message_id for m in messages],
            batch_item_failures=failures,
            responses=responses,
            killed_at=killed_at,
            receive_counts=receive_counts,
            moved_to_dlq=moved,
            lost=lost,
            filtered_out=[m.message_id for m in messages if m not in kept],
        )

    def _filtered(self, queue: SourceQueue, messages: list[Message]) -> list[Message]:
        """The messages a filter keeps; the others are deleted from the queue, never
        invoked, as Lambda's event filtering deletes them (``once.event_filters``)."""
        if not self._patterns:
            return messages
        kept = [m for m in messages if event_filters.keeps(self._patterns, queue.record(m))]
        taken = {m.message_id for m in kept}
        dropped = [m for m in messages if m.message_id not in taken]
        queue.settle(dropped, {m.message_id for m in dropped})
        return kept

    def _invoke(
        self, handler: LambdaHandler, queue: SourceQueue, batch: list[Message], crash: str | None
    ) -> tuple[_Invocation | None, str | None, list[str]]:
        """One invocation, in the environment Lambda gives the handler's own function
        (``_as_function``)."""
        with self._as_function(_once_handler(handler)):
            return self._invoke_as(handler, queue, batch, crash)

    @contextlib.contextmanager
    def _as_function(self, handler: Handler) -> Iterator[None]:
        """The handler's own service name in ``POWERTOOLS_SERVICE_NAME`` while it runs (or
        its records are read), where the test left the kit's default: on AWS each consumer
        is a function of its own, with its own service name (``OnceConsumer``'s
        ``service_name``), so two consumers never share a record, whatever keys they see.
        A ``key_prefix=`` given to ``make_handler``, or a service name the test set, wins."""
        if os.environ.get(c.ENV_SERVICE_NAME) != SERVICE_NAME:
            yield
            return
        os.environ[c.ENV_SERVICE_NAME] = service_name_of(handler)
        try:
            yield
        finally:
            os.environ[c.ENV_SERVICE_NAME] = SERVICE_NAME

    def _invoke_as(
        self, handler: LambdaHandler, queue: SourceQueue, batch: list[Message], crash: str | None
    ) -> tuple[_Invocation | None, str | None, list[str]]:
        """One invocation: its result (the once handler's ``handle``, and what the handler
        as shipped returned to Lambda), or the point where it was killed; and the messages
        SQS moved to the DLQ after it."""
        once = _once_handler(handler)
        binding = self._bind(once, crash)
        event = {"Records": [queue.record(m) for m in batch]}
        context = LambdaContext(
            self.clock, timeout_s=self.timeout_s, function_arn=self._function_arn
        )
        binding.switch.die_at(context.deadline_s, self.clock)
        guard: contextlib.AbstractContextManager[list[str]] = (
            guarded(once._process) if once.effects == "staged" else contextlib.nullcontext([])
        )
        try:
            with (
                self.role.enforced() if self.role is not None else contextlib.nullcontext(),
                _recording(once) as handled,
                guard as changed,
            ):
                try:
                    response = handler(event, context)
                except BaseException as error:
                    if binding.switch.killed_at is not None:
                        # Killed inside, and a wrapper's own cleanup (a finally: Powertools'
                        # log_metrics flushing, raise_on_empty_metrics) raised on the way
                        # out: in Lambda nothing of it would have run. The kill is the news.
                        raise InvocationKilled(binding.switch.killed_at) from None
                    # A function error, by Lambda's rule (row E): each message comes back
                    # (or moves to the DLQ at its maxReceiveCount); the error is the test's.
                    raised = decide([m.message_id for m in batch], None, error=type(error).__name__)
                    queue.settle(batch, set(raised.delete))
                    raise
            if binding.switch.past_deadline():
                # It returned, but after its deadline: Lambda had killed it, and its batch
                # response was never returned.
                raise InvocationKilled(TIMEOUT)
            if binding.switch.killed_at is not None:
                # A wrapper swallowed the kill: the invocation was dead all the same.
                raise InvocationKilled(binding.switch.killed_at)
            result = _only(handled, handler)
        except InvocationKilled:
            if changed:
                raise AssertionError(violation(changed)) from None
            if not binding.switch.wait_for_the_dead(self.timeout_s):
                raise RuntimeError(
                    f"business code or an AWS call of the killed invocation still runs after "
                    f"{self.timeout_s} s; it should end when Lambda's timeout would"
                ) from None
            # No response: Lambda's rule fails the whole batch (row E), nothing is deleted.
            killed = decide(
                [m.message_id for m in batch], None, error=f"killed at {binding.switch.killed_at}"
            )
            moved = queue.settle(batch, set(killed.delete))
            return None, binding.switch.killed_at, [m.message_id for m in moved]
        # Lambda deletes what the response says, whatever once's outcomes were.
        decision = judge([m.message_id for m in batch], response)
        moved = queue.settle(batch, set(decision.delete))
        if changed:
            raise AssertionError(violation(changed))
        invocation = _Invocation(result, response, decision)
        _warn_if_dropped(invocation, handler)
        return invocation, None, [m.message_id for m in moved]

    def _bind(self, handler: Handler, crash: str | None) -> _Binding:
        """The handler's store and quarantine for the next invocation: the ones already
        bound, unless that invocation dies or the last one did (a new environment)."""
        current = self._bindings.get(id(handler))
        if (
            current is not None
            and crash is None
            and current.switch.point is None
            and current.switch.killed_at is None
        ):
            return current
        handler.bind()  # forget a configuration frozen by an invocation outside this test
        table, prefix, dlq_url, retention_s = _configuration(handler)
        if table not in self._tables:
            self._ensure_table(table)
        if dlq_url and dlq_url not in self._dlqs:
            self._dlqs.append(dlq_url)
        switch = KillSwitch(crash)
        handler.bind(
            store=CrashingStore(
                self.dynamodb, table, retention_s=retention_s, clock=self.clock, switch=switch
            ),
            quarantine=CrashingQuarantine(self.sqs, dlq_url, switch=switch),
            outbox=CrashingOutbox(Outbox(self._client_for), switch=switch),
        )
        binding = _Binding(handler, switch, table, prefix, dlq_url)
        self._bindings[id(handler)] = binding
        return binding

    def _client_for(self, service: str) -> Any:
        """The outbox's clients (``sqs``, ``sns``, ``events``): the kit's own, on moto, SNS's
        and EventBridge's built at their first send."""
        if service == "sns":
            if self.sns is None:
                self.sns = _session(os.environ["AWS_DEFAULT_REGION"]).client("sns")
            return self.sns
        if service == "events":
            if self.events is None:
                self.events = _session(os.environ["AWS_DEFAULT_REGION"]).client("events")
            return self.events
        return self.sqs

    # --- time and state --------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass for leases and retention."""
        self.clock.advance(seconds)

    def expire_leases(self) -> None:
        """Move the clock just past the latest lease of every record in progress."""
        latest = max(
            (
                record.lease_expires_at
                for table in sorted(self._tables)
                for record in self._records(table)
                if record.status == c.STATUS_IN_PROGRESS and record.lease_expires_at
            ),
            default=None,
        )
        if latest is not None:
            # The claim condition is lease_expires_at < now_ms: one whole millisecond past.
            self.clock.advance_to((latest + 2) / 1000)

    def record(self, key: str | int, *, handler: LambdaHandler | None = None) -> Record | None:
        """The stored record of a business key (as stored: ``is_live`` tells whether the
        protocol still sees it). ``handler`` (as ``deliver`` takes it) names the key prefix
        and table when the test delivered to handlers of several services."""
        table, prefix = self._naming(None if handler is None else _once_handler(handler))
        return RecordStore(self.dynamodb, table, clock=self.clock).get(record_id(prefix, str(key)))

    def dlq_messages(self) -> list[Quarantined]:
        """Every message quarantined so far, oldest first; reading leaves them in the DLQ."""
        return [
            Quarantined(
                m["Body"],
                {
                    name: value.get("StringValue", "")
                    for name, value in (m.get("MessageAttributes") or {}).items()
                },
            )
            for url in self._dlqs
            for m in self._peek(url)
        ]

    def _peek(self, url: str) -> list[dict[str, Any]]:
        """Every message of a queue, made visible again at once. A DLQ URL a handler was
        given but that does not exist in the mock holds nothing (its sends failed)."""
        received: list[dict[str, Any]] = []
        try:
            while batch := self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                VisibilityTimeout=300,
            ).get("Messages", []):
                received += batch
        except self.sqs.exceptions.QueueDoesNotExist:
            return []
        for start in range(0, len(received), 10):
            self.sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(received[start : start + 10])
                ],
            )
        return received

    def _naming(self, handler: Handler | None) -> tuple[str, str]:
        if handler is not None:
            with self._as_function(handler):
                table, prefix, _, _ = _configuration(handler)
            return table, prefix
        names = {(b.table_name, b.key_prefix) for b in self._bindings.values()}
        if len(names) > 1:
            raise ValueError(
                "handlers of several services were delivered to: pass handler= to say whose "
                "record this is"
            )
        if names:
            return names.pop()
        return TABLE_NAME, os.environ.get(c.ENV_SERVICE_NAME) or SERVICE_NAME

    def _records(self, table: str) -> list[Record]:
        pages = self.dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        return [Record.from_item(item) for page in pages for item in page["Items"]]

    # --- resources -------------------------------------------------------------------------

    def _queue(self, name: str) -> SourceQueue:
        if name not in self._queues:
            url = self._create_queue(name)
            arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            self._queues[name] = SourceQueue(
                self.sqs,
                url,
                arn["Attributes"]["QueueArn"],
                self.clock,
                dlq_url=self._dlq(name.endswith(".fifo")),
                max_receive_count=self.max_receive_count,
            )
        return self._queues[name]

    def _dlq(self, fifo: bool) -> str:
        """The kit's DLQ, or (created on first use) its FIFO twin."""
        if not fifo:
            return self.dlq_url
        url = self._create_queue(FIFO_DLQ_NAME)
        if url not in self._dlqs:
            self._dlqs.append(url)
        return url

    def _create_queue(self, name: str) -> str:
        attributes = {"SqsManagedSseEnabled": "true"}
        if name.endswith(".fifo"):
            attributes["FifoQueue"] = "true"
        return self.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]

    def _create_table(self, name: str) -> None:
        self.dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}],
        )
        self._tables.add(name)

    def _ensure_table(self, name: str) -> None:
        """A handler made with its own table_name: use that table, creating it if the test
        did not."""
        try:
            self.dynamodb.describe_table(TableName=name)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            self._create_table(name)
        self._tables.add(name)


@functools.cache
def _session(region: str) -> boto3.session.Session:
    """One session per region for the whole run: loading the service models for every test
    would cost more than the test."""
    return boto3.session.Session(region_name=region)


def service_name_of(handler: Handler) -> str:
    """The service name ``once_env`` gives a handler that names none: its business code's
    module and name, as a service name is written (``[A-Za-z0-9._-]``, at most 64
    characters, the end kept). A plain module-level function is one service whichever handler
    object wraps it (a test may build the handler again, as a deploy would). Anything else
    (a lambda, a closure such as a decorator's inner function, a ``functools.partial``, an
    instance of a callable class) has no name that tells two apart: the object itself is
    the service, its name followed by a number for it."""
    process = handler.process
    module = getattr(process, "__module__", None) or "handler"
    qualname = getattr(process, "__qualname__", None)
    if (
        isinstance(process, types.FunctionType)
        and isinstance(qualname, str)
        and "<" not in qualname
    ):
        name = f"{module}.{qualname}"
    else:
        shown = qualname or type(process).__qualname__
        name = f"{module}.{shown}-{_object_number(process)}"
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-" for ch in name)
    return cleaned[-64:].lstrip("._-") or "handler"


#: A number per business-code object that has no name of its own (``service_name_of``), for
#: as long as the object lives.
_NUMBERS: dict[int, tuple[int, Any]] = {}


def _object_number(thing: Any) -> int:
    """A number for ``thing``, the same while it lives (the object is held with it, so that
    its id is never another's)."""
    key = id(thing)
    if key not in _NUMBERS or _NUMBERS[key][1] is not thing:
        _NUMBERS[key] = (len(_NUMBERS) + 1, thing)
    return _NUMBERS[key][0]


def _configuration(handler: Handler) -> tuple[str, str, str | None, int]:
    """The handler's table, key prefix, DLQ and retention, as it resolves them at its first
    invocation; a clear error when it cannot."""
    try:
        table, prefix = handler.table_name, handler.key_prefix
        dlq_url, retention_s = handler.dlq_url, handler.retention_s
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"once_env cannot run this handler: {error}") from error
    if not prefix:
        raise ValueError(
            f"the handler has no key prefix: pass key_prefix= to make_handler or set "
            f"{c.ENV_SERVICE_NAME} (records are stored as <prefix>#<business key>)"
        )
    if not table:
        raise ValueError(
            f"the handler has no idempotency table: pass table_name= to make_handler or "
            f"leave {c.ENV_TABLE_NAME} as once_env sets it"
        )
    return table, prefix, dlq_url, retention_s


def _once_handler(given: object) -> Handler:
    """The once handler in what the test passed: itself, or the one found by following
    ``__wrapped__`` down its wrappers; a clear error when there is none."""
    chain: list[object] = []
    current = given
    while not isinstance(current, Handler):
        chain.append(current)
        try:
            following = current.__wrapped__  # type: ignore[attr-defined]
        except Exception:  # AttributeError, or whatever an odd object's __getattr__ raises
            following = None
        if (
            following is None
            or len(chain) >= _MAX_WRAPPERS
            or any(following is seen for seen in chain)
        ):
            raise TypeError(
                "deliver takes the handler made by once.make_handler, as you ship it: that "
                "handler, or a wrapper of it that keeps __wrapped__ (functools.wraps does; so "
                "do Powertools' Logger.inject_lambda_context, Metrics.log_metrics and "
                f"Tracer.capture_lambda_handler). It got {_followed(chain)}, with no once "
                f"handler down its __wrapped__ chain{_hint(given, chain)}"
            )
        current = following
    return current


def _hint(given: object, chain: Sequence[object]) -> str:
    if isinstance(getattr(given, "__self__", None), Handler):
        return "; pass the handler itself, not one of its methods"
    if len(chain) == 1 and callable(given):
        return "; a wrapper of your own: decorate it with @functools.wraps(handler)"
    return ""


def _followed(chain: Sequence[object]) -> str:
    """What was passed, then what each one wraps: ``function 'app.lambda_handler' -> ...``."""
    shown = []
    for item in chain[:5]:
        name = getattr(item, "__qualname__", None) or getattr(item, "__name__", None)
        kind = type(item).__name__
        shown.append(f"{kind} {name!r}" if isinstance(name, str) else f"{kind} {item!r:.80}")
    if len(chain) > 5:
        shown.append(f"... ({len(chain) - 5} more)")
    return " -> ".join(shown)


@dataclass(frozen=True)
class _Invocation:
    """One invocation that returned: the once handler's ``BatchResult``, what the handler
    as shipped returned to Lambda (the once handler's response, unless a wrapper returned
    another), and what Lambda decided from that response."""

    result: BatchResult
    response: Any
    decision: Decision

    @property
    def lost(self) -> list[str]:
        """Messages once did not acknowledge that Lambda deletes by the response."""
        deleted = set(self.decision.delete)
        return [
            r.message_id
            for r in self.result.records
            if not r.outcome.acknowledged and r.message_id in deleted
        ]

    @property
    def retried(self) -> list[str]:
        """Messages once acknowledged that Lambda leaves for redelivery by the response."""
        kept = set(self.decision.retry)
        return [
            r.message_id
            for r in self.result.records
            if r.outcome.acknowledged and r.message_id in kept
        ]


def _warn_if_dropped(invocation: _Invocation, handler: object) -> None:
    """Warn when the response Lambda got does not carry once's: a failed record deleted
    (lost on AWS), or a batch Lambda cannot read retried whole."""
    shipped = f"the handler passed to deliver ({_followed([handler])})"
    if invocation.lost:
        warnings.warn(
            f"the response {shipped} returned to Lambda ({invocation.response!r:.200}) deletes "
            f"{len(invocation.lost)} message(s) once reported failed "
            f"({invocation.decision.reason}): on AWS they are lost, never delivered again. "
            "Return what the once handler returned (its batchItemFailures).",
            DroppedResponseWarning,
            stacklevel=6,
        )
    elif invocation.retried and invocation.decision.full_failure:
        warnings.warn(
            f"Lambda cannot read the response {shipped} returned "
            f"({invocation.response!r:.200}): {invocation.decision.reason}, so it retries the "
            f"whole batch, {len(invocation.retried)} message(s) once acknowledged among them. "
            "Return what the once handler returned (its batchItemFailures).",
            DroppedResponseWarning,
            stacklevel=6,
        )


@contextlib.contextmanager
def _recording(once: Handler) -> Iterator[list[BatchResult]]:
    """Meanwhile, every ``BatchResult`` the once handler's ``handle`` returns, whoever
    calls it: its ``__call__`` (what the wrappers call) or a wrapper that calls ``handle``.
    An instance attribute shadows the method for the invocation, and is gone after it."""
    handled: list[BatchResult] = []
    own = vars(once)
    had, before = "handle" in own, own.get("handle")
    handle = once.handle

    def recorded(event: dict[str, Any], context: Any) -> BatchResult:
        result = handle(event, context)
        handled.append(result)
        return result

    own["handle"] = recorded
    try:
        yield handled
    finally:
        if had:
            own["handle"] = before
        else:
            own.pop("handle", None)


def _only(handled: list[BatchResult], handler: object) -> BatchResult:
    """The one batch the once handler ran in an invocation."""
    if len(handled) != 1:
        raise AssertionError(
            f"the handler passed to deliver ({_followed([handler])}) ran the once handler it "
            f"wraps {len(handled)} times in one invocation: Lambda's call should run the "
            "batch through it exactly once"
        )
    return handled[0]


def _per_body(
    given: Mapping[str, AttributeValue] | Sequence[Mapping[str, AttributeValue]] | None,
    count: int,
) -> list[dict[str, dict[str, Any]]]:
    """Each body's message attributes in SendMessage's shape."""
    if given is None:
        return [{} for _ in range(count)]
    if isinstance(given, Mapping):
        return [sqs_attributes(given) for _ in range(count)]
    if isinstance(given, str) or len(given) != count:
        raise ValueError(
            f"message_attributes: pass one mapping for every body, or a list of {count} "
            "(one per body)"
        )
    return [sqs_attributes(own) for own in given]


def _texts(bodies: Sequence[dict[str, Any] | str]) -> list[str]:
    if isinstance(bodies, str | dict) or not isinstance(bodies, Sequence):
        raise TypeError(
            "deliver takes a list of bodies (one per SQS message), e.g. [{'orderId': 'o-1'}]"
        )
    if not bodies:
        raise ValueError("deliver needs at least one body: Lambda never invokes with none")
    texts = []
    for index, body in enumerate(bodies):
        if isinstance(body, dict):
            texts.append(json.dumps(body))
        elif isinstance(body, str):
            texts.append(body)
        else:
            raise TypeError(
                f"body {index} is a {type(body).__name__}: pass a dict (sent as JSON) or a "
                "str (sent as it is, e.g. to test a malformed message)"
            )
    return texts
