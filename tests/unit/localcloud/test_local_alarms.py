"""The local cloud's alarm evaluator (``oncecli.localcloud.alarms``), row by row against
CloudWatch's documented evaluation: each comparison, M out of N, each TreatMissingData, the
metric-math share of failed records ``OnceConsumer`` writes, and the alarms on AWS's own
metrics, which are not evaluated locally. Every evaluation has an explicit clock. Then the
alarms' way into moto's CloudWatch: created from template properties (names resolved,
CloudFormation's name when the template gives none), refused ones named, states set; and
``once status``'s alarm table, on AWS (the stack's resources) and locally (the tag)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from rich.console import Console

from oncecli.localcloud import alarms
from oncecli.localcloud.alarm_rules import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    MetricStat,
    evaluate,
    judge,
    rule_of,
)
from oncecli.localcloud.alarms import why_not_run
from oncecli.localcloud.metric_math import Unsupported, parse_expression
from oncecli.localcloud.template import AlarmResource, patch

PERIOD = 60
#: A minute boundary: the clock of every evaluation here is this plus a few seconds, so the
#: evaluation range is the minutes before it.
T = 1_800_000_000 - 1_800_000_000 % PERIOD
SERVICE = [{"Name": "service", "Value": "shop"}]


def _metric_alarm(**overrides: Any) -> dict[str, Any]:
    """A metric alarm as DescribeAlarms (or a template) gives it: Sum of Once/Conflict."""
    alarm = {
        "AlarmName": "Shop-Orders-Conflict",
        "Namespace": "Once",
        "MetricName": "Conflict",
        "Dimensions": SERVICE,
        "Statistic": "Sum",
        "Period": PERIOD,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "Threshold": 0,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
    }
    alarm.update(overrides)
    return {k: v for k, v in alarm.items() if v is not None}


def _fetch(by_name: dict[str, dict[int, float]]) -> alarms.Fetch:
    """A ``Fetch`` over synthetic datapoints: metric name -> {period start: value}."""

    def fetch(metric: MetricStat, start: int, end: int) -> dict[int, float]:
        return {t: v for t, v in by_name.get(metric.name, {}).items() if start <= t < end}

    return fetch


def _minutes(*values: float | None) -> dict[int, float]:
    """Values of the minutes ending at ``T``, oldest first (None: no datapoint)."""
    start = T - len(values) * PERIOD
    return {start + i * PERIOD: v for i, v in enumerate(values) if v is not None}


@pytest.mark.parametrize(
    ("comparison", "value", "state"),
    [
        ("GreaterThanThreshold", 6, ALARM),
        ("GreaterThanThreshold", 5, OK),
        ("GreaterThanThreshold", 4, OK),
        ("GreaterThanOrEqualToThreshold", 6, ALARM),
        ("GreaterThanOrEqualToThreshold", 5, ALARM),
        ("GreaterThanOrEqualToThreshold", 4, OK),
        ("LessThanThreshold", 6, OK),
        ("LessThanThreshold", 5, OK),
        ("LessThanThreshold", 4, ALARM),
        ("LessThanOrEqualToThreshold", 6, OK),
        ("LessThanOrEqualToThreshold", 5, ALARM),
        ("LessThanOrEqualToThreshold", 4, ALARM),
    ],
)
def test_each_comparison_against_the_threshold(comparison: str, value: float, state: str) -> None:
    rule = rule_of(_metric_alarm(ComparisonOperator=comparison, Threshold=5))
    verdict = evaluate(rule, _fetch({"Conflict": _minutes(value)}), now=T + 5)
    assert verdict.state == state, verdict.reason


@pytest.mark.parametrize(
    ("statistic", "state"), [("Sum", ALARM), ("Maximum", ALARM), ("SampleCount", ALARM)]
)
def test_the_statistic_is_the_one_the_alarm_names(statistic: str, state: str) -> None:
    seen: list[str] = []

    def fetch(metric: MetricStat, start: int, end: int) -> dict[int, float]:
        seen.append(metric.stat)
        assert (start, end) == (T - PERIOD, T)  # the last complete minute, aligned
        return {T - PERIOD: 1.0}

    assert evaluate(rule_of(_metric_alarm(Statistic=statistic)), fetch, T + 59).state == state
    assert seen == [statistic]


def test_the_minute_in_progress_is_not_evaluated_until_it_is_complete() -> None:
    rule = rule_of(_metric_alarm())
    fetch = _fetch({"Conflict": {T: 3.0}})  # the minute from T on
    assert evaluate(rule, fetch, now=T + 30).state == OK
    assert evaluate(rule, fetch, now=T + PERIOD).state == ALARM
    assert evaluate(rule, fetch, now=T + 2 * PERIOD).state == OK  # and a minute later, gone


@pytest.mark.parametrize(
    ("values", "m", "state"),
    [
        ((11, 11, 11), 3, ALARM),
        ((0, 11, 11), 3, OK),
        ((11, 0, 11), 3, OK),
        ((0, 11, 11), 2, ALARM),
        ((11, 0, 11), 2, ALARM),
        ((0, 0, 11), 2, OK),
        ((0, 0, 11), 1, ALARM),
        ((0, 0, 0), 1, OK),
    ],
)
def test_m_out_of_n_datapoints_must_breach(values: tuple[float, ...], m: int, state: str) -> None:
    rule = rule_of(_metric_alarm(EvaluationPeriods=3, DatapointsToAlarm=m, Threshold=10))
    verdict = evaluate(rule, _fetch({"Conflict": _minutes(*values)}), now=T)
    assert verdict.state == state, verdict.reason
    assert "out of the last 3 datapoints" in verdict.reason


@pytest.mark.parametrize(
    ("treatment", "values", "current", "state"),
    [
        # Nothing at all in the evaluation range.
        ("notBreaching", (None, None, None), ALARM, OK),
        ("breaching", (None, None, None), OK, ALARM),
        ("missing", (None, None, None), OK, INSUFFICIENT_DATA),
        ("ignore", (None, None, None), ALARM, ALARM),
        ("ignore", (None, None, None), OK, OK),
        # One breaching datapoint, two missing: 2 of 3 must breach.
        ("notBreaching", (None, 11, None), OK, OK),
        ("breaching", (None, 11, None), OK, ALARM),
        ("breaching", (None, 0, None), OK, ALARM),  # the two missing are two breaching
        ("breaching", (0, 0, None), OK, OK),
        # missing / ignore: fewer datapoints than M, all breaching, is ALARM.
        ("missing", (None, 11, None), OK, ALARM),
        ("ignore", (None, 11, None), OK, ALARM),
        ("missing", (None, 0, None), ALARM, OK),
        ("missing", (11, 0, None), OK, OK),
        ("missing", (11, 11, None), OK, ALARM),
        ("ignore", (11, 0, 11), OK, ALARM),
    ],
)
def test_missing_data_is_treated_as_the_alarm_says(
    treatment: str, values: tuple[float | None, ...], current: str, state: str
) -> None:
    rule = rule_of(
        _metric_alarm(
            EvaluationPeriods=3, DatapointsToAlarm=2, Threshold=10, TreatMissingData=treatment
        )
    )
    verdict = evaluate(rule, _fetch({"Conflict": _minutes(*values)}), now=T, current=current)
    assert verdict.state == state, verdict.reason


def test_no_treatment_is_missing_the_default() -> None:
    rule = rule_of(_metric_alarm(TreatMissingData=None))
    assert rule.treat_missing == "missing"
    assert evaluate(rule, _fetch({}), now=T).state == INSUFFICIENT_DATA


# --- the construct's metric math ------------------------------------------------------------
def _failed_records_alarm() -> dict[str, Any]:
    """The ``FailedRecords`` alarm as ``once_cdk.monitoring`` writes it: its own expression
    and metrics."""
    from once_cdk.monitoring import FAILED_SHARE_MINUTES, FAILED_SHARE_PERCENT, failed_share

    share = failed_share("Once", "shop")
    metrics: list[dict[str, Any]] = [
        {"Id": "expr_1", "Expression": share.expression, "ReturnData": True}
    ]
    for metric_id, metric in share.using_metrics.items():
        metrics.append(
            {
                "Id": metric_id,
                "MetricStat": {
                    "Metric": {
                        "Namespace": "Once",
                        "MetricName": metric.metric_name,
                        "Dimensions": SERVICE,
                    },
                    "Period": PERIOD,
                    "Stat": "Sum",
                },
                "ReturnData": False,
            }
        )
    return {
        "AlarmName": "Shop-Orders-FailedRecords",
        "Metrics": metrics,
        "EvaluationPeriods": FAILED_SHARE_MINUTES,
        "DatapointsToAlarm": FAILED_SHARE_MINUTES,
        "Threshold": FAILED_SHARE_PERCENT,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
    }


@pytest.fixture(scope="module")
def failed_records() -> alarms.AlarmRule:
    return rule_of(_failed_records_alarm())


@pytest.mark.parametrize(
    ("minute", "share"),
    [
        ({"Processed": 9, "Failed": 1}, 10.0),
        ({"Processed": 8, "Failed": 2}, 20.0),
        ({"Processed": 6, "Owed": 2, "Failed": 2}, 40.0),
        ({"Failed": 3}, 100.0),  # the other outcomes missing: FILL makes them 0
        ({"Processed": 5, "Quarantined": 5}, 0.0),  # a quarantine is not a failure
        ({"Processed": 4, "OwedSent": 4, "Failed": 1}, 20.0),  # OwedSent is not counted
        ({"OwedSent": 4}, None),  # only an uncounted metric: no datapoint
        ({}, None),
    ],
)
def test_the_failed_share_is_failed_and_owed_over_every_counted_outcome(
    failed_records: alarms.AlarmRule, minute: dict[str, float], share: float | None
) -> None:
    by_name = {name: {T - PERIOD: float(value)} for name, value in minute.items()}
    points = alarms.datapoints(failed_records, _fetch(by_name), now=T)
    assert points[-1] == (T - PERIOD, share)


@pytest.mark.parametrize(
    ("failed_per_minute", "state"),
    [
        ((2, 2, 2), ALARM),  # 20% in each of 3 minutes
        ((0, 2, 2), OK),  # 2 of 3: a blip the alarm lets pass
        ((2, 2, 1), OK),  # 10% is not more than 10%
        ((2, None, 2), OK),  # a minute without outcomes is not breaching
    ],
)
def test_failed_records_fires_after_three_minutes_over_ten_percent(
    failed_records: alarms.AlarmRule, failed_per_minute: tuple[int | None, ...], state: str
) -> None:
    failed = _minutes(*failed_per_minute)
    processed = {t: 10.0 - v for t, v in failed.items()}
    verdict = evaluate(failed_records, _fetch({"Failed": failed, "Processed": processed}), T + 1)
    assert verdict.state == state, verdict.reason


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("SUM(METRICS())", "SUM"),
        ("ANOMALY_DETECTION_BAND(m0)", "ANOMALY_DETECTION_BAND"),
        ("RATE(m0)", "RATE"),
        ("IF(m0 > 1, 1, 0)", "IF"),
        ("FILL(m0, REPEAT)", "FILL other than FILL(metric id, number)"),
        ("m0 > 1", "unexpected '>'"),
    ],
)
def test_other_metric_math_is_refused_by_name(expression: str, named: str) -> None:
    with pytest.raises(Unsupported, match=named.replace("(", r"\(").replace(")", r"\)")):
        parse_expression(expression)


def test_arithmetic_of_the_supported_forms() -> None:
    series = {"a": {0: 4.0, 60: 6.0}, "b": {0: 2.0}}
    assert alarms.compute(parse_expression("a + b * 2"), series) == {0: 8.0}
    assert alarms.compute(parse_expression("(a + FILL(b, 1)) / 2"), series) == {0: 3.0, 60: 3.5}
    assert alarms.compute(parse_expression("-a + 10"), series) == {0: 6.0, 60: 4.0}
    assert alarms.compute(parse_expression("a / (b - 2)"), series) == {}  # divided by zero
    assert alarms.compute(parse_expression("100 * FILL(b, 0) / a"), series) == {0: 50, 60: 0}


@pytest.mark.parametrize(
    ("overrides", "lacks"),
    [
        ({"ExtendedStatistic": "p99", "Statistic": None}, "percentile statistic p99"),
        ({"ComparisonOperator": "LessThanLowerOrGreaterThanUpperThreshold"}, "comparison"),
        ({"TreatMissingData": "sometimes"}, "TreatMissingData sometimes"),
        ({"MetricName": None, "Namespace": None}, "without a metric"),
    ],
)
def test_an_alarm_the_evaluator_cannot_read_is_refused_by_name(
    overrides: dict[str, Any], lacks: str
) -> None:
    with pytest.raises(Unsupported, match=lacks):
        rule_of(_metric_alarm(**overrides))


@pytest.mark.parametrize(
    ("namespace", "name", "dimension"),
    [
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName"),
        ("AWS/Lambda", "Errors", "FunctionName"),
    ],
)
def test_an_alarm_on_aws_s_own_metrics_is_not_evaluated_locally(
    namespace: str, name: str, dimension: str
) -> None:
    rule = rule_of(
        _metric_alarm(
            Namespace=namespace, MetricName=name, Dimensions=[{"Name": dimension, "Value": "q"}]
        )
    )
    assert not rule.local

    def fetch(metric: MetricStat, start: int, end: int) -> dict[int, float]:
        raise AssertionError("an AWS metric is never read locally")

    verdict = evaluate(rule, fetch, now=T)
    assert verdict.state == INSUFFICIENT_DATA
    assert verdict.reason.startswith(f"not evaluated locally: {namespace} metrics")


# --- a property: ALARM iff at least M of the last N datapoints breach ------------------------
_values = st.lists(st.one_of(st.none(), st.integers(0, 20)), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    values=_values,
    data=st.data(),
    treatment=st.sampled_from(["breaching", "notBreaching", "missing", "ignore"]),
    current=st.sampled_from([OK, ALARM, INSUFFICIENT_DATA]),
)
def test_alarm_iff_m_of_the_last_n_breach_with_missing_data_per_treatment(
    values: list[int | None], data: st.DataObject, treatment: str, current: str
) -> None:
    n = len(values)
    m = data.draw(st.integers(1, n), label="datapoints_to_alarm")
    rule = rule_of(
        _metric_alarm(
            EvaluationPeriods=n, DatapointsToAlarm=m, Threshold=10, TreatMissingData=treatment
        )
    )
    verdict = judge(rule, list(zip(range(0, n * PERIOD, PERIOD), values, strict=True)), current)
    # The oracle, as CloudWatch's page states each treatment.
    present = [v for v in values if v is not None]
    if treatment in ("breaching", "notBreaching"):
        as_breach = treatment == "breaching"
        breaches = sum(1 for v in values if (v > 10 if v is not None else as_breach))
        expected = ALARM if breaches >= m else OK
    elif not present:
        expected = INSUFFICIENT_DATA if treatment == "missing" else current
    elif len(present) < m:
        expected = ALARM if all(v > 10 for v in present) else OK
    else:
        expected = ALARM if sum(v > 10 for v in present) >= m else OK
    assert verdict.state == expected, (values, m, verdict.reason)


# --- into moto's CloudWatch -----------------------------------------------------------------
PHYSICAL = {"Function": "Shop-OrdersFunction-ABC", "Dlq": "Shop-OrdersDlq-XYZ"}


def _resolve(node: Any) -> Any:
    """A resolver of the stack's physical resources (``resolve.deployed(...).resolve``)."""
    from oncecli.localcloud.resolve import Unresolvable

    if isinstance(node, list):
        return [_resolve(item) for item in node]
    if isinstance(node, dict):
        if "Ref" in node:
            if node["Ref"] not in PHYSICAL:
                raise Unresolvable(f"{node['Ref']} is not a deployed resource of Shop")
            return PHYSICAL[node["Ref"]]
        if "Fn::GetAtt" in node:
            return PHYSICAL[node["Fn::GetAtt"][0]]
        if "Fn::Join" in node:
            separator, items = node["Fn::Join"]
            return separator.join(_resolve(items))
        return {k: _resolve(v) for k, v in node.items()}
    return node


