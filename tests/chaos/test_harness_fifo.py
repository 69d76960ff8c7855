"""The harness on FIFO queues (DynamoDB Local): once keeps every invariant and each message
group's order; a consumer that ignores message groups is caught."""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from tests.chaos.rates import RATES


@pytest.fixture(scope="module")
def fifo_runs(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    done = chaos(
        300,
        seed=12,
        endpoints=endpoints,
        workers=3,
        rates=RATES,
        implementations=("once", "naive-unordered"),
        fifo=True,
        side_by_side=True,
        # Kept (pytest keeps its last temporary directories): a failure names it.
        history_dir=tmp_path_factory.mktemp("chaos-fifo"),
    )
    return {run.impl: run for run in done}


def test_once_keeps_every_invariant_and_each_group_s_order_on_a_fifo_queue(
    fifo_runs: dict[str, Run],
) -> None:
    once = fifo_runs["once"]
    assert once.deliveries >= 250, once.figures()
    assert "order_broken" in once.violations, once.figures()
    assert once.violations == dict.fromkeys(once.violations, 0), once.figures()
    assert once.lost == 0, once.figures()
    # Poison payments held their groups until SQS moved them to the DLQ.
    assert once.faults["workload_poison"] > 0, once.figures()


def test_the_harness_catches_a_fifo_consumer_that_ignores_message_groups(
    fifo_runs: dict[str, Run],
) -> None:
    control = fifo_runs["naive-unordered"]
    assert control.violations["order_broken"] > 0, control.figures()
