"""once.testing delivers as SQS and Lambda do: real event records, redeliveries, FIFO
groups, one invocation per body on request, a clock for leases and retention, the DLQ as
it is, a test's own AWS mocks left alone, and clear errors for what cannot be delivered."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws

from once import PermanentError, make_handler
from once import constants as c
from once.models import Outcome
from once.testing import OnceEnv

ORDER = {"orderId": "o-1", "qty": 1}


class Business:
    """Business code that remembers every event record and attempt it saw."""

    def __init__(self) -> None:
        self.attempts: list[Any] = []

    def __call__(self, body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        if body.get("qty", 1) <= 0:
            raise PermanentError("qty must be positive")
        if body.get("fail"):
            raise ConnectionError("downstream is down")
        self.attempts.append(attempt)
        return {"orderId": body["orderId"]}


@pytest.fixture
def business() -> Business:
    return Business()


@pytest.fixture
def handler(business: Business) -> Any:
    return make_handler(business, key="orderId")


def test_outcomes_follow_the_bodies_and_failures_are_the_reported_message_ids(
    once_env, handler
) -> None:
    delivery = once_env.deliver(
        handler, [ORDER, ORDER, {"orderId": "o-2", "fail": True}, {"orderId": "o-3", "qty": 0}]
    )

    assert delivery.outcomes == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.FAILED,
        Outcome.QUARANTINED,
    ]
    assert delivery.outcomes == ["processed", "duplicate", "failed", "quarantined"]
    assert delivery.batch_item_failures == [delivery.message_ids[2]]
    assert delivery.response == {"batchItemFailures": [{"itemIdentifier": delivery.message_ids[2]}]}
    assert len(set(delivery.message_ids)) == 4  # two sends of one body are two messages


def test_results_carry_the_key_fence_and_takeover_of_each_body(once_env, handler) -> None:
    once_env.deliver(handler, [ORDER], crash="after_process")
    once_env.expire_leases()

    delivery = once_env.deliver(handler, [ORDER, "not json"])

    taken_over, bad = delivery.results
    assert taken_over is not None and bad is not None
    assert (taken_over.outcome, taken_over.key, taken_over.fence, taken_over.takeover) == (
        Outcome.PROCESSED,
        "o-1",
        2,
        True,
    )
    assert (bad.outcome, bad.reason) == (Outcome.QUARANTINED, c.REASON_INVALID_JSON)
    assert [r.message_id for r in delivery.results if r] == delivery.message_ids


def test_outcomes_do_not_depend_on_the_runtime_log(once_env, handler) -> None:
    """A team may silence or filter once's log lines; the kit reads the handler's results."""
    once_logger = logging.getLogger("once")
    quiet = logging.Filter("nothing")  # lets no record of "once" through
    once_logger.addFilter(quiet)
    try:
        delivery = once_env.deliver(handler, [ORDER, ORDER])
    finally:
        once_logger.removeFilter(quiet)

    assert delivery.outcomes == ["processed", "duplicate"]


def test_an_unacknowledged_message_comes_back_with_its_id_and_a_higher_receive_count(
    once_env, handler
) -> None:
    failing = {"orderId": "o-2", "fail": True}
    first = once_env.deliver(handler, [failing])
    second = once_env.deliver(handler, [failing, ORDER])
    done = once_env.deliver(handler, [ORDER])

    assert second.message_ids[0] == first.message_ids[0]
    assert second.receive_counts == [2, 1]
    # ORDER was acknowledged: sending it again is a new message (a producer's duplicate).
    assert done.message_ids != second.message_ids[1:]
    assert (done.receive_counts, done.outcomes) == ([1], ["duplicate"])


def test_records_are_what_lambda_hands_a_function(once_env, monkeypatch) -> None:
    seen: list[tuple[dict[str, Any], int]] = []
    handler = make_handler(lambda body, attempt: None, key="orderId")
    real_handle = type(handler).handle

    def spy(self: Any, event: dict[str, Any], context: Any) -> Any:
        seen.append((event, context.get_remaining_time_in_millis()))
        return real_handle(self, event, context)

    monkeypatch.setattr(type(handler), "handle", spy)
    once_env.deliver(handler, [ORDER, "raw text"])
    once_env.deliver(handler, [{"orderId": "o-9"}], fifo_group="g-1")

    [(standard, remaining), (fifo, _)] = seen
    first, raw = standard["Records"]
    assert json.loads(first["body"]) == ORDER
    assert raw["body"] == "raw text"
    assert first["eventSource"] == "aws:sqs"
    assert first["eventSourceARN"].startswith("arn:aws:sqs:")
    queue_arn = once_env.sqs.get_queue_attributes(
        QueueUrl=once_env.sqs.get_queue_url(QueueName="once-source")["QueueUrl"],
        AttributeNames=["QueueArn"],
    )["Attributes"]["QueueArn"]
    assert first["eventSourceARN"] == queue_arn  # a queue that exists in the mock
    assert first["attributes"]["ApproximateReceiveCount"] == "1"
    assert "MessageGroupId" not in first["attributes"]
    assert once_env.timeout_s * 1000 - 2000 < remaining <= once_env.timeout_s * 1000
    [grouped] = fifo["Records"]
    assert grouped["eventSourceARN"].endswith(".fifo")
    assert grouped["attributes"]["MessageGroupId"] == "g-1"
    assert grouped["attributes"]["MessageDeduplicationId"]
    assert grouped["attributes"]["SequenceNumber"].isdigit()


def test_a_fifo_group_stops_at_its_first_failure(once_env, handler, business) -> None:
    delivery = once_env.deliver(
        handler, [ORDER, {"orderId": "o-2", "fail": True}, {"orderId": "o-3"}], fifo_group="g"
    )

    assert delivery.outcomes == ["processed", "failed", "skipped"]
    assert [a.key for a in business.attempts] == ["o-1"]


def test_same_batch_false_makes_one_invocation_per_body(once_env, handler) -> None:
    delivery = once_env.deliver(handler, [ORDER, ORDER], same_batch=False)

    assert delivery.outcomes == ["processed", "duplicate"]
    assert delivery.responses == [{"batchItemFailures": []}] * 2
    with pytest.raises(ValueError, match=r"read \.responses"):
        _ = delivery.response


def test_a_lease_is_held_until_expire_leases_and_retention_passes_with_advance(
    once_env, handler, business
) -> None:
    once_env.deliver(handler, [ORDER], crash="after_claim")
    once_env.advance(once_env.timeout_s)  # the timeout alone is not enough: the margin
    assert once_env.deliver(handler, [ORDER]).outcomes == ["busy"]
    once_env.expire_leases()
    assert once_env.deliver(handler, [ORDER]).outcomes == ["processed"]
    assert [(a.fence, a.takeover) for a in business.attempts] == [(2, True)]

    assert once_env.deliver(handler, [ORDER]).outcomes == ["duplicate"]
    once_env.advance(handler.retention_s + 1)  # the record expired: treated as absent
    assert once_env.deliver(handler, [ORDER]).outcomes == ["processed"]
    assert [(a.fence, a.takeover) for a in business.attempts][-1] == (3, False)
    with pytest.raises(ValueError, match="forward"):
        once_env.advance(-1)


def test_record_returns_the_stored_record_of_a_business_key(once_env, handler) -> None:
    assert once_env.record("o-1") is None
    delivery = once_env.deliver(handler, [ORDER])

    record = once_env.record("o-1")
    assert record is not None
    assert record.id == f"{handler.key_prefix}#o-1"
    assert (record.status, record.fence, record.message_id) == (
        c.STATUS_COMPLETED,
        1,
        delivery.message_ids[0],
    )
    assert json.loads(record.result or "") == {"orderId": "o-1"}


def test_dlq_messages_are_the_quarantined_bodies_with_their_reasons(once_env, handler) -> None:
    delivery = once_env.deliver(handler, ["{not json", {"orderId": "o-5", "qty": 0}])

    messages = once_env.dlq_messages()
    assert [(m.body, m.reason) for m in messages] == [
        ("{not json", "INVALID_JSON"),
        (json.dumps({"orderId": "o-5", "qty": 0}), "PERMANENT_ERROR"),
    ]
    assert [m.original_message_id for m in messages] == delivery.message_ids
    assert messages[1].error == "PermanentError: qty must be positive"
    assert messages[1].json() == {"orderId": "o-5", "qty": 0}
    assert once_env.dlq_messages() == messages  # reading leaves them in the DLQ


def test_the_environment_is_set_for_make_handler_and_restored_after(monkeypatch) -> None:
    from once.testing import OnceEnv

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv(c.ENV_SERVICE_NAME, raising=False)
    before = dict(os.environ)
    with OnceEnv() as env:
        assert os.environ[c.ENV_TABLE_NAME] == env.table_name
        assert os.environ[c.ENV_DLQ_URL] == env.dlq_url
        assert os.environ[c.ENV_SERVICE_NAME]
        assert "AWS_ENDPOINT_URL" not in os.environ  # the clients stay on moto
        handler = make_handler(lambda body, attempt: "ok", key="orderId")
        assert env.deliver(handler, [ORDER]).outcomes == ["processed"]
    assert dict(os.environ) == before


def test_a_tests_own_mock_and_tables_are_untouched(handler) -> None:
    """A team's test keeps its own table in the same mock, before and after once_env."""
    from once.testing import OnceEnv

    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(
            TableName="warehouse",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "sku", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "sku", "AttributeType": "S"}],
        )
        dynamodb.put_item(TableName="warehouse", Item={"sku": {"S": "s-1"}})
        with OnceEnv() as env:
            assert env.deliver(handler, [ORDER]).outcomes == ["processed"]
            # Inside: the team's table and ours live in one mock.
            assert dynamodb.get_item(TableName="warehouse", Key={"sku": {"S": "s-1"}})["Item"]
            with mock_aws():  # a mock the test starts after ours changes nothing either
                assert env.record("o-1") is not None
        assert dynamodb.get_item(TableName="warehouse", Key={"sku": {"S": "s-1"}})["Item"]
        assert env.table_name in dynamodb.list_tables()["TableNames"]


