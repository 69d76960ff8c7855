"""``once_env.deliver`` takes the Lambda handler as a team ships it: the once handler wrapped
in Powertools' ``Logger.inject_lambda_context``, ``Metrics.log_metrics`` and
``Tracer.capture_lambda_handler``, or in any wrapper that keeps ``__wrapped__``. The kit
finds the once handler down the ``__wrapped__`` chain and invokes the outermost callable, so
the team's decorators run in the test as they run in Lambda; anything else is refused,
saying what it got and what it takes."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aws_xray_sdk  # type: ignore[import-untyped]
import pytest
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.exceptions import SchemaValidationError
from aws_lambda_powertools.metrics.provider import cold_start
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import Attempt, make_handler
from once import constants as c
from once.handler import Handler
from once.models import METRIC_NAMES

SERVICE = "orders"
TEAM_NAMESPACE = "Shop"
ORDER = {"orderId": "o-1", "qty": 2}
ONCE_NAMES = set(METRIC_NAMES.values()) | {
    value for name, value in vars(c).items() if name.startswith("METRIC_")
}


class Shop:
    """The team's business code: its own Powertools Logger and Metrics, one INFO line and
    one metric per order shipped."""

    def __init__(self) -> None:
        # A service of its own per test: Powertools configures a logger of a given name
        # once, writing to the stdout of that moment (this test's capsys).
        self.logger = Logger(service=f"{SERVICE}-{uuid.uuid4().hex[:8]}")
        self.metrics = Metrics(namespace=TEAM_NAMESPACE, service=SERVICE)
        self.shipped: list[str] = []

    def __call__(self, order: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        self.metrics.add_metric(name="OrderShipped", unit=MetricUnit.Count, value=1)
        self.logger.info("order shipped", extra={"order_id": order["orderId"]})
        self.shipped.append(attempt.key)
        return {"shipped": attempt.key}

    def shipped_handler(self, **log_metrics: Any) -> Callable[..., Any]:
        """``lambda_handler`` as the README has it."""
        return self.logger.inject_lambda_context(
            self.metrics.log_metrics(make_handler(self, key="orderId"), **log_metrics)
        )


@pytest.fixture
def team_powertools(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Powertools on, as in Lambda; what the team does to its shared state (Metrics' class
    level sets, the cold start flag, Tracer's class configuration, the X-Ray SDK switch) is
    put back after the test."""
    monkeypatch.setenv(c.ENV_SERVICE_NAME, SERVICE)
    for name in (c.ENV_METRICS_NAMESPACE, "POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_DEV"):
        monkeypatch.delenv(name, raising=False)
    shared = (Metrics._metrics, Metrics._dimensions, Metrics._metadata, Metrics._default_dimensions)
    saved = [dict(d) for d in shared]
    was_cold = cold_start.is_cold_start
    tracer_config = dict(Tracer._config)
    xray_on = aws_xray_sdk.global_sdk_config.sdk_enabled()
    for d in shared:
        d.clear()
    yield
    for d, before in zip(shared, saved, strict=True):
        d.clear()
        d.update(before)
    cold_start.is_cold_start = was_cold
    Tracer._config = tracer_config
    aws_xray_sdk.global_sdk_config.set_sdk_enabled(xray_on)


