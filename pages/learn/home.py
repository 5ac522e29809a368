"""Home: what Attention Playground is, attention of the active model at once, its architecture, and one-click
cards into every page."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import display, glance, runtime
from ui import model_registry as registry
from ui.catalog import PAGES
from ui.code_links import code_link
from ui.glance import Glance
from ui.lessons import FORCE
from ui.markdown import code, literal
from ui.state import View
from ui.tables.home import HOME
from ui.widgets import finish, header, require_key, verdict
from transformer import charts
from transformer.bundle import ModelFacts
from transformer.charts.export import chart_filename
from transformer.i18n import t

# card text per page, (what it shows, what to try) as catalog keys (title and icon come from the navigation's
# catalog); each "Try" of a model is held to the shipped models by tests/app/test_lessons.py
CARDS = {
    "pages/learn/code.py": ("home.card.code", "home.try.code"),
    "pages/explore/decode.py": ("home.card.decode", "home.try.decode"),
    "pages/explore/attention.py": ("home.card.attention", "home.try.attention"),
    "pages/explore/errors.py": ("home.card.errors", "home.try.errors"),
    "pages/explore/compare.py": ("home.card.compare", "home.try.compare"),
    "pages/concepts/masks.py": ("home.card.masks", "home.try.masks"),
    "pages/concepts/positions.py": ("home.card.positions", "home.try.positions"),
    "pages/models/train.py": ("home.card.train", "home.try.train"),
    "pages/models/checkpoints.py": ("home.card.checkpoints", "home.try.checkpoints"),
}
LINKS = {"pages/explore/decode.py": {"model": "reverse", "input": FORCE.example, "step": str(FORCE.step)}}


def intro() -> DeltaGenerator:
    notes = header(t("home.title"))
    st.markdown(t("home.intro"))
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}\Big)V")
    return notes


def decoded(view: View, key: str) -> tuple[str, Glance | None, str]:
    """(input, its decode, "") or (input, None, the library's message). The default input's decode may come from
    an earlier server (ui/glance.py: the first page then needs no torch). An input from a link that the model cannot
    read gives way to the default input, with a note."""
    text = view.get("input")
    try:
        with runtime.torch_spinner():  # a decode not kept computes, and may import torch
            seen = glance.default(key) if text is None else glance.of(key, text)
        return seen.input, seen, ""
    except ValueError as exc:  # TokenizerError, DecodeError: the library's own message
        if not view.from_link("input"):
            return glance.default_input(key) if text is None else text, None, str(exc)
        view.refuse("input", t("home.cannot_decode_link", error=exc))
        return decoded(view, key)


GLANCE_TEXT_PX = 320  # the input and the output beside the chart


def at_a_glance(view: View, key: str, facts: ModelFacts) -> None:
    """The input, the model's output against the task's answer, and the cross-attention behind it."""
    task, cfg = facts.task, facts.config
    text, result, error = decoded(view, key)
    figure = None if result is None else display.cross_figure(result, *result.focus)
    chart = GLANCE_TEXT_PX if figure is None else display.label_width(figure)
    left, right = display.fitted_row("home_glance", [GLANCE_TEXT_PX, chart])  # one above the other where narrow
    with left:
        st.subheader(t("home.glance"))
        st.markdown(t("home.task", title=task.title, description=task.description))
        view.widget("input", st.text_input, t("app.input"), to_widget=lambda _: text, max_chars=200,
                    help=t("home.input_help"))
        if result is None:
            st.error(t("home.cannot_decode", error=literal(str(error))), icon=":material/error:")
            return
        st.markdown(t("home.output", output=display.output(result.output_text),
                      verdict=verdict(result.output_text, result.answer)))
        if result.answer is not None and result.output_text != result.answer:
            st.markdown(t("home.right_answer", answer=code(result.answer)))
    with right:
        layer, head = result.focus
        display.cross_heatmap(result, layer, head, filename=chart_filename(task.name, "cross", layer, head),
                              key="fig-home-cross", csv=False, figure=figure)
        which = t("home.focus_head", layer=layer + 1, head=head + 1) if head is not None \
            else t("home.focus_mean", layer=layer + 1, heads=cfg.n_heads)
        st.caption(t("home.cross_caption", which=which))
        code_link("attention", text=text, kind="cross", layer=layer, head=head)


def cards() -> None:
    st.subheader(t("home.next"))
    shown = [info for info in PAGES if info.path in CARDS]
    for start in range(0, len(shown), 3):
        for col, info in zip(st.columns(3), shown[start:start + 3]):
            what, idea = CARDS[info.path]
            with col, st.container(border=True, height="stretch"):
                st.page_link(info.path, label=f"**{info.title}**", icon=info.icon, query_params=LINKS.get(info.path))
                st.markdown(t(what))
                st.caption(t(idea, example=code(FORCE.example), step=FORCE.step, recovers=code(FORCE.recovers),
                             loses_place=code(FORCE.loses_place)))  # the decode card's lesson (ui/lessons.py)


def architecture(facts: ModelFacts, name: str) -> None:
    cfg, task = facts.config, facts.task
    st.subheader(t("home.layers"))
    st.markdown(t("home.layers_intro"))
    fig = charts.architecture_diagram(cfg.n_enc_layers, cfg.n_dec_layers, cfg.n_heads, cfg.d_model, cfg.d_ff,
                                      cfg.norm, cfg.positional, title=t("home.model_title", name=name))
    display.show_figure(fig, f"{task.name}_architecture", key="fig-home-arch", width="content")


def main() -> None:
    view = HOME.view()
    notes = intro()
    key = require_key()
    facts = registry.facts(key)  # from the checkpoint's header: the page needs no weights when its decode is kept
    at_a_glance(view, key, facts)
    cards()
    architecture(facts, registry.display_name(key))
    finish(view, notes)


main()
