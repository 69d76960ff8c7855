"""once.testing's crash points leave DynamoDB as a killed Lambda would, and nothing of the
killed invocation runs afterwards.

Every check reads the item straight from the table (low-level ``GetItem``) or counts the
requests on the wire: what DynamoDB holds, not what the kit believes.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from once import constants as c
from once import make_handler
from once.testing import CRASH_POINTS
from tests.conftest import count_calls, plain

ORDER = {"orderId": "o-1", "qty": 2}
LEASE_MARGIN_S = 10
PREFIX = "kit"


class Business:
    """Business code that counts its runs and returns a result."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, int, bool]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        with self._lock:
            self.runs.append((attempt.key, attempt.fence, attempt.takeover))
        return {"shipped": body["orderId"], "fence": attempt.fence}


def stored(once_env: Any, key: str) -> dict[str, Any] | None:
    """The raw item of a business key, as DynamoDB holds it."""
    item = once_env.dynamodb.get_item(
        TableName=once_env.table_name,
        Key={c.ATTR_ID: {"S": f"{PREFIX}#{key}"}},
        ConsistentRead=True,
    ).get("Item")
    return plain(item) if item else None


@pytest.fixture
def business() -> Business:
    return Business()


@pytest.fixture
def handler(business: Business) -> Any:
    return make_handler(business, key="orderId", key_prefix=PREFIX, lease_margin_s=LEASE_MARGIN_S)


def test_a_crash_after_the_claim_leaves_the_claim_and_runs_no_business_code(
    once_env, handler, business
) -> None:
    before_ms = int(once_env.clock() * 1000)
    delivery = once_env.deliver(handler, [ORDER], crash="after_claim")

    assert business.runs == []
    assert delivery.killed_at == "after_claim"
    assert delivery.outcomes == [None]
    assert delivery.responses == [None]
    item = stored(once_env, "o-1")
    assert item is not None
    assert (item["status"], item["fence"], item["message_id"]) == (
        c.STATUS_IN_PROGRESS,
        1,
        delivery.message_ids[0],
    )
    assert c.ATTR_RESULT not in item and c.ATTR_ERROR not in item
    # The lease is the invocation's remaining time (the 30 s timeout) plus the margin.
    lease_ms = item["lease_expires_at"] - before_ms
    assert (once_env.timeout_s + LEASE_MARGIN_S) * 1000 - 1000 < lease_ms
    assert lease_ms <= (once_env.timeout_s + LEASE_MARGIN_S) * 1000 + 1000


def test_a_crash_after_the_business_code_leaves_the_record_in_progress(
    once_env, handler, business
) -> None:
    delivery = once_env.deliver(handler, [ORDER], crash="after_process")

    assert business.runs == [("o-1", 1, False)]
    item = stored(once_env, "o-1")
    assert item is not None
    assert (item["status"], item["fence"]) == (c.STATUS_IN_PROGRESS, 1)
    assert item["message_id"] == delivery.message_ids[0]
    assert c.ATTR_RESULT not in item
    assert item["lease_expires_at"] > int(once_env.clock() * 1000)


def test_a_crash_during_the_finalize_leaves_the_record_completed_and_the_message_unacknowledged(
    once_env, handler, business
) -> None:
    crashed = once_env.deliver(handler, [ORDER], crash="before_finalize")

    assert business.runs == [("o-1", 1, False)]
    item = stored(once_env, "o-1")
    assert item is not None
    assert (item["status"], item["fence"]) == (c.STATUS_COMPLETED, 1)
    assert json.loads(item["result"]) == {"shipped": "o-1", "fence": 1}
    assert c.ATTR_LEASE_EXPIRES_AT not in item

    # The batch response never left: SQS delivers the same message again.
    again = once_env.deliver(handler, [ORDER])
    assert again.message_ids == crashed.message_ids
    assert again.receive_counts == [2]
    assert again.outcomes == ["duplicate"]
    assert business.runs == [("o-1", 1, False)]


