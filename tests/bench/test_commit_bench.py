"""The atomic-effects benchmark (``python -m proof.bench.commit``) end to end on moto, in
miniature: its tables, its section of the page, and the protocol's call counts it reports
(a new key costs the claim and one commit whatever it stages, plus the outbox's sends and
one clear; a duplicate costs 1, plus what it owes). Timings are not asserted: only that
every variant was timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proof.bench import atomic, commit_page
from proof.bench.__main__ import KEPT_SECTIONS, _write_page

ROOT = Path(__file__).resolve().parents[2]


def test_the_commit_bench_counts_two_calls_per_new_key_and_one_per_duplicate(
    tmp_path: Path,
) -> None:
    results = tmp_path / "commit.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.bench.commit",
            "--engine",
            "moto",
            "--scale",
            "smoke",
            "--docs",
            str(tmp_path),
            "--json",
            str(results),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert '"level"' not in done.stdout  # the runtime's log lines are not in the tables
    data = json.loads(results.read_text())
    counts = {row["variant"]: row for row in data["counts"]}
    assert list(counts) == [v.label for v in atomic.VARIANTS]
    for variant in atomic.VARIANTS:
        row = counts[variant.label]
        new, duplicate = row["new"], row["duplicate"]
        commit_op = "TransactWriteItems" if variant.writes else "UpdateItem"
        clears = 1 if variant.messages else 0
        # claim + commit (+ the clear of a sent outbox), nothing else on DynamoDB
        assert new["ddb_calls"] == 2 + clears
        assert new["ddb_operations"].get(commit_op, 0) >= 1
        assert new["ddb_operations"].get("TransactWriteItems", 0) == (1 if variant.writes else 0)
        assert new["sqs_calls"] == (
            new["sqs_operations"].get("SendMessage", 0)
            + new["sqs_operations"].get("SendMessageBatch", 0)
        )
        assert (new["sqs_calls"] > 0) == bool(variant.messages)
        assert duplicate["ddb_calls"] == 1
        assert duplicate["sqs_calls"] == 0
        # Write units by DynamoDB's rules: the claim 1; the plain completion 1; a commit 2 per
        # item (the record's units with its outbox, the ledger's small items 1 each); the
        # clear as large as the record it clears. A duplicate's refused claim: 1.
        record = -(-row.get("owed_record_bytes", row["record_bytes"]) // 1024)
        if not variant.writes:
            assert new["wcu_rules"] == 2
        else:
            assert new["wcu_rules"] == 1 + 2 * (record + variant.writes) + clears * record
        assert duplicate["wcu_rules"] == 1
        if variant.messages:
            # The next delivery of a key that owes its outbox: the refused claim, the
            # sends, one clear; the one after it is a plain duplicate.
            assert row["owed"]["ddb_calls"] == 2
            assert row["owed_sent"]["ddb_calls"] == 2
            assert row["owed_sent"]["sqs_calls"] == new["sqs_calls"]
            assert row["after_owed_sent"]["ddb_calls"] == 1
            assert row["after_owed_sent"]["sqs_calls"] == 0
            assert row["owed_record_bytes"] > row["record_bytes"]
            assert row["owed_sent"]["wcu_rules"] == 2 * record  # refused claim + clear
        else:
            assert "owed" not in row
    timed = {(r["batch"], r["variant"]) for r in data["rows"]}
    sizes = atomic.plan("smoke").reps
    assert timed == {(size, v.label) for size in sizes for v in atomic.VARIANTS}
    for row in data["rows"]:
        assert len(row["samples"]) == row["reps"] == sizes[row["batch"]]
        assert row["median_ms"] > 0 and row["cpu_ms_per_record"] > 0
        assert 0 <= row["other_cpu_share"] <= 1
    page = (tmp_path / "performance.md").read_text()
    assert page.count(commit_page.BEGIN) == page.count(commit_page.END) == 1
    assert "## Atomic effects" in page
    for variant in atomic.VARIANTS:
        assert f"| {variant.label} |" in page


def test_the_section_replaces_its_last_run_and_survives_a_rewrite_of_the_page(
    tmp_path: Path,
) -> None:
    page = tmp_path / "performance.md"
    page.write_text(f"# Performance\n\nmain\n\n{KEPT_SECTIONS}\n\n## Retry backoff\n\nkept\n")

    commit_page.write_section(tmp_path, "## Atomic effects\n\nfirst run")
    commit_page.write_section(tmp_path, "## Atomic effects\n\nsecond run")
    _write_page(tmp_path, "# Performance\n\nmain, measured again\n")

    text = page.read_text()
    assert text.count("## Atomic effects") == 1
    assert "second run" in text and "first run" not in text
    assert text.index("main, measured again") < text.index(KEPT_SECTIONS)
    assert (
        text.index(KEPT_SECTIONS) < text.index("## Retry backoff") < text.index(commit_page.BEGIN)
    )


def test_a_page_without_kept_sections_gets_the_marker_before_the_section(tmp_path: Path) -> None:
    commit_page.write_section(tmp_path, "## Atomic effects\n\nfigures")

    text = (tmp_path / "performance.md").read_text()
    assert text.index(KEPT_SECTIONS) < text.index(commit_page.BEGIN) < text.index(commit_page.END)
