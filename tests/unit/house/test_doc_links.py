"""Every relative link in README.md and docs/*.md leads somewhere: to a file or folder of the
repository, and, for a ``#anchor``, to a heading of that file as GitHub slugs it (lowercase,
spaces to hyphens, punctuation other than hyphens and underscores dropped, ``-1``, ``-2`` for
a repeated heading)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[^)]*)?\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"""<a\s+(?:name|id)=["']([^"']+)["']""")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The link targets of a page, in its prose (not in code blocks or code spans)."""
    targets = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            targets.append(definition.group(1))
            continue
        targets.extend(INLINE_LINK.findall(CODE_SPAN.sub("", line)))
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in targets]


def relative_links(page: Path) -> list[str]:
    return [t for t in links(page) if not SCHEME.match(t) and not t.startswith("//")]


def broken(page: Path) -> list[str]:
    problems = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not destination.exists():
            problems.append(f"{target}: no such file")
            continue
        try:
            destination.relative_to(ROOT)
        except ValueError:
            problems.append(f"{target}: outside the repository")
            continue
        if anchor and destination.suffix == ".md":
            if unquote(anchor).lower() not in anchors(destination):
                problems.append(f"{target}: no heading #{anchor} in {destination.name}")
        elif anchor and destination.is_dir():
            problems.append(f"{target}: an anchor into a folder")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken(page) == []


def test_the_readme_links_to_the_docs_and_is_read_by_the_check():
    targets = relative_links(ROOT / "README.md")
    assert any(t.startswith("docs/") for t in targets)
    assert "LICENSE" in targets


def test_every_docs_page_is_reachable_from_the_readme():
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in relative_links(page):
            path_part = target.partition("#")[0]
            if path_part.endswith(".md"):
                destination = (page.parent / unquote(path_part)).resolve()
                if destination.is_file():
                    todo.append(destination)
    assert [p.name for p in PAGES if p not in reached] == []


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Quick start", "quick-start"),
        ("Deploy it: `OnceConsumer`", "deploy-it-onceconsumer"),
        ("Test your deployed stack: `once_cloud`", "test-your-deployed-stack-once_cloud"),
        ("Batch latency (DynamoDB Local)", "batch-latency-dynamodb-local"),
        ("Two hops: atomic effects and the outbox", "two-hops-atomic-effects-and-the-outbox"),
        ("once and Powertools' idempotency utility", "once-and-powertools-idempotency-utility"),
        ("See [the runbook](docs/runbook.md)", "see-the-runbook"),
    ],
)
def test_slugs_follow_githubs_rules(heading, expected):
    assert slug(heading) == expected


def test_a_missing_file_or_heading_is_reported(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A heading\n\n## A heading\n")
    page.write_text(
        "[ok](other.md#a-heading) [second](other.md#a-heading-1) [self](#top)\n"
        "[gone](missing.md) [no anchor](other.md#nowhere)\n"
        "`[in code](missing.md)`\n\n```\n[in a block](missing.md)\n```\n\n# Top\n"
    )
    assert broken(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
    ]


def test_the_readme_keeps_a_teams_day_one_and_no_more() -> None:
    """About 250 lines (issue 42, item 9): what a team needs on its first day; the rest lives
    in docs/, which the README's tables name."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 260, f"README.md has {lines} lines: move what is not day one to docs/"
