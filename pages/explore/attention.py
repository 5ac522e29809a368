"""All attention heads: encoder self, decoder self and cross-attention of every layer and head for the
finished greedy decode of the input shared with the decode page, with per-head statistics and exports. The
attention kind, its layer and head and the clicked cell live in the page's state table (ui/tables/attention.py),
so the URL holds the view."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, display, knockout
from ui import model_registry as registry
from ui.markdown import code, literal
from ui.state import View
from ui.tables.attention import ATTENTION, KINDS
from ui.widgets import current_input, finish, header, input_picker, require_model, verdict, warn_if_longer_than_trained
from transformer import charts
from transformer.analysis.ablation import Head
from transformer.analysis.attention_maps import AttentionMap
from transformer.charts.compare import difference_heatmap
from transformer.network.decoding import DecodeError, DecodeResult
from transformer.charts.export import chart_filename, figure_to_html, figure_to_image, image_export_available
from transformer.network.tokenizers import TokenizerError

KIND_NAMES = {"cross": "Cross-attention", "encoder_self": "Encoder self-attention",
              "decoder_self": "Decoder self-attention"}
KIND_HELP = {
    "cross": display.decoder_rows() + " Columns: the source tokens.",
    "encoder_self": "Rows and columns: the source tokens. Each source token gathers context from the others.",
    "decoder_self": display.decoder_rows() + " Columns: the same tokens read. The causal mask hides later "
                    "positions (grey ×), so every row only sees the prefix up to itself.",
}
IMAGE_MIME = {"png": "image/png", "svg": "image/svg+xml"}
INPUT_HELP = "Shared with the step-by-step decoding page: change it on either page."

# Built figures are kept as shared objects in the decodes' byte-bounded cache, named by the decode they show
# (`source`: model key, version, input) and the chart's own arguments: st.plotly_chart only reads them (it
# serialises a copy), whereas a st.cache_data hit would unpickle the figure, which re-validates it and cost as
# much as building it here (50-60 ms per heatmap). Revisiting a kind, layer or head costs no figure building.


def intro() -> DeltaGenerator:
    notes = header("All attention heads")
    st.markdown(
        "Every head of every layer, for the finished greedy decode of one input. Each row of a heatmap is one "
        "query token; its weights over the key tokens (columns) sum to 1. Heads that learned something precise "
        "light up a single cell per row; the statistics below find them for you.")
    st.latex(r"A^{(\ell,h)} = \operatorname{softmax}\!\Big(\frac{Q^{(\ell,h)} {K^{(\ell,h)}}^{\top}}"
             r"{\sqrt{d_k}} + M\Big)\qquad \bar A^{(\ell)} = \frac{1}{H}\sum_{h=1}^{H} A^{(\ell,h)}")
    return notes


def show_outcome(task, text: str, result: DecodeResult) -> None:
    """The output, right or wrong against the task's answer (with the answer when wrong)."""
    output, answer = result.output_text, task.answer(text)
    line = f"**Output:** {code(output)}" + ("" if result.finished else " (stopped at the length limit without `</s>`)")
    if answer is not None:
        line += f" {verdict(output, answer)}" + ("" if output == answer else f" expected {code(answer)}")
    st.markdown(line)
    warn_if_longer_than_trained(task, text)


# ---------------------------------------------------------------------------------------------- one head


def _plain(label: str) -> str:
    return html.unescape(label)


def shown_head(view: View, amap: AttentionMap) -> tuple[int, int]:
    """(layer, head), 0-based: the ones picked, else the best-aligned head (layer 1, head 1 without one). A
    layer or head this kind of attention lacks is refused."""
    best_layer, best_head, _ = amap.best_aligned() or (0, 0, None)
    name = KIND_NAMES[amap.kind].lower()
    picked = {}
    for prop, count, default in (("layer", amap.layers, best_layer), ("head", amap.heads, best_head)):
        value = view.get(prop)
        if value is not None and value > count:
            view.refuse(prop, f"the {name} of this model has {count} {prop}(s)")
            value = None
        picked[prop] = default if value is None else value - 1
    return picked["layer"], picked["head"]


def shown_cell(view: View, queries: int, keys: int) -> tuple[int, int] | None:
    """The clicked (query, key) cell, if any; one outside this heatmap is refused."""
    cell = view.get("cell")
    if cell is not None and (cell[0] >= queries or cell[1] >= keys):
        view.refuse("cell", f"the heatmap has {queries} rows and {keys} columns (counted from 0)")
        return None
    return cell


def select_cell(view: View, chart_key: str, n_keys: int) -> None:
    """on_select of the large heatmap: its click layer's point_index is query * n_keys + key (no point: the
    selection was cleared)."""
    event = st.session_state.get(chart_key)
    points = event["selection"]["points"] if event else []
    view.set("cell", divmod(int(points[0]["point_index"]), n_keys) if points else None)


