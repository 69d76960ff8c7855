"""``once_env`` keeps apart consumers whose business code has no name of its own (a
``functools.partial``, an instance of a callable class, a decorator's inner function without
``functools.wraps``): each such object is a service of its own (proved by the adversarial
review of issue 42: every partial was "functools.partial", so two consumers shared one record
per key and the second one's code never ran)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from once import Attempt, make_handler
from once import constants as c
from once.models import Outcome
from once.testing import OnceEnv

ran: list[str] = []


@pytest.fixture
def team_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[OnceEnv]:
    """once_env as a team's test gets it: no POWERTOOLS_SERVICE_NAME of its own (the
    repository's conftest sets one for every test)."""
    monkeypatch.delenv(c.ENV_SERVICE_NAME, raising=False)
    ran.clear()
    with OnceEnv() as env:
        yield env


def reserve(body: dict[str, Any], attempt: Attempt, *, carrier: str = "-") -> str:
    ran.append("reserve")
    return "reserved"


def ship(body: dict[str, Any], attempt: Attempt, *, carrier: str = "-") -> str:
    ran.append("ship")
    return "shipped"


class Step:
    """A team's configurable consumer step (a callable object)."""

    def __init__(self, fn: Callable[..., str]) -> None:
        self.fn = fn

    def __call__(self, body: dict[str, Any], attempt: Attempt) -> str:
        return self.fn(body, attempt)


def audited(fn: Callable[..., str]) -> Callable[..., str]:
    """A team's decorator written without functools.wraps (as many are)."""

    def run(body: dict[str, Any], attempt: Attempt) -> str:
        return fn(body, attempt)

    return run


SHAPES = {
    "functools.partial": lambda fn: functools.partial(fn, carrier="ups"),
    "callable class instance": Step,
    "decorator without wraps": audited,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_two_different_consumers_keep_their_own_records_whatever_callable_shape(
    team_env: OnceEnv, shape: str
) -> None:
    wrap = SHAPES[shape]
    first = make_handler(wrap(reserve), key="id")
    second = make_handler(wrap(ship), key="id")
    assert team_env.deliver(first, [{"id": "r-10"}]).outcomes == [Outcome.PROCESSED]
    # On AWS the second consumer is a function of its own: it runs its code for r-10.
    outcomes = team_env.deliver(second, [{"id": "r-10"}]).outcomes
    assert outcomes == [Outcome.PROCESSED], (
        f"{shape}: the second consumer (ship) got {outcomes}: once_env gave both consumers "
        "one service name, so ship's code never ran"
    )
    assert ran == ["reserve", "ship"]
