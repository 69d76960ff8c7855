"""moto's EventBridge as AWS runs it: PutEvents held to AWS's rules, and an event delivered to
an SQS target in AWS's shape; ``install()`` patches moto in the current process.

Why: a team's code that puts events on a bus, and the consumer a rule feeds, are tested on
moto (``once_env`` in the test's process, the local cloud's moto server). Where moto departs
from AWS a test would pass here and fail there, or read what AWS never sends:

- **The event's shape.** An SQS target without an input transformation gets the event as
  EventBridge sends it: ``version``, ``id``, ``detail-type``, ``source``, ``account``,
  ``time`` (ISO 8601 in UTC, ``2026-01-01T00:00:00Z``), ``region``, ``resources``,
  ``detail`` (https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html).
  moto's leaves ``account`` out and its own ``ingestion-time`` field in.
- **A target's input** (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_Target.html):
  ``Input`` is sent as it is, ``InputPath`` sends the part of the event its JSONPath selects
  (``$.detail``: the detail's JSON alone; moto 5.2.5 ignores it and sends the whole event),
  ``InputTransformer`` fills its template as EventBridge does (``transformed``: moto's
  leaves a string unquoted, and a JSON template invalid).
- **PutEvents' rules** (``once.sendrules``, the runtime's own: not written again here): more
  than ``EVENTS_MAX_ENTRIES`` entries, or entries that together reach
  ``EVENTS_REQUEST_MAX_BYTES``, fail the request (``ValidationException``); an entry AWS
  refuses (a ``Source`` starting with ``aws.``, a ``DetailType`` over 128 characters, a
  ``Detail`` that is no JSON object...) fails alone, with its ``ErrorCode`` and
  ``ErrorMessage``, and the others are sent: "if an individual entry within a request fails,
  EventBridge continues processing the rest"
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html); the result
  entries keep the request's order and ``FailedEntryCount`` counts the failed ones
  (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html).

- **Which events a rule delivers** (``once.event_patterns``, EventBridge's matcher
  written again, each rule cited there): every rule's targets get the events its pattern
  matches as EventBridge matches it, on the event as AWS holds it (``time`` its ISO text);
  moto's matcher is never asked. A disabled rule delivers nothing.
- **PutRule** refuses a pattern EventBridge cannot compile (an unknown filter, ``**`` in a
  wildcard, an anything-but list of strings and numbers, a numeric bound that is no number...)
  with ``InvalidEventPatternException``; moto takes it, and matches every event with a filter
  it does not know.
- **PutEvents for a bus that does not exist**: AWS answers the entry with an ``EventId`` and
  delivers it nowhere (seen from AWS: aws/aws-cli#9186, aws/aws-sdk#186); moto fails the whole
  request after delivering the entries before it.

Other targets (a log group, an archive, another bus) are moto's own, their events matched
here. ``install()`` is
idempotent (a mark on the methods it wraps, as ``strict``): the local cloud's moto server
calls it before it starts (loading this file by its path), ``OnceEnv.__enter__`` before it
starts ``mock_aws``.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from once import event_patterns as patterns
from once import sendrules

_install_lock = threading.Lock()
#: The mark on a patched method (the same as ``strict``'s).
_MARK = "__once_strict__"


def install() -> None:
    """Patch moto's EventBridge in this process (once; later calls do nothing)."""
    from moto.events.models import EventsBackend, Rule
    from moto.events.responses import EventsHandler

    with _install_lock:
        if getattr(EventsHandler.put_events, _MARK, False):
            return
        _wrap(Rule, "send_to_targets", _delivering_as_aws)
        _wrap(EventsBackend, "put_rule", _checking_patterns)
        _wrap(EventsHandler, "put_events", _strict_put_events)  # last: its mark says both


def _wrap(owner: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = getattr(owner, name)
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, _MARK, True)
    setattr(owner, name, wrapped)


# --- the event a target gets -----------------------------------------------------------------


