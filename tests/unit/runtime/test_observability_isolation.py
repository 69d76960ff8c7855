"""once's metrics, logs and traces are its own, whatever a team does with Powertools.

Powertools keeps ``Metrics``' metrics, dimensions, metadata and default dimensions in class
attributes shared by every instance, ``Tracer``'s configuration in a class attribute, and the
keys of ``Logger.thread_safe_append_keys`` in one context variable read by every Logger. A
team's own ``Metrics``, ``Tracer`` and ``Logger`` in business code must neither change what
once publishes (the stack's alarms read namespace ``Once``, dimensions exactly ``[service]``)
nor receive once's metrics, keys or patching.
"""

from __future__ import annotations

import contextvars
import io
import json
import logging
import os
import subprocess
import sys
import textwrap
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.filters import SuppressFilter
from aws_lambda_powertools.logging.formatter import THREAD_LOCAL_KEYS
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider import cold_start
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import constants as c
from once.handler import Handler
from once.models import METRIC_NAMES
from once.observability import logger as once_logger
from tests.conftest import FakeContext

ROOT = Path(__file__).resolve().parents[3]
SERVICE = "orders"
TEAM_NAMESPACE = "Shop"
#: Every metric name once has (its outcomes', and the counts beside them).
ONCE_NAMES = set(METRIC_NAMES.values()) | {
    value for name, value in vars(c).items() if name.startswith("METRIC_")
}
ONCE_KEYS = {"request_id", "message_id", "key", "fence", "outcome", "reason"}


def blobs(stdout: str) -> list[dict[str, Any]]:
    """Every EMF blob printed in ``stdout``."""
    return [
        json.loads(line)
        for line in stdout.splitlines()
        if line.startswith("{") and '"_aws"' in line
    ]


def names(blob: dict[str, Any]) -> set[str]:
    return {m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}


def namespace(blob: dict[str, Any]) -> str:
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    return str(directive["Namespace"])


def assert_onces_own(blob: dict[str, Any], *, ns: str = c.DEFAULT_METRICS_NAMESPACE) -> None:
    """once's blob: its namespace, dimensions exactly [service], once's metric names, and
    nothing else (no team dimension, metadata or metric)."""
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == ns
    assert directive["Dimensions"] == [["service"]]
    assert names(blob) <= ONCE_NAMES
    assert blob["service"] == SERVICE
    assert set(blob) == {"_aws", "service"} | names(blob)


def split(stdout: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(once's blobs, the team's blobs): once's are those carrying any of once's names."""
    printed = blobs(stdout)
    return [b for b in printed if names(b) & ONCE_NAMES], [
        b for b in printed if not names(b) & ONCE_NAMES
    ]


def totals(printed: list[dict[str, Any]]) -> dict[str, float]:
    summed: dict[str, float] = {}
    for blob in printed:
        for name in names(blob):
            value = blob[name]
            summed[name] = summed.get(name, 0) + (sum(value) if isinstance(value, list) else value)
    return summed


@pytest.fixture
def team_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Lambda whose service is ``orders``: what the team does to Powertools' shared
    Metrics state, and the cold start flag, is put back after the test."""
    monkeypatch.setenv(c.ENV_SERVICE_NAME, SERVICE)
    monkeypatch.delenv(c.ENV_METRICS_NAMESPACE, raising=False)
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    shared = (Metrics._metrics, Metrics._dimensions, Metrics._metadata, Metrics._default_dimensions)
    saved = [dict(d) for d in shared]
    was_cold = cold_start.is_cold_start
    for d in shared:
        d.clear()
    with warnings.catch_warnings():
        # Powertools warns of a flush with no metric and of a dimension overwritten.
        warnings.simplefilter("ignore")
        yield
    for d, before in zip(shared, saved, strict=True):
        d.clear()
        d.update(before)
    cold_start.is_cold_start = was_cold


def team_add(metrics: Metrics, name: str = "OrderPlaced", value: float = 1) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


# Each way a team uses its own Powertools Metrics: it builds the team's Lambda handler from
# once's handler, and says what the team's blobs must carry besides their metrics.
Scenario = Callable[[Callable[..., Handler]], tuple[Callable[..., Any], dict[str, Any]]]


def _fails(body: Any) -> None:
    if body.get("fail"):
        raise RuntimeError("downstream is down")


def default_dimensions(build: Callable[..., Handler]) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE)
    metrics.set_default_dimensions(environment="prod")  # Powertools' documented pattern

    def business(body: Any, attempt: Any) -> str:
        team_add(metrics)
        _fails(body)
        return "ok"

    return metrics.log_metrics(build(business)), {"environment": "prod"}


