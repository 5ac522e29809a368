"""The code page's sections, in the paper's order: each a heading with its anchor, a short explanation, the running
source behind it (transformer.analysis.code_tour) and what that code computed for the page's input, read from one
detailed traced pass (`Tour`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from transformer import charts
from transformer.analysis.code_tour import BY_KEY, SIDES, SUBLAYERS, Tour, source, where
from transformer.bundle import ModelBundle
from transformer.network.decoding import DecodeResult
from ui import decodes, display
from ui.markdown import code
from ui.widgets import pct, token_text

TITLES = {
    "embeddings": "1 · Embeddings and positions",
    "attention": "2 · Scaled dot-product attention",
    "multi_head": "3 · Multi-head attention",
    "masks": "4 · The masks",
    "feed_forward": "5 · The feed-forward network",
    "residual": "6 · Residual connection and layer norm",
    "encoder_layer": "7 · The encoder layer and its stack",
    "decoder_layer": "8 · The decoder layer and its stack",
    "generator": "9 · The generator",
    "greedy": "10 · Greedy decoding",
}
VECTOR_PX = 280  # a chart of one vector per token needs about this much across before it is stacked


@dataclass(frozen=True)
class Shown:
    """What the sections show: the detailed pass, the greedy decode it follows (the one every page traces), the
    model, the cache name of the decode (model key, version, input) and the attention picked (0-based)."""

    tour: Tour
    greedy: DecodeResult
    bundle: ModelBundle
    name: tuple
    kind: str
    layer: int
    head: int

    def stack_layer(self, side: str) -> int:
        """The picked layer where `side`'s stack has it, else its last layer."""
        layers = self.bundle.config.n_enc_layers if side == "encoder" else self.bundle.config.n_dec_layers
        return min(self.layer, layers - 1)

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        queries, keys = self.tour.labels(kind)
        return charts.token_labels(queries), charts.token_labels(keys)

    def where_shown(self) -> str:
        return f"{charts.KIND_TITLES[self.kind].lower()}, layer {self.layer + 1}, head {self.head + 1}"


def code_of(key: str) -> None:
    """The running source of every object behind a section, each under the file and name it lives at."""
    for obj in BY_KEY[key].code:
        st.caption(f":material/description: `{where(obj)}`")
        st.code(source(obj), language="python", line_numbers=True, wrap_lines=True)


def chart(shown: Shown, section: str, name: str, build, width: str = "content") -> None:
    """A figure built once per decode, section, chart and attention picked (decodes cache), shown with its export."""
    fig = decodes.figure((*shown.name, "code", section, name, shown.kind, shown.layer, shown.head), build)
    display.show_figure(fig, f"{shown.bundle.task.name}_code_{section}_{name}", key=f"code-{section}-{name}",
                        width=width)


def charts_row(shown: Shown, section: str, items: list[tuple[str, object, bool]]) -> None:
    """Charts side by side where each has room, else one above the other: (name, build, is a matrix) each; a
    matrix (square cells) keeps its own size, a chart of token vectors takes the width it gets."""
    figures = [decodes.figure((*shown.name, "code", section, name, shown.kind, shown.layer, shown.head), build)
               for name, build, _ in items]
    widths = [display.label_width(fig) if matrix else VECTOR_PX for fig, (_, _, matrix) in zip(figures, items)]
    for box, (name, build, matrix) in zip(display.fitted_row(f"code_{section}_{items[0][0]}", widths), items):
        with box:
            chart(shown, section, name, build, "content" if matrix else "stretch")


def shapes(**named) -> str:
    """Markdown naming each tensor's shape: `q` (12, 16) · `k` (12, 16)."""
    return " · ".join(f"{code(name)} {tuple(array.shape)}" for name, array in named.items())


def heading(key: str) -> None:
    st.header(TITLES[key], anchor=key, divider="gray")


def sublayer_input(cfg) -> str:
    """What a sublayer reads, as a chart title: its input after the layer norm (pre-norm), else the input itself."""
    return "Input, normalised" if cfg.norm == "pre" else "Input"


def vectors(values: np.ndarray, labels: list[str], title: str, what: str = "dimension", bound: float | None = None):
    return lambda: charts.token_vectors(values, labels, title, what, bound)


# --------------------------------------------------------------------------------------------- sections