def head_picker(view: View, prop: str, count: int, shown: int, kind: str) -> None:
    """A layer or head selectbox (0-based options, 1-based labels and prop), one per kind of attention."""
    label = prop.capitalize()
    view.widget(prop, st.selectbox, label, range(count), slot=kind, to_widget=lambda _: shown,
                from_widget=lambda i: i + 1, format_func=lambda i: f"{label} {i + 1}")


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
def one_head(view: View, amap: AttentionMap, task_name: str, source: tuple, knocked: tuple[Head, ...]) -> None:
    """Layer and head pickers (first showing the best-aligned head, if any), the picked head as one large
    clickable heatmap with its numbers in words, and the layer's head average."""
    rows, cols = charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces)
    layer, head = shown_head(view, amap)
    pick_layer, pick_head, _ = st.columns([1, 1, 4])
    with pick_layer:
        head_picker(view, "layer", amap.layers, layer, amap.kind)
    with pick_head:
        head_picker(view, "head", amap.heads, head, amap.kind)
    stem = chart_filename(task_name, amap.kind, layer, head)
    chart_key = f"attention_big_{stem}"
    weights = amap.weights[layer, head]
    cell = shown_cell(view, len(rows), len(cols))
    off = Head(amap.kind, layer, head) in knocked
    with st.container(horizontal=True, gap="large"):
        fig = decodes.figure((*source, "head", amap.kind, layer, head, cell), lambda: charts.attention_heatmap(
            weights, rows, cols, charts.attention_title(amap.kind, layer, head, extra="knocked out" if off else ""),
            mask=amap.mask, clickable=True, highlight=cell, written=amap.written))
        display.show_figure(fig, stem, key=chart_key, on_select=lambda: select_cell(view, chart_key, len(cols)),
                            selection_mode="points", width="content")
        with st.container(width="stretch"):
            st.markdown(f"**Layer {layer + 1}, head {head + 1}.** " + _head_facts(amap.stats(), layer, head))
            if off:
                st.warning("This head is knocked out: it still computes these weights, but its output does not "
                           "reach the rest of the model.", icon=":material/block:")
            if cell:
                query, key = cell
                weight = float(weights[query, key])
                st.markdown(f"Query {code(_plain(rows[query]))} gives key {code(_plain(cols[key]))} weight "
                            f"**{weight:.3f}** ({weight:.0%} of its attention).")
            else:
                st.caption("Click a cell to read its query, key and weight.")
            display.csv_download(weights, rows, cols, stem, key=f"csv_{stem}")
    if knocked:
        change_from_intact(amap, layer, head, source, stem)
    mean = amap.head_average(layer)
    mean_stem = f"{chart_filename(task_name, amap.kind, layer)}_mean"
    with st.container(horizontal=True, gap="large"):
        title = charts.attention_title(amap.kind, layer, extra=f"mean of {amap.heads} heads")
        fig = decodes.figure((*source, "mean", amap.kind, layer),
                             lambda: charts.attention_heatmap(mean, rows, cols, title, mask=amap.mask,
                                                              written=amap.written))
        display.show_figure(fig, mean_stem,
                            key=f"attention_mean_{mean_stem}", width="content")
        with st.container(width="stretch"):
            st.markdown(f"**The head average of layer {layer + 1}:** what the layer as a whole attends to. "
                        "Sharp heads that look at different places blur into a soft average; heads that "
                        "agree keep it sharp.")
            display.csv_download(mean, rows, cols, mean_stem, key=f"csv_{mean_stem}")
    view.sync_url()


def change_from_intact(amap: AttentionMap, layer: int, head: int, source: tuple, stem: str) -> None:
    """With heads knocked out: this head's weights minus the intact model's on the same input, where the two
    decodes have the same shape (an ablated decode may write a different number of tokens)."""
    key, version, text, _, _ = source
    intact = decodes.maps(key, version, text)[amap.kind]
    if intact.weights.shape != amap.weights.shape:
        st.caption(f"The intact model wrote {intact.weights.shape[2]} decoder positions here and the ablated one "
                   f"{amap.weights.shape[2]}: there is no cell-by-cell change to show.")
        return
    rows, cols = charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces)
    change = amap.weights[layer, head] - intact.weights[layer, head]
    title = f"{charts.KIND_TITLES[amap.kind]} · L{layer + 1} H{head + 1} · change from the intact model"
    with st.container(horizontal=True, gap="large"):
        fig = decodes.figure((*source, "change", amap.kind, layer, head), lambda: difference_heatmap(
            amap.weights[layer, head], intact.weights[layer, head], rows, cols, title, mask=amap.mask))
        display.show_figure(fig, f"{stem}_change", key=f"attention_change_{stem}", width="content")
        with st.container(width="stretch"):
            st.markdown(f"**What the knockout changed in this head:** the ablated model's weights minus the intact "
                        f"model's (red: it attends more now; blue: less). Largest change: "
                        f"**{float(np.abs(change).max()):.3f}**.")
            display.csv_download(change, rows, cols, f"{stem}_change", key=f"csv_{stem}_change")


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


