"""View state from declarative tables: one table per page, the single home of that page's view state.

A `StateTable` lists `Prop`s, each one piece of view state with its type, default, bounds and whether it
belongs in the URL (in the spirit of TensorFlow Playground's `State` and its property table). A page reads
and writes its state only through its table's `View`, creates its widgets through it, and the view is the
one place that turns the state into the page's URL and a link back into state:

- session state holds every value under `<page>_<name>` (shared props, such as the active model and the
  input text, under one key that every page's table refers to), so a value survives a visit to another page
  (Streamlit drops a widget's own state when its page is not shown);
- `View.adopt_link()` reads a link's query parameters once (when they differ from what this session last
  wrote): each value is parsed and bounded by its prop; a bad one, an unknown key or a newer format version
  leaves the default and a short note, never a traceback; a value the page refuses later (`View.refuse`) leaves
  the address at once, so a rerun never adopts the same link again;
- `View.sync_url()` writes the URL: only values that differ from their defaults, plus the format version.

Widgets are seeded from the state before they render and write back through their callback, so the state
table, not the widget, owns each value. Changing a prop resets the props that depend on it (a new input
starts the decode at its first step, with no forced tokens).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from transformer.i18n import t

from .failure import callback
from .markdown import literal

FORMAT_VERSION = 1
VERSION_PARAM = "v"
MAX_PARAM_CHARS = 2000  # longer query values are refused before they are parsed


class LinkError(ValueError):
    """A query parameter that cannot be honoured; the message says why, in the user's words."""


def quoted(raw: str, limit: int = 40, marks: bool = True) -> str:
    """A value from a link for a note, in quotation marks (or without, for a number): cut after `limit`
    characters, with its length when cut, so a note never repeats a huge value."""
    left, right = ("“", "”") if marks else ("", "")
    if len(raw) <= limit:
        return f"{left}{raw}{right}"
    return f"{left}{raw[:limit]}…{right}" + t("app.link.cut", n=len(raw))


def address() -> dict[str, str]:
    """The query parameters in the address now, as {name: value} (a repeated one's last value)."""
    return {name: st.query_params.get(name) for name in st.query_params}


# ------------------------------------------------------------------------------------------------- props


@dataclass(frozen=True)
class Prop:
    """One piece of view state. `default` None means "the page decides" (e.g. the model's first example);
    `depends_on` names props whose change resets this one; `key` overrides the session-state key;
    `defaults_by` maps values of the first prop in `depends_on` to this prop's default there (e.g. a task's
    preset), others keep `default`: the URL leaves out a value equal to the default that applies."""

    name: str
    default: Any = None
    url: bool = True
    depends_on: tuple[str, ...] = ()
    key: str | None = None
    defaults_by: Mapping[Any, Any] | None = field(default=None, compare=False)

    def parse(self, raw: str) -> Any:
        """The value a query parameter stands for; LinkError when it is not one this prop can take."""
        return raw

    def format(self, value: Any) -> str:
        return str(value)

    def admits(self, value: Any) -> bool:
        """Whether a value already in session state is one this prop can hold (else it reads as the default)."""
        return True


@dataclass(frozen=True)
class Text(Prop):
    max_chars: int = 200

    def parse(self, raw: str) -> str:
        if len(raw) > self.max_chars:
            raise LinkError(t("app.link.too_long", n=len(raw), most=self.max_chars))
        if any(ord(c) < 32 for c in raw):
            raise LinkError(t("app.link.control"))
        return raw

    def admits(self, value: Any) -> bool:
        return isinstance(value, str) and len(value) <= self.max_chars