def embeddings(shown: Shown) -> None:
    heading("embeddings")
    cfg = shown.bundle.config
    positions = {"sinusoidal": "This model adds the fixed sinusoidal table (`sinusoidal_table`).",
                 "learned": "This model adds position vectors it learned in training (an `nn.Embedding`).",
                 "none": "This model adds no positions at all: its positional term is zero.",
                 "rope": "This model adds nothing here: RoPE turns its queries and keys inside self-attention.",
                 "alibi": "This model adds nothing here: ALiBi biases its attention scores by distance."}
    st.markdown(f"Each token id picks one learned row of {cfg.d_model} numbers, which is multiplied by "
                f"√d_model = {math.sqrt(cfg.d_model):.1f} so that the positional term added next does not drown it. "
                f"{positions[cfg.positional]} The encoder reads your input this way, the decoder `<s>` and its own "
                "output so far.")
    code_of("embeddings")
    tokens, pos = shown.tour.embedding("src")
    labels = charts.token_labels(shown.tour.source_pieces)
    st.markdown("**What it computed for your input:** " + shapes(tokens=tokens, positions=pos))
    chart(shown, "embeddings", "sum", lambda: charts.embedding_sum(
        tokens, pos, labels, f"Encoder input · {len(labels)} tokens × {cfg.d_model} dimensions"), "stretch")


def attention(shown: Shown) -> None:
    heading("attention")
    kind, layer, head = shown.kind, shown.layer, shown.head
    site = (kind, layer)
    q, k, v, out = (shown.tour.tensor(*site, name)[head] for name in ("q", "k", "v", "heads"))
    scores, mask, weights = (part[head] for part in shown.tour.attention(kind, layer))
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}\Big)V")
    st.markdown(f"One head compares every query with every key: the dot products, divided by √d_k = "
                f"√{q.shape[1]} = {math.sqrt(q.shape[1]):.1f}, are its scores. A masked score becomes −∞, so its "
                "weight after the softmax is exactly 0; each row of weights sums to 1, and the head's output is "
                f"that weighted average of the values. Below: {shown.where_shown()} (pick another at the top).")
    code_of("attention")
    rows, cols = shown.labels(kind)
    st.markdown("**What it computed for your input:** " + shapes(q=q, k=k, v=v, scores=scores, heads=out))
    if (said := inside_attention(shown.bundle.config, kind)) is not None:
        st.caption(said)
    charts_row(shown, "attention", [("q", vectors(q, rows, "q: the queries"), False),
                                    ("k", vectors(k, cols, "k: the keys"), False),
                                    ("v", vectors(v, cols, "v: the values"), False)])
    title = charts.attention_title(kind, layer, head)
    charts_row(shown, "attention", [
        ("scores", lambda: charts.with_title_line(charts.scores_heatmap(scores, mask, rows, cols, title),
                                                  "scores q·k/√d_k"), True),
        ("weights", lambda: charts.with_title_line(charts.attention_heatmap(weights, rows, cols, title, mask=mask),
                                                   "weights after the softmax"), True)])
    chart(shown, "attention", "heads", vectors(out, rows, "The head's output"), "stretch")
    sums = weights.sum(-1)
    st.caption(f"Every row of the weights sums to 1 (here between {sums.min():.6f} and {sums.max():.6f}); "
               "these weights are the ones the decode and attention pages draw.")


def inside_attention(cfg, kind: str) -> str | None:
    """What the model does to q, k and the scores before this code sees them (qk-norm, RoPE, ALiBi), if anything."""
    said = []
    if cfg.qk_norm:
        said.append("In this model q and k arrive normalised (qk-norm: an RMSNorm of each head's queries and keys).")
    if kind != "cross" and cfg.positional == "rope":
        said.append("In this model's self-attention q and k arrive turned by their positions (RoPE).")
    if kind != "cross" and cfg.positional == "alibi":
        said.append("In this model's self-attention the scores include each head's ALiBi bias, −slope·|i − j|.")
    return " ".join(said) or None


def multi_head(shown: Shown) -> None:
    heading("multi_head")
    kind, cfg = shown.kind, shown.bundle.config
    side, layer = SIDES[kind], shown.layer
    inner = shown.tour.tensor(side, layer, SUBLAYERS[kind], "sublayer_in")
    concat, output = (shown.tour.tensor(kind, layer, name) for name in ("concat", "output"))
    d_head = cfg.d_model // cfg.n_heads
    source_of_keys = "the encoder's output (its memory)" if kind == "cross" else "the same input"
    st.markdown(f"The layer's input is projected by one matrix into {cfg.n_heads} heads of {d_head} numbers each "
                f"(queries from this input, keys and values from {source_of_keys}); every head attends on its own, "
                f"their outputs are laid side by side ({cfg.n_heads} × {d_head} = {cfg.d_model} numbers) and mixed "
                f"by W^O (`out_proj`). Below: {charts.KIND_TITLES[kind].lower()}, layer {layer + 1}.")
    code_of("multi_head")
    rows, _ = shown.labels(kind)
    st.markdown("**What it computed for your input:** " + shapes(input=inner, concat=concat, output=output))
    charts_row(shown, "multi_head", [("input", vectors(inner, rows, sublayer_input(cfg)), False),
                                     ("concat", vectors(concat, rows, f"{cfg.n_heads} heads, concatenated"), False),
                                     ("output", vectors(output, rows, "Output: concat · W^O"), False)])
    st.caption(f"In the concatenation, columns {shown.head * d_head}..{(shown.head + 1) * d_head - 1} are head "
               f"{shown.head + 1}'s output, the one section 2 shows.")