def event_time(value: Any) -> str:
    """An event's ``time`` as EventBridge writes it: ISO 8601 in UTC, to the second. moto
    holds an epoch (the PutEvents ``Time``, or the time of the call)."""
    if isinstance(value, str):
        return value
    return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def aws_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event as EventBridge sends it to a target, from moto's (which lacks ``account``
    and adds ``ingestion-time``)."""
    return {
        "version": "0",
        "id": event["id"],
        "detail-type": event["detail-type"],
        "source": event["source"],
        "account": event["account"],
        "time": event_time(event["time"]),
        "region": event["region"],
        "resources": list(event.get("resources") or []),
        "detail": event["detail"],
    }


#: One step of a JSONPath as EventBridge reads it: "dot notation (for example, $.detail),
#: dashes, underscores, alphanumeric characters, array indices, wildcards (*)"
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html).
_PATH_STEP = re.compile(r"\.([A-Za-z0-9_-]+|\*)|\[(\d+|\*)\]")


def _first(path: str, event: Mapping[str, Any]) -> tuple[bool, Any]:
    """Whether a JSONPath selects anything of ``event``, and what: the value, or with a
    wildcard the list of values it selects."""
    if not path.startswith("$"):
        return False, None
    values: list[Any] = [event]
    at = 1
    while at < len(path):
        step = _PATH_STEP.match(path, at)
        if step is None:
            return False, None
        name, index = step.groups()
        found: list[Any] = []
        for value in values:
            if "*" in (name, index):
                if isinstance(value, dict):
                    found.extend(value.values())
                elif isinstance(value, list):
                    found.extend(value)
            elif index is not None:
                if isinstance(value, list) and int(index) < len(value):
                    found.append(value[int(index)])
            elif isinstance(value, dict) and name in value:
                found.append(value[name])
        values, at = found, step.end()
    if not values:
        return False, None
    return True, values if "*" in path else values[0]


def transformed(
    transformer: Mapping[str, Any],
    event: Mapping[str, Any],
    rule_arn: str,
    rule_name: str,
    received: str | None = None,
) -> str:
    """An ``InputTransformer``'s text for ``event`` (AWS's shape): each ``<variable>`` of
    ``InputTemplate`` replaced by the value its ``InputPathsMap`` path selects, or a
    predefined variable (``aws.events.rule-arn``, ``aws.events.rule-name``,
    ``aws.events.event.ingestion-time``, ``aws.events.event`` without the detail,
    ``aws.events.event.json``). A variable that stands as a JSON value is replaced by the
    value's JSON (a string quoted: ``{"state": <state>}`` gives ``{"state": "RUNNING"}``); one
    inside a string by its text (``"<state> now"`` gives ``"RUNNING now"``)
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-transform-target-input.html).
    moto's substitutes a string unquoted, which leaves a JSON template invalid.

    ``received``: when EventBridge received the event (ISO 8601), which
    ``aws.events.event.ingestion-time`` is ("The time at which the event was received by
    EventBridge ... generated by EventBridge and can't be overwritten", same page): never the
    entry's ``Time``; now when not given. A path that selects nothing writes ``null`` (the page
    says such a variable "isn't created and won't appear in the output", not what the template
    then holds: unknown, docs/localcloud.md †)."""
    values: dict[str, Any] = {
        "aws.events.rule-arn": rule_arn,
        "aws.events.rule-name": rule_name,
        "aws.events.event.ingestion-time": received or event_time(time.time()),
        "aws.events.event": {k: v for k, v in event.items() if k != "detail"},
        "aws.events.event.json": dict(event),
    }
    for name, path in (transformer.get("InputPathsMap") or {}).items():
        found, value = _first(str(path), event)
        values[name] = value if found else None
    template = str(transformer.get("InputTemplate") or "")
    out: list[str] = []
    in_string = escaped = False
    at = 0
    while at < len(template):
        char = template[at]
        end = template.find(">", at) if char == "<" else -1
        if end > at and template[at + 1 : end] in values:
            value = values[template[at + 1 : end]]
            if not in_string:
                out.append(json.dumps(value))
            else:
                text = value if isinstance(value, str) else json.dumps(value)
                out.append(json.dumps(text)[1:-1])
            at = end + 1
            continue
        if in_string and char == "\\" and not escaped:
            escaped = True
        else:
            if char == '"' and not escaped:
                in_string = not in_string
            escaped = False
        out.append(char)
        at += 1
    return "".join(out)


def target_input(
    target: Mapping[str, Any], event: Mapping[str, Any], rule_arn: str = "", rule_name: str = ""
) -> str | None:
    """The text a target gets for ``event`` (moto's form): ``Input`` as it is, the part
    ``InputPath`` selects, the ``InputTransformer``'s output, or the whole event in AWS's
    shape. None when ``InputPath`` selects nothing: nothing is sent (a reading of the
    Target page, not seen from AWS)."""
    shaped = aws_event(event)
    if target.get("Input") is not None:
        return str(target["Input"])
    if target.get("InputPath"):
        found, value = _first(str(target["InputPath"]), shaped)
        return json.dumps(value) if found else None
    if target.get("InputTransformer"):
        received = event.get("ingestion-time")  # moto's: when its PutEvents took the entry
        return transformed(
            target["InputTransformer"],
            shaped,
            rule_arn,
            rule_name,
            event_time(received) if received is not None else None,
        )
    return json.dumps(shaped)


def _send_to_queue(rule: Any, target: Mapping[str, Any], body: str) -> None:
    """One event to an SQS target, as EventBridge sends it: a FIFO queue needs the target's
    ``SqsParameters.MessageGroupId`` and content-based deduplication ("To let EventBridge
    send messages to your SQS FIFO queue, you must enable content-based deduplication")."""
    from moto.sqs import sqs_backends
    from moto.utilities.arns import parse_arn

    arn = parse_arn(target["Arn"])
    backend = sqs_backends[arn.account][arn.region]
    group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
    if group_id:
        attributes = backend.get_queue_attributes(
            queue_name=arn.resource_id, attribute_names=["ContentBasedDeduplication"]
        )
        if attributes.get("ContentBasedDeduplication") == "false":
            warnings.warn(
                f"rule {rule.name}: EventBridge sends nothing to the FIFO queue "
                f"{arn.resource_id} without content-based deduplication",
                stacklevel=2,
            )
            return
    backend.send_message(queue_name=arn.resource_id, message_body=body, group_id=group_id)


def _delivering_as_aws(original: Callable[..., Any]) -> Callable[..., Any]:
    def send_to_targets(self: Any, event: Any, transform_input: bool = True) -> None:
        from moto.events.models import EventPattern

        if not transform_input:  # an archive's replay: moto's own
            original(self, event, transform_input)
            return
        if self.state == "DISABLED":
            return  # "A disabled rule won't match any events" (API_DisableRule.html)
        if not patterns.matches(self.event_pattern.get_pattern(), aws_event(event)):
            return
        others = []
        for target in self.targets:
            if str(target.get("Arn", "")).split(":")[2:3] != ["sqs"]:
                others.append(target)
                continue
            body = target_input(target, event, self.arn, self.name)
            if body is not None:
                _send_to_queue(self, target, body)
        if others:
            rest = copy.copy(self)
            rest.targets = others
            rest.event_pattern = EventPattern(None, {})  # matched above, as AWS matches
            original(rest, event, transform_input)

    return send_to_targets


# --- PutRule -----------------------------------------------------------------------------------


def _checking_patterns(original: Callable[..., Any]) -> Callable[..., Any]:
    def put_rule(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        from moto.events.exceptions import InvalidEventPatternException

        pattern = kwargs.get("event_pattern", args[2] if len(args) > 2 else None)
        if pattern:
            try:
                patterns.parse(pattern) if isinstance(pattern, str) else patterns.check(pattern)
            except patterns.InvalidPattern as error:
                raise InvalidEventPatternException(reason=str(error)) from None
        return original(self, name, *args, **kwargs)

    return put_rule


# --- PutEvents ---------------------------------------------------------------------------------


def _strict_put_events(original: Callable[..., Any]) -> Callable[..., Any]:
    def put_events(self: Any) -> Any:
        from moto.events.exceptions import ValidationException

        entries = list(self._get_param("Entries") or [])
        if len(entries) > sendrules.EVENTS_MAX_ENTRIES:
            # botocore events/2015-10-07 PutEventsRequestEntryList: max 10 (moto's wording).
            raise ValidationException(
                "1 validation error detected: Value '[PutEventsRequestEntry]' at 'entries' "
                "failed to satisfy constraint: Member must have length less than or equal "
                f"to {sendrules.EVENTS_MAX_ENTRIES}"
            )
        total = sum(sendrules.event_entry_bytes(entry) for entry in entries)
        if total >= sendrules.EVENTS_REQUEST_MAX_BYTES:
            # "The total entry size must be less than" the limit (eb-putevent-size.html).
            raise ValidationException("Total size of the entries in the request is over the limit.")
        results: list[dict[str, Any] | None] = [None] * len(entries)
        kept: list[int] = []
        for at, entry in enumerate(entries):
            problem = sendrules.event_entry_problem(entry)
            if problem is None:
                kept.append(at)
            else:
                results[at] = {"ErrorCode": problem[0], "ErrorMessage": problem[1]}
        buses = self.events_backend.event_buses
        for at in list(kept):
            bus = self.events_backend._normalize_event_bus_arn(entries[at].get("EventBusName"))
            if bus not in buses:  # answered, delivered nowhere (aws/aws-cli#9186)
                results[at] = {"EventId": str(uuid.uuid4())}
                kept.remove(at)
        if kept:
            sent = self.events_backend.put_events([entries[at] for at in kept])
            for at, result in zip(kept, sent, strict=True):
                results[at] = result
        return json.dumps(
            {
                "FailedEntryCount": sum(1 for r in results if r and "ErrorCode" in r),
                "Entries": results,
            }
        )

    return put_events
