"""The bridge to Powertools' records in the bench's write units (``work.write_units``, on
DynamoDB Local, through ``python -m proof.bench.run --sections work``): what the protocols
say a message costs with ``make_handler(powertools=...)``, and the page's subsection.

Two-phase, a new message is the claim, the ``PutItem`` of its Powertools record INPROGRESS
and a completion of two items in one transaction (and the staged write: three); staged, the
one commit is a transaction of the Powertools record and once's (and the staged write). A
message Powertools completed before: two-phase the claim, the refused ``PutItem`` and the
write that completes once's record; staged the canceled transaction and that write.
By DynamoDB's rule a transaction bills 2 per item; a refused write 1 (a small record).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from oncecli.localcloud.engines import in_private_netns, netns_argv
from proof.bench import work, work_page
from proof.bench.page import Page

ROOT = Path(__file__).resolve().parents[2]
DUPLICATE = work.POWERTOOLS_DUPLICATE


@pytest.fixture(scope="module")
def units(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("work") / "work.json"
    argv = [
        sys.executable,
        "-m",
        "proof.bench.run",
        "--engine",
        "dynamodb-local",
        "--sections",
        "work",
        "--scale",
        "smoke",
        "--out",
        str(out),
    ]
    done = subprocess.run(
        argv if in_private_netns() else netns_argv(argv),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(out.read_text())["write_units"])


def test_the_bridge_adds_its_powertools_record_to_each_new_message(
    units: dict[str, Any],
) -> None:
    two, staged = units["once+bridge"], units["once-staged+bridge"]
    ops = {"PutItem": 1, "TransactWriteItems": 1, "UpdateItem": 1}
    assert two["none"]["operations"] == ops
    assert two["one write"]["operations"] == ops
    assert staged["none"]["operations"] == {"TransactWriteItems": 1}
    assert staged["one write"]["operations"] == {"TransactWriteItems": 1}
    by_rule = {
        (name, variant): units[name][variant]["wru_rules"]
        for name in ("once", "once+bridge", "once-staged", "once-staged+bridge")
        for variant in ("none", "one write")
    }
    assert by_rule == {
        ("once", "none"): 2,
        ("once", "one write"): 5,
        ("once+bridge", "none"): 6,
        ("once+bridge", "one write"): 8,
        ("once-staged", "none"): 1,
        ("once-staged", "one write"): 4,
        ("once-staged+bridge", "none"): 4,
        ("once-staged+bridge", "one write"): 6,
    }


def test_a_message_powertools_completed_is_a_duplicate_that_completes_once_record(
    units: dict[str, Any],
) -> None:
    two = units["once+bridge"][DUPLICATE]
    assert two["operations"] == {"PutItem": 1, "UpdateItem": 2}
    assert (two["wru_rules"], two["wru_refused"], two["canceled"]) == (3, 1, 0)
    staged = units["once-staged+bridge"][DUPLICATE]
    assert staged["operations"] == {"TransactWriteItems": 1, "UpdateItem": 1}
    assert (staged["wru_rules"], staged["wru_refused"], staged["canceled"]) == (1, 0, 1)


def test_the_subsection_shows_the_run_figures(units: dict[str, Any]) -> None:
    page = Page(Console(file=io.StringIO()))
    work_page.bridge_section(page, units)
    text = page.markdown()
    assert text.startswith("### The bridge to Powertools' records")
    assert "+4 write units over once without it (6 instead of 2" in text
    assert "paid only while it is" in text
    rows = [line for line in text.splitlines() if line.startswith("| once")]
    assert len(rows) == 6
    assert rows[0].startswith("| once two-phase + bridge | new | none | 3 |")
    assert "TransactWriteItems 1 (1 canceled), UpdateItem 1 | 1 | 1 | - | 0.625 |" in rows[-1]
    # The table of the protocols without the bridge keeps its four rows.
    assert len(work_page.write_unit_rows(units)) == 4
