"""``once event`` and ``once invoke``: one invocation of a consumer's function on an SQS
event file, as ``sam local generate-event sqs`` and ``sam local invoke -e`` give one.

Why here and not through the queue: a team reproduces one batch as it was (a captured
event, a hand-written body, a record that failed) and sees what the function did with each
record and what it answered, without the mapping's polling, retries and backoff in between.
The function runs as ``once up`` runs it: its deployed configuration and asset, its role
enforced, every AWS call it makes going to the local cloud ``once up`` serves
(``LocalCloud.attach``). What Lambda does with the answer (which messages are deleted) is
judged by Lambda's rule for a batch response (``once.batchresponse``, the one the local
cloud's mapping and the test kit apply) and printed; no
message is deleted: the event's records were never in the queue.

``once event`` writes message attributes too (``--attribute``), and the identity an upstream
once outbox gives a message (``--identity``, ``--source-of``: ``once.source`` and
``once.seq``, what a consumer keyed on ``SOURCE_KEY`` reads), each checked by SQS's own rules
(``once.sendrules``) so that an event holds nothing a queue would refuse.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from once import constants as c
from once import identity
from once import sendrules as rules
from once.batchresponse import MALFORMED, decide
from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION, STACK_ENV
from oncecli.errors import CliError, UsageError
from oncecli.localcloud.cloud import LocalCloud
from oncecli.localcloud.emf import Shipper
from oncecli.localcloud.mapping import Worker, event_record
from oncecli.project import Project

#: The source queue an event names when no stack's queue is given.
EXAMPLE_QUEUE = "once-event"


#: A message attribute as SendMessage takes it: its name, data type and value.
Attribute = tuple[str, str, str]


def event(
    bodies: list[str],
    *,
    fifo_group: str | None = None,
    queue_arn: str | None = None,
    message_attributes: Sequence[Sequence[Attribute]] = (),
) -> dict[str, Any]:
    """An SQS event for Lambda holding ``bodies``, each a record as the event source
    mapping hands it over: a new message id, a first receive, from a FIFO queue in group
    ``fifo_group`` (with a deduplication id and a sequence number) if given, with the
    message attributes ``message_attributes`` gives for it (one sequence a body, if given),
    in Lambda's shape (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html)."""
    suffix = ".fifo" if fifo_group is not None else ""
    arn = queue_arn or f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:{EXAMPLE_QUEUE}{suffix}"
    now_ms = int(time.time() * 1000)
    records = []
    per_body = list(message_attributes) or [()] * len(bodies)
    for n, (body, own) in enumerate(zip(bodies, per_body, strict=True)):
        attributes = {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(now_ms),
            "SenderId": LOCAL_ACCOUNT,
            "ApproximateFirstReceiveTimestamp": str(now_ms),
        }
        if fifo_group is not None:
            attributes |= {
                "MessageGroupId": fifo_group,
                "MessageDeduplicationId": hashlib.sha256(body.encode()).hexdigest(),
                "SequenceNumber": str(10**19 + now_ms * 1000 + n),
            }
        message = {
            "MessageId": str(uuid.uuid4()),
            "ReceiptHandle": uuid.uuid4().hex,
            "Body": body,
            "Attributes": attributes,
            "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),  # SQS digests a body so
            "MessageAttributes": {
                name: {"DataType": data_type, "StringValue": value}
                for name, data_type, value in own
            },
        }
        records.append(event_record(message, arn, LOCAL_REGION))
    return {"Records": records}


def add_event_arguments(parser: argparse.ArgumentParser) -> None:
    """``once event``'s options for message attributes: the team's, and the identity an
    upstream once outbox gives a message (what a consumer keyed on ``SOURCE_KEY`` reads)."""
    parser.add_argument(
        "--attribute",
        action="append",
        metavar="NAME[:TYPE]=VALUE",
        help="a message attribute on every record, repeatable: NAME=VALUE a String, "
        "NAME:Number=VALUE a Number (a custom label too, e.g. NAME:Number.int=3); names and "
        "values as SQS takes them (default: none)",
    )
    identities = parser.add_mutually_exclusive_group()
    identities.add_argument(
        "--identity",
        metavar="SOURCE#SEQ",
        help=f"{c.OUTBOX_ATTR_SOURCE}=SOURCE and {c.OUTBOX_ATTR_SEQ}=SEQ on every record, "
        "e.g. an identity copied from a log line or `once dlq` (default: none)",
    )
    identities.add_argument(
        "--source-of",
        metavar="RECORD_ID",
        help="the records as one new operation of the upstream record RECORD_ID (its "
        "service#key, e.g. refunds#r-1) sends them from its outbox: "
        f"{c.OUTBOX_ATTR_SOURCE} = RECORD_ID escaped @ a new token, {c.OUTBOX_ATTR_SEQ} = "
        "0, 1, ... (default: none)",
    )


