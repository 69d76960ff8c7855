"""Once business code has returned, its effect happened: nothing once does afterwards may
abort the record or the batch, or leave the record IN_PROGRESS to be run again.

Two properties pin the class, not one instance of it: whatever business code returns (objects
whose ``json``/``dict``/``model_dump`` raise, a ``__str__`` or ``__repr__`` that raises, sets,
bytes, recursive structures, huge values, Decimals, NaN...) the record completes with what can
be stored and business code never runs again; and whatever exception is raised at each step
once takes after business code (encoding, logging, metrics, the quarantine send, the
visibility change, the completing write itself), the batch response still comes back, the
other records of the batch are untouched, and a returned effect is never run twice.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from once import PermanentError
from once import constants as c
from once.models import Outcome
from tests.conftest import FakeContext, Spy, build_event
from tests.unit.runtime.test_observability import emf

# --- what business code may return -------------------------------------------------------

ERRORS: list[type[Exception]] = [
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    ModuleNotFoundError,
    RuntimeError,
    RecursionError,
    NotImplementedError,
]


def _raiser(error: type[Exception]) -> Callable[..., Any]:
    def method(*_: Any, **__: Any) -> Any:
        raise error("raised by a method of the result")

    return method


def _odd_object(error: type[Exception], names: tuple[str, ...], class_name: str) -> Any:
    """An instance of a class named ``class_name`` whose ``names`` methods raise."""
    return type(class_name, (), {name: _raiser(error) for name in names})()


@dataclasses.dataclass
class _Receipt:
    amount: Any
    lines: Any


odd_objects = st.builds(
    _odd_object,
    st.sampled_from(ERRORS),
    st.sets(
        st.sampled_from(["json", "dict", "model_dump", "__str__", "__repr__", "__iter__"]),
        min_size=1,
    ).map(tuple),
    st.sampled_from(["Response", "Model", "caf\u00e9\u2028", "x" * 500, "bad\x01name"]),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.builds(lambda: 10**4400),  # past Python's int-to-str limit
    st.floats(),  # NaN and infinities included
    st.decimals(allow_nan=True, allow_infinity=True),
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1),
    st.binary(max_size=8),
    st.sets(st.integers(), max_size=3),
    st.frozensets(st.text(max_size=3), max_size=3),
    st.just(object()),
    odd_objects,
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.text(max_size=5), children, max_size=4),
        st.dictionaries(st.one_of(st.integers(), st.text(max_size=3)), children, max_size=3),
        st.builds(_Receipt, children, children),
    )


def _recursive(value: Any) -> Any:
    """A structure that contains itself."""
    cycle: list[Any] = [value]
    cycle.append(cycle)
    return {"self": cycle}


results = st.one_of(
    odd_objects,
    st.dictionaries(st.text(max_size=3), odd_objects, min_size=1, max_size=2),
    st.recursive(leaves, _containers, max_leaves=8),
    st.recursive(leaves, _containers, max_leaves=4).map(_recursive),
    st.integers(min_value=1, max_value=3).map(lambda n: "x" * (n * c.RESULT_CAP_BYTES)),
    st.integers(min_value=1, max_value=400).map(lambda n: [[[[]]]] * n),
    st.just(Decimal("1234.50")),
)

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@PROPERTY
@given(result=results)
@example(result=_odd_object(AttributeError, ("json",), "Response"))  # requests.Response-like
@example(result={"receipt": _odd_object(ModuleNotFoundError, ("json", "model_dump"), "Model")})
def test_whatever_business_code_returns_the_record_completes_and_never_runs_again(
    aws, once_handler, result: Any
) -> None:
    key, other = f"o-{uuid.uuid4().hex}", f"o-{uuid.uuid4().hex}"
    spy = Spy(lambda body, attempt: result if body["orderId"] == key else {"ok": True})
    handler = once_handler(spy)
    bodies = [{"orderId": key}, {"orderId": other}]

    first = handler.handle(build_event(bodies), FakeContext())
    again = handler.handle(build_event(bodies), FakeContext())

    assert [r.outcome for r in first.records] == [Outcome.PROCESSED] * 2
    assert [r.outcome for r in again.records] == [Outcome.DUPLICATE] * 2
    assert first.response == again.response == {"batchItemFailures": []}
    assert sorted(spy.keys) == sorted([key, other])
    stored = aws.record(key)
    assert (stored["status"], stored["fence"]) == (c.STATUS_COMPLETED, 1)
    assert len(stored["result"].encode("utf-8")) <= c.RESULT_CAP_BYTES
    _strict_json(stored["result"])
    assert aws.record(other)["status"] == c.STATUS_COMPLETED


# --- exceptions at each step after business code ------------------------------------------


def _client_error(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, operation)


class _LoudError(Exception):
    """An exception whose text cannot even be read."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ raised")


injected = st.sampled_from([*ERRORS, _LoudError])

#: Each step once takes after business code returned, and where to make it raise.
STEPS = ("encode", "log", "metrics", "visibility", "quarantine", "complete")


