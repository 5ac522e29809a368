"""The code page's sections, in the paper's order: each a heading with its anchor, a short explanation, the running
source behind it (transformer.analysis.code_tour) and what that code computed for the page's input, read from one
detailed traced pass (`Tour`). The tables go to st.dataframe as lists of rows, and nothing here imports pandas: the
page's first chart, opened on a fresh server, then waits for the warm-up's torch only (ui/warm.py, FIRST)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import streamlit as st

from transformer import charts
from transformer.analysis.code_tour import BY_KEY, SIDES, SUBLAYERS, Tour, source, where
from transformer.bundle import ModelBundle
from transformer.charts.common import probability_text
from transformer.i18n import Texts, sentences, t
from transformer.network.decoding import DecodeResult
from ui import decodes, display
from ui.markdown import code
from ui.widgets import token_text

TITLES = Texts({"embeddings": "code.title.embeddings", "attention": "code.title.attention",
                "multi_head": "code.title.multi_head", "masks": "code.title.masks",
                "feed_forward": "code.title.feed_forward", "residual": "code.title.residual",
                "encoder_layer": "code.title.encoder_layer", "decoder_layer": "code.title.decoder_layer",
                "generator": "code.title.generator", "greedy": "code.title.greedy"})
POSITIONS = Texts({"sinusoidal": "code.positions.sinusoidal", "learned": "code.positions.learned",
                   "none": "code.positions.none", "rope": "code.positions.rope", "alibi": "code.positions.alibi"})
STACKS = Texts({"encoder": "code.encoder_stack", "decoder": "code.decoder_stack"})  # "the encoder's"
VECTOR_PX = 280  # a chart of one vector per token needs about this much across before it is stacked
# A listing's line too long for the column wraps, and its rest would start at the column's left edge, where it reads
# as a line of its own. Streamlit draws each numbered line as a row (number, text); this gives every line's text a
# hanging indent: what wraps goes on 4 characters right of the line's own indentation, as an editor's soft wrap does.
# Installed once per page view (it watches the page for the listings drawn later), ended on a page without it.
HANG_JS = """<style>[data-testid=stElementContainer]:has(#ap-code-hang) { display: none; }</style>
<script id="ap-code-hang">
(() => {
  const hang = () => {
    if (!document.getElementById("ap-code-hang")) {
      window.apCodeHang.disconnect();
      window.apCodeHang = null;
      return;
    }
    for (const text of document.querySelectorAll("[data-testid=stCode] code > span > .linenumber + span")) {
      const step = String(text.textContent.match(/^ */)[0].length + 4);
      if (text.dataset.apHang === step) continue;
      text.dataset.apHang = step;
      text.style.paddingLeft = `${step}ch`;
      text.style.textIndent = `-${step}ch`;
    }
  };
  if (window.apCodeHang) return;
  let queued = false;
  window.apCodeHang = new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; hang(); });
  });
  window.apCodeHang.observe(document.body, {childList: true, subtree: true});
  hang();
})();
</script>"""


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
        return t("code.where_shown", kind=charts.KIND_TITLES[self.kind].lower(), layer=self.layer + 1,
                 head=self.head + 1)


def code_of(key: str) -> None:
    """The running source of every object behind a section, each under the file and name it lives at."""
    for obj in BY_KEY[key].code:
        st.caption(f":material/description: `{where(obj)}`")
        st.code(source(obj), language="python", line_numbers=True, wrap_lines=True)


def indent_wrapped_lines() -> None:
    """Once per page: the listings' wrapped lines go on right of their own indentation (HANG_JS)."""
    st.html(HANG_JS, unsafe_allow_javascript=True)


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


def computed() -> str:
    """The words before what a section's code computed."""
    return t("code.computed")


def sublayer_input(cfg) -> str:
    """What a sublayer reads, as a chart title: its input after the layer norm (pre-norm), else the input itself."""
    return t("code.input_normalised") if cfg.norm == "pre" else t("code.input")


