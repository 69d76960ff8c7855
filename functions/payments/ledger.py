"""The ledger's writes, as ``TransactWriteItems`` elements: this module builds them, once
commits them (``attempt.write``) together with the payment's idempotency record.

A credit is two elements: the entry ``payment#<id>`` (a ``Put`` guarded by
``attribute_not_exists``) and ``ADD`` of the amount to ``account#<account>``. Both land in the
same transaction as the record's completion, or neither does: a crash or a zombie leaves
nothing behind, so the code never reads what an earlier attempt may have written. The guard
is refused only when the entry already exists, which once's record rules out for as long as
it keeps the record (its retention); past it, the same id is either a duplicate the record
has forgotten or an id reused for another payment, and a person decides which.
"""

from __future__ import annotations

from typing import Any

from once import constants as c

ENTRY_PREFIX = "payment#"
ACCOUNT_PREFIX = "account#"


def entry(table: str, payment_id: str, account: str, amount: int) -> dict[str, Any]:
    """Put the payment's entry, which must not exist yet."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                c.PARTITION_KEY: {"S": ENTRY_PREFIX + payment_id},
                "account": {"S": account},
                "amount": {"N": str(amount)},
            },
            "ConditionExpression": "attribute_not_exists(#id)",
            "ExpressionAttributeNames": {"#id": c.PARTITION_KEY},
        }
    }


def add_to_balance(table: str, account: str, amount: int) -> dict[str, Any]:
    """Add ``amount`` to the account's balance (an account never credited starts at 0)."""
    return {
        "Update": {
            "TableName": table,
            "Key": {c.PARTITION_KEY: {"S": ACCOUNT_PREFIX + account}},
            "UpdateExpression": "ADD balance :amount",
            "ExpressionAttributeValues": {":amount": {"N": str(amount)}},
        }
    }
