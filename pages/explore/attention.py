"""All attention heads: encoder self, decoder self and cross-attention of every layer and head for the
finished greedy decode of the input shared with the decode page, with per-head statistics and exports."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import streamlit as st

from ui import decode_state as state
from ui import display
from ui import model_registry as registry
from transformer import charts
from transformer.attention_maps import AttentionMap, attention_maps
from transformer.decoding import DecodeError
from transformer.export import chart_filename, figure_to_html, figure_to_image, image_export_available
from transformer.tokenizers import TokenizerError

BOX, EXAMPLES = "attention_input", "attention_examples"  # this page's widgets; the input is decoding_state.TEXT
KIND = "attention_kind"
KINDS = ("cross", "encoder_self", "decoder_self")
KIND_NAMES = {"cross": "Cross-attention", "encoder_self": "Encoder self-attention",
              "decoder_self": "Decoder self-attention"}
KIND_HELP = {
    "cross": "Rows: what the decoder had read at each step (it predicts the next output token there). "
             "Columns: the source tokens.",
    "encoder_self": "Rows and columns: the source tokens. Each source token gathers context from the others.",
    "decoder_self": "Rows and columns: what the decoder had read. The causal mask hides later positions "
                    "(grey ×), so every row only sees the prefix up to itself.",
}
IMAGE_MIME = {"png": "image/png", "svg": "image/svg+xml"}

# Built figures are cached as shared objects: st.plotly_chart only reads them (it serialises a copy), and a
# st.cache_data hit would unpickle the figure, which re-validates it and cost as much as building it here
# (50-60 ms per heatmap). Revisiting a kind, layer or head then costs no figure building at all.
heatmap = st.cache_resource(charts.attention_heatmap, max_entries=256, show_spinner=False)
head_grid = st.cache_resource(charts.head_grid, max_entries=64, show_spinner=False)
stats_heatmap = st.cache_resource(charts.head_stats_heatmap, max_entries=64, show_spinner=False)


# ---------------------------------------------------------------------------------------------- the input


def _pick_keys(kind: str) -> tuple[str, str]:
    """Widget keys of the layer and head pickers of one kind of attention."""
    return f"attention_layer_{kind}", f"attention_head_{kind}"


def input_controls(key: str, task) -> str:
    """The input shared with the decoding page (its state module owns it: a new model starts from its first
    example), in this page's own text box and example pills."""
    examples = task.examples()
    if st.session_state.get(state.MODEL) != key:  # a new model starts on its own best-aligned head
        for widget in (k for kind in KINDS for k in _pick_keys(kind)):
            st.session_state.pop(widget, None)
    state.adopt_model(key, examples)
    text = st.session_state[BOX] = st.session_state[state.TEXT]
    st.session_state[EXAMPLES] = text if text in examples else None
    box, picks = st.columns([2, 3], vertical_alignment="bottom")
    box.text_input("Input", key=BOX, on_change=state.text_from_box, args=(BOX,), max_chars=200,
                   help="Shared with the step-by-step decoding page: change it on either page.")
    picks.pills("Examples (held out from training)", examples, key=EXAMPLES, on_change=state.text_from_example,
                args=(EXAMPLES,))
    return text


# ---------------------------------------------------------------------------------------------- the decode


@st.cache_data(max_entries=64, show_spinner="Decoding…")
def decode(key: str, version: int, text: str) -> tuple[str, bool, dict[str, AttentionMap]]:
    """(output text, finished, attention maps) of the greedy decode of `text` by model `key`, from the decoding
    page's cached decode (no forced tokens)."""
    bundle = registry.bundle_for(key)
    result = state.decode(key, version, text, (), bundle)
    return result.output_text, result.finished, attention_maps(result, bundle.task, text)


def show_outcome(bundle, text: str, output: str, finished: bool) -> None:
    task = bundle.task
    line = f"**Output:** `{output}`" + ("" if finished else " (stopped at the length limit without `</s>`)")
    expected, _ = state.expected(bundle, text)
    if expected is not None:
        line += (" :green-badge[:material/check: correct]" if output == expected else
                 f" :red-badge[:material/close: wrong] expected `{expected}`")
    st.markdown(line)
    if len(text) > task.max_source_chars:
        st.warning(f"The model was trained on inputs of at most {task.max_source_chars} characters; "
                   "longer ones are outside what it learned.")


# ---------------------------------------------------------------------------------------------- one head


def _plain(label: str) -> str:
    return html.unescape(label)


def _clicked_cell(chart_key: str, n_keys: int) -> tuple[int, int] | None:
    """(query, key) of the cell last clicked on the chart with this key: the click layer's point_index is
    query * n_keys + key."""
    event = st.session_state.get(chart_key)
    points = event["selection"]["points"] if event else []
    return divmod(int(points[0]["point_index"]), n_keys) if points else None


