"""``once_env``'s moto holds SQS, SNS and DynamoDB requests to AWS's documented rules, with
AWS's error codes (``once.testing.strict``): what AWS refuses, a test refuses too. Each test
sends the refused request from a plain boto3 client made inside the environment, as a
team's business code would, and its valid neighbour, which passes. The rules moto already
kept are pinned here as well, so that a moto upgrade that drops one is seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import sendrules
from once.testing.env import OnceEnv
from once.testing.strict import normalized_number

MIB = 1024 * 1024
KIB = 1024


def _code(call: Callable[[], Any]) -> str:
    """The error code AWS (here: moto) answers ``call`` with."""
    with pytest.raises(ClientError) as refused:
        call()
    return str(refused.value.response["Error"]["Code"])


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


@pytest.fixture(scope="module")
def env() -> Iterator[OnceEnv]:
    """One environment for the module: the rules are the request's, not the state's."""
    with OnceEnv() as environment:
        yield environment


@pytest.fixture(scope="module")
def sqs(env: OnceEnv) -> Any:
    return boto3.client("sqs")


@pytest.fixture(scope="module")
def queue(sqs: Any) -> str:
    return str(sqs.create_queue(QueueName="strict-standard")["QueueUrl"])


@pytest.fixture(scope="module")
def fifo(sqs: Any) -> str:
    return str(
        sqs.create_queue(QueueName="strict.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    )


@pytest.fixture(scope="module")
def sns(env: OnceEnv) -> Any:
    return boto3.client("sns")


@pytest.fixture(scope="module")
def topic(sns: Any) -> str:
    return str(sns.create_topic(Name="strict-topic")["TopicArn"])


@pytest.fixture(scope="module")
def fifo_topic(sns: Any) -> str:
    return str(
        sns.create_topic(Name="strict-topic.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    )


@pytest.fixture(scope="module")
def ddb(env: OnceEnv) -> Any:
    client = boto3.client("dynamodb")
    for name, kind in (("strict-s", "S"), ("strict-n", "N")):
        client.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": kind}],
        )
    return client


# --- SQS: one message ---------------------------------------------------------------------------


def test_business_code_fifo_group_id_with_a_space_is_invalid_parameter_value(env, fifo):
    def send_order(order: dict[str, str]) -> None:
        """A team's business code, with its own client."""
        boto3.client("sqs").send_message(
            QueueUrl=fifo,
            MessageBody=json.dumps(order),
            MessageGroupId=order["customer"],
            MessageDeduplicationId=order["orderId"],
        )

    assert _code(lambda: send_order({"orderId": "o-1", "customer": "ada lovelace"})) == (
        "InvalidParameterValue"
    )
    send_order({"orderId": "o-1", "customer": "ada-lovelace"})


@pytest.mark.parametrize("group_id", ["", "g" * 129, "é", "a\tb"])
def test_group_id_outside_its_pattern_is_invalid_parameter_value(sqs, fifo, group_id):
    send = sqs.send_message
    assert (
        _code(
            lambda: send(
                QueueUrl=fifo, MessageBody="x", MessageGroupId=group_id, MessageDeduplicationId="d"
            )
        )
        == "InvalidParameterValue"
    )
    send(QueueUrl=fifo, MessageBody="x", MessageGroupId="g" * 128, MessageDeduplicationId="d")


def test_group_id_on_a_standard_queue_is_held_to_the_same_pattern(sqs, queue):
    send = sqs.send_message
    assert _code(lambda: send(QueueUrl=queue, MessageBody="x", MessageGroupId="a b")) == (
        "InvalidParameterValue"
    )
    sqs.send_message(QueueUrl=queue, MessageBody="x", MessageGroupId="tenant-1")


@pytest.mark.parametrize("dedup_id", ["d d", "d" * 129])
def test_deduplication_id_outside_its_pattern_is_invalid_parameter_value(sqs, fifo, dedup_id):
    def send(d: str) -> Any:
        return sqs.send_message(
            QueueUrl=fifo, MessageBody="x", MessageGroupId="g", MessageDeduplicationId=d
        )

    assert _code(lambda: send(dedup_id)) == "InvalidParameterValue"
    send("d" * 128)


@pytest.mark.parametrize("character", ["\x00", "\x01", "\x1f", "\ufffe", "\uffff"])
def test_body_with_a_character_sqs_refuses_is_invalid_message_contents(sqs, queue, character):
    assert (
        _code(lambda: sqs.send_message(QueueUrl=queue, MessageBody=f"a{character}b"))
        == "InvalidMessageContents"
    )
    sqs.send_message(QueueUrl=queue, MessageBody="a\t\n\r\ud7ff\ue000\U0010ffffb")