def test_a_crash_during_a_failed_finalize_leaves_the_record_failed(once_env) -> None:
    def broken(body: Any, attempt: Any) -> None:
        raise TimeoutError("the warehouse did not answer")

    handler = make_handler(broken, key="orderId", key_prefix=PREFIX)
    once_env.deliver(handler, [ORDER], crash="before_finalize")

    item = stored(once_env, "o-1")
    assert item is not None
    assert (item["status"], item["fence"]) == (c.STATUS_FAILED, 1)
    assert item["error"].startswith("TimeoutError")


@pytest.mark.parametrize(
    ("crash", "updates"),
    [("after_claim", 1), ("after_process", 1), ("before_finalize", 2)],
)
def test_nothing_of_a_killed_invocation_reaches_dynamodb_or_the_dlq_after_the_kill(
    once_env, business, crash: str, updates: int
) -> None:
    """A FIFO group runs in order: the first record dies, the rest of the batch (another
    key, and a malformed message that would be quarantined) never happens."""
    handler = make_handler(business, key="orderId", key_prefix=PREFIX)
    dynamodb = count_calls(once_env.dynamodb)
    quarantined: list[str] = []
    once_env.sqs.meta.events.register(
        "provide-client-params.sqs.SendMessage",
        lambda params, **_: quarantined.append(params["QueueUrl"]),
    )

    once_env.deliver(handler, [ORDER, {"orderId": "o-2"}, "not json"], crash=crash, fifo_group="g")

    assert dynamodb.count == {"UpdateItem": updates}
    assert once_env.dlq_url not in quarantined
    assert stored(once_env, "o-2") is None
    assert once_env.dlq_messages() == []
    assert [key for key, _, _ in business.runs] == ([] if crash == "after_claim" else ["o-1"])


@pytest.mark.parametrize("crash", CRASH_POINTS)
def test_a_kill_stops_the_records_running_beside_it_at_their_next_step(
    once_env, crash: str
) -> None:
    """Keys run concurrently; whichever reaches the point first kills the invocation, and
    every other record dies at its next write: none is finished unless its finalize was on
    the wire when the invocation died, and deliver returns only once no business code runs."""
    running = threading.Event()
    finished: list[str] = []

    def slow(body: dict[str, Any], attempt: Any) -> str:
        running.set()
        time.sleep(0.05)
        finished.append(attempt.key)
        return attempt.key

    handler = make_handler(slow, key="orderId", key_prefix=PREFIX, max_workers=4)
    keys = [f"o-{i}" for i in range(4)]
    delivery = once_env.deliver(handler, [{"orderId": k} for k in keys], crash=crash)

    snapshot = list(finished)
    time.sleep(0.1)
    assert finished == snapshot  # nothing of the dead invocation still runs
    assert delivery.killed_at == crash
    assert delivery.outcomes == [None] * 4
    items = [stored(once_env, k) for k in keys]
    completed = [i for i in items if i and i["status"] == c.STATUS_COMPLETED]
    if crash == "before_finalize":
        assert completed  # the killing finalize landed, and any other one on the wire with it
    else:
        assert completed == []
    assert all(i["status"] == c.STATUS_IN_PROGRESS for i in items if i and i not in completed)


def test_after_a_crash_the_takeover_runs_again_with_the_next_fence(
    once_env, handler, business
) -> None:
    once_env.deliver(handler, [ORDER], crash="after_process")

    assert once_env.deliver(handler, [ORDER]).outcomes == ["busy"]  # the dead lease still holds
    once_env.expire_leases()
    delivery = once_env.deliver(handler, [ORDER])

    assert delivery.outcomes == ["processed"]
    assert delivery.receive_counts == [3]
    assert business.runs == [("o-1", 1, False), ("o-1", 2, True)]
    record = once_env.record("o-1")
    assert record is not None
    assert (record.status, record.fence) == (c.STATUS_COMPLETED, 2)


def test_a_crash_point_never_reached_fails_the_test(once_env, handler) -> None:
    once_env.deliver(handler, [ORDER])
    with pytest.raises(AssertionError, match="never reached"):
        once_env.deliver(handler, [ORDER], crash="after_process")  # a duplicate: no claim


