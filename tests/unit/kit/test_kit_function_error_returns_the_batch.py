"""An invocation that raises returns every message of its batch to the queue in ``once_env``,
as SQS does after a function error (each comes back with a higher receive count, or moves to
the DLQ at ``maxReceiveCount``). Proved by the adversarial review of issue 44 (the kit forgot
them: a redelivery was a new message, and the DLQ stayed empty)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from once import make_handler
from once.testing import OnceEnv

ORDER = {"orderId": "o-1"}


def _raising_after_once(handler: Any, raises: list[bool]) -> Any:
    @functools.wraps(handler)
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        response = handler(event, context)
        if raises.pop(0):
            raise RuntimeError("the team's metrics flush failed after once answered")
        return response

    return lambda_handler


def test_a_message_whose_invocation_raised_comes_back_with_its_id_and_a_higher_count(
    once_env,
) -> None:
    handler = make_handler(lambda order, attempt: None, key="orderId")
    lambda_handler = _raising_after_once(handler, [True, False])

    with pytest.raises(RuntimeError):
        once_env.deliver(lambda_handler, [ORDER])
    again = once_env.deliver(lambda_handler, [ORDER])

    # On AWS: the same message, received a second time.
    assert again.receive_counts == [2], f"got a fresh message: {again.receive_counts}"


def test_a_message_whose_every_invocation_raises_reaches_the_dlq_by_the_redrive_policy() -> None:
    with OnceEnv(max_receive_count=2) as env:
        handler = make_handler(lambda order, attempt: None, key="orderId")
        lambda_handler = _raising_after_once(handler, [True, True])

        for _ in range(2):  # two receives, two function errors: maxReceiveCount used up
            with pytest.raises(RuntimeError):
                env.deliver(lambda_handler, [ORDER])

        # On AWS SQS moves the message to the DLQ after its second failed receive (the kit
        # plays that at settle, ``SourceQueue.settle``, for a message reported failed).
        assert [m.body for m in env.dlq_messages()] == ['{"orderId": "o-1"}'], (
            "the redrive policy never counted the failed receives"
        )
