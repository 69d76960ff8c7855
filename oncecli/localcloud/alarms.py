"""The stacks' CloudWatch alarms in the local cloud: created from the template, evaluated
against the metrics the workers publish.

Why: moto's CloudFormation cannot create ``AWS::CloudWatch::Alarm``, and moto's CloudWatch
stores alarms but never evaluates them. So the template patcher keeps each alarm aside
(``template.AlarmResource``); once its stack is deployed, ``create`` resolves its properties
against the stack's physical resources (``subscriptions.Resolver``) and puts it in moto's
CloudWatch with ``PutMetricAlarm``, named as in the template, or as CloudFormation names an
alarm the template names none (``<stack>-<logical id>-<suffix>``). ``Evaluator`` (a thread
while the local cloud runs) then evaluates every alarm against the metrics in moto's
CloudWatch (the once metrics ``emf.Shipper`` puts there) and sets its state with
``SetAlarmState``, so ``DescribeAlarms`` (``once status``, the AWS CLI) shows it.

The evaluation (``evaluate``) follows CloudWatch's documented rules, for what alarms of the
``OnceConsumer`` use: one metric and a statistic (``Sum``, ``Maximum``, ``Minimum``,
``Average``, ``SampleCount``) over ``Period``, or a metric-math expression of such metrics
(``+ - * /``, parentheses, numbers, metric ids and ``FILL(id, number)``; any other function
is refused by name); ``ComparisonOperator`` (the four threshold comparisons); the last
``EvaluationPeriods`` complete periods, of which ``DatapointsToAlarm`` must breach; and
``TreatMissingData``:

- ``notBreaching`` / ``breaching``: a missing datapoint counts as within / beyond the
  threshold;
- ``missing`` (the default): no datapoint at all is ``INSUFFICIENT_DATA``; with fewer
  datapoints than ``DatapointsToAlarm``, the alarm goes to ALARM only if every one of them
  breaches (the rule CloudWatch documents for a partially missing evaluation range);
- ``ignore``: as ``missing``, but no datapoint at all keeps the current state.

What it leaves out, and says so in the alarm's reason: metrics AWS publishes (``AWS/SQS``,
``AWS/Lambda``, any ``AWS/`` namespace) do not exist locally, so their alarms are
``INSUFFICIENT_DATA``, "not evaluated locally" (treating their missing data as
``notBreaching`` would say OK of a DLQ that holds messages); CloudWatch's look-back beyond
the evaluation range for missing data, percentile statistics, anomaly detection and
composite alarms are not evaluated. No alarm acts locally: moto runs no alarm action.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import operator
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from oncecli.localcloud.template import AlarmResource, Stripped

#: How often the local cloud evaluates its alarms, in seconds (CloudWatch: every minute;
#: here often enough that ``once status`` shows a change within seconds of its minute).
EVALUATE_EVERY_S = 5.0
OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
#: Namespaces whose metrics AWS publishes itself: none of them exists locally.
AWS_NAMESPACE_PREFIX = "AWS/"
#: CloudFormation's alarm properties, passed to PutMetricAlarm as they are (resolved).
_PROPERTIES = (
    "AlarmName", "AlarmDescription", "ActionsEnabled", "AlarmActions", "OKActions",
    "InsufficientDataActions", "MetricName", "Namespace", "Statistic", "ExtendedStatistic",
    "Dimensions", "Period", "Unit", "EvaluationPeriods", "DatapointsToAlarm", "Threshold",
    "ComparisonOperator", "TreatMissingData", "EvaluateLowSampleCountPercentile", "Metrics",
    "Tags", "ThresholdMetricId",
)  # fmt: skip
_INTEGERS = ("Period", "EvaluationPeriods", "DatapointsToAlarm")
_BOOLEANS = ("ActionsEnabled",)
_COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanThreshold": (operator.gt, "greater than"),
    "GreaterThanOrEqualToThreshold": (operator.ge, "greater than or equal to"),
    "LessThanThreshold": (operator.lt, "less than"),
    "LessThanOrEqualToThreshold": (operator.le, "less than or equal to"),
}
_STATISTICS = ("Sum", "Maximum", "Minimum", "Average", "SampleCount")
_TREATMENTS = ("missing", "notBreaching", "breaching", "ignore")
#: Tagged on each alarm the local cloud creates: ``once status`` finds a stack's alarms by
#: it (moto's CloudFormation does not list them among the stack's resources).
STACK_TAG = "once:local-stack"


class Unsupported(Exception):
    """An alarm, or a part of it, the local evaluator does not evaluate (said by name)."""


# --- what an alarm watches ------------------------------------------------------------------
@dataclass(frozen=True)
class MetricStat:
    """One metric and its statistic over a period."""

    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    period: int
    stat: str

    @property
    def local(self) -> bool:
        """Whether the local cloud can have it: AWS publishes the ``AWS/`` namespaces."""
        return not self.namespace.startswith(AWS_NAMESPACE_PREFIX)

    def query(self, query_id: str) -> dict[str, Any]:
        return {
            "Id": query_id,
            "MetricStat": {
                "Metric": {
                    "Namespace": self.namespace,
                    "MetricName": self.name,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in self.dimensions],
                },
                "Period": self.period,
                "Stat": self.stat,
            },
            "ReturnData": True,
        }


def _metric_stat(metric: Mapping[str, Any], period: Any, stat: Any) -> MetricStat:
    if stat not in _STATISTICS:
        raise Unsupported(f"statistic {stat or 'unset'} (the local evaluator has {_STATISTICS})")
    dimensions = tuple(
        sorted((str(d["Name"]), str(d["Value"])) for d in metric.get("Dimensions") or [])
    )
    if not metric.get("MetricName") or not metric.get("Namespace"):
        raise Unsupported("an alarm without a metric (MetricName and Namespace)")
    return MetricStat(
        str(metric["Namespace"]), str(metric["MetricName"]), dimensions, int(period), str(stat)
    )


# --- metric math ----------------------------------------------------------------------------
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


def _ids(node: Node | None) -> set[str]:
    if node is None:
        return set()
    if node.kind in ("id", "fill"):
        return {node.name}
    return _ids(node.left) | _ids(node.right)


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


# --- an alarm ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AlarmRule:
    """What an alarm evaluates, from ``DescribeAlarms`` or a template's properties (the same
    names): its metrics by id, the expression (None: the one metric ``m``), when it fires."""

    name: str
    metrics: dict[str, MetricStat]
    expression: Node | None
    comparison: str
    threshold: float
    evaluation_periods: int
    datapoints_to_alarm: int
    period: int
    treat_missing: str

    @property
    def local(self) -> bool:
        """Whether every metric it reads can exist locally."""
        return all(m.local for m in self.metrics.values())

    @property
    def namespaces(self) -> list[str]:
        return sorted({m.namespace for m in self.metrics.values()})


def rule_of(alarm: Mapping[str, Any]) -> AlarmRule:
    """The rule of an alarm (a ``MetricAlarms`` entry, or a template's properties);
    ``Unsupported`` says what of it the local evaluator does not evaluate."""
    if alarm.get("ExtendedStatistic"):
        raise Unsupported(f"percentile statistic {alarm['ExtendedStatistic']}")
    if alarm.get("ThresholdMetricId"):
        raise Unsupported("a threshold from a metric (anomaly detection band)")
    comparison = str(alarm.get("ComparisonOperator") or "unset")
    if comparison not in _COMPARISONS:
        raise Unsupported(f"comparison {comparison}")
    treat = str(alarm.get("TreatMissingData") or "missing")
    if treat not in _TREATMENTS:
        raise Unsupported(f"TreatMissingData {treat}")
    metrics: dict[str, MetricStat] = {}
    expression: Node | None = None
    queries = alarm.get("Metrics") or []
    if queries:
        returned = [q for q in queries if q.get("ReturnData", True)]
        if len(returned) != 1:
            raise Unsupported("metric math with other than one query returning data")
        for query in queries:
            if "MetricStat" in query:
                stat = query["MetricStat"]
                metrics[str(query["Id"])] = _metric_stat(
                    stat["Metric"], stat.get("Period"), stat.get("Stat")
                )
            elif "Expression" not in query:
                raise Unsupported(f"metric query {query.get('Id')} (neither metric nor math)")
        (top,) = returned
        if "Expression" in top:
            expression = parse_expression(str(top["Expression"]))
            for name in _ids(expression):
                if name not in metrics:
                    raise Unsupported(f"metric math over {name}, not a metric of the alarm")
        else:
            expression = Node("id", name=str(top["Id"]))
        periods = {m.period for m in metrics.values()}
        if len(periods) != 1:
            raise Unsupported("metrics of different periods in one alarm")
        (period,) = periods
    else:
        metrics["m"] = _metric_stat(alarm, alarm.get("Period"), alarm.get("Statistic"))
        period = metrics["m"].period
    evaluation_periods = int(alarm.get("EvaluationPeriods") or 1)
    return AlarmRule(
        name=str(alarm.get("AlarmName") or ""),
        metrics=metrics,
        expression=expression,
        comparison=comparison,
        threshold=float(alarm.get("Threshold") or 0),
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=int(alarm.get("DatapointsToAlarm") or evaluation_periods),
        period=period,
        treat_missing=treat,
    )


@dataclass(frozen=True)
class Verdict:
    """An evaluation's outcome: the state, its reason, and the datapoints it read."""

    state: str
    reason: str
    datapoints: tuple[tuple[int, float | None], ...] = ()

    def reason_data(self, rule: AlarmRule | None = None) -> str:
        data: dict[str, Any] = {"version": "1.0", "evaluatedBy": "once local cloud"}
        if rule is not None:
            data["threshold"] = rule.threshold
            data["period"] = rule.period
        data["evaluatedDatapoints"] = [
            {"timestamp": _when(t), **({} if v is None else {"value": v})}
            for t, v in self.datapoints
        ]
        return json.dumps(data)


def _when(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def _short_when(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%d/%m/%y %H:%M:%S")


#: ``fetch(metric, start, end)``: the metric's statistic per period (period start, epoch
#: seconds -> value) over [start, end), periods aligned on multiples of the metric's period.
Fetch = Callable[[MetricStat, int, int], Series]


def window(rule: AlarmRule, now: float) -> tuple[int, int]:
    """The evaluation range at ``now``: the last ``EvaluationPeriods`` complete periods."""
    end = int(now // rule.period) * rule.period
    return end - rule.evaluation_periods * rule.period, end


def datapoints(rule: AlarmRule, fetch: Fetch, now: float) -> list[tuple[int, float | None]]:
    """The value of each period of the evaluation range, oldest first (None: missing)."""
    start, end = window(rule, now)
    series = {mid: fetch(metric, start, end) for mid, metric in rule.metrics.items()}
    if rule.expression is None:
        values: Series | float = series["m"]
    else:
        values = compute(rule.expression, series)
    if not isinstance(values, dict):
        raise Unsupported("metric math that refers to no metric")
    return [(t, values.get(t)) for t in range(start, end, rule.period)]


def judge(
    rule: AlarmRule, points: list[tuple[int, float | None]], current: str = INSUFFICIENT_DATA
) -> Verdict:
    """The state the datapoints of the evaluation range give (``current``: the alarm's state,
    which ``ignore`` keeps when no datapoint is there)."""
    compare, words = _COMPARISONS[rule.comparison]
    m, n = rule.datapoints_to_alarm, rule.evaluation_periods
    present = [(t, v) for t, v in points if v is not None]
    breaching = [(t, v) for t, v in present if compare(v, rule.threshold)]
    missing = len(points) - len(present)
    if rule.treat_missing == "breaching":
        count, considered = len(breaching) + missing, len(points)
    elif rule.treat_missing == "notBreaching":
        count, considered = len(breaching), len(points)
    else:
        count, considered = len(breaching), len(present)
    shown = ", ".join(f"{v} ({_short_when(t)})" for t, v in reversed(present))
    what = (
        f"{count} out of the last {n} datapoints [{shown}] "
        f"{'was' if count == 1 else 'were'} {words} the threshold ({rule.threshold})"
        if present
        else f"no datapoints in the last {n} period{'' if n == 1 else 's'}"
    )
    pair = tuple(points)
    if not present and rule.treat_missing in ("missing", "ignore"):
        if rule.treat_missing == "ignore":
            return Verdict(current, f"no datapoints in the last {n} periods: state kept "
                           "(TreatMissingData ignore)", pair)  # fmt: skip
        return Verdict(INSUFFICIENT_DATA, f"Insufficient Data: no datapoints in the last {n} "
                       "periods (TreatMissingData missing)", pair)  # fmt: skip
    # Fewer datapoints than DatapointsToAlarm: ALARM only if every one of them breaches.
    alarmed = count == considered if considered < m else count >= m
    treated = (
        f"; {missing} missing treated as {rule.treat_missing}"
        if missing and rule.treat_missing in ("breaching", "notBreaching")
        else ""
    )
    if alarmed:
        return Verdict(ALARM, f"Threshold Crossed: {what} (minimum {m} datapoint"
                       f"{'' if m == 1 else 's'} for ALARM){treated}", pair)  # fmt: skip
    return Verdict(OK, f"Threshold Crossed: {what} (minimum {m} datapoint"
                   f"{'' if m == 1 else 's'} for ALARM){treated}", pair)  # fmt: skip


def evaluate(
    rule: AlarmRule, fetch: Fetch, now: float, current: str = INSUFFICIENT_DATA
) -> Verdict:
    """The alarm's state at ``now`` (epoch seconds) from the metrics ``fetch`` reads."""
    if not rule.local:
        return not_local(rule)
    return judge(rule, datapoints(rule, fetch, now), current)


def not_local(rule: AlarmRule) -> Verdict:
    namespaces = ", ".join(n for n in rule.namespaces if n.startswith(AWS_NAMESPACE_PREFIX))
    return Verdict(
        INSUFFICIENT_DATA,
        f"not evaluated locally: {namespaces} metrics are published by AWS, and the local "
        "cloud has none (on AWS this alarm is evaluated)",
    )


def fetch_from(cloudwatch: Any) -> Fetch:
    """A ``Fetch`` that reads a CloudWatch (moto's) with GetMetricData."""

    def fetch(metric: MetricStat, start: int, end: int) -> Series:
        response = cloudwatch.get_metric_data(
            MetricDataQueries=[metric.query("m")],
            StartTime=datetime.fromtimestamp(start, UTC),
            EndTime=datetime.fromtimestamp(end, UTC),
        )
        found: Series = {}
        for result in response.get("MetricDataResults", []):
            for when, value in zip(result["Timestamps"], result["Values"], strict=True):
                epoch = int(when.timestamp())
                if start <= epoch < end:
                    found[epoch - epoch % metric.period] = float(value)
        return found

    return fetch


# --- creating them --------------------------------------------------------------------------
def cloudformation_name(stack: str, logical_id: str) -> str:
    """The name CloudFormation gives an alarm its template names none: the stack's name, the
    logical id and a suffix of 12 capitals and digits (here derived from both, not random)."""
    digest = hashlib.sha256(f"{stack}/{logical_id}".encode()).digest()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    suffix = "".join(alphabet[b % len(alphabet)] for b in digest[:12])
    return f"{stack}-{logical_id}-{suffix}"


_ACTIONS = ("AlarmActions", "OKActions", "InsufficientDataActions")


def _put_request(stack: str, alarm: AlarmResource, resolve: Callable[[Any], Any]) -> dict[str, Any]:
    from oncecli.localcloud.subscriptions import Unresolvable

    request: dict[str, Any] = {}
    for key in _PROPERTIES:
        if key not in alarm.properties:
            continue
        try:
            request[key] = resolve(alarm.properties[key])
        except Unresolvable:
            if key not in _ACTIONS:
                raise
            # No action runs locally: one the local cloud cannot resolve is left out.
    request.setdefault("AlarmName", cloudformation_name(stack, alarm.logical_id))
    for key in _INTEGERS:
        if key in request:
            request[key] = int(request[key])
    for key in _BOOLEANS:
        if key in request:
            request[key] = str(request[key]).lower() == "true"
    if "Threshold" in request:
        request["Threshold"] = float(request["Threshold"])
    for query in request.get("Metrics", []):
        if "ReturnData" in query:
            query["ReturnData"] = str(query["ReturnData"]).lower() == "true"
        if "Period" in query.get("MetricStat", {}):
            query["MetricStat"]["Period"] = int(query["MetricStat"]["Period"])
    request["Tags"] = [*request.get("Tags", []), {"Key": STACK_TAG, "Value": stack}]
    return request


def why_not_run(properties: Mapping[str, Any]) -> str:
    """What of an alarm does not run locally, from its template properties."""
    actions = "its actions never run locally (nothing is notified)"
    created = (
        "moto's CloudFormation cannot create it; the local cloud creates it in its "
        "CloudWatch after the deploy"
    )
    try:
        rule = rule_of({**properties, "AlarmName": "-"})
    except (Unsupported, KeyError, TypeError, ValueError) as error:
        return f"{created} but does not evaluate it (the local evaluator lacks {error}); {actions}"
    if not rule.local:
        return (
            f"{created} but does not evaluate it: {', '.join(rule.namespaces)} metrics are "
            f"published by AWS and none exists locally (it stays INSUFFICIENT_DATA); {actions}"
        )
    return f"{created} and evaluates it against the workers' metrics; {actions}"


@dataclass
class Created:
    """What ``create`` did: a note per alarm created, what stays not run, the names."""

    notes: list[str] = field(default_factory=list)
    left_out: list[Stripped] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def create(
    stack: str, alarms: list[AlarmResource], resolve: Callable[[Any], Any], cloudwatch: Any
) -> Created:
    """Put each alarm of a deployed stack in the local CloudWatch (initial state
    INSUFFICIENT_DATA, as on AWS; an alarm on AWS's own metrics says it is not evaluated
    locally). An alarm whose properties cannot be resolved or that moto refuses is named as
    not run (``left_out``)."""
    from oncecli.localcloud.subscriptions import Unresolvable

    done = Created()
    evaluated: list[str] = []
    not_evaluated: list[str] = []
    for alarm in alarms:
        try:
            request = _put_request(stack, alarm, resolve)
        except (Unresolvable, ValueError, TypeError, IndexError, KeyError) as error:
            done.left_out.append(_refused(stack, alarm, f"cannot resolve its properties ({error})"))
            continue
        try:
            cloudwatch.put_metric_alarm(**request)
        except (ClientError, BotoCoreError) as error:
            done.left_out.append(_refused(stack, alarm, f"moto's CloudWatch refused it ({error})"))
            continue
        name = str(request["AlarmName"])
        try:
            rule = rule_of(request)
            verdict = (
                Verdict(INSUFFICIENT_DATA, "Unchecked: Initial alarm creation")
                if rule.local
                else not_local(rule)
            )
        except Unsupported as error:
            verdict = Verdict(INSUFFICIENT_DATA, f"not evaluated locally: the local "
                              f"evaluator lacks {error}")  # fmt: skip
        cloudwatch.set_alarm_state(
            AlarmName=name, StateValue=verdict.state, StateReason=verdict.reason
        )
        done.names.append(name)
        (evaluated if verdict.reason.startswith("Unchecked") else not_evaluated).append(name)
    if done.names:
        done.notes.append(
            f"{len(done.names)} alarm(s) created in the local CloudWatch (moto's "
            f"CloudFormation cannot create them), {len(evaluated)} evaluated there against "
            "the workers' metrics"
            + (f", {len(not_evaluated)} not (named below)" if not_evaluated else "")
        )
    return done


def _refused(stack: str, alarm: AlarmResource, why: str) -> Stripped:
    return Stripped(
        stack,
        "AWS::CloudWatch::Alarm",
        alarm.logical_id,
        f"moto's CloudFormation cannot create it, and the local cloud could not create it "
        f"either: {why}; it is neither evaluated nor acts locally",
    )


# --- evaluating them ------------------------------------------------------------------------
def evaluate_all(
    cloudwatch: Any,
    names: list[str] | None = None,
    now: float | None = None,
    *,
    set_states: bool = True,
) -> dict[str, Verdict]:
    """Evaluate the alarms (``names``; None: every metric alarm there) at ``now`` and (unless
    ``set_states`` is false) set the state of each whose state changed, as CloudWatch records
    a transition; return each verdict by name."""
    at = time.time() if now is None else now
    fetch = fetch_from(cloudwatch)
    found: list[dict[str, Any]] = []
    wanted = list(names) if names is not None else None
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
        found.extend(page.get("MetricAlarms", []))
    verdicts: dict[str, Verdict] = {}
    for alarm in found:
        name = str(alarm["AlarmName"])
        if wanted is not None and name not in wanted:
            continue
        current = str(alarm.get("StateValue", INSUFFICIENT_DATA))
        rule: AlarmRule | None = None
        try:
            rule = rule_of(alarm)
            verdict = evaluate(rule, fetch, at, current)
        except Unsupported as error:
            verdict = Verdict(INSUFFICIENT_DATA, f"not evaluated locally: the local "
                              f"evaluator lacks {error}")  # fmt: skip
        verdicts[name] = verdict
        if set_states and (
            verdict.state != current
            or (verdict.state == INSUFFICIENT_DATA and verdict.reason != alarm.get("StateReason"))
        ):
            cloudwatch.set_alarm_state(
                AlarmName=name,
                StateValue=verdict.state,
                StateReason=verdict.reason[:1023],
                StateReasonData=verdict.reason_data(rule),
            )
    return verdicts


class Evaluator:
    """A thread that evaluates the local cloud's alarms every ``every`` seconds."""

    def __init__(self, cloudwatch: Any, every: float = EVALUATE_EVERY_S) -> None:
        self._cloudwatch = cloudwatch
        self._every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    def start(self) -> Evaluator:
        self._thread = threading.Thread(target=self._run, daemon=True, name="alarm-evaluator")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # the engine is going away: next time
                evaluate_all(self._cloudwatch)
                self.passes += 1
            self._stop.wait(self._every)
