"""Read the code: the Annotated Transformer, live. The network's running source in the paper's order, each section
beside what that code computed for the active model on the page's input (one detailed traced pass over the input
and the model's own greedy output), with the attention kind, layer and head its sections show."""

from __future__ import annotations

import json

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer import charts
from transformer.analysis.code_tour import Tour, tour
from transformer.analysis.tour_order import KEYS
from transformer.network.decoding import DecodeError
from transformer.network.tokenizers import TokenizerError
from ui import decodes
from ui import model_registry as registry
from ui.display import output
from ui.markdown import literal
from ui.panels.code_sections import SECTIONS, TITLES, Shown, indent_wrapped_lines
from ui.state import View
from ui.tables.attention import KINDS
from ui.tables.code import CODE
from ui.widgets import expected, finish, header, input_picker, layer_or_head, require_model, verdict
from transformer.i18n import t

SCROLLS = "code_scrolls"  # session key: how often a section was picked here (each pick scrolls to it again)
# Scrolls to a section's heading, and again whenever the page above it grows while it is still being drawn (charts,
# code blocks: on a fresh server some came after the fixed times this once waited for), until the reader scrolls or
# clicks, or for HOLD_MS
SCROLL_JS = """<style>[data-testid=stElementContainer]:has(#ap-code-scroll) {{ display: none; }}</style>
<script id="ap-code-scroll" data-pick="{pick}">
(() => {{
  const go = () => document.getElementById({section})?.scrollIntoView({{block: "start"}});
  const page = document.querySelector("[data-testid=stMainBlockContainer]");
  const held = new ResizeObserver(go);
  const gestures = ["wheel", "touchstart", "keydown", "mousedown"];
  const stop = () => {{ held.disconnect(); gestures.forEach((g) => window.removeEventListener(g, stop, true)); }};
  go();
  if (page) held.observe(page);
  gestures.forEach((g) => window.addEventListener(g, stop, true));
  setTimeout(stop, {hold_ms});
}})();
</script>"""
HOLD_MS = 6000


def intro() -> DeltaGenerator:
    notes = header(t("app.page.code"))
    st.markdown(t("code.intro"))
    return notes


def traced(key: str, version: int, text: str, output_ids: tuple) -> Tour:
    """The detailed traced pass over `text` and its greedy output, kept in the decodes' byte-bounded cache."""
    return decodes.memo("code_tour", _traced, key, version, text, output_ids)


def _traced(key: str, version: int, text: str, output_ids: tuple) -> Tour:
    bundle = registry.bundle_for(key)
    return tour(bundle.model, bundle.tokenizer, text, list(output_ids))


def index(view: View, name: str, count: int, default: int, what: str) -> int:
    """The 0-based layer or head of 1-based prop `name` (None: `default`); one the model lacks is refused (`what`:
    the catalog key of the note)."""
    value = view.get(name)
    if value is not None and value > count:
        view.refuse(name, t(what, n=count))
        value = None
    return default if value is None else value - 1


def picks(view: View, maps: dict, cfg) -> tuple[str, int, int]:
    """The attention kind, layer and head the sections show (0-based): the ones picked, else the head that best
    follows the task's alignment (layer 1, head 1 without one)."""
    kind_col, layer_col, head_col = st.columns([2, 1, 1])
    kind = view.widget("kind", kind_col.selectbox, t("code.kind"), KINDS, format_func=charts.KIND_TITLES.get)
    amap = maps[kind]
    best_layer, best_head, _ = amap.best_aligned() or (0, 0, None)
    layer = index(view, "layer", amap.layers, best_layer, "code.only_layers")
    head = index(view, "head", amap.heads, best_head, "code.only_heads")
    layer_or_head(view, "layer", amap.layers, layer, layer_col)
    layer_or_head(view, "head", amap.heads, head, head_col)
    return kind, layer, head


def contents(view: View) -> str:
    """The sections as pills, bound to the `section` prop: picking one scrolls to it."""
    def picked() -> None:
        st.session_state[SCROLLS] = st.session_state.get(SCROLLS, 0) + 1

    return view.widget("section", st.pills, t("code.go_to"), KEYS, format_func=TITLES.get, required=True,
                       on_change=picked)


def scroll_to(section: str) -> None:
    """Open the page at `section` (a link's, or one just picked); the first opens at the top."""
    pick = st.session_state.get(SCROLLS, 0)
    if pick or section != KEYS[0]:
        st.html(SCROLL_JS.format(pick=pick, section=json.dumps(section), hold_ms=HOLD_MS),
                unsafe_allow_javascript=True)


def main() -> None:
    view = CODE.view()
    notes = intro()
    key, bundle = require_model()
    version = registry.version(key)
    decodes.readable_link_input(view, key, bundle)
    text = input_picker(view, bundle, help_text=t("code.input_help"))
    try:
        greedy = decodes.greedy(key, version, text)
        maps = decodes.maps(key, version, text)
        passed = traced(key, version, text, tuple(greedy.output_ids))
    except (TokenizerError, DecodeError) as exc:
        st.error(t("attention.cannot_decode", name=literal(bundle.name), error=literal(str(exc))),
                 icon=":material/error:")
        finish(view, notes)
        return
    answer, _ = expected(bundle.task, text)
    st.markdown(t("home.output", output=output(greedy.output_text), verdict=verdict(greedy.output_text, answer)))
    with st.container(border=True):
        kind, layer, head = picks(view, maps, bundle.config)
        section = contents(view)
    shown = Shown(passed, greedy, bundle, (key, version, text), kind, layer, head)
    for name in KEYS:
        SECTIONS[name](shown)
    indent_wrapped_lines()
    scroll_to(section)
    finish(view, notes)


main()
