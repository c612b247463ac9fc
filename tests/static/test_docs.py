"""The README is a README and the manual in docs/ holds together: the README stays short, every
page is in the index, every link inside the repository's own Markdown reaches a file and a
heading that exist, and every "docs/<page>.md, <section>" that code and tests cite names a
section of that page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..support import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# The Markdown a reader follows links through: the README, the manual and the Python client's.
LINKED = [ROOT / "README.md", ROOT / "clients" / "python" / "README.md", *PAGES]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _outside_code(text: str) -> list[str]:
    lines, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            lines.append(line)
    return lines


def _anchors(page: Path) -> set[str]:
    """GitHub's ids for the page's headings: lower case, punctuation dropped, spaces as dashes."""
    titles = [m.group(1) for line in _outside_code(page.read_text()) if (m := re.match(r"#{1,6} (.+?)\s*$", line))]
    return {re.sub(r"[^\w\- ]", "", t.strip().lower()).replace(" ", "-") for t in titles}


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_the_manual_has_its_pages_and_an_index_of_them():
    names = {p.name for p in PAGES} - {"README.md"}
    assert len(names) >= 5
    index = (DOCS / "README.md").read_text()
    assert {n for n in names if f"]({n})" not in index} == set(), "a page missing from docs/README.md"


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_reaches_a_file_and_a_heading(page: Path):
    broken = []
    for line in _outside_code(page.read_text()):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(target)
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(target)
    assert broken == []


def test_long_pages_open_with_a_table_of_contents():
    for page in PAGES:
        lines = page.read_text().splitlines()
        if len(lines) > 150:
            head = "\n".join(lines[:20])
            assert re.search(r"\]\(#[\w-]+\)", head), f"{page.name} has no table of contents"


def test_every_cited_section_exists():
    # "docs/security.md, "Encryption at rest"" in a comment or docstring: the page must have it.
    cite = re.compile(r"docs/(\w+\.md),\s+\"([^\"]+)\"")
    cited = []
    sources = [p for folder in ("server", "storage", "tests", "bench") for p in (ROOT / folder).rglob("*.py")]
    sources += [p for p in (ROOT / "deploy").rglob("*") if p.is_file()]  # manifests and the example config
    for source in sources:
        text = " ".join(source.read_text().split())
        cited += [(source.relative_to(ROOT), page, section) for page, section in cite.findall(text)]
    assert cited, "no citation found: the pattern no longer matches how code cites the manual"
    missing = [c for c in cited if c[2] not in " ".join((DOCS / c[1]).read_text().split())]
    assert missing == []
