"""The cost section (``proof/bench/cost.py``, run by ``python -m proof.bench.commit``): on
moto, in miniature, it measures what the protocols say a new message and a duplicate cost
(staged: 1 DynamoDB call each; two-phase: 2 and 1; an outbox adds its clear), and renders its
tables and plot; and its arithmetic prices what it measured. Timings are not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proof.bench import cost, cost_page, prices

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    docs = tmp_path_factory.mktemp("docs")
    results = docs / "commit.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.bench.commit",
            "--engine",
            "moto",
            "--scale",
            "smoke",
            "--parts",
            # Both parts, as make bench runs them: each counts write units on one session.
            "effects,cost",
            "--docs",
            str(docs),
            "--json",
            str(results),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(results.read_text()), docs


def test_staged_once_costs_one_dynamodb_call_per_new_message_and_per_duplicate(
    run: tuple[dict[str, Any], Path],
) -> None:
    counts = run[0]["cost"]["counts"]
    for variant in ("no staged write", "one staged write"):
        row = counts[f"once-staged|{variant}"]
        assert row["new"]["ddb_calls"] == 1
        assert row["duplicate"]["ddb_calls"] == 1
    outbox = counts["once-staged|outbox of one"]
    assert outbox["new"]["ddb_calls"] == 2  # the commit, then the outbox's clear
    assert outbox["new"]["sqs_calls"] == 1
    assert outbox["duplicate"]["ddb_calls"] == 1
    assert outbox["duplicate"]["sqs_calls"] == 0  # cleared: nothing owed, nothing re-sent
    assert outbox["owed_duplicate"]["sqs_calls"] == 1


def test_write_units_by_rule_are_counted_after_the_effects_part_counted_its_own(
    run: tuple[dict[str, Any], Path],
) -> None:
    counts = run[0]["cost"]["counts"]
    by_rule = {key: row["new"]["wcu_rules"] for key, row in counts.items()}
    assert by_rule["once-staged|no staged write"] == 1
    assert by_rule["once-staged|one staged write"] == 4  # a transaction bills each item twice
    assert by_rule["once|no staged write"] == 2
    assert by_rule["once|one staged write"] == 5


def test_two_phase_once_and_powertools_cost_two_calls_per_new_message(
    run: tuple[dict[str, Any], Path],
) -> None:
    counts = run[0]["cost"]["counts"]
    assert counts["once|no staged write"]["new"]["ddb_calls"] == 2
    assert counts["once|one staged write"]["new"]["ddb_operations"] == {
        "TransactWriteItems": 1,
        "UpdateItem": 1,
    }
    assert counts["once|outbox of one"]["new"]["ddb_calls"] == 3
    assert counts["once|no staged write"]["duplicate"]["ddb_calls"] == 1
    assert counts["powertools|no staged write"]["new"]["ddb_calls"] == 2
    # Powertools' business code writes and sends by itself.
    assert counts["powertools|one staged write"]["new"]["ddb_calls"] == 3
    assert counts["powertools|outbox of one"]["new"]["sqs_calls"] == 1


def test_the_cost_section_renders_its_tables_and_plot(run: tuple[dict[str, Any], Path]) -> None:
    result, docs = run
    page = (docs / "performance.md").read_text()
    for heading in ("## What a million messages cost", "### The outbox's clear"):
        assert heading in page
    assert prices.AS_OF in page
    for source in prices.SOURCES.values():
        assert source in page
    assert (docs / cost_page.PLOT).stat().st_size > 1000
    timed = result["cost"]["timing"]
    for consumer in cost.CONSUMERS:
        for variant in cost.VARIANTS:
            assert timed[f"{consumer}|{variant.label}"]["new"]["median_ms"] > 0


def _count(wcu: float, sqs_calls: float) -> dict[str, Any]:
    return {
        "new": {"wcu_reported": wcu, "wcu_rules": wcu, "rcu_reported": 0.0, "sqs_calls": sqs_calls}
    }


def test_a_bill_adds_dynamodb_lambda_and_sqs_at_the_listed_prices() -> None:
    parts = cost.bill(_count(wcu=1, sqs_calls=0), batch_ms=100.0)
    assert parts["dynamodb_writes"] == pytest.approx(prices.WRU_PER_MILLION)
    # 100 ms per batch of 10 at 0.5 GB: 0.005 GB-s per message.
    assert parts["lambda_duration"] == pytest.approx(0.005 * 1e6 * prices.LAMBDA_GB_SECOND)
    assert parts["lambda_requests"] == pytest.approx(prices.LAMBDA_REQUESTS_PER_MILLION / 10)
    # The event source mapping's receive and delete per batch of 10.
    assert parts["sqs"] == pytest.approx(0.2 * prices.SQS_REQUESTS_PER_MILLION)
    assert cost.total(parts) == pytest.approx(sum(parts[k] for k in cost.COMPONENTS))


def test_leaving_the_clear_out_costs_in_proportion_to_the_duplicate_rate() -> None:
    def counted(wcu: float, calls: float, sqs_calls: float = 0.0) -> dict[str, Any]:
        return {"wcu_rules": wcu, "ddb_calls": calls, "sqs_calls": sqs_calls}

    result = {
        "counts": {
            "once-staged|no staged write": {
                "new": counted(1, 1),
                "duplicate": counted(1, 1),
            },
            "once-staged|outbox of one": {
                "new": counted(2, 2, 1),
                "owed_duplicate": counted(2, 2, 1),
            },
            "once|no staged write": {"new": counted(2, 2), "duplicate": counted(1, 1)},
        },
        "timing": {
            "once|no staged write": {"duplicate": {"median_ms": 20.0}},
            "once-staged|no staged write": {"duplicate": {"median_ms": 40.0}},
            "calls_ms": {"clear": 10.0, "send": 10.0},
        },
    }
    trade = cost.clear_tradeoff(result)
    assert trade["clear_wru"] == 1 and trade["clear_calls"] == 1
    rates = trade["rates"]
    assert [r["rate"] for r in rates] == list(cost.DUPLICATE_RATES)
    for r in rates:
        assert r["once"] == pytest.approx(r["rate"] * trade["per_duplicate_usd"]["once"])
        assert r["keep"] == pytest.approx(trade["keep_usd"])
    even = trade["break_even"]["once"]
    assert even * trade["per_duplicate_usd"]["once"] == pytest.approx(trade["keep_usd"])
    assert "keeps the clear" in cost_page.conclusion(trade)