def masks(shown: Shown) -> None:
    heading("masks")
    st.markdown("A mask says which keys each query may attend to (True = may attend). The padding mask hides "
                "`<pad>` keys: a single input has none, so here it hides nothing (the Masks page shows a padded "
                "batch). The subsequent (causal) mask lets decoder position t see positions 0..t only, so in "
                "training it cannot read the token it must predict.")
    code_of("masks")
    items = []
    for kind, title in (("encoder_self", "Encoder self-attention"), ("decoder_self", "Decoder self-attention"),
                        ("cross", "Cross-attention")):
        mask = shown.tour.attention(kind, 0)[1][0]
        rows, cols = shown.labels(kind)
        items.append((kind, lambda mask=mask, rows=rows, cols=cols, title=title: charts.with_title_line(
            charts.mask_heatmap(mask, rows, cols, title), "mask as applied"), True))
    st.markdown("**The masks this pass applied** (read back from the trace, layer 1; every layer uses the same):")
    charts_row(shown, "masks", items)


def feed_forward(shown: Shown) -> None:
    heading("feed_forward")
    cfg = shown.bundle.config
    side = SIDES[shown.kind]
    layer = shown.stack_layer(side)
    site = (side, layer, "feed_forward")
    inner, hidden, out = (shown.tour.tensor(*site, name) for name in ("sublayer_in", "hidden", "sublayer_out"))
    st.latex(r"\mathrm{FFN}(x)=\max(0,\;xW_1+b_1)\,W_2+b_2")
    st.markdown(f"The same two-layer network runs on every position alone: {cfg.d_model} numbers in, {cfg.d_ff} "
                f"hidden ones, {cfg.d_model} out. The ReLU set {(hidden == 0).mean():.0%} of the hidden values to 0 "
                f"for your input. Below: the {side}'s layer {layer + 1}.")
    code_of("feed_forward")
    rows = charts.token_labels(shown.tour.source_pieces if side == "encoder" else shown.tour.target_pieces)
    st.markdown("**What it computed for your input:** " + shapes(input=inner, hidden=hidden, output=out))
    charts_row(shown, "feed_forward", [("input", vectors(inner, rows, sublayer_input(cfg)), False),
                                       ("hidden", vectors(hidden, rows, "Hidden: max(0, xW₁+b₁)", "hidden unit"),
                                        False),
                                       ("output", vectors(out, rows, "Output"), False)])


def residual(shown: Shown) -> None:
    heading("residual")
    cfg = shown.bundle.config
    side, layer = SIDES[shown.kind], shown.layer
    site = (side, layer, SUBLAYERS[shown.kind])
    x, change, out = (shown.tour.tensor(*site, name) for name in ("x", "sublayer_out", "out"))
    formula = ("x + \\mathrm{Sublayer}(\\mathrm{LayerNorm}(x))" if cfg.norm == "pre"
               else "\\mathrm{LayerNorm}(x + \\mathrm{Sublayer}(x))")
    st.latex(formula)
    order = ("normalises the sublayer's input and adds the sublayer's output to x (pre-norm); the paper normalised "
             "after the sum (post-norm)") if cfg.norm == "pre" else \
        "normalises after the sum (post-norm), as the paper did"
    st.markdown(f"Every sublayer sits in a residual connection: its output is added to what came in, so a layer "
                f"only has to learn a change. This model {order}. Below: the {charts.KIND_TITLES[shown.kind].lower()} "
                f"sublayer of the {side}'s layer {layer + 1}.")
    code_of("residual")
    rows, _ = shown.labels(shown.kind)
    bound = float(max(np.abs(x).max(), np.abs(change).max(), np.abs(out).max()))
    st.markdown("**What it computed for your input:** " + shapes(x=x, sublayer=change, out=out))
    charts_row(shown, "residual", [("x", vectors(x, rows, "x: what came in", bound=bound), False),
                                   ("change", vectors(change, rows, "The sublayer's output", bound=bound), False),
                                   ("out", vectors(out, rows, "The sum", bound=bound), False)])
    st.caption(f"The three share one colour scale. The sublayer's output is {np.abs(change).mean():.2f} on average "
               f"(absolute value), against {np.abs(x).mean():.2f} for x.")


