"""What operators see: one line per record with ``message_id``, ``key``, ``fence`` and
``outcome`` and no payload values, at INFO when it is done and at WARNING when it needs a
look; one EMF metric per outcome."""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

import pytest

from once import PermanentError
from once import constants as c
from once.models import Outcome
from once.observability import logger as once_logger
from once.observability import publish
from tests.conftest import Spy, message_ids
from tests.unit.runtime.test_outcome_table import claim_elsewhere

SECRET_ITEM = "Kryptonite-Sample-XJ9"
SECRET_QTY = 987654321


def emf(stdout: str) -> dict[str, float]:
    """Metric name -> total value over the EMF blobs printed in ``stdout``."""
    totals: dict[str, float] = {}
    for line in stdout.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        blob = json.loads(line)
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                totals[metric["Name"]] = totals.get(metric["Name"], 0) + (
                    sum(value) if isinstance(value, list) else value
                )
    return totals


def test_each_outcome_is_published_as_an_emf_metric(
    aws, once_handler, sqs_event, clock, capsys
) -> None:
    def business(body: Any, attempt: Any) -> str:
        if body.get("lose"):
            clock.advance(c.DEFAULT_LOCK_TIMEOUT_S + 1)
            claim_elsewhere(aws, body, clock=clock)
        if body.get("permanent"):
            raise PermanentError("no")
        if body.get("fail"):
            raise RuntimeError("down")
        return "ok"

    handler = once_handler(business, clock=clock)
    handler(sqs_event([{"orderId": "dup"}]), None)
    claim_elsewhere(aws, {"orderId": "busy"})
    capsys.readouterr()

    handler(
        sqs_event(
            [
                {"orderId": "new"},
                {"orderId": "dup"},
                {"orderId": "dup", "x": 1},
                {"orderId": "busy"},
                {"orderId": "perm", "permanent": True},
                {"orderId": "fail", "fail": True},
                "not json",
            ]
        ),
        None,
    )
    handler(sqs_event([{"orderId": "lost", "lose": True}]), None)

    metrics = emf(capsys.readouterr().out)
    assert metrics == {
        c.METRIC_PROCESSED: 1,
        c.METRIC_DUPLICATE: 1,
        c.METRIC_QUARANTINED: 2,
        c.METRIC_CONFLICT: 1,
        c.METRIC_BUSY: 1,
        c.METRIC_FAILED: 1,
        c.METRIC_LEASE_LOST: 1,
    }


def test_a_takeover_is_counted_beside_its_outcome(
    aws, once_handler, spy, sqs_event, clock, capsys
) -> None:
    claim_elsewhere(aws, {"orderId": "o-1"}, clock=clock, lease_ms=1_000)
    clock.advance(2)
    capsys.readouterr()
    once_handler(spy, clock=clock)(sqs_event([{"orderId": "o-1"}]), None)
    assert emf(capsys.readouterr().out) == {c.METRIC_PROCESSED: 1, c.METRIC_TAKEOVER: 1}


def test_record_lines_carry_the_protocol_fields_and_no_payload_values(
    aws, once_handler, sqs_event, caplog
) -> None:
    def business(body: Any, attempt: Any) -> Any:
        if body["orderId"] == "o-3":
            raise PermanentError("quantity not available")
        if body["orderId"] == "o-4":
            raise RuntimeError("warehouse offline")
        return {"item": body["item"], "qty": body["qty"]}

    bodies: list[Any] = [
        {"orderId": f"o-{i}", "item": SECRET_ITEM, "qty": SECRET_QTY} for i in range(5)
    ]
    conflicting = {"orderId": "o-1", "item": SECRET_ITEM + "-2", "qty": SECRET_QTY + 1}
    event = sqs_event([*bodies, bodies[0], conflicting, json.dumps(bodies[0])[:-1]])

    with caplog.at_level(logging.INFO):
        once_handler(Spy(business))(event, None)

    for record in caplog.records:
        if record.levelno <= logging.INFO:  # whatever logger wrote it
            assert SECRET_ITEM not in record.getMessage()
    lines = [
        r
        for r in caplog.records
        if r.name == once_logger.name and r.getMessage().startswith("record ")
    ]
    formatted = [once_logger.registered_formatter.format(r) for r in lines]
    assert len(lines) == len(event["Records"])
    for line in formatted:
        assert SECRET_ITEM not in line
        assert str(SECRET_QTY) not in line
        fields = json.loads(line)
        assert {"message_id", "outcome"} <= set(fields)
    by_id = {json.loads(line)["message_id"]: json.loads(line) for line in formatted}
    first = by_id[event["Records"][0]["messageId"]]
    assert (first["key"], first["fence"], first["outcome"]) == ("o-0", 1, "processed")


@pytest.mark.parametrize("outcome", list(Outcome))
def test_a_record_line_is_info_only_when_the_record_is_done_or_waits_for_a_live_claim(
    outcome,
) -> None:
    healthy = outcome in (Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.OWED_SENT, Outcome.BUSY)
    assert outcome.log_level == ("info" if healthy else "warning")


