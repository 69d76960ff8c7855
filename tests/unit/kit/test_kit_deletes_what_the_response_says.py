"""``once_env`` deletes what Lambda would delete: it decides from the response the shipped
callable returned, by Lambda's rule for a batch response (``once.batchresponse``), not from
once's own outcomes. A team's wrapper that drops once's response (returns ``None`` or ``{}``)
makes Lambda delete the whole batch on AWS, a failed record with it: the kit shows that, and
warns."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from once import make_handler
from once.testing import DroppedResponseWarning, OnceEnv

FAILING = {"orderId": "o-1", "fail": True}
FINE = {"orderId": "o-2"}


def business(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
    if body.get("fail"):
        raise ConnectionError("downstream is down")
    return {"orderId": body["orderId"]}


def _wrapped(returns: Any) -> Any:
    handler = make_handler(business, key="orderId")

    @functools.wraps(handler)
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        handler(event, context)
        return returns

    return lambda_handler


def _waiting(env: OnceEnv) -> int:
    attributes = env.sqs.get_queue_attributes(
        QueueUrl=env.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


@pytest.mark.parametrize("returns", [None, {}, {"batchItemFailures": []}])
def test_a_wrapper_that_drops_the_response_loses_the_failed_record_as_on_aws(returns) -> None:
    with OnceEnv(max_receive_count=2) as env:
        lambda_handler = _wrapped(returns)

        with pytest.warns(DroppedResponseWarning, match="deletes 1 message"):
            first = env.deliver(lambda_handler, [FAILING, FINE])

        assert first.outcomes == ["failed", "processed"]
        assert first.response == returns
        assert first.lost == [first.message_ids[0]]
        assert _waiting(env) == 0  # Lambda deleted the batch: nothing comes back
        with pytest.warns(DroppedResponseWarning):
            again = env.deliver(lambda_handler, [FAILING])
        # A new message (a producer's duplicate), not a redelivery: AWS never retries it.
        assert again.message_ids != first.message_ids[:1]
        assert again.receive_counts == [1]
        assert again.moved_to_dlq == []


def test_the_once_handler_itself_keeps_the_failed_record() -> None:
    with OnceEnv(max_receive_count=2) as env:
        handler = make_handler(business, key="orderId")

        first = env.deliver(handler, [FAILING, FINE])
        again = env.deliver(handler, [FAILING])

        assert first.lost == []
        assert again.message_ids == first.message_ids[:1]
        assert again.receive_counts == [2]
        assert again.moved_to_dlq == first.message_ids[:1]


def test_a_response_lambda_cannot_read_fails_the_whole_batch() -> None:
    """An ``itemIdentifier`` not in the batch: Lambda retries every message, the processed
    one too (it comes back as a duplicate)."""
    with OnceEnv() as env:
        lambda_handler = _wrapped({"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]})

        with pytest.warns(DroppedResponseWarning, match="retries the whole batch"):
            first = env.deliver(lambda_handler, [FINE])
        with pytest.warns(DroppedResponseWarning, match="cannot read"):
            again = env.deliver(lambda_handler, [FINE])

        assert first.lost == []
        assert again.message_ids == first.message_ids
        assert again.receive_counts == [2]
        assert again.outcomes == ["duplicate"]
