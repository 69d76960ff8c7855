"""EventBridge's event patterns, as EventBridge reads them: which pattern PutRule takes
(``problem``) and which event a pattern matches (``matches``). Pure: no moto, no I/O.

Here, below the kit, because three floors apply the same syntax: the kit's and the local
cloud's EventBridge rules (``once.testing.strict_events``), and Lambda's event filtering
(``once.event_filters``: "For filter rules, Lambda supports the Amazon EventBridge rules and
uses the same syntax as EventBridge"), which ``OnceConsumer`` checks at synth.

Why our own: moto 5.2.5's matcher departs from AWS where a team's rule is written. It compares
values with Python's ``==`` (``[true]`` matches ``1``, ``[300]`` matches ``300.0``), takes a
boolean for a number (``{"numeric": [">", 0]}`` matches ``true``), never looks inside an
array of objects, and answers True for a filter name it does not know (a misspelt
``{"prefx": ...}`` matches every event); its PutRule takes any pattern whose leaves are
arrays. A rule that delivers here and fails ``cdk deploy`` (or never matches) on AWS is the
test that passes here and fails there.

The sources: EventBridge's pages on event patterns
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html, "EP") and on
their filters
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html,
"CBF"); and Event Ruler, the open-source library EventBridge matches with
(https://github.com/aws/event-ruler: its README, "ER", and its ``JsonRuleCompiler``, "ERC",
whose messages the refusals here repeat). Where they differ, AWS's page wins: EP says "Number
matching is at the string representation level. For example, 300, 300.0, and 3.0e2 are not
considered equal", while the current ERC also adds a numeric-equals matcher for a number in a
pattern; here an exact number is matched at its text. Known departures: a number is compared
at the text Python writes for it (``3.0e2`` in an event reads as ``300.0``), and an IP
address given as an exact value matches only its own text (ERC also matches it as a range).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

#: The filters a pattern may name (CBF; ERC ``processMatchExpression``: any other is
#: "Unrecognized match type").
MATCH_TYPES = frozenset(
    {"prefix", "suffix", "equals-ignore-case", "wildcard", "anything-but", "numeric", "cidr",
     "exists"}
)  # fmt: skip
#: "$or": its array's objects are alternatives (ER "The "$or" Primitive"; CBF "Or matching").
OR = "$or"
#: ``numeric``'s operators: a lower bound may be followed by an upper one (ERC
#: ``processNumericMatchExpression``, ``completeNumericRange``).
_LOWER, _UPPER = (">", ">="), ("<", "<=")


class InvalidPattern(ValueError):
    """A pattern EventBridge cannot compile: PutRule answers ``InvalidEventPatternException``
    (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html)."""


class _Missing:
    """A field the event does not have."""


_MISSING = _Missing()


# --- which patterns compile ------------------------------------------------------------------


def parse(text: str) -> dict[str, Any]:
    """A pattern's JSON text, checked (``InvalidPattern`` if EventBridge would refuse it)."""
    try:
        pattern = json.loads(text, parse_constant=_no_constant)
    except ValueError as error:
        raise InvalidPattern(f"Invalid JSON: {error}") from None
    check(pattern)
    return dict(pattern)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def problem(pattern: Any) -> str | None:
    """Why EventBridge would refuse ``pattern`` (a parsed pattern), or None."""
    try:
        check(pattern)
    except InvalidPattern as error:
        return str(error)
    return None


def check(pattern: Any) -> None:
    """Raise ``InvalidPattern`` for a pattern EventBridge cannot compile: it is a JSON object
    ("Filter is not an object"), none of its objects empty, each field an object or an array
    of match values (ERC ``parseObject``, ``writeRules``)."""
    if not isinstance(pattern, dict):
        raise InvalidPattern("Filter is not an object")
    _check_object(pattern, in_or=False)