def parse_attribute(pair: str) -> Attribute:
    """``NAME=VALUE`` (a String) or ``NAME:TYPE=VALUE`` as an attribute, checked by SQS's
    rules (``once.sendrules``); a ``UsageError`` says what SQS would refuse."""
    spec, sep, value = pair.partition("=")
    if not sep:
        raise UsageError(f"--attribute {pair!r}: expected NAME=VALUE or NAME:Number=VALUE")
    name, _, data_type = spec.partition(":")
    data_type = data_type or "String"
    if not rules.attribute_name_taken(name):
        raise UsageError(
            f"--attribute {pair!r}: SQS refuses the name {name!r} (A-Z a-z 0-9 _ - . only, "
            "up to 256, not starting with AWS. or Amazon., no period first, last or twice in "
            "a row)"
        )
    base = rules.data_type_base(data_type)
    if base not in ("String", "Number"):
        raise UsageError(
            f"--attribute {pair!r}: the type must be String or Number (with a custom label "
            f"if wanted, e.g. Number.int), not {data_type!r}"
        )
    if not rules.value_taken(base, value, to_topic=False):
        rule = (
            "a number of up to 38 digits, between 10^-128 and 10^126"
            if base == "Number"
            else "not empty, and no control character but tab, newline and carriage return"
        )
        raise UsageError(f"--attribute {pair!r}: SQS refuses the value as a {base} ({rule})")
    return name, data_type, value


def _identity(text: str) -> tuple[str, int]:
    """``--identity SOURCE#SEQ`` as its source and seq (the ``#`` is the last one)."""
    source, sep, seq = text.rpartition("#")
    if not sep or not seq.isdigit() or not rules.text_taken(source, to_topic=False):
        raise UsageError(
            f"--identity {text!r}: expected SOURCE#SEQ, SEQ a whole number (as a SOURCE_KEY "
            "key reads, e.g. refunds#r-1@9552ed89e9144924b35b35d514cd9d09#0)"
        )
    return source, int(seq)


def event_attributes(args: argparse.Namespace, count: int) -> list[tuple[Attribute, ...]]:
    """Each of ``count`` (at least 1) records' attributes, as ``--attribute``,
    ``--identity`` and ``--source-of`` give them."""
    given = [parse_attribute(pair) for pair in args.attribute or []]
    if args.identity:
        identities = [identity.identity_attributes(*_identity(args.identity))] * count
    elif args.source_of:
        source = identity.source_of(args.source_of, identity.new_token())
        identities = [identity.identity_attributes(source, n) for n in range(count)]
    else:
        identities = [()] * count
    found = [(*given, *own) for own in identities]
    names = [name for name, _, _ in found[0]]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"attribute {', '.join(twice)} given twice: give each name once")
    if len(names) > rules.MAX_ATTRIBUTES:
        raise UsageError(
            f"{len(names)} attributes: SQS takes at most {rules.MAX_ATTRIBUTES} on a message"
        )
    return found


def write_event(args: argparse.Namespace) -> int:
    """``once event``: the event, as JSON on stdout."""
    bodies = list(args.body)
    if args.file:
        bodies += [line for line in Path(args.file).read_text().splitlines() if line.strip()]
    if not bodies:
        raise UsageError("no body: pass each message body as an argument, or --file JSONL")
    attributes = event_attributes(args, len(bodies))
    for n, (body, own) in enumerate(zip(bodies, attributes, strict=True), start=1):
        _check_sendable(n, body, own)
    written = event(bodies, fifo_group=args.fifo_group, message_attributes=attributes)
    print(json.dumps(written, indent=2))
    return 0