def vectors(values: np.ndarray, labels: list[str], title: str, what: str | None = None, bound: float | None = None):
    return lambda: charts.token_vectors(values, labels, title, what, bound)


# --------------------------------------------------------------------------------------------- sections


def embeddings(shown: Shown) -> None:
    heading("embeddings")
    cfg = shown.bundle.config
    st.markdown(t("code.embeddings.text", d_model=cfg.d_model, scale=math.sqrt(cfg.d_model),
                  positions=POSITIONS[cfg.positional]))
    code_of("embeddings")
    tokens, pos = shown.tour.embedding("src")
    labels = charts.token_labels(shown.tour.source_pieces)
    st.markdown(computed() + shapes(tokens=tokens, positions=pos))
    chart(shown, "embeddings", "sum", lambda: charts.embedding_sum(
        tokens, pos, labels, t("code.embeddings.title", n=len(labels), d_model=cfg.d_model)), "stretch")


def attention(shown: Shown) -> None:
    heading("attention")
    kind, layer, head = shown.kind, shown.layer, shown.head
    site = (kind, layer)
    q, k, v, out = (shown.tour.tensor(*site, name)[head] for name in ("q", "k", "v", "heads"))
    scores, mask, weights = (part[head] for part in shown.tour.attention(kind, layer))
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}\Big)V")
    st.markdown(t("code.attention.text", d_k=q.shape[1], root=math.sqrt(q.shape[1]), where=shown.where_shown()))
    code_of("attention")
    rows, cols = shown.labels(kind)
    st.markdown(computed() + shapes(q=q, k=k, v=v, scores=scores, heads=out))
    if (said := inside_attention(shown.bundle.config, kind)) is not None:
        st.caption(said)
    charts_row(shown, "attention", [("q", vectors(q, rows, t("code.attention.q")), False),
                                    ("k", vectors(k, cols, t("code.attention.k")), False),
                                    ("v", vectors(v, cols, t("code.attention.v")), False)])
    title = charts.attention_title(kind, layer, head)
    charts_row(shown, "attention", [
        ("scores", lambda: charts.with_title_line(charts.scores_heatmap(scores, mask, rows, cols, title),
                                                  t("code.attention.scores")), True),
        ("weights", lambda: charts.with_title_line(charts.attention_heatmap(weights, rows, cols, title, mask=mask),
                                                   t("code.attention.weights")), True)])
    chart(shown, "attention", "heads", vectors(out, rows, t("code.attention.output")), "stretch")
    st.caption(t("code.attention.sums", gap=float(np.abs(weights.sum(-1) - 1).max())))


def inside_attention(cfg, kind: str) -> str | None:
    """What the model does to q, k and the scores before this code sees them (qk-norm, RoPE, ALiBi), if anything."""
    said = []
    if cfg.qk_norm:
        said.append(t("code.inside.qk_norm"))
    if kind != "cross" and cfg.positional == "rope":
        said.append(t("code.inside.rope"))
    if kind != "cross" and cfg.positional == "alibi":
        said.append(t("code.inside.alibi"))
    return sentences(said) or None


def multi_head(shown: Shown) -> None:
    heading("multi_head")
    kind, cfg = shown.kind, shown.bundle.config
    side, layer = SIDES[kind], shown.layer
    inner = shown.tour.tensor(side, layer, SUBLAYERS[kind], "sublayer_in")
    concat, output = (shown.tour.tensor(kind, layer, name) for name in ("concat", "output"))
    d_head = cfg.d_model // cfg.n_heads
    source_of_keys = t("code.multi_head.memory" if kind == "cross" else "code.multi_head.same")
    st.markdown(t("code.multi_head.text", heads=cfg.n_heads, d_head=d_head, keys=source_of_keys, d_model=cfg.d_model,
                  kind=charts.KIND_TITLES[kind].lower(), layer=layer + 1))
    code_of("multi_head")
    rows, _ = shown.labels(kind)
    st.markdown(computed() + shapes(input=inner, concat=concat, output=output))
    charts_row(shown, "multi_head", [("input", vectors(inner, rows, sublayer_input(cfg)), False),
                                     ("concat", vectors(concat, rows, t("code.multi_head.concat", n=cfg.n_heads)),
                                      False),
                                     ("output", vectors(output, rows, t("code.multi_head.output")), False)])
    st.caption(t("code.multi_head.columns", lo=shown.head * d_head, hi=(shown.head + 1) * d_head - 1,
                 head=shown.head + 1))


