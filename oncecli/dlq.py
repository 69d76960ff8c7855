"""``once dlq``: what the consumer's DLQ holds, message by message, without taking any.

Why a command: the runbook's first step for a message in the DLQ was the AWS CLI's
``receive-message --visibility-timeout 0 --message-attribute-names All``: ten messages at
most, each attribute as nested JSON, the body (payload values) printed whether wanted or
not. ``once dlq`` lists each message as an operator reads it: the business key once's
quarantine wrote (``once.key``; for a copy without one, the identity an upstream outbox
gave it, ``once.source#once.seq``, which is the key of a consumer keyed on ``SOURCE_KEY``),
why (``once.reason``, ``once.error``), the review fence (``once.fence``), the original
message id, the receive count and the age; the body only with ``--body``.

SQS has no "peek": a message is read by receiving it, which hides it for its visibility
timeout and counts as a receive (its ``ApproximateReceiveCount`` goes up). So every page is
received with a short visibility timeout, long enough that a message is not handed out twice
while the listing goes on (and extended while it does), then every received message is made
visible again at once (``ChangeMessageVisibilityBatch`` to 0), in a ``finally``: a failed or
interrupted listing hides nothing for longer than that timeout. Nothing is ever deleted.
On a FIFO DLQ a received message holds its message group until it is visible again, and SQS
hands out no more of that group meanwhile: the listing names the messages it could not
reach.

The rules relied on:

- ReceiveMessage: at most 10 messages a call; a receipt handle per receive, the newest one
  the one to use; ``SentTimestamp`` and ``ApproximateReceiveCount`` among the system
  attributes ("epoch time in milliseconds").
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html
- Long polling (``WaitTimeSeconds`` > 0) queries all of SQS's servers, so an empty answer
  means no message is visible; short polling samples some and may answer empty while
  messages wait.
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-short-and-long-polling.html
- ChangeMessageVisibilityBatch: at most 10 entries; a timeout of 0 makes a message visible
  at once; a message no longer in flight is a failed entry, not an error.
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibilityBatch.html
- FIFO: "When you receive a message with a message group ID, no more messages for the same
  message group ID are returned unless you delete the message or it becomes visible."
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-queues-understanding-logic.html
- ReceiveMessage answers ``OverLimit`` once the queue's quota of messages in flight is
  reached (120,000 for a standard queue): the listing stops there and says so.
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from once import constants as c
from once.awserrors import error_code
from once.payload import describe_error
from once.sendrules import is_fifo
from oncecli.aws import queue_depth
from oncecli.errors import CliError
from oncecli.operate import resolve_each

#: The command's one-line help (``cli.build_parser``).
HELP = (
    "list the DLQ's messages (key, reason, error, fence, original message id, receive "
    "count, age) without deleting any; bodies only with --body"
)
#: How long a received message stays hidden while the listing goes on; extended at half.
HOLD_S = 30
#: How long each receive waits for a message: long polling, so that an empty answer is true.
WAIT_S = 1
#: Entries per ChangeMessageVisibilityBatch, and messages per ReceiveMessage.
BATCH = 10
#: A line into a pipe or a file is at most this wide (a message's row, its body included).
_WIDE = 1_000_000
#: The columns never folded: short, and unreadable cut.
_WHOLE = frozenset({"reason", "fence", "receives", "sent", "age"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``once dlq``'s own options (the stack and consumer options are the other commands')."""
    parser.add_argument(
        "--body",
        action="store_true",
        help="show each message's body too: payload values (default: no body)",
    )
    parser.add_argument(
        "--json",
        dest="json_path",
        metavar="PATH",
        help="also write the listing as JSON to PATH; - writes it to stdout instead of the "
        "table (default: none)",
    )


@dataclass(frozen=True)
class Listing:
    """What one DLQ showed: its messages as received, and what could not be listed."""

    messages: list[dict[str, Any]]
    #: Messages another reader held when the listing began (a redrive, a consumer).
    in_flight_elsewhere: int
    #: About how many visible messages the listing did not reach (a FIFO group's later ones).
    not_reached: int
    #: Why the listing stopped early, if it did (SQS's in-flight limit).
    stopped: str | None = None


