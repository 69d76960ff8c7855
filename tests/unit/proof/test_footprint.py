"""The footprint benchmark measures both consumers' log output and memory in fresh
interpreters, and its page section renders from the result."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from proof.bench import footprint, footprint_page
from proof.bench.page import Page

BATCHES = (2, 5)


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    ticks: list[str] = []
    measured = footprint.run(runs=1, tick=ticks.append, batches=BATCHES)
    assert len(ticks) == footprint.steps(1)
    return measured


def _config(result: dict[str, Any], module: str, level: str) -> dict[str, Any]:
    return next(c for c in result["configs"] if c["module"] == module and c["level"] == level)


def test_every_configuration_has_a_row_per_batch_size(result: dict[str, Any]) -> None:
    assert result["runs"] == 1
    assert [c["label"] for c in result["configs"]] == [label for label, _, _ in footprint.CONFIGS]
    for config in result["configs"]:
        assert [b["batch"] for b in config["batches"]] == list(BATCHES)


def test_once_logs_one_line_per_record_at_info_and_none_at_warning(
    result: dict[str, Any],
) -> None:
    info = _config(result, "once_handler", "INFO")
    warning = _config(result, "once_handler", "WARNING")
    for loud, quiet in zip(info["batches"], warning["batches"], strict=True):
        assert loud["log_lines"] == loud["batch"]
        assert loud["log_bytes"] > 0
        assert loud["log_bytes_per_record"] == loud["log_bytes"] / loud["batch"]
        assert quiet["log_bytes"] < loud["log_bytes"]
        assert quiet["log_lines"] < loud["log_lines"]
        assert loud["emf_lines"] == quiet["emf_lines"] == 1
    assert '"message_id"' in info["sample_line"]
    assert warning["sample_line"] == ""


def test_line_counts_and_bytes_agree(result: dict[str, Any]) -> None:
    for config in result["configs"]:
        for batch in config["batches"]:
            for kind in ("log", "emf"):
                lines, size = batch[f"{kind}_lines"], batch[f"{kind}_bytes"]
                assert (lines == 0) == (size == 0)
                assert size >= lines  # every line has at least its newline


def test_peak_rss_is_measured_and_never_falls(result: dict[str, Any]) -> None:
    for config in result["configs"]:
        assert 0 < config["rss_before_mib"] <= config["rss_peak_mib"]
        assert config["rss_peak_mib_min"] <= config["rss_peak_mib"] <= config["rss_peak_mib_max"]


def test_the_section_and_goal_rows_render_from_the_result(result: dict[str, Any]) -> None:
    page = Page(Console(file=io.StringIO()))
    footprint_page.section(page, result)
    markdown = page.markdown()
    assert "## Footprint" in markdown
    assert "Log output per new record" in markdown
    assert f"Peak RSS around a batch of {BATCHES[-1]}" in markdown
    rows = footprint_page.goal_rows(result)
    assert rows[0][-1] == "measured"
    assert rows[1][-1] in ("met", "NOT met")
    assert all(len(row) == 5 for row in rows)