def _put_datum(cloudwatch: Any, name: str, value: float, at: int) -> None:
    cloudwatch.put_metric_data(
        Namespace="Once",
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": SERVICE,
                "Value": value,
                "Unit": "Count",
                "Timestamp": datetime.fromtimestamp(at, UTC),
            }
        ],
    )


def test_alarms_are_created_from_the_template_and_their_states_set() -> None:
    template_alarms = [
        AlarmResource(
            "OrdersConflictA1B2",
            {**_metric_alarm(), "AlarmActions": [{"Ref": "AlarmTopic"}], "Tags": [
                {"Key": "stage", "Value": "local"}]},
        ),
        AlarmResource(
            "OrdersFunctionErrors",
            {
                **_metric_alarm(AlarmName=None, Namespace="AWS/Lambda", MetricName="Errors"),
                "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": "Function"}}],
            },
        ),
        AlarmResource("OrdersFailedRecords", _failed_records_alarm()),
        AlarmResource(
            "OrdersDlqDepth",
            {
                **_metric_alarm(AlarmName={"Fn::Join": ["-", ["Shop", "DlqDepth"]]}),
                "Dimensions": [{"Name": "QueueName", "Value": {"Ref": "Missing"}}],
            },
        ),
        AlarmResource("Refused", _metric_alarm(AlarmName="Shop-Refused", Statistic=None,
                                                ExtendedStatistic="x99")),
    ]  # fmt: skip
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        created = alarms.create("Shop", template_alarms, _resolve, cloudwatch)
        unnamed = alarms.cloudformation_name("Shop", "OrdersFunctionErrors")
        assert created.names == ["Shop-Orders-Conflict", unnamed, "Shop-Orders-FailedRecords"]
        assert unnamed.startswith("Shop-OrdersFunctionErrors-") and len(unnamed) == 38
        assert created.notes == [
            "3 alarm(s) created in the local CloudWatch (moto's CloudFormation cannot create "
            "them), 2 evaluated there against the workers' metrics, 1 not (named below)"
        ]
        by_id = {part.logical_id: part.why for part in created.left_out}
        assert sorted(by_id) == ["OrdersDlqDepth", "Refused"]
        assert "cannot resolve its properties (Missing is not a deployed" in by_id["OrdersDlqDepth"]
        assert "moto's CloudWatch refused it" in by_id["Refused"]

        described = {a["AlarmName"]: a for a in cloudwatch.describe_alarms()["MetricAlarms"]}
        assert described[unnamed]["Dimensions"] == [
            {"Name": "FunctionName", "Value": PHYSICAL["Function"]}
        ]
        assert described["Shop-Orders-Conflict"]["AlarmActions"] == []  # unresolvable: left out
        assert len(described["Shop-Orders-FailedRecords"]["Metrics"]) == 11
        # As on AWS, a new alarm has no data yet; the AWS metric's says why it never will.
        assert described["Shop-Orders-Conflict"]["StateValue"] == INSUFFICIENT_DATA
        assert described[unnamed]["StateReason"].startswith("not evaluated locally: AWS/Lambda")
        arn = described["Shop-Orders-Conflict"]["AlarmArn"]
        tags = cloudwatch.list_tags_for_resource(ResourceARN=arn)["Tags"]
        assert {"Key": alarms.STACK_TAG, "Value": "Shop"} in tags
        assert {"Key": "stage", "Value": "local"} in tags

        # Two conflicts in the minute before T, a failure share of 100% for three minutes.
        _put_datum(cloudwatch, "Conflict", 1, T - 50)
        _put_datum(cloudwatch, "Conflict", 1, T - 10)
        for minute in (3, 2, 1):
            _put_datum(cloudwatch, "Failed", 2, T - minute * PERIOD + 5)
        verdicts = alarms.evaluate_all(cloudwatch, created.names, now=T + 3)
        assert {name: v.state for name, v in verdicts.items()} == {
            "Shop-Orders-Conflict": ALARM,
            unnamed: INSUFFICIENT_DATA,
            "Shop-Orders-FailedRecords": ALARM,
        }
        conflict = cloudwatch.describe_alarms(AlarmNames=["Shop-Orders-Conflict"])
        (conflict_alarm,) = conflict["MetricAlarms"]
        assert conflict_alarm["StateValue"] == ALARM
        assert "1 out of the last 1 datapoints [2.0" in conflict_alarm["StateReason"]
        reason_data = json.loads(conflict_alarm["StateReasonData"])
        assert reason_data["evaluatedDatapoints"][0]["value"] == 2.0
        # A minute later the conflicts are out of the range: OK again.
        later = alarms.evaluate_all(cloudwatch, ["Shop-Orders-Conflict"], now=T + PERIOD + 3)
        assert later["Shop-Orders-Conflict"].state == OK


