"""Retry backoff through the visibility timeout: a record reported failed comes back after
``min(max, base * 2**(n-1))`` s, a BUSY one no later than its holder's lease ends (+1 s),
set with ChangeMessageVisibilityBatch on the source queue. A change that fails loses
nothing. The decisions row by row, then the calls on moto."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from once import make_handler
from once.backoff import Backoff, source_queue_url
from tests.conftest import ACCOUNT, REGION, failed_ids, message_ids
from tests.unit.runtime.test_outcome_table import claim_elsewhere

# --- decisions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("receive_count", "expected"),
    [(0, 2), (1, 2), (2, 4), (3, 8), (8, 256), (9, 300), (10_000, 300)],
)
def test_the_delay_doubles_with_each_receive_up_to_the_maximum(
    receive_count: int, expected: int
) -> None:
    assert Backoff(2, 300).delay_s(receive_count) == expected


@pytest.mark.parametrize(
    ("receive_count", "holder_remaining_ms", "expected"),
    [
        (9, 20, 2),  # the holder finishes 20 ms later: back in 2 s, not 300
        (9, 100_000, 101),  # the lease's end, plus one second
        (1, 100_000, 2),  # the backoff, when it is shorter
        (9, -5_000, 1),  # the lease ended already (a clock race): soon
        (9, None, 300),  # no lease on the record: the backoff
    ],
)
def test_a_busy_record_comes_back_no_later_than_the_holders_lease_ends(
    receive_count: int, holder_remaining_ms: int | None, expected: int
) -> None:
    assert Backoff(2, 300).busy_delay_s(receive_count, holder_remaining_ms) == expected


@pytest.mark.parametrize(("base_s", "max_s"), [(0, 300), (-1, 300), (10, 5), (2, 43_201)], ids=str)
def test_a_backoff_sqs_cannot_apply_is_refused(spy, base_s: int, max_s: int) -> None:
    with pytest.raises(ValueError, match="backoff"):
        make_handler(spy, key="orderId", backoff_base_s=base_s, backoff_max_s=max_s)


@pytest.mark.parametrize(
    ("endpoint", "arn", "expected"),
    [
        (
            "https://sqs.us-east-1.amazonaws.com",
            "arn:aws:sqs:us-east-1:123456789012:orders",
            "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
        ),
        (
            "http://127.0.0.1:4566/",
            "arn:aws:sqs:us-east-1:123456789012:orders.fifo",
            "http://127.0.0.1:4566/123456789012/orders.fifo",
        ),
        (
            "https://sqs.cn-north-1.amazonaws.com.cn",
            "arn:aws-cn:sqs:cn-north-1:123456789012:orders",
            "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/orders",
        ),
    ],
    ids=["aws", "local-endpoint", "china"],
)
def test_the_source_queue_url_is_built_from_the_arn_on_the_clients_endpoint(
    endpoint: str, arn: str, expected: str
) -> None:
    assert source_queue_url(endpoint, arn) == expected


def test_an_arn_that_is_not_a_queue_is_refused() -> None:
    with pytest.raises(ValueError, match="not an SQS queue ARN"):
        source_queue_url("https://sqs.us-east-1.amazonaws.com", "arn:aws:sns:us-east-1:1:t")


# --- on moto ------------------------------------------------------------------------------


def received(aws: Any, queue: str, bodies: list[str], receives: int = 1) -> dict[str, Any]:
    """Send the bodies to a real queue and receive them ``receives`` times: a Lambda event
    of the last receive, with real receipt handles and receive counts."""
    url = aws.sqs.create_queue(QueueName=queue, Attributes={"VisibilityTimeout": "300"})["QueueUrl"]
    for body in bodies:
        aws.sqs.send_message(QueueUrl=url, MessageBody=body)
    for _ in range(receives):
        messages = aws.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=0
        )["Messages"]
    aws.sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 300}
            for i, m in enumerate(messages)
        ],
    )
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}",
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


def changes(handler: Any) -> list[dict[str, Any]]:
    """Every ChangeMessageVisibilityBatch request the handler's SQS client sends."""
    sent: list[dict[str, Any]] = []
    client = handler.processor._quarantine._client
    client.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibilityBatch",
        lambda params, **_: sent.append(dict(params)),
    )
    return sent


