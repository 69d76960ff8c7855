"""The credit the harness's ``once``, ``powertools`` and ``naive`` consumers run: the ledger
effect applied by business code itself, fenced downstream by its own conditional write (the
payments example's credit before ``attempt.write``; ``once-atomic`` runs ``twohop.py``).

One ``TransactWriteItems`` puts the entry ``payment#<id>`` (condition: it does not exist)
and adds the amount to ``account#<account>``. If an earlier attempt applied the effect and
crashed before its idempotency record was finalized, the put is refused, nothing is added
twice, and the entry already written is the answer (``applied: "earlier"``), provided it
credits the same account with the same amount: an entry that disagrees is a
``PermanentError``. This is what carrying ``attempt.key`` and ``attempt.fence`` downstream
looks like, and what the harness compares the three consumers on.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from once import PermanentError
from once import constants as c

ENTRY_PREFIX = "payment#"
ACCOUNT_PREFIX = "account#"


class Ledger:
    """Balances and payment entries in one DynamoDB table (partition key ``id``)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def credit(self, body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        """Apply the payment once. Returns the entry and ``applied``: ``now`` or ``earlier``."""
        from payments.payment import read  # the checkout's example, found by example.require()

        payment = read(body)
        payment_id, account, amount = payment.payment_id, payment.account, payment.amount
        entry = {
            c.PARTITION_KEY: {"S": ENTRY_PREFIX + payment_id},
            "account": {"S": account},
            "amount": {"N": str(amount)},
            "fence": {"N": str(attempt.fence)},
            "message_id": {"S": attempt.message_id},
        }
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": entry,
                            "ConditionExpression": "attribute_not_exists(#id)",
                            "ExpressionAttributeNames": {"#id": c.PARTITION_KEY},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": {c.PARTITION_KEY: {"S": ACCOUNT_PREFIX + account}},
                            "UpdateExpression": "ADD balance :amount",
                            "ExpressionAttributeValues": {":amount": {"N": str(amount)}},
                        }
                    },
                ]
            )
        except ClientError as error:
            existing = self._existing_entry(error, payment_id)
            if existing is None:
                raise
            earlier = _entry_view(payment_id, existing)
            if (earlier["account"], earlier["amount"]) != (account, amount):
                raise PermanentError(
                    "payment id already credited with another account or amount"
                ) from None
            return {**earlier, "applied": "earlier"}
        return {**_entry_view(payment_id, entry), "applied": "now"}

    def _existing_entry(self, error: ClientError, payment_id: str) -> dict[str, Any] | None:
        """The entry that refused our put, or None if the transaction failed otherwise."""
        if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            return None
        reasons = error.response.get("CancellationReasons") or []
        if not reasons or reasons[0].get("Code") != "ConditionalCheckFailed":
            return None
        if reasons[0].get("Item"):
            return dict(reasons[0]["Item"])
        response = self._client.get_item(
            TableName=self._table,
            Key={c.PARTITION_KEY: {"S": ENTRY_PREFIX + payment_id}},
            ConsistentRead=True,
        )
        item: dict[str, Any] | None = response.get("Item")
        return item


def _entry_view(payment_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "paymentId": payment_id,
        "account": item["account"]["S"],
        "amount": int(item["amount"]["N"]),
        "fence": int(item["fence"]["N"]),
    }
