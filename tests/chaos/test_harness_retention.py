"""The harness with a short record retention (DynamoDB Local): records expire and are swept
as DynamoDB's TTL does within the run, and once keeps every invariant."""

from __future__ import annotations

import pytest

from proof.chaos.harness import Endpoints, Run, chaos
from tests.chaos.rates import RATES, RETENTION_S


@pytest.fixture(scope="module")
def retention_run(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Run:
    (once,) = chaos(
        300,
        seed=13,
        endpoints=endpoints,
        workers=3,
        rates=RATES,
        implementations=("once",),
        retention_s=RETENTION_S,
        # Kept (pytest keeps its last temporary directories): a failure names it.
        history_dir=tmp_path_factory.mktemp("chaos-retention"),
    )
    return once


def test_once_keeps_every_invariant_while_its_records_expire_and_are_swept(
    retention_run: Run,
) -> None:
    figures = retention_run.figures()
    assert retention_run.faults["ttl_swept"] > 0, figures
    assert retention_run.violations == dict.fromkeys(retention_run.violations, 0), figures
    assert retention_run.lost == 0, figures