def test_empty_body_is_missing_parameter(sqs, queue):
    assert _code(lambda: sqs.send_message(QueueUrl=queue, MessageBody="")) == "MissingParameter"
    sqs.send_message(QueueUrl=queue, MessageBody=" ")


def test_string_attribute_with_a_control_character_is_invalid_message_contents(sqs, queue):
    def send(value: str) -> Any:
        return sqs.send_message(
            QueueUrl=queue, MessageBody="x", MessageAttributes={"a": _string(value)}
        )

    assert _code(lambda: send("a\x01")) == "InvalidMessageContents"
    send("a\t")


def test_eleventh_message_attribute_is_invalid_parameter_value(sqs, queue):
    def send(count: int) -> Any:
        attributes = {f"a{i}": _string("v") for i in range(count)}
        return sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=attributes)

    assert _code(lambda: send(11)) == "InvalidParameterValue"
    send(10)


@pytest.mark.parametrize(
    "name", ["AWS.trace", "aws.trace", "Amazon.x", "amazon.x", ".x", "x.", "a..b", "a b", "a" * 257]
)
def test_attribute_name_aws_refuses_is_invalid_parameter_value(sqs, queue, name):
    def send(n: str) -> Any:
        return sqs.send_message(
            QueueUrl=queue, MessageBody="x", MessageAttributes={n: _string("v")}
        )

    assert _code(lambda: send(name)) == "InvalidParameterValue"
    send("a.b_c-D" + "a" * 249)  # 256 characters, periods inside


@pytest.mark.parametrize(
    "number", ["1" * 39, "1e127", "1e-129", "abc", "", "1.0.0", "NaN", "Infinity"]
)
def test_number_attribute_out_of_precision_or_range_is_invalid_parameter_value(sqs, queue, number):
    def send(n: str) -> Any:
        return sqs.send_message(
            QueueUrl=queue,
            MessageBody="x",
            MessageAttributes={"n": {"DataType": "Number", "StringValue": n}},
        )

    assert _code(lambda: send(number)) == "InvalidParameterValue"
    for taken in ("1" * 38, "1e126", "1e-128", "-0.5", "1" * 38 + "000", "0"):
        send(taken)


def test_attribute_data_type_outside_string_number_binary_is_invalid_parameter_value(sqs, queue):
    def send(kind: str) -> Any:
        return sqs.send_message(
            QueueUrl=queue,
            MessageBody="x",
            MessageAttributes={"a": {"DataType": kind, "StringValue": "1"}},
        )

    assert _code(lambda: send("Integer")) == "InvalidParameterValue"  # moto kept this one
    send("Number.int")


def test_message_over_1_mib_with_its_attributes_is_invalid_parameter_value(sqs, queue):
    attribute = {"a": _string("v" * 10)}  # 1 + 6 + 10 bytes
    over, fits = "x" * (MIB - 16), "x" * (MIB - 17)

    def send(body: str) -> Any:
        return sqs.send_message(QueueUrl=queue, MessageBody=body, MessageAttributes=attribute)

    assert _code(lambda: send(over)) == "InvalidParameterValue"
    send(fits)


