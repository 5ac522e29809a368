"""Showing charts the same way on every page: toolbar export in the chosen format, the numbers behind a
heatmap, matrix figures fitted into a column, rows of charts that wrap rather than skip a token label, a decode's
cross-attention (one head, the mean of a layer's heads, or every head), and the presenter switch's larger charts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from transformer import charts
from transformer.charts.common import COLORBAR_PX
from transformer.charts.export import matrix_to_csv, table_to_csv
from transformer.charts.fonts import export_language
from transformer.i18n import language, t, using

from . import step_player
from .chart_look import SMALL_PX, TITLE_PX
from .markdown import code
from .sidebar import EXPORT_FORMAT, presenting

HALF_WIDTH = 470  # a figure in one of two columns of the wide layout at a 1400-pixel window
ALL_HEADS = "all"  # cross_figure's head: every head of every layer, as one grid
PRESENTER_SCALE = 1.35  # text and chart heights in presenter mode, for the back row
BASE_FONT_PX = 14  # a figure's text size when it sets none (charts.common.FONT)


def decoder_rows() -> str:
    """The one convention for decoder query rows on every page and export, said once under every such chart."""
    return t("app.decoder_rows")


def presenter_sized(fig: go.Figure, scale: float = PRESENTER_SCALE) -> go.Figure:
    """A copy of `fig` for the back row (pages' figures may be cached and shared: the original never changes).
    Its text is `scale` times larger (titles, tick labels, legend, hover text: the figure's own sizes or the chart
    look's) and a chart of free width `scale` times taller. A matrix chart (fixed width: square cells sized to its
    token labels, fitted to its column) keeps its cells and token labels, which are forced to label every token (a
    larger font would make plotly skip some); ticks it names itself (every head's grid: L1, H1, ...) grow."""
    big = go.Figure(fig)
    layout = big.layout
    matrix = bool(layout.width)

    def grown(px: float | None, default: float | None = None) -> float:
        """`px` (or, unset, `default`) at the scale."""
        return round((px or default) * scale, 1)

    font = layout.font.size or BASE_FONT_PX
    extra_top = round(font * (scale - 1) * 1.6)  # room for the larger title
    grow = {"font_size": grown(font), "margin_t": (layout.margin.t or 0) + extra_top,
            "legend_font_size": grown(layout.legend.font.size, SMALL_PX),
            "hoverlabel_font_size": grown(layout.hoverlabel.font.size, SMALL_PX)}
    if layout.title.font.size:
        grow["title_font_size"] = grown(layout.title.font.size)
    if layout.height:
        grow["height"] = layout.height + extra_top if matrix else round(layout.height * scale)
    big.update_layout(**grow)

    def axis_grow(axis) -> None:
        if matrix and axis.type == "category" and axis.tickvals is None:
            axis.update(tickmode="linear", tick0=0, dtick=1)
        else:
            axis.update(tickfont_size=grown(axis.tickfont.size, SMALL_PX))
        axis.update(title_font_size=grown(axis.title.font.size, TITLE_PX))

    big.for_each_xaxis(axis_grow)
    big.for_each_yaxis(axis_grow)
    return big


def show_figure(fig, filename: str, *, key: str, width: str | int = "stretch",
                on_point: Callable[[int | None], None] | None = None) -> None:
    """Plot `fig` (step_player.plot: `width`, `on_point`); its toolbar camera saves `<filename>.png|svg` (the
    sidebar's format) at slide scale. In presenter mode it is shown larger (presenter_sized), and the camera saves
    it as shown. A figure that changes (a live run's) is drawn into the chart shown, not as a new chart."""
    fig, fmt = as_shown(fig)
    step_player.plot(key, fig, filename, fmt, width=width, on_point=on_point)


def as_shown(fig) -> tuple[go.Figure, str]:
    """`fig` as this session shows it (presenter mode's larger copy) and the export format its camera saves."""
    return presenter_sized(fig) if presenting() else fig, export_format()


def export_format() -> str:
    """The image format a chart's camera saves, as the sidebar sets it: "png" or "svg"."""
    return st.session_state.get(EXPORT_FORMAT, "png")


def for_export(build) -> go.Figure:
    """The figure `build()` makes, for a server-side image: in the reader's language, or in English where this
    server has no CJK font (fonts.export_language), so an exported chart never shows boxes for Chinese."""
    with using(export_language()):
        return build()


def export_note() -> str | None:
    """What an export offer says when its images come out in English for want of a CJK font; None otherwise."""
    return None if export_language() == language() else ":material/info: " + t("app.no_cjk_font")


def csv_download(matrix: np.ndarray, row_labels, col_labels, filename: str, *, key: str | None = None,
                 label: str | None = None) -> None:
    """A button that downloads the numbers behind a heatmap as CSV (rows and columns labelled)."""
    st.download_button(
        label or t("app.csv"),
        matrix_to_csv(np.asarray(matrix), row_labels, col_labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key or f"csv-{filename}",
        icon=":material/table:",
        on_click="ignore",
    )


def table_download(frame, filename: str, *, key: str, label: str | None = None, index: bool = False) -> None:
    """A button that downloads a table (a pandas DataFrame) as `<filename>.csv`, its text cells safe to open in a
    spreadsheet (export.table_to_csv): every table the app offers as CSV goes through here or csv_download."""
    st.download_button(label or t("app.csv"), table_to_csv(frame, index=index), file_name=f"{filename}.csv",
                       mime="text/csv", key=key, icon=":material/table:", on_click="ignore")


TICK_PX = 16  # room across a rotated 13 px token label needs for plotly to draw every one (none skipped)


def label_width(fig: go.Figure | dict) -> int:
    """Pixels a matrix chart (charts.matrix_spec / matrix_figure; a figure or its spec) needs across to label every
    key: its left margin, TICK_PX a key (more in presenter mode, whose labels are larger) and its colour bar."""
    spec = fig if isinstance(fig, dict) else {"layout": {"margin": {"l": fig.layout.margin.l}},
                                                  "data": [{"x": fig.data[0].x}]}
    per_key = TICK_PX * (PRESENTER_SCALE if presenting() else 1)
    return round(spec["layout"]["margin"]["l"] + len(spec["data"][0]["x"]) * per_key) + COLORBAR_PX


def fitted_row(key: str, widths: list[int]) -> list:
    """Containers side by side where each gets at least its width in pixels (a chart's `label_width`), else
    wrapped one above the other, each then as wide as the column: a chart never has to skip a token label for
    want of room (plotly drops labels that would overlap). `key` names the row (containers `<key>_<i>`)."""
    st.html("<style>" + "".join(  # a container's flex item is its layout wrapper
        f"[data-testid=stLayoutWrapper]:has(> .st-key-{key}_{i}) {{ flex: 1 1 {px}px; min-width: 0; }}"
        for i, px in enumerate(widths)) + "</style>")
    row = st.container(horizontal=True, wrap=True, gap="large")
    return [row.container(key=f"{key}_{i}") for i in range(len(widths))]


def fit(fig, width: int):
    """Shrink a matrix figure wider than `width` pixels, keeping its cells square (labels keep their size)."""
    full, height, margin = fig.layout.width, fig.layout.height, fig.layout.margin
    if full and height and full > width:
        scale = (width - margin.l - COLORBAR_PX) / (full - margin.l - COLORBAR_PX)
        cells = height - margin.t - margin.b
        fig.update_layout(width=width, height=int(margin.t + margin.b + cells * scale))
    return fig


def heatmap(fig, matrix, rows: list[str], cols: list[str], filename: str, key: str, width: int | None = None) -> None:
    """A heatmap at its own size (square cells, or fitted into `width`), its toolbar export and a CSV."""
    if width:
        fit(fig, width)
    show_figure(fig, filename, key=f"fig-{key}", width="content")
    csv_download(matrix, rows, cols, filename, key=f"csv-{key}")


def cross_weights(cross, layer: int, head: int | None) -> np.ndarray:
    """One head's cross-attention (queries, keys) from a decode's (layers, heads, queries, keys), or the mean
    of the layer's heads when `head` is None."""
    weights = np.asarray(cross, dtype=np.float32)[layer]
    return weights.mean(0) if head is None else weights[head]


def cross_figure(result, layer: int, head: int | str | None, extra: str = ""):
    """The cross-attention of a decode: `result` is anything with `cross` (layers, heads, output tokens, source
    tokens; a tensor or an array), `output_pieces` and `source_pieces` (a DecodeResult, a training ProbeResult).
    `head` is a head, None for the mean of the layer's heads, or ALL_HEADS for every head of every layer in one
    grid. `extra` ends the title (e.g. "with positions", "training step 250")."""
    written = list(result.output_pieces)
    rows, cols = charts.read_labels(written), charts.token_labels(result.source_pieces)
    if head == ALL_HEADS:
        layers, heads = np.shape(result.cross)[:2]
        title = " · ".join([t("app.cross_all_heads", n=layers, heads=heads), *([extra] if extra else [])])
        return charts.head_grid(result.cross, rows, cols, "cross", title=title, written=written)
    extra = extra if head is not None else " · ".join([t("app.mean_of_heads"), *([extra] if extra else [])])
    title = charts.attention_title("cross", layer, head, extra=extra)
    return charts.attention_heatmap(cross_weights(result.cross, layer, head), rows, cols, title, written=written)


def cross_heatmap(result, layer: int, head: int | None, *, filename: str, key: str, extra: str = "",
                  width: int | None = None, csv: bool = True, caption: bool = True, figure=None) -> None:
    """Show `cross_figure(result, layer, head, extra)` (or `figure`, that figure already built) at its own size
    (fitted into `width` if given) under the chart key `key`, with the `decoder_rows` caption unless `caption` is
    False, and a CSV of the weights shown unless `csv` is False."""
    fig = cross_figure(result, layer, head, extra) if figure is None else figure
    if width:
        fit(fig, width)
    show_figure(fig, filename, key=key, width="content")
    if caption:
        st.caption(decoder_rows())
    if csv:
        rows, cols = charts.read_labels(list(result.output_pieces)), charts.token_labels(result.source_pieces)
        csv_download(cross_weights(result.cross, layer, head), rows, cols, filename, key=f"csv-{key}")


def output(text: str) -> str:
    """A model's output for markdown: in code style, or a note when it is empty."""
    return code(text) if text else t("app.empty_output")
