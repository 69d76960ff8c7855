"""CloudWatch's evaluation of a metric alarm: from its datapoints to its state and reason.

Why: moto's CloudWatch stores alarms but never evaluates them, and a team reads a stack's
alarms on the local cloud as on AWS (``once status``, the AWS CLI). The evaluation
(``evaluate``) follows CloudWatch's documented rules, for what alarms of the
``OnceConsumer`` use: one metric and a statistic (``Sum``, ``Maximum``, ``Minimum``,
``Average``, ``SampleCount``) over ``Period``, or a metric-math expression of such metrics
(``metric_math``); ``ComparisonOperator`` (the four threshold comparisons); the last
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
composite alarms are not evaluated. Every evaluation has an explicit clock (``now``) and
reads its metrics through ``Fetch``: nothing here calls CloudWatch.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from oncecli.localcloud.metric_math import (
    Node,
    Series,
    Unsupported,
    compute,
    metric_ids,
    parse_expression,
)

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
#: Namespaces whose metrics AWS publishes itself: none of them exists locally.
AWS_NAMESPACE_PREFIX = "AWS/"
_COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanThreshold": (operator.gt, "greater than"),
    "GreaterThanOrEqualToThreshold": (operator.ge, "greater than or equal to"),
    "LessThanThreshold": (operator.lt, "less than"),
    "LessThanOrEqualToThreshold": (operator.le, "less than or equal to"),
}
_STATISTICS = ("Sum", "Maximum", "Minimum", "Average", "SampleCount")
_TREATMENTS = ("missing", "notBreaching", "breaching", "ignore")


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
            for name in metric_ids(expression):
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
class Evaluation:
    """An alarm's evaluation: the state it gives, its reason, and the datapoints it read."""

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
) -> Evaluation:
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
            return Evaluation(current, f"no datapoints in the last {n} periods: state kept "
                           "(TreatMissingData ignore)", pair)  # fmt: skip
        return Evaluation(INSUFFICIENT_DATA, f"Insufficient Data: no datapoints in the last {n} "
                       "periods (TreatMissingData missing)", pair)  # fmt: skip
    # Fewer datapoints than DatapointsToAlarm: ALARM only if every one of them breaches.
    alarmed = count == considered if considered < m else count >= m
    treated = (
        f"; {missing} missing treated as {rule.treat_missing}"
        if missing and rule.treat_missing in ("breaching", "notBreaching")
        else ""
    )
    if alarmed:
        return Evaluation(ALARM, f"Threshold Crossed: {what} (minimum {m} datapoint"
                       f"{'' if m == 1 else 's'} for ALARM){treated}", pair)  # fmt: skip
    return Evaluation(OK, f"Threshold Crossed: {what} (minimum {m} datapoint"
                   f"{'' if m == 1 else 's'} for ALARM){treated}", pair)  # fmt: skip


def evaluate(
    rule: AlarmRule, fetch: Fetch, now: float, current: str = INSUFFICIENT_DATA
) -> Evaluation:
    """The alarm's state at ``now`` (epoch seconds) from the metrics ``fetch`` reads."""
    if not rule.local:
        return not_local(rule)
    return judge(rule, datapoints(rule, fetch, now), current)


def not_local(rule: AlarmRule) -> Evaluation:
    namespaces = ", ".join(n for n in rule.namespaces if n.startswith(AWS_NAMESPACE_PREFIX))
    return Evaluation(
        INSUFFICIENT_DATA,
        f"not evaluated locally: {namespaces} metrics are published by AWS, and the local "
        "cloud has none (on AWS this alarm is evaluated)",
    )
