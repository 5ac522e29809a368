"""The words the app and its charts write, in English and Simplified Chinese, from one catalog.

The catalog is `transformer/locales/<area>.toml`, one file per area (a page, the sidebar, the charts, the
tasks). Each entry is keyed once, `<area>.<name>`, and holds both languages side by side:

    [intro]
    en = "Type an input and see where the model looks."
    zh = "输入一句话，看模型在看哪里。"

`t("home.intro", **values)` is the entry in the current language, formatted with `str.format` (a literal brace
is written `{{`). An English text that changes with a count may have an `en_one` form, used when the value `n`
is 1 (Chinese has no plural). A key the catalog lacks raises KeyError: tests find it, never a reader.

The current language is, in order: one set for a block of code (`using("zh")`, a context variable), the
source the app follows (`follow(fn)`: the app's session, where each script run reads its reader's language),
else English, so the command line and notebooks stay English.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

LOCALES = Path(__file__).resolve().parent / "locales"
LANGUAGES = ("en", "zh")
DEFAULT = "en"
NAMES = {"en": "English", "zh": "中文"}  # each language in its own words, for the switch

_chosen: ContextVar[str | None] = ContextVar("language", default=None)
_source: Callable[[], str | None] | None = None


@cache
def catalog() -> dict[str, dict[str, str]]:
    """Every entry, {key: {"en": ..., "zh": ..., ["en_one": ...]}}, read once from the locale files."""
    entries: dict[str, dict[str, str]] = {}
    for path in sorted(LOCALES.glob("*.toml")):
        with path.open("rb") as file:
            _flatten(path.stem, tomllib.load(file), entries)
    return entries


def _flatten(prefix: str, table: dict, into: dict) -> None:
    """Entries of a TOML table: a table holding "en" is one; other tables hold more, named by their path."""
    for name, value in table.items():
        key = f"{prefix}.{name}"
        if not isinstance(value, dict):
            raise ValueError(f"{key}: an entry is a table of its languages")
        if "en" in value:
            into[key] = value
        else:
            _flatten(key, value, into)


def language() -> str:
    """The language text is written in now: "en" or "zh"."""
    chosen = _chosen.get() or (_source() if _source is not None else None)
    return chosen if chosen in LANGUAGES else DEFAULT


def follow(source: Callable[[], str | None]) -> None:
    """Take the language from `source()` wherever `using` sets none (the app: its reader's choice)."""
    global _source
    _source = source


@contextmanager
def using(lang: str) -> Iterator[None]:
    """Write in `lang` inside the block (this thread or task only)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    token = _chosen.set(lang)
    try:
        yield
    finally:
        _chosen.reset(token)


def t(key: str, /, **values) -> str:
    """The catalog's text for `key` in the current language, with `values` in its placeholders."""
    entry = catalog()[key]
    lang = language()
    text = entry["en_one"] if lang == "en" and "en_one" in entry and values.get("n") == 1 else entry[lang]
    return text.format(**values)


def sentences(parts: Iterable[str]) -> str:
    """Whole sentences run together as the language writes them: a space after each in English, none in Chinese."""
    return ("" if language() == "zh" else " ").join(parts)


class Localized:
    """A class attribute whose value is a catalog entry, read in the current language (a task's title); an
    instance may set its own (a custom task's title, the user's words)."""

    def __init__(self, key: str):
        self.key = key

    def __get__(self, instance, owner=None) -> str:
        return t(self.key)


class Texts(Mapping):
    """A mapping whose values are catalog keys, read as their text in the current language: a module-level
    table of names (e.g. attention kinds) that follows the reader's language."""

    def __init__(self, keys: Mapping[str, str]):
        self._keys = dict(keys)

    def __getitem__(self, name: str) -> str:
        return t(self._keys[name])

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