def add_dimension(build: Callable[..., Handler]) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE)
    handler = build(lambda body, attempt: _fails(body))

    @metrics.log_metrics
    def lambda_handler(event: Any, context: Any) -> Any:
        metrics.add_dimension(name="tenant", value="acme")
        response = handler(event, context)
        team_add(metrics, "BatchSeen")
        return response

    return lambda_handler, {"tenant": "acme"}


def own_service_dimension(
    build: Callable[..., Handler],
) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE)

    def business(body: Any, attempt: Any) -> None:
        metrics.add_dimension(name="service", value="checkout")
        team_add(metrics)
        _fails(body)

    return metrics.log_metrics(build(business)), {"service": "checkout"}


def add_metadata(build: Callable[..., Handler]) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE)
    handler = build(lambda body, attempt: _fails(body))

    @metrics.log_metrics
    def lambda_handler(event: Any, context: Any) -> Any:
        metrics.add_metadata(key="batch_size", value=len(event["Records"]))
        response = handler(event, context)
        team_add(metrics, "BatchSeen")
        return response

    return lambda_handler, {"batch_size": 2}


def own_namespace(build: Callable[..., Handler]) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE, service="checkout")
    handler = build(lambda body, attempt: (team_add(metrics), _fails(body)))

    def lambda_handler(event: Any, context: Any) -> Any:
        response = handler(event, context)
        metrics.flush_metrics()
        return response

    return lambda_handler, {"service": "checkout"}


def flush_inside_business_code(
    build: Callable[..., Handler],
) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE)

    def business(body: Any, attempt: Any) -> None:
        metrics.add_dimension(name="tenant", value="acme")
        team_add(metrics)
        _fails(body)  # a record that fails leaves its metric unflushed
        metrics.flush_metrics()

    def lambda_handler(event: Any, context: Any) -> Any:
        response = build(business)(event, context)
        metrics.flush_metrics()
        return response

    return lambda_handler, {}


def log_metrics_with_cold_start(
    build: Callable[..., Handler],
) -> tuple[Callable[..., Any], dict[str, Any]]:
    metrics = Metrics(namespace=TEAM_NAMESPACE)
    cold_start.is_cold_start = True

    def business(body: Any, attempt: Any) -> None:
        team_add(metrics)
        _fails(body)

    return metrics.log_metrics(build(business), capture_cold_start_metric=True), {}


