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
from ui.code_links import code_link
from ui.failure import fragment
from ui.markdown import code, literal
from ui.state import View
from ui.tables.attention import ATTENTION, KIND_NAMES, KINDS
from ui.widgets import (
    finish, header, input_picker, layer_or_head, require_model, verdict, warn_if_longer_than_trained,
)
from transformer import charts
from transformer.analysis.knockout import Head
from transformer.analysis.attention_maps import AttentionMap
from transformer.charts.compare import difference_heatmap
from transformer.network.decoding import DecodeError, DecodeResult
from transformer.charts.export import chart_filename, figure_to_html, figure_to_image, image_export_available
from transformer.network.tokenizers import TokenizerError
from transformer.i18n import Texts, t

KIND_HELP = Texts({"cross": "attention.help.cross", "encoder_self": "attention.help.encoder_self",
                   "decoder_self": "attention.help.decoder_self"})  # what the rows and columns are
DECODER_ROWS = ("cross", "decoder_self")  # kinds whose rows are the decoder's queries
IMAGE_MIME = {"png": "image/png", "svg": "image/svg+xml"}

# Built figures are kept as shared objects in the decodes' byte-bounded cache, named by the decode they show
# (`source`: model key, version, input) and the chart's own arguments: the chart only reads them (it
# serialises them), whereas a st.cache_data hit would unpickle the figure, which re-validates it and cost as
# much as building it here (50-60 ms per heatmap). Revisiting a kind, layer or head costs no figure building.


def intro() -> DeltaGenerator:
    notes = header(t("app.page.attention"))
    st.markdown(t("attention.intro"))
    st.latex(r"A^{(\ell,h)} = \operatorname{softmax}\!\Big(\frac{Q^{(\ell,h)} {K^{(\ell,h)}}^{\top}}"
             r"{\sqrt{d_k}} + M\Big)\qquad \bar A^{(\ell)} = \frac{1}{H}\sum_{h=1}^{H} A^{(\ell,h)}")
    return notes


def show_outcome(task, text: str, result: DecodeResult) -> None:
    """The output, right or wrong against the task's answer (with the answer when wrong)."""
    output, answer = result.output_text, task.answer(text)
    line = t("attention.output", output=code(output)) + ("" if result.finished else t("attention.unfinished"))
    if answer is not None:
        line += f" {verdict(output, answer)}" + (
            "" if output == answer else t("attention.expected", answer=code(answer)))
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
    for prop, count, default, why in (("layer", amap.layers, best_layer, "attention.only_layers"),
                                      ("head", amap.heads, best_head, "attention.only_heads")):
        value = view.get(prop)
        if value is not None and value > count:
            view.refuse(prop, t(why, kind=name, n=count))
            value = None
        picked[prop] = default if value is None else value - 1
    return picked["layer"], picked["head"]


def shown_cell(view: View, queries: int, keys: int) -> tuple[int, int] | None:
    """The clicked (query, key) cell, if any; one outside this heatmap is refused."""
    cell = view.get("cell")
    if cell is not None and (cell[0] >= queries or cell[1] >= keys):
        view.refuse("cell", t("attention.only_cells", rows=queries, cols=keys))
        return None
    return cell


def select_cell(view: View, point: int | None, n_keys: int) -> None:
    """A click on the large heatmap: its click layer's point `point` is query * n_keys + key (None: a double
    click cleared the pick)."""
    view.set("cell", None if point is None else divmod(point, n_keys))


def _head_facts(stats: dict, layer: int, head: int) -> str:
    """This head's statistics in words, with its rank by alignment when the task has one."""
    facts = [t("attention.facts.entropy", bits=stats["entropy_bits"][layer, head]),
             t("attention.facts.max_weight", weight=stats["max_weight"][layer, head])]
    if "alignment" in stats and not np.isnan(stats["alignment"][layer, head]):
        scores = stats["alignment"]
        rank = int((scores > scores[layer, head]).sum()) + 1
        facts.append(t("attention.facts.alignment", share=scores[layer, head], rank=rank, heads=scores.size))
    return t("app.sentence", text=t("app.list_separator").join(facts))


