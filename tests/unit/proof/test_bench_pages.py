"""The page's cold start goal and the tuning subsection render from their saved results."""

from __future__ import annotations

import json
from pathlib import Path

from proof.bench import coldstart_page, tuning


def _first(total: float) -> dict[str, float]:
    return {
        "import_ms_median": total / 2,
        "first_ms_median": total / 2,
        "total_ms_median": total,
        "total_ms_min": total - 1,
        "total_ms_max": total + 1,
        "cpu_ms_median": total,
        "runs": 3,
    }


def test_the_cold_start_goal_is_once_over_powertools_first_record() -> None:
    cold = {
        "imports": {"once": {"median_ms": 100.0}, "powertools": {"median_ms": 200.0}},
        "first_record": {"once": _first(150.0), "powertools": _first(300.0)},
    }
    rows = coldstart_page.goal_rows(cold)
    assert rows[1][1] == "150 / 300 ms = 0.50"
    assert rows[1][-1] == "met"
    cold["first_record"]["once"] = _first(250.0)
    assert coldstart_page.goal_rows(cold)[1][-1] == "NOT met"


def test_the_snapstart_row_is_once_over_powertools_after_the_emulated_restore() -> None:
    cold = {
        "imports": {"once": {"median_ms": 100.0}, "powertools": {"median_ms": 200.0}},
        "snapshot": {"once": _first(17.0), "powertools": _first(20.0)},
    }
    [_, row] = coldstart_page.goal_rows(cold)
    assert row[0].startswith("SnapStart, emulated")
    assert row[1:] == ["17 / 20 ms = 0.85", "", "≤ 0.6", "NOT met"]


def test_the_tuning_subsection_renders_every_saved_run(tmp_path: Path) -> None:
    assert tuning.section(tmp_path) is None
    cell = {"cpu_ms": 2.0, "cpu_ms_min": 1.9, "cpu_ms_max": 2.1}
    run = {
        "botocore": "1.2.3",
        "python": "3.11.7",
        "measured_at": "today",
        "load": {"start": [1.0, 1.0, 1.0], "end": [2.0, 2.0, 2.0]},
        "cpu": [
            {"calls": "engine", "batch": 10, "level": "INFO", "before": cell, "after": cell},
            {"calls": "canned", "batch": 1, "level": "INFO", "before": cell, "after": cell},
        ],
        "cold": {"before": _first(300), "after": _first(250), "powertools": _first(280)},
    }
    (tmp_path / tuning.RESULT).write_text(
        json.dumps({"runs": [run, run | {"botocore": "1.0.0"}], "notes": "What changed."})
    )
    page = tuning.section(tmp_path)
    assert page is not None
    assert page.count("| DynamoDB Local | 10 | INFO | 2.00 (1.90-2.10)") == 2
    assert "**botocore 1.0.0**" in page and "**botocore 1.2.3**" in page
    assert "| once, after | 125 | 125 | 250 (249-251) | 250 |" in page
    assert page.rstrip().endswith("What changed.")
