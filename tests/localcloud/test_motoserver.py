"""The patched moto server: a refused transaction undoes only its own items."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from oncecli.aws import local_client
from oncecli.localcloud.engines import MotoServer


def _add_seven(key: str) -> dict:
    """A transaction item that adds 7 to the balance of ``key``."""
    return {
        "Update": {
            "TableName": "t",
            "Key": {"id": {"S": key}},
            "UpdateExpression": "ADD balance :a",
            "ExpressionAttributeValues": {":a": {"N": "7"}},
        }
    }


def test_failed_transaction_rolls_back_its_items_only():
    with MotoServer() as moto:
        ddb = local_client("dynamodb", moto.endpoint)
        ddb.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        ddb.put_item(TableName="t", Item={"id": {"S": "other"}, "n": {"N": "1"}})
        ddb.put_item(TableName="t", Item={"id": {"S": "acct"}, "balance": {"N": "5"}})
        with pytest.raises(ClientError):
            ddb.transact_write_items(
                TransactItems=[
                    _add_seven("acct"),
                    {"Put": {"TableName": "t", "Item": {"id": {"S": "new"}}}},
                    _add_seven("x" * 2100),  # key too long: the transaction is refused
                ]
            )
        items = {i["id"]["S"]: i for i in ddb.scan(TableName="t")["Items"]}
        assert set(items) == {"other", "acct"}
        assert items["acct"]["balance"]["N"] == "5"
        ddb.transact_write_items(
            TransactItems=[
                _add_seven("acct"),
                {
                    "Put": {
                        "TableName": "t",
                        "Item": {"id": {"S": "new"}},
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                },
            ]
        )
        items = {i["id"]["S"]: i for i in ddb.scan(TableName="t")["Items"]}
        assert items["acct"]["balance"]["N"] == "12" and "new" in items