@fragment
def one_head(view: View, amap: AttentionMap, task_name: str, source: tuple, knocked: tuple[Head, ...]) -> None:
    """Layer and head pickers (first showing the best-aligned head, if any), the picked head as one large
    clickable heatmap with its numbers in words, and the layer's head average."""
    rows, cols = charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces)
    layer, head = shown_head(view, amap)
    pick_layer, pick_head, _ = st.columns([1, 1, 4])
    with pick_layer:
        layer_or_head(view, "layer", amap.layers, layer, slot=amap.kind)
    with pick_head:
        layer_or_head(view, "head", amap.heads, head, slot=amap.kind)
    stem = chart_filename(task_name, amap.kind, layer, head)
    chart_key = f"attention_big_{stem}"
    weights = amap.weights[layer, head]
    cell = shown_cell(view, len(rows), len(cols))
    off = Head(amap.kind, layer, head) in knocked
    with st.container(horizontal=True, gap="large"):
        fig = decodes.figure((*source, "head", amap.kind, layer, head, cell), lambda: charts.attention_heatmap(
            weights, rows, cols, charts.attention_title(amap.kind, layer, head,
                                                        extra=t("attention.knocked_out") if off else ""),
            mask=amap.mask, clickable=True, highlight=cell, written=amap.written))
        display.show_figure(fig, stem, key=chart_key, width="content",
                            on_point=lambda point: select_cell(view, point, len(cols)))
        with st.container(width="stretch"):
            st.markdown(t("attention.head_heading", layer=layer + 1, head=head + 1)
                        + _head_facts(amap.stats(), layer, head))
            if off:
                st.warning(t("attention.off"), icon=":material/block:")
            if cell:
                query, key = cell
                st.markdown(t("attention.cell", query=code(_plain(rows[query])), key=code(_plain(cols[key])),
                              weight=float(weights[query, key])))
            else:
                st.caption(t("attention.click"))
            display.csv_download(weights, rows, cols, stem, key=f"csv_{stem}")
            code_link("attention", text=source[2], kind=amap.kind, layer=layer, head=head)
    if knocked:
        change_from_intact(amap, layer, head, source, stem)
    mean = amap.head_average(layer)
    mean_stem = f"{chart_filename(task_name, amap.kind, layer)}_mean"
    with st.container(horizontal=True, gap="large"):
        title = charts.attention_title(amap.kind, layer, extra=t("attention.mean_of", n=amap.heads))
        fig = decodes.figure((*source, "mean", amap.kind, layer),
                             lambda: charts.attention_heatmap(mean, rows, cols, title, mask=amap.mask,
                                                              written=amap.written))
        display.show_figure(fig, mean_stem,
                            key=f"attention_mean_{mean_stem}", width="content")
        with st.container(width="stretch"):
            st.markdown(t("attention.mean_text", layer=layer + 1))
            display.csv_download(mean, rows, cols, mean_stem, key=f"csv_{mean_stem}")
            code_link("multi_head", text=source[2], kind=amap.kind, layer=layer, head=head)
    view.sync_url()


def change_from_intact(amap: AttentionMap, layer: int, head: int, source: tuple, stem: str) -> None:
    """With heads knocked out: this head's weights minus the intact model's on the same input, where the two
    decodes have the same shape (an ablated decode may write a different number of tokens)."""
    key, version, text, _, _ = source
    intact = decodes.maps(key, version, text)[amap.kind]
    if intact.weights.shape != amap.weights.shape:
        st.caption(t("attention.change.shapes", intact=intact.weights.shape[2], ablated=amap.weights.shape[2]))
        return
    rows, cols = charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces)
    change = amap.weights[layer, head] - intact.weights[layer, head]
    title = t("attention.change.title", kind=charts.KIND_TITLES[amap.kind], layer=layer + 1, head=head + 1)
    with st.container(horizontal=True, gap="large"):
        fig = decodes.figure((*source, "change", amap.kind, layer, head), lambda: difference_heatmap(
            amap.weights[layer, head], intact.weights[layer, head], rows, cols, title, mask=amap.mask))
        display.show_figure(fig, f"{stem}_change", key=f"attention_change_{stem}", width="content")
        with st.container(width="stretch"):
            st.markdown(t("attention.change.text", largest=float(np.abs(change).max())))
            display.csv_download(change, rows, cols, f"{stem}_change", key=f"csv_{stem}_change")


# ---------------------------------------------------------------------------------------------- all heads


def grid_downloads(fig, build, stem: str, images: bool) -> None:
    """The grid as one PNG/SVG image (when `images`; `build()` makes it again in the language the server draws
    images in), rendered on the server only when its button is clicked (deferred data), and always as a
    standalone HTML file (the reader's browser draws it; its camera saves in the sidebar's format)."""
    for fmt in IMAGE_MIME if images else ():
        st.download_button(t("attention.grid.download", fmt=fmt.upper()),
                           data=lambda fmt=fmt: figure_to_image(display.for_export(build), fmt),
                           file_name=f"{stem}.{fmt}", mime=IMAGE_MIME[fmt], key=f"grid_{fmt}_{stem}",
                           on_click="ignore", icon=":material/image:")
    camera = display.export_format()  # read now: the file is made when its button is clicked, outside this run
    st.download_button(t("attention.grid.download", fmt="HTML"), data=lambda: figure_to_html(fig, stem, camera),
                       file_name=f"{stem}.html", mime="text/html", key=f"grid_html_{stem}", on_click="ignore",
                       icon=":material/code:")