def visible(aws: Any, queue: str) -> list[str]:
    url = aws.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    messages = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [m["MessageId"] for m in messages]


def fail_some(body: Any, attempt: Any) -> str:
    if body.get("fail"):
        raise RuntimeError("downstream unavailable")
    return "ok"


def test_a_failed_record_comes_back_after_the_backoff_not_the_visibility_timeout(
    aws, once_handler
) -> None:
    event = received(aws, "orders", ['{"orderId": "o-1", "fail": true}', '{"orderId": "o-2"}'])
    handler = once_handler(fail_some, backoff_base_s=1)
    sent = changes(handler)

    response = handler(event, None)

    assert failed_ids(response) == [message_ids(event)[0]]
    [request] = sent
    assert request["QueueUrl"] == aws.sqs.get_queue_url(QueueName="orders")["QueueUrl"]
    assert [(e["ReceiptHandle"], e["VisibilityTimeout"]) for e in request["Entries"]] == [
        (event["Records"][0]["receiptHandle"], 1)  # only the record reported failed
    ]
    assert visible(aws, "orders") == []
    time.sleep(1.2)
    assert visible(aws, "orders") == [message_ids(event)[0]]  # not after 300 s


def test_the_delay_grows_with_the_receive_count(aws, once_handler) -> None:
    event = received(aws, "orders", ['{"orderId": "o-1", "fail": true}'], receives=4)
    assert event["Records"][0]["attributes"]["ApproximateReceiveCount"] == "4"
    handler = once_handler(fail_some)
    sent = changes(handler)

    handler(event, None)

    assert [e["VisibilityTimeout"] for e in sent[0]["Entries"]] == [16]


def test_a_busy_record_comes_back_when_the_holders_lease_ends(
    aws, once_handler, spy, clock
) -> None:
    event = received(aws, "orders", ['{"orderId": "o-1"}'], receives=6)  # d(6) = 64 s
    body = {"orderId": "o-1"}
    claim_elsewhere(aws, body, clock=clock, lease_ms=5_000)
    clock.advance(1)
    handler = once_handler(spy, clock=clock)
    sent = changes(handler)

    assert failed_ids(handler(event, None)) == message_ids(event)

    assert [e["VisibilityTimeout"] for e in sent[0]["Entries"]] == [5]  # 4 s left, +1
    assert spy.calls == []


def test_a_failed_visibility_change_loses_nothing(aws, once_handler, caplog) -> None:
    event = received(
        aws, "orders", ['{"orderId": "o-1", "fail": true}', '{"orderId": "o-2"}'], receives=2
    )
    handler = once_handler(fail_some)

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "Change")

    handler.processor._quarantine._client.meta.events.register(
        "before-call.sqs.ChangeMessageVisibilityBatch", refuse
    )

    response = handler(event, None)

    assert failed_ids(response) == [message_ids(event)[0]]  # still reported: SQS redelivers
    assert any("visibility change failed" in r.getMessage() for r in caplog.records)


def test_a_refused_entry_loses_nothing(aws, once_handler, sqs_event, caplog) -> None:
    # A receipt handle the queue no longer knows: SQS refuses that entry, not the call.
    event = sqs_event([{"orderId": "o-1", "fail": True}])
    aws.sqs.create_queue(QueueName="orders")
    handler = once_handler(fail_some)

    assert failed_ids(handler(event, None)) == message_ids(event)
    assert any("visibility change refused" in r.getMessage() for r in caplog.records)


def test_more_failures_than_one_call_takes_are_changed_ten_at_a_time(
    aws, once_handler, sqs_event
) -> None:
    event = sqs_event([{"orderId": f"o-{i}", "fail": True} for i in range(12)])
    handler = once_handler(fail_some)
    sent = changes(handler)

    assert len(failed_ids(handler(event, None))) == 12
    assert [len(request["Entries"]) for request in sent] == [10, 2]


