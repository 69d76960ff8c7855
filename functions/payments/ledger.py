"""The ledger: the downstream effect of a payment, fenced by its own conditional write.

One ``TransactWriteItems`` puts the entry ``payment#<id>`` (condition: it does not exist)
and adds the amount to ``account#<account>``. If an earlier attempt applied the effect and
crashed before the idempotency record was finalized, the put is refused, nothing is added
twice, and the entry already written is the answer, provided it credits the same account
with the same amount: an entry that disagrees with the request is a ``PermanentError``.
This is what carrying ``attempt.key`` and ``attempt.fence`` downstream looks like.
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

    def credit(
        self, payment_id: str, account: str, amount: int, *, fence: int, message_id: str
    ) -> dict[str, Any]:
        """Apply the payment once. Returns the entry: new, or the one already there."""
        entry = {
            c.PARTITION_KEY: {"S": ENTRY_PREFIX + payment_id},
            "account": {"S": account},
            "amount": {"N": str(amount)},
            "fence": {"N": str(fence)},
            "message_id": {"S": message_id},
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
                # The id was used for another credit (a producer reusing ids once the
                # idempotency record's retention passed): applying nothing and acknowledging
                # would lose this payment. A person must look at it.
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
        return response.get("Item")

    def balance(self, account: str) -> int:
        """The account's balance in cents (0 for an account never credited)."""
        item = self._client.get_item(
            TableName=self._table,
            Key={c.PARTITION_KEY: {"S": ACCOUNT_PREFIX + account}},
            ConsistentRead=True,
        ).get("Item")
        return int(item["balance"]["N"]) if item else 0


def _entry_view(payment_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "paymentId": payment_id,
        "account": item["account"]["S"],
        "amount": int(item["amount"]["N"]),
        "fence": int(item["fence"]["N"]),
    }