def _check_object(node: dict[str, Any], *, in_or: bool) -> None:
    if not node:
        raise InvalidPattern("Empty objects are not allowed")
    for name, value in node.items():
        if name == OR:
            # ERC parseIntoOrRelationship: an array of at least two objects.
            if not isinstance(value, list):
                raise InvalidPattern(f"It must be an Array followed with {OR}.")
            if not all(isinstance(branch, dict) for branch in value):
                raise InvalidPattern(f"Only JSON object is allowed in array of {OR} relationship.")
            if len(value) < 2:
                raise InvalidPattern(f"There must have at least 2 Objects in {OR} relationship.")
            for branch in value:
                _check_object(branch, in_or=True)
            continue
        if in_or and name in MATCH_TYPES:
            # ERC parseObjectInsideOrRelationship: a filter's name is no field inside "$or".
            raise InvalidPattern(
                f"{name} is Ruler reserved fieldName which cannot be used inside {OR}."
            )
        if isinstance(value, dict):
            _check_object(value, in_or=in_or)
        elif isinstance(value, list):
            _check_values(value)
        else:
            raise InvalidPattern(f'"{name}" must be an object or an array')


def _is_number(value: Any) -> bool:
    """A JSON number (Python's ``bool`` is an ``int``, JSON's ``true`` is no number)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_values(values: list[Any]) -> None:
    """A field's array: exact values (string, number, true, false, null) and filters."""
    if not values:
        raise InvalidPattern("Empty arrays are not allowed")
    for value in values:
        if isinstance(value, dict):
            _check_filter(value)
        elif isinstance(value, list):
            raise InvalidPattern("Match value must be String, number, true, false, or null")


def _one_key(expression: dict[str, Any]) -> tuple[str, Any]:
    if len(expression) != 1:
        raise InvalidPattern(
            "Match expression name not found"
            if not expression
            else "Only one key allowed in match expression"
        )
    ((name, value),) = expression.items()
    return name, value


def _check_filter(expression: dict[str, Any]) -> None:
    name, value = _one_key(expression)
    if name not in MATCH_TYPES:
        raise InvalidPattern(f"Unrecognized match type {name}")
    if name in ("prefix", "suffix"):
        # CBF: a string, or {"equals-ignore-case": string} ("Prefix matching while ignoring
        # case", "Suffix matching while ignoring case").
        if isinstance(value, dict):
            inner, text = _one_key(value)
            if inner != "equals-ignore-case" or not isinstance(text, str):
                raise InvalidPattern(f"Unsupported {name} pattern: {inner}")
        elif not isinstance(value, str):
            raise InvalidPattern(f"{name} match pattern must be a string")
    elif name == "equals-ignore-case":
        if not isinstance(value, str):
            raise InvalidPattern("equals-ignore-case match pattern must be a string")
    elif name == "wildcard":
        if not isinstance(value, str):
            raise InvalidPattern("wildcard match pattern must be a string")
        _wildcard_regex(value)
    elif name == "anything-but":
        _check_anything_but(value)
    elif name == "numeric":
        _check_numeric(value)
    elif name == "cidr":
        if not isinstance(value, str) or _network(value) is None:
            raise InvalidPattern(f"Invalid CIDR: {value!r}")
    elif not isinstance(value, bool):  # exists
        raise InvalidPattern("exists match pattern must be either true or false.")


def _check_anything_but(value: Any) -> None:
    """ER "Anything-but matching": "single string and numeric values or lists, which have to
    contain entirely strings or entirely numerics"; CBF adds ``prefix``, ``suffix``,
    ``equals-ignore-case`` and ``wildcard`` inside it."""
    if isinstance(value, dict):
        inner, operand = _one_key(value)
        if inner in ("prefix", "suffix"):
            if not isinstance(operand, str):
                raise InvalidPattern("prefix/suffix match pattern must be a string")
            if not operand:
                raise InvalidPattern("Null prefix/suffix not allowed")
        elif inner in ("equals-ignore-case", "wildcard"):
            texts = operand if isinstance(operand, list) else [operand]
            if not texts or not all(isinstance(t, str) for t in texts):
                raise InvalidPattern(f"Inside anything-but/{inner} list, only strings are allowed.")
            if inner == "wildcard":
                for text in texts:
                    _wildcard_regex(text)
        else:
            raise InvalidPattern(f"Unsupported anything-but pattern: {inner}")
    elif isinstance(value, list):
        strings = all(isinstance(v, str) for v in value)
        numbers = all(_is_number(v) for v in value)
        if not value or not (strings or numbers):
            raise InvalidPattern(
                "Inside anything but list, either all values are number or string, "
                "mixed type is not supported"
            )
    elif not (isinstance(value, str) or _is_number(value)):
        raise InvalidPattern(
            "Value of anything-but must be an array or single string/number value."
        )