def _inject(step: str, handler: Any, error: type[Exception]) -> Any:
    """A patcher that makes ``step`` raise ``error``."""

    def fail(*_: Any, **__: Any) -> Any:
        raise error("injected")

    processor = handler.processor
    if step == "encode":
        return mock.patch("once.invocation.encode_result", fail)
    if step == "log":  # every line once logs, from the processor, the handler and the backoff
        return mock.patch.multiple(processor._logger, info=fail, warning=fail, error=fail)
    if step == "metrics":
        return mock.patch("once.handler.publish", fail)
    if step == "visibility":
        return mock.patch("once.visibility.Visibility.delay", fail)
    if step == "quarantine":
        return mock.patch.object(processor._quarantine._client, "send_message", fail)
    assert step == "complete"
    return mock.patch.object(processor._store, "complete", fail)


@PROPERTY
@given(step=st.sampled_from(STEPS), error=injected, backoff=st.booleans())
def test_an_error_in_any_step_after_business_code_never_costs_the_batch_or_a_second_run(
    aws, once_handler, step: str, error: type[Exception], backoff: bool
) -> None:
    keys = {name: f"{name}-{uuid.uuid4().hex}" for name in ("done", "permanent", "failing")}

    def business(body: Any, attempt: Any) -> Any:
        if body["orderId"] == keys["permanent"]:
            raise PermanentError("refused for good")
        if body["orderId"] == keys["failing"]:
            raise RuntimeError("try again")
        return {"charged": 1}

    spy = Spy(business)
    options = {} if backoff else {"backoff_base_s": None}
    handler = once_handler(spy, **options)
    event = build_event([{"orderId": key} for key in keys.values()])
    ids = [r["messageId"] for r in event["Records"]]

    with _inject(step, handler, error):
        result = handler.handle(event, FakeContext())

    outcomes = {name: r.outcome for name, r in zip(keys, result.records, strict=True)}
    # The response is whole and lists exactly the records that are neither done nor in the DLQ.
    assert result.response == {
        "batchItemFailures": [
            {"itemIdentifier": i}
            for i, r in zip(ids, result.records, strict=True)
            if not r.outcome.acknowledged
        ]
    }
    assert outcomes["failing"] is Outcome.FAILED
    if step == "complete":
        # The completing write is the one step that must land: DynamoDB refusing it leaves
        # the record IN_PROGRESS under its lease, as a crash before the finalize would.
        assert outcomes["done"] is Outcome.FAILED
        assert aws.record(keys["done"])["status"] == c.STATUS_IN_PROGRESS
    else:
        assert outcomes["done"] is Outcome.PROCESSED
        assert aws.record(keys["done"])["status"] == c.STATUS_COMPLETED
    if step == "quarantine":
        assert outcomes["permanent"] is Outcome.FAILED  # not in the DLQ: never acknowledged
    else:
        assert outcomes["permanent"] is Outcome.QUARANTINED

    # Delivered again (within the lease): the returned effect never runs a second time.
    handler.handle(build_event([{"orderId": keys["done"]}]), FakeContext())
    assert spy.keys.count(keys["done"]) == 1


@pytest.mark.parametrize("step", [s for s in STEPS if s != "complete"])
def test_an_error_after_business_code_is_counted_only_where_once_itself_failed(
    aws, once_handler, capsys, step: str
) -> None:
    handler = once_handler(Spy())

    with _inject(step, handler, KeyError):
        result = handler.handle(build_event([{"orderId": f"o-{step}"}]), FakeContext())

    assert result.records[0].outcome is Outcome.PROCESSED
    # Encoding is once's own step: the record completes in a safe form and the error counts.
    assert result.records[0].internal_error is (step == "encode")
    if step != "metrics":
        published = emf(capsys.readouterr().out)
        assert published.get(c.METRIC_INTERNAL_ERROR, 0) == (step == "encode")


def test_a_bug_in_once_fails_only_its_record_and_is_published_as_internal_error(
    aws, once_handler, capsys
) -> None:
    spy = Spy()
    handler = once_handler(spy)
    event = build_event([{"orderId": "o-bug"}, {"orderId": "o-fine"}])
    real = handler.processor._run_item

    def buggy(item: Any, context: Any, leaders: Any) -> Any:
        if item.parsed.key == "o-bug":
            raise KeyError("a bug in once")
        return real(item, context, leaders)

    with mock.patch.object(handler.processor, "_run_item", buggy):
        result = handler.handle(event, FakeContext())

    assert [r.outcome for r in result.records] == [Outcome.FAILED, Outcome.PROCESSED]
    assert [r["itemIdentifier"] for r in result.response["batchItemFailures"]] == [
        event["Records"][0]["messageId"]
    ]
    published = emf(capsys.readouterr().out)
    assert published[c.METRIC_INTERNAL_ERROR] == 1
    assert published[c.METRIC_FAILED] == published[c.METRIC_PROCESSED] == 1