def _check_sendable(n: int, body: str, attributes: Sequence[Attribute]) -> None:
    """Refuse (``UsageError``) a message no queue would take, so that the event holds only
    what SQS could deliver: a body with a character SQS refuses, or a message over 1 MiB with
    its attributes (``once.sendrules``, each rule cited there)."""
    if not rules.text_taken(body, to_topic=False):
        raise UsageError(
            f"body {n}: SQS refuses it (empty, or a character outside #x9, #xA, #xD, "
            "#x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF): no queue would deliver it"
        )
    size = rules.message_bytes(body, attributes)
    if size > rules.SQS_MESSAGE_MAX_BYTES:
        raise UsageError(
            f"body {n}: {size} bytes with its attributes; SQS takes at most "
            f"{rules.SQS_MESSAGE_MAX_BYTES} in one message"
        )


def _read_event(path: str) -> dict[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        found = json.loads(text)
    except ValueError as error:
        raise UsageError(f"{path} is not JSON: {error}") from error
    records = found.get("Records") if isinstance(found, dict) else None
    if not isinstance(records, list) or not records:
        raise UsageError(f"{path} is not an SQS event: it has no Records (`once event` writes one)")
    for record in records:
        if not isinstance(record, dict) or not {"messageId", "body"} <= set(record):
            raise UsageError(f"{path}: each record needs at least messageId and body")
    return found


def _outcomes(log: str) -> dict[str, tuple[str, str]]:
    """Each record's outcome and reason, from once's log lines (``message_id``,
    ``outcome``): the last line of each message wins."""
    found: dict[str, tuple[str, str]] = {}
    for line in log.splitlines():
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            entry = json.loads(text)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("message_id") and entry.get("outcome"):
            found[str(entry["message_id"])] = (str(entry["outcome"]), str(entry.get("reason", "")))
    return found


def invoke(args: argparse.Namespace, console: Console, context: dict[str, str]) -> int:
    """``once invoke``: run the consumer's function once on the event; print its log, each
    record's outcome and the batch response. Exit 1 if the function raised, timed out or
    crashed."""
    payload = _read_event(args.event)
    cloud = LocalCloud(
        assembly=args.template_dir,
        context=context,
        project=None if args.template_dir else Project.find(app=args.app),
    ).attach(args.endpoint_url, args.dynamodb_endpoint_url)
    consumer = cloud.consumer(args.stack or os.environ.get(STACK_ENV) or None, args.consumer)
    with tempfile.TemporaryDirectory(prefix="once-invoke-") as tmp:
        log = Path(tmp) / "function.log"
        worker = Worker(
            consumer.function,
            {**consumer.function.environment, **cloud.worker_env(consumer)},
            str(log),
        )
        # Its metrics and lines go where a worker's of `once up` go: `once status` and
        # `once logs` count this invocation as one of the mapping's.
        shipper = Shipper(cloud.client("cloudwatch"), cloud.client("logs"))
        shipper.follow(log, consumer.function.log_group)
        worker.launch()
        try:
            worker.wait_ready()
            response, error, trouble = worker.invoke(payload)
        finally:
            worker.close()
            shipper.ship()
        lines = log.read_text() if log.is_file() else ""
    sys.stderr.write(lines)
    ids = [str(r["messageId"]) for r in payload["Records"]]
    decision = decide(
        ids,
        response,
        error=error,
        report_batch_item_failures=consumer.mapping.report_batch_item_failures,
    )
    logged = _outcomes(lines)
    table = Table(title=f"once invoke: {consumer.stack} ({consumer.name})", title_justify="left")
    table.add_column("message id", no_wrap=True)
    table.add_column("once's outcome")
    table.add_column("Lambda would")
    for message_id in ids:
        outcome, reason = logged.get(message_id, ("-", ""))
        table.add_row(
            message_id,
            f"{outcome} ({reason})" if reason else outcome,
            "delete it" if message_id in decision.delete else "leave it for redelivery",
        )
    console.print(table)
    answered = "not valid JSON" if response is MALFORMED else json.dumps(response)
    console.print(
        f"batch response: {answered if error is None else error}", soft_wrap=True, markup=False
    )
    console.print(f"by AWS's rules: {decision.reason}", soft_wrap=True, markup=False)
    if error is not None:
        raise CliError(f"the function failed ({trouble or 'raised'}): {error}")
    return 0