SCENARIOS: dict[str, Scenario] = {
    "set_default_dimensions": default_dimensions,
    "add_dimension around once's handler": add_dimension,
    "add_dimension service in business code": own_service_dimension,
    "add_metadata": add_metadata,
    "own namespace and flush after once's handler": own_namespace,
    "flush inside business code": flush_inside_business_code,
    "log_metrics around once's handler, cold start": log_metrics_with_cold_start,
}


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_onces_emf_is_its_own_and_the_teams_keeps_its_own(
    scenario: Scenario,
    team_metrics: None,
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    lambda_handler, team_keys = scenario(once_handler)
    capsys.readouterr()

    # One FIFO group: the records run one after the other, as the team's own Metrics need.
    event = sqs_event([{"orderId": "o-1"}, {"orderId": "o-2", "fail": True}], ["g", "g"])
    lambda_handler(event, FakeContext())

    once, team = split(capsys.readouterr().out)
    [blob] = once
    assert_onces_own(blob)
    assert totals(once) == {c.METRIC_PROCESSED: 1, c.METRIC_FAILED: 1}
    assert team, "the team's metrics were published"
    for printed in team:
        assert namespace(printed) == TEAM_NAMESPACE
        assert not names(printed) & ONCE_NAMES
        if names(printed) != {"ColdStart"}:
            assert {k: printed.get(k) for k in team_keys} == team_keys
    added = totals([b for b in team if names(b) != {"ColdStart"}])
    assert added == ({"BatchSeen": 1} if "BatchSeen" in added else {"OrderPlaced": 2})


def test_the_teams_cold_start_metric_stays_the_teams(
    team_metrics: None,
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    lambda_handler, _ = log_metrics_with_cold_start(once_handler)
    capsys.readouterr()

    lambda_handler(sqs_event([{"orderId": "o-1"}]), FakeContext())

    once, team = split(capsys.readouterr().out)
    [cold] = [b for b in team if names(b) == {"ColdStart"}]
    assert namespace(cold) == TEAM_NAMESPACE
    assert cold["service"] == SERVICE
    [blob] = once
    assert_onces_own(blob)


def test_onces_namespace_is_the_environments_not_the_teams(
    team_metrics: None,
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(c.ENV_METRICS_NAMESPACE, "OrdersOnce")
    lambda_handler, _ = default_dimensions(once_handler)
    capsys.readouterr()

    lambda_handler(sqs_event([{"orderId": "o-1"}]), FakeContext())

    once, team = split(capsys.readouterr().out)
    [blob] = once
    assert_onces_own(blob, ns="OrdersOnce")
    assert {namespace(b) for b in team} == {TEAM_NAMESPACE}


def test_with_metrics_disabled_once_prints_no_emf(
    team_metrics: None,
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    handler = once_handler(lambda body, attempt: None)
    capsys.readouterr()

    for batch in range(3):
        handler(sqs_event([{"orderId": f"o-{batch}-{i}"} for i in range(3)]), FakeContext())

    assert blobs(capsys.readouterr().out) == []


# --- any sequence of a team's Metrics operations ------------------------------------------

DIMENSION_NAMES = ("tenant", "environment", "region", "service", "stage")
TEAM_METRIC_NAMES = ("OrderPlaced", "Refund", "Retry")
TEAM_NAMESPACES = (TEAM_NAMESPACE, "Payments", "Team")
WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=6)

OPERATION = st.one_of(
    st.tuples(st.just("default"), st.sampled_from(DIMENSION_NAMES), WORDS),
    st.tuples(st.just("dimension"), st.sampled_from(DIMENSION_NAMES), WORDS),
    st.tuples(st.just("dimensions"), st.sampled_from(DIMENSION_NAMES), WORDS),
    st.tuples(st.just("metadata"), WORDS, WORDS),
    st.tuples(st.just("metric"), st.sampled_from(TEAM_METRIC_NAMES), st.integers(1, 5)),
    st.tuples(st.just("namespace"), st.sampled_from(TEAM_NAMESPACES), st.none()),
    st.tuples(st.just("flush"), st.none(), st.none()),
)
PHASED = st.tuples(st.sampled_from(("before", "inside", "after")), OPERATION)


@dataclass
class Team:
    """A team's module: its Metrics (a new instance for a new namespace) and what it added."""

    metrics: Metrics = field(default_factory=lambda: Metrics(namespace=TEAM_NAMESPACE))
    added: dict[str, float] = field(default_factory=dict)

    def apply(self, operation: tuple[str, Any, Any]) -> None:
        kind, name, value = operation
        if kind == "default":
            self.metrics.set_default_dimensions(**{name: value})
        elif kind == "dimension":
            self.metrics.add_dimension(name=name, value=value)
        elif kind == "dimensions":
            self.metrics.add_dimensions(**{name: value})
        elif kind == "metadata":
            self.metrics.add_metadata(key=name, value=value)
        elif kind == "metric":
            team_add(self.metrics, name, value)
            self.added[name] = self.added.get(name, 0) + value
        elif kind == "namespace":
            self.metrics = Metrics(namespace=name)
        else:
            self.metrics.flush_metrics()


@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(PHASED, max_size=8))
def test_no_sequence_of_team_metrics_operations_reaches_onces_emf_or_takes_the_teams(
    operations: list[tuple[str, tuple[str, Any, Any]]],
    team_metrics: None,
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    for shared in (Metrics._metrics, Metrics._dimensions, Metrics._metadata):
        shared.clear()
    Metrics._default_dimensions.clear()  # a fresh process for the team's module
    team = Team()
    steps = {p: [op for at, op in operations if at == p] for p in ("before", "inside", "after")}

    def business(body: Any, attempt: Any) -> str:
        for operation in steps["inside"]:
            team.apply(operation)
        return "ok"

    handler = once_handler(business)
    capsys.readouterr()
    for operation in steps["before"]:
        team.apply(operation)
    handler(sqs_event([{"orderId": str(uuid.uuid4())}]), FakeContext())
    for operation in steps["after"]:
        team.apply(operation)
    if Metrics._metrics:
        team.metrics.flush_metrics()  # what the team's log_metrics does at the end

    printed = blobs(capsys.readouterr().out)
    once = [b for b in printed if namespace(b) == c.DEFAULT_METRICS_NAMESPACE]
    [blob] = once
    assert_onces_own(blob)
    assert totals(once) == {c.METRIC_PROCESSED: 1}
    team_blobs = [b for b in printed if namespace(b) != c.DEFAULT_METRICS_NAMESPACE]
    for printed_blob in team_blobs:
        assert namespace(printed_blob) in TEAM_NAMESPACES
        assert names(printed_blob) <= set(TEAM_METRIC_NAMES)
    assert totals(team_blobs) == team.added


# --- Logger -------------------------------------------------------------------------------


@contextmanager
def once_lines() -> Iterator[io.StringIO]:
    """What once's own log handler writes, as it writes it."""
    handler = once_logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.setStream(previous)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


@pytest.fixture
def team_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Logger, io.StringIO]]:
    """The team's Powertools Logger, of the service the environment names (a name of its
    own, so that its stream is this test's), taken apart again afterwards."""
    service = f"orders-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(c.ENV_SERVICE_NAME, service)
    stream = io.StringIO()
    thread_keys = THREAD_LOCAL_KEYS.set({})
    team = Logger(stream=stream)
    assert team.name == service
    yield team, stream
    THREAD_LOCAL_KEYS.reset(thread_keys)
    python_logger = logging.getLogger(service)
    for handler in list(python_logger.handlers):
        python_logger.removeHandler(handler)
    for handler in logging.root.handlers:
        for kept in list(handler.filters):
            if isinstance(kept, SuppressFilter) and kept.logger == service:
                handler.removeFilter(kept)
    logging.Logger.manager.loggerDict.pop(service, None)


def test_keys_a_team_appends_thread_safe_never_reach_onces_lines(
    team_logger: tuple[Logger, io.StringIO],
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
) -> None:
    team, stream = team_logger

    def business(body: Any, attempt: Any) -> None:
        team.thread_safe_append_keys(tenant=body["tenant"])
        team.append_keys(order=body["orderId"])
        team.info("charging")

    handler = once_handler(business)
    with once_lines() as once_stream:
        handler(sqs_event([{"orderId": "o-1", "tenant": "acme"}]), FakeContext())
        handler(sqs_event([{"orderId": "o-2", "tenant": "globex"}] * 2), FakeContext())

    ours = lines(once_stream)
    assert [line["outcome"] for line in ours] == ["processed", "processed", "duplicate"]
    for line in ours:
        assert "tenant" not in line
        assert "order" not in line
    assert [line["tenant"] for line in lines(stream)] == ["acme", "globex"]


def test_keys_business_code_appends_thread_safe_stay_with_their_record(
    team_logger: tuple[Logger, io.StringIO],
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
) -> None:
    # once's pool threads outlive a record: a tenant set for one order must not show on the
    # team's lines for another order, in this batch or a later invocation, nor after the
    # handler returns.
    team, stream = team_logger
    correlation: contextvars.ContextVar[str] = contextvars.ContextVar("correlation")

    def business(body: Any, attempt: Any) -> None:
        if "tenant" in body:
            team.thread_safe_append_keys(tenant=body["tenant"])
        team.info("charging", extra={"order": body["orderId"], "seen": correlation.get("")})

    handler = once_handler(business, max_workers=1)  # one pool thread for every key
    correlation.set("batch-1")  # set around the handler, as a team's wrapper would
    handler(sqs_event([{"orderId": "o-1", "tenant": "acme"}, {"orderId": "o-2"}]), None)
    handler(sqs_event([{"orderId": "o-3"}, {"orderId": "o-4"}]), None)
    team.info("after")

    theirs = {line.get("order", line["message"]): line for line in lines(stream)}
    assert theirs["o-1"]["tenant"] == "acme"
    assert all("tenant" not in theirs[name] for name in ("o-2", "o-3", "o-4", "after"))
    assert {theirs[name]["seen"] for name in ("o-1", "o-2", "o-3", "o-4")} == {"batch-1"}


def test_onces_keys_never_reach_the_teams_lines(
    team_logger: tuple[Logger, io.StringIO],
    once_handler: Callable[..., Handler],
    sqs_event: Callable[..., dict[str, Any]],
) -> None:
    team, stream = team_logger
    handler = once_handler(lambda body, attempt: team.info("charging", extra={"n": 1}))

    @team.inject_lambda_context(clear_state=True)
    def lambda_handler(event: Any, context: Any) -> Any:
        response = handler(event, context)
        team.info("batch done")
        return response

    with once_lines() as once_stream:
        lambda_handler(sqs_event([{"orderId": "o-1"}]), FakeContext())

    theirs = lines(stream)
    assert [line["message"] for line in theirs] == ["charging", "batch done"]
    for line in theirs:
        assert not ONCE_KEYS & set(line)
        assert line["function_name"] == FakeContext().function_name
    [ours] = lines(once_stream)
    assert "function_name" not in ours
    assert "cold_start" not in ours
    assert ours["request_id"]


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter: import-time and process-wide state (root log handlers, patched
    modules) cannot be undone in this one."""
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "_X_AMZN"))
    }
    environment |= {"PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])} | env
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_importing_once_leaves_the_lines_of_a_teams_loggers_named_like_once() -> None:
    # Lambda puts a handler on the root logger before the function's module is imported.
    result = _run(
        """
        import logging, sys
        root = logging.getLogger()
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("root %(name)s %(message)s"))
        root.addHandler(handler)
        import once.observability
        for name in ("nonce_cache", "concerts", "payments.once_client", "once", "once.x"):
            logging.getLogger(name).warning("hello")
        """
    )
    assert result.returncode == 0, result.stderr
    plain = [line for line in result.stdout.splitlines() if line.startswith("root ")]
    assert plain == [
        "root nonce_cache hello",
        "root concerts hello",
        "root payments.once_client hello",
    ]


# --- Tracer -------------------------------------------------------------------------------

TRACED = """
import json, os, sys
sys.path.insert(0, os.getcwd())
from aws_lambda_powertools import Tracer
{team_first}
from aws_xray_sdk.core import patcher, xray_recorder

