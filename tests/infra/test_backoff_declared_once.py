"""The retry backoff is declared once (issue 44, item 4): ``OnceConsumer(backoff=...)`` derives
the DLQ's ``maxReceiveCount`` from it and passes it to the function (``ONCE_BACKOFF``), and a
``make_handler`` given no backoff arguments runs exactly that backoff. Read through the
synthesized template: the function's environment as Lambda would set it, the redrive policy as
SQS would hold it. Arguments given to ``make_handler`` win, with a warning when they differ."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from once import Backoff, make_handler
from once import constants as c
from once_cdk import OnceConsumer
from once_cdk.settings import DEFAULT_BACKOFF, derived_max_receive_count

HANDLER = "orders.handler.lambda_handler"


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("backoff-code")
    (root / "orders").mkdir()
    (root / "orders" / "handler.py").write_text("lambda_handler = None\n")
    return root


def synthesized(code: Path, backoff: Backoff | None) -> tuple[dict[str, str], int, int]:
    """The function's environment, the source queue's maxReceiveCount and its visibility
    timeout, as synthesized for an OnceConsumer declaring ``backoff``."""
    stack = cdk.Stack(cdk.App(), "Backoff")
    OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                 backoff=backoff)  # fmt: skip
    template = assertions.Template.from_stack(stack).to_json()["Resources"]
    (function,) = [r for r in template.values() if r["Type"] == "AWS::Lambda::Function"
                   and r["Properties"].get("Handler") == HANDLER]  # fmt: skip
    (queue,) = [r["Properties"] for r in template.values() if r["Type"] == "AWS::SQS::Queue"
                and "RedrivePolicy" in r["Properties"]]  # fmt: skip
    environment: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    plain = {k: v for k, v in environment.items() if isinstance(v, str)}
    return plain, queue["RedrivePolicy"]["maxReceiveCount"], queue["VisibilityTimeout"]


def run_by_the_function(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                        **arguments: Any) -> Backoff | None:  # fmt: skip
    """The backoff a handler built in that environment runs (resolved as at its first
    invocation)."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    handler = make_handler(lambda body, attempt: None, key="id", **arguments)
    return handler._resolved_backoff()


@pytest.mark.parametrize("backoff", [Backoff(3, 90), Backoff(1, 43_200), None, DEFAULT_BACKOFF])
def test_a_handler_given_no_backoff_runs_the_one_the_construct_derived_its_dlq_from(
    code: Path, backoff: Backoff | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment, max_receive_count, visibility = synthesized(code, backoff)
    assert c.ENV_BACKOFF in environment
    run = run_by_the_function(environment, monkeypatch)
    assert run == backoff
    assert max_receive_count == derived_max_receive_count(visibility, run)


def test_a_team_cannot_set_the_backoffs_variable_by_hand(code: Path) -> None:
    stack = cdk.Stack(cdk.App(), "Reserved")
    with pytest.raises(ValueError, match=c.ENV_BACKOFF):
        OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                     environment={c.ENV_BACKOFF: "1,2"})  # fmt: skip


def test_arguments_win_over_the_construct_and_a_difference_is_logged(
    code: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    environment, _, _ = synthesized(code, Backoff(3, 90))
    with caplog.at_level(logging.WARNING):
        run = run_by_the_function(environment, monkeypatch, backoff_base_s=5, backoff_max_s=600)
    assert run == Backoff(5, 600)
    assert "differs from the one the construct declared" in caplog.text


def test_arguments_equal_to_the_construct_log_nothing(
    code: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    environment, _, _ = synthesized(code, Backoff(3, 90))
    with caplog.at_level(logging.WARNING):
        run = run_by_the_function(environment, monkeypatch, backoff_base_s=3, backoff_max_s=90)
    assert run == Backoff(3, 90)
    assert "differs" not in caplog.text


def test_outside_the_construct_the_default_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(c.ENV_BACKOFF, raising=False)
    assert run_by_the_function({}, monkeypatch) == DEFAULT_BACKOFF


@pytest.mark.parametrize("text", ["", "2", "a,b", "0,10", "5,2", "1,50000"])
def test_a_declared_backoff_once_would_not_write_names_the_variable(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=c.ENV_BACKOFF):
        run_by_the_function({c.ENV_BACKOFF: text}, monkeypatch)