def _index_picker(label: str, count: int, key: str, default: int) -> int:
    if st.session_state.get(key, 0) >= count:
        st.session_state.pop(key)
    return st.selectbox(label, range(count), index=default, format_func=lambda i: f"{label} {i + 1}", key=key)


def _head_facts(stats: dict, layer: int, head: int) -> str:
    """This head's statistics in words, with its rank by alignment when the task has one."""
    facts = [f"Entropy **{stats['entropy_bits'][layer, head]:.2f} bits**",
             f"max weight **{stats['max_weight'][layer, head]:.2f}** (mean over queries)"]
    if "alignment" in stats and not np.isnan(stats["alignment"][layer, head]):
        scores = stats["alignment"]
        rank = int((scores > scores[layer, head]).sum()) + 1
        facts.append(f"**{scores[layer, head]:.0%}** of its weight on the expected source token "
                     f"(rank {rank} of {scores.size} heads)")
    return "; ".join(facts) + "."


@st.fragment
def one_head(view: AttentionMap, task_name: str) -> None:
    """Layer and head pickers (first showing the best-aligned head, if any), the picked head as one large
    clickable heatmap with its numbers in words, and the layer's head average."""
    rows, cols = charts.token_labels(view.query_pieces), charts.token_labels(view.key_pieces)
    best_layer, best_head, _ = view.best_aligned() or (0, 0, None)
    layer_key, head_key = _pick_keys(view.kind)
    pick_layer, pick_head, _ = st.columns([1, 1, 4])
    with pick_layer:
        layer = _index_picker("Layer", view.layers, layer_key, best_layer)
    with pick_head:
        head = _index_picker("Head", view.heads, head_key, best_head)
    stem = chart_filename(task_name, view.kind, layer, head)
    chart_key = f"attention_big_{stem}"
    weights = view.weights[layer, head]
    clicked = _clicked_cell(chart_key, len(cols))
    with st.container(horizontal=True, gap="large"):
        fig = heatmap(weights, rows, cols, charts.attention_title(view.kind, layer, head), mask=view.mask,
                      clickable=True, highlight=clicked)
        display.show_figure(fig, stem, key=chart_key, on_select="rerun", selection_mode="points", width="content")
        with st.container(width="stretch"):
            st.markdown(f"**Layer {layer + 1}, head {head + 1}.** " + _head_facts(view.stats(), layer, head))
            if clicked:
                query, key = clicked
                weight = float(weights[query, key])
                st.markdown(f"Query `{_plain(rows[query])}` gives key `{_plain(cols[key])}` weight "
                            f"**{weight:.3f}** ({weight:.0%} of its attention).")
            else:
                st.caption("Click a cell to read its query, key and weight.")
            display.csv_download(weights, rows, cols, stem, key=f"csv_{stem}")
    mean = view.head_average(layer)
    mean_stem = f"{chart_filename(task_name, view.kind, layer)}_mean"
    with st.container(horizontal=True, gap="large"):
        title = charts.attention_title(view.kind, layer, extra=f"mean of {view.heads} heads")
        display.show_figure(heatmap(mean, rows, cols, title, mask=view.mask), mean_stem,
                            key=f"attention_mean_{mean_stem}", width="content")
        with st.container(width="stretch"):
            st.markdown(f"**The head average of layer {layer + 1}:** what the layer as a whole attends to. "
                        "Sharp heads that look at different places blur into a soft average; heads that "
                        "agree keep it sharp.")
            display.csv_download(mean, rows, cols, mean_stem, key=f"csv_{mean_stem}")


# ---------------------------------------------------------------------------------------------- all heads


def grid_downloads(fig, stem: str, images: bool) -> None:
    """The grid as one PNG/SVG image (when `images`), rendered on the server only when its button is clicked
    (deferred data), and always as a standalone HTML file."""
    for fmt in IMAGE_MIME if images else ():
        st.download_button(f"Download all heads as {fmt.upper()}", data=lambda fmt=fmt: figure_to_image(fig, fmt),
                           file_name=f"{stem}.{fmt}", mime=IMAGE_MIME[fmt], key=f"grid_{fmt}_{stem}",
                           on_click="ignore", icon=":material/image:")
    st.download_button("Download all heads as HTML", data=lambda: figure_to_html(fig), file_name=f"{stem}.html",
                       mime="text/html", key=f"grid_html_{stem}", on_click="ignore", icon=":material/code:")