@dataclass(frozen=True)
class Int(Prop):
    lo: int = 0
    hi: int = 2**31 - 1

    def parse(self, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise LinkError(t("app.link.not_whole", raw=quoted(raw))) from None
        if not self.lo <= value <= self.hi:
            raise LinkError(t("app.link.outside", raw=quoted(raw.strip(), marks=False), lo=self.lo, hi=self.hi))
        return value

    def admits(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.lo <= value <= self.hi

    def bounds(self) -> dict[str, int]:
        """A number input's range: exactly the values this prop takes."""
        return {"min_value": self.lo, "max_value": self.hi}


@dataclass(frozen=True)
class Float(Prop):
    lo: float = -math.inf
    hi: float = math.inf

    def parse(self, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise LinkError(t("app.link.not_number", raw=quoted(raw))) from None
        if not math.isfinite(value) or not self.lo <= value <= self.hi:
            raise LinkError(t("app.link.outside", raw=quoted(raw, marks=False), lo=f"{self.lo:g}", hi=f"{self.hi:g}"))
        return value

    def format(self, value: float) -> str:
        return f"{value:g}"

    def admits(self, value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and self.lo <= value <= self.hi

    def bounds(self) -> dict[str, float]:
        """A number input's range: exactly the values this prop takes."""
        return {"min_value": float(self.lo), "max_value": float(self.hi)}


@dataclass(frozen=True)
class Flag(Prop):
    default: bool = False

    def parse(self, raw: str) -> bool:
        if raw not in ("0", "1"):
            raise LinkError(t("app.link.not_flag", raw=quoted(raw)))
        return raw == "1"

    def format(self, value: bool) -> str:
        return "1" if value else "0"

    def admits(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Choice(Prop):
    options: tuple = ()

    def parse(self, raw: str) -> Any:
        for option in self.options:
            if self.format(option) == raw:
                return option
        raise LinkError(t("app.link.not_option", raw=quoted(raw), options=", ".join(map(self.format, self.options))))

    def admits(self, value: Any) -> bool:
        return value in self.options


@dataclass(frozen=True)
class IntMap(Prop):
    """A small map of whole numbers, written `4:17,6:3` (e.g. step -> forced token id)."""

    default: tuple = ()
    max_items: int = 64

    def parse(self, raw: str) -> tuple[tuple[int, int], ...]:
        items = [item for item in raw.split(",") if item]
        if len(items) > self.max_items:
            raise LinkError(t("app.link.too_many", n=len(items), most=self.max_items))
        pairs = {}
        for item in items:
            left, sep, right = item.partition(":")
            if not sep or not left.strip().isdigit() or not right.strip().isdigit() or len(item) > 24:
                raise LinkError(t("app.link.not_pair", raw=quoted(item)))
            pairs[int(left)] = int(right)
        return tuple(sorted(pairs.items()))

    def format(self, value: tuple) -> str:
        return ",".join(f"{a}:{b}" for a, b in value)

    def admits(self, value: Any) -> bool:
        return isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value)


@dataclass(frozen=True)
class IntList(Prop):
    """A few whole numbers, written `2,5` (e.g. a selected heatmap cell: query, key)."""

    default: tuple | None = None
    length: int = 2
    hi: int = 10_000

    def parse(self, raw: str) -> tuple[int, ...]:
        parts = raw.split(",")
        if len(parts) != self.length or not all(p.strip().isdigit() and len(p) < 8 for p in parts):
            raise LinkError(t("app.link.not_list", raw=quoted(raw), n=self.length))
        values = tuple(int(p) for p in parts)
        if max(values) > self.hi:
            raise LinkError(t("app.link.larger", value=max(values), hi=self.hi))
        return values

    def format(self, value: tuple) -> str:
        return ",".join(str(v) for v in value)

    def admits(self, value: Any) -> bool:
        return isinstance(value, tuple) and len(value) == self.length


# ------------------------------------------------------------------------------------------------ tables


@dataclass(frozen=True)
class StateTable:
    """A page's view state: `page` names it (its URL path, or "home"), `props` lists every piece."""

    page: str
    props: tuple[Prop, ...]
    by_name: dict[str, Prop] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        names = [p.name for p in self.props]
        if len(set(names)) != len(names) or VERSION_PARAM in names:
            raise ValueError(f"state table {self.page}: prop names must be unique and not {VERSION_PARAM!r}")
        object.__setattr__(self, "by_name", {p.name: p for p in self.props})

    def key(self, name: str) -> str:
        prop = self.by_name[name]
        return prop.key or f"{self.page}_{name}"

    def view(self) -> View:
        return View(self)


_TABLES: dict[str, StateTable] = {}


def register(table: StateTable) -> StateTable:
    """Make a table known, so a change of a shared prop resets the props of every page that depend on it."""
    _TABLES[table.page] = table
    return table


def changed(name: str, key: str | None = None) -> None:
    """Prop `name` changed (outside `View.set`, e.g. the active model picked on another page): the props
    of every page that depend on it return to their defaults. With `key` (its session key), only the pages
    whose own `name` is that same value (a shared prop) are touched: one page's `layer` leaves another's be."""
    for table in _TABLES.values():
        if key is not None and (name not in table.by_name or table.key(name) != key):
            continue
        for prop in table.props:
            if name in prop.depends_on:
                st.session_state.pop(table.key(prop.name), None)


NOTES = "state_link_notes"  # session key: LinkNotes of the last link adopted
# session key: {page: the query parameters this session wrote or adopted there, the last RECENT, newest last}
WRITTEN = "state_written"
RECENT = 32  # a browser this many runs behind (quick clicks on a slow link) is not taken for a link
SHOWN = "state_shown"  # session key: the page of the session's last run
DRAWN = "state_drawn"  # session key: {widget key: how it was last drawn on this page visit} (`seed`)


def written(page: str) -> list[dict[str, str]]:
    """The addresses this session last wrote or adopted on `page`, newest last."""
    return st.session_state.setdefault(WRITTEN, {}).setdefault(page, [])


def wrote(page: str, params: dict[str, str]) -> None:
    """Remember `params` as the address of `page` now."""
    recent = written(page)
    if params in recent:
        recent.remove(params)
    recent.append(params)
    del recent[:-RECENT]


def seed(wkey: str, value: Any, args: tuple, kwargs: dict) -> None:
    """Give widget `wkey` the state's `value` before it is drawn, unless it holds that value already and was drawn
    the same way before on this page visit (with `args` and `kwargs`, callables left out; `View.adopt_link` forgets
    every widget when the page changes).

    A value written into a widget's key is sent to the browser as one to show, even over a pick the learner has just
    made: a live view renewing itself drew the old value back over a pick made during a renewal. A widget drawn
    another way (on another page, with other arguments) may be a new widget to Streamlit, without our key's value:
    it is always seeded."""
    drawn_as = (args, {name: v for name, v in kwargs.items() if not callable(v)})
    drawn = st.session_state.setdefault(DRAWN, {})
    if drawn.get(wkey) != drawn_as or wkey not in st.session_state or st.session_state[wkey] != value:
        st.session_state[wkey] = value
    drawn[wkey] = drawn_as


def history_navigation() -> bool:
    """Whether this run was asked for by the browser's back or forward button."""
    return bool(getattr(get_script_run_ctx(suppress_warning=True), "is_history_navigation", False))


@dataclass
class LinkNotes:
    """What could not be honoured of the link `page` was opened with, and which props it did set."""

    page: str
    notes: list[str] = field(default_factory=list)
    adopted: set[str] = field(default_factory=set)


class View:
    """A state table bound to this session: read, write, widgets, link in, URL out."""

    def __init__(self, table: StateTable):
        self.table = table

    # -- values
    def get(self, name: str) -> Any:
        """The current value, or the prop's default when it is unset or not one the prop can hold."""
        prop = self.table.by_name[name]
        key = self.table.key(name)
        if key not in st.session_state:
            return self.default(name)
        value = st.session_state[key]
        return value if value is None or prop.admits(value) else self.default(name)

    def default(self, name: str, values: dict[str, Any] | None = None) -> Any:
        """The default of prop `name` that applies now (or with `values` standing in for the current state):
        its `defaults_by` entry for the value of the prop it depends on, else its `default`."""
        prop = self.table.by_name[name]
        if not prop.defaults_by:
            return prop.default
        on = prop.depends_on[0]
        return prop.defaults_by.get(values[on] if values and on in values else self.get(on), prop.default)

    def set(self, name: str, value: Any) -> None:
        """Change a value; the props that depend on it return to their defaults."""
        if self.get(name) != value:
            changed(name, self.table.key(name))
        st.session_state[self.table.key(name)] = value

    def reset(self, name: str) -> None:
        st.session_state.pop(self.table.key(name), None)

    def values(self) -> dict[str, Any]:
        return {p.name: self.get(p.name) for p in self.table.props}

    # -- widgets
    def widget_key(self, name: str, slot: str = "") -> str:
        return f"{self.table.key(name)}_{slot or 'widget'}"

    def widget(self, name: str, make: Callable, *args, slot: str = "", to_widget=None, from_widget=None,
               on_change=None, **kwargs):
        """Create a widget bound to prop `name`: `make(*args, key=..., on_change=..., **kwargs)`, seeded from
        the state (through `to_widget`) and writing back on change (through `from_widget`, which may return
        None to keep the current value). `slot` tells apart two widgets of one prop. Returns what the
        widget returns."""
        wkey = self.widget_key(name, slot)
        value = self.get(name)
        seed(wkey, to_widget(value) if to_widget else value, args, kwargs)

        def changed():
            new = st.session_state[wkey]
            new = from_widget(new) if from_widget else new
            if new is not None:
                self.set(name, new)
            st.session_state.pop(NOTES, None)
            if on_change is not None:
                on_change()

        return make(*args, key=wkey, on_change=callback(changed), **kwargs)

    # -- the link in
    def adopt_link(self) -> None:
        """Take the values of a link's query parameters when they are new to this session (a link just
        opened, or typed into the address bar; the browser's back and forward buttons). Empty parameters
        (after moving between pages) keep the session's state, and so does an address this session wrote
        on this page before, in a rerun of it: a browser asks for a run with the address it has, and one
        that has not yet heard of the last run's (a click right after another, on a busy server or a slow
        link) sends an older one back, which must not undo the last change; `sync_url` writes the newer."""
        page = self.table.page
        same_page = st.session_state.get(SHOWN) == page
        if not same_page:
            st.session_state.pop(DRAWN, None)  # this page's widgets are new: each is seeded once more
        rerun = same_page and not history_navigation()
        st.session_state[SHOWN] = page
        params, recent = address(), written(page)
        if not params or [params] == recent[-1:] or rerun and params in recent:
            return
        wrote(page, params)
        adopted, notes = self._read(params)
        for prop in self.table.props:  # a link sets the whole view: what it does not name is the default
            if prop.url:
                st.session_state.pop(self.table.key(prop.name), None)
        for name, value in adopted.items():
            st.session_state[self.table.key(name)] = value
        st.session_state[NOTES] = LinkNotes(self.table.page, notes, set(adopted))

    def _read(self, params: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        """({prop name: value} of the parameters this page can take, notes on the others)."""
        version = params.get(VERSION_PARAM, str(FORMAT_VERSION))
        if version != str(FORMAT_VERSION):
            return {}, [t("app.link.newer", version=quoted(version, 12, marks=False))]
        adopted: dict[str, Any] = {}
        notes: list[str] = []
        for name, raw in params.items():
            if name == VERSION_PARAM:
                continue
            prop = self.table.by_name.get(name)
            if prop is None or not prop.url:
                notes.append(t("app.link.unknown", name=quoted(name)))
                continue
            try:
                if len(raw) > MAX_PARAM_CHARS:
                    raise LinkError(t("app.link.long", n=len(raw)))
                adopted[name] = prop.parse(raw)
            except LinkError as exc:
                notes.append(f"{name}: {exc}")
        return adopted, notes

    def from_link(self, name: str) -> bool:
        """Whether prop `name` holds a value set by the link this page was just opened with."""
        link = self._link_notes()
        return link is not None and name in link.adopted

    def refuse(self, name: str, why: str) -> None:
        """A value the page cannot show (a step past the end, a layer the model lacks): back to the default,
        with a note when the value came from a link. The value leaves the address at once, and this session
        takes the address as its own, so a rerun (before `sync_url` writes the view) does not adopt it again."""
        link = self._link_notes()
        if self.from_link(name):
            link.notes.append(f"{name}: {why}")
            link.adopted.discard(name)
        self.reset(name)
        if name in st.query_params:
            del st.query_params[name]
        wrote(self.table.page, address())

    def note(self, text: str) -> None:
        """Add a note about the link being shown (e.g. the model it named is not on this server)."""
        link = self._link_notes()
        if link is None:
            link = st.session_state[NOTES] = LinkNotes(self.table.page)
        link.notes.append(text)

    def _link_notes(self) -> LinkNotes | None:
        link = st.session_state.get(NOTES)
        return link if link is not None and link.page == self.table.page else None

    def notes(self) -> list[str]:
        link = self._link_notes()
        return list(link.notes) if link is not None else []

    def show_notes(self) -> None:
        """The notes about the link this page was opened with, if any (until the next change)."""
        notes = self.notes()
        if notes:
            st.warning(literal(t("app.link.notes", notes=t("app.list_separator").join(notes))),  # a link's text
                       icon=":material/link_off:")  # (a model name, a key) is never read as markdown

    # -- the URL out
    def params(self, values: dict[str, Any] | None = None) -> dict[str, str]:
        """The view as query parameters: only values that differ from their defaults, plus the version.
        `values` ({name: value}) stands in for the current state where it names a prop (e.g. the settings
        of a finished run, for a link that shows it again)."""
        values = values or {}
        out = {}
        for prop in self.table.props:
            value = values[prop.name] if prop.name in values else self.get(prop.name)
            if prop.url and value is not None and value != self.default(prop.name, values):
                out[prop.name] = prop.format(value)
        return {VERSION_PARAM: str(FORMAT_VERSION), **out} if out else {}

    def sync_url(self) -> None:
        """Write the view into the URL (call at the end of a run, and of a fragment that changes state)."""
        params = self.params()
        if params != address() or [params] != written(self.table.page)[-1:]:  # the browser's may be behind
            st.query_params.from_dict(params)
        wrote(self.table.page, params)

    def link(self, values: dict[str, Any] | None = None) -> str:
        """The full link to this view, or to it with `values` (as in `params`); relative when the browser's
        address is unknown, as under AppTest."""
        base = st.context.url or f"/{self.table.page if self.table.page != 'home' else ''}"
        query = urlencode(self.params(values))
        return f"{base}?{query}" if query else base