def encoder_layer(shown: Shown) -> None:
    heading("encoder_layer")
    cfg = shown.bundle.config
    layer = shown.stack_layer("encoder")
    st.markdown(f"An encoder layer is self-attention, then the feed-forward network, each in a residual connection. "
                f"The encoder stacks {cfg.n_enc_layers} of them"
                + (" and ends with a layer norm" if cfg.norm == "pre" else "")
                + "; its output, the memory, is what every decoder layer's cross-attention reads.")
    code_of("encoder_layer")
    memory = shown.tour.tensor("encoder", "memory")
    rows = charts.token_labels(shown.tour.source_pieces)
    scores, mask, weights = shown.tour.attention("encoder_self", layer)
    st.markdown("**What it computed for your input:** " + shapes(memory=memory))
    charts_row(shown, "encoder_layer", [
        ("memory", vectors(memory, rows, "The memory"), False),
        ("self", lambda: charts.attention_heatmap(weights[shown.head], rows, rows, charts.attention_title(
            "encoder_self", layer, shown.head)), True)])


def decoder_layer(shown: Shown) -> None:
    heading("decoder_layer")
    cfg = shown.bundle.config
    layer = shown.stack_layer("decoder")
    st.markdown("A decoder layer is masked self-attention over the output so far, cross-attention over the memory, "
                f"then the feed-forward network, each in a residual connection. The decoder stacks "
                f"{cfg.n_dec_layers} of them; a decode with a KV cache feeds only the newest token and keeps the "
                "earlier keys and values.")
    code_of("decoder_layer")
    hidden = shown.tour.tensor("decoder", "hidden")
    rows, cols = shown.labels("cross")
    self_w = shown.tour.attention("decoder_self", layer)
    cross_w = shown.tour.attention("cross", layer)[2][shown.head]
    st.markdown("**What it computed for your input:** " + shapes(hidden=hidden))
    chart(shown, "decoder_layer", "hidden", vectors(hidden, rows, "The decoder's output"), "stretch")
    charts_row(shown, "decoder_layer", [
        ("self", lambda: charts.attention_heatmap(self_w[2][shown.head], rows, rows, charts.attention_title(
            "decoder_self", layer, shown.head), mask=self_w[1][shown.head]), True),
        ("cross", lambda: charts.attention_heatmap(cross_w, rows, cols, charts.attention_title(
            "cross", layer, shown.head)), True)])
    st.caption(display.DECODER_ROWS)


def top_two(log_probs: np.ndarray, tokenizer) -> list[tuple[str, float, str, float]]:
    """Per row: the most likely token and its probability, the runner-up and its."""
    best = np.argsort(-log_probs, axis=-1)[:, :2]
    return [(token_text(tokenizer.piece(int(a))), math.exp(row[a]), token_text(tokenizer.piece(int(b))),
             math.exp(row[b])) for row, (a, b) in zip(log_probs, best)]


def generator(shown: Shown) -> None:
    heading("generator")
    vocab = shown.bundle.config.tgt_vocab
    st.markdown(f"One linear layer turns each decoder position's {shown.bundle.config.d_model} numbers into one score "
                f"per token of the vocabulary ({vocab} tokens), and log-softmax turns the scores into "
                "log-probabilities of the next token.")
    code_of("generator")
    log_probs = shown.tour.log_probs
    st.markdown("**What it computed for your input:** " + shapes(log_probs=log_probs))
    reads = [token_text(p) for p in shown.tour.target_pieces]
    st.dataframe(pd.DataFrame([{"Position": t, "Reads": read, "Most likely": a, "Probability": pct(p),
                                "Runner-up": b, "Its probability": pct(q)}
                               for t, (read, (a, p, b, q)) in enumerate(zip(reads, top_two(log_probs,
                                                                                          shown.bundle.tokenizer)))]),
                 hide_index=True, width="content")


def greedy(shown: Shown) -> None:
    heading("greedy")
    st.markdown("At inference the decoder has only its own output: step t feeds the token chosen at step t − 1 "
                "(a KV cache keeps the earlier keys and values), keeps the most likely next token and stops after "
                "`</s>`. This is the decode every other page traces, step by step.")
    code_of("greedy")
    steps = shown.greedy.steps
    gap = float(np.abs(shown.tour.log_probs - np.stack([s.log_probs.numpy() for s in steps])).max())
    st.markdown("**What it computed for your input:**")
    st.dataframe(pd.DataFrame([{"Step": s.index + 1, "Reads": token_text(read), "Writes": token_text(s.piece),
                                "Probability": pct(s.prob)}
                               for s, read in zip(steps, shown.greedy.prefix_pieces)]), hide_index=True,
                 width="content")
    st.caption(f"The sections above show one pass over this whole output at once; its log-probabilities differ from "
               f"these steps' by at most {gap:.1e} (float rounding), and it predicts the same tokens.")


SECTIONS = {"embeddings": embeddings, "attention": attention, "multi_head": multi_head, "masks": masks,
            "feed_forward": feed_forward, "residual": residual, "encoder_layer": encoder_layer,
            "decoder_layer": decoder_layer, "generator": generator, "greedy": greedy}