def all_heads(amap: AttentionMap, task_name: str, source: tuple, knocked: tuple[Head, ...]) -> None:
    rows, cols = charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces)
    stem = f"{chart_filename(task_name, amap.kind)}_all-heads"
    off = [f"L{h.layer + 1} H{h.head + 1}" for h in knocked if h.kind == amap.kind]

    def build():
        title = t("charts.all_heads", kind=charts.KIND_TITLES[amap.kind], layers=amap.layers, heads=amap.heads)
        title += t("attention.grid.off", heads=", ".join(off)) if off else ""
        return charts.head_grid(amap.blanked(), rows, cols, amap.kind, title=title, written=amap.written)

    fig = decodes.figure((*source, "grid", amap.kind), build)
    st.caption(t("attention.grid.caption_masked" if amap.mask is not None else "attention.grid.caption"))
    display.show_figure(fig, stem, key=f"attention_grid_{amap.kind}", width="content")
    layers, heads, queries, keys = amap.weights.shape
    images, reason = image_export_available()
    tiled = amap.weights.transpose(0, 2, 1, 3).reshape(layers * queries, heads * keys)
    with st.container(horizontal=True):
        display.csv_download(tiled, [f"L{i + 1} · {r}" for i in range(layers) for r in rows],
                             [f"H{h + 1} · {c}" for h in range(heads) for c in cols], stem, key=f"csv_{stem}")
        grid_downloads(fig, build, stem, images)
    code_link("multi_head", text=source[2], kind=amap.kind)
    if not images:
        st.info(t("attention.grid.no_images", reason=reason))
    elif (note := display.export_note()) is not None:
        st.caption(note)


# ---------------------------------------------------------------------------------------------- statistics


STAT_COLUMNS = Texts({"entropy_bits": "attention.stats.entropy", "max_weight": "attention.stats.max_weight",
                      "alignment": "attention.stats.alignment"})  # the statistics table's columns


def stats_table(stats: dict) -> pd.DataFrame:
    layers, heads = stats["entropy_bits"].shape
    frame = pd.DataFrame({t("masks.layer"): [i + 1 for i in range(layers) for _ in range(heads)],
                          t("masks.head"): [h + 1 for _ in range(layers) for h in range(heads)]})
    for name, column in STAT_COLUMNS.items():
        if name in stats:
            frame[column] = stats[name].ravel()
    return frame


def head_statistics(amap: AttentionMap, task_name: str, source: tuple) -> None:
    stats = amap.stats()
    if amap.kind == "cross" and "alignment" not in stats:
        st.caption(t("attention.stats.no_alignment"))
    elif amap.kind != "cross":
        st.caption(t("attention.stats.cross_only"))
    stem = f"{chart_filename(task_name, amap.kind)}_head-stats"
    title = t("attention.stats.title", kind=charts.KIND_TITLES[amap.kind])
    fig = decodes.figure((*source, "stats", amap.kind), lambda: charts.head_stats_heatmap(stats, title))
    display.show_figure(fig, stem, key=f"attention_stats_{amap.kind}",
                        width="content")
    table = stats_table(stats)
    st.dataframe(table, hide_index=True, key=f"attention_table_{amap.kind}", column_config={
        STAT_COLUMNS["entropy_bits"]: st.column_config.NumberColumn(format="%.2f",
                                                                    help=t("attention.stats.entropy_help")),
        STAT_COLUMNS["max_weight"]: st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1,
                                                                    help=t("attention.stats.max_weight_help")),
        STAT_COLUMNS["alignment"]: st.column_config.ProgressColumn(format="%.2f", min_value=0, max_value=1,
                                                                   help=t("attention.stats.alignment_help")),
    })
    st.caption(t("attention.stats.caption"))


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


@fragment
def explore(view: View, maps: dict[str, AttentionMap], task, source: tuple, knocked: tuple[Head, ...]) -> None:
    """The kind picker, then one head, all heads and the statistics of that kind; `source` (model key,
    version, input, heads knocked out and how) names the decode the charts are built from."""
    kind = view.widget("kind", st.segmented_control, t("attention.kind_label"), KINDS, format_func=KIND_NAMES.get,
                       required=True, from_widget=lambda new: switch_kind(view, new))
    amap = maps[kind]
    st.caption((display.decoder_rows() + " " if kind in DECODER_ROWS else "") + KIND_HELP[kind]
               + (t("attention.task", title=task.title, description=task.description) if kind == "cross" else ""))
    best = amap.best_aligned()
    if best is not None:
        layer, head, score = best
        st.success(t("attention.best", layer=layer + 1, head=head + 1, share=score), icon=":material/target:")
    st.subheader(t("attention.one_head"), divider="gray")
    one_head(view, amap, task.name, source, knocked)
    st.subheader(t("attention.all_heads", layers=amap.layers, heads=amap.heads), divider="gray")
    all_heads(amap, task.name, source, knocked)
    st.subheader(t("attention.statistics"), divider="gray")
    head_statistics(amap, task.name, source)
    view.sync_url()


