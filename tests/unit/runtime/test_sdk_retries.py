"""The outcome-table row "an SDK retry of my own write: success".

A write lands in DynamoDB, its response is lost on the way back (the connection closes), and
botocore's standard retry sends the very same request again. Its condition now fails on the
item it wrote itself; the store must read that as success, for claim, complete and fail.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError
from moto.core.models import botocore_stubber

from once import PermanentError
from once import constants as c
from once.models import Outcome
from tests.conftest import Calls, count_calls, outcomes, store_client
from tests.unit.runtime.test_outcome_table import claim_elsewhere

ORDER = {"orderId": "o-1", "qty": 1}

#: Which of the three transitions an UpdateItem request is, by its update expression.
WRITES = {
    "claim": lambda update: "ADD #fence" in update,
    "complete": lambda update: "#status = :completed" in update,
    "fail": lambda update: "#status = :failed" in update,
}


def lose_first_response(client: Any, write: str) -> list[str]:
    """Apply the first ``write`` for real, then raise as if its response were lost."""
    attempts: list[str] = []

    def hook(request: Any, event_name: str, **_: Any) -> None:
        update = json.loads(request.body).get("UpdateExpression", "")
        if not WRITES[write](update):
            return
        attempts.append(update)
        if len(attempts) == 1:
            botocore_stubber(event_name=event_name, request=request)  # it lands...
            raise ConnectionClosedError(endpoint_url=request.url)  # ...the answer does not

    client.meta.events.register("before-send.dynamodb.UpdateItem", hook)
    return attempts


def test_a_claim_retried_by_the_sdk_after_it_landed_is_mine(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    attempts = lose_first_response(store_client(handler), "claim")

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]

    assert len(attempts) == 2  # the same claim went out twice
    assert [attempt.fence for _, attempt in spy.calls] == [1]
    record = aws.record("o-1")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)


def test_a_retried_claim_that_took_over_an_expired_lease_still_says_takeover(
    aws, once_handler, spy, sqs_event, clock
) -> None:
    claim_elsewhere(aws, ORDER, clock=clock, lease_ms=1_000)  # crashed mid-flight
    clock.advance(2)
    handler = once_handler(spy, clock=clock)
    attempts = lose_first_response(store_client(handler), "claim")

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]

    assert len(attempts) == 2  # the takeover landed, its answer was lost, the retry is mine
    [(_, attempt)] = spy.calls
    assert (attempt.fence, attempt.takeover) == (2, True)


def test_a_retried_claim_of_a_new_key_is_no_takeover(aws, once_handler, spy, sqs_event) -> None:
    handler = once_handler(spy)
    lose_first_response(store_client(handler), "claim")

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]

    [(_, attempt)] = spy.calls
    assert (attempt.fence, attempt.takeover) == (1, False)


def test_a_claim_retried_after_it_took_a_failed_record_is_mine(
    aws, once_handler, sqs_event
) -> None:
    runs: list[int] = []

    def flaky(body: Any, attempt: Any) -> str:
        runs.append(attempt.fence)
        if len(runs) == 1:
            raise RuntimeError("first try")
        return "ok"

    handler = once_handler(flaky)
    handler(sqs_event([ORDER]), None)
    attempts = lose_first_response(store_client(handler), "claim")

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert len(attempts) == 2
    assert runs == [1, 2]
    assert aws.record("o-1")["fence"] == 2


def test_a_complete_retried_by_the_sdk_after_it_landed_is_a_success(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    attempts = lose_first_response(store_client(handler), "complete")
    event = sqs_event([ORDER])

    assert outcomes(handler, event) == [Outcome.PROCESSED]

    assert len(attempts) == 2
    record = aws.record("o-1")
    assert (record["status"], record["fence"]) == (c.STATUS_COMPLETED, 1)
    assert handler(event, None) == {"batchItemFailures": []}  # and a redelivery is a duplicate
    assert len(spy.calls) == 1


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RuntimeError("transient"), Outcome.FAILED),
        (PermanentError("permanent"), Outcome.QUARANTINED),
    ],
    ids=["transient", "permanent"],
)
def test_a_fail_retried_by_the_sdk_after_it_landed_is_a_success(
    aws, once_handler, sqs_event, error: Exception, expected: Outcome
) -> None:
    def broken(body: Any, attempt: Any) -> None:
        raise error

    handler = once_handler(broken)
    attempts = lose_first_response(store_client(handler), "fail")

    # FAILED, not LEASE_LOST: the fail was ours; a permanent error still goes to the DLQ.
    assert outcomes(handler, sqs_event([ORDER])) == [expected]

    assert len(attempts) == 2
    record = aws.record("o-1")
    assert (record["status"], record["fence"]) == (c.STATUS_FAILED, 1)
    assert len(aws.dlq()) == (1 if expected is Outcome.QUARANTINED else 0)


def test_a_lost_response_costs_one_extra_call_on_the_wire(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    # Registered first on the same event, so it sees the attempt whose answer is lost.
    calls: Calls = count_calls(store_client(handler), "before-send.dynamodb.UpdateItem")
    lose_first_response(store_client(handler), "complete")

    handler(sqs_event([ORDER]), None)

    assert calls.count == {"UpdateItem": 3}
