"""What once.testing cannot know about orders: the carrier. A fake one on 127.0.0.1, which the
handler reaches over HTTP in ``once_env`` tests and from the local cloud's workers in
``once_cloud`` tests (the app's ``carrier_url`` context). moto, the environment once reads and
the SQS batches are the kit's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class FakeCarrier(ThreadingHTTPServer):
    """``POST /shipments``: one shipment per Idempotency-Key; fails with ``status`` if not 200.
    ``requests``: (key, body) of every request, in the order they came."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Api)
        self.url = f"http://127.0.0.1:{self.server_port}"
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.shipments: dict[str, dict[str, Any]] = {}
        self.status = 200


class _Api(BaseHTTPRequestHandler):
    server: FakeCarrier

    def do_POST(self) -> None:
        key, carrier = self.headers["Idempotency-Key"], self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        carrier.requests.append((key, body))
        if carrier.status == 200:
            answer = carrier.shipments.setdefault(key, {"shipmentId": f"s-{key}", **body})
        else:
            answer = {"error": "no"}
        payload = json.dumps(answer).encode()
        self.send_response(carrier.status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def _carrier() -> Iterator[FakeCarrier]:
    with FakeCarrier() as carrier:
        threading.Thread(target=carrier.serve_forever, daemon=True).start()
        yield carrier
        carrier.shutdown()


@pytest.fixture
def carrier(_carrier: FakeCarrier) -> FakeCarrier:
    """The fake carrier, with no request and no shipment yet."""
    _carrier.requests.clear()
    _carrier.shipments.clear()
    _carrier.status = 200
    return _carrier


@pytest.fixture(scope="session")
def once_cloud_context(_carrier: FakeCarrier) -> dict[str, str]:
    """The app's context for once_cloud: its function ships to the fake carrier."""
    return {"carrier_url": _carrier.url}


@pytest.fixture
def handler(once_env, carrier: FakeCarrier, monkeypatch: pytest.MonkeyPatch):
    """The orders handler in once_env, shipping to the fake carrier (``CARRIER_URL``, which the
    stack sets in Lambda)."""
    monkeypatch.setenv("CARRIER_URL", carrier.url)
    from orders.handler import lambda_handler

    return lambda_handler
