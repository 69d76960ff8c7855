"""An existing queue as an ``OnceConsumer``'s source (``queue=``): what the construct reads
of it, what it refuses, and what it cannot see.

The construct builds its own queue to once's rules (``once_cdk.settings``). A queue it is
given was built by someone else, so the same rules are checked on it instead of applied, the
AWS Solutions Constructs way (a pattern takes what exists or builds it, never both): the
construct builds neither a queue nor a DLQ, and exposes what it was given.

- A queue of this app (an ``sqs.Queue``) is read and held to the rules at construction:
  FIFO or standard as ``fifo=`` says; a visibility timeout of at least 6 x the function
  timeout + the batching window; a redrive policy to a DLQ, whose maxReceiveCount passes
  the rule a given ``max_receive_count`` is held to; encrypted at rest and refusing
  requests without TLS; its DLQ of the same type, encrypted, TLS only, and keeping messages
  longer than the queue. A refusal names the setting, the rule and what to set.
- An imported queue (``Queue.from_queue_arn``, ``from_queue_attributes``) cannot be read:
  the construct checks what the import tells (FIFO, from a concrete ARN) and warns, with an
  annotation (``QUEUE_NOT_CHECKED``), naming every setting the team must ensure itself, with
  the values that pass. Its DLQ is unknown: the consumer's ``dlq`` is None (see ``read``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from aws_cdk import Stack, Token
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from once import constants as c
from once_cdk.settings import (
    MIN_MAX_RECEIVE_COUNT,
    RETRY_WINDOW_VISIBILITY_TIMEOUTS,
    SQS_MAX_RECEIVE_COUNT,
    VISIBILITY_TIMEOUT_FACTOR,
    ConfigurationError,
    ConsumerSettings,
    describe_backoff,
    passing_receive_counts,
    retry_window_s,
)

#: The id of the warning an existing queue gets for what the construct could not check; a
#: team that ensured it acknowledges it: ``Annotations.of(consumer).acknowledge_warning(id)``.
QUEUE_NOT_CHECKED: Final = "once-cdk:existingQueueNotChecked"
#: SQS's visibility timeout for a queue created without one (CreateQueue's
#: VisibilityTimeout: "Default: 30" seconds;
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html).
#: Its retention unset is ``c.DEFAULT_SOURCE_RETENTION_S`` (4 days), its longest
#: ``c.DLQ_RETENTION_S`` (14 days).
SQS_DEFAULT_VISIBILITY_TIMEOUT_S: Final = 30


@dataclasses.dataclass(frozen=True)
class ExistingQueue:
    """What the construct knows of the queue it was given: None where it could not read."""

    queue: Any  # sqs.IQueue
    #: The DLQ of its redrive policy (an ``sqs.Queue``'s ``dead_letter_queue``); None for an
    #: imported queue, whose redrive policy the construct cannot see.
    dlq: Any  # sqs.IQueue | None
    visibility_timeout_s: int | None
    retention_s: int | None
    max_receive_count: int | None
    #: The settings it could not check, each with the value that passes: the warning's.
    unchecked: tuple[str, ...]

    def warning(self, consumer_path: str) -> str:
        """The annotation's text: what the team must ensure on the queue."""
        items = "; ".join(f"({n}) {item}" for n, item in enumerate(self.unchecked, 1))
        return (
            f"OnceConsumer {consumer_path} consumes the queue {_path(self.queue)}, whose "
            f"settings it could not read, so could not check: {items}. once's guarantees rest "
            "on them: ensure each on the queue, then acknowledge this warning with "
            f"Annotations.of(consumer).acknowledge_warning('{QUEUE_NOT_CHECKED}')"
        )


