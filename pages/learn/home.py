"""Home: what Attention Playground is, attention of the active model at once, its architecture, and one-click
cards into every page."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, display
from ui import model_registry as registry
from ui.catalog import PAGES
from ui.code_links import code_link
from ui.lessons import FORCE
from ui.markdown import code, literal
from ui.state import View
from ui.tables.home import HOME
from ui.widgets import current_input, finish, header, require_model, verdict
from transformer import charts
from transformer.network.decoding import DecodeResult
from transformer.charts.export import chart_filename
from transformer.analysis.heads import focus_head

# card text per page (title and icon come from the navigation's catalog); each "Try" of a model is held to the
# shipped models by tests/app/test_lessons.py
CARDS = {
    "pages/learn/code.py": (
        "The model's code in the order of the paper, each line beside the tensors it computed for your input.",
        "Try: pick a cross-attention head and follow your input from its embedding to its output."),
    "pages/explore/decode.py": (
        "Watch the model write its answer one token at a time, with the attention behind each step.",
        (f"Try: the reverse model on {code(FORCE.example)} (this link opens it at step {FORCE.step}). Force "
         f"{code(FORCE.recovers)} there: it writes it, then recovers and writes every later letter right. Force "
         f"{code(FORCE.loses_place)}, the letter due one step later, and it loses its place.")),
    "pages/explore/attention.py": (
        "Every head of every layer, encoder, decoder and cross-attention, side by side.",
        ("Try: with the reverse model, the page opens on the cross-attention head that follows the reversal most "
         "closely; compare its sharp anti-diagonal with the other heads.")),
    "pages/concepts/masks.py": (
        "Padding and causal masks, taken from a real forward pass over a padded batch.",
        ("Try: switch off the causal mask: the reverse model now reads the answer early, and some of its "
         "predictions change.")),
    "pages/concepts/positions.py": (
        "Sines and cosines that tell the model where each token stands.",
        "Try: decode without positions: the reverse model's output turns wrong and its anti-diagonal fades."),
    "pages/models/train.py": (
        "Train a small model in your browser session and watch its attention form.",
        ("Try: train on copy (or pick the pretrained copy model), then compare its diagonal with reverse's "
         "anti-diagonal.")),
    "pages/models/checkpoints.py": (
        "Save, load and download models as single .safetensors files.",
        "Try: save the model you trained and make it the active one."),
}
LINKS = {"pages/explore/decode.py": {"model": "reverse", "input": FORCE.example, "step": str(FORCE.step)}}


def intro() -> DeltaGenerator:
    notes = header("Attention Playground")
    st.markdown(
        "A small Transformer, trained on toy tasks, that you can open up. Type an input and see where the model "
        "looks while it writes each output token; switch its masks and positions off; train your own and watch "
        "attention appear. Every picture comes from a real forward pass of the active model (sidebar)."
    )
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}\Big)V")
    return notes


def decoded(view: View, key: str, bundle) -> tuple[str, DecodeResult | None, str]:
    """(input, its decode, "") or (input, None, the library's message). An input from a link that the model
    cannot read gives way to the default input, with a note."""
    text = current_input(view, bundle.examples())
    try:
        return text, decodes.greedy(key, registry.version(key), text), ""
    except ValueError as exc:  # TokenizerError, DecodeError: the library's own message
        if not view.from_link("input"):
            return text, None, str(exc)
        view.refuse("input", f"this model cannot decode it ({exc})")
        return decoded(view, key, bundle)


GLANCE_TEXT_PX = 320  # the input and the output beside the chart


def at_a_glance(view: View, key: str, bundle) -> None:
    """The input, the model's output against the task's answer, and the cross-attention behind it."""
    task, cfg = bundle.task, bundle.config
    text, result, error = decoded(view, key, bundle)
    focus = None if result is None else focus_head(result.cross.numpy(), task, text)
    figure = None if focus is None else display.cross_figure(result, *focus)
    chart = GLANCE_TEXT_PX if figure is None else display.label_width(figure)
    left, right = display.fitted_row("home_glance", [GLANCE_TEXT_PX, chart])  # one above the other where narrow
    with left:
        st.subheader("Attention at a glance")
        st.markdown(f"**{task.title}.** {task.description}")
        view.widget("input", st.text_input, "Input", to_widget=lambda _: text, max_chars=200,
                    help="Any input the model's tokenizer knows; press Enter to decode it.")
        if result is None:
            st.error(f"This input cannot be decoded: {literal(str(error))}", icon=":material/error:")
            return
        expected = task.answer(text)
        st.markdown(f"**Output:** {display.output(result.output_text)} {verdict(result.output_text, expected)}")
        if expected is not None and result.output_text != expected:
            st.markdown(f"The right answer is {code(expected)}.")
    with right:
        layer, head = focus
        display.cross_heatmap(result, layer, head, filename=chart_filename(task.name, "cross", layer, head),
                              key="fig-home-cross", csv=False, figure=figure)
        with_head = f"layer {layer + 1}, head {head + 1}, the head that best follows the task's alignment" \
            if head is not None else f"layer {layer + 1}, averaged over its {cfg.n_heads} heads"
        st.caption(f"Cross-attention ({with_head}): bright cells show which input tokens the model looked at "
                   "while choosing each output token.")
        code_link("attention", text=text, kind="cross", layer=layer, head=head)


def cards() -> None:
    st.subheader("Where to go next")
    shown = [info for info in PAGES if info.path in CARDS]
    for start in range(0, len(shown), 3):
        for col, info in zip(st.columns(3), shown[start:start + 3]):
            what, idea = CARDS[info.path]
            with col, st.container(border=True, height="stretch"):
                st.page_link(info.path, label=f"**{info.title}**", icon=info.icon, query_params=LINKS.get(info.path))
                st.markdown(what)
                st.caption(idea)


def architecture(bundle) -> None:
    cfg, task = bundle.config, bundle.task
    st.subheader("The active model, layer by layer")
    st.markdown(
        "An encoder reads the whole input at once; a decoder writes the output one token at a time. Attention "
        "appears three times, colour-coded here and on every page: **encoder self-attention** (input tokens look "
        "at each other), **masked decoder self-attention** (output tokens look at earlier outputs only), and "
        "**cross-attention** (each output token looks at the encoded input)."
    )
    fig = charts.architecture_diagram(cfg.n_enc_layers, cfg.n_dec_layers, cfg.n_heads, cfg.d_model, cfg.d_ff,
                                      cfg.norm, cfg.positional, title=f"The {bundle.name} model")
    display.show_figure(fig, f"{task.name}_architecture", key="fig-home-arch", width="content")


def main() -> None:
    view = HOME.view()
    notes = intro()
    key, bundle = require_model()
    at_a_glance(view, key, bundle)
    cards()
    architecture(bundle)
    finish(view, notes)


main()
