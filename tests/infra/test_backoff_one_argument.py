"""One backoff argument given to ``make_handler`` is a backoff given: its other half is once's
default, never the construct's ``ONCE_BACKOFF`` (which may not go with it), so a handler the
team's test passes runs the same deployed, with the promised warning where it differs from
the construct's (proved by the adversarial review of issue 42: ``backoff_base_s=120`` under
``Backoff(2, 60)`` built ``Backoff(120, 60)`` and every deployed invocation raised)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from once import Attempt, Backoff, make_handler
from once import constants as c
from once.models import Outcome
from once.testing import OnceEnv
from once_cdk import OnceConsumer

HANDLER = "orders.handler.lambda_handler"


def reserve(body: dict[str, Any], attempt: Attempt) -> str:
    return "ok"


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "handler.py").write_text("lambda_handler = None\n")
    return tmp_path


def function_environment(code: Path, backoff: Backoff | None) -> dict[str, str]:
    """The consumer function's environment as the construct synthesizes it."""
    stack = cdk.Stack(cdk.App(), "OneArgumentBackoff")
    OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                 backoff=backoff)  # fmt: skip
    resources = assertions.Template.from_stack(stack).to_json()["Resources"]
    (function,) = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
                   and r["Properties"].get("Handler") == HANDLER]  # fmt: skip
    variables = function["Properties"]["Environment"]["Variables"]
    return {k: v for k, v in variables.items() if isinstance(v, str)}


@pytest.fixture
def kit(monkeypatch: pytest.MonkeyPatch) -> Iterator[OnceEnv]:
    monkeypatch.delenv(c.ENV_BACKOFF, raising=False)
    with OnceEnv() as env:
        yield env


def test_one_backoff_argument_runs_the_same_in_the_teams_test_and_deployed(
    code: Path, kit: OnceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The team's test: no construct, no ONCE_BACKOFF. It passes.
    tested = make_handler(reserve, key="id", backoff_base_s=120)
    assert kit.deliver(tested, [{"id": "t-1"}]).outcomes == [Outcome.PROCESSED]

    # The same code, deployed by OnceConsumer(backoff=Backoff(2, 60)): Lambda's environment.
    declared = function_environment(code, Backoff(2, 60))[c.ENV_BACKOFF]
    monkeypatch.setenv(c.ENV_BACKOFF, declared)
    deployed = make_handler(reserve, key="id", backoff_base_s=120)  # nothing refused here
    try:
        outcomes = kit.deliver(deployed, [{"id": "d-1"}]).outcomes
    except ValueError as error:  # the invocation itself raises: Lambda retries the batch
        pytest.fail(
            f"make_handler(backoff_base_s=120) under {c.ENV_BACKOFF}={declared}: accepted at "
            f"make_handler and at synth, then every invocation raises {error!r}"
        )
    assert outcomes == [Outcome.PROCESSED]