def read(queue: object, settings: ConsumerSettings, max_receive_count: int | None) -> ExistingQueue:
    """Read ``queue`` and hold it to once's rules for a consumer with ``settings`` (those of
    its arguments, already checked); raise ``ConfigurationError`` listing every rule it
    breaks."""
    if not all(hasattr(queue, name) for name in ("queue_arn", "queue_url", "fifo", "node")):
        raise ConfigurationError(
            f"queue={queue!r}: expected an aws_sqs.IQueue: an sqs.Queue of this app, or one "
            "imported with sqs.Queue.from_queue_arn / from_queue_attributes; or None for "
            "the queue the construct builds"
        )
    problems: list[str] = []
    if max_receive_count is not None:
        # As Solutions Constructs refuse queueProps beside existingQueueObj: the argument
        # configures the queue the construct would build, which it does not.
        problems.append(
            f"max_receive_count={max_receive_count} with queue=: the existing queue's redrive "
            "policy holds maxReceiveCount (sqs.DeadLetterQueue(queue=..., "
            "max_receive_count=N) on it); leave max_receive_count unset"
        )
    for mapping in _mappings_polling(queue):
        # SQS hands a message to one poller at a time, and a redelivery may go to the other:
        # a consumer beside it, with a table of its own (or none), would run again what this
        # one already ran.
        problems.append(
            f"queue={_path(queue)}: the event source mapping {mapping} already polls it: a "
            "once consumer must be its queue's only consumer, or a message that one of them "
            "ran may be delivered again to the other, which runs it again; give each "
            "consumer its own queue (to fan out, an SNS topic with one queue per consumer)"
        )
    existing = (
        _read_queue(queue, settings, problems)
        if isinstance(queue, sqs.Queue)
        else _read_import(queue, settings, problems)
    )
    if problems:
        raise ConfigurationError(
            "OnceConsumer queue= refused:\n" + "\n".join(f"- {p}" for p in problems)
        )
    return existing


def _read_queue(queue: sqs.Queue, settings: ConsumerSettings, problems: list[str]) -> ExistingQueue:
    """An ``sqs.Queue`` of this app: every rule that its construct shows."""
    name, unchecked = f"queue={_path(queue)}", []
    _check_fifo(name, queue.fifo, settings.fifo, problems)
    _check_protected(name, "it", queue, problems)
    cfn: sqs.CfnQueue = queue.node.default_child  # type: ignore[assignment]

    # Lambda: "set the source queue's visibility timeout to at least six times the
    # configuration timeout on your function", plus the batching window (the records of a
    # batch wait in it before the invocation starts), so that a batch still running is not
    # delivered again: https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html
    # (VISIBILITY_TIMEOUT_FACTOR, the same rule the built queue is derived by).
    needed = settings.visibility_timeout_s
    visibility = _number(cfn.visibility_timeout, SQS_DEFAULT_VISIBILITY_TIMEOUT_S)
    if visibility is None:
        unchecked.append(_visibility_rule(settings))
    elif visibility < needed:
        problems.append(
            f"{name}: its visibility timeout, {visibility} s, is shorter than "
            f"{VISIBILITY_TIMEOUT_FACTOR} x the function timeout ({settings.timeout_s:g} s) "
            f"+ the batching window ({settings.batching_window_s:g} s) = {needed} s, Lambda's "
            "guidance for an SQS source: a batch still running would be delivered again. "
            f"Give the queue visibility_timeout=Duration.seconds({needed}) or more"
        )
    retention = _number(cfn.message_retention_period, c.DEFAULT_SOURCE_RETENTION_S)
    if retention is None:
        unchecked.append(_retention_rule(settings))

    dead_letter, count = queue.dead_letter_queue, None
    if dead_letter is None:
        # Nothing is ever acknowledged that is neither done nor in the DLQ (DESIGN): the
        # quarantine sends permanent failures there, the redrive policy moves the rest after
        # maxReceiveCount receives. Lambda: "Using a dead-letter queue (DLQ): Specify a
        # dead-letter queue to capture messages that the Lambda function fails to process":
        # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-configure-lambda-function-trigger.html
        passing = _passing(visibility or needed, settings, retention)
        problems.append(
            f"{name}: it has no dead-letter queue: once quarantines permanent failures to it, and "
            "without a redrive policy a message that keeps failing is retried until the "
            "queue's retention deletes it, lost. Give the queue dead_letter_queue="
            f"sqs.DeadLetterQueue(queue=<its DLQ>, max_receive_count=N){_count_advice(passing)}"
            ", its DLQ encrypted, TLS only and keeping messages 14 days"
        )
    else:
        count = _number(dead_letter.max_receive_count, None)
        if count is None:
            unchecked.append(_count_rule(settings, visibility or needed, retention))
        else:
            _check_count(name, count, visibility or needed, retention, settings, problems)
        _check_dlq(name, queue, dead_letter.queue, retention, unchecked, problems)
    dlq = None if dead_letter is None else dead_letter.queue
    return ExistingQueue(queue, dlq, visibility, retention, count, tuple(unchecked))


