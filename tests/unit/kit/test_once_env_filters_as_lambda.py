"""``once_env`` with the mapping's filters deletes what Lambda's event filtering deletes: a
message no filter keeps is removed from the queue, never handed to the handler, never in
the DLQ ("For Amazon SQS, if a message doesn't satisfy your filter criteria, Lambda
automatically removes the message from the queue",
https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html). A message a
filter keeps runs as ever: one without its key still goes to the DLQ as ``INVALID_KEY``.

The filters are given as ``OnceConsumer(filters=)`` takes them, to ``OnceEnv(filters=)`` or
to the fixture's ``once_env.filters``; ones Lambda would refuse are refused with the
construct's reasons (``once.event_filters``)."""

from __future__ import annotations

from typing import Any

import pytest

from once import make_handler
from once.testing import OnceEnv

ORDERS_ONLY = [{"body": {"type": ["order"]}}]
ORDER = {"type": "order", "orderId": "o-1"}
REFUND = {"type": "refund", "refundId": "r-1"}

ran: list[dict[str, Any]] = []


def ship(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
    ran.append(body)
    return {"shipped": attempt.key}


handler = make_handler(ship, key="orderId")


@pytest.fixture(autouse=True)
def _nothing_ran() -> None:
    ran.clear()


def _left_in_queue(env: OnceEnv) -> int:
    attributes = env.sqs.get_queue_attributes(
        QueueUrl=env.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def test_a_message_no_filter_keeps_is_deleted_never_invoked_never_in_the_dlq() -> None:
    with OnceEnv(filters=ORDERS_ONLY) as env:
        delivery = env.deliver(handler, [REFUND])

        assert delivery.filtered_out == delivery.message_ids
        assert delivery.outcomes == [None]
        assert delivery.responses == []  # Lambda never invokes with an empty batch
        assert ran == []
        assert env.dlq_messages() == []
        assert _left_in_queue(env) == 0


def test_a_kept_message_without_its_key_still_goes_to_the_dlq_as_invalid_key() -> None:
    with OnceEnv(filters=ORDERS_ONLY) as env:
        delivery = env.deliver(handler, [{"type": "order"}])

        assert delivery.filtered_out == []
        assert delivery.outcomes == ["quarantined"]
        assert [q.reason for q in env.dlq_messages()] == ["INVALID_KEY"]


def test_one_batch_hands_over_only_what_a_filter_keeps() -> None:
    with OnceEnv(filters=ORDERS_ONLY) as env:
        delivery = env.deliver(handler, [ORDER, REFUND, "not json"])

        assert delivery.outcomes == ["processed", None, None]
        assert delivery.filtered_out == delivery.message_ids[1:]
        assert ran == [ORDER]
        assert len(delivery.responses) == 1
        assert env.dlq_messages() == []  # the malformed body was filtered, not quarantined
        assert _left_in_queue(env) == 0


def test_without_filters_every_message_is_handed_over_as_before() -> None:
    with OnceEnv() as env:
        delivery = env.deliver(handler, [REFUND])

        assert env.filters is None
        assert delivery.filtered_out == []
        assert delivery.outcomes == ["quarantined"]  # no orderId: INVALID_KEY, as today
        assert [q.reason for q in env.dlq_messages()] == ["INVALID_KEY"]


def test_the_fixture_takes_filters_once_entered(once_env: OnceEnv) -> None:
    once_env.filters = ORDERS_ONLY

    delivery = once_env.deliver(handler, [ORDER, REFUND])

    assert once_env.filters == ({"body": {"type": ["order"]}},)
    assert delivery.outcomes == ["processed", None]
    once_env.filters = None
    assert once_env.deliver(handler, [REFUND]).outcomes == ["quarantined"]


def test_a_plain_string_body_under_a_json_pattern_is_deleted() -> None:
    """SQS's table: "Plain string | Valid JSON | Lambda drops the message", and the other
    way round (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs-filtering.html)."""
    plain = [{"body": [{"prefix": "ORDER:"}]}]
    with OnceEnv(filters=[{"body": {"orderId": [{"exists": False}]}}]) as env:
        assert env.deliver(handler, ["ORDER:o-1"]).outcomes == [None]
    with OnceEnv(filters=plain) as env:
        assert env.deliver(handler, [ORDER]).outcomes == [None]
        assert env.deliver(handler, ["ORDER:o-1"]).outcomes == ["quarantined"]  # kept: no JSON


def test_a_filtered_message_is_gone_and_its_body_again_is_a_new_message() -> None:
    with OnceEnv(filters=ORDERS_ONLY, max_receive_count=2) as env:
        first = env.deliver(handler, [REFUND])
        again = env.deliver(handler, [REFUND])

        assert again.message_ids != first.message_ids
        assert again.receive_counts == [1]
        assert again.moved_to_dlq == []


def test_what_waits_in_the_queue_is_filtered_too() -> None:
    with OnceEnv(filters=ORDERS_ONLY) as env:
        for body in ('{"type": "refund"}', '{"type": "order", "orderId": "o-9"}'):
            env.sqs.send_message(QueueUrl=env.queue_url, MessageBody=body)

        delivery = env.deliver_waiting(handler)

        assert sorted(map(str, delivery.outcomes)) == ["None", "processed"]
        assert len(delivery.filtered_out) == 1
        assert _left_in_queue(env) == 0


def test_a_crash_point_behind_a_filter_is_never_reached() -> None:
    with OnceEnv(filters=ORDERS_ONLY) as env, pytest.raises(AssertionError) as never:
        env.deliver(handler, [REFUND], crash="after_process")
    assert "every message filtered out" in str(never.value)


@pytest.mark.parametrize(
    ("filters", "says"),
    [
        ([{"messageAttributes": {"type": {"stringValue": ["order"]}}}],
         "names 'messageAttributes'"),
        ([{"body": {"path": [{"wildcard": "*/lib/*"}]}}], "uses 'wildcard'"),
        ([{"body": {"n": [i]}} for i in range(11)], "11 filters"),
        ([], "filters=[]"),
    ],
)  # fmt: skip
def test_filters_lambda_would_refuse_are_refused_as_the_construct_refuses_them(filters, says):
    with pytest.raises(ValueError, match="filters refused") as refused:
        OnceEnv(filters=filters)
    assert says in str(refused.value)