def test_a_handler_without_a_key_prefix_is_refused_with_what_to_do(
    once_env, business, monkeypatch
) -> None:
    monkeypatch.delenv(c.ENV_SERVICE_NAME)
    with pytest.raises(ValueError, match=f"key_prefix= .*{c.ENV_SERVICE_NAME}"):
        once_env.deliver(make_handler(business, key="orderId"), [ORDER])


@pytest.mark.parametrize(
    ("bodies", "error", "match"),
    [
        ([ORDER, b"bytes"], TypeError, "body 1 is a bytes: pass a dict .* or a str"),
        ([["a", "list"]], TypeError, "body 0 is a list"),
        ([42], TypeError, "body 0 is a int"),
        (ORDER, TypeError, "a list of bodies"),
        ("o-1", TypeError, "a list of bodies"),
        ([], ValueError, "at least one body"),
    ],
    ids=["bytes", "list", "int", "dict-not-in-a-list", "str-not-in-a-list", "empty"],
)
def test_bodies_that_cannot_be_sent_are_refused(
    once_env, handler, bodies: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        once_env.deliver(handler, bodies)
    assert once_env.record("o-1") is None


def test_deliver_refuses_what_make_handler_did_not_make(once_env, business) -> None:
    with pytest.raises(TypeError, match=r"once\.make_handler"):
        once_env.deliver(business, [ORDER])


@pytest.fixture
def ran_before(aws, business, sqs_event) -> Any:
    """A handler that an earlier test already ran, on the suite's own table."""
    handler = make_handler(business, key="orderId")
    handler(sqs_event([{"orderId": "o-0"}]), None)
    assert handler.table_name != "once-idempotency"
    return handler


def test_a_handler_configured_before_the_test_runs_on_the_kits_table_across_a_crash(
    ran_before, once_env, business
) -> None:
    """Its frozen configuration is re-read in once_env's environment, and it stays on one
    table across the new store a crash brings."""
    handler = ran_before
    once_env.deliver(handler, [ORDER], crash="after_process")
    once_env.expire_leases()
    assert once_env.deliver(handler, [ORDER]).outcomes == ["processed"]

    assert [(a.key, a.fence) for a in business.attempts] == [("o-0", 1), ("o-1", 1), ("o-1", 2)]
    item = once_env.dynamodb.get_item(
        TableName=once_env.table_name, Key={c.ATTR_ID: {"S": f"{handler.key_prefix}#o-1"}}
    )["Item"]
    assert item[c.ATTR_FENCE] == {"N": "2"}


def test_a_handler_with_a_dlq_that_does_not_exist_reports_the_record_failed(
    once_env, business
) -> None:
    missing = once_env.dlq_url.rsplit("/", 1)[0] + "/no-such-dlq"
    handler = make_handler(business, key="orderId", dlq_url=missing)

    delivery = once_env.deliver(handler, ["not json"])

    assert delivery.outcomes == ["failed"]  # not acknowledged: nothing is lost
    assert delivery.batch_item_failures == delivery.message_ids
    assert once_env.dlq_messages() == []


def test_messages_are_real_messages_of_the_source_queue(once_env, handler, caplog) -> None:
    """Real message ids and receipt handles: the retry backoff's visibility change is
    accepted by the queue, and an acknowledged message is deleted from it."""
    sent: list[Any] = []

    def record_response(parsed: Any, **_: Any) -> None:
        sent.append(parsed)

    failing = {"orderId": "o-2", "fail": True}
    with caplog.at_level(logging.WARNING):
        first = once_env.deliver(handler, [failing, ORDER])
        handler._visibility._client.meta.events.register(
            "after-call.sqs.ChangeMessageVisibilityBatch", record_response
        )
        again = once_env.deliver(handler, [failing])

    assert first.outcomes == ["failed", "processed"]
    assert again.message_ids == first.message_ids[:1]
    assert [r.getMessage() for r in caplog.records if "visibility" in r.getMessage()] == []
    [response] = sent
    assert response.get("Failed", []) == [] and len(response["Successful"]) == 1
    url = once_env.sqs.get_queue_url(QueueName="once-source")["QueueUrl"]
    counts = once_env.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    # o-1 was acknowledged and deleted; o-2 is the one message left, in flight
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "0"
    assert counts["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"


# --- the function timeout, message attributes, messages the kit did not send ---------------


def test_a_run_past_the_function_timeout_is_reported_timed_out_not_processed(business) -> None:
    # Lambda kills an invocation at its timeout: no finalize, no batch response, the
    # message back after its visibility timeout, a takeover once the lease has run out.
    def slow(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        env.advance(2)  # two seconds of work, in the kit's time
        return business(body, attempt)

    with OnceEnv(timeout_s=1) as env:
        handler = make_handler(slow, key="orderId")
        timed_out = env.deliver(handler, [ORDER])

        assert timed_out.timed_out
        assert timed_out.killed_at == "timeout"
        assert timed_out.outcomes == [None]
        assert timed_out.responses == [None]
        assert env.record("o-1").status == c.STATUS_IN_PROGRESS  # its finalize never landed

        env.expire_leases()
        again = env.deliver(handler, [ORDER])
        assert again.receive_counts == [2]  # the same message, back
        assert again.timed_out  # still too slow for a one-second function


def test_a_run_slower_than_its_timeout_on_the_wall_clock_is_timed_out_too(business) -> None:
    def slow(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        time.sleep(1.2)  # under load a sleep only lasts longer
        return business(body, attempt)

    with OnceEnv(timeout_s=1) as env:
        delivery = env.deliver(make_handler(slow, key="orderId"), [ORDER])

    assert delivery.timed_out
    assert delivery.outcomes == [None]


def test_a_run_within_its_timeout_is_not_timed_out(handler) -> None:
    with OnceEnv(timeout_s=1) as env:
        delivery = env.deliver(handler, [ORDER])

    assert not delivery.timed_out
    assert delivery.outcomes == [Outcome.PROCESSED]


def test_message_attributes_reach_the_handler_and_the_dlq(once_env, business) -> None:
    seen: list[dict[str, Any]] = []
    handler = make_handler(business, key="orderId")
    original = handler.handle

    def spying(event: dict[str, Any], context: Any) -> Any:
        seen.extend(record["messageAttributes"] for record in event["Records"])
        return original(event, context)

    handler.handle = spying
    once_env.deliver(
        handler,
        [ORDER, {"orderId": "o-2", "qty": 0}],
        message_attributes=[{"tenant": "t-1", "priority": 5}, {"blob": b"\x00\x01"}],
    )

    assert seen[0]["tenant"] == {
        "stringValue": "t-1",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }
    assert (seen[0]["priority"]["dataType"], seen[0]["priority"]["stringValue"]) == ("Number", "5")
    assert seen[1]["blob"]["binaryValue"] == "AAE="  # base64, as Lambda hands it over
    [quarantined] = once_env.dlq_messages()
    assert quarantined.reason == c.REASON_PERMANENT_ERROR
    assert "blob" in quarantined.attributes  # carried into the DLQ


def test_a_body_with_other_attributes_is_another_message(once_env, handler) -> None:
    failing = {"orderId": "o-1", "fail": True}
    first = once_env.deliver(handler, [failing], message_attributes={"attempt": "1"})
    other = once_env.deliver(handler, [failing], message_attributes={"attempt": "2"})
    again = once_env.deliver(handler, [failing], message_attributes={"attempt": "1"})

    assert other.message_ids != first.message_ids
    assert again.message_ids == first.message_ids
    assert again.receive_counts == [2]


def test_attributes_are_one_mapping_for_all_or_one_per_body(once_env, handler) -> None:
    with pytest.raises(ValueError, match="one per body"):
        once_env.deliver(handler, [ORDER, ORDER], message_attributes=[{"a": "1"}])
    with pytest.raises(TypeError, match="pass a str, a number or bytes"):
        once_env.deliver(handler, [ORDER], message_attributes={"a": ["list"]})


def test_messages_a_test_sends_itself_are_delivered_as_they_wait(once_env, handler) -> None:
    for order in ("o-1", "o-2"):
        once_env.sqs.send_message(
            QueueUrl=once_env.queue_url,
            MessageBody=json.dumps({"orderId": order}),
            MessageAttributes={"source": {"DataType": "String", "StringValue": "checkout"}},
        )

    delivery = once_env.deliver_waiting(handler)

    assert sorted(delivery.outcomes) == [Outcome.PROCESSED, Outcome.PROCESSED]
    assert delivery.receive_counts == [1, 1]
    with pytest.raises(ValueError, match="no message is waiting"):
        once_env.deliver_waiting(handler)


def test_a_message_failed_on_its_last_receive_is_moved_to_the_dlq(handler) -> None:
    failing = {"orderId": "o-1", "fail": True}
    with OnceEnv(max_receive_count=2) as env:
        first = env.deliver(handler, [failing], message_attributes={"tenant": "t-1"})
        last = env.deliver(handler, [failing], message_attributes={"tenant": "t-1"})
        after = env.deliver(handler, [failing], message_attributes={"tenant": "t-1"})
        [moved] = env.dlq_messages()

    assert first.moved_to_dlq == []
    assert last.moved_to_dlq == last.message_ids == first.message_ids
    assert moved.attributes == {"tenant": "t-1"}  # as sent: nothing of once's
    assert after.message_ids != first.message_ids  # a new message: a producer's copy


def test_a_fifo_batch_larger_than_lambda_hands_over_is_refused(once_env, handler) -> None:
    with pytest.raises(ValueError, match="at most 10 records"):
        once_env.deliver(handler, [{"orderId": f"o-{i}"} for i in range(11)], fifo_group="g")


def test_waiting_fifo_messages_come_ten_at_a_time_as_lambda_hands_them_over(
    once_env, handler
) -> None:
    for index in range(12):
        once_env.sqs.send_message(
            QueueUrl=once_env.fifo_queue_url,
            MessageBody=json.dumps({"orderId": f"o-{index}"}),
            MessageGroupId="g",
            MessageDeduplicationId=str(index),
        )

    first = once_env.deliver_waiting(handler, fifo=True)  # the group's first ten, in order
    rest = once_env.deliver_waiting(handler, fifo=True)  # the group unlocked: the last two

    assert [len(first.outcomes), len(rest.outcomes)] == [10, 2]
    assert len(first.responses) == 1
    assert first.outcomes + rest.outcomes == [Outcome.PROCESSED] * 12


def test_every_service_business_code_calls_reaches_the_mock_whatever_the_shell_sets(
    monkeypatch,
) -> None:
    # A shell set up for a real endpoint per service must not send the outbox's SNS client
    # (or business code's own) past moto.
    for service in ("SNS", "S3", "SQS", "DYNAMODB"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", "http://127.0.0.1:9")

    with OnceEnv() as env:
        topic = boto3.client("sns").create_topic(Name="notices")["TopicArn"]

        def notify(body: dict[str, Any], attempt: Any) -> str:
            attempt.send(topic, {"orderId": body["orderId"]})
            boto3.client("s3").list_buckets()
            return "sent"

        delivery = env.deliver(make_handler(notify, key="orderId"), [ORDER])
        assert delivery.outcomes == [Outcome.PROCESSED]

    assert os.environ["AWS_ENDPOINT_URL_SNS"] == "http://127.0.0.1:9"  # put back after
