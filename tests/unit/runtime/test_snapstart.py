"""Lambda SnapStart: a handler is built before the snapshot without calling AWS, and after a
restore nothing built before it is used again, through the hooks the Lambda Python runtime
calls (its ``snapshot_restore_py`` registry, run here the way the runtime runs it)."""

from __future__ import annotations

import gc
import logging
import threading
import weakref
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
import snapshot_restore_py

from once import constants as c
from once import snapstart
from once.handler import make_handler
from once.models import Outcome
from tests.conftest import outcomes, store_client

ORDER = {"orderId": "o-1"}


def _snapshot() -> None:
    """What the runtime does before it takes the snapshot: the hooks, last registered first."""
    for hook, args, kwargs in reversed(snapshot_restore_py.get_before_snapshot()):
        hook(*args, **kwargs)


def _restore() -> None:
    """What the runtime does after it restores a snapshot: the hooks, in registration order."""
    for hook, args, kwargs in snapshot_restore_py.get_after_restore():
        hook(*args, **kwargs)


def _sent(session: boto3.Session) -> list[str]:
    """The operations every client built from ``session`` from now on sends."""
    sent: list[str] = []

    def hook(request: Any, **_: Any) -> None:
        sent.append(request.headers.get("X-Amz-Target", b"").decode() or request.url)

    session.events.register("before-send", hook)
    return sent


def test_once_registers_its_two_hooks_with_the_runtime_once(once_handler, spy) -> None:
    once_handler(spy)
    once_handler(spy)
    before = [hook for hook, _, _ in snapshot_restore_py.get_before_snapshot()]
    after = [hook for hook, _, _ in snapshot_restore_py.get_after_restore()]
    assert before.count(snapstart.before_snapshot) == 1
    assert after.count(snapstart.after_restore) == 1


def test_before_the_snapshot_the_handler_is_built_calling_no_aws_api(
    aws, once_handler, spy
) -> None:
    handler = once_handler(spy)
    sent = _sent(boto3.DEFAULT_SESSION)
    _snapshot()
    assert handler._processor is not None
    assert sent == []
    assert spy.calls == []


def test_a_restored_handler_keeps_what_it_built_and_its_records(
    once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    _snapshot()
    from_snapshot = store_client(handler)
    _restore()
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert store_client(handler) is from_snapshot
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.DUPLICATE]
    assert len(spy.calls) == 1


class _Endpoint(ThreadingHTTPServer):
    """Answers every AWS JSON call with an empty success, counting the connections it
    accepts and the ones the client has closed."""

    daemon_threads = True

    def __init__(self) -> None:
        self.accepted = 0
        self.closed = threading.Semaphore(0)
        super().__init__(("127.0.0.1", 0), _Answer)


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Endpoint

    def setup(self) -> None:
        super().setup()
        self.server.accepted += 1

    def finish(self) -> None:
        super().finish()
        self.server.closed.release()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", "2")
        self.send_header("x-amz-crc32", str(zlib.crc32(b"{}")))
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[_Endpoint]:
    server = _Endpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    for proxy in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("restored", [True, False], ids=["restored", "warm"])
def test_after_a_restore_the_first_call_opens_a_new_connection(
    endpoint, spy, sqs_event, restored
) -> None:
    # Teams prime SnapStart functions by invoking them during INIT too: the snapshot then
    # holds an open connection, dead in every restored environment.
    handler = make_handler(
        spy, key="orderId", key_prefix="test", table_name="t", dlq_url=None, backoff_base_s=None
    )
    _snapshot()
    assert handler(sqs_event([ORDER]), None) == {"batchItemFailures": []}
    assert endpoint.accepted == 1
    if restored:
        _restore()
        assert endpoint.closed.acquire(timeout=30), "the connection was not closed"
    assert handler(sqs_event([{"orderId": "o-2"}]), None) == {"batchItemFailures": []}
    assert endpoint.accepted == (2 if restored else 1)


def test_a_handler_without_its_configuration_is_not_primed_and_the_snapshot_goes_on(
    aws, monkeypatch, spy, caplog
) -> None:
    monkeypatch.delenv(c.ENV_TABLE_NAME, raising=False)
    handler = make_handler(spy, key="orderId", key_prefix="test")
    with caplog.at_level(logging.WARNING, logger="once"):
        _snapshot()
    assert handler._processor is None
    assert "not primed for the snapshot: configuration incomplete" in caplog.text


def test_a_priming_that_raises_is_logged_and_the_snapshot_goes_on(
    monkeypatch, once_handler, spy, caplog
) -> None:
    handler = once_handler(spy)

    def broken() -> bool:
        raise OSError("no route")

    monkeypatch.setattr(handler, "prime", broken)
    with caplog.at_level(logging.WARNING, logger="once"):
        _snapshot()
    logged = [(r.getMessage(), getattr(r, "error", None)) for r in caplog.records]
    assert ("not primed for the snapshot", "OSError") in logged


def test_registering_a_handler_does_not_keep_it_alive(spy) -> None:
    handler = make_handler(spy, key="orderId", key_prefix="test", table_name="t")
    alive = weakref.ref(handler)
    del handler
    gc.collect()
    assert alive() is None
