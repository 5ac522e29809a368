"""The guides' links lead somewhere: a relative link in a Markdown file of the repository names a file that is
there, and its `#anchor` a heading of that file, as GitHub makes a heading's anchor."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from helpers.repo import ROOT, tracked

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`[^`]*`")


def markdown_files() -> list[Path]:
    """The Markdown files git tracks (a test's or a benchmark's output is not a guide)."""
    return [ROOT / name for name in tracked("*.md")]


def prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text without Markdown's marks, lower case, punctuation dropped (letters of
    any script, digits, `_` and `-` kept), spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    return re.sub(r"[^\w\- ]", "", text.replace("`", "").lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated one gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for line in prose(path):
        if match := HEADING.match(line):
            base = slug(match.group(1))
            found.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    return found


def links(path: Path) -> list[str]:
    """The targets of the file's links, outside code (a hostile file name quoted in a table is not a link)."""
    return [target for line in prose(path) for target in LINK.findall(CODE_SPAN.sub("", line))]


def broken(path: Path) -> list[str]:
    """The relative links of `path` that name no file, or no heading of theirs."""
    bad = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...: not the repository's
            continue
        name, _, anchor = target.partition("#")
        file = (path.parent / name).resolve() if name else path
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target}: no such heading")
    return bad


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_are_there(path):
    assert broken(path) == []


def test_the_anchors_are_githubs():
    assert slug("Issue 25's own CPU kind: an AVX2 EPYC (Zen 3), 2026-11-27") == \
        "issue-25s-own-cpu-kind-an-avx2-epyc-zen-3-2026-11-27"
    assert slug("RoPE and ALiBi on `reverse`") == "rope-and-alibi-on-reverse"
    assert slug("Languages: English and 中文") == "languages-english-and-中文"
    assert slug("See [the map](ARCHITECTURE.md)") == "see-the-map"


def test_a_broken_link_is_found(tmp_path):
    guide = tmp_path / "guide.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A part\n\n## A part\n", encoding="utf-8")
    guide.write_text("# Guide\n\n[ok](other.md#a-part-1) [ok](#guide) [gone](missing.md) [no part](other.md#b)\n"
                     "```\n[in code](nowhere.md)\n```\n[web](https://example.org/x) `[quoted](x.md)`\n",
                     encoding="utf-8")
    assert broken(guide) == ["missing.md: no such file", "other.md#b: no such heading"]
