"""The local cloud's moto server holds requests to AWS's documented rules, as ``once_env``
does (``once.testing.strict``, installed by ``oncecli.localcloud.motoserver`` in the server
process): a few of tests/unit/kit/test_strict_aws.py's refusals, against the deployed local
cloud's endpoint, each with its valid neighbour."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

KIB = 1024


def _code(call: Callable[[], Any]) -> str:
    with pytest.raises(ClientError) as refused:
        call()
    return str(refused.value.response["Error"]["Code"])


def test_server_refuses_fifo_group_id_with_a_space(cloud):
    sqs = cloud.client("sqs")
    url = sqs.create_queue(QueueName="strict-server.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]

    def send(group: str) -> Any:
        return sqs.send_message(
            QueueUrl=url, MessageBody="x", MessageGroupId=group, MessageDeduplicationId="d"
        )

    assert _code(lambda: send("ada lovelace")) == "InvalidParameterValue"
    send("ada-lovelace")


def test_server_refuses_body_with_a_control_character_and_an_11th_attribute(cloud):
    sqs = cloud.client("sqs")
    url = sqs.create_queue(QueueName="strict-server")["QueueUrl"]
    assert _code(lambda: sqs.send_message(QueueUrl=url, MessageBody="a\x01b")) == (
        "InvalidMessageContents"
    )
    eleven = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}
    assert (
        _code(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=eleven))
        == "InvalidParameterValue"
    )
    eleven.pop("a10")
    sqs.send_message(QueueUrl=url, MessageBody="a\tb", MessageAttributes=eleven)


def test_server_refuses_delete_batch_of_11_and_duplicate_ids(cloud):
    sqs = cloud.client("sqs")
    url = sqs.create_queue(QueueName="strict-server-batch")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]["ReceiptHandle"]

    def delete(ids: list[str]) -> Any:
        entries = [{"Id": i, "ReceiptHandle": handle} for i in ids]
        return sqs.delete_message_batch(QueueUrl=url, Entries=entries)

    prefix = "AWS.SimpleQueueService."
    assert _code(lambda: delete([f"e{i}" for i in range(11)])) == (
        prefix + "TooManyEntriesInBatchRequest"
    )
    assert _code(lambda: delete(["same", "same"])) == prefix + "BatchEntryIdsNotDistinct"
    assert [s["Id"] for s in delete(["e0"])["Successful"]] == ["e0"]


def test_server_refuses_sns_publish_over_256_kib_with_attributes(cloud):
    sns = cloud.client("sns")
    topic = sns.create_topic(Name="strict-server-topic")["TopicArn"]
    attribute = {"a": {"DataType": "String", "StringValue": "v" * 10}}  # 17 bytes

    def publish(body: str) -> Any:
        return sns.publish(TopicArn=topic, Message=body, MessageAttributes=attribute)

    assert _code(lambda: publish("x" * (256 * KIB - 16))) == "InvalidParameter"
    publish("x" * (256 * KIB - 17))


def test_server_refuses_transaction_on_one_item_written_1_and_1_0_and_a_reused_token(cloud):
    ddb = cloud.client("dynamodb")
    ddb.create_table(
        TableName="strict-server-n",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "N"}],
    )

    def put(number: str) -> dict[str, Any]:
        return {"Put": {"TableName": "strict-server-n", "Item": {"pk": {"N": number}}}}

    def delete(number: str) -> dict[str, Any]:
        return {"Delete": {"TableName": "strict-server-n", "Key": {"pk": {"N": number}}}}

    transact = ddb.transact_write_items
    assert _code(lambda: transact(TransactItems=[put("1"), delete("1.0")])) == (
        "ValidationException"
    )
    transact(TransactItems=[put("1"), delete("2")], ClientRequestToken="strict-token")
    assert (
        _code(lambda: transact(TransactItems=[put("3")], ClientRequestToken="strict-token"))
        == "IdempotentParameterMismatchException"
    )
    item = ddb.get_item(TableName="strict-server-n", Key={"pk": {"N": "1.000"}})["Item"]
    assert item == {"pk": {"N": "1"}}