def all_heads(view: AttentionMap, task_name: str) -> None:
    rows, cols = charts.token_labels(view.query_pieces), charts.token_labels(view.key_pieces)
    stem = f"{chart_filename(task_name, view.kind)}_all-heads"
    fig = head_grid(view.blanked(), rows, cols, view.kind)
    st.caption("Layers down, heads across: each tile is one head, with the rows and columns of the large "
               "heatmap above" + (" (masked cells left blank)" if view.mask is not None else "") +
               ". Hover a cell to read its query, key and weight.")
    display.show_figure(fig, stem, key=f"attention_grid_{view.kind}", width="content")
    layers, heads, queries, keys = view.weights.shape
    images, reason = image_export_available()
    tiled = view.weights.transpose(0, 2, 1, 3).reshape(layers * queries, heads * keys)
    with st.container(horizontal=True):
        display.csv_download(tiled, [f"L{i + 1} · {r}" for i in range(layers) for r in rows],
                             [f"H{h + 1} · {c}" for h in range(heads) for c in cols], stem, key=f"csv_{stem}")
        grid_downloads(fig, stem, images)
    if not images:
        st.info(f"PNG/SVG of the whole grid needs a Chromium on the server, and {reason}. The HTML file opens "
                "offline in any browser, and its camera button saves a PNG.")


# ---------------------------------------------------------------------------------------------- statistics


def stats_table(stats: dict) -> pd.DataFrame:
    layers, heads = stats["entropy_bits"].shape
    frame = pd.DataFrame({"Layer": [i + 1 for i in range(layers) for _ in range(heads)],
                          "Head": [h + 1 for _ in range(layers) for h in range(heads)]})
    names = {"entropy_bits": "Entropy (bits)", "max_weight": "Max weight", "alignment": "Alignment"}
    for name, column in names.items():
        if name in stats:
            frame[column] = stats[name].ravel()
    return frame


def head_statistics(view: AttentionMap, task_name: str) -> None:
    stats = view.stats()
    if view.kind == "cross" and "alignment" not in stats:
        st.caption("This task has no fixed source position for each output token, so heads are compared by "
                   "entropy and maximum weight only.")
    elif view.kind != "cross":
        st.caption("The alignment score is defined for cross-attention: switch to it to see which head "
                   "learned the task.")
    stem = f"{chart_filename(task_name, view.kind)}_head-stats"
    title = f"{charts.KIND_TITLES[view.kind]} · per-head statistics"
    display.show_figure(stats_heatmap(stats, title), stem, key=f"attention_stats_{view.kind}",
                        width="content")
    table = stats_table(stats)
    st.dataframe(table, hide_index=True, key=f"attention_table_{view.kind}", column_config={
        "Entropy (bits)": st.column_config.NumberColumn(format="%.2f", help="0 = every query looks at one key"),
        "Max weight": st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1,
                                                      help="Mean over queries of the largest weight"),
        "Alignment": st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1,
                                                     help="Mean weight on the expected source token"),
    })
    st.caption("Click a column header to sort. Low entropy and a high maximum weight mean a focused head.")


@st.fragment
def explore(maps: dict[str, AttentionMap], task) -> None:
    kind = st.segmented_control("Attention kind", KINDS, format_func=KIND_NAMES.get, default="cross",
                                required=True, key=KIND)
    view = maps[kind]
    st.caption(KIND_HELP[kind] + (f" *{task.title}:* {task.description}" if kind == "cross" else ""))
    best = view.best_aligned()
    if best is not None:
        layer, head, score = best
        st.success(f"**Layer {layer + 1}, head {head + 1}** puts **{score:.0%}** of its weight on the expected "
                   "source token (averaged over the output positions): the head that learned the task. It is "
                   "picked below; the statistics at the end compare every head.", icon=":material/target:")
    st.subheader("One head", divider="gray")
    one_head(view, task.name)
    st.subheader(f"All heads: {view.layers} layers × {view.heads} heads", divider="gray")
    all_heads(view, task.name)
    st.subheader("Per-head statistics", divider="gray")
    head_statistics(view, task.name)


# ---------------------------------------------------------------------------------------------- the page

st.title("All attention heads")
st.markdown(
    "Every head of every layer, for the finished greedy decode of one input. Each row of a heatmap is one "
    "query token; its weights over the key tokens (columns) sum to 1. Heads that learned something precise "
    "light up a single cell per row; the statistics below find them for you.")
st.latex(r"A^{(\ell,h)} = \operatorname{softmax}\!\Big(\frac{Q^{(\ell,h)} {K^{(\ell,h)}}^{\top}}{\sqrt{d_k}} + M\Big)"
         r"\qquad \bar A^{(\ell)} = \frac{1}{H}\sum_{h=1}^{H} A^{(\ell,h)}")

active = registry.active_key()
if active is None:
    st.error("No model is available. Train one on the Train live page or upload a checkpoint.")
    st.stop()
bundle = registry.bundle_for(active)
text = input_controls(active, bundle.task)
try:
    output, finished, maps = decode(active, registry.version(active), text)
except (TokenizerError, DecodeError) as exc:
    st.error(f"{bundle.name} cannot decode this input: {exc}. Type another one or pick an example above.")
    st.stop()
show_outcome(bundle, text, output, finished)
explore(maps, bundle.task)