def _read_import(queue: Any, settings: ConsumerSettings, problems: list[str]) -> ExistingQueue:
    """An imported queue: its type, when the ARN says it; the rest is for the warning."""
    unchecked: list[str] = []
    if Token.is_unresolved(queue.queue_arn):
        kind = "a FIFO" if settings.fifo else "a standard"
        unchecked.append(f"{kind} queue, as fifo={settings.fifo} says")
    else:
        # CDK reads the type from the name in a concrete ARN (".fifo"), as SQS names it.
        _check_fifo(f"queue={_path(queue)}", queue.fifo, settings.fifo, problems)
    unchecked += [
        _visibility_rule(settings),
        _count_rule(settings, settings.visibility_timeout_s, c.DEFAULT_SOURCE_RETENTION_S),
        _retention_rule(settings),
        "encryption at rest (SQS-managed SSE, or KMS; with a customer managed key, import "
        "the queue with sqs.Queue.from_queue_attributes(..., key_arn=...) so that the "
        "function may decrypt) and a queue policy that denies requests without TLS "
        "(aws:SecureTransport false), on its DLQ too",
        "its DLQ, unknown to the construct: the function gets no DLQ_URL, so permanent "
        "failures are retried until the redrive policy moves them instead of quarantined at "
        "once (give make_handler dlq_url= and grant the function sqs:SendMessage on the DLQ to "
        "keep the quarantine), the consumer has no DlqDepth alarm (alarm on the DLQ yourself) "
        "and add_cli_outputs refuses it",
    ]
    return ExistingQueue(queue, None, None, None, None, tuple(unchecked))


def _check_fifo(name: str, fifo: Any, wanted: bool, problems: list[str]) -> None:
    """FIFO as ``fifo=`` says: the mapping's rules (a batch of at most 10, no batching window)
    and the runtime's order per group follow from it."""
    if bool(fifo) == wanted:
        return
    if fifo:
        problems.append(
            f"{name}: it is a FIFO queue and fifo=False: pass fifo=True, so that the mapping is "
            "held to a FIFO source's rules (a batch of at most 10, no batching window)"
        )
    else:
        problems.append(
            f"{name}: it is a standard queue and fifo=True: pass fifo=False, or give a FIFO queue "
            "(sqs.Queue(..., fifo=True) with a FIFO DLQ)"
        )


def _check_protected(name: str, subject: str, queue: sqs.Queue, problems: list[str]) -> None:
    """Encrypted at rest and TLS only, as every queue the construct builds.

    SSE: "Server-side encryption (SSE) lets you transmit sensitive data in encrypted queues"
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-server-side-encryption.html);
    a queue created without a setting gets SSE-SQS, as cdk-nag's AwsSolutions-SQS2 counts
    it, so only an explicit ``QueueEncryption.UNENCRYPTED`` is refused. TLS: "Enforce
    encryption of data in transit ... use the aws:SecureTransport condition on the queue
    policy" (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-security-best-practices.html,
    cdk-nag's AwsSolutions-SQS4).
    """
    if queue.encryption_type == sqs.QueueEncryption.UNENCRYPTED:
        problems.append(
            f"{name}: {subject} is not encrypted at rest: every queue of a once consumer "
            "carries business payloads under SSE; give it "
            "encryption=sqs.QueueEncryption.SQS_MANAGED (or a KMS key)"
        )
    if not _refuses_plain_http(queue):
        problems.append(
            f"{name}: {subject} accepts requests without TLS: every queue of a once consumer "
            "denies them in its queue policy; give it enforce_ssl=True"
        )