def _check_numeric(value: Any) -> None:
    """``["=", n]``, one bound, or a lower bound then an upper one, each bound a number (ERC
    ``processNumericMatchExpression``)."""
    if not isinstance(value, list):
        raise InvalidPattern("Value of numeric must be an array.")
    if len(value) not in (2, 4) or not isinstance(value[0], str):
        raise InvalidPattern(f"Invalid member in numeric match: {value!r}")
    operator = value[0]
    if operator not in ("=", *_LOWER, *_UPPER):
        raise InvalidPattern(f"Unrecognized numeric range operator: {operator}")
    if not _is_number(value[1]):
        raise InvalidPattern(f"Value of {operator} must be numeric")
    if len(value) == 4:
        if operator not in _LOWER:
            raise InvalidPattern("Too many elements in numeric expression")
        if value[2] not in _UPPER:
            raise InvalidPattern(f"Bad numeric range operator: {value[2]}")
        if not _is_number(value[3]):
            raise InvalidPattern(f"Value of {value[2]} must be numeric")
        if value[1] >= value[3]:
            raise InvalidPattern("Bottom must be less than top")


def _wildcard_regex(text: str) -> re.Pattern[str]:
    """A wildcard as a regular expression. ER "Wildcard matching": ``*`` any characters,
    "consecutive wildcard characters are not allowed", ``\\*`` an asterisk, ``\\\\`` a
    backslash, "A backslash escaping any character other than asterisk or backslash is not
    allowed"."""
    out: list[str] = []
    at = 0
    star = False
    while at < len(text):
        char = text[at]
        if char == "\\":
            following = text[at + 1 : at + 2]
            if following not in ("*", "\\"):
                raise InvalidPattern(f"Invalid escape character at pos {at} of {text!r}")
            out.append(re.escape(following))
            at += 2
            star = False
            continue
        if char == "*":
            if star:
                raise InvalidPattern(f"Consecutive wildcard characters at pos {at} of {text!r}")
            out.append(".*")
            star = True
        else:
            out.append(re.escape(char))
            star = False
        at += 1
    return re.compile("".join(out), re.DOTALL)


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """A ``cidr`` filter's network (ER "IP Address Matching": IPv4 or IPv6, ``10.0.0.0/24``)."""
    if "/" not in text:
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


# --- which events match ----------------------------------------------------------------------


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """Whether ``event`` (as EventBridge holds it: ``time`` its ISO text) matches
    ``pattern`` (one ``check`` takes). An empty pattern matches every event (moto's rule
    without a pattern)."""
    if not pattern:
        return True
    return _object(pattern, event)


def _object(pattern: Mapping[str, Any], node: Any) -> bool:
    """Every field of the pattern matches (ER "Default "And" relationship"). Where the event
    holds an array of objects, the array is "crushed out" (ER "JSON Array Matching"), and one
    element must match all the fields it is asked for: matching never takes two fields "within
    JSON objects that are in different elements of the same array" (``rulesForJSONEvent``)."""
    if isinstance(node, list):
        elements = [element for element in _flat(node) if isinstance(element, dict)]
        if not elements:
            return _object(pattern, _MISSING)
        return any(_object(pattern, element) for element in elements)
    for name, value in pattern.items():
        if name == OR:
            if not any(_object(branch, node) for branch in value):
                return False
            continue
        child = node.get(name, _MISSING) if isinstance(node, dict) else _MISSING
        if isinstance(value, dict):
            if not _object(value, child):
                return False
        elif not _field(value, child):
            return False
    return True


