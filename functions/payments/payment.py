"""What a payment message is: ``{"paymentId": str, "account": str, "amount": int}``, the
amount in integer cents above zero. Anything else is a ``PermanentError``: retrying cannot
fix it. Read by the example's handler, and by the chaos harness's credit, which runs the
same payments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from once import PermanentError


@dataclass(frozen=True)
class Payment:
    payment_id: str
    account: str
    amount: int


def read(body: dict[str, Any]) -> Payment:
    """The payment ``body`` holds, or ``PermanentError`` saying which field is wrong."""
    payment_id, account, amount = (body.get(k) for k in ("paymentId", "account", "amount"))
    if not isinstance(payment_id, str) or not payment_id:
        raise PermanentError("paymentId must be a non-empty string")
    if not isinstance(account, str) or not account:
        raise PermanentError("account must be a non-empty string")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise PermanentError("amount must be an integer number of cents above zero")
    return Payment(payment_id, account, amount)