def test_an_unknown_crash_point_is_refused_before_anything_runs(once_env, handler) -> None:
    with pytest.raises(ValueError, match="after_claim, after_process, before_finalize"):
        once_env.deliver(handler, [ORDER], crash="during_process")
    assert stored(once_env, "o-1") is None


def test_deliver_returns_only_once_no_call_of_the_killed_invocation_is_in_flight(
    once_env,
) -> None:
    """The first claim back kills the invocation; the claims of the other keys were on the
    wire then and land, as they would in DynamoDB, but before deliver returns."""

    def slow_claims(request: Any, **_: Any) -> None:
        update = json.loads(request.body)
        if "ADD #fence" in update.get("UpdateExpression", ""):
            first = update["Key"][c.ATTR_ID]["S"].endswith("#o-0")
            time.sleep(0.05 if first else 0.3)

    once_env.dynamodb.meta.events.register("before-send.dynamodb.UpdateItem", slow_claims)
    handler = make_handler(Business(), key="orderId", key_prefix=PREFIX)
    keys = [f"o-{i}" for i in range(6)]

    once_env.deliver(handler, [{"orderId": k} for k in keys], crash="after_claim")

    landed = [k for k in keys if stored(once_env, k) is not None]
    time.sleep(0.5)
    assert [k for k in keys if stored(once_env, k) is not None] == landed
    assert len(landed) > 1  # the test saw claims on the wire at the kill


def test_a_quarantined_takeover_is_no_place_to_crash_after_the_business_code(
    once_env, business
) -> None:
    """Under on_expired_lease="quarantine" a takeover runs no business code: after_process
    does not fire there (its FAILED write and DLQ send go through), so it is never reached."""
    handler = make_handler(
        business, key="orderId", key_prefix=PREFIX, on_expired_lease="quarantine"
    )
    once_env.deliver(handler, [ORDER], crash="after_claim")
    once_env.expire_leases()

    with pytest.raises(AssertionError, match="never reached"):
        once_env.deliver(handler, [ORDER], crash="after_process")
    assert business.runs == []
    record = once_env.record("o-1")
    assert record is not None
    assert (record.status, record.error) == (c.STATUS_FAILED, c.REASON_LEASE_EXPIRED)
    assert [m.reason for m in once_env.dlq_messages()] == [c.REASON_LEASE_EXPIRED]


def _refused(attempt: Any) -> None:
    attempt.write(
        {
            "ConditionCheck": {
                "TableName": "accounts",
                "Key": {"id": {"S": "a-1"}},
                "ConditionExpression": "attribute_exists(id)",
            }
        }
    )


def _invalid(attempt: Any) -> None:
    for n in ("1", "2"):  # two Puts of one item: DynamoDB refuses the whole commit
        attempt.write(
            {"Put": {"TableName": "accounts", "Item": {"id": {"S": "a-1"}, "n": {"N": n}}}}
        )


@pytest.mark.parametrize("stage", [_refused, _invalid], ids=["write-refused", "commit-invalid"])
def test_a_crash_as_the_fail_after_a_commit_that_landed_nothing_lands_kills_at_once(
    once_env, stage: Any
) -> None:
    # The commit applied nothing, so the record is failed in a second write; the crash
    # point is that write. The kit used to count the business code's end twice here and
    # then waited its whole timeout for a record it believed still running.
    once_env.dynamodb.create_table(
        TableName="accounts",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )

    def debit(body: Any, attempt: Any) -> str:
        stage(attempt)
        return "never stored"

    handler = make_handler(debit, key="orderId", key_prefix=PREFIX)
    started = time.monotonic()
    delivery = once_env.deliver(handler, [ORDER], crash="before_finalize")

    assert delivery.killed_at == "before_finalize"
    assert time.monotonic() - started < once_env.timeout_s  # no wait for a phantom run
    item = stored(once_env, "o-1")
    assert item is not None and item["status"] == c.STATUS_FAILED
