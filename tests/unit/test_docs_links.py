"""Every relative link of the documentation leads somewhere: the file exists, the anchor too.

Why: the README was split into docs/ pages that link each other by section; a renamed
heading or a moved page would otherwise leave links that go nowhere, silently. The pages
are parsed with markdown-it-py (as CommonMark plus tables, so a link inside a code block
or code span is not a link) and anchors are the ones GitHub makes from headings.
External links (http, https, mailto) are not followed: the tests run offline.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tests.docs_commands import RUN_BY, shell_blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted({ROOT / "README.md", ROOT / "DEVELOPMENT.md", *ROOT.glob("docs/*.md"),
                *ROOT.glob("charts/*/README.md"), ROOT / "bench" / "README.md",
                *ROOT.glob("examples/**/README.md"), *ROOT.glob("argocd/**/README.md")})
_MD = MarkdownIt("commonmark").enable("table")
_NOT_IN_SLUG = re.compile(r"[^\w\- ]", re.UNICODE)


def github_slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to ``-``."""
    return _NOT_IN_SLUG.sub("", title.strip().lower()).replace(" ", "-")


def _tokens(path: Path) -> list[Token]:
    return _MD.parse(path.read_text())


def _inline_text(token: Token) -> str:
    return "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline"))


@cache
def anchors(path: Path) -> frozenset[str]:
    """The heading anchors of ``path``, duplicates numbered as GitHub does (``-1``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    tokens = _tokens(path)
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        slug = github_slug(_inline_text(tokens[i + 1]))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(out)


def links(path: Path) -> Iterator[str]:
    for token in _tokens(path):
        for child in token.children or []:
            if child.type == "link_open":
                yield str(child.attrs.get("href", ""))
            elif child.type == "image":
                yield str(child.attrs.get("src", ""))


def broken(path: Path, href: str) -> str | None:
    """Why ``href`` on ``path`` leads nowhere, or None."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return None
    target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
    if not target.exists():
        return f"{href}: no such file {target}"
    if parts.fragment and target.suffix == ".md" and parts.fragment not in anchors(target):
        return f"{href}: no heading #{parts.fragment} in {target.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_exists(page: Path) -> None:
    problems = [p for href in links(page) if (p := broken(page, href))]
    assert problems == []


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    reachable: set[Path] = set()
    todo = [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reachable or page.suffix != ".md" or not page.exists():
            continue
        reachable.add(page)
        for href in links(page):
            parts = urlsplit(href)
            if not parts.scheme and parts.path:
                todo.append((page.parent / unquote(parts.path)).resolve())
    assert sorted(p.name for p in set(ROOT.glob("docs/*.md")) - reachable) == []


def test_the_slug_rules() -> None:
    assert github_slug("Sharding (several replicas)") == "sharding-several-replicas"
    assert github_slug("One app in full: get") == "one-app-in-full-get"
    assert github_slug("System-level settings (argocd-cm)") == "system-level-settings-argocd-cm"
    assert github_slug("The README's figures, until 2026-12") == "the-readmes-figures-until-2026-12"


@pytest.mark.parametrize("page", sorted(RUN_BY))
def test_every_command_block_is_run_by_a_test(page: str) -> None:
    """Each ```sh block of install.md/argocd.md has a marker that a test runs (see
    tests/docs_commands.py), so a page cannot show a command no test types."""
    blocks = shell_blocks(page)
    assert [b.commands[:1] for name, b in blocks if name is None] == []
    names = [name for name, _ in blocks]
    assert len(names) == len(set(names)), names
    assert set(names) == set(RUN_BY[page])
    for test in RUN_BY[page].values():
        assert (ROOT / test).is_file(), test
