"""Home: what Attention Playground is, attention of the active model at once, its architecture, and one-click
cards into every page."""

from __future__ import annotations

import streamlit as st

from ui import concept_ui, display
from ui import model_registry as registry
from ui.catalog import PAGES
from transformer import charts
from transformer.export import chart_filename

# card text per page (title and icon come from the navigation's catalog)
CARDS = {
    "pages/explore/decode.py": (
        "Watch the model write its answer one token at a time, with the attention behind each step.",
        "Try: force a wrong token at step 3 and see whether the model recovers."),
    "pages/explore/attention.py": (
        "Every head of every layer, encoder, decoder and cross-attention, side by side.",
        "Try: find the head that draws the clearest anti-diagonal."),
    "pages/concepts/masks.py": (
        "Padding and causal masks, taken from a real forward pass over a padded batch.",
        "Try: switch off the causal mask and watch the predictions change."),
    "pages/concepts/positions.py": (
        "Sines and cosines that tell the model where each token stands.",
        "Try: decode without positions and see the reversal fall apart."),
    "pages/models/train.py": (
        "Train a small model in your browser session and watch its attention form.",
        "Try: train on copy, then compare its diagonal with reverse's anti-diagonal."),
    "pages/models/checkpoints.py": (
        "Save, load and download models as single .safetensors files.",
        "Try: save the model you trained and make it the active one."),
}


st.title("Attention Playground")
st.markdown(
    "A small Transformer, trained on toy tasks, that you can open up. Type an input and see where the model "
    "looks while it writes each output token; switch its masks and positions off; train your own and watch "
    "attention appear. Every picture comes from a real forward pass of the active model (sidebar)."
)

key, bundle = concept_ui.active_model()
task, cfg = bundle.task, bundle.config

left, right = st.columns([2, 3], gap="large")
with left:
    st.subheader("Attention at a glance")
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}\Big)V")
    st.markdown(f"**{task.title}.** {task.description}")
    text = st.text_input("Input", task.examples()[0], key=f"home_input:{task.name}",
                         help="Any input the model's tokenizer knows; press Enter to decode it.")
    try:
        result = concept_ui.decode(key, registry.version(key), text)
    except ValueError as exc:  # TokenizerError, DecodeError: the library's own message
        st.error(f"This input cannot be decoded: {exc}", icon=":material/error:")
        result = None
    if result is not None:
        st.markdown(f"**Output:** {concept_ui.output(result.output_text)}")
        expected = task.answer(text)
        if expected is not None:
            st.markdown("✓ correct" if result.output_text == expected else f"✗ the right answer is `{expected}`")
with right:
    if result is not None:
        layer, head = concept_ui.focus_head(result, task, text)
        cross = result.cross[layer]
        weights = (cross[head] if head is not None else cross.mean(0)).numpy()
        rows, cols = charts.token_labels(result.output_pieces), charts.token_labels(result.source_pieces)
        extra = "" if head is not None else "mean of heads"
        fig = charts.attention_heatmap(weights, rows, cols, charts.attention_title("cross", layer, head, extra=extra))
        display.show_figure(fig, chart_filename(task.name, "cross", layer, head), key="fig-home-cross",
                            width="content")
        with_head = f"layer {layer + 1}, head {head + 1}, the head that best follows the task's alignment" \
            if head is not None else f"layer {layer + 1}, averaged over its {cfg.n_heads} heads"
        st.caption(f"Cross-attention ({with_head}). Each row is one output token; bright cells show which "
                   "input tokens the model looked at while writing it.")

st.subheader("Where to go next")
cards = [info for info in PAGES if info.path in CARDS]
for start in range(0, len(cards), 3):
    for col, info in zip(st.columns(3), cards[start:start + 3]):
        what, idea = CARDS[info.path]
        with col, st.container(border=True, height="stretch"):
            st.page_link(info.path, label=f"**{info.title}**", icon=info.icon)
            st.markdown(what)
            st.caption(idea)

st.subheader("The active model, layer by layer")
st.markdown(
    "An encoder reads the whole input at once; a decoder writes the output one token at a time. Attention "
    "appears three times, colour-coded here and on every page: **encoder self-attention** (input tokens look at "
    "each other), **masked decoder self-attention** (output tokens look at earlier outputs only), and "
    "**cross-attention** (each output token looks at the encoded input)."
)
fig = charts.architecture_diagram(cfg.n_enc_layers, cfg.n_dec_layers, cfg.n_heads, cfg.d_model, cfg.d_ff,
                                  cfg.norm, cfg.positional, title=f"The {bundle.name} model")
display.show_figure(fig, f"{task.name}_architecture", key="fig-home-arch", width="content")
