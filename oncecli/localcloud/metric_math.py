"""CloudWatch's metric math, as much of it as the local cloud evaluates alarms with.

Why: the alarms ``OnceConsumer`` writes divide one metric by others (``FailedRecords``:
``Failed`` + ``Owed`` over every counted outcome, with ``FILL``), and moto's CloudWatch
computes no metric math. This parses an expression (``+ - * /``, parentheses, numbers,
metric ids and ``FILL(id, number)``; any other function is refused by name, as
``Unsupported``) and computes it over series of datapoints as CloudWatch does: an operation
on two series has a value where both have one, a division by zero has none.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class Unsupported(Exception):
    """An alarm, or a part of it, the local evaluator does not evaluate (said by name)."""


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")

Series = dict[int, float]


@dataclass(frozen=True)
class Node:
    """A parsed expression: ``kind`` ``number`` (``value``), ``id`` (``name``), ``fill``
    (``name``, ``value``) or an operator ``+ - * /`` (``left``, ``right``); ``neg``."""

    kind: str
    value: float = 0.0
    name: str = ""
    left: Node | None = None
    right: Node | None = None


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        for number, name, other in _TOKEN.findall(text):
            if number:
                self.tokens.append(("number", number))
            elif name:
                self.tokens.append(("name", name))
            elif other.strip():
                self.tokens.append(("op", other))
        self.at = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if value is not None and token[1] != value:
            raise Unsupported(f"metric math: expected {value!r}, found {token[1] or 'the end'!r}")
        self.at += 1
        return token

    def expression(self) -> Node:
        node = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            node = Node(op, left=node, right=self.term())
        return node

    def term(self) -> Node:
        node = self.factor()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            node = Node(op, left=node, right=self.factor())
        return node

    def factor(self) -> Node:
        kind, text = self.take()
        if kind == "number":
            return Node("number", value=float(text))
        if (kind, text) == ("op", "-"):
            return Node("neg", left=self.factor())
        if (kind, text) == ("op", "("):
            node = self.expression()
            self.take(")")
            return node
        if kind == "name" and self.peek() == ("op", "("):
            if text != "FILL":
                raise Unsupported(f"metric math function {text} (the local evaluator has FILL)")
            self.take("(")
            target = self.take()
            self.take(",")
            negative = self.peek() == ("op", "-")
            if negative:
                self.take()
            fill = self.take()
            self.take(")")
            if target[0] != "name" or fill[0] != "number":
                raise Unsupported("FILL other than FILL(metric id, number)")
            filled = -float(fill[1]) if negative else float(fill[1])
            return Node("fill", name=target[1], value=filled)
        if kind == "name":
            return Node("id", name=text)
        raise Unsupported(f"metric math: unexpected {text or 'end'!r}")


def parse_expression(text: str) -> Node:
    """The expression's tree; ``Unsupported`` names what the local evaluator lacks."""
    parser = _Parser(text)
    node = parser.expression()
    if parser.peek()[0] != "end":
        raise Unsupported(f"metric math: unexpected {parser.peek()[1]!r}")
    return node


def metric_ids(node: Node | None) -> set[str]:
    """The metric ids an expression refers to."""
    if node is None:
        return set()
    if node.kind in ("id", "fill"):
        return {node.name}
    return metric_ids(node.left) | metric_ids(node.right)


_OPERATORS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
}


def compute(node: Node, series: Mapping[str, Series]) -> Series | float:
    """The expression's value: a series (period start -> value) where it refers to a metric,
    a number where it does not. A metric id is its series; ``FILL(id, v)`` its series with
    ``v`` at each period any metric of the expression has a datapoint in; an operation on two
    series has a value where both have one; a division by zero has none."""
    timestamps = sorted({t for s in series.values() for t in s})

    def value(n: Node) -> Series | float:
        if n.kind == "number":
            return n.value
        if n.kind == "id":
            if n.name not in series:
                raise Unsupported(f"metric math: no metric with id {n.name}")
            return dict(series[n.name])
        if n.kind == "fill":
            if n.name not in series:
                raise Unsupported(f"metric math: no metric with id {n.name}")
            return {t: series[n.name].get(t, n.value) for t in timestamps}
        assert n.left is not None
        if n.kind == "neg":
            inner = value(n.left)
            return {t: -v for t, v in inner.items()} if isinstance(inner, dict) else -inner
        assert n.right is not None
        return _combine(n.kind, value(n.left), value(n.right))

    return value(node)


def _combine(op: str, left: Series | float, right: Series | float) -> Series | float:
    def one(a: float, b: float) -> float | None:
        if op == "/":
            return None if b == 0 else a / b
        return _OPERATORS[op](a, b)

    if not isinstance(left, dict) and not isinstance(right, dict):
        result = one(left, right)
        return math.nan if result is None else result
    lefts = left if isinstance(left, dict) else None
    rights = right if isinstance(right, dict) else None
    keys = sorted(
        (set(lefts) & set(rights))
        if lefts is not None and rights is not None
        else set(lefts if lefts is not None else rights or {})
    )
    out: Series = {}
    for t in keys:
        a = lefts[t] if lefts is not None else float(left)  # type: ignore[arg-type]
        b = rights[t] if rights is not None else float(right)  # type: ignore[arg-type]
        result = one(a, b)
        if result is not None:
            out[t] = result
    return out