def read(sqs: Any, url: str) -> Listing:
    """Every message of the DLQ at ``url``, each received once and made visible again."""
    held: dict[str, str] = {}  # message id -> its newest receipt handle
    found: dict[str, dict[str, Any]] = {}
    stopped = None
    held_at = time.monotonic()
    try:
        before = queue_depth(sqs, url)
        while True:
            if held and time.monotonic() - held_at > HOLD_S / 2:
                _set_visibility(sqs, url, list(held.values()), HOLD_S)
                held_at = time.monotonic()
            try:
                page = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=BATCH,
                    VisibilityTimeout=HOLD_S,
                    WaitTimeSeconds=WAIT_S,
                    MessageAttributeNames=["All"],
                    MessageSystemAttributeNames=["All"],
                ).get("Messages", [])
            except ClientError as error:
                if error_code(error) != "OverLimit":
                    raise
                stopped = (
                    f"SQS's limit of messages in flight was reached after {len(found)}: the "
                    "others were not listed"
                )
                break
            if not page:
                break
            for message in page:
                held[message["MessageId"]] = message["ReceiptHandle"]
                found.setdefault(message["MessageId"], message)
    except (ClientError, BotoCoreError) as error:
        raise CliError(
            f"reading the DLQ {url}: {describe_error(error)} (the command needs "
            "sqs:GetQueueAttributes, sqs:ReceiveMessage and sqs:ChangeMessageVisibility on it)"
        ) from error
    finally:
        refused = _made_visible(sqs, url, list(held.values()))
    if refused:
        raise CliError(
            f"{refused} of the listed messages could not be made visible again: SQS shows "
            f"them again within {HOLD_S} s"
        )
    messages = list(found.values())
    return Listing(
        messages, before.in_flight, max(0, before.visible - len(messages)), stopped=stopped
    )


def _made_visible(sqs: Any, url: str, handles: list[str]) -> int:
    """Make the received messages visible again; how many SQS refused. A refused call (a role
    without ``sqs:ChangeMessageVisibility``) is a ``CliError`` naming it: the messages show
    again by themselves at the end of their visibility timeout."""
    try:
        return _set_visibility(sqs, url, handles, 0)
    except (ClientError, BotoCoreError) as error:
        raise CliError(
            f"the listed messages of {url} could not be made visible again "
            f"({describe_error(error)}; the command needs sqs:ChangeMessageVisibility on "
            "it): SQS shows them again "
            f"within {HOLD_S} s, nothing was deleted"
        ) from error


def _set_visibility(sqs: Any, url: str, handles: list[str], seconds: int) -> int:
    """Set the visibility timeout of the messages ``handles`` name; how many SQS refused,
    other than those no longer in flight (visible already)."""
    refused = 0
    for start in range(0, len(handles), BATCH):
        entries = [
            {"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": seconds}
            for n, handle in enumerate(handles[start : start + BATCH])
        ]
        response = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        refused += sum(
            1 for f in response.get("Failed", []) if "MessageNotInflight" not in f.get("Code", "")
        )
    return refused


def _attribute(message: dict[str, Any], name: str) -> str | None:
    value = (message.get("MessageAttributes") or {}).get(name) or {}
    found = value.get("StringValue")
    return None if found is None else str(found)


def entry(message: dict[str, Any], now_s: float, *, body: bool) -> dict[str, Any]:
    """One message as ``once dlq`` shows it (and ``--json`` writes it): no payload value
    but its business key, unless ``body``."""
    system = message.get("Attributes") or {}
    source = _attribute(message, c.OUTBOX_ATTR_SOURCE)
    seq = _attribute(message, c.OUTBOX_ATTR_SEQ)
    fence = _attribute(message, c.QUARANTINE_ATTR_FENCE)
    sent_ms = system.get("SentTimestamp")
    sent = None if sent_ms is None else datetime.fromtimestamp(int(sent_ms) / 1000, UTC)
    found: dict[str, Any] = {
        "message_id": message["MessageId"],
        "key": _attribute(message, c.QUARANTINE_ATTR_KEY),
        "identity": f"{source}#{seq}" if source is not None and seq is not None else None,
        "reason": _attribute(message, c.QUARANTINE_ATTR_REASON),
        "error": _attribute(message, c.QUARANTINE_ATTR_ERROR),
        "fence": int(fence) if fence is not None and fence.isdigit() else fence,
        "original_message_id": _attribute(message, c.QUARANTINE_ATTR_MESSAGE_ID),
        "receive_count": int(system.get("ApproximateReceiveCount", 0)),
        "sent_at": None if sent is None else sent.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "age_s": None if sent is None else max(0, int(now_s - sent.timestamp())),
    }
    if body:
        found["body"] = message["Body"]
    return found


def age(seconds: int) -> str:
    """A duration as a person reads it: ``45 s``, ``12 min``, ``5 h 03 min``, ``2 d 04 h``."""
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if days:
        return f"{days} d {hours % 24:02d} h"
    if hours:
        return f"{hours} h {minutes % 60:02d} min"
    return f"{minutes} min" if minutes else f"{seconds} s"