def test_message_over_1_mib_in_utf8_bytes_is_invalid_parameter_value(sqs, queue):
    """moto counted characters: 600 Ki of "é" are 1.2 MiB."""
    over = "é" * (MIB // 2 + 1)
    assert _code(lambda: sqs.send_message(QueueUrl=queue, MessageBody=over)) == (
        "InvalidParameterValue"
    )
    sqs.send_message(QueueUrl=queue, MessageBody="é" * (MIB // 2))


def test_body_of_exactly_1_mib_is_taken_and_one_byte_more_refused(sqs, queue):
    """moto's own rule, pinned."""
    assert (
        _code(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x" * (MIB + 1)))
        == "InvalidParameterValue"
    )
    sqs.send_message(QueueUrl=queue, MessageBody="x" * MIB)


@pytest.mark.parametrize("delay", [-1, 901])
def test_delay_seconds_outside_0_to_900_is_invalid_parameter_value(sqs, queue, delay):
    assert (
        _code(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x", DelaySeconds=delay))
        == "InvalidParameterValue"
    )
    sqs.send_message(QueueUrl=queue, MessageBody="x", DelaySeconds=900)


# --- SQS: FIFO (moto's rules, pinned) ----------------------------------------------------------


def test_fifo_message_without_group_id_is_missing_parameter(sqs, fifo):
    assert (
        _code(lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageDeduplicationId="d"))
        == "MissingParameter"
    )
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageDeduplicationId="d", MessageGroupId="g")


def test_fifo_message_without_deduplication_id_nor_content_based_is_invalid_parameter_value(
    sqs, fifo
):
    assert (
        _code(lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g"))
        == "InvalidParameterValue"
    )
    content_based = sqs.create_queue(
        QueueName="strict-cbd.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    sqs.send_message(QueueUrl=content_based, MessageBody="x", MessageGroupId="g")


def test_fifo_message_with_its_own_delay_is_invalid_parameter_value(sqs, fifo):
    def send(delay: int) -> Any:
        return sqs.send_message(
            QueueUrl=fifo,
            MessageBody="x",
            MessageGroupId="g",
            MessageDeduplicationId=f"delay-{delay}",
            DelaySeconds=delay,
        )

    assert _code(lambda: send(5)) == "InvalidParameterValue"
    send(0)


# --- SQS: batches ------------------------------------------------------------------------------


def _entries(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"Id": f"m{i}", "MessageBody": "x", **extra} for i in range(count)]


def test_send_batch_of_11_is_too_many_entries(sqs, queue):
    code = _code(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=_entries(11)))
    assert code == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
    assert len(sqs.send_message_batch(QueueUrl=queue, Entries=_entries(10))["Successful"]) == 10


def test_send_batch_of_none_is_empty_batch_request(sqs, queue):
    code = _code(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=[]))
    assert code == "AWS.SimpleQueueService.EmptyBatchRequest"
    sqs.send_message_batch(QueueUrl=queue, Entries=_entries(1))


def test_send_batch_with_duplicate_ids_is_batch_entry_ids_not_distinct(sqs, queue):
    twice = [{"Id": "same", "MessageBody": "a"}, {"Id": "same", "MessageBody": "b"}]
    code = _code(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=twice))
    assert code == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    sqs.send_message_batch(QueueUrl=queue, Entries=_entries(2))


@pytest.mark.parametrize("entry_id", ["a.b", "a b", "é", "a" * 81, ""])
def test_send_batch_entry_id_outside_its_pattern_is_invalid_batch_entry_id(sqs, queue, entry_id):
    entries = [{"Id": entry_id, "MessageBody": "x"}]
    code = _code(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=entries))
    assert code == "AWS.SimpleQueueService.InvalidBatchEntryId"
    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "A-z_0" + "a" * 75, "MessageBody": "x"}])