def test_the_template_patcher_keeps_alarms_aside_and_names_what_of_them_does_not_run() -> None:
    template = {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Conflict": {"Type": "AWS::CloudWatch::Alarm", "Properties": _metric_alarm()},
            "Depth": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": _metric_alarm(Namespace="AWS/SQS", MetricName="Depth"),
            },
            "Odd": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": _metric_alarm(ExtendedStatistic="p99", Statistic=None),
            },
        }
    }
    patched = patch(template, "Shop", alarm_reason=why_not_run)  # as the local cloud patches
    assert [a.logical_id for a in patched.alarms] == ["Conflict", "Depth", "Odd"]
    assert patched.alarms[0].properties == _metric_alarm()
    assert sorted(patched.deployable["Resources"]) == ["Queue"]
    why = {part.logical_id: part.why for part in patched.stripped}
    assert "evaluates it against the workers' metrics" in why["Conflict"]
    assert "does not evaluate it: AWS/SQS metrics are published by AWS" in why["Depth"]
    assert "lacks percentile statistic p99" in why["Odd"]
    assert all("its actions never run locally" in text for text in why.values())


# --- once status ----------------------------------------------------------------------------
class _Paginator:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return self.pages


class _Cfn:
    def __init__(self, alarm_names: list[str]) -> None:
        self.alarm_names = alarm_names

    def get_paginator(self, name: str) -> _Paginator:
        assert name == "list_stack_resources"
        summaries = [
            {"ResourceType": "AWS::CloudWatch::Alarm", "PhysicalResourceId": n}
            for n in self.alarm_names
        ] + [{"ResourceType": "AWS::SQS::Queue", "PhysicalResourceId": "https://q"}]
        return _Paginator([{"StackResourceSummaries": summaries}])


