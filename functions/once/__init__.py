"""once: make an SQS-delivered business operation take effect once.

Public API::

    from once import make_handler, Attempt, PermanentError, TransientError, SOURCE_KEY
    lambda_handler = make_handler(process, key="orderId")
    downstream = make_handler(apply, key=SOURCE_KEY)  # keyed on an upstream outbox's identity

``make_handler`` is imported on first use: pytest imports this package at startup (the
``once.testing`` plugin), and a test session that never builds a handler should not pay
for boto3 and Powertools.

The lowest floor of the code: the runtime (the record store, the batch processor, this API)
and ``once.testing``, the kit a team tests its handler with on moto. It imports the
standard library and its own dependencies (boto3, Powertools, and moto and pytest in
``once.testing``), never ``once_cdk`` or ``oncecli``, which import it; and none of its
modules imports one that imports it back (``once.handler`` registers with
``once.snapstart``, which knows a handler only by the two methods it calls).
``tests/unit/house/test_layering.py`` holds the floors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from once.backoff import Backoff
from once.constants import SOURCE_KEY
from once.models import (
    Attempt,
    BatchResult,
    Outcome,
    PermanentError,
    RecordResult,
    TransientError,
)
from once.powertools import PowertoolsBridge

if TYPE_CHECKING:
    from once.handler import make_handler

__all__ = [
    "SOURCE_KEY",
    "Attempt",
    "Backoff",
    "BatchResult",
    "Outcome",
    "PermanentError",
    "PowertoolsBridge",
    "RecordResult",
    "TransientError",
    "make_handler",
]


def __getattr__(name: str) -> Any:
    if name == "make_handler":
        from once.handler import make_handler

        return make_handler
    raise AttributeError(f"module 'once' has no attribute {name!r}")
