"""Worker processes: a timeout and a crash are real, and the worker comes back warm."""

from __future__ import annotations

import pytest

from oncecli.localcloud.mapping import FunctionConfig, Worker, event_record


def worker(handler: str, timeout_s: int = 1) -> Worker:
    function = FunctionConfig(
        name="fn",
        arn="arn:aws:lambda:us-east-1:1:function:fn",
        handler=f"tests.localcloud.fake_handlers.{handler}",
        timeout_s=timeout_s,
        memory_mb=128,
        environment={},
    )
    w = Worker(function, {"FAKE_ENV": "set"}, None)
    w.launch()
    w.wait_ready()
    return w


def test_context_and_environment():
    w = worker("ok", timeout_s=3)
    try:
        response, error, fault = w.invoke({"Records": []})
    finally:
        w.close()
    assert error is None and fault is None
    assert response["name"] == "fn" and response["env"] == "set"
    assert 2000 < response["remaining"] <= 3000


@pytest.mark.parametrize(
    ("handler", "fault", "error"),
    [
        ("slow", "timeout", "Task timed out after 1 seconds"),
        ("crash", "crash", "Runtime.ExitError: the worker process died"),
        ("raises", None, "RuntimeError: boom"),
        ("not_json", None, "Runtime.MarshalError"),
    ],
)
def test_failures(handler, fault, error):
    w = worker(handler)
    try:
        first = w.invoke({"Records": []})
        assert first[2] == fault
        assert first[1].startswith(error)
        second = w.invoke({"Records": []})  # replaced or still warm: it answers again
        assert second[2] == fault
    finally:
        w.close()


def test_event_record_shape():
    message = {
        "MessageId": "m",
        "ReceiptHandle": "r",
        "Body": "{}",
        "MD5OfBody": "x",
        "Attributes": {"ApproximateReceiveCount": "2"},
        "MessageAttributes": {
            "a": {"DataType": "String", "StringValue": "v"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x01"},
        },
    }
    record = event_record(message, "arn:q", "us-east-1")
    assert record["messageId"] == "m" and record["eventSource"] == "aws:sqs"
    assert record["attributes"]["ApproximateReceiveCount"] == "2"
    assert record["messageAttributes"]["a"]["stringValue"] == "v"
    assert record["messageAttributes"]["b"]["binaryValue"] == "AQ=="


def test_worker_killed_between_invocations_is_a_crash_then_replaced():
    w = worker("ok", timeout_s=3)
    try:
        w._proc.kill()
        w._proc.join()
        assert w.invoke({"Records": []})[2] == "crash"
        response, error, fault = w.invoke({"Records": []})
        assert fault is None and error is None and response["name"] == "fn"
    finally:
        w.close()