def printed(stdout: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(EMF blobs, log lines) printed as JSON lines."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [b for b in lines if "_aws" in b], [log for log in lines if "_aws" not in log]


def metric_names(blob: dict[str, Any]) -> set[str]:
    return {m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}


def value(blob: dict[str, Any], name: str) -> float:
    """A metric's value in a blob (Powertools prints the team's as a list)."""
    found = blob[name]
    return float(sum(found) if isinstance(found, list) else found)


def namespace(blob: dict[str, Any]) -> str:
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    return str(directive["Namespace"])


def test_a_handler_wrapped_in_powertools_logger_and_metrics_is_delivered_and_its_decorators_run(
    once_env, team_powertools, capsys: pytest.CaptureFixture[str]
) -> None:
    shop = Shop()
    lambda_handler = shop.shipped_handler()
    capsys.readouterr()

    delivery = once_env.deliver(lambda_handler, [ORDER])

    assert delivery.outcomes == ["processed"]
    assert delivery.response == {"batchItemFailures": []}
    assert shop.shipped == ["o-1"]
    assert once_env.record("o-1").status == c.STATUS_COMPLETED
    assert once_env.record("o-1", handler=lambda_handler).status == c.STATUS_COMPLETED
    blobs, logs = printed(capsys.readouterr().out)
    # log_metrics flushed the team's metric, in the team's blob; once's blob is once's own.
    [team] = [b for b in blobs if namespace(b) == TEAM_NAMESPACE]
    assert metric_names(team) == {"OrderShipped"} and value(team, "OrderShipped") == 1
    [once] = [b for b in blobs if namespace(b) == c.DEFAULT_METRICS_NAMESPACE]
    assert metric_names(once) <= ONCE_NAMES and value(once, METRIC_NAMES["processed"]) == 1
    # inject_lambda_context read the kit's Lambda context into the team's log line.
    [line] = [log for log in logs if log.get("message") == "order shipped"]
    assert line["level"] == "INFO" and line["order_id"] == "o-1"
    assert line["function_name"] == "once-consumer"
    assert line["function_arn"].endswith(":function:once-consumer")
    assert line["function_memory_size"] == 512
    assert line["function_request_id"]


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_a_duplicate_through_the_powertools_wrapped_handler_is_a_duplicate(
    once_env, team_powertools
) -> None:
    shop = Shop()
    lambda_handler = shop.shipped_handler()

    first = once_env.deliver(lambda_handler, [ORDER, ORDER])
    again = once_env.deliver(lambda_handler, [ORDER])

    assert first.outcomes == ["processed", "duplicate"]
    assert again.outcomes == ["duplicate"]
    assert first.batch_item_failures == again.batch_item_failures == []
    assert shop.shipped == ["o-1"]


def test_a_team_log_metrics_that_raises_on_empty_metrics_fails_the_invocation_of_a_duplicate(
    once_env, team_powertools, capsys: pytest.CaptureFixture[str]
) -> None:
    # What Lambda would do with this handler: a batch of duplicates runs no business code,
    # adds no team metric, and the team's flush raises after once answered.
    shop = Shop()
    lambda_handler = shop.shipped_handler(raise_on_empty_metrics=True)
    once_env.deliver(lambda_handler, [ORDER])
    capsys.readouterr()

    with pytest.raises(SchemaValidationError):
        once_env.deliver(lambda_handler, [ORDER])

    blobs, _ = printed(capsys.readouterr().out)
    [once] = blobs  # once's own metrics were published all the same
    assert value(once, METRIC_NAMES["duplicate"]) == 1


def test_a_crash_inside_a_wrapped_handler_is_a_crash_even_when_the_wrapper_raises_on_the_way_out(
    once_env, team_powertools
) -> None:
    shop = Shop()
    lambda_handler = shop.shipped_handler(raise_on_empty_metrics=True)

    killed = once_env.deliver(lambda_handler, [ORDER], crash="after_claim")
    once_env.expire_leases()
    retry = once_env.deliver(lambda_handler, [ORDER])

    assert killed.killed_at == "after_claim" and killed.outcomes == [None]
    assert retry.outcomes == ["processed"] and retry.results[0].takeover
    assert retry.receive_counts == [2]
    assert shop.shipped == ["o-1"]


def test_a_functools_wraps_wrapper_is_delivered_and_runs(once_env) -> None:
    shop: list[str] = []
    handler = make_handler(lambda order, attempt: shop.append(attempt.key), key="orderId")
    calls: list[Any] = []

    @functools.wraps(handler)
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        calls.append(context)
        return handler(event, context)

    first = once_env.deliver(lambda_handler, [ORDER])
    again = once_env.deliver(lambda_handler, [ORDER])

    assert (first.outcomes, again.outcomes) == (["processed"], ["duplicate"])
    assert shop == ["o-1"]
    assert len(calls) == 2 and calls[0].aws_request_id != calls[1].aws_request_id


def test_a_wrapper_that_calls_handle_and_returns_its_response_is_delivered(once_env) -> None:
    handler = make_handler(lambda order, attempt: None, key="orderId")
    seen: list[list[str]] = []

    @functools.wraps(handler)
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        result = handler.handle(event, context)
        seen.append([r.outcome for r in result.records])
        return result.response

    assert once_env.deliver(lambda_handler, [ORDER, ORDER]).outcomes == ["processed", "duplicate"]
    assert seen == [["processed", "duplicate"]]


def test_a_handler_wrapped_in_powertools_tracer_is_delivered(
    once_env, team_powertools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    shop = Shop()
    tracer = Tracer(service=SERVICE)
    traced: list[str] = []
    real = tracer.provider

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def in_subsegment(self, name: str, **kwargs: Any) -> Any:
            traced.append(name)
            return real.in_subsegment(name=name, **kwargs)

    monkeypatch.setattr(tracer, "provider", Spy())
    # Tracer names its subsegment after the function it wraps, whose name log_metrics
    # copies from the once handler: its business code's (here a callable Shop).
    # Outermost, as the team stacks it, above log_metrics.
    lambda_handler = tracer.capture_lambda_handler(
        shop.metrics.log_metrics(make_handler(shop, key="orderId"))
    )

    delivery = once_env.deliver(lambda_handler, [ORDER])

    assert delivery.outcomes == ["processed"]
    assert traced == ["## Shop"]
    assert shop.shipped == ["o-1"]


def test_the_kit_still_records_outcomes_and_leaves_handle_as_it_was(once_env) -> None:
    handler = make_handler(lambda order, attempt: None, key="orderId")
    lambda_handler = functools.wraps(handler)(lambda event, context: handler(event, context))

    once_env.deliver(lambda_handler, [ORDER])

    assert "handle" not in vars(handler)
    assert handler.handle.__func__ is Handler.handle  # type: ignore[attr-defined]


_depths = iter(range(1_000_000))


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(depth=st.integers(min_value=0, max_value=6))
def test_any_depth_of_functools_wraps_wrappers_reaches_the_once_handler_and_runs_each_layer(
    once_env, depth: int
) -> None:
    key = f"o-depth-{next(_depths)}"
    handler = make_handler(lambda order, attempt: None, key="orderId")
    ran: list[int] = []
    lambda_handler: Callable[..., Any] = handler
    for layer in range(depth):

        def wrap(inner: Callable[..., Any], layer: int = layer) -> Callable[..., Any]:
            @functools.wraps(inner)
            def wrapper(event: dict[str, Any], context: Any) -> Any:
                ran.append(layer)
                return inner(event, context)

            return wrapper

        lambda_handler = wrap(lambda_handler)

    delivery = once_env.deliver(lambda_handler, [{"orderId": key}, {"orderId": key}])

    assert delivery.outcomes == ["processed", "duplicate"]
    assert sorted(ran) == list(range(depth))
    assert once_env.record(key, handler=lambda_handler).status == c.STATUS_COMPLETED


def test_a_wrapper_without_wrapped_is_refused_saying_what_it_got_and_what_it_takes(
    once_env,
) -> None:
    handler = make_handler(lambda order, attempt: None, key="orderId")

    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        return handler(event, context)

    with pytest.raises(TypeError) as refused:
        once_env.deliver(lambda_handler, [ORDER])

    message = str(refused.value)
    assert "once.make_handler" in message
    assert "lambda_handler" in message  # what it got
    assert "__wrapped__" in message and "functools.wraps" in message
    assert "inject_lambda_context" in message
    assert once_env.record("o-1") is None


@pytest.mark.parametrize(
    "passed",
    [
        pytest.param(lambda event, context: None, id="a random function"),
        pytest.param(functools.wraps(print)(lambda e, c: None), id="wraps something else"),
        pytest.param("app.lambda_handler", id="a handler's name"),
    ],
)
def test_a_callable_with_no_once_handler_down_its_chain_is_refused(once_env, passed: Any) -> None:
    with pytest.raises(TypeError, match=r"once\.make_handler.*__wrapped__"):
        once_env.deliver(passed, [ORDER])
    with pytest.raises(TypeError, match=r"once\.make_handler.*__wrapped__"):
        once_env.deliver_waiting(passed)


def test_a_wrapper_loop_is_refused_not_followed_forever(once_env) -> None:
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        return None

    lambda_handler.__wrapped__ = lambda_handler  # type: ignore[attr-defined]

    with pytest.raises(TypeError, match="no once handler down its __wrapped__ chain"):
        once_env.deliver(lambda_handler, [ORDER])


def test_a_wrapper_that_never_runs_the_once_handler_fails_the_delivery(once_env) -> None:
    handler = make_handler(lambda order, attempt: None, key="orderId")
    lambda_handler = functools.wraps(handler)(lambda event, context: {"batchItemFailures": []})

    with pytest.raises(AssertionError, match="0 times in one invocation"):
        once_env.deliver(lambda_handler, [ORDER])


def test_tracer_wraps_a_bare_once_handler(once_env, team_powertools, monkeypatch):
    """Tracer.capture_lambda_handler reads the handler's ``__name__``: a once handler has
    its business function's."""
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")

    def credit(body, attempt):
        return {"ok": True}

    handler = make_handler(credit, key="orderId")
    assert handler.__name__ == "credit"
    traced = Tracer(service="team").capture_lambda_handler(handler)
    assert once_env.deliver(traced, [ORDER]).outcomes == ["processed"]