def all_heads(amap: AttentionMap, task_name: str, source: tuple, knocked: tuple[Head, ...]) -> None:
    rows, cols = charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces)
    stem = f"{chart_filename(task_name, amap.kind)}_all-heads"
    off = [f"L{h.layer + 1} H{h.head + 1}" for h in knocked if h.kind == amap.kind]
    title = f"{charts.KIND_TITLES[amap.kind]} · all {amap.layers} layers × {amap.heads} heads" + (
        f" · knocked out: {', '.join(off)}" if off else "")
    fig = decodes.figure((*source, "grid", amap.kind),
                         lambda: charts.head_grid(amap.blanked(), rows, cols, amap.kind, title=title,
                                                  written=amap.written))
    st.caption("Layers down, heads across: each tile is one head, with the rows and columns of the large "
               "heatmap above" + (" (masked cells left blank)" if amap.mask is not None else "") +
               ". Hover a cell to read its query, key and weight.")
    display.show_figure(fig, stem, key=f"attention_grid_{amap.kind}", width="content")
    layers, heads, queries, keys = amap.weights.shape
    images, reason = image_export_available()
    tiled = amap.weights.transpose(0, 2, 1, 3).reshape(layers * queries, heads * keys)
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


def head_statistics(amap: AttentionMap, task_name: str, source: tuple) -> None:
    stats = amap.stats()
    if amap.kind == "cross" and "alignment" not in stats:
        st.caption("This task has no fixed source position for each output token, so heads are compared by "
                   "entropy and maximum weight only.")
    elif amap.kind != "cross":
        st.caption("The alignment score is defined for cross-attention: switch to it to see which head "
                   "learned the task.")
    stem = f"{chart_filename(task_name, amap.kind)}_head-stats"
    title = f"{charts.KIND_TITLES[amap.kind]} · per-head statistics"
    fig = decodes.figure((*source, "stats", amap.kind), lambda: charts.head_stats_heatmap(stats, title))
    display.show_figure(fig, stem, key=f"attention_stats_{amap.kind}",
                        width="content")
    table = stats_table(stats)
    st.dataframe(table, hide_index=True, key=f"attention_table_{amap.kind}", column_config={
        "Entropy (bits)": st.column_config.NumberColumn(format="%.2f", help="0 = every query looks at one key"),
        "Max weight": st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1,
                                                      help="Mean over queries of the largest weight"),
        "Alignment": st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1,
                                                     help="Mean weight on the expected source token"),
    })
    st.caption("Click a column header to sort. Low entropy and a high maximum weight mean a focused head.")


def switch_kind(view: View, kind: str) -> None:
    """Show another kind of attention: the layer and head shown of the one left are kept (in the session),
    and those last shown of the new one come back."""
    model, left = view.get("model"), view.get("kind")
    picks = {(m, k): (layer, head) for m, k, layer, head in view.get("picks")}
    picks[(model, left)] = (view.get("layer"), view.get("head"))
    view.set("kind", kind)  # resets the layer, head and cell
    layer, head = picks.pop((model, kind), (None, None))
    view.set("layer", layer)
    view.set("head", head)
    view.set("picks", tuple((m, k, layer, head) for (m, k), (layer, head) in picks.items()))


@st.fragment
def explore(view: View, maps: dict[str, AttentionMap], task, source: tuple, knocked: tuple[Head, ...]) -> None:
    """The kind picker, then one head, all heads and the statistics of that kind; `source` (model key,
    version, input, heads knocked out and how) names the decode the charts are built from."""
    kind = view.widget("kind", st.segmented_control, "Attention kind", KINDS, format_func=KIND_NAMES.get,
                       required=True, from_widget=lambda new: switch_kind(view, new))
    amap = maps[kind]
    st.caption(KIND_HELP[kind] + (f" *{task.title}:* {task.description}" if kind == "cross" else ""))
    best = amap.best_aligned()
    if best is not None:
        layer, head, score = best
        st.success(f"**Layer {layer + 1}, head {head + 1}** puts **{score:.0%}** of its weight on the expected "
                   "source token (averaged over the output positions): the head that learned the task. It is "
                   "picked below; the statistics at the end compare every head.", icon=":material/target:")
    st.subheader("One head", divider="gray")
    one_head(view, amap, task.name, source, knocked)
    st.subheader(f"All heads: {amap.layers} layers × {amap.heads} heads", divider="gray")
    all_heads(amap, task.name, source, knocked)
    st.subheader("Per-head statistics", divider="gray")
    head_statistics(amap, task.name, source)
    view.sync_url()