def test_send_batch_over_1_mib_with_attributes_is_batch_request_too_long(sqs, queue):
    attribute = {"a": _string("v" * 10)}  # 17 bytes

    def batch(body_bytes: int) -> list[dict[str, Any]]:
        return [
            {"Id": f"m{i}", "MessageBody": "x" * body_bytes, "MessageAttributes": attribute}
            for i in range(2)
        ]

    code = _code(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=batch(MIB // 2 - 16)))
    assert code == "AWS.SimpleQueueService.BatchRequestTooLong"
    sqs.send_message_batch(QueueUrl=queue, Entries=batch(MIB // 2 - 17))


def test_send_batch_entry_aws_refuses_fails_alone(sqs, queue):
    entries = [
        {"Id": "bad", "MessageBody": "a\x01"},
        {"Id": "attrs", "MessageBody": "x", "MessageAttributes": {"AWS.x": _string("v")}},
        {"Id": "late", "MessageBody": "x", "DelaySeconds": 901},
        {"Id": "good", "MessageBody": "fine"},
    ]
    response = sqs.send_message_batch(QueueUrl=queue, Entries=entries)
    assert [s["Id"] for s in response["Successful"]] == ["good"]
    failed = {f["Id"]: f for f in response["Failed"]}
    assert {i: f["Code"] for i, f in failed.items()} == {
        "bad": "InvalidMessageContents",
        "attrs": "InvalidParameterValue",
        "late": "InvalidParameterValue",
    }
    assert all(f["SenderFault"] for f in failed.values())


@pytest.mark.parametrize("operation", ["delete", "visibility"])
def test_delete_and_visibility_batches_hold_entry_counts_and_ids(sqs, queue, operation):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=30)["Messages"][0][
        "ReceiptHandle"
    ]

    def call(entries: list[dict[str, Any]]) -> Any:
        if operation == "delete":
            return sqs.delete_message_batch(QueueUrl=queue, Entries=entries)
        return sqs.change_message_visibility_batch(
            QueueUrl=queue, Entries=[{**e, "VisibilityTimeout": 0} for e in entries]
        )

    def entries(count: int, entry_id: str = "e{}") -> list[dict[str, Any]]:
        return [{"Id": entry_id.format(i), "ReceiptHandle": handle} for i in range(count)]

    prefix = "AWS.SimpleQueueService."
    assert _code(lambda: call(entries(11))) == prefix + "TooManyEntriesInBatchRequest"
    assert _code(lambda: call([])) == prefix + "EmptyBatchRequest"
    assert _code(lambda: call(entries(2, "same"))) == prefix + "BatchEntryIdsNotDistinct"
    assert _code(lambda: call(entries(1, "a.b"))) == prefix + "InvalidBatchEntryId"
    assert [s["Id"] for s in call(entries(1))["Successful"]] == ["e0"]


@pytest.mark.parametrize("timeout", [-1, 43201])
def test_visibility_timeout_outside_0_to_43200_is_invalid_parameter_value(sqs, queue, timeout):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=30)["Messages"][0][
        "ReceiptHandle"
    ]
    change = sqs.change_message_visibility
    assert (
        _code(lambda: change(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=timeout))
        == "InvalidParameterValue"
    )
    assert (
        _code(lambda: sqs.receive_message(QueueUrl=queue, VisibilityTimeout=timeout))
        == "InvalidParameterValue"
    )
    batch = sqs.change_message_visibility_batch(
        QueueUrl=queue,
        Entries=[{"Id": "e", "ReceiptHandle": handle, "VisibilityTimeout": timeout}],
    )
    assert [f["Code"] for f in batch["Failed"]] == ["InvalidParameterValue"]
    change(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=0)


# --- SNS ---------------------------------------------------------------------------------------


def test_sns_publish_over_256_kib_with_attributes_is_invalid_parameter(sns, topic):
    attribute = {"a": _string("v" * 10)}  # 17 bytes

    def publish(body: str) -> Any:
        return sns.publish(TopicArn=topic, Message=body, MessageAttributes=attribute)

    assert _code(lambda: publish("x" * (256 * KIB - 16))) == "InvalidParameter"
    publish("x" * (256 * KIB - 17))


def test_sns_publish_body_over_256_kib_is_invalid_parameter(sns, topic):
    """moto's own rule, pinned."""
    over = "x" * (256 * KIB + 1)
    assert _code(lambda: sns.publish(TopicArn=topic, Message=over)) == "InvalidParameter"
    sns.publish(TopicArn=topic, Message="x" * (256 * KIB))


@pytest.mark.parametrize("name", ["AWS.x", "Amazon.x", "a..b", "a b", ".x"])
def test_sns_attribute_name_aws_refuses_is_parameter_value_invalid(sns, topic, name):
    def publish(n: str) -> Any:
        return sns.publish(TopicArn=topic, Message="x", MessageAttributes={n: _string("v")})

    assert _code(lambda: publish(name)) == "ParameterValueInvalid"
    publish("a.b")


def test_sns_number_attribute_of_39_digits_is_parameter_value_invalid(sns, topic):
    def publish(n: str) -> Any:
        return sns.publish(
            TopicArn=topic,
            Message="x",
            MessageAttributes={"n": {"DataType": "Number", "StringValue": n}},
        )

    assert _code(lambda: publish("1" * 39)) == "ParameterValueInvalid"
    publish("1" * 38)


def test_sns_takes_more_than_10_attributes(sns, topic):
    """SNS has no 10-attribute limit at Publish (only raw delivery to SQS drops past 10)."""
    sns.publish(
        TopicArn=topic, Message="x", MessageAttributes={f"a{i}": _string("v") for i in range(11)}
    )


def test_sns_fifo_topic_group_id_missing_or_outside_its_pattern_is_invalid_parameter(
    sns, fifo_topic
):
    def publish(**group: str) -> Any:
        return sns.publish(TopicArn=fifo_topic, Message="x", MessageDeduplicationId="d", **group)

    assert _code(lambda: publish()) == "InvalidParameter"
    assert _code(lambda: publish(MessageGroupId="a b")) == "InvalidParameter"
    assert _code(lambda: publish(MessageGroupId="g" * 129)) == "InvalidParameter"
    publish(MessageGroupId="g" * 128)


def test_sns_publish_batch_holds_counts_ids_and_payload(sns, topic):
    def batch(entries: list[dict[str, Any]]) -> Any:
        return sns.publish_batch(TopicArn=topic, PublishBatchRequestEntries=entries)

    def entries(count: int, size: int = 1, entry_id: str = "e{}") -> list[dict[str, Any]]:
        return [{"Id": entry_id.format(i), "Message": "x" * size} for i in range(count)]

    assert _code(lambda: batch(entries(11))) == "TooManyEntriesInBatchRequest"  # moto's
    assert _code(lambda: batch([])) == "EmptyBatchRequest"
    assert _code(lambda: batch(entries(2, entry_id="same"))) == "BatchEntryIdsNotDistinct"
    assert _code(lambda: batch(entries(1, entry_id="a.b"))) == "InvalidBatchEntryId"
    assert _code(lambda: batch(entries(2, size=128 * KIB + 1))) == "BatchRequestTooLong"
    assert len(batch(entries(2, size=128 * KIB))["Successful"]) == 2


def test_sns_publish_batch_entry_aws_refuses_fails_alone(sns, fifo_topic):
    entries = [
        {"Id": "space", "Message": "x", "MessageGroupId": "a b", "MessageDeduplicationId": "1"},
        {"Id": "none", "Message": "x", "MessageDeduplicationId": "2"},
        {"Id": "good", "Message": "x", "MessageGroupId": "g", "MessageDeduplicationId": "3"},
    ]
    response = sns.publish_batch(TopicArn=fifo_topic, PublishBatchRequestEntries=entries)
    assert [s["Id"] for s in response["Successful"]] == ["good"]
    assert {f["Id"]: f["Code"] for f in response["Failed"]} == {
        "space": "InvalidParameter",
        "none": "InvalidParameter",
    }


# --- DynamoDB ----------------------------------------------------------------------------------


def _put(table: str, key: dict[str, str], **attributes: Any) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": {"pk": key, **attributes}}}


def test_transact_write_items_of_101_is_validation_exception(ddb):
    """moto's own rule, pinned."""
    items = [_put("strict-s", {"S": f"k{i}"}) for i in range(101)]
    assert _code(lambda: ddb.transact_write_items(TransactItems=items)) == "ValidationException"
    ddb.transact_write_items(TransactItems=items[:100])


def test_transact_write_items_over_4_mb_is_validation_exception(ddb):
    def items(count: int) -> list[dict[str, Any]]:
        return [_put("strict-s", {"S": f"big{i}"}, v={"S": "x" * 350 * KIB}) for i in range(count)]

    assert _code(lambda: ddb.transact_write_items(TransactItems=items(12))) == (
        "ValidationException"
    )
    ddb.transact_write_items(TransactItems=items(11))


def test_transact_two_operations_on_one_item_written_1_and_1_0_is_validation_exception(ddb):
    one, one_point_zero = {"N": "1"}, {"N": "1.0"}
    delete = {"Delete": {"TableName": "strict-n", "Key": {"pk": one_point_zero}}}
    code = _code(lambda: ddb.transact_write_items(TransactItems=[_put("strict-n", one), delete]))
    assert code == "ValidationException"
    other = {"Delete": {"TableName": "strict-n", "Key": {"pk": {"N": "1.5"}}}}
    ddb.transact_write_items(TransactItems=[_put("strict-n", one), other])


def test_transact_reused_token_with_other_parameters_is_idempotent_parameter_mismatch(ddb):
    def transact(key: str, token: str) -> Any:
        return ddb.transact_write_items(
            ClientRequestToken=token, TransactItems=[_put("strict-s", {"S": key})]
        )

    transact("tok-1", "token-a")
    ddb.delete_item(TableName="strict-s", Key={"pk": {"S": "tok-1"}})
    transact("tok-1", "token-a")  # the same request again: success, nothing written again
    assert "Item" not in ddb.get_item(TableName="strict-s", Key={"pk": {"S": "tok-1"}})
    assert _code(lambda: transact("tok-2", "token-a")) == "IdempotentParameterMismatchException"
    transact("tok-2", "token-b")
    assert "Item" in ddb.get_item(TableName="strict-s", Key={"pk": {"S": "tok-2"}})


def test_number_keys_are_one_item_and_come_back_normalized(ddb):
    ddb.put_item(TableName="strict-n", Item={"pk": {"N": "0100.00"}, "v": {"N": "2.50"}})
    item = ddb.get_item(TableName="strict-n", Key={"pk": {"N": "1E2"}})["Item"]
    assert item == {"pk": {"N": "100"}, "v": {"N": "2.5"}}
    ddb.put_item(TableName="strict-n", Item={"pk": {"N": "100"}, "v": {"N": "3"}})
    hundreds = [i for i in ddb.scan(TableName="strict-n")["Items"] if Decimal(i["pk"]["N"]) == 100]
    assert hundreds == [{"pk": {"N": "100"}, "v": {"N": "3"}}]


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("1.0", "1"),
        ("-0.50", "-0.5"),
        ("1E2", "100"),
        ("0.000", "0"),
        ("-0", "0"),
        ("1e-5", "0.00001"),
    ],
)
def test_normalized_number(written, stored):
    assert normalized_number(written) == stored


