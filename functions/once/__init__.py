"""once: make an SQS-delivered business operation take effect once.

Public API::

    from once import make_handler, Attempt, PermanentError, SOURCE_KEY
    lambda_handler = make_handler(process, key="orderId")
    downstream = make_handler(apply, key=SOURCE_KEY)  # keyed on an upstream outbox's identity

``make_handler`` is imported on first use: pytest imports this package at startup (the
``once.testing`` plugin), and a test session that never builds a handler should not pay
for boto3 and Powertools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from once.constants import SOURCE_KEY
from once.models import Attempt, PermanentError

if TYPE_CHECKING:
    from once.handler import make_handler

__all__ = ["SOURCE_KEY", "Attempt", "PermanentError", "make_handler"]


def __getattr__(name: str) -> Any:
    if name == "make_handler":
        from once.handler import make_handler

        return make_handler
    raise AttributeError(f"module 'once' has no attribute {name!r}")
