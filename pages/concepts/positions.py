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
from ui.display import HALF_WIDTH
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

DEMO_POSITIONS = (0, 1, 2, 5, 10, 20, 50, 100, 200)
SHOWN_PAIRS = 2  # 2x2 blocks of M_k written out as a formula
CURVE_DIMS = (4, 5, 12, 24)  # plotted until others are chosen (those below d_model)
MAX_PAIRS = 8  # RoPE frequency pairs drawn (the fastest ones)


def source_embedding(key: str, version: int, text: str) -> tuple[list[str], EmbeddingRecord]:
    """The encoder's input for `text` as recorded by a real traced forward pass: (pieces, record), kept in
    the decodes' byte-bounded cache."""
    with st.spinner("Running the model…"):
        return decodes.memo("source_embedding", _source_embedding, key, version, text)


def _source_embedding(key: str, version: int, text: str) -> tuple[list[str], EmbeddingRecord]:
    bundle = registry.bundle_for(key)
    result = teacher_forced(bundle.model, bundle.tokenizer, text, "")
    return result.source_pieces, result.trace.embeddings["src"]


def intro() -> DeltaGenerator:
    notes = header("Positional encoding")
    st.markdown(
        "Attention by itself ignores order: shuffle the input tokens and each one gets the same result, only "
        "shuffled. So before the first layer every token embedding gets a vector added that says *where* the "
        "token stands. The original Transformer builds it from sines and cosines: each pair of dimensions is a "
        "clock hand turning at its own speed, from fast (first dimensions) to very slow (last ones)."
    )
    st.latex(r"PE_{(pos,\,2i)}=\sin\!\Big(\frac{pos}{10000^{2i/d_{model}}}\Big),\qquad "
             r"PE_{(pos,\,2i+1)}=\cos\!\Big(\frac{pos}{10000^{2i/d_{model}}}\Big)")
    return notes


def plotted_dims(view: View, d_model: int) -> list[int]:
    """The dimensions to plot: the ones chosen, or CURVE_DIMS until some are; one past d_model refuses them."""
    dims = view.get("dims")
    if dims is not None and any(d >= d_model for d in dims):
        view.refuse("dims", f"a {d_model}-dimensional table has dimensions 0..{d_model - 1} only")
        dims = None
    return [d for d in CURVE_DIMS if d < d_model] if dims is None else list(dims)


# ----------------------------------------------------------------------------------------- 1 the table
@st.fragment
def sinusoidal_explorer(view: View, model_d: int) -> None:
    st.header("1 · The sinusoidal table", divider="gray")
    c1, c2 = st.columns(2)
    own = model_d if model_d % 2 == 0 else 64
    d_model = view.widget("d_model", c1.slider, "d_model (dimensions)", 8, 512, step=2,
                          to_widget=lambda d: min(own, 512) if d is None else d,
                          on_change=lambda: view.reset("dims"))  # the plotted dimensions start afresh
    length = view.widget("length", c2.slider, "Positions", 8, 256, step=1)
    table = sinusoidal_table(length, d_model).numpy()
    fig = charts.positional_matrix(table, f"Sinusoidal encoding · {length} positions × {d_model} dimensions")
    display.heatmap(fig, table, [str(p) for p in range(length)], [str(d) for d in range(d_model)],
                    f"sinusoidal_pe_{length}x{d_model}", "pe-matrix")
    st.caption("Each row is one position's vector. Left columns change quickly from row to row; columns "
               "further right change ever more slowly, so together they give every position its own pattern.")

    left, right = st.columns(2)
    with left:
        dims = plotted_dims(view, d_model)
        dims = view.widget("dims", st.multiselect, "Dimensions to plot", list(range(d_model)),
                           to_widget=lambda _: dims, from_widget=tuple, max_selections=MAX_DIMS)
        if dims:
            fig = charts.positional_curves(table, sorted(dims), title="Sinusoidal encoding · chosen dimensions")
            display.show_figure(fig, f"sinusoidal_pe_curves_{d_model}", key="fig-pe-curves")
        else:
            st.info("Pick at least one dimension to plot.")
        st.caption("An even dimension 2i is a sine, the next one the cosine of the same angle; higher i means "
                   "a longer wavelength (2π up to 10000·2π positions).")
    with right:
        fig = display.fit(charts.position_similarity(table), HALF_WIDTH)
        display.show_figure(fig, f"sinusoidal_pe_similarity_{length}x{d_model}", key="fig-pe-sim", width="content")
        st.caption("PE(i)·PE(j) depends only on the distance i − j: the bright band along the diagonal means "
                   "nearby positions look alike, far-apart ones less so.")
    rotation(view, d_model)
    view.sync_url()


