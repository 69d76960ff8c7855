"""FIFO batches (records carry ``MessageGroupId``): in order within a group; after a failure
the rest of that group is reported failed without running, while other groups go on."""

from __future__ import annotations

import time
from typing import Any

from once import PermanentError
from once import constants as c
from once.models import Outcome
from tests.conftest import Calls, count_calls, failed_ids, message_ids, outcomes, store_client


class Recorder:
    """Business code that notes the order it ran in and fails where told."""

    def __init__(self, fail: set[str] | None = None, permanent: set[str] | None = None) -> None:
        self.order: list[str] = []
        self._fail = fail or set()
        self._permanent = permanent or set()

    def __call__(self, body: Any, attempt: Any) -> str:
        key = body["orderId"]
        self.order.append(key)
        if key in self._fail:
            raise RuntimeError("transient")
        if key in self._permanent:
            raise PermanentError("permanent")
        return "ok"


def orders(*keys: str) -> list[dict[str, Any]]:
    return [{"orderId": key} for key in keys]


def test_records_of_one_group_run_in_the_order_sqs_delivered_them(
    aws, once_handler, sqs_event
) -> None:
    business = Recorder()
    keys = [f"o-{i}" for i in range(8)]
    event = sqs_event(orders(*keys), fifo_groups=["g"] * 8)

    assert once_handler(business, max_workers=8)(event, None) == {"batchItemFailures": []}
    assert business.order == keys


def test_after_a_failure_the_rest_of_its_group_is_reported_failed_without_running(
    aws, once_handler, sqs_event
) -> None:
    business = Recorder(fail={"a2"})
    event = sqs_event(
        orders("a1", "b1", "a2", "b2", "a3", "b3", "a4"),
        fifo_groups=["A", "B", "A", "B", "A", "B", "A"],
    )
    handler = once_handler(business)
    calls: Calls = count_calls(store_client(handler))

    assert outcomes(handler, event) == [
        Outcome.PROCESSED,
        Outcome.PROCESSED,
        Outcome.FAILED,
        Outcome.PROCESSED,
        Outcome.SKIPPED,
        Outcome.PROCESSED,
        Outcome.SKIPPED,
    ]

    assert [k for k in business.order if k.startswith("a")] == ["a1", "a2"]
    assert [k for k in business.order if k.startswith("b")] == ["b1", "b2", "b3"]
    assert aws.record("a3") is None and aws.record("a4") is None  # never claimed
    assert calls.count == {"UpdateItem": 2 * 5}  # claim + finalize for the five that ran

    ids = message_ids(event)  # SQS redelivers the same batch: a2 fails again
    assert failed_ids(handler(event, None)) == [ids[2], ids[4], ids[6]]
    retry = sqs_event(orders("a2", "a3", "a4"), fifo_groups=["A"] * 3)
    assert once_handler(Recorder())(retry, None) == {"batchItemFailures": []}


def test_a_quarantined_record_does_not_stop_its_group(aws, once_handler, sqs_event) -> None:
    business = Recorder(permanent={"a2"})
    event = sqs_event(
        [{"orderId": "a1"}, "not json", {"orderId": "a2"}, {"orderId": "a3"}], fifo_groups=["A"] * 4
    )

    response = once_handler(business, dlq_url=aws.fifo_dlq_url)(event, None)

    assert response == {"batchItemFailures": []}
    assert business.order == ["a1", "a2", "a3"]
    assert len(aws.dlq(aws.fifo_dlq_url)) == 2


def test_a_failed_quarantine_stops_the_group_like_any_failure(aws, once_handler, sqs_event) -> None:
    business = Recorder()
    event = sqs_event([{"orderId": "a1"}, "not json", {"orderId": "a2"}], fifo_groups=["A"] * 3)

    failed = failed_ids(once_handler(business, dlq_url=None)(event, None))

    assert failed == message_ids(event)[1:]
    assert business.order == ["a1"]


def test_a_quarantined_fifo_record_keeps_its_group_and_is_deduplicated_by_its_message_id(
    aws, once_handler, sqs_event
) -> None:
    event = sqs_event(["not json"], fifo_groups=["group-7"])
    once_handler(Recorder(), dlq_url=aws.fifo_dlq_url)(event, None)

    [dead] = aws.dlq(aws.fifo_dlq_url)
    assert dead["Attributes"]["MessageGroupId"] == "group-7"
    assert dead["Attributes"]["MessageDeduplicationId"] == message_ids(event)[0]
    assert dead["Body"] == "not json"


