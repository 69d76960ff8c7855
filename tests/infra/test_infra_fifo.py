"""The example's FIFO variant (``-c fifo=true``): producers set the account as the message
group, so that each account's payments apply in order."""

from __future__ import annotations

import pytest

from infra.stages import settings_for


def test_the_fifo_variant_has_a_fifo_queue_and_a_fifo_dlq(local_fifo, local):
    for queue in (local_fifo.consumer.queue, local_fifo.consumer.dlq):
        assert local_fifo.props(queue)["FifoQueue"] is True
    for queue in (local.consumer.queue, local.consumer.dlq):
        assert "FifoQueue" not in local.props(queue)


def test_the_fifo_variant_is_the_same_stack_with_the_same_outputs(local_fifo, local):
    assert local_fifo.stack.stack_name == local.stack.stack_name == "Once-local"
    assert set(local_fifo.template["Outputs"]) == set(local.template["Outputs"])


def test_the_fifo_variant_polls_without_a_batching_window(local_fifo):
    _, mapping = local_fifo.one("AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["MaximumBatchingWindowInSeconds"] == 0
    assert mapping["Properties"]["BatchSize"] <= 10


def test_fifo_on_a_stage_with_a_batching_window_drops_the_window():
    assert settings_for("dev").max_batching_window_s == 1
    assert settings_for("dev", {"fifo": "true"}).max_batching_window_s == 0
    assert settings_for("dev", {"fifo": "false"}).fifo is False


def test_a_fifo_flag_that_is_not_a_boolean_is_refused():
    with pytest.raises(ValueError, match="context fifo='maybe': expected true or false"):
        settings_for("dev", {"fifo": "maybe"})
