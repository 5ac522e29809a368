"""The project's Python source holds no control characters. A formula written as "\\tilde" or "\\frac" in a plain
string (or pasted through a tool that read it as one) becomes a tab or a form feed, and the page shows "ilde q"
or "rac{q}": the positions page's RoPE and ALiBi formulas did."""

from __future__ import annotations

import re

from helpers.repo import ROOT

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # all but newline (and tab, below)


def test_no_control_characters_in_the_source():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if any(part.startswith(".") or part in ("__pycache__", "test-artifacts") for part in path.parts):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CONTROL.search(line) or "\t" in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:60]!r}")
    assert not found, "\n".join(found)
