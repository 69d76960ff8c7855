"""Lambda entry point of the example service: ``payments.handler.lambda_handler``.

A message is ``{"paymentId": str, "account": str, "amount": int}`` with the amount in
integer cents, above zero. Anything else is a ``PermanentError``: retrying cannot fix it.
"""

from __future__ import annotations

import os
from typing import Any

import boto3

from once import Attempt, PermanentError, make_handler
from once import constants as c
from payments import ENV_LEDGER_TABLE_NAME, SERVICE_NAME
from payments.ledger import Ledger

_ledger: Ledger | None = None


def _get_ledger() -> Ledger:
    """One client per process, created at the first payment."""
    global _ledger
    if _ledger is None:
        table = os.environ.get(ENV_LEDGER_TABLE_NAME)
        if not table:
            raise RuntimeError(
                f"{ENV_LEDGER_TABLE_NAME} is not set: the ledger table "
                "name is needed to apply payments"
            )
        _ledger = Ledger(boto3.client("dynamodb"), table)
    return _ledger


def credit(body: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
    """Credit the payment to its account, once, fenced downstream by the payment entry."""
    payment_id, account, amount = (body.get(k) for k in ("paymentId", "account", "amount"))
    if not isinstance(payment_id, str) or not payment_id:
        raise PermanentError("paymentId must be a non-empty string")
    if not isinstance(account, str) or not account:
        raise PermanentError("account must be a non-empty string")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise PermanentError("amount must be an integer number of cents above zero")
    return _get_ledger().credit(
        payment_id, account, amount, fence=attempt.fence, message_id=attempt.message_id
    )


lambda_handler = make_handler(
    credit,
    key="paymentId",
    key_prefix=os.getenv(c.ENV_SERVICE_NAME, SERVICE_NAME),
)
