"""``environment=`` beside the variables once sets (docs/construct.md's ``environment`` row):
five of them are the construct's own and refused (``RESERVED_ENVIRONMENT``), and one,
``POWERTOOLS_METRICS_NAMESPACE``, is taken: it wins in the function, and every alarm and
dashboard graph of once's metrics reads it (an alarm on another namespace than the one the
function writes would never fire)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from once import constants as c
from once_cdk import ConfigurationError, OnceConsumer
from once_cdk.settings import RESERVED_ENVIRONMENT

HANDLER = "orders.handler.lambda_handler"
NAMESPACE = "Shop"
#: The alarms on once's own metrics, each reading at least this one.
ONCE_ALARMED = {"LeaseLost", "Conflict", "LeaseExpired", "InternalError", "Failed"}


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("env-code")
    (root / "orders").mkdir()
    (root / "orders" / "handler.py").write_text("lambda_handler = None\n")
    return root


def _consumer(code: Path, environment: dict[str, str]) -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(), "Env")
    OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                 environment=environment)  # fmt: skip
    return assertions.Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def renamed(code) -> dict[str, Any]:
    return _consumer(code, {c.ENV_METRICS_NAMESPACE: NAMESPACE, "TZ": "UTC"})


@pytest.fixture(scope="module")
def default(code) -> dict[str, Any]:
    return _consumer(code, {"TZ": "UTC"})


def _of(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def _namespaces(alarm: dict[str, Any]) -> set[str]:
    """The namespaces of the metrics an alarm reads, by metric name: its own or its math's."""
    if "Namespace" in alarm:
        return {f"{alarm['Namespace']}/{alarm['MetricName']}"}
    return {
        f"{q['MetricStat']['Metric']['Namespace']}/{q['MetricStat']['Metric']['MetricName']}"
        for q in alarm.get("Metrics", [])
        if "MetricStat" in q
    }


def _variables(template: dict[str, Any]) -> dict[str, Any]:
    (function,) = _of(template, "AWS::Lambda::Function")
    return function["Environment"]["Variables"]


@pytest.mark.parametrize("name", RESERVED_ENVIRONMENT)
def test_the_variables_once_sets_from_its_resources_are_refused(code, name):
    stack = cdk.Stack(cdk.App(), "Refused")
    with pytest.raises(ConfigurationError, match=f"environment sets {name}: OnceConsumer sets"):
        OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                     environment={name: "mine"})  # fmt: skip


def test_what_once_sets_is_the_reserved_five_and_the_namespace(default):
    assert set(_variables(default)) - {"TZ"} == {*RESERVED_ENVIRONMENT, c.ENV_METRICS_NAMESPACE}
    assert c.ENV_METRICS_NAMESPACE not in RESERVED_ENVIRONMENT


def test_the_metrics_namespace_is_taken_and_wins_in_the_function(renamed, default):
    assert _variables(renamed)[c.ENV_METRICS_NAMESPACE] == NAMESPACE
    assert _variables(default)[c.ENV_METRICS_NAMESPACE] == c.DEFAULT_METRICS_NAMESPACE


def test_every_alarm_on_onces_metrics_reads_the_namespace_given(renamed, default):
    for template, namespace in ((renamed, NAMESPACE), (default, c.DEFAULT_METRICS_NAMESPACE)):
        read = set().union(*map(_namespaces, _of(template, "AWS::CloudWatch::Alarm")))
        ours = [name.rsplit("/", 1) for name in read if not name.startswith("AWS/")]
        assert {space for space, _ in ours} == {namespace}
        assert {metric for _, metric in ours} >= ONCE_ALARMED


def test_the_dashboard_graphs_the_namespace_given(renamed):
    (dashboard,) = _of(renamed, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    assert f'\\"{NAMESPACE}\\"' in body
    assert f'\\"{c.DEFAULT_METRICS_NAMESPACE}\\"' not in body
