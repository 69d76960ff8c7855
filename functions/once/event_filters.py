"""Lambda's event filtering on an SQS event source mapping: which filters Lambda takes
(``problems``) and which records it keeps (``keeps``). Pure: no AWS, no I/O.

Why here, below the construct and both emulations of the mapping: ``OnceConsumer(filters=)``
refuses at synth what Lambda would refuse at deploy, and ``once_env`` and the local cloud
keep the records Lambda keeps, by one rule. A message no filter keeps is deleted without an
invocation: on AWS it is gone, so a filter that differs here from there loses messages
there that a test saw processed here.

The sources, each rule cited where it is applied:

- "Control which events Lambda sends to your function",
  https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html ("EF");
- "Using event filtering with an Amazon SQS event source",
  https://docs.aws.amazon.com/lambda/latest/dg/with-sqs-filtering.html ("SQS");
- the API's ``Filter``, https://docs.aws.amazon.com/lambda/latest/api/API_Filter.html ("API");
- CloudFormation's ``FilterCriteria``,
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-filtercriteria.html
  ("CFN": ``Filters``, "Minimum: 1"), whose resource schema also holds its items unique
  (``uniqueItems``: CDK's template validation reports a repeated one, F3037).

A pattern's syntax and matching are EventBridge's (EF: "For filter rules, Lambda supports the
Amazon EventBridge rules and uses the same syntax as EventBridge"): ``once.event_patterns``,
held here to the operators EF lists for Lambda.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from once import event_patterns
from once.event_patterns import OR

#: EF: "By default, you can define up to five different filters for a single event source
#: mapping", and "you can request a quota increase for up to 10 filters for each event
#: source. If you attempt to add more filters than your current quota permits, Lambda will
#: return an error".
DEFAULT_MAX_FILTERS: Final = 5
MAX_FILTERS: Final = 10
#: API: a ``Pattern``'s "Maximum length of 4096".
MAX_PATTERN_CHARS: Final = 4096
#: SQS: "Amazon SQS event source mappings only support filtering on the ``body`` key".
DATA_KEY: Final = "body"
#: EF's "summary of all the comparison operators available for Lambda event filtering":
#: Null, Empty, Equals, Equals (ignore case), And, Or, Or (multiple fields: ``$or``), Not
#: (``anything-but``), Numeric (equals, range), Exists, Does not exist, Begins with
#: (``prefix``), Ends with (``suffix``). EventBridge's ``wildcard`` and ``cidr`` are not
#: among them, nor its forms that nest one filter in another (``anything-but`` of a
#: ``prefix``, ``suffix``, ``equals-ignore-case`` or ``wildcard``; a ``prefix`` or ``suffix``
#: with ``equals-ignore-case``).
LAMBDA_MATCH_TYPES: Final = frozenset(
    {"prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists"}
)


class FiltersRefused(ValueError):
    """Filters Lambda would refuse on an SQS event source mapping; the message lists each
    reason."""


def pattern_text(pattern: Mapping[str, Any]) -> str:
    """A pattern as the mapping's ``Filter.Pattern`` holds it: compact JSON text. The
    construct deploys this text, its length is checked on it, and the emulations match the
    pattern read back from it: one text, where CDK's ``FilterCriteria.filter`` would write
    Node's (``1.0`` as ``1``)."""
    return json.dumps(pattern, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def problems(filters: object) -> list[str]:
    """Why Lambda would refuse ``filters`` (a list of patterns, each a dict) on an SQS event
    source mapping, one line each, naming the filter and what to do; empty when it takes
    them."""
    if isinstance(filters, Mapping | str | bytes) or not isinstance(filters, Sequence):
        return [
            f"filters={filters!r:.80}: pass a list of patterns, each a dict as in Lambda's "
            "docs, e.g. [{'body': {'type': ['order']}}]"
        ]
    if not filters:  # CFN: "Minimum: 1"
        return [
            "filters=[]: pass at least one pattern, or leave filters unset to have every "
            "message delivered"
        ]
    found: list[str] = []
    if len(filters) > MAX_FILTERS:
        found.append(
            f"{len(filters)} filters: an event source mapping takes at most {MAX_FILTERS} "
            f"(Lambda's quota: {DEFAULT_MAX_FILTERS} by default, raised on request up to "
            f'{MAX_FILTERS}); join alternatives in one pattern, with "$or" or several values '
            "in one field's list"
        )
    first: dict[str, int] = {}
    for index, pattern in enumerate(filters):
        why = _pattern_problems(pattern)
        found += [f"filters[{index}] {reason}" for reason in why]
        if why:
            continue
        text = pattern_text(pattern)
        if text in first:  # CFN's schema: unique items
            found.append(
                f"filters[{index}] repeats filters[{first[text]}]: CloudFormation takes each "
                "pattern once; remove the copy"
            )
        first.setdefault(text, index)
    return found


def patterns(filters: object) -> tuple[dict[str, Any], ...]:
    """The patterns as Lambda reads them (read back from their text: a tuple is a list),
    once ``problems`` finds none; else ``FiltersRefused``."""
    found = problems(filters)
    if found:
        raise FiltersRefused("filters refused:\n" + "\n".join(f"- {p}" for p in found))
    assert isinstance(filters, Sequence)
    return tuple(json.loads(pattern_text(p)) for p in filters)


def from_criteria(criteria: object) -> tuple[dict[str, Any], ...]:
    """The patterns of a mapping's ``FilterCriteria`` as the template holds it
    (``{"Filters": [{"Pattern": "<JSON text>"}]}``); none for none. ``FiltersRefused`` for
    one Lambda would refuse, or a pattern that is no text (a token left unresolved)."""
    if not criteria:
        return ()
    listed = criteria.get("Filters") if isinstance(criteria, Mapping) else None
    texts: list[str] = []
    for item in listed if isinstance(listed, list) and listed else [None]:
        text = item.get("Pattern") if isinstance(item, Mapping) else None
        if not isinstance(text, str):
            raise FiltersRefused(
                f"FilterCriteria {criteria!r:.200}: expected Filters, a list of "
                "{'Pattern': '<JSON text>'}"
            )
        texts.append(text)
    try:
        parsed = [json.loads(text, parse_constant=_no_constant) for text in texts]
    except ValueError as error:
        raise FiltersRefused(f"FilterCriteria: a Pattern is not JSON: {error}") from None
    return patterns(parsed)


def keeps(checked: Sequence[Mapping[str, Any]], record: Mapping[str, Any]) -> bool:
    """Whether Lambda hands the SQS event record ``record`` to the function under the
    ``checked`` patterns (``patterns``' or ``from_criteria``'s); no pattern keeps everything.

    EF: "Your filters are logically ORed together. If a record from your event source
    satisfies one or more of your filters, Lambda includes the record in the next event it
    sends to your function. If none of your filters are satisfied, Lambda discards the
    record", and, for SQS, "Lambda automatically removes the message from the queue". The
    body is matched as JSON when it is valid JSON, else as the string it is, and a pattern
    whose ``body`` is of the other format does not match: SQS, "Lambda automatically
    evaluates the format of the incoming message body and of your filter pattern for body.
    If there is a mismatch, Lambda drops the message" (its table: a plain-string body under
    a JSON pattern, and a JSON body under a plain-string pattern, are dropped)."""
    if not checked:
        return True
    text = record.get(DATA_KEY)
    body = _json_or_none(text) if isinstance(text, str) else None
    is_json = body is not None
    view = {DATA_KEY: body[0] if body is not None else text}
    return any(event_patterns.matches(_judged(p, is_json), view) for p in checked)


# --- what Lambda refuses -------------------------------------------------------------------


def _pattern_problems(pattern: object) -> list[str]:
    if isinstance(pattern, Mapping) and set(pattern) == {"pattern"}:
        return [
            "is lambda_.FilterCriteria.filter(...)'s {'pattern': text}: pass the pattern "
            "itself, the dict given to FilterCriteria.filter"
        ]
    if not isinstance(pattern, Mapping):
        return [
            f"{pattern!r:.80}: a pattern is a JSON object (EF: 'a string representation of a "
            "JSON filter rule'); pass a dict, e.g. {'body': {'type': ['order']}}"
        ]
    try:
        text = pattern_text(pattern)
    except (TypeError, ValueError) as error:
        return [f"is not JSON ({error}): use dicts, lists, strings, numbers, booleans, None"]
    parsed = json.loads(text)
    found: list[str] = []
    if len(text) > MAX_PATTERN_CHARS:
        found.append(
            f"is {len(text)} characters of JSON: Lambda takes a pattern of at most "
            f"{MAX_PATTERN_CHARS}; split it into several filters"
        )
    refused = event_patterns.problem(parsed)
    if refused is not None:
        return [*found, f"{text:.120}: Lambda's syntax (EventBridge's) refuses it: {refused}"]
    outside = sorted(set(_top_fields(parsed)) - {DATA_KEY})
    if outside:
        found.append(
            f"names {', '.join(map(repr, outside))}: an SQS event source mapping filters "
            f"on the message's {DATA_KEY!r} only (SQS: 'only support filtering on the body "
            "key'); test the others in business code, or carry them in the body"
        )
    found += [
        f"uses {operator}, which Lambda's event filtering does not offer (EventBridge's "
        "rules do): use prefix, suffix, equals-ignore-case, anything-but of values, numeric, "
        "exists or exact values"
        for operator in sorted(set(_unsupported(parsed)))
    ]
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _top_fields(node: Mapping[str, Any]) -> Iterator[str]:
    """The record's fields a pattern names: its own, and those of its ``$or`` branches."""
    for name, value in node.items():
        if name == OR:
            for branch in value:
                yield from _top_fields(branch)
        else:
            yield name


def _unsupported(node: Any) -> Iterator[str]:
    """Each operator of a (compiled) pattern that EF does not list for Lambda."""
    if isinstance(node, dict):
        for value in node.values():
            yield from _unsupported(value)
    elif isinstance(node, list):
        for value in node:
            if isinstance(value, dict) and len(value) == 1 and not _is_branch(value):
                yield from _operator(*next(iter(value.items())))
            else:
                yield from _unsupported(value)


def _is_branch(value: dict[str, Any]) -> bool:
    """An object inside ``$or``'s list (a branch), not a filter in a field's list."""
    (name,) = value
    return name not in event_patterns.MATCH_TYPES


def _operator(name: str, operand: Any) -> Iterator[str]:
    if name not in LAMBDA_MATCH_TYPES:
        yield repr(name)
    elif isinstance(operand, dict) and name in ("prefix", "suffix", "anything-but"):
        inner = next(iter(operand))
        yield f"{name!r} of {inner!r}"


# --- which records Lambda keeps ------------------------------------------------------------


def _json_or_none(text: str) -> tuple[Any] | None:
    """The body's JSON value in a 1-tuple (``null`` is a value), or None: not valid JSON
    (``NaN`` and ``Infinity`` are not JSON)."""
    try:
        return (json.loads(text, parse_constant=_no_constant),)
    except ValueError:
        return None


def _judged(pattern: Mapping[str, Any], body_is_json: bool) -> dict[str, Any]:
    """The pattern with each ``body`` whose format differs from the body's replaced by an
    empty list, which matches nothing: an object is a JSON pattern, a list a plain-string
    one (SQS's table)."""
    judged: dict[str, Any] = {}
    for name, value in pattern.items():
        if name == OR:
            judged[name] = [_judged(branch, body_is_json) for branch in value]
        elif name == DATA_KEY and isinstance(value, dict) != body_is_json:
            judged[name] = []
        else:
            judged[name] = value
    return judged
