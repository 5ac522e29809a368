"""Positional encoding: the sinusoidal table, its curves and similarities, the rotation that shifts it by k,
the active model's own encodings added to its embeddings (or, for a RoPE or ALiBi model, its query/key pair
turned per frequency or each head's bias), and what decoding without positions does."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, display
from ui import model_registry as registry
from ui.code_links import code_link
from ui.display import HALF_WIDTH
from ui.failure import fragment
from ui.markdown import literal
from ui.state import View
from ui.tables.positions import MAX_DIMS, POSITIONS
from ui.widgets import finish, header, require_model, verdict
from transformer import charts
from transformer.charts import positions_inside
from transformer.network.decoding import teacher_forced
from transformer.analysis.heads import alignment_score, focus_head
from transformer.analysis.positions import RopeDemo, alibi_biases, model_positions, rope_demo, rotation_demo
from transformer.network.positional import IN_ATTENTION, sinusoidal_table
from transformer.network.trace import EmbeddingRecord
from transformer.i18n import t

DEMO_POSITIONS = (0, 1, 2, 5, 10, 20, 50, 100, 200)
SHOWN_PAIRS = 2  # 2x2 blocks of M_k written out as a formula
CURVE_DIMS = (4, 5, 12, 24)  # plotted until others are chosen (those below d_model)
MAX_PAIRS = 8  # RoPE frequency pairs drawn (the fastest ones)
# a model's position scheme: what section 3 says of it, and (an added table) its chart's title
SCHEMES = {"rope": ("positions.model.rope", None), "alibi": ("positions.model.alibi", None),
           "sinusoidal": ("positions.model.sinusoidal", "positions.model.sinusoidal_title"),
           "learned": ("positions.model.learned", "positions.model.learned_title")}
# the decode with positions and without: (the chart's key part, its title's end, the output line)
DECODES = (("with", "positions.blind.with", "positions.blind.with_output"),
           ("without", "positions.blind.without", "positions.blind.without_output"))


def source_embedding(key: str, version: int, text: str) -> tuple[list[str], EmbeddingRecord]:
    """The encoder's input for `text` as recorded by a real traced forward pass: (pieces, record), kept in
    the decodes' byte-bounded cache."""
    with st.spinner(t("positions.running")):
        return decodes.memo("source_embedding", _source_embedding, key, version, text)


def _source_embedding(key: str, version: int, text: str) -> tuple[list[str], EmbeddingRecord]:
    bundle = registry.bundle_for(key)
    result = teacher_forced(bundle.model, bundle.tokenizer, text, "")
    return result.source_pieces, result.trace.embeddings["src"]


def intro() -> DeltaGenerator:
    notes = header(t("app.page.positions"))
    st.markdown(t("positions.intro"))
    st.latex(r"PE_{(pos,\,2i)}=\sin\!\Big(\frac{pos}{10000^{2i/d_{model}}}\Big),\qquad "
             r"PE_{(pos,\,2i+1)}=\cos\!\Big(\frac{pos}{10000^{2i/d_{model}}}\Big)")
    return notes


def plotted_dims(view: View, d_model: int) -> list[int]:
    """The dimensions to plot: the ones chosen, or CURVE_DIMS until some are; one past d_model refuses them."""
    dims = view.get("dims")
    if dims is not None and any(d >= d_model for d in dims):
        view.refuse("dims", t("positions.dims_only", d=d_model, last=d_model - 1))
        dims = None
    return [d for d in CURVE_DIMS if d < d_model] if dims is None else list(dims)


# ----------------------------------------------------------------------------------------- 1 the table
@fragment
def sinusoidal_explorer(view: View, model_d: int) -> None:
    st.header(t("positions.table.header"), divider="gray")
    c1, c2 = st.columns(2)
    own = model_d if model_d % 2 == 0 else 64
    d_model = view.widget("d_model", c1.slider, t("positions.table.d_model"), 8, 512, step=2,
                          to_widget=lambda d: min(own, 512) if d is None else d,
                          on_change=lambda: view.reset("dims"))  # the plotted dimensions start afresh
    length = view.widget("length", c2.slider, t("positions.table.length"), 8, 256, step=1)
    table = sinusoidal_table(length, d_model).numpy()
    fig = charts.positional_matrix(table, t("positions.table.title", length=length, d=d_model))
    display.heatmap(fig, table, [str(p) for p in range(length)], [str(d) for d in range(d_model)],
                    f"sinusoidal_pe_{length}x{d_model}", "pe-matrix")
    st.caption(t("positions.table.caption"))
    code_link("embeddings")

    left, right = st.columns(2)
    with left:
        dims = plotted_dims(view, d_model)
        dims = view.widget("dims", st.multiselect, t("positions.table.dims"), list(range(d_model)),
                           to_widget=lambda _: dims, from_widget=tuple, max_selections=MAX_DIMS)
        if dims:
            fig = charts.positional_curves(table, sorted(dims), title=t("positions.table.curves_title"))
            display.show_figure(fig, f"sinusoidal_pe_curves_{d_model}", key="fig-pe-curves")
        else:
            st.info(t("positions.table.pick"))
        st.caption(t("positions.table.curves_caption"))
    with right:
        fig = display.fit(charts.position_similarity(table), HALF_WIDTH)
        display.show_figure(fig, f"sinusoidal_pe_similarity_{length}x{d_model}", key="fig-pe-sim", width="content")
        st.caption(t("positions.table.similarity_caption"))
    rotation(view, d_model)
    view.sync_url()