def masks(shown: Shown) -> None:
    heading("masks")
    st.markdown(t("code.masks.text"))
    code_of("masks")
    items = []
    for kind in ("encoder_self", "decoder_self", "cross"):
        mask = shown.tour.attention(kind, 0)[1][0]
        rows, cols = shown.labels(kind)
        items.append((kind, lambda mask=mask, rows=rows, cols=cols, kind=kind: charts.with_title_line(
            charts.mask_heatmap(mask, rows, cols, charts.KIND_TITLES[kind]), t("code.masks.applied")), True))
    st.markdown(t("code.masks.shown"))
    charts_row(shown, "masks", items)


def feed_forward(shown: Shown) -> None:
    heading("feed_forward")
    cfg = shown.bundle.config
    side = SIDES[shown.kind]
    layer = shown.stack_layer(side)
    site = (side, layer, "feed_forward")
    inner, hidden, out = (shown.tour.tensor(*site, name) for name in ("sublayer_in", "hidden", "sublayer_out"))
    st.latex(r"\mathrm{FFN}(x)=\max(0,\;xW_1+b_1)\,W_2+b_2")
    st.markdown(t("code.feed_forward.text", d_model=cfg.d_model, d_ff=cfg.d_ff, zeros=(hidden == 0).mean(),
                  side=STACKS[side], layer=layer + 1))
    code_of("feed_forward")
    rows = charts.token_labels(shown.tour.source_pieces if side == "encoder" else shown.tour.target_pieces)
    st.markdown(computed() + shapes(input=inner, hidden=hidden, output=out))
    charts_row(shown, "feed_forward", [("input", vectors(inner, rows, sublayer_input(cfg)), False),
                                       ("hidden", vectors(hidden, rows, t("code.feed_forward.hidden"),
                                                          t("code.feed_forward.unit")), False),
                                       ("output", vectors(out, rows, t("code.feed_forward.output")), False)])


def residual(shown: Shown) -> None:
    heading("residual")
    cfg = shown.bundle.config
    side, layer = SIDES[shown.kind], shown.layer
    site = (side, layer, SUBLAYERS[shown.kind])
    x, change, out = (shown.tour.tensor(*site, name) for name in ("x", "sublayer_out", "out"))
    formula = ("x + \\mathrm{Sublayer}(\\mathrm{LayerNorm}(x))" if cfg.norm == "pre"
               else "\\mathrm{LayerNorm}(x + \\mathrm{Sublayer}(x))")
    st.latex(formula)
    order = t("code.residual.pre" if cfg.norm == "pre" else "code.residual.post")
    st.markdown(t("code.residual.text", order=order, kind=charts.KIND_TITLES[shown.kind].lower(), side=STACKS[side],
                  layer=layer + 1))
    code_of("residual")
    rows, _ = shown.labels(shown.kind)
    bound = float(max(np.abs(x).max(), np.abs(change).max(), np.abs(out).max()))
    st.markdown(computed() + shapes(x=x, sublayer=change, out=out))
    charts_row(shown, "residual", [("x", vectors(x, rows, t("code.residual.x"), bound=bound), False),
                                   ("change", vectors(change, rows, t("code.residual.change"), bound=bound), False),
                                   ("out", vectors(out, rows, t("code.residual.sum"), bound=bound), False)])
    st.caption(t("code.residual.caption", change=np.abs(change).mean(), x=np.abs(x).mean()))


