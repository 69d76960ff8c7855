"""The stacks' CloudWatch alarms in the local cloud: created from the template, evaluated
against the metrics the workers publish.

Why: moto's CloudFormation cannot create ``AWS::CloudWatch::Alarm``, and moto's CloudWatch
stores alarms but never evaluates them. So the template patcher keeps each alarm aside
(``template.AlarmResource``); once its stack is deployed, ``create`` resolves its properties
against the stack's physical resources (a ``resolve.Resolver`` that raises: an alarm it
cannot resolve is named as not run, but for an action, which never runs locally and is left
out) and puts it in moto's CloudWatch with ``PutMetricAlarm``, named as in the template, or
as CloudFormation names an alarm the template names none (``<stack>-<logical id>-<suffix>``).
``Evaluator`` (a thread while the local cloud runs) then evaluates every alarm
(``alarm_rules``, CloudWatch's rules) against the metrics in moto's CloudWatch (the once
metrics ``emf.Shipper`` puts there) and sets its state with ``SetAlarmState``, so
``DescribeAlarms`` (``once status``, the AWS CLI) shows it. No alarm acts locally: moto runs
no alarm action.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from oncecli.localcloud.alarm_rules import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    AlarmRule,
    Evaluation,
    Fetch,
    MetricStat,
    datapoints,
    evaluate,
    judge,
    not_local,
    rule_of,
)
from oncecli.localcloud.metric_math import Series, Unsupported, compute, parse_expression
from oncecli.localcloud.resolve import Unresolvable
from oncecli.localcloud.template import AlarmResource, Stripped

#: The evaluation's names, as the local cloud's alarms show them (``alarm_rules``,
#: ``metric_math``), beside what this module does with them.
__all__ = [
    "ALARM",
    "EVALUATE_EVERY_S",
    "INSUFFICIENT_DATA",
    "OK",
    "STACK_TAG",
    "AlarmRule",
    "Created",
    "Evaluation",
    "Evaluator",
    "Fetch",
    "MetricStat",
    "Unsupported",
    "cloudformation_name",
    "compute",
    "create",
    "datapoints",
    "evaluate",
    "evaluate_all",
    "fetch_from",
    "judge",
    "parse_expression",
    "rule_of",
    "why_not_run",
]

#: How often the local cloud evaluates its alarms, in seconds (CloudWatch: every minute;
#: here often enough that ``once status`` shows a change within seconds of its minute).
EVALUATE_EVERY_S = 5.0
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
#: Tagged on each alarm the local cloud creates: ``once status`` finds a stack's alarms by
#: it (moto's CloudFormation does not list them among the stack's resources).
STACK_TAG = "once:local-stack"


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
            evaluation = (
                Evaluation(INSUFFICIENT_DATA, "Unchecked: Initial alarm creation")
                if rule.local
                else not_local(rule)
            )
        except Unsupported as error:
            evaluation = Evaluation(INSUFFICIENT_DATA, f"not evaluated locally: the local "
                              f"evaluator lacks {error}")  # fmt: skip
        cloudwatch.set_alarm_state(
            AlarmName=name, StateValue=evaluation.state, StateReason=evaluation.reason
        )
        done.names.append(name)
        (evaluated if evaluation.reason.startswith("Unchecked") else not_evaluated).append(name)
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
) -> dict[str, Evaluation]:
    """Evaluate the alarms (``names``; None: every metric alarm there) at ``now`` and (unless
    ``set_states`` is false) set the state of each whose state changed, as CloudWatch records
    a transition; return each evaluation by name."""
    at = time.time() if now is None else now
    fetch = fetch_from(cloudwatch)
    found: list[dict[str, Any]] = []
    wanted = list(names) if names is not None else None
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
        found.extend(page.get("MetricAlarms", []))
    evaluations: dict[str, Evaluation] = {}
    for alarm in found:
        name = str(alarm["AlarmName"])
        if wanted is not None and name not in wanted:
            continue
        current = str(alarm.get("StateValue", INSUFFICIENT_DATA))
        rule: AlarmRule | None = None
        try:
            rule = rule_of(alarm)
            evaluation = evaluate(rule, fetch, at, current)
        except Unsupported as error:
            evaluation = Evaluation(INSUFFICIENT_DATA, f"not evaluated locally: the local "
                              f"evaluator lacks {error}")  # fmt: skip
        evaluations[name] = evaluation
        if set_states and (
            evaluation.state != current
            or (
                evaluation.state == INSUFFICIENT_DATA
                and evaluation.reason != alarm.get("StateReason")
            )
        ):
            cloudwatch.set_alarm_state(
                AlarmName=name,
                StateValue=evaluation.state,
                StateReason=evaluation.reason[:1023],
                StateReasonData=evaluation.reason_data(rule),
            )
    return evaluations


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