_DESCRIBED = [
    {
        "AlarmName": "Shop-Orders-Conflict",
        "AlarmArn": "arn:conflict",
        "Namespace": "Once",
        "StateValue": "ALARM",
        "StateReason": "Threshold Crossed: 1 out of the last 1 datapoints [2.0]",
    },
    {
        "AlarmName": "Shop-Orders-DlqDepth",
        "AlarmArn": "arn:dlq",
        "Namespace": "AWS/SQS",
        "StateValue": "INSUFFICIENT_DATA",
        "StateReason": "not evaluated locally: AWS/SQS metrics are published by AWS",
    },
]


class _CloudWatch:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def describe_alarms(self, AlarmNames: list[str], AlarmTypes: list[str]) -> dict[str, Any]:
        self.asked.append(AlarmNames)
        return {"MetricAlarms": [a for a in _DESCRIBED if a["AlarmName"] in AlarmNames]}

    def get_paginator(self, name: str) -> _Paginator:
        return _Paginator([{"MetricAlarms": _DESCRIBED}])

    def list_tags_for_resource(self, ResourceARN: str) -> dict[str, Any]:
        stack = "Shop" if ResourceARN == "arn:conflict" else "Other"
        return {"Tags": [{"Key": alarms.STACK_TAG, "Value": stack}]}


