"""The batch rules every invocation keeps: the handler never raises for a record-level
problem, it reports only message ids of its own batch, and records of different keys run
concurrently in a bounded pool."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal
from typing import Any

import pytest

from once import PermanentError, make_handler
from once import constants as c
from once.models import Outcome
from once.quarantine import Quarantine
from once.store import RecordStore
from tests.conftest import TABLE, Spy, failed_ids, message_ids, outcomes


class Odd(Exception):
    pass


@pytest.mark.parametrize(
    "error",
    [
        ValueError("v"),
        KeyError("k"),
        Odd("odd"),
        RecursionError("deep"),
        AssertionError("a"),
        ConnectionError("c"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_business_code_raising_anything_is_a_failed_record_not_a_failed_batch(
    aws, once_handler, sqs_event, error: Exception
) -> None:
    def business(body: Any, attempt: Any) -> str:
        if body["orderId"] == "bad":
            raise error
        return "ok"

    event = sqs_event([{"orderId": "good"}, {"orderId": "bad"}, {"orderId": "fine"}])
    response = once_handler(business)(event, None)

    assert failed_ids(response) == [message_ids(event)[1]]
    record = aws.record("bad")
    assert record["status"] == c.STATUS_FAILED
    assert record["error"] == type(error).__name__  # its message may quote the payload
    assert aws.record("good")["status"] == aws.record("fine")["status"] == c.STATUS_COMPLETED


class _ResponseLike:
    """A value object with a ``json()`` method, as ``requests.Response`` has: Powertools'
    encoder takes it for a pydantic model."""

    def json(self) -> dict[str, int]:
        return {"status": 200}


@pytest.mark.parametrize(
    ("result", "stored"),
    [
        (object(), {"unencodable": "object"}),
        ({1, 2}, {"unencodable": "set"}),
        (b"bytes", {"unencodable": "bytes"}),
        ({"nested": object(), "kept": 1}, {"nested": {"unencodable": "object"}, "kept": 1}),
        ({1: "a", "b": 2}, {"unencodable": "dict"}),
        ("lone \ud800 surrogate", {"unencodable": "str"}),
        (_ResponseLike(), {"unencodable": "_ResponseLike"}),
        ({"response": _ResponseLike()}, {"response": {"unencodable": "_ResponseLike"}}),
        ({"amount": float("nan")}, {"unencodable": "dict"}),
    ],
    ids=[
        "object",
        "set",
        "bytes",
        "nested-object",
        "mixed-keys",
        "lone-surrogate",
        "json-attribute",
        "nested-json-attribute",
        "nan",
    ],
)
def test_a_result_that_is_not_json_completes_the_record_and_never_runs_again(
    aws, once_handler, sqs_event, result: Any, stored: Any
) -> None:
    # Business code returned: its effect happened. A record left FAILED or IN_PROGRESS would
    # invite every redelivery to run the effect again. What can be stored is; the rest
    # stands in as its type.
    spy = Spy(lambda body, attempt: result)
    handler = once_handler(spy)

    for _ in range(3):
        assert handler(sqs_event([{"orderId": "o-1"}]), None) == {"batchItemFailures": []}

    assert len(spy.calls) == 1
    record = aws.record("o-1")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)
    assert json.loads(record["result"]) == stored


def test_a_decimal_result_is_stored_as_its_exact_number(aws, once_handler, sqs_event) -> None:
    # What boto3's resource API returns for every DynamoDB number.
    spy = Spy(lambda body, attempt: {"balance": Decimal("1234.50"), "count": Decimal(3)})
    handler = once_handler(spy)

    assert handler(sqs_event([{"orderId": "o-1"}]), None) == {"batchItemFailures": []}

    record = aws.record("o-1")
    assert record["status"] == c.STATUS_COMPLETED
    assert json.loads(record["result"]) == {"balance": "1234.50", "count": "3"}


def test_the_error_stored_on_a_failed_record_is_cut_short(aws, once_handler, sqs_event) -> None:
    def business(body: Any, attempt: Any) -> None:
        raise PermanentError("x" * 5_000)

    once_handler(business)(sqs_event([{"orderId": "o-1"}]), None)
    assert len(aws.record("o-1")["error"]) == c.ERROR_MAX_CHARS


def test_only_message_ids_of_the_batch_are_reported_and_each_once(
    aws, once_handler, sqs_event
) -> None:
    def business(body: Any, attempt: Any) -> None:
        raise RuntimeError("all fail")

    bodies: list[Any] = [{"orderId": f"o-{i % 4}"} for i in range(10)] + ["not json"]
    event = sqs_event(bodies)
    failed = failed_ids(once_handler(business, dlq_url=None)(event, None))

    assert sorted(failed) == sorted(message_ids(event))


def test_an_unreachable_table_fails_every_record_without_raising(
    aws, once_handler, spy, sqs_event
) -> None:
    event = sqs_event([{"orderId": "o-1"}, {"orderId": "o-2"}])
    handler = once_handler(spy, table_name="no-such-table")

    assert outcomes(handler, event) == [Outcome.FAILED, Outcome.FAILED]
    assert sorted(failed_ids(handler(event, None))) == sorted(message_ids(event))
    assert spy.calls == []


def test_a_bug_in_the_processor_fails_the_whole_batch_without_raising(
    aws, once_handler, spy, sqs_event, monkeypatch
) -> None:
    handler = once_handler(spy)

    def broken(records: Any, context: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(handler.processor, "run", broken)
    event = sqs_event([{"orderId": "o-1"}, {"orderId": "o-2"}])
    assert failed_ids(handler(event, None)) == message_ids(event)


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_an_empty_batch_acknowledges_nothing_and_fails_nothing(aws, once_handler, spy) -> None:
    assert once_handler(spy)({"Records": []}, None) == {"batchItemFailures": []}


def test_a_broken_configuration_is_the_only_thing_that_raises(
    aws, spy, sqs_event, monkeypatch
) -> None:
    monkeypatch.delenv(c.ENV_TABLE_NAME)
    monkeypatch.delenv(c.ENV_SERVICE_NAME)
    unnamed = make_handler(spy, key="orderId")  # importing needs no AWS and no environment
    with pytest.raises(RuntimeError, match=c.ENV_SERVICE_NAME):
        unnamed(sqs_event([{"orderId": "o-1"}]), None)
    handler = make_handler(spy, key="orderId", key_prefix="test")
    with pytest.raises(RuntimeError, match=c.ENV_TABLE_NAME):
        handler(sqs_event([{"orderId": "o-1"}]), None)
    assert spy.calls == []


def test_the_environment_is_read_at_the_first_invocation_not_at_import(
    aws, spy, sqs_event, monkeypatch
) -> None:
    monkeypatch.delenv(c.ENV_TABLE_NAME)
    monkeypatch.delenv(c.ENV_SERVICE_NAME)
    monkeypatch.delenv(c.ENV_DLQ_URL)
    handler = make_handler(spy, key="orderId")  # a module-level handler, imported early
    monkeypatch.setenv(c.ENV_TABLE_NAME, TABLE)
    monkeypatch.setenv(c.ENV_SERVICE_NAME, "late")
    monkeypatch.setenv(c.ENV_DLQ_URL, aws.dlq_url)

    handler(sqs_event([{"orderId": "o-1"}]), None)
    monkeypatch.setenv(c.ENV_SERVICE_NAME, "changed-after-the-first-invocation")

    assert (handler.table_name, handler.key_prefix, handler.dlq_url) == (
        TABLE,
        "late",
        aws.dlq_url,
    )
    assert handler.retention_s == c.DEFAULT_RETENTION_S
    assert aws.record("o-1", prefix="late")["status"] == c.STATUS_COMPLETED


def test_a_bound_store_and_quarantine_replace_the_configured_ones_until_unbound(
    aws, spy, sqs_event
) -> None:
    handler = make_handler(spy, key="orderId", key_prefix="test", table_name="no-such-table")
    written: list[str] = []

    class Recording(RecordStore):
        def complete(self, record_id: str, claim: Any, result: str) -> bool:
            written.append(record_id)
            return super().complete(record_id, claim, result)

    sent: list[str] = []

    class Counting(Quarantine):
        def send(
            self,
            record: dict[str, Any],
            reason: str,
            error: str,
            *,
            fence: int | None = None,
            key: str | None = None,
        ) -> bool:
            sent.append(reason)
            return super().send(record, reason, error, fence=fence, key=key)

    handler.bind(store=Recording(aws.dynamodb, TABLE), quarantine=Counting(aws.sqs, aws.dlq_url))
    assert handler(sqs_event([{"orderId": "o-1"}, "not json"]), None) == {"batchItemFailures": []}
    assert (written, sent) == (["test#o-1"], ["INVALID_JSON"])

    handler.bind()  # back to the configuration: its table does not exist
    event = sqs_event([{"orderId": "o-2"}])
    assert failed_ids(handler(event, None)) == message_ids(event)
    assert written == ["test#o-1"]


def test_settings_come_from_the_environment_when_not_given(
    aws, spy, sqs_event, monkeypatch
) -> None:
    monkeypatch.setenv(c.ENV_SERVICE_NAME, "from-env")
    monkeypatch.setenv(c.ENV_RETENTION_S, "1234")
    handler = make_handler(spy, key="orderId")

    handler(sqs_event([{"orderId": "o-1"}, "not json"]), None)

    record = aws.record("o-1", prefix="from-env")
    assert record["expires_at"] - record["updated_at"] // 1000 in (1234, 1235)
    assert len(aws.dlq()) == 1  # DLQ_URL from the environment


def test_records_of_different_keys_run_concurrently_up_to_max_workers(
    aws, once_handler, sqs_event
) -> None:
    together = threading.Barrier(3, timeout=5)
    running: list[int] = []
    peak: list[int] = []
    lock = threading.Lock()

    def business(body: Any, attempt: Any) -> str:
        with lock:
            running.append(1)
            peak.append(len(running))
        together.wait()  # only passes if three records are in business code at once
        with lock:
            running.pop()
        return "ok"

    event = sqs_event([{"orderId": f"o-{i}"} for i in range(6)])
    assert once_handler(business, max_workers=3)(event, None) == {"batchItemFailures": []}
    assert max(peak) == 3


@pytest.mark.parametrize("retention_s", [0, -1])
def test_a_retention_that_is_not_positive_is_refused_not_replaced(spy, retention_s: int) -> None:
    with pytest.raises(ValueError, match="retention_s"):
        make_handler(spy, key="orderId", retention_s=retention_s)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("max_workers", 0),  # ThreadPoolExecutor would refuse it at the first batch of two keys
        ("max_workers", 2.5),
        ("lease_margin_s", -20),  # a lease shorter than the invocation: zombies
        ("lock_timeout_s", 0),
        ("min_remaining_ms", -1),
        ("min_remaining_ms", True),
    ],
)
def test_a_setting_that_cannot_work_is_refused_when_the_handler_is_made(
    spy, setting: str, value: Any
) -> None:
    with pytest.raises(ValueError, match=f"{setting} must be a whole number"):
        make_handler(spy, key="orderId", **{setting: value})


@pytest.mark.parametrize("value", ["0", "-5", "two weeks"])
def test_a_retention_from_the_environment_that_is_not_positive_is_a_clear_error(
    aws, spy, sqs_event, monkeypatch, value: str
) -> None:
    monkeypatch.setenv(c.ENV_RETENTION_S, value)
    handler = make_handler(spy, key="orderId")
    with pytest.raises(ValueError, match=c.ENV_RETENTION_S):
        handler(sqs_event([{"orderId": "o-1"}]), None)
    assert spy.calls == []


def test_rebinding_a_handler_shuts_down_the_threads_of_its_previous_processor(
    aws, once_handler, spy, sqs_event
) -> None:
    def workers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("once_")]

    before = len(workers())
    handler = once_handler(spy)
    held = []  # a processor still referenced (by a test, say) is not garbage-collected
    for round_ in range(5):
        handler.bind(store=RecordStore(aws.dynamodb, TABLE))
        handler(sqs_event([{"orderId": f"o-{round_}-{i}"} for i in range(3)]), None)
        held.append(handler.processor)

    deadline = time.monotonic() + 5
    while len(workers()) - before > 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(workers()) - before <= 3  # the last processor's threads only