def _flat(values: list[Any]) -> list[Any]:
    """An array's elements, nested arrays crushed out (ER "This works for multi-level arrays
    too")."""
    found: list[Any] = []
    for value in values:
        found.extend(_flat(value) if isinstance(value, list) else [value])
    return found


def _field(filters: list[Any], node: Any) -> bool:
    """A field matches when any of its values matches (ER: "it considers a field to match if
    any of the provided field values match"); an array in the event matches when any of its
    elements does ("the intersection between the event array and rule-array is non-empty").
    ``exists`` sees leaves only (ER "Exists matching": "only works on the leaf nodes"): an
    object, or an empty array, is no value there."""
    if isinstance(node, list):
        leaves = [v for v in _flat(node) if not isinstance(v, dict)]
    elif node is _MISSING or isinstance(node, dict):
        leaves = []
    else:
        leaves = [node]
    for expected in filters:
        if isinstance(expected, dict) and "exists" in expected:
            if bool(leaves) == expected["exists"]:
                return True
        elif any(_value(expected, leaf) for leaf in leaves):
            return True
    return False


def _text(value: Any) -> str:
    """A value's JSON text: exact values are matched at it (EP "The values being matched follow
    JSON rules ... Number matching is at the string representation level"; ER "JSON text
    matching": ``true`` "would match only the JSON literal ``true``")."""
    return json.dumps(value)


def _value(expected: Any, value: Any) -> bool:
    """One value of the event against one of the pattern's (an exact value or a filter)."""
    if not isinstance(expected, dict):
        return _text(expected) == _text(value)
    name, operand = next(iter(expected.items()))
    if name in ("prefix", "suffix"):
        if not isinstance(value, str):
            return False  # ER: "only work on string-valued fields"
        ignore_case = isinstance(operand, dict)
        text = operand["equals-ignore-case"] if ignore_case else operand
        subject = value.lower() if ignore_case else value
        text = text.lower() if ignore_case else text
        return subject.startswith(text) if name == "prefix" else subject.endswith(text)
    if name == "equals-ignore-case":
        return isinstance(value, str) and value.lower() == operand.lower()
    if name == "wildcard":
        return isinstance(value, str) and _wildcard_regex(operand).fullmatch(value) is not None
    if name == "numeric":
        return _is_number(value) and _in_range(operand, value)
    if name == "cidr":
        return isinstance(value, str) and _in_network(value, operand)
    if name == "anything-but":
        return _anything_but(operand, value)
    return False  # a filter ``check`` refuses never matches


def _in_range(operand: list[Any], value: float) -> bool:
    """ER "Numeric matching": "only work with values that are JSON numbers"."""
    compare = {
        "=": value == operand[1],
        ">": value > operand[1],
        ">=": value >= operand[1],
        "<": value < operand[1],
        "<=": value <= operand[1],
    }[operand[0]]
    if len(operand) == 4:
        return compare and (value < operand[3] if operand[2] == "<" else value <= operand[3])
    return compare


def _in_network(value: str, network: str) -> bool:
    found = _network(network)
    try:
        return found is not None and ipaddress.ip_address(value) in found
    except ValueError:
        return False


def _anything_but(operand: Any, value: Any) -> bool:
    """Anything but what the filter names (ER "Anything-but matching"). Numbers are compared
    as numbers (ERC: ``ComparableNumber`` for an anything-but's numbers); a value of another
    kind than the filter's is not what it names, so it matches (ERC: the value's JSON text is
    compared, a number's never starting with a quote)."""
    if isinstance(operand, dict):
        name, inner = next(iter(operand.items()))
        if not isinstance(value, str):
            return True
        if name == "prefix":
            return not value.startswith(inner)
        if name == "suffix":
            return not value.endswith(inner)
        texts = inner if isinstance(inner, list) else [inner]
        if name == "equals-ignore-case":
            return value.lower() not in {t.lower() for t in texts}
        return not any(_wildcard_regex(t).fullmatch(value) for t in texts)
    named = operand if isinstance(operand, list) else [operand]
    if all(isinstance(v, str) for v in named):
        return not (isinstance(value, str) and value in named)
    return not (_is_number(value) and any(value == v for v in named))
