"""Checks of the text catalog (transformer/locales/) and of the code that reads it: what the catalog tests and
the Chinese page walks share."""

from __future__ import annotations

import ast
import re
import string
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from .repo import ROOT

FIELDS = {"en", "zh", "en_one"}  # what an entry may hold (transformer/i18n.py)
CODE = [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py")), *sorted((ROOT / "ui").rglob("*.py")),
        *sorted((ROOT / "transformer").rglob("*.py"))]


def placeholders(text: str) -> list[str]:
    """The names of a text's `{placeholders}`, sorted (ValueError for a lone brace)."""
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)


def _loose(char: str) -> bool:
    """Whitespace, punctuation or the text's edge: what CommonMark lets stand beside a `**` (its flanking rules)."""
    return not char or char.isspace() or unicodedata.category(char).startswith("P")


def broken_bold(text: str) -> bool:
    """Whether a `**` in `text` cannot open or close its bold by CommonMark's rules: a closing one after
    punctuation ("**任务：**" before a letter) or an opening one before it ("是**“读入”**"), where the other side
    is not also whitespace or punctuation. Chinese puts its full-width punctuation outside the stars."""
    runs = [i for i in range(len(text) - 1) if text[i:i + 2] == "**"]
    for n, i in enumerate(runs):
        before, after = text[i - 1:i] if i else "", text[i + 2:i + 3]
        inner, outer = (before, after) if n % 2 else (after, before)
        if inner and unicodedata.category(inner).startswith("P") and not _loose(outer):
            return True
    return False


def problems(entries: dict[str, dict]) -> list[str]:
    """What is wrong with a catalog: an entry without both languages or with a field it may not have, an empty
    text, a brace that is not a placeholder, a Chinese (or singular English) text whose placeholders differ from
    the English one's, bold that markdown would not close."""
    found = []
    for key, entry in entries.items():
        if set(entry) - FIELDS or not {"en", "zh"} <= set(entry):
            found.append(f"{key}: has {sorted(entry)}; it needs en and zh (en_one may be added)")
            continue
        if any(not isinstance(text, str) or not text.strip() for text in entry.values()):
            found.append(f"{key}: a text is empty or not text")
            continue
        try:
            wanted = {lang: placeholders(text) for lang, text in entry.items()}
        except ValueError as exc:
            found.append(f"{key}: {exc} (write a literal brace as {{{{ or }}}})")
            continue
        found += [f"{key}: {lang} has placeholders {names}, en has {wanted['en']}"
                  for lang, names in wanted.items() if names != wanted["en"]]
        found += [f"{key}: {lang} has bold that markdown cannot close" for lang, text in entry.items()
                  if broken_bold(re.sub(r"\{[^{}]*\}", "x", text))]  # a placeholder's value: a word
    return found


def _trees() -> Iterator[tuple[Path, ast.AST]]:
    for path in CODE:
        yield path, ast.parse(path.read_text(), str(path))


def t_calls() -> list[tuple[str, str]]:
    """Every `t("literal key", ...)` call in the app and the library: (where, key)."""
    return [(f"{path.relative_to(ROOT)}:{node.lineno}", node.args[0].value)
            for path, tree in _trees() for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)]


def code_strings() -> set[str]:
    """Every string constant in the app and the library (a key may be named in a table before `t` reads it)."""
    return {node.value for _, tree in _trees() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}