def _check_count(
    name: str,
    count: int,
    visibility: int,
    retention: int | None,
    settings: ConsumerSettings,
    problems: list[str],
) -> None:
    """The redrive policy's maxReceiveCount against the rule a given ``max_receive_count``
    is held to (``ConsumerSettings``), with the queue's own visibility timeout and retention.

    Lambda: "set the maxReceiveCount on the source queue's redrive policy to at least 5"
    (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html), once's
    MIN_MAX_RECEIVE_COUNT; the handler's backoff must not send a message to the DLQ before
    RETRY_WINDOW_VISIBILITY_TIMEOUTS visibility timeouts have passed; SQS takes at most
    SQS_MAX_RECEIVE_COUNT; and whole visibility timeouts must fit the queue's retention.
    """
    kept = retention or c.DEFAULT_SOURCE_RETENTION_S
    passing = _passing(visibility, settings, retention)
    if count in passing:
        return
    needed = RETRY_WINDOW_VISIBILITY_TIMEOUTS * visibility
    window = retry_window_s(count, settings.backoff, visibility)
    reasons: list[str] = []
    if count < MIN_MAX_RECEIVE_COUNT:
        reasons.append(
            f"fewer than {MIN_MAX_RECEIVE_COUNT} receives send a message to the DLQ after too "
            "few attempts"
        )
    elif window < needed:
        reasons.append(
            f"under {describe_backoff(settings.backoff)} its retries end after {window} s, "
            f"before {RETRY_WINDOW_VISIBILITY_TIMEOUTS} of its visibility timeouts "
            f"({needed} s): a BUSY copy of a live batch, or an outage longer than {window} s, "
            "would send messages to the DLQ"
        )
    if count > SQS_MAX_RECEIVE_COUNT:
        reasons.append(f"SQS takes at most {SQS_MAX_RECEIVE_COUNT}")
    elif count * visibility >= kept:
        reasons.append(
            f"{count} x its visibility timeout {visibility} s is not shorter than its "
            f"retention ({kept} s): messages would expire before reaching the DLQ"
        )
    advice = _count_advice(passing, "; give its sqs.DeadLetterQueue max_receive_count")
    problems.append(
        f"{name}: its redrive policy's maxReceiveCount is {count}: {'; '.join(reasons)}{advice}"
    )


def _check_dlq(
    name: str,
    queue: sqs.Queue,
    dlq: sqs.IQueue,
    retention: int | None,
    unchecked: list[str],
    problems: list[str],
) -> None:
    """The DLQ of a queue of this app, where it is one too.

    SQS: "The dead-letter queue of a FIFO queue must also be a FIFO queue. Similarly, the
    dead-letter queue of a standard queue must also be a standard queue", and "always set
    the retention period of a dead-letter queue to be longer than the retention period of
    the original queue" (a message keeps its first enqueue time there):
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html
    """
    if not isinstance(dlq, sqs.Queue):
        unchecked.append(
            f"its DLQ {_path(dlq)} (imported): {'a FIFO' if queue.fifo else 'a standard'} "
            "queue like it, encrypted at rest, denying requests without TLS, keeping messages "
            "longer than the queue (14 days)"
        )
        return
    subject = f"its DLQ {_path(dlq)}"
    if dlq.fifo != queue.fifo:
        kinds = ("a FIFO", "a standard") if dlq.fifo else ("a standard", "a FIFO")
        problems.append(
            f"{name}: {subject} is {kinds[0]} queue and the queue {kinds[1]} one: SQS takes a "
            "DLQ of the queue's own type only"
        )
    _check_protected(name, subject, dlq, problems)
    cfn: sqs.CfnQueue = dlq.node.default_child  # type: ignore[assignment]
    kept = _number(cfn.message_retention_period, c.DEFAULT_SOURCE_RETENTION_S)
    if kept is None or retention is None:
        unchecked.append("its DLQ's retention, longer than the queue's (14 days)")
    elif kept <= retention and kept < c.DLQ_RETENTION_S:
        problems.append(
            f"{name}: {subject} keeps messages {kept} s, not longer than the queue's "
            f"{retention} s: a message keeps its first enqueue time in the DLQ and would "
            "expire there soon after it arrived; give the DLQ "
            f"retention_period=Duration.days({c.DLQ_RETENTION_S // c.DAY_S})"
        )


