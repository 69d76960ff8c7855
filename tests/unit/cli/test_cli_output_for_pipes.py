"""The commands' output read by a script as by a person: piped, a table's title and rows stay
one line each (no wrap at 80 columns); a record's times show as ISO 8601 in UTC, the stored
number beside them."""

from __future__ import annotations

import subprocess
import sys

from once import constants as c
from oncecli.operate import _shown

PRINT_A_WIDE_TABLE = """
from rich.table import Table
from oncecli.cli import _console
table = Table(title="once inspect: " + "orders#" + "k" * 150, title_justify="left")
table.add_column("field")
table.add_column("value")
table.add_row("error", "ClientError (ThrottlingException, HTTP 400) " * 4)
_console().print(table)
"""


def test_a_piped_table_keeps_its_title_and_rows_on_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PRINT_A_WIDE_TABLE], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert lines[0].strip() == "once inspect: orders#" + "k" * 150
    assert any(line.count("ThrottlingException") == 4 for line in lines)


def test_a_records_times_show_as_iso_8601_with_the_stored_number() -> None:
    assert _shown(c.ATTR_EXPIRES_AT, "1764331200") == "2025-11-28T12:00:00Z (1764331200)"
    assert _shown(c.ATTR_UPDATED_AT, "1764331200123") == "2025-11-28T12:00:00Z (1764331200123)"
    assert _shown(c.ATTR_RESULT, "1764331200") == "1764331200"
    assert _shown(c.ATTR_EXPIRES_AT, "not a number") == "not a number"
