"""Shipped code cites documents a user has (docs/, AWS's pages), never the design card that
only this repository's authors read (issue 42, item 8: ``once/testing/strict.py`` named
"DESIGN.md")."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = [ROOT / "functions" / "once", ROOT / "once_cdk", ROOT / "oncecli"]


def test_no_shipped_module_names_the_design_card() -> None:
    named = [
        str(path.relative_to(ROOT))
        for folder in SHIPPED
        for path in folder.rglob("*.py")
        if "DESIGN.md" in path.read_text(encoding="utf-8")
    ]
    assert named == []