class Collected:
    def __init__(self):
        self.names = []
    def send_entity(self, entity):
        self.names.append(entity.name)
        for child in getattr(entity, "subsegments", []):
            self.names.append(child.name)
    def set_daemon_address(self, address):
        pass

collected = Collected()
xray_recorder.configure(emitter=collected)

import boto3
from moto import mock_aws
from once import make_handler
from tests.conftest import FakeContext, build_event

with mock_aws():
    boto3.client("dynamodb").create_table(
        TableName="idempotency", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{{"AttributeName": "id", "KeyType": "HASH"}}],
        AttributeDefinitions=[{{"AttributeName": "id", "AttributeType": "S"}}],
    )
    handler = make_handler(lambda body, attempt: "ok", key="orderId", dlq_url=None)
    handler(build_event([{{"orderId": "o-1"}}]), FakeContext())
    after_batch = sorted(patcher._PATCHED_MODULES)
    config = {{k: v for k, v in Tracer._config.items() if k != "provider"}}
    {team_after}
print(json.dumps({{
    "after_batch": after_batch,
    "config": config,
    "patched": sorted(patcher._PATCHED_MODULES),
    "segments": collected.names,
}}))
"""

IN_LAMBDA = {
    "LAMBDA_TASK_ROOT": str(ROOT),
    "_X_AMZN_TRACE_ID": (
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    ),
    "POWERTOOLS_SERVICE_NAME": SERVICE,
    "IDEMPOTENCY_TABLE_NAME": "idempotency",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
}


def traced(*, team_first: str = "", team_after: str = "") -> dict[str, Any]:
    result = _run(TRACED.format(team_first=team_first, team_after=team_after), **IN_LAMBDA)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.splitlines()[-1]))


def test_a_teams_patch_modules_choice_stands_after_once_traces_a_batch() -> None:
    seen = traced(team_first='tracer = Tracer(patch_modules=["requests"])')

    assert "## once batch" in seen["segments"]
    assert seen["after_batch"] == ["requests"]
    assert seen["config"]["patch_modules"] == ["requests"]


def test_once_leaves_tracer_config_and_patching_to_a_tracer_the_team_creates_later() -> None:
    seen = traced(team_after="Tracer()")

    assert "## once batch" in seen["segments"]
    assert seen["after_batch"] == []
    assert seen["config"] == {
        "service": "",
        "disabled": False,
        "auto_patch": True,
        "patch_modules": None,
    }
    assert "botocore" in seen["patched"]  # the team's Tracer() still patches everything


def test_a_tracer_the_team_creates_later_patches_only_what_it_asks() -> None:
    seen = traced(team_after='Tracer(patch_modules=["requests"])')

    assert "## once batch" in seen["segments"]
    assert seen["patched"] == ["requests"]