def _passing(visibility: int, settings: ConsumerSettings, retention: int | None) -> range:
    return passing_receive_counts(
        visibility, settings.backoff, retention or c.DEFAULT_SOURCE_RETENTION_S
    )


def _count_advice(passing: range, lead: str = " with N") -> str:
    if not passing:
        return (
            "; no maxReceiveCount passes with this visibility timeout and retention: shorten "
            "the visibility timeout (not below 6 x the function timeout + the batching "
            "window) or the function timeout, or lengthen the retention"
        )
    return f"{lead} from {passing.start} to {passing.stop - 1}"


def _visibility_rule(settings: ConsumerSettings) -> str:
    return (
        f"a visibility timeout of at least {settings.visibility_timeout_s} s "
        f"({VISIBILITY_TIMEOUT_FACTOR} x the function timeout + the batching window)"
    )


def _count_rule(settings: ConsumerSettings, visibility: int, retention: int | None) -> str:
    passing = _passing(visibility, settings, retention)
    counts = (
        f"from {passing.start} to {passing.stop - 1}"
        if passing
        else "that covers 5 visibility timeouts (none fits: shorten the timeout)"
    )
    return (
        f"a redrive policy to a DLQ with maxReceiveCount {counts} (under "
        f"{describe_backoff(settings.backoff)}, with a {visibility} s visibility timeout)"
    )


def _retention_rule(settings: ConsumerSettings) -> str:
    days = settings.source_retention_s // c.DAY_S
    return (
        f"a retention of at most {days} days: records are kept for "
        f"{settings.record_retention_s // c.DAY_S} days, the queue's retention + the DLQ's "
        "14 days + 1, so that a late redrive is still deduplicated"
    )


def _number(value: Any, default: int | None) -> int | None:
    """A CloudFormation property as a number: the default when unset, None when a token
    hides it."""
    if value is None:
        return default
    if Token.is_unresolved(value):
        return None
    return int(value)


def _mappings_polling(queue: Any) -> list[str]:
    """The paths of the event source mappings in the app already polling ``queue``: in its
    stack (a reference resolves to the same attribute), or by the same concrete ARN."""
    stack = Stack.of(queue)
    arn = stack.resolve(queue.queue_arn)
    return [
        node.node.path
        for node in queue.node.root.node.find_all()
        if isinstance(node, lambda_.CfnEventSourceMapping)
        and (isinstance(arn, str) or Stack.of(node) is stack)
        and stack.resolve(node.event_source_arn) == arn
    ]


def _refuses_plain_http(queue: sqs.Queue) -> bool:
    """Whether a queue policy in the queue's stack denies every action on it to requests
    without TLS (what ``enforce_ssl=True`` writes)."""
    stack = Stack.of(queue)
    url = stack.resolve(queue.queue_url)
    for node in stack.node.find_all():
        if isinstance(node, sqs.CfnQueuePolicy) and url in stack.resolve(node.queues):
            document = stack.resolve(node.policy_document) or {}
            if any(_denies_plain_http(s) for s in document.get("Statement", [])):
                return True
    return False


def _denies_plain_http(statement: dict[str, Any]) -> bool:
    actions = statement.get("Action", [])
    actions = [actions] if isinstance(actions, str) else actions
    secure = statement.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")
    return (
        statement.get("Effect") == "Deny"
        and str(secure).lower() == "false"
        and any(action.lower() in ("sqs:*", "*") for action in actions)
    )


def _path(queue: Any) -> str:
    return str(queue.node.path)