def _table(entries: list[dict[str, Any]], *, body: bool) -> Table:
    table = Table()
    # On a narrow terminal the short fields stay whole; the key, the error and the ids fold.
    for name in ("key", "reason", "error", "fence", "receives", "sent", "age", "message id"):
        table.add_column(name, overflow="fold", no_wrap=name in _WHOLE)
    table.add_column("original message id", overflow="fold")
    if body:
        table.add_column("body", overflow="fold")
    for found in entries:
        key = found["key"] or (f"{found['identity']} (identity)" if found["identity"] else "-")
        cells = [
            key,
            found["reason"] or "-",
            found["error"] or "-",
            "-" if found["fence"] is None else str(found["fence"]),
            str(found["receive_count"]),
            found["sent_at"] or "-",
            "-" if found["age_s"] is None else age(found["age_s"]),
            found["message_id"],
            found["original_message_id"] or "-",
        ]
        if body:
            cells.append(found["body"])
        # Text: a value is never markup; a line break is written as \n, so that a row stays
        # one line (what a grep on the key finds is the whole message).
        table.add_row(*(Text(_one_line(cell)) for cell in cells))
    return table


def _one_line(text: str) -> str:
    """``text`` with its line breaks written as ``\n``, ``\r``."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _notes(entries: list[dict[str, Any]], listing: Listing, url: str) -> list[str]:
    """What the table cannot say by itself, each where it applies."""
    notes = [
        f"{_messages(len(entries))}, none deleted: each was received to be read (its "
        "receive count includes it) and is visible again"
    ]
    if any(not e["key"] and e["identity"] for e in entries):
        notes.append(
            "(identity): the copy names no key; this is its once.source#once.seq, the key "
            "of a consumer keyed on SOURCE_KEY"
        )
    if any(not e["reason"] for e in entries):
        notes.append(
            "reason -: not quarantined by once: SQS moved it after maxReceiveCount receives "
            "(or it was sent here by hand)"
        )
    if entries:
        notes.append(
            "`once inspect KEY` shows a key's record (a WRITE_REFUSED copy under "
            'effects="staged" has none: the refused commit wrote nothing)'
        )
    if listing.stopped:
        notes.append(listing.stopped)
    if listing.in_flight_elsewhere:
        notes.append(
            f"{_messages(listing.in_flight_elsewhere)} in flight elsewhere (a redrive, a "
            "reader of the DLQ) could not be listed: they show once visible again"
        )
    if listing.not_reached and not listing.stopped:
        why = (
            "on a FIFO queue SQS hands out no more of a message group while some of it is "
            "in flight, and once dlq deletes nothing: they follow the listed ones of their "
            "group"
            if is_fifo(url)
            else "another reader took them while the listing ran"
        )
        notes.append(f"about {_messages(listing.not_reached)} not listed: {why}")
    return notes


def _messages(count: int) -> str:
    return f"{count} message{'' if count == 1 else 's'}"


def _print_table(console: Console, table: Table) -> None:
    """On a terminal, at its width; into a pipe or a file, at the table's own width, so that
    each message is one line and nothing is folded."""
    if console.is_terminal:
        console.print(table)
        return
    width = console.measure(table, options=console.options.update_width(_WIDE)).maximum
    saved = console.width
    console.width = max(saved, width)
    try:
        console.print(table)
    finally:
        console.width = saved


def dlq(args: argparse.Namespace, console: Console) -> int:
    """``once dlq``: each consumer's DLQ (``--consumer``'s only, if given), message by
    message; ``--json`` writes the same to a file (``-``: to stdout, instead of the table)."""
    document = []
    for target in resolve_each(args):
        url = target.outputs["DlqUrl"]
        listing = read(target.sqs, url)
        now_s = time.time()
        entries = [entry(m, now_s, body=args.body) for m in listing.messages]
        document.append(
            {
                "stack": target.stack,
                "consumer": target.consumer,
                "dlq_url": url,
                "messages": entries,
                "in_flight_elsewhere": listing.in_flight_elsewhere,
                "not_reached": listing.not_reached,
            }
        )
        if args.json_path == "-":
            continue
        if not entries and not listing.in_flight_elsewhere:
            console.print(f"once dlq: {target.title}: the DLQ is empty ({url})", soft_wrap=True)
            continue
        console.print(f"once dlq: {target.title} ({url})", soft_wrap=True)
        if entries:
            _print_table(console, _table(entries, body=args.body))
        for note in _notes(entries, listing, url):
            console.print(note, soft_wrap=True, markup=False)
    text = json.dumps({"consumers": document}, indent=2, ensure_ascii=False) + "\n"
    if args.json_path == "-":
        console.file.write(text)
    elif args.json_path:
        Path(args.json_path).write_text(text)
    return 0