# ---------------------------------------------------------------------------------------------- importance


@st.fragment
def head_importance(view: View, key: str, version: int, task_name: str) -> None:
    """Each head knocked out alone on held-out inputs (what it costs in exact match), and heads removed one
    after another, most important first; measured on a click (a few seconds), then kept for every session."""
    mode = view.get("knock_mode")
    st.markdown("Does the model *need* a head? Knock each one out alone and measure greedy exact match on "
                f"fresh held-out inputs (its output replaced by {knockout.MODE_NAMES[mode]}, as chosen above). "
                "A head that lights up neatly may still be redundant, and a blurry one essential.")
    with st.container(horizontal=True, vertical_alignment="bottom"):
        view.widget("samples", st.number_input, "Held-out inputs", min_value=20, max_value=2000, step=50,
                    width=160)
        measure = st.button("Measure head importance", icon=":material/science:", key="attention_measure")
    samples = view.get("samples")
    wanted = (key, version, samples, mode)
    if measure:
        with st.spinner(f"Knocking out every head on {samples} inputs…"):
            decodes.importance(*wanted)
        st.session_state["attention_importance"] = wanted
    if st.session_state.get("attention_importance") != wanted:
        st.caption("Press the button to measure (about a second per 100 inputs for a small model).")
        view.sync_url()
        return
    result = decodes.importance(*wanted)
    drops = {kind: np.zeros((max(h["layer"] for h in result["heads"] if h["kind"] == kind) + 1,
                             max(h["head"] for h in result["heads"]) + 1), dtype=np.float32)
             for kind in dict.fromkeys(h["kind"] for h in result["heads"])}
    for row in result["heads"]:
        drops[row["kind"]][row["layer"], row["head"]] = row["drop"]
    stem = f"{task_name}_head-importance_{mode}"
    title = (f"Exact match lost with each head knocked out alone · intact {result['baseline']:.1%} on "
             f"{samples} held-out inputs")
    fig = decodes.figure((key, version, "importance", samples, mode), lambda: charts.importance_heatmap(drops, title))
    display.show_figure(fig, stem, key="attention_importance_map", width="content")
    worst = max(result["heads"], key=lambda h: h["drop"])
    name = knockout.head_name(Head(worst["kind"], worst["layer"], worst["head"]))
    st.markdown(f"The most important single head is **{name}**: without it exact match falls from "
                f"{result['baseline']:.1%} to {worst['exact_match']:.1%}.")
    curve = decodes.figure((key, version, "removal", samples, mode), lambda: charts.removal_curve(
        result["removal"], "Exact match as heads are removed, most important first"))
    with st.container(horizontal=True, gap="large"):
        display.show_figure(curve, f"{stem}_removal", key="attention_removal_curve", width="content")
        table = pd.DataFrame([{"Kind": charts.KIND_TITLES[h["kind"]], "Layer": h["layer"] + 1, "Head": h["head"] + 1,
                               "Exact match": h["exact_match"], "Drop": h["drop"]} for h in result["heads"]])
        st.download_button("Numbers (CSV)", table.to_csv(index=False), file_name=f"{stem}.csv", mime="text/csv",
                           key="attention_importance_csv", on_click="ignore", icon=":material/download:")
    view.sync_url()


# ---------------------------------------------------------------------------------------------- the page


def main() -> None:
    view = ATTENTION.view()
    notes = intro()
    key, bundle = require_model()
    version = registry.version(key)
    if view.from_link("input"):  # a linked input the model cannot read: the default input, with a note
        try:
            decodes.maps(key, version, current_input(view, bundle.examples()))
        except (TokenizerError, DecodeError) as exc:
            view.refuse("input", f"{bundle.name} cannot decode it: {exc}")
    text = input_picker(view, bundle, help_text=INPUT_HELP)
    knocked, mode = knockout.picked(view, bundle.model)
    try:
        result = decodes.greedy(key, version, text, knocked=knocked, mode=mode)
        maps = decodes.maps(key, version, text, knocked, mode)
    except (TokenizerError, DecodeError) as exc:
        st.error(f"{literal(bundle.name)} cannot decode this input: {literal(str(exc))}. Type another one or pick an "
                 "example above.")
        finish(view, notes)
        return
    if knocked:
        intact = decodes.greedy(key, version, text).output_text
        knockout.compare(intact, result.output_text, bundle.task.answer(text), len(knocked))
        warn_if_longer_than_trained(bundle.task, text)
    else:
        show_outcome(bundle.task, text, result)
    explore(view, maps, bundle.task, (key, version, text, knocked, mode), knocked)
    st.subheader("Head importance", divider="gray")
    head_importance(view, key, version, bundle.task.name)
    finish(view, notes)


main()
