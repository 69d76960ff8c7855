"""Records that share a business key and payload in one batch run once; the others follow
that outcome with no write of their own."""

from __future__ import annotations

from typing import Any

from once import PermanentError
from once import constants as c
from once.models import Outcome
from tests.conftest import (
    Calls,
    Spy,
    count_calls,
    failed_ids,
    message_ids,
    outcomes,
    store_client,
)

ORDER = {"orderId": "o-1", "qty": 1}


def test_copies_of_one_message_in_a_batch_run_once_and_are_all_acknowledged(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    calls: Calls = count_calls(store_client(handler))
    event = sqs_event([ORDER] * 5)

    assert outcomes(handler, event) == [Outcome.PROCESSED] + [Outcome.DUPLICATE] * 4

    assert len(spy.calls) == 1
    assert calls.count == {"UpdateItem": 2}  # the leader's claim and complete, nothing else
    calls.reset()
    assert handler(sqs_event([ORDER] * 5), None) == {"batchItemFailures": []}
    assert calls.count == {"UpdateItem": 1}  # one claim says duplicate for all five


def test_followers_of_a_failed_leader_are_all_reported_failed(aws, once_handler, sqs_event) -> None:
    def broken(body: Any, attempt: Any) -> None:
        raise RuntimeError("down")

    business = Spy(broken)
    event = sqs_event([ORDER, {"orderId": "o-2"}, ORDER, ORDER])
    response = once_handler(business)(event, None)

    ids = message_ids(event)
    assert sorted(failed_ids(response)) == sorted(ids)
    assert sorted(business.keys) == ["o-1", "o-2"]  # one call per key; they run concurrently


def test_followers_of_a_busy_leader_are_busy_too(aws, once_handler, spy, sqs_event, clock) -> None:
    from tests.unit.runtime.test_outcome_table import claim_elsewhere

    claim_elsewhere(aws, ORDER)
    event = sqs_event([ORDER] * 3)
    assert outcomes(once_handler(spy), event) == [Outcome.BUSY] * 3
    assert spy.calls == []


def test_followers_of_a_permanently_failed_leader_are_quarantined_each_with_its_own_copy(
    aws, once_handler, sqs_event
) -> None:
    def reject(body: Any, attempt: Any) -> None:
        raise PermanentError("no such item")

    business = Spy(reject)
    event = sqs_event([ORDER] * 3)

    assert once_handler(business)(event, None) == {"batchItemFailures": []}

    assert len(business.calls) == 1
    dead = aws.dlq()
    assert sorted(
        m["MessageAttributes"][c.QUARANTINE_ATTR_MESSAGE_ID]["StringValue"] for m in dead
    ) == sorted(message_ids(event))


def test_same_key_with_another_payload_in_the_same_batch_is_a_conflict(
    aws, once_handler, spy, sqs_event
) -> None:
    event = sqs_event([ORDER, ORDER | {"qty": 2}, ORDER, ORDER | {"qty": 2}])

    assert outcomes(once_handler(spy), event) == [
        Outcome.PROCESSED,
        Outcome.CONFLICT,
        Outcome.DUPLICATE,
        Outcome.CONFLICT,  # follows the conflicting copy: its own copy in the DLQ too
    ]

    assert len(spy.calls) == 1
    dead = aws.dlq()
    assert [m["MessageAttributes"][c.QUARANTINE_ATTR_REASON]["StringValue"] for m in dead] == [
        "CONFLICT",
        "CONFLICT",
    ]
    assert aws.record("o-1")["fence"] == 1
