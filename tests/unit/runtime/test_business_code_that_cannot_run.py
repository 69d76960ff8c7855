"""Business code that cannot run is refused where the team writes it, never recorded as done:
``make_handler`` refuses an ``async def``, a generator function or an async generator function
(directly, behind a ``functools.partial``, or as a callable object's ``__call__``); a plain
function that returns work it did not do (a coroutine, a generator, any other iterator) fails
its record as a permanent error, in both modes, and its copy goes to the DLQ. Also: the
commit's jitter is drawn from the operating system, not from ``random``'s seeded state."""

from __future__ import annotations

import asyncio
import functools
import random
import warnings
from typing import Any

import pytest

from once import constants as c
from once import make_handler
from once.models import Outcome
from tests.conftest import FakeContext, build_event


async def _async(body: Any, attempt: Any) -> str:
    return "charged"


def _generator(body: Any, attempt: Any) -> Any:
    yield "charged"


async def _async_generator(body: Any, attempt: Any) -> Any:
    yield "charged"


class _AsyncCallable:
    async def __call__(self, body: Any, attempt: Any) -> str:
        return "charged"


@pytest.mark.parametrize(
    "process",
    [_async, _generator, _async_generator, _AsyncCallable(), functools.partial(_async)],
    ids=["async-def", "generator", "async-generator", "async-call", "partial-of-async"],
)
def test_make_handler_refuses_business_code_that_would_not_run(process: Any) -> None:
    with pytest.raises(TypeError, match=r"asyncio\.run"):
        make_handler(process, key="orderId")


def test_make_handler_refuses_what_is_not_callable() -> None:
    with pytest.raises(TypeError, match="not callable"):
        make_handler("process", key="orderId")  # type: ignore[arg-type]


def _coroutine_of(body: Any, attempt: Any) -> Any:
    return _async(body, attempt)  # a wrapper that forgot to await


@pytest.mark.parametrize("effects", ["any", "staged"])
@pytest.mark.parametrize(
    ("process", "kind"),
    [
        (_coroutine_of, "coroutine"),
        (lambda body, attempt: _generator(body, attempt), "generator"),
        (lambda body, attempt: iter(["charged"]), "list_iterator"),
        (lambda body, attempt: asyncio.sleep(0), "coroutine"),
    ],
    ids=["coroutine", "generator", "iterator", "awaitable"],
)
def test_work_returned_undone_is_quarantined_never_recorded_as_done(
    aws: Any, process: Any, kind: str, effects: str
) -> None:
    handler = make_handler(process, key="orderId", effects=effects)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a coroutine never awaited: closed
        (result,) = handler.handle(build_event([{"orderId": "o-1"}]), FakeContext()).records
    assert (result.outcome, result.reason) == (Outcome.QUARANTINED, c.REASON_PERMANENT_ERROR)
    (copy,) = aws.dlq()
    error = copy["MessageAttributes"][c.QUARANTINE_ATTR_ERROR]["StringValue"]
    assert f"returned a {kind} and did not run" in error
    record = aws.record("o-1", prefix="payments")
    assert record is None or record["status"] != c.STATUS_COMPLETED


def test_a_list_or_a_view_is_a_result_not_work_undone(aws: Any) -> None:
    handler = make_handler(lambda body, attempt: {"a": 1}.keys(), key="orderId")
    (result,) = handler.handle(build_event([{"orderId": "o-2"}]), FakeContext()).records
    assert result.outcome is Outcome.PROCESSED


def test_the_commit_jitter_follows_the_operating_system_not_random_s_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two environments restored from one SnapStart snapshot share ``random``'s state; the
    jitter must not (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-uniqueness.html)."""
    from once import store

    waits = []
    for byte in (b"\x00", b"\xff"):  # what each environment's operating system draws
        random.seed(48)  # the state a snapshot carries, the same in both
        monkeypatch.setattr(random, "_urandom", lambda n, b=byte: b * n)
        waits.append(store._JITTER.uniform(0, 1))
    assert waits[0] != waits[1]
