"""What the consumers send to DynamoDB, seen from the client: every benchmark hooks here.

One boto3 session carries the hooks and becomes ``boto3.DEFAULT_SESSION``, so ``once``
(which creates its own clients) and the peers (handed a client from the same session) are
measured by the very same code:

- ``latency_ms``: a sleep before every DynamoDB request leaves, the round trip of a real
  table, added identically for every consumer;
- ``calls``: requests on the wire per operation (SDK retries count, as AWS bills them);
- ``capacity``: with ``capacity=True`` each item call asks for ``ReturnConsumedCapacity=
  TOTAL`` (``once`` does not ask for it itself) and the units that come back are summed;
- ``also_count("sqs")``: another service's requests are counted too, in ``other_calls``
  (``"sqs.SendMessage"``), and wait the same ``latency_ms`` before they leave.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import boto3

#: Operations that accept ReturnConsumedCapacity and that the consumers use.
ITEM_OPERATIONS = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "GetItem",
        "TransactWriteItems",
        "BatchWriteItem",
        "BatchGetItem",
    }
)


def _operation(request: Any) -> str:
    target = request.headers.get("X-Amz-Target", b"")
    target = target.decode() if isinstance(target, bytes) else target
    return target.rsplit(".", 1)[-1]


class Wire:
    """Hooks on one boto3 session; read ``calls`` and ``capacity``, then ``reset()``."""

    def __init__(
        self, *, latency_ms: float = 0.0, capacity: bool = False, install: bool = True
    ) -> None:
        self.session = boto3.session.Session()
        self.latency_ms = latency_ms
        self.capacity_on = capacity
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.capacity: Counter[str] = Counter()
        self.capacity_missing: Counter[str] = Counter()
        self.other_calls: Counter[str] = Counter()
        events = self.session.events
        events.register("before-parameter-build.dynamodb", self._ask_capacity)
        events.register("before-send.dynamodb", self._on_send)
        events.register("after-call.dynamodb", self._on_response)
        if install:
            boto3.DEFAULT_SESSION = self.session

    def client(self, **kwargs: Any) -> Any:
        """A DynamoDB client that goes through these hooks."""
        return self.session.client("dynamodb", **kwargs)

    def also_count(self, service: str) -> None:
        """Count ``service``'s requests in ``other_calls`` and delay them as DynamoDB's."""
        self.session.events.register(f"before-send.{service}", self._on_other_send)

    def reset(self) -> None:
        with self._lock:
            self.other_calls.clear()
            self.calls.clear()
            self.capacity.clear()
            self.capacity_missing.clear()

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self._lock:
            return Counter(self.calls), Counter(self.capacity)

    def _ask_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self.capacity_on and model.name in ITEM_OPERATIONS:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _on_send(self, request: Any, **_: Any) -> None:
        with self._lock:
            self.calls[_operation(request)] += 1
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)

    def _on_other_send(self, request: Any, event_name: str, **_: Any) -> None:
        # before-send.<service>.<Operation>: the name holds both, whatever the protocol.
        _, service, operation = event_name.split(".", 2)
        with self._lock:
            self.other_calls[f"{service}.{operation}"] += 1
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)

    def _on_response(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if not self.capacity_on or model.name not in ITEM_OPERATIONS:
            return
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        with self._lock:
            if not entries:
                self.capacity_missing[model.name] += 1
            for entry in entries:
                read = entry.get("ReadCapacityUnits")
                write = entry.get("WriteCapacityUnits")
                if read is None and write is None:
                    # Only the total came back: reads and writes are told apart by the call.
                    kind = "read" if model.name in ("GetItem", "BatchGetItem") else "write"
                    self.capacity[kind] += float(entry.get("CapacityUnits", 0))
                else:
                    self.capacity["read"] += float(read or 0)
                    self.capacity["write"] += float(write or 0)