def encoder_layer(shown: Shown) -> None:
    heading("encoder_layer")
    cfg = shown.bundle.config
    layer = shown.stack_layer("encoder")
    st.markdown(t("code.encoder.text_pre" if cfg.norm == "pre" else "code.encoder.text", n=cfg.n_enc_layers))
    code_of("encoder_layer")
    memory = shown.tour.tensor("encoder", "memory")
    rows = charts.token_labels(shown.tour.source_pieces)
    scores, mask, weights = shown.tour.attention("encoder_self", layer)
    st.markdown(computed() + shapes(memory=memory))
    charts_row(shown, "encoder_layer", [
        ("memory", vectors(memory, rows, t("code.encoder.memory")), False),
        ("self", lambda: charts.attention_heatmap(weights[shown.head], rows, rows, charts.attention_title(
            "encoder_self", layer, shown.head)), True)])


def decoder_layer(shown: Shown) -> None:
    heading("decoder_layer")
    cfg = shown.bundle.config
    layer = shown.stack_layer("decoder")
    st.markdown(t("code.decoder.text", n=cfg.n_dec_layers))
    code_of("decoder_layer")
    hidden = shown.tour.tensor("decoder", "hidden")
    rows, cols = shown.labels("cross")
    self_w = shown.tour.attention("decoder_self", layer)
    cross_w = shown.tour.attention("cross", layer)[2][shown.head]
    st.markdown(computed() + shapes(hidden=hidden))
    chart(shown, "decoder_layer", "hidden", vectors(hidden, rows, t("code.decoder.output")), "stretch")
    charts_row(shown, "decoder_layer", [
        ("self", lambda: charts.attention_heatmap(self_w[2][shown.head], rows, rows, charts.attention_title(
            "decoder_self", layer, shown.head), mask=self_w[1][shown.head]), True),
        ("cross", lambda: charts.attention_heatmap(cross_w, rows, cols, charts.attention_title(
            "cross", layer, shown.head)), True)])
    st.caption(display.decoder_rows())


def top_two(log_probs: np.ndarray, tokenizer) -> list[tuple[str, float, str, float]]:
    """Per row: the most likely token and its probability, the runner-up and its."""
    best = np.argsort(-log_probs, axis=-1)[:, :2]
    return [(token_text(tokenizer.piece(int(a))), math.exp(row[a]), token_text(tokenizer.piece(int(b))),
             math.exp(row[b])) for row, (a, b) in zip(log_probs, best)]


def generator(shown: Shown) -> None:
    heading("generator")
    vocab = shown.bundle.config.tgt_vocab
    st.markdown(t("code.generator.text", d_model=shown.bundle.config.d_model, vocab=vocab))
    code_of("generator")
    log_probs = shown.tour.log_probs
    st.markdown(computed() + shapes(log_probs=log_probs))
    reads = [token_text(p) for p in shown.tour.target_pieces]
    st.dataframe([{t("masks.table.position"): i, t("code.table.reads"): read, t("code.table.likeliest"): a,
                   t("charts.topk.probability"): probability_text(p), t("code.table.runner_up"): b,
                   t("code.table.its_probability"): probability_text(q)}
                  for i, (read, (a, p, b, q)) in enumerate(zip(reads, top_two(log_probs, shown.bundle.tokenizer)))],
                 hide_index=True, width="content")


def greedy(shown: Shown) -> None:
    heading("greedy")
    st.markdown(t("code.greedy.text"))
    code_of("greedy")
    steps = shown.greedy.steps
    gap = float(np.abs(shown.tour.log_probs - np.stack([s.log_probs.numpy() for s in steps])).max())
    st.markdown(computed())
    st.dataframe([{t("errors.failures.step"): s.index + 1, t("code.table.reads"): token_text(read),
                   t("code.table.writes"): token_text(s.piece), t("charts.topk.probability"): probability_text(s.prob)}
                  for s, read in zip(steps, shown.greedy.prefix_pieces)], hide_index=True, width="content")
    st.caption(t("code.greedy.caption", gap=gap))


SECTIONS = {"embeddings": embeddings, "attention": attention, "multi_head": multi_head, "masks": masks,
            "feed_forward": feed_forward, "residual": residual, "encoder_layer": encoder_layer,
            "decoder_layer": decoder_layer, "generator": generator, "greedy": greedy}
