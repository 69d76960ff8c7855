"""Lambda entry point of the example service: ``payments.handler.lambda_handler``.

A message is a payment (``payments.payment``); anything else is a ``PermanentError``.

``credit`` writes nothing itself: it stages the ledger's two writes (``payments.ledger``) and
the notification, and once commits the writes with the payment's record in one transaction,
then sends the notification. A crash or a copy running at the same time therefore never
finds half a credit: the ledger holds the payment exactly when its record is COMPLETED.

Since every effect is staged, the handler runs with ``effects="staged"``: no claim before
``credit`` runs, and the transaction that commits the credit is the payment's only DynamoDB
call (a copy's transaction is refused by the record: a duplicate, nothing of it lands).
"""

from __future__ import annotations

import os
from typing import Any

from once import Attempt, make_handler
from once import constants as c
from payments import (
    ENV_LEDGER_TABLE_NAME,
    ENV_NOTIFICATIONS_QUEUE_URL,
    SERVICE_NAME,
    STATUS_CREDITED,
    ledger,
)
from payments.payment import read


def _setting(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: {what} is needed to apply payments")
    return value


def credit(body: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
    """Credit the payment to its account and announce it, committed once by once."""
    payment = read(body)
    payment_id, account, amount = payment.payment_id, payment.account, payment.amount
    table = _setting(ENV_LEDGER_TABLE_NAME, "the ledger table name")
    notifications = _setting(ENV_NOTIFICATIONS_QUEUE_URL, "the notifications queue URL")

    # The entry exists only if something outside this record wrote it: a duplicate past the
    # record's retention, or an id reused for another payment. Retrying cannot change that
    # (entries are never deleted), and acknowledging could lose a payment: a person decides.
    attempt.write(
        ledger.entry(table, payment_id, account, amount),
        refused="quarantine",
    )
    attempt.write(ledger.add_to_balance(table, account, amount))
    attempt.send(
        notifications,
        {"paymentId": payment_id, "account": account, "amount": amount, "status": STATUS_CREDITED},
    )
    return {"paymentId": payment_id, "account": account, "amount": amount}


lambda_handler = make_handler(
    credit,
    key="paymentId",
    key_prefix=os.getenv(c.ENV_SERVICE_NAME, SERVICE_NAME),
    effects="staged",
)
