"""What every section of ``docs/performance.md`` shares: the ``Page`` that collects tables
for the terminal and the markdown at once, and the formatting and plotting helpers.

It is its own module so that ``report.py`` can import the section modules (``*_page.py``)
while they import these from here, without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

#: Sections after this line of docs/performance.md are measured by their own scripts
#: (``python -m proof.bench.retry``, ``commit``, ``sweep``, which ``make bench`` runs after
#: ``python -m proof.bench``): a rewrite of the page keeps them as they are.
KEPT_SECTIONS = "<!-- sections below: measured by their own scripts, kept by make bench -->"
ENGINE_TITLE = {"moto": "moto server", "dynamodb-local": "DynamoDB Local"}

Rows = list[list[str]]


def ms(value: float) -> str:
    return f"{value:.1f}"


def verdict(ok: bool) -> str:
    """A goal row's last column."""
    return "met" if ok else "NOT met"


def _md_table(header: Sequence[str], rows: Rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed), imported only to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


class Page:
    """Collects sections for the terminal and the markdown page at once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.parts: list[str] = []

    def text(self, markdown: str) -> None:
        self.parts.append(markdown.strip() + "\n")

    def table(self, title: str, header: Sequence[str], rows: Rows, note: str = "") -> None:
        table = Table(title=title, title_justify="left")
        for name in header:
            table.add_column(name, justify="right" if name != header[0] else "left")
        for row in rows:
            table.add_row(*row)
        self.console.print(table)
        self.parts.append(
            f"**{title}**\n\n{_md_table(header, rows)}\n" + (f"\n{note.strip()}\n" if note else "")
        )

    def image(self, name: str, alt: str) -> None:
        self.parts.append(f"![{alt}]({name})\n")

    def markdown(self) -> str:
        return "\n".join(self.parts)


def place_section(docs: Path, markdown: str, begin: str, end: str) -> Path:
    """Put a section measured by its own script on ``docs/performance.md``, between its
    ``begin`` and ``end`` comments: in place of its earlier run, or at the end of the kept
    sections (after ``KEPT_SECTIONS``, added if the page has none)."""
    path = docs / "performance.md"
    old = path.read_text() if path.is_file() else ""
    block = f"{begin}\n\n{markdown.strip()}\n\n{end}\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        page = head + block + ("\n" + tail if tail else "")
    elif KEPT_SECTIONS in old:
        page = old.rstrip("\n") + "\n\n" + block
    else:
        page = (old.rstrip("\n") + "\n\n" if old else "") + KEPT_SECTIONS + "\n\n" + block
    path.write_text(page)
    return path
