"""``once_env`` keeps each handler's records apart, as AWS does (each consumer a function of its
own, with its own service name): two consumers of a chain that see the same business key each
process it, with no option (issue 42, item 1: the second was a CONFLICT, their records
``once-testing#r-10`` colliding). A ``key_prefix=`` or a service name the test sets wins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from once import Attempt, make_handler
from once import constants as c
from once.models import Outcome
from once.testing import OnceEnv
from once.testing.env import service_name_of


@pytest.fixture
def team_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[OnceEnv]:
    """``once_env`` as a team's test gets it: no service name of its own in the environment
    (this repository's conftest sets one for every test)."""
    monkeypatch.delenv(c.ENV_SERVICE_NAME, raising=False)
    with OnceEnv() as env:
        yield env


def reserve(body: dict[str, Any], attempt: Attempt) -> str:
    return "reserved"


def ship(body: dict[str, Any], attempt: Attempt) -> str:
    return "shipped " + body["note"]


def test_two_consumers_seeing_one_key_each_keep_their_own_record(team_env: OnceEnv) -> None:
    first, second = make_handler(reserve, key="id"), make_handler(ship, key="id")
    assert team_env.deliver(first, [{"id": "r-10", "note": "a"}]).outcomes == [Outcome.PROCESSED]
    assert team_env.deliver(second, [{"id": "r-10", "note": "b"}]).outcomes == [Outcome.PROCESSED]
    reserved, shipped = (team_env.record("r-10", handler=h) for h in (first, second))
    assert reserved is not None and shipped is not None
    assert (reserved.result, shipped.result) == ('"reserved"', '"shipped b"')
    assert reserved.id != shipped.id
    with pytest.raises(ValueError, match="pass handler="):
        team_env.record("r-10")


def test_one_business_function_is_one_service_whatever_handler_wraps_it(
    team_env: OnceEnv,
) -> None:
    """A test may build the handler again (as a deploy does): it meets its own records."""
    before, after = make_handler(reserve, key="id"), make_handler(reserve, key="id")
    assert team_env.deliver(before, [{"id": "r-1"}]).outcomes == [Outcome.PROCESSED]
    assert team_env.deliver(after, [{"id": "r-1"}]).outcomes == [Outcome.DUPLICATE]
    assert service_name_of(before) == service_name_of(after)


def test_two_lambdas_are_two_services() -> None:
    one = make_handler(lambda body, attempt: 1, key="id")
    two = make_handler(lambda body, attempt: 2, key="id")
    assert service_name_of(one) != service_name_of(two)
    for handler in (one, two):
        name = service_name_of(handler)
        assert len(name) <= 64 and all(ch.isalnum() or ch in "._-" for ch in name)


def test_a_key_prefix_or_a_service_name_the_test_sets_wins(
    team_env: OnceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = make_handler(reserve, key="id", key_prefix="shop")
    assert team_env.deliver(shared, [{"id": "k"}]).outcomes == [Outcome.PROCESSED]
    record = team_env.record("k", handler=shared)
    assert record is not None and record.id == "shop#k"
    monkeypatch.setenv(c.ENV_SERVICE_NAME, "mine")
    mine = make_handler(ship, key="id")
    assert team_env.deliver(mine, [{"id": "k", "note": "x"}]).outcomes == [Outcome.PROCESSED]
    record = team_env.record("k", handler=mine)
    assert record is not None and record.id == "mine#k"
