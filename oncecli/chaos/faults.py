"""Faults injected at the AWS client, where the protocol meets the network.

Each injector is a botocore ``before-send`` hook, on one client or on every client the
process creates (botocore's built-in handler list), so the code under test runs unchanged:
its requests are throttled, applied with their response lost (the SDK then retries a
write that already landed), or refused while an outage window is open. The harness's
workers and the record store's model-based test inject through here.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

import botocore.handlers
import urllib3
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ConnectionClosedError

_THROTTLE_BODY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException",'
    b'"message":"Rate of requests exceeds the allowed throughput (injected)"}'
)
_OUTAGE_BODY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError",'
    b'"message":"Internal server error (injected outage)"}'
)


def _header(request: Any, name: str) -> str:
    value = request.headers.get(name, b"")
    return value.decode() if isinstance(value, bytes) else value


def _operation(request: Any) -> str:
    """The DynamoDB operation name of a prepared request (from its X-Amz-Target header)."""
    return _header(request, "X-Amz-Target").rsplit(".", 1)[-1]


def _first_attempt(request: Any) -> bool:
    """botocore numbers its attempts in the ``amz-sdk-request`` header."""
    return _header(request, "amz-sdk-request").startswith("attempt=1;")


class Injector:
    """Installs fault hooks and counts what it injected, per fault kind.

    ``client=None`` hooks every client created afterwards in this process."""

    def __init__(
        self,
        client: Any | None,
        rng: random.Random | None = None,
        on_fault: Callable[[str], None] | None = None,
    ) -> None:
        self._client = client
        self._on_fault = on_fault
        self._rng = rng or random.Random(0)
        self._lock = threading.Lock()
        self._http = urllib3.PoolManager()
        self.counts: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
        if self._on_fault is not None:
            self._on_fault(kind)

    def _roll(self, rate: float) -> bool:
        with self._lock:
            return self._rng.random() < rate

    def _register(self, hook: Callable[..., Any]) -> None:
        if self._client is None:
            botocore.handlers.BUILTIN_HANDLERS.append(("before-send.dynamodb", hook))
        else:
            self._client.meta.events.register("before-send.dynamodb", hook)

    def throttle(self, rate: float, operations: Iterable[str] = ("UpdateItem",)) -> None:
        """Answer a share of calls with a throttling error, as DynamoDB does under load."""
        names = set(operations)

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if _operation(request) not in names or not self._roll(rate):
                return None
            self._count("throttle")
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 400, headers, _RawBody(_THROTTLE_BODY))

        self._register(hook)

    def outage(self, flag: str) -> None:
        """While the file ``flag`` exists, answer every call with a server error, as DynamoDB
        does in an outage; the harness opens and closes the window for every worker at once."""

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if not os.path.exists(flag):
                return None
            self._count("outage")
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 500, headers, _RawBody(_OUTAGE_BODY))

        self._register(hook)

    def lose_responses(self, rate: float, operations: Iterable[str] = ("UpdateItem",)) -> None:
        """Apply a share of writes for real, then drop the answer: the SDK sends it again.

        Only first attempts lose their answer, so the retry always gets through."""
        names = set(operations)

        def hook(request: Any, **_: Any) -> None:
            if (
                _operation(request) not in names
                or not _first_attempt(request)
                or not self._roll(rate)
            ):
                return
            headers = {
                k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()
            }
            self._http.request(
                request.method, request.url, body=request.body, headers=headers, retries=False
            )
            self._count("lost_response")
            raise ConnectionClosedError(endpoint_url=request.url)

        self._register(hook)


class _RawBody:
    """The minimal raw-response object AWSResponse reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterable[bytes]:
        yield self._body

    def read(self, *_: Any) -> bytes:
        return self._body