def rotation(view: View, d_model: int) -> None:
    st.header(t("positions.rotation.header"), divider="gray")
    st.markdown(t("positions.rotation.text"))
    st.latex(r"\begin{pmatrix}\sin((pos+k)\,\omega_i)\\ \cos((pos+k)\,\omega_i)\end{pmatrix}="
             r"\begin{pmatrix}\cos k\omega_i & \sin k\omega_i\\ -\sin k\omega_i & \cos k\omega_i\end{pmatrix}"
             r"\begin{pmatrix}\sin(pos\,\omega_i)\\ \cos(pos\,\omega_i)\end{pmatrix},\quad "
             r"\omega_i = 10000^{-2i/d_{model}}")
    k = view.widget("k", st.slider, t("positions.rotation.k"), 1, 50)
    demo = rotation_demo(d_model, k, list(DEMO_POSITIONS))
    left, right = st.columns([1, 2])
    with left:
        st.metric(t("positions.rotation.max_error"), f"{demo.max_error:.1e}", help=t("positions.rotation.rounding"))
        st.dataframe(pd.DataFrame({t("positions.rotation.pos"): demo.positions,
                                   t("positions.rotation.pos_k"): [p + k for p in demo.positions],
                                   t("positions.rotation.error"): [f"{e:.1e}" for e in demo.errors]}),
                     hide_index=True, width="stretch")
    with right:
        blocks = r",\;".join(
            rf"\begin{{pmatrix}}{np.cos(a):.3f} & {np.sin(a):.3f}\\ {-np.sin(a):.3f} & {np.cos(a):.3f}"
            r"\end{pmatrix}" for a in demo.angles[:SHOWN_PAIRS])
        st.latex(rf"M_{{{k}}}=\operatorname{{diag}}\Big({blocks},\;\dots\Big)")
        st.caption(t("positions.rotation.blocks", shown=SHOWN_PAIRS, blocks=d_model // 2, k=k))
        pairs = np.arange(d_model // 2)
        st.dataframe(pd.DataFrame({
            t("positions.rotation.pair"): pairs,
            t("positions.rotation.dimensions"): [f"{2 * i}, {2 * i + 1}" for i in pairs],
            "ω_i": np.round(demo.angles / k, 6), t("positions.rotation.angle"): np.round(demo.angles, 4),
            t("positions.rotation.degrees"): np.round(np.degrees(demo.angles) % 360, 2),
        }), hide_index=True, height=220, width="stretch")
    fig = charts.positional_matrix(demo.matrix, t("positions.rotation.title", k=k, d=d_model))
    fig.update_xaxes(title_text=t("positions.rotation.input_dimension"))
    fig.update_yaxes(title_text=t("positions.rotation.output_dimension"))
    display.heatmap(fig, demo.matrix, [str(d) for d in range(d_model)], [str(d) for d in range(d_model)],
                    f"sinusoidal_rotation_k{k}_d{d_model}", "pe-rotation")


# ----------------------------------------------------------------------------------------- 3 the model's own
def model_encodings(bundle) -> None:
    cfg = bundle.config
    st.header(t("positions.model.header", name=bundle.name), divider="gray")
    kind, own = model_positions(bundle.model, "src")
    if kind == "none":
        st.info(t("positions.model.none"))
        return
    text, title = SCHEMES[kind]
    if kind in IN_ATTENTION:
        st.markdown(t(text))
        return
    st.markdown(t(text, max_len=cfg.max_len, d=cfg.d_model))
    fig = charts.positional_matrix(own, t(title, name=bundle.name))
    display.heatmap(fig, own, [str(p) for p in range(cfg.max_len)], [str(d) for d in range(cfg.d_model)],
                    f"{bundle.task.name}_positional_{kind}", "pe-own")


def embedded(view: View, key: str, bundle) -> tuple[str, tuple | None, str]:
    """(input, (pieces, embedding record), "") or (input, None, the library's message). The input is the one
    chosen, or an example that repeats a token; one from a link the model cannot read gives way to that."""
    text = view.get("text")
    if text is None:
        examples = bundle.examples()
        text = next((e for e in examples if len(set(e)) < len(e)), examples[0])  # same token, new position
    try:
        return text, source_embedding(key, registry.version(key), text), ""
    except ValueError as exc:  # TokenizerError, DecodeError: the library's own message
        if not view.from_link("text"):
            return text, None, str(exc)
        view.refuse("text", t("positions.cannot_read", error=exc))
        return embedded(view, key, bundle)


def embedding_sum(bundle, embedding: tuple, text: str) -> None:
    pieces, record = embedding
    st.markdown(t("positions.sum.text"))
    fig = charts.embedding_sum(record.tokens[0].numpy(), record.positions[0].numpy(), charts.token_labels(pieces))
    display.show_figure(fig, f"{bundle.task.name}_embedding_sum", key="fig-pe-sum")
    code_link("embeddings", text=text)
    st.caption(t("positions.sum.caption"))


# ----------------------------------------------------------------------------------------- 3b RoPE, ALiBi
def rope_pair(key: str, version: int, text: str, query_pos: int, key_pos: int, head: int) -> RopeDemo:
    """The RoPE demo of the first encoder layer's `head` for `text`, kept in the decodes' cache."""
    return decodes.memo("rope_demo", _rope_pair, key, version, text, query_pos, key_pos, head)


def _rope_pair(key: str, version: int, text: str, query_pos: int, key_pos: int, head: int) -> RopeDemo:
    bundle = registry.bundle_for(key)
    ids = teacher_forced(bundle.model, bundle.tokenizer, text, "").source_ids
    return rope_demo(bundle.model, ids, query_pos, key_pos, 0, head)


def chosen_position(view: View, name: str, length: int, default: int) -> int:
    """A position prop within the input's `length` tokens; one past it (from a link) is refused."""
    value = view.get(name)
    if value is not None and value >= length:
        view.refuse(name, t("positions.only_positions", last=length - 1))
        value = None
    return default if value is None else value


@fragment
def rope_view(view: View, key: str, bundle, text: str, pieces: list[str]) -> None:
    cfg = bundle.config
    st.header(t("positions.rope.header"), divider="gray")
    st.markdown(t("positions.rope.text"))
    st.latex(r"\tilde q_m = R(m\omega)\,q,\quad \tilde k_n = R(n\omega)\,k,\qquad "
             r"\tilde q_m\cdot\tilde k_n = q^\top R\big((n-m)\,\omega\big)\,k")
    labels = charts.token_labels(pieces)
    last = len(pieces) - 1
    c1, c2, c3 = st.columns(3)
    query_pos = view.widget("query_pos", c1.select_slider, t("positions.rope.query_pos"), list(range(last + 1)),
                            to_widget=lambda _: chosen_position(view, "query_pos", last + 1, last),
                            format_func=lambda p: labels[p])
    key_pos = view.widget("key_pos", c2.select_slider, t("positions.rope.key_pos"), list(range(last + 1)),
                          to_widget=lambda _: chosen_position(view, "key_pos", last + 1, 0),
                          format_func=lambda p: labels[p])
    head = view.get("head")
    if head > cfg.n_heads:
        view.refuse("head", t("positions.rope.heads_only", n=cfg.n_heads))
    head = view.widget("head", c3.selectbox, t("positions.rope.head"), list(range(1, cfg.n_heads + 1)))
    demo = rope_pair(key, registry.version(key), text, query_pos, key_pos, head - 1)
    shown = slice(0, MAX_PAIRS)
    fig = positions_inside.rope_pairs(demo.q[shown], demo.k[shown], demo.q_rot[shown], demo.k_rot[shown],
                                      demo.freqs[shown], query_pos, key_pos,
                                      t("positions.rope.title", head=head, query=labels[query_pos],
                                        key=labels[key_pos]))
    display.show_figure(fig, f"{bundle.task.name}_rope_pairs_h{head}_{query_pos}_{key_pos}", key="fig-rope-pairs")
    more = len(demo.freqs) - MAX_PAIRS
    st.caption(t("positions.rope.caption") + (t("positions.rope.more", n=more) if more > 0 else ""))
    left, right = st.columns([1, 2])
    with left:
        st.metric(t("positions.rope.score"), f"{demo.score:.4f}", help=t("positions.rope.score_help"))
        st.metric(t("positions.rope.recorded"), f"{demo.recorded:.4f}", help=t("positions.rope.recorded_help"))
        st.metric(t("positions.rope.spread"), f"{demo.spread:.1e}",
                  help=t("positions.rope.spread_help", last=int(demo.shifts[-1])))
    with right:
        fig = positions_inside.rope_offset_check(demo.shifts, demo.dots, query_pos, key_pos)
        display.show_figure(fig, f"{bundle.task.name}_rope_offset_h{head}", key="fig-rope-offset")
    pairs = np.arange(len(demo.freqs))
    st.dataframe(pd.DataFrame({
        t("positions.rotation.pair"): pairs, "ω_i": np.round(demo.freqs, 6),
        t("positions.rope.query_turned"): np.round(np.degrees(query_pos * demo.freqs) % 360, 2),
        t("positions.rope.key_turned"): np.round(np.degrees(key_pos * demo.freqs) % 360, 2),
        t("positions.rope.share"): np.round(demo.contributions, 4),
    }), hide_index=True, height=220, width="stretch")
    st.caption(t("positions.rope.share_caption"))
    code_link("attention", text=text, kind="encoder_self", layer=0, head=head - 1)
    view.sync_url()


def alibi_view(bundle, pieces: list[str]) -> None:
    st.header(t("positions.alibi.header"), divider="gray")
    st.markdown(t("positions.alibi.text"))
    st.latex(t("positions.alibi.score") + r"_{ij} = \frac{q_i\cdot k_j}{\sqrt{d_{head}}} - m_h\,|i-j|,\qquad "
             r"m_h = 2^{-8h/H}\ \ (h = 1..H)")
    slopes, bias = alibi_biases(bundle.model, len(pieces))
    labels = charts.token_labels(pieces)
    fig = positions_inside.alibi_bias_grid(bias, slopes, labels,
                                           t("positions.alibi.title", name=bundle.name))
    display.show_figure(fig, f"{bundle.task.name}_alibi_bias", key="fig-alibi-bias")
    st.dataframe(pd.DataFrame({t("positions.alibi.head"): np.arange(1, len(slopes) + 1),
                               t("positions.alibi.slope"): slopes, t("positions.alibi.at_1"): -slopes,
                               t("positions.alibi.at_n", n=len(pieces) - 1): -slopes * (len(pieces) - 1)}),
                 hide_index=True, width="stretch")
    st.caption(t("positions.alibi.caption"))
    code_link("attention", kind="encoder_self", layer=0, head=0)


# ----------------------------------------------------------------------------------------- 4 no positions
@fragment
def without_positions(view: View, key: str, bundle, text: str) -> None:
    task = bundle.task
    st.header(t("positions.blind.header"), divider="gray")
    st.markdown(t("positions.blind.text"))
    if not view.widget("no_positions", st.toggle, t("positions.blind.toggle")):
        st.info(t("positions.blind.info"), icon=":material/waves:")
        view.sync_url()
        return
    version = registry.version(key)
    normal = decodes.greedy(key, version, text)
    blind = decodes.greedy(key, version, text, positions=False)
    expected = task.answer(text)
    layer, head = focus_head(normal.cross.numpy(), task, text)
    alignment = task.alignment(text) if head is not None else None
    c1, c2 = st.columns(2)
    for col, result, (part, what, line) in zip((c1, c2), (normal, blind), DECODES):
        with col:
            st.markdown(t(line, output=display.output(result.output_text),
                          verdict=verdict(result.output_text, expected)))
            display.cross_heatmap(result, layer, head, extra=t(what), key=f"fig-pe-cross-{part} positions",
                                  filename=f"{task.name}_cross_{part}-positions", width=HALF_WIDTH,
                                  caption=False)
            if alignment is not None:
                steps = min(len(alignment), len(result.steps))
                score = float(alignment_score(result.cross[layer, head].numpy(), alignment[:steps]))
                st.caption(t("positions.blind.score", score=score))
    if alignment is not None:
        st.caption(t("positions.blind.caption", layer=layer + 1, head=head + 1) + display.decoder_rows())
    code_link("embeddings", text=text, kind="cross", layer=layer, head=head)
    view.sync_url()


def main() -> None:
    view = POSITIONS.view()
    notes = intro()
    key, bundle = require_model()
    sinusoidal_explorer(view, bundle.config.d_model)
    model_encodings(bundle)
    text, embedding, error = embedded(view, key, bundle)
    view.widget("text", st.text_input, t("positions.input", task=bundle.task.title),
                to_widget=lambda _: text, max_chars=200)
    if embedding is None:
        st.error(t("positions.cannot_use", error=literal(str(error))), icon=":material/error:")
        finish(view, notes)
        return
    if bundle.config.positional == "rope":
        rope_view(view, key, bundle, text, embedding[0])
    elif bundle.config.positional == "alibi":
        alibi_view(bundle, embedding[0])
    else:
        embedding_sum(bundle, embedding, text)
    without_positions(view, key, bundle, text)
    finish(view, notes)


main()