def test_item_over_400_kb_is_validation_exception(ddb):
    """400 KB is 409,600 bytes: names and values. moto refused past 405,000 (a gap the other
    way); the limit is DynamoDB's now."""
    fits = 400 * KIB - len("pk") - len("big") - len("v")

    def put(size: int) -> Any:
        return ddb.put_item(TableName="strict-s", Item={"pk": {"S": "big"}, "v": {"S": "x" * size}})

    assert _code(lambda: put(fits + 1)) == "ValidationException"
    put(fits)


def test_update_growing_an_item_past_400_kb_is_validation_exception(ddb):
    """moto's own rule, pinned."""
    ddb.put_item(TableName="strict-s", Item={"pk": {"S": "grow"}, "v": {"S": "x" * 300 * KIB}})

    def grow(size: int) -> Any:
        return ddb.update_item(
            TableName="strict-s",
            Key={"pk": {"S": "grow"}},
            UpdateExpression="SET w = :w",
            ExpressionAttributeValues={":w": {"S": "x" * size}},
        )

    assert _code(lambda: grow(200 * KIB)) == "ValidationException"
    grow(10 * KIB)


# --- properties --------------------------------------------------------------------------------

_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(body=st.text(max_size=20))
def test_sqs_takes_a_body_exactly_when_sendrules_says_it_does(sqs, queue, body):
    try:
        sqs.send_message(QueueUrl=queue, MessageBody=body)
        taken = True
    except ClientError:
        taken = False
    except UnicodeEncodeError:  # a lone surrogate: no client can send it
        return
    assert taken == sendrules.text_taken(body, to_topic=False)