# ---------------------------------------------------------------------------------------------- importance


@fragment
def head_importance(view: View, key: str, version: int, task_name: str) -> None:
    """Each head knocked out alone on held-out inputs (what it costs in exact match), and heads removed one
    after another, most important first; measured on a click (a few seconds), then kept for every session."""
    mode = view.get("knock_mode")
    st.markdown(t("attention.importance.text", mode=knockout.MODE_NAMES[mode]))
    with st.container(horizontal=True, vertical_alignment="bottom"):
        view.widget("samples", st.number_input, t("attention.importance.samples"), min_value=20, max_value=2000,
                    step=50, width=160)
        measure = st.button(t("attention.importance.measure"), icon=":material/science:", key="attention_measure")
    samples = view.get("samples")
    wanted = (key, version, samples, mode)
    if measure:
        with st.spinner(t("attention.importance.running", n=samples)):
            decodes.importance(*wanted)
        st.session_state["attention_importance"] = wanted
    if st.session_state.get("attention_importance") != wanted:
        st.caption(t("attention.importance.press"))
        view.sync_url()
        return
    result = decodes.importance(*wanted)
    drops = {kind: np.zeros((max(h["layer"] for h in result["heads"] if h["kind"] == kind) + 1,
                             max(h["head"] for h in result["heads"]) + 1), dtype=np.float32)
             for kind in dict.fromkeys(h["kind"] for h in result["heads"])}
    for row in result["heads"]:
        drops[row["kind"]][row["layer"], row["head"]] = row["drop"]
    stem = f"{task_name}_head-importance_{mode}"
    title = t("attention.importance.title", baseline=result["baseline"], n=samples)
    fig = decodes.figure((key, version, "importance", samples, mode), lambda: charts.importance_heatmap(drops, title))
    display.show_figure(fig, stem, key="attention_importance_map", width="content")
    worst = max(result["heads"], key=lambda h: h["drop"])
    name = knockout.head_name(Head(worst["kind"], worst["layer"], worst["head"]))
    st.markdown(t("attention.importance.worst", name=name, baseline=result["baseline"], without=worst["exact_match"]))
    curve = decodes.figure((key, version, "removal", samples, mode), lambda: charts.removal_curve(
        result["removal"], t("attention.importance.curve_title")))
    with st.container(horizontal=True, gap="large"):
        display.show_figure(curve, f"{stem}_removal", key="attention_removal_curve", width="content")
        table = pd.DataFrame([{t("attention.importance.kind"): charts.KIND_TITLES[h["kind"]],
                               t("masks.layer"): h["layer"] + 1, t("masks.head"): h["head"] + 1,
                               t("errors.exact_match"): h["exact_match"], t("attention.importance.drop"): h["drop"]}
                              for h in result["heads"]])
        display.table_download(table, stem, key="attention_importance_csv")
    view.sync_url()


# ---------------------------------------------------------------------------------------------- the page


def main() -> None:
    view = ATTENTION.view()
    notes = intro()
    key, bundle = require_model()
    version = registry.version(key)
    decodes.readable_link_input(view, key, bundle)
    text = input_picker(view, bundle, help_text=t("attention.input_help"))
    knocked, mode = knockout.picked(view, bundle.model)
    try:
        result = decodes.greedy(key, version, text, knocked=knocked, mode=mode)
        maps = decodes.maps(key, version, text, knocked, mode)
    except (TokenizerError, DecodeError) as exc:
        st.error(t("attention.cannot_decode", name=literal(bundle.name), error=literal(str(exc))))
        finish(view, notes)
        return
    if knocked:
        intact = decodes.greedy(key, version, text).output_text
        knockout.compare(intact, result.output_text, bundle.task.answer(text), len(knocked))
        warn_if_longer_than_trained(bundle.task, text)
    else:
        show_outcome(bundle.task, text, result)
    explore(view, maps, bundle.task, (key, version, text, knocked, mode), knocked)
    st.subheader(t("attention.importance.header"), divider="gray")
    head_importance(view, key, version, bundle.task.name)
    finish(view, notes)


main()