def test_two_messages_sharing_a_deduplication_id_both_reach_the_fifo_dlq(
    aws, once_handler, sqs_event
) -> None:
    # A producer that sets the deduplication id to the business id, or content-based
    # deduplication of equal bodies: two messages, one deduplication id, five minutes apart.
    first = sqs_event(["not json"], fifo_groups=["A"])
    second = sqs_event(["not json"], fifo_groups=["A"])
    shared = first["Records"][0]["attributes"]["MessageDeduplicationId"]
    second["Records"][0]["attributes"]["MessageDeduplicationId"] = shared
    handler = once_handler(Recorder(), dlq_url=aws.fifo_dlq_url)

    assert handler(first, None) == {"batchItemFailures": []}
    assert handler(second, None) == {"batchItemFailures": []}

    dead = aws.dlq(aws.fifo_dlq_url)
    originals = {m["MessageAttributes"][c.QUARANTINE_ATTR_MESSAGE_ID]["StringValue"] for m in dead}
    assert originals == {message_ids(first)[0], message_ids(second)[0]}


def test_a_redelivered_message_quarantined_again_is_in_the_fifo_dlq_once(
    aws, once_handler, sqs_event
) -> None:
    event = sqs_event(["not json"], fifo_groups=["A"])
    handler = once_handler(Recorder(), dlq_url=aws.fifo_dlq_url)

    handler(event, None)
    handler(event, None)  # the acknowledgment was lost: SQS delivers the same message again

    assert len(aws.dlq(aws.fifo_dlq_url)) == 1


def test_a_fair_queue_record_goes_to_its_standard_dlq_without_a_deduplication_id(
    aws, once_handler, sqs_event
) -> None:
    # Standard queues take MessageGroupId (fair queues); a deduplication id is FIFO-only.
    event = sqs_event(["not json"], fifo_groups=["tenant-1"], queue="orders")
    handler = once_handler(Recorder())
    sent: list[dict[str, Any]] = []
    client = handler.processor._quarantine._client
    client.meta.events.register(
        "provide-client-params.sqs.SendMessage", lambda params, **_: sent.append(dict(params))
    )

    assert handler(event, None) == {"batchItemFailures": []}

    [request] = sent
    assert "MessageDeduplicationId" not in request
    [dead] = aws.dlq()
    assert dead["Attributes"]["MessageGroupId"] == "tenant-1"


def test_a_duplicate_inside_a_group_follows_its_leader_without_running(
    aws, once_handler, sqs_event
) -> None:
    business = Recorder()
    event = sqs_event(orders("a1", "a1", "a2"), fifo_groups=["A"] * 3)

    assert outcomes(once_handler(business), event) == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PROCESSED,
    ]
    assert business.order == ["a1", "a2"]


def test_copies_of_one_key_in_two_groups_of_a_batch_run_once_and_follow_their_leader(
    aws, once_handler, sqs_event
) -> None:
    ran: list[str] = []

    def slow(body: Any, attempt: Any) -> str:
        ran.append(body["orderId"])
        if body["orderId"] == "k":
            time.sleep(0.3)  # the other group reaches its copy while this claim is live
        return "ok"

    event = sqs_event(orders("k", "k", "b2", "a2"), fifo_groups=["A", "B", "B", "A"])
    handler = once_handler(slow, max_workers=4)

    assert outcomes(handler, event) == [
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PROCESSED,
        Outcome.PROCESSED,
    ]
    assert sorted(ran) == ["a2", "b2", "k"]
    assert ran.index("k") < ran.index("a2")  # within a group, order still holds


def test_a_failed_leader_stops_the_group_of_its_copy_in_another_group_too(
    aws, once_handler, sqs_event
) -> None:
    business = Recorder(fail={"k"})
    event = sqs_event(orders("k", "a2", "k", "b2", "c1"), fifo_groups=["A", "A", "B", "B", "C"])

    assert outcomes(once_handler(business), event) == [
        Outcome.FAILED,
        Outcome.SKIPPED,
        Outcome.FAILED,  # follows its leader: not run, not done
        Outcome.SKIPPED,
        Outcome.PROCESSED,
    ]
    assert sorted(business.order) == ["c1", "k"]