@_SETTINGS
@given(
    number=st.one_of(
        st.decimals(allow_nan=False, allow_infinity=False).map(str),
        st.from_regex(r"-?[0-9]{1,45}(\.[0-9]{0,5})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    )
)
def test_sqs_takes_a_number_attribute_exactly_when_sendrules_says_it_does(sqs, queue, number):
    try:
        sqs.send_message(
            QueueUrl=queue,
            MessageBody="x",
            MessageAttributes={"n": {"DataType": "Number", "StringValue": number}},
        )
        taken = True
    except ClientError:
        taken = False
    assert taken == sendrules.number_text_taken(number)


@_SETTINGS
@given(name=st.text(alphabet=st.sampled_from("aA0_-. é"), min_size=1, max_size=12))
def test_sqs_takes_an_attribute_name_exactly_when_sendrules_says_it_does(sqs, queue, name):
    try:
        sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes={name: _string("v")})
        taken = True
    except ClientError:
        taken = False
    assert taken == sendrules.attribute_name_taken(name)


def test_a_deduplication_id_on_a_standard_queue_is_invalid_parameter_value(
    sqs: Any, queue: str, fifo: str
) -> None:
    """SendMessage: "MessageDeduplicationId ... applies only to FIFO queues"; SQS answers
    InvalidParameterValue ("not valid for this queue type"). A fair (standard) queue takes a
    group id, and a FIFO queue the deduplication id."""
    assert _code(
        lambda: sqs.send_message(QueueUrl=queue, MessageBody="m", MessageDeduplicationId="d-1")
    ) == ("InvalidParameterValue")
    batch = sqs.send_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "a", "MessageBody": "m", "MessageDeduplicationId": "d-1"},
            {"Id": "b", "MessageBody": "m", "MessageGroupId": "tenant-1"},
        ],
    )
    assert [(f["Id"], f["Code"]) for f in batch["Failed"]] == [("a", "InvalidParameterValue")]
    assert [s["Id"] for s in batch["Successful"]] == ["b"]
    sqs.send_message(QueueUrl=queue, MessageBody="m", MessageGroupId="tenant-1")
    sqs.send_message(
        QueueUrl=fifo, MessageBody="m", MessageGroupId="g", MessageDeduplicationId="d-1"
    )
