"""Every page settles on every hostile link (AppTest), issue 28: `/decode?v=1&input=1` reran the page without
end (it refused the input and reran, the address still held it, and the rerun adopted it again).

The links are built per page from its state table's props: each link sets every prop of the page to one
unreadable value at once (`1`, `!`, empty, zero, negative, nan, inf, a 1,500-digit number, a 5,000-character
value, a head list), and each prop in turn to values it takes that the page may still refuse (an input the
model cannot read, a step, layer or cell past the model's, an unknown model, every option of a choice), plus
an unknown key and a newer format. Each page must settle within MAX_RUNS script runs and SECONDS, without an
exception, leaving each value the link named either in the address as named or out of it with a note (the
default view); a note never repeats a long value whole."""

from __future__ import annotations

import time

import pytest

from helpers.repo import needs_reverse, open_link
from ui.catalog import PAGES
from ui.markdown import plain
from ui.state import Choice, Int, IntList, IntMap, Prop, Text, View
from ui.tables import TABLES
from ui.tables.positions import IntSet
from ui.tables.shared import HeadSet, ModelProp

pytestmark = needs_reverse

MAX_RUNS = 2  # the decode page reruns once after refusing a linked input
LOOP = 6  # runs after which a page is stopped: it would not settle
SECONDS = 30  # per link, on a busy 2-core machine; a settled page takes well under a second
CUT = 100  # no note holds this many characters of a hostile value
HUGE, LONG = "9" * 1500, "x" * 5000  # under and over the longest query value the app parses (MAX_PARAM_CHARS)
EVERY_PROP = ("1", "!", "", "0", "-1", "nan", "inf", HUGE, LONG, "cross:L1H1,junk")
SCRIPTS = {info.url_path or "home": info.path for info in PAGES}


def taken(prop: Prop) -> tuple[str, ...]:
    """Values `prop` parses that its page may still refuse."""
    if isinstance(prop, ModelProp):
        return "nope", "uploaded:deadbeef", "../../etc/passwd"
    if isinstance(prop, Text):
        return "1", "!", "ÿ" * prop.max_chars
    if isinstance(prop, Choice):
        return tuple(prop.format(option) for option in prop.options)
    if isinstance(prop, IntMap):
        return "1:99999", "9999:4"
    if isinstance(prop, IntList):
        return ",".join([str(prop.hi)] * prop.length),
    if isinstance(prop, IntSet):
        return str(prop.hi),
    if isinstance(prop, HeadSet):
        return "cross:L64H64",
    if isinstance(prop, Int):
        return str(prop.lo), str(min(prop.hi, 64))  # past any model's layers, heads, steps
    return ()


def links() -> list:
    out = []
    for page, table in TABLES.items():
        names = [prop.name for prop in table.props if prop.url]
        out += [pytest.param(page, dict.fromkeys(names, raw), id=f"{page}-every-{raw[:8]!r}") for raw in EVERY_PROP]
        out += [pytest.param(page, {prop.name: raw}, id=f"{page}-{prop.name}={raw[:12]!r}")
                for prop in table.props if prop.url for raw in taken(prop)]
        out += [pytest.param(page, {"nonsense": "1", LONG: "1"}, id=f"{page}-unknown-keys"),
                pytest.param(page, {"v": "2", names[0]: "1"}, id=f"{page}-newer-format")]
    return out


@pytest.fixture
def runs(monkeypatch) -> list[int]:
    """[script runs so far]: app.py adopts the link once per run; a page still running after LOOP runs is
    stopped with an exception, so a loop fails here at once instead of at AppTest's timeout."""
    count = [0]
    adopt = View.adopt_link

    def counted(view: View) -> None:
        count[0] += 1
        if count[0] > LOOP:
            raise RuntimeError(f"{count[0]} script runs: the page does not settle")
        adopt(view)

    monkeypatch.setattr(View, "adopt_link", counted)
    return count


def defaults(prop: Prop) -> set[str]:
    """How the prop's defaults are written (a link naming one leaves the address without it)."""
    values = (prop.default, *(prop.defaults_by or {}).values())
    return {prop.format(value) for value in values if value is not None}


@pytest.mark.parametrize("page, query", links())
def test_a_hostile_link_settles_with_a_note_and_the_default_view(runs, page, query):
    started = time.perf_counter()
    at = open_link(SCRIPTS[page], {"v": "1", **query})
    seconds = time.perf_counter() - started
    assert not at.exception, [e.value for e in at.exception]
    assert runs[0] <= MAX_RUNS and seconds < SECONDS, (runs[0], seconds)
    notes = " ".join(plain(w.value) for w in at.warning if "could not be followed" in w.value)
    for raw in query.values():
        assert len(raw) < CUT or raw[:CUT] not in notes, "a note repeats a long value whole"
    table = TABLES[page]
    address = dict(at.query_params)
    assert set(address) <= {"v"} | {p.name for p in table.props if p.url}, address  # no unknown key stays
    for name, raw in query.items():
        prop = table.by_name.get(name)
        if prop is None or not prop.url or "v" in query and query["v"] != "1":
            assert notes, f"no note on {name[:40]!r}"
        elif name not in address:  # the default view: the link's value was refused, or is the default
            assert raw in defaults(prop) or f"{name}:" in notes, (name, raw[:40], notes[:500])
        else:
            assert address[name] == raw, (name, address[name][:40], raw[:40])  # kept as the link named it
