"""What every section of ``docs/performance.md`` shares: the ``Page`` that collects tables
for the terminal and the markdown at once, and the formatting and plotting helpers.

It is its own module so that ``report.py`` can import the section modules (``*_page.py``)
while they import these from here, without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

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