def test_at_warning_the_happy_path_writes_no_line_and_a_problem_record_still_does(
    aws, once_handler, sqs_event, caplog
) -> None:
    def business(body: Any, attempt: Any) -> Any:
        if body["orderId"] == "o-2":
            raise RuntimeError("warehouse offline")
        return {}

    event = sqs_event([{"orderId": "o-1"}, {"orderId": "o-1"}, {"orderId": "o-2"}, "not json"])
    with caplog.at_level(logging.WARNING, logger=once_logger.name):
        once_handler(Spy(business))(event, None)
    lines = [
        json.loads(once_logger.registered_formatter.format(r))
        for r in caplog.records
        if r.name == once_logger.name and r.getMessage().startswith("record ")
    ]
    ids = message_ids(event)
    assert sorted((line["message_id"], line["outcome"]) for line in lines) == sorted(
        [(ids[2], "failed"), (ids[3], "quarantined")]
    )


class InventoryError(PermanentError):
    """A user's own permanent error: its message is the user's, kept."""


def test_an_error_keeps_its_class_and_only_our_or_permanent_messages(
    aws, once_handler, sqs_event, caplog
) -> None:
    def business(body: Any, attempt: Any) -> Any:
        if body["orderId"] == "o-parse":
            int(body["item"])  # ValueError: invalid literal for int() ... 'Kryptonite-...'
        if body["orderId"] == "o-key":
            return {}[body["item"]]  # KeyError quoting the item
        if body["orderId"] == "o-perm":
            raise PermanentError("item is not sold any more")
        raise InventoryError("out of stock")

    keys = ("o-parse", "o-key", "o-perm", "o-own")
    event = sqs_event([{"orderId": k, "item": SECRET_ITEM, "qty": SECRET_QTY} for k in keys])
    with caplog.at_level(logging.INFO):
        once_handler(Spy(business))(event, None)

    stored = {k: aws.record(k)["error"] for k in keys}
    assert stored == {
        "o-parse": "ValueError",
        "o-key": "KeyError",
        "o-perm": "PermanentError: item is not sold any more",
        "o-own": "InventoryError: out of stock",
    }
    dead = sorted(m["MessageAttributes"][c.QUARANTINE_ATTR_ERROR]["StringValue"] for m in aws.dlq())
    assert dead == ["InventoryError: out of stock", "PermanentError: item is not sold any more"]
    for record in caplog.records:  # INFO and above, whatever logger wrote it
        text = record.getMessage() + json.dumps(record.__dict__, default=str)
        assert SECRET_ITEM not in text


def test_a_batch_aborted_by_a_bug_logs_no_payload_value(
    aws, once_handler, spy, sqs_event, caplog, monkeypatch
) -> None:
    handler = once_handler(spy)

    def broken(records: Any, context: Any) -> None:
        raise ValueError(f"bug while reading {records[0].body}")

    monkeypatch.setattr(handler.processor, "run", broken)
    with caplog.at_level(logging.INFO):
        handler(sqs_event([{"orderId": "o-1", "item": SECRET_ITEM}]), None)

    [aborted] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    text = once_logger.registered_formatter.format(aborted)
    assert "ValueError" in text
    assert SECRET_ITEM not in text


def test_a_conflict_is_published_as_conflict_and_acknowledged_by_its_quarantine(
    aws, once_handler, spy, sqs_event, capsys
) -> None:
    handler = once_handler(spy)
    handler(sqs_event([{"orderId": "o-1"}]), None)
    capsys.readouterr()

    event = sqs_event([{"orderId": "o-1", "qty": 2}])
    assert handler(event, None) == {"batchItemFailures": []}

    assert emf(capsys.readouterr().out) == {c.METRIC_CONFLICT: 1}
    assert len(aws.dlq()) == 1


def test_a_conflict_whose_quarantine_fails_is_a_failure_not_a_conflict(
    aws, once_handler, spy, sqs_event, capsys
) -> None:
    once_handler(spy)(sqs_event([{"orderId": "o-1"}]), None)
    capsys.readouterr()

    event = sqs_event([{"orderId": "o-1", "qty": 2}])
    response = once_handler(spy, dlq_url=None)(event, None)

    assert response == {"batchItemFailures": [{"itemIdentifier": message_ids(event)[0]}]}
    assert emf(capsys.readouterr().out) == {c.METRIC_FAILED: 1}


def test_logs_and_metrics_are_named_after_the_service_set_once_the_package_is_imported(
    aws, once_handler, spy, sqs_event, capsys, caplog, monkeypatch
) -> None:
    # once is imported long before this test: what counts is the environment at the build.
    monkeypatch.setenv(c.ENV_SERVICE_NAME, "orders-late")
    monkeypatch.setenv(c.ENV_METRICS_NAMESPACE, "ShopLate")
    capsys.readouterr()

    with caplog.at_level(logging.INFO):
        once_handler(spy)(sqs_event([{"orderId": "o-1"}]), None)

    [line] = [r for r in caplog.records if r.name == once_logger.name]
    assert json.loads(once_logger.registered_formatter.format(line))["service"] == "orders-late"
    [blob] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    assert blob["service"] == "orders-late"
    assert blob["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ShopLate"


def test_a_batch_that_handled_no_record_publishes_no_metrics_and_no_warning(capsys) -> None:
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        publish([])
    assert emf(capsys.readouterr().out) == {}
    assert [str(w.message) for w in caught] == []
