"""A worker runs with the function's own environment: the local cloud adds only what it must
(credentials and region, every service routed to the local cloud, Lambda's own variables)
and tracing off where the function leaves it unset (X-Ray is not emulated). A variable the
template sets stands: its log level among them. Routing is the one thing the local cloud
imposes over a function's own setting, so that no call leaves this machine.

The function's INFO lines reaching its worker log, end to end, are in
``test_sns_subscriptions`` (a team app whose function sets ``POWERTOOLS_LOG_LEVEL``)."""

from __future__ import annotations

from typing import Any

from oncecli.aws import local_env
from oncecli.localcloud.cloud import Consumer, LocalCloud, routing_env
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig
from oncecli.localcloud.template import ConsumerFound

MOTO, DYNAMODB = "http://127.0.0.1:4566", "http://127.0.0.1:8000"


def _cloud(environment: dict[str, str]) -> tuple[LocalCloud, Consumer]:
    function = FunctionConfig(
        name="Shop-Orders",
        arn="arn:aws:lambda:us-east-1:123456789012:function:Shop-Orders",
        handler="shop.handler.handler",
        timeout_s=3,
        memory_mb=512,
        environment=environment,
    )
    found = ConsumerFound("Shop", "Shop/Orders", "Function", "Mapping", "Queue", None)
    mapping = MappingConfig(queue_url=f"{MOTO}/123456789012/q", queue_arn="arn", region="us-east-1")
    consumer = Consumer(found, {}, function, mapping)
    cloud = LocalCloud(endpoints={"sqs": MOTO, "dynamodb": DYNAMODB}, consumers=[consumer])
    return cloud, consumer


def _worker_environment(environment: dict[str, str]) -> dict[str, Any]:
    """The variables a worker of this function gets, merged as the mapping merges them."""
    cloud, consumer = _cloud(environment)
    mapping = Mapping(
        consumer.mapping,
        consumer.function,
        sqs_factory=lambda: None,
        workers=1,
        env=cloud.worker_env(consumer),
    )
    return dict(mapping._env)


def test_a_variable_the_template_sets_stands_its_log_level_and_tracing_among_them() -> None:
    env = _worker_environment(
        {
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "POWERTOOLS_TRACE_DISABLED": "false",
            "POWERTOOLS_METRICS_DISABLED": "false",
            "TEAM_SETTING": "42",
        }
    )
    assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
    assert env["POWERTOOLS_TRACE_DISABLED"] == "false"
    assert env["POWERTOOLS_METRICS_DISABLED"] == "false"
    assert env["TEAM_SETTING"] == "42"


def test_the_local_cloud_adds_only_what_it_must_and_tracing_off_when_unset() -> None:
    cloud, consumer = _cloud({"TEAM_SETTING": "42"})
    added = cloud.worker_env(consumer)
    assert set(added) == {
        *local_env(),
        *routing_env(MOTO, DYNAMODB),
        "AWS_LAMBDA_FUNCTION_NAME",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
        "POWERTOOLS_TRACE_DISABLED",
    }
    assert added["POWERTOOLS_TRACE_DISABLED"] == "true"  # X-Ray is not emulated
    assert added["AWS_LAMBDA_FUNCTION_NAME"] == "Shop-Orders"
    # Positive control: the level is the function's business; unset, Powertools' default.
    assert "POWERTOOLS_LOG_LEVEL" not in _worker_environment({"TEAM_SETTING": "42"})


def test_every_call_stays_local_even_where_the_function_sets_an_endpoint() -> None:
    env = _worker_environment({"AWS_ENDPOINT_URL": "https://sqs.example.com"})
    assert env["AWS_ENDPOINT_URL"] == MOTO
    assert env["AWS_ENDPOINT_URL_DYNAMODB"] == DYNAMODB
