"""What AWS said when a call failed, in the words once logs and decides with: the error's
code (botocore's ``ClientError`` carries it in ``response["Error"]["Code"]``), and how a
send to SQS or SNS ended (``Sent``). An error is described, in codes and names and never a
value, by ``payload.describe_error``.

Kept apart from the protocol so that the store, the outbox and the quarantine report a
failure the same way, and ``protocol.py`` judges it from the code alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def error_code(error: BaseException) -> str | None:
    """AWS's error code of a refused call (``AccessDeniedException``,
    ``TransactionCanceledException``...); None for an error that is not AWS's answer (a
    timeout, a connection reset, a check of the SDK's own)."""
    response: Any = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = (response.get("Error") or {}).get("Code")
    return str(code) if code else None


@dataclass(frozen=True)
class Sent:
    """How a send to SQS, SNS or EventBridge ended: ``ok``, or why not. ``error`` names the cause as
    ``payload.describe_error`` does (a refused call), or a batch entry's ``Failed`` code
    (``Failed InvalidParameterValue``); never a value. Truthy when sent."""

    ok: bool
    error: str | None = None

    def __bool__(self) -> bool:
        return self.ok


#: A send that went through.
SENT = Sent(True)
