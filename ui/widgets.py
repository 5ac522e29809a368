"""Widgets and checks that several pages show, each written once: the model guard, the input box with the
task's examples, the layer and head pickers, the expected answer and the right/wrong verdict, the "longer than
trained" warning, and how a token and a probability read in text."""

from __future__ import annotations

import html

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer.bundle import ModelBundle
from transformer.charts.common import display_piece
from transformer.i18n import t
from transformer.tasks import TaskError

from . import model_registry as registry
from .state import View

PICKERS = {"layer": ("masks.layer", "attention.layer_n"), "head": ("masks.head", "attention.head_n")}  # label, option


def no_model() -> str:
    """What a page says when the server has no model at all."""
    return t("app.no_model")


def require_key() -> str:
    """The registry key of the active model; says so and stops the page when there is none."""
    key = registry.active_key()
    if key is None:
        st.warning(no_model(), icon=":material/info:")
        st.stop()
    return key


def require_model() -> tuple[str, ModelBundle]:
    """(registry key, bundle) of the active model; says so and stops the page when there is none."""
    key = require_key()
    return key, registry.bundle_for(key)


def default_input(examples: list[str]) -> str:
    """Every page's input until one is chosen: the model's first example."""
    return examples[0] if examples else ""


def current_input(view: View, examples: list[str]) -> str:
    """The shared input text: the one chosen, or the model's first example until one is."""
    text = view.get("input")
    return default_input(examples) if text is None else text


def input_picker(view: View, bundle: ModelBundle, help_text: str) -> str:
    """The input box and the task's held-out examples as pills, both bound to the shared `input` prop;
    returns the input to use."""
    examples = bundle.examples()
    text = current_input(view, examples)
    # one above the other: beside the box, the pills ran past the page's edge at 1024 px instead of wrapping
    view.widget("input", st.text_input, t("app.input"), to_widget=lambda _: text, max_chars=200, help=help_text,
                width=480)
    # the example in use is highlighted; clicking it again deselects it and keeps the text
    view.widget("input", st.pills, t("app.examples"), examples, slot="examples",
                to_widget=lambda _: text if text in examples else None, from_widget=lambda v: v)
    return text


def layer_or_head(view: View, prop: str, count: int, shown: int, place=st, what: str | None = None,
                  slot: str = "") -> int:
    """A selectbox over `count` layers or heads (`what`, else `prop`: "layer" or "head"), each named 1-based
    ("Layer 2"), showing the 0-based `shown` and bound to the 1-based prop `prop`, in `place` (a column, say);
    returns the 0-based pick."""
    label, option = PICKERS[what or prop]
    return view.widget(prop, place.selectbox, t(label), range(count), slot=slot, to_widget=lambda _: shown,
                       from_widget=lambda i: i + 1, format_func=lambda i: t(option, n=i + 1))


def verdict(output: str, answer: str | None) -> str:
    """A right/wrong badge (markdown) for `output` against the task's answer; "" when there is none."""
    if answer is None:
        return ""
    return (f":green-badge[:material/check: {t('app.right')}]" if output == answer
            else f":red-badge[:material/close: {t('app.wrong')}]")


def token_text(piece: str) -> str:
    """A token for markdown code spans and widget labels (not HTML): a space shown as ␣."""
    return html.unescape(display_piece(piece))


def expected(task, text: str) -> tuple[str | None, str]:
    """(the task's right answer, "") or (None, why there is none)."""
    try:
        return task.target(text), ""
    except TaskError as exc:
        return None, str(exc)


def warn_if_longer_than_trained(task, text: str) -> None:
    if len(text) > task.max_source_chars:
        st.warning(t("app.longer_than_trained", n=task.max_source_chars), icon=":material/warning:")


def header(title: str) -> DeltaGenerator:
    """The page title; returns the place for the notes about the link the page was opened with (`finish`
    fills it once the page knows what it could not show)."""
    st.title(title)
    return st.container()


def finish(view: View, notes: DeltaGenerator) -> None:
    """End of a page run: show what the link could not honour, and write the view into the URL."""
    with notes:
        view.show_notes()
    view.sync_url()