def _render(table: Any) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def test_status_shows_the_stack_s_alarms_on_aws_from_its_resources() -> None:
    from oncecli.operate import Target, alarms_view

    cloudwatch = _CloudWatch()
    names = ["Shop-Orders-Conflict", "Shop-Orders-DlqDepth"]
    target = Target("Shop", {}, None, None, "shop", cloudwatch=cloudwatch, cfn=_Cfn(names))
    text = _render(alarms_view(target))
    assert cloudwatch.asked == [names]
    assert "alarms (Shop): 1 of 2 in ALARM" in text
    assert "Orders-Conflict" in text and "ALARM" in text and "Threshold Crossed" in text
    assert "not evaluated locally: Orders-DlqDepth" not in text  # on AWS, CloudWatch does


def test_status_on_the_local_cloud_finds_the_alarms_by_tag_and_names_those_not_evaluated() -> None:
    from oncecli import operate
    from oncecli.operate import Target, alarms_view

    assert operate.LOCAL_STACK_TAG == alarms.STACK_TAG
    cloudwatch = _CloudWatch()
    target = Target("Shop", {}, None, None, "shop", cloudwatch=cloudwatch, cfn=_Cfn([]), local=True)
    text = _render(alarms_view(target))
    # The DLQ alarm is tagged with another stack here: not shown.
    assert "alarms (Shop): 1 of 1 in ALARM" in text and "DlqDepth" not in text
    cloudwatch_both = _CloudWatch()
    cloudwatch_both.list_tags_for_resource = lambda ResourceARN: {  # type: ignore[method-assign]
        "Tags": [{"Key": alarms.STACK_TAG, "Value": "Shop"}]
    }
    target.cloudwatch = cloudwatch_both
    text = _render(alarms_view(target))
    assert "alarms (Shop): 1 of 2 in ALARM" in text
    assert "not evaluated locally: Orders-DlqDepth (AWS publishes their metrics" in text