def test_with_backoff_off_the_queues_timeout_applies(aws, once_handler) -> None:
    event = received(aws, "orders", ['{"orderId": "o-1", "fail": true}'])
    handler = once_handler(fail_some, backoff_max_s=None)
    client = handler.processor._quarantine._client
    sent: list[Any] = []
    client.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibilityBatch", lambda **kw: sent.append(kw)
    )

    assert failed_ids(handler(event, None)) == message_ids(event)
    assert sent == []


def test_an_acknowledged_batch_changes_nothing(aws, once_handler, spy, sqs_event) -> None:
    handler = once_handler(spy)
    sent = changes(handler)
    assert handler(sqs_event([{"orderId": "o-1"}]), None) == {"batchItemFailures": []}
    assert sent == []


def test_a_record_without_a_readable_receive_count_waits_as_a_first_receive(
    aws, once_handler, sqs_event
) -> None:
    event = sqs_event([{"orderId": "o-1", "fail": True}, {"orderId": "o-2", "fail": True}])
    del event["Records"][0]["attributes"]["ApproximateReceiveCount"]
    event["Records"][1]["attributes"]["ApproximateReceiveCount"] = "many"
    handler = once_handler(fail_some)
    sent = changes(handler)

    assert len(failed_ids(handler(event, None))) == 2
    assert [e["VisibilityTimeout"] for e in sent[0]["Entries"]] == [2, 2]


def test_no_visibility_change_is_sent_when_the_invocation_is_about_to_time_out(
    aws, once_handler, context, caplog
) -> None:
    event = received(aws, "orders", ['{"orderId": "o-1", "fail": true}'])
    ran: list[bool] = []

    def slow_failure(body: Any, attempt: Any) -> None:
        ran.append(True)  # business code used up the invocation's time, then failed
        raise RuntimeError("downstream unavailable")

    handler = once_handler(slow_failure, min_remaining_ms=500)
    sent = changes(handler)

    response = handler(event, context(lambda: 300 if ran else 60_000))

    assert failed_ids(response) == message_ids(event)  # still reported: SQS redelivers
    assert sent == []
    assert any("visibility change skipped" in r.getMessage() for r in caplog.records)


def test_the_runtimes_aws_calls_give_up_after_seconds_not_a_minute(aws, once_handler) -> None:
    handler = once_handler(fail_some)
    for client in (handler.processor._store._client, handler.processor._quarantine._client):
        config = client.meta.config
        assert config.connect_timeout <= 5
        assert config.read_timeout <= 5
        assert config.retries["mode"] == "standard"


class _Unreachable:
    """A record store whose every claim fails at once: each record of a batch is FAILED
    without a DynamoDB call."""

    def claim(self, *_: Any, **__: Any) -> None:
        raise ConnectionError("DynamoDB unreachable")


def test_the_time_left_is_checked_before_each_visibility_call_not_once_per_batch(
    aws, once_handler, sqs_event, context, caplog
) -> None:
    # 300 failed records need 30 calls; each takes 50 ms of the invocation's 1,000 ms left.
    left_ms = [1_000]
    left_after_each_call: list[int] = []
    handler = once_handler(fail_some, min_remaining_ms=500)
    handler.bind(store=_Unreachable())

    def takes_50_ms(**_: Any) -> None:
        left_ms[0] -= 50
        left_after_each_call.append(left_ms[0])

    handler.processor._quarantine._client.meta.events.register(
        "before-call.sqs.ChangeMessageVisibilityBatch", takes_50_ms
    )
    event = sqs_event([{"orderId": f"o-{i}"} for i in range(300)])

    response = handler(event, context(lambda: left_ms[0]))

    assert len(failed_ids(response)) == 300  # every one still reported: SQS redelivers
    # The batch response keeps its 500 ms: no call ran into them, and calls stopped there.
    assert min(left_after_each_call) >= 500
    assert len(left_after_each_call) == 10
    [skipped] = [r for r in caplog.records if "visibility change skipped" in r.getMessage()]
    assert skipped.records == 200
