"""Zombies: an invocation whose lease ran out while its business code was still running.

The first invocation gets a tiny lease (50 ms remaining, no margin) and blocks in business
code; a redelivery takes the key over under the next fence and blocks in turn; a third
delivery finds the key busy. When the zombie wakes up, neither its complete nor its fail may
change the record: it stays the newer owner's, under the newer fence.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from once import PermanentError
from once import constants as c
from once.models import Outcome
from tests.conftest import failed_ids, message_ids, outcomes

ORDER = {"orderId": "o-1", "qty": 1}
WAIT_S = 5


class Gate:
    """Business code that blocks each fence until the test releases it."""

    def __init__(self, zombie_ending: Exception | None = None) -> None:
        self.entered = {1: threading.Event(), 2: threading.Event()}
        self.release = {1: threading.Event(), 2: threading.Event()}
        self.runs: list[tuple[int, bool]] = []
        self._zombie_ending = zombie_ending

    def __call__(self, body: Any, attempt: Any) -> str:
        self.runs.append((attempt.fence, attempt.takeover))
        self.entered[attempt.fence].set()
        assert self.release[attempt.fence].wait(WAIT_S)
        if attempt.fence == 1 and self._zombie_ending is not None:
            raise self._zombie_ending
        return f"done by fence {attempt.fence}"


@pytest.mark.parametrize(
    "zombie_ending",
    [
        None,
        RuntimeError("zombie broke"),
        PermanentError("zombie says permanent"),
    ],
    ids=["complete", "fail", "permanent-fail"],
)
def test_a_zombies_late_finalize_changes_nothing_and_a_third_delivery_is_busy(
    aws, once_handler, sqs_event, context, zombie_ending: Exception | None
) -> None:
    gate = Gate(zombie_ending)
    handler = once_handler(gate, lease_margin_s=0, min_remaining_ms=0)
    event = sqs_event([ORDER])  # SQS redelivers the same message

    with ThreadPoolExecutor(max_workers=2) as pool:
        zombie = pool.submit(outcomes, handler, event, context(remaining_ms=50))
        assert gate.entered[1].wait(WAIT_S)
        time.sleep(0.2)  # the zombie's lease runs out while it is still running

        takeover = pool.submit(handler, event, context(remaining_ms=60_000))
        assert gate.entered[2].wait(WAIT_S)
        held = aws.record("o-1")
        assert (held["status"], held["fence"]) == (c.STATUS_IN_PROGRESS, 2)

        third = sqs_event([ORDER])
        assert outcomes(handler, third, context(remaining_ms=60_000)) == [Outcome.BUSY]
        assert failed_ids(handler(third, context(remaining_ms=60_000))) == message_ids(third)

        gate.release[1].set()
        assert zombie.result(WAIT_S) == [Outcome.LEASE_LOST]
        assert aws.record("o-1") == held  # nothing overwritten: not the status, not the fence
        assert aws.dlq() == []  # a zombie's permanent error is not quarantined either

        gate.release[2].set()
        assert takeover.result(WAIT_S) == {"batchItemFailures": []}

    assert gate.runs == [(1, False), (2, True)]
    final = aws.record("o-1")
    assert (final["status"], final["fence"], final["owner"]) == (
        c.STATUS_COMPLETED,
        2,
        held["owner"],
    )
    assert final["result"] == '"done by fence 2"'