def rotation(view: View, d_model: int) -> None:
    st.header("2 · Moving by k positions is a rotation", divider="gray")
    st.markdown(
        "Why sines and cosines? By the angle-addition formulas, shifting every position by the same offset *k* "
        "turns each (sin, cos) pair by the angle *k·ωᵢ*, whatever the position. So PE(pos + k) is one fixed "
        "matrix M_k times PE(pos): a relation a layer can learn once and use at every position."
    )
    st.latex(r"\begin{pmatrix}\sin((pos+k)\,\omega_i)\\ \cos((pos+k)\,\omega_i)\end{pmatrix}="
             r"\begin{pmatrix}\cos k\omega_i & \sin k\omega_i\\ -\sin k\omega_i & \cos k\omega_i\end{pmatrix}"
             r"\begin{pmatrix}\sin(pos\,\omega_i)\\ \cos(pos\,\omega_i)\end{pmatrix},\quad "
             r"\omega_i = 10000^{-2i/d_{model}}")
    k = view.widget("k", st.slider, "Offset k", 1, 50)
    demo = rotation_demo(d_model, k, list(DEMO_POSITIONS))
    left, right = st.columns([1, 2])
    with left:
        st.metric("max |M_k·PE(pos) − PE(pos + k)|", f"{demo.max_error:.1e}",
                  help="float32 rounding of the table; the identity itself is exact.")
        st.dataframe(pd.DataFrame({"pos": demo.positions, "pos + k": [p + k for p in demo.positions],
                                   "max |error|": [f"{e:.1e}" for e in demo.errors]}),
                     hide_index=True, width="stretch")
    with right:
        blocks = r",\;".join(
            rf"\begin{{pmatrix}}{np.cos(a):.3f} & {np.sin(a):.3f}\\ {-np.sin(a):.3f} & {np.cos(a):.3f}"
            r"\end{pmatrix}" for a in demo.angles[:SHOWN_PAIRS])
        st.latex(rf"M_{{{k}}}=\operatorname{{diag}}\Big({blocks},\;\dots\Big)")
        st.caption(f"The first {SHOWN_PAIRS} of the {d_model // 2} blocks of M_{k}, one per frequency pair. "
                   "Every position's encoding is moved by the same matrix.")
        pairs = np.arange(d_model // 2)
        st.dataframe(pd.DataFrame({
            "pair i": pairs, "dimensions": [f"{2 * i}, {2 * i + 1}" for i in pairs],
            "ω_i": np.round(demo.angles / k, 6), "angle k·ω_i (rad)": np.round(demo.angles, 4),
            "degrees": np.round(np.degrees(demo.angles) % 360, 2),
        }), hide_index=True, height=220, width="stretch")
    fig = charts.positional_matrix(demo.matrix, f"M_{k}: one 2×2 rotation per frequency pair ({d_model}×{d_model})")
    fig.update_xaxes(title_text="input dimension")
    fig.update_yaxes(title_text="output dimension")
    display.heatmap(fig, demo.matrix, [str(d) for d in range(d_model)], [str(d) for d in range(d_model)],
                    f"sinusoidal_rotation_k{k}_d{d_model}", "pe-rotation")


# ----------------------------------------------------------------------------------------- 3 the model's own
def model_encodings(bundle) -> None:
    cfg = bundle.config
    st.header(f"3 · The encodings inside the {bundle.name} model", divider="gray")
    kind, own = model_positions(bundle.model, "src")
    if kind == "none":
        st.info("This model was trained without positional encodings: its encoder sees only a bag of tokens.")
        return
    if kind in IN_ATTENTION:
        st.markdown(
            f"This model uses **{'RoPE (rotary positions)' if kind == 'rope' else 'ALiBi (linear biases)'}**: "
            "nothing is added to its embeddings. Positions enter inside every self-attention layer (encoder and "
            "decoder) instead, "
            + ("by turning each head's queries and keys by an angle that grows with their position."
               if kind == "rope" else "as a penalty on each score that grows with the distance between query "
               "and key.")
            + " Cross-attention gets none: its queries and keys come from two different sequences. "
              "Section 3b below shows it on an input.")
        return
    st.markdown(
        f"This model uses **{kind}** encodings, {cfg.max_len} positions × {cfg.d_model} dimensions"
        + (" — the same formula as above." if kind == "sinusoidal" else
           ": one vector per position, learned in training like any other weight.")
    )
    fig = charts.positional_matrix(own, f"{bundle.name} · its {kind} encodings (source side)")
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
        view.refuse("text", f"this model cannot read it ({exc})")
        return embedded(view, key, bundle)


def embedding_sum(bundle, embedding: tuple) -> None:
    pieces, record = embedding
    st.markdown("What the first encoder layer receives for this input, read from the trace of a real forward "
                "pass: the token's embedding (scaled by √d_model) plus its position's vector.")
    fig = charts.embedding_sum(record.tokens[0].numpy(), record.positions[0].numpy(), charts.token_labels(pieces))
    display.show_figure(fig, f"{bundle.task.name}_embedding_sum", key="fig-pe-sum")
    st.caption("A token that appears twice gets the same embedding both times (left) but a different sum "
               "(right): that difference is all the encoder knows about order.")


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
        view.refuse(name, f"this input has positions 0..{length - 1} only")
        value = None
    return default if value is None else value


@st.fragment
def rope_view(view: View, key: str, bundle, text: str, pieces: list[str]) -> None:
    cfg = bundle.config
    st.header("3b · RoPE: positions as a rotation of queries and keys", divider="gray")
    st.markdown(
        "RoPE splits each head's query and key into pairs of dimensions and turns pair *i* by the angle "
        "*pos·ωᵢ* (the same frequencies as the sinusoids above). The query at position *m* and the key at "
        "*n* are turned by *mωᵢ* and *nωᵢ*; their dot product only sees the difference of the two angles, so "
        "the score depends on the content and on the offset *n − m*, never on where the pair stands.")
    st.latex(r"\tilde q_m = R(m\omega)\,q,\quad \tilde k_n = R(n\omega)\,k,\qquad "
             r"\tilde q_m\cdot\tilde k_n = q^\top R\big((n-m)\,\omega\big)\,k")
    labels = charts.token_labels(pieces)
    last = len(pieces) - 1
    c1, c2, c3 = st.columns(3)
    query_pos = view.widget("query_pos", c1.select_slider, "Query position m", list(range(last + 1)),
                            to_widget=lambda _: chosen_position(view, "query_pos", last + 1, last),
                            format_func=lambda p: labels[p])
    key_pos = view.widget("key_pos", c2.select_slider, "Key position n", list(range(last + 1)),
                          to_widget=lambda _: chosen_position(view, "key_pos", last + 1, 0),
                          format_func=lambda p: labels[p])
    head = view.get("head")
    if head > cfg.n_heads:
        view.refuse("head", f"this model has heads 1..{cfg.n_heads}")
    head = view.widget("head", c3.selectbox, "Head (first encoder layer)", list(range(1, cfg.n_heads + 1)))
    demo = rope_pair(key, registry.version(key), text, query_pos, key_pos, head - 1)
    shown = slice(0, MAX_PAIRS)
    fig = positions_inside.rope_pairs(demo.q[shown], demo.k[shown], demo.q_rot[shown], demo.k_rot[shown],
                                      demo.freqs[shown], query_pos, key_pos,
                                      f"RoPE · encoder layer 1, head {head} · query {labels[query_pos]}, "
                                      f"key {labels[key_pos]}")
    display.show_figure(fig, f"{bundle.task.name}_rope_pairs_h{head}_{query_pos}_{key_pos}", key="fig-rope-pairs")
    more = len(demo.freqs) - MAX_PAIRS
    st.caption("Dotted: the layer's own query (orange) and key (blue) for this input, per pair of dimensions; "
               "solid: after RoPE turned them. Fast pairs (left) turn far, slow ones hardly at all."
               + (f" The {more} slower pairs are left out of the drawing (the table has them)." if more > 0 else ""))
    left, right = st.columns([1, 2])
    with left:
        st.metric("score q̃·k̃ / √d_head", f"{demo.score:.4f}",
                  help="From the rotated pair above, computed here.")
        st.metric("the trace's recorded score", f"{demo.recorded:.4f}",
                  help="What the model's traced forward pass recorded before softmax for this query, key and head.")
        st.metric("max |q̃·k̃ at (m+s, n+s) − at (m, n)|", f"{demo.spread:.1e}",
                  help=f"over every shift s = 0..{int(demo.shifts[-1])}; float32 rounding, the identity is exact.")
    with right:
        fig = positions_inside.rope_offset_check(demo.shifts, demo.dots, query_pos, key_pos)
        display.show_figure(fig, f"{bundle.task.name}_rope_offset_h{head}", key="fig-rope-offset")
    pairs = np.arange(len(demo.freqs))
    st.dataframe(pd.DataFrame({
        "pair i": pairs, "ω_i": np.round(demo.freqs, 6),
        "query turned m·ω_i (°)": np.round(np.degrees(query_pos * demo.freqs) % 360, 2),
        "key turned n·ω_i (°)": np.round(np.degrees(key_pos * demo.freqs) % 360, 2),
        "share of q̃·k̃": np.round(demo.contributions, 4),
    }), hide_index=True, height=220, width="stretch")
    st.caption("Each pair's share depends on the query, the key and (m − n)·ω_i only; the shares sum to q̃·k̃.")
    view.sync_url()


def alibi_view(bundle, pieces: list[str]) -> None:
    st.header("3b · ALiBi: positions as a distance penalty per head", divider="gray")
    st.markdown(
        "ALiBi adds nothing to the embeddings and turns nothing: each head subtracts from every score its own "
        "slope *m_h* times the distance between query and key. A steep head looks near; a gentle one far. The "
        "scores the trace records (and the masks page shows) include this bias.")
    st.latex(r"\text{score}_{ij} = \frac{q_i\cdot k_j}{\sqrt{d_{head}}} - m_h\,|i-j|,\qquad "
             r"m_h = 2^{-8h/H}\ \ (h = 1..H)")
    slopes, bias = alibi_biases(bundle.model, len(pieces))
    labels = charts.token_labels(pieces)
    fig = positions_inside.alibi_bias_grid(bias, slopes, labels,
                                           f"ALiBi · {bundle.name} · each head's bias for this input")
    display.show_figure(fig, f"{bundle.task.name}_alibi_bias", key="fig-alibi-bias")
    st.dataframe(pd.DataFrame({"head": np.arange(1, len(slopes) + 1), "slope m_h": slopes,
                               "bias at distance 1": -slopes, f"at distance {len(pieces) - 1}":
                               -slopes * (len(pieces) - 1)}), hide_index=True, width="stretch")
    st.caption("The encoder's bias is symmetric (it sees both sides); the decoder's self-attention uses the same "
               "one under its causal mask, the paper's form; cross-attention has none.")


# ----------------------------------------------------------------------------------------- 4 no positions
@st.fragment
def without_positions(view: View, key: str, bundle, text: str) -> None:
    task = bundle.task
    st.header("4 · Decode without positions", divider="gray")
    st.markdown(
        "Switch the positional term off (encoder and decoder) and decode the same input with the same weights. "
        "The encoder then sees a bag of letters: a letter gets the same vector wherever it stands, and the "
        "decoder cannot tell which step it is on. It can still find letters, but not their order — so a "
        "reversal model fails, and its cross-attention loses the anti-diagonal."
    )
    if not view.widget("no_positions", st.toggle, "Decode without positions"):
        st.info("Turn the switch on to compare the normal decode with a decode without positions.",
                icon=":material/waves:")
        view.sync_url()
        return
    version = registry.version(key)
    normal = decodes.greedy(key, version, text)
    blind = decodes.greedy(key, version, text, positions=False)
    expected = task.answer(text)
    layer, head = focus_head(normal.cross.numpy(), task, text)
    alignment = task.alignment(text) if head is not None else None
    c1, c2 = st.columns(2)
    for col, result, what in ((c1, normal, "with positions"), (c2, blind, "without positions")):
        with col:
            st.markdown(f"**{what.capitalize()}:** {display.output(result.output_text)} "
                        f"{verdict(result.output_text, expected)}")
            display.cross_heatmap(result, layer, head, extra=what, key=f"fig-pe-cross-{what}",
                                  filename=f"{task.name}_cross_{what.replace(' ', '-')}", width=HALF_WIDTH,
                                  caption=False)
            if alignment is not None:
                steps = min(len(alignment), len(result.steps))
                score = float(alignment_score(result.cross[layer, head].numpy(), alignment[:steps]))
                st.caption(f"Mean weight on the source token each step should read: **{score:.0%}**")
    if alignment is not None:
        st.caption(f"Layer {layer + 1}, head {head + 1}: the head whose cross-attention best follows the "
                   "expected alignment in the normal decode, shown for both; columns: the source tokens. "
                   + display.decoder_rows())
    view.sync_url()


def main() -> None:
    view = POSITIONS.view()
    notes = intro()
    key, bundle = require_model()
    sinusoidal_explorer(view, bundle.config.d_model)
    model_encodings(bundle)
    text, embedding, error = embedded(view, key, bundle)
    view.widget("text", st.text_input, f"An input for the {bundle.task.title.lower()} model",
                to_widget=lambda _: text, max_chars=200)
    if embedding is None:
        st.error(f"This input cannot be used: {literal(str(error))}", icon=":material/error:")
        finish(view, notes)
        return
    if bundle.config.positional == "rope":
        rope_view(view, key, bundle, text, embedding[0])
    elif bundle.config.positional == "alibi":
        alibi_view(bundle, embedding[0])
    else:
        embedding_sum(bundle, embedding)
    without_positions(view, key, bundle, text)
    finish(view, notes)


main()
