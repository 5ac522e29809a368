"""Shared pieces of every chart: token labels, colour scales, titles, the layout and figure builders, and the
masked-cell overlay."""

from __future__ import annotations

import html
import unicodedata

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale

from transformer.i18n import Texts, t

# Attention weights always use this fixed 0..1 scale, so two heads' colours mean the same number.
WEIGHT_SCALE = "Viridis"
WEIGHT_COLORS = get_colorscale(WEIGHT_SCALE)  # the same as [position, colour] pairs, for specs of plain dicts
DIVERGING_SCALE = "RdBu_r"  # signed values (scores, encodings): blue negative, red positive, white 0
MASKED_COLOR = "#9a9a9a"
# Chinese text in a CJK font of the machine drawing it (the reader's browser, or kaleido's Chromium for a PNG: see
# fonts.cjk_font), the Simplified forms first
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, Noto Sans CJK SC, Noto Sans SC, Source Han Sans SC, "
                   "PingFang SC, Microsoft YaHei, WenQuanYi Micro Hei, sans-serif", size=14, color="#222")
# Okabe-Ito colours (colour-blind safe), one per attention kind, reused by every chart that names a kind.
KIND_COLORS = {"encoder_self": "#0072B2", "decoder_self": "#D55E00", "cross": "#009E73"}
KIND_TITLES = Texts({
    "encoder_self": "charts.kind.encoder_self",
    "decoder_self": "charts.kind.decoder_self",
    "cross": "charts.kind.cross",
})
KIND_SHORT = Texts({"encoder_self": "charts.kind_short.encoder_self", "decoder_self": "charts.kind_short.decoder_self",
                    "cross": "charts.kind_short.cross"})  # a kind in a few words, for a title in half a page
HIGHLIGHT, MUTED = "#E69F00", "#56B4E9"
# Token labels ("06 7", "09 0" for a date) can look like numbers or dates to plotly.js, which then guesses a
# linear or date axis and draws nothing; every axis of labels says it holds categories.
CATEGORY_AXIS = dict(type="category")
COLORBAR_PX = 120  # pixels a heatmap figure keeps right of its cells for the colour bar
EXTRA = "<extra></extra>"  # ends a hover template: no trace name box beside the hover


def bar_title(text: str) -> dict:
    """A colour bar's title, clear of the label of its top tick: plotly sets the title's baseline just over the
    bar, and the label, centred on the bar's end, reaches half a line above it. An empty subscript under the title
    adds its depth (a few pixels) between them, where a second line would add a whole one."""
    return dict(text=f"{text}<sub> </sub>")


def display_piece(piece: str) -> str:
    """A token as plotly must be given it: a space shown as ␣, and "<s>" escaped (plotly reads text as HTML,
    where <s> would start strikethrough and </s> would vanish)."""
    return "␣" if piece == " " else html.escape(piece, quote=False)


def probability_text(p: float) -> str:
    """A probability as the app writes it, a share as the axes do: "99.8%"; one under 0.1% to two significant
    digits ("0.0042%", "3.1e-05%"), so that runners-up never read alike as "0.0%"; "0" for none at all."""
    if p == 0:
        return "0"
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def token_labels(pieces: list[str]) -> list[str]:
    """Axis labels "03 e": position, then the piece, so repeated tokens stay distinct. Specials arrive
    HTML-escaped ("00 &lt;s&gt;") and read "00 <s>" on the chart; `html.unescape` gives the plain text."""
    width = max(2, len(str(len(pieces) - 1)))
    return [f"{i:0{width}d} {display_piece(p)}" for i, p in enumerate(pieces)]


def attention_title(kind: str, layer: int | None = None, head: int | None = None, step: int | None = None,
                    extra: str = "") -> str:
    """"Cross-attention · layer 1 · head 3 · step 5" from 0-based indices (shown 1-based)."""
    parts = [KIND_TITLES.get(kind, kind)]
    parts += [t(key, n=value + 1) for key, value in (("charts.layer", layer), ("charts.head", head),
                                                      ("charts.step", step)) if value is not None]
    return " · ".join(parts + ([extra] if extra else []))


def as_array(values, ndim: int, name: str) -> np.ndarray:
    """float32 numpy copy of `values` (numpy, lists or CPU tensors), checked to have `ndim` dimensions."""
    array = np.asarray(values, dtype=np.float32)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    return array


def read_labels(written: list[str]) -> list[str]:
    """Row labels of decoder queries for a decode that wrote `written`, by the one convention of every page:
    the token read at each step (`<s>`, then all but the last token written)."""
    return token_labels(["<s>", *written[:-1]])


def check_labels(labels: list[str], size: int, name: str) -> list[str]:
    if len(labels) != size:
        raise ValueError(f"{len(labels)} {name} for {size} rows/columns")
    return list(labels)


# The toolbar plotly shows over a chart's top right corner on hover, on white: over a narrow chart's title its icons
# stood among the title's letters.
MODEBAR_BACKGROUND = "white"


def figure_spec(traces: list, title: str, height: int, width: int | None = None, top: int = 64, left: int = 10,
                right: int = 10, **layout) -> dict:
    """A figure's data and whole layout as plain dicts: the parts every chart shares (title pinned to the top
    edge, fonts, white background, margins) plus the chart's own `layout` keys. `go.Figure(spec)` is the
    figure; a spec of plain traces (dicts) serialises for plotly.js with no plotly.py objects in between."""
    return {"data": traces, "layout": dict(
        title=dict(text=title, x=0.01, xanchor="left", yref="container", y=1, yanchor="top",
                   pad=dict(t=14), font=dict(size=17)),
        font=FONT, height=int(height), **({"width": int(width)} if width else {}),
        plot_bgcolor="white", paper_bgcolor="white", modebar=dict(bgcolor=MODEBAR_BACKGROUND),
        margin=dict(l=left, r=right, t=top, b=12), hoverlabel=dict(font=dict(size=14)), **layout,
    )}


def figure(traces: list, title: str, height: int, width: int | None = None, top: int = 64, left: int = 10,
           right: int = 10, **layout) -> go.Figure:
    """`figure_spec` as a figure, built in one call from its traces and its whole layout: several times faster
    than `update_layout`/`update_xaxes`/`add_shape` calls on a made figure, which validate their changes path
    by path (benchmarks/chart_speed.py); pages rebuild charts on every click."""
    return go.Figure(figure_spec(traces, title, height, width, top, left, right, **layout))


TITLE_LINE_PX = 22  # one more line of a chart's 17 px title


def with_title_line(fig: go.Figure, line: str) -> go.Figure:
    """`fig` (changed in place) with `line` under its title, for a chart narrower than its whole title, and
    room for it: plotly lifts a two-line title pinned to the top by its second line, so the title is padded
    down by one line and the plot starts one line lower."""
    layout = fig.layout
    return fig.update_layout(title_text=f"{layout.title.text}<br>{line}", height=layout.height + TITLE_LINE_PX,
                             title_pad_t=layout.title.pad.t + TITLE_LINE_PX, margin_t=layout.margin.t + TITLE_LINE_PX)


def side_by_side(titles: list[str], spacing: float, xaxis: dict, yaxis: dict, title_size: int = 14,
                 share_y: bool = False) -> dict:
    """Layout entries for one panel per title, side by side: axes xaxis/yaxis, xaxis2/yaxis2, ... (styled by
    `xaxis` and `yaxis`), `spacing` apart on 0..1, each panel's title above it. With `share_y` the panels
    after the first zoom with the first and hide their tick labels. Put panel i's traces on `panel_axes(i)`."""
    width = (1 - spacing * (len(titles) - 1)) / len(titles)
    entries: dict = {"annotations": []}
    for i, text in enumerate(titles):
        n, domain = _axis_suffix(i), [i * (width + spacing), i * (width + spacing) + width]
        shared = dict(matches="y", showticklabels=False) if share_y and i else {}
        entries[f"xaxis{n}"] = dict(xaxis, domain=domain, anchor=f"y{n}")
        entries[f"yaxis{n}"] = dict(yaxis, domain=[0.0, 1.0], anchor=f"x{n}", **shared)
        entries["annotations"].append(dict(
            text=text, x=(domain[0] + domain[1]) / 2, y=1.0, xref="paper", yref="paper", xanchor="center",
            yanchor="bottom", showarrow=False, font=dict(size=title_size)))
    return entries


def panel_axes(i: int) -> dict:
    """The trace arguments that put a trace on panel i of `side_by_side`."""
    return dict(xaxis=f"x{_axis_suffix(i)}", yaxis=f"y{_axis_suffix(i)}")


def _axis_suffix(i: int) -> str:
    return "" if i == 0 else str(i + 1)


def cell_size(rows: int, cols: int, target: int = 520, lo: int = 14, hi: int = 44) -> int:
    """Pixels per heatmap cell so that the larger side is about `target` pixels."""
    return int(np.clip(target / max(rows, cols, 1), lo, hi))


def text_width(text: str) -> float:
    """A text's rendered width in ems, roughly: 0.62 a character, a full em for a wide (CJK) one."""
    return sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.62 for c in text)


def _text_px(labels: list[str], size: int = 13) -> int:
    """Rough rendered width of the longest label."""
    return int(size * max((text_width(html.unescape(label)) for label in labels), default=0.62)) + 8


def matrix_spec(traces: list, title: str, y_labels: list[str], x_labels: list[str], col_px: int,
                row_px: int | None = None, **extra) -> dict:
    """A heatmap figure's spec (figure_spec) with keys along the top (flat when they fit a cell, else vertical),
    queries down the side in token order (reversed y range: row 0 on top), every cell fully in view, sized to
    fit the labels."""
    rows, cols, row_px = len(y_labels), len(x_labels), row_px or col_px
    flat = _text_px(x_labels) <= col_px
    top = 56 + (24 if flat else _text_px(x_labels))
    left = _text_px(y_labels) + 12
    axis = dict(CATEGORY_AXIS, showgrid=False, zeroline=False, tickfont=dict(size=13))
    return figure_spec(traces, title, height=rows * row_px + top + 16,
                       width=cols * col_px + left + COLORBAR_PX, top=top, left=left,
                       xaxis=dict(axis, side="top", tickangle=0 if flat else -90, range=[-0.5, cols - 0.5]),
                       yaxis=dict(axis, range=[rows - 0.5, -0.5]), **extra)


def matrix_figure(traces: list, title: str, y_labels: list[str], x_labels: list[str], col_px: int,
                  row_px: int | None = None, **extra) -> go.Figure:
    """`matrix_spec` as a figure."""
    return go.Figure(matrix_spec(traces, title, y_labels, x_labels, col_px, row_px, **extra))


def masked_overlay(blocked: np.ndarray, x: list[str], y: list[str], label: str | None = None) -> go.Heatmap:
    """A grey layer with an "×" in each blocked cell, drawn over a heatmap whose blocked cells are NaN,
    so a masked position never reads as a small number. Hover names it `label` ("masked (-inf)")."""
    z = np.where(blocked, 1.0, np.nan).astype(np.float32)
    return go.Heatmap(
        z=z, x=x, y=y, name="masked", colorscale=[[0, MASKED_COLOR], [1, MASKED_COLOR]], showscale=False,
        zmin=0, zmax=1, text=np.where(blocked, "×", ""), texttemplate="%{text}",
        textfont=dict(color="white", size=13), hoverongaps=False,
        hovertemplate=t("charts.hover.masked", label=label or t("charts.masked_inf")) + EXTRA, xgap=1, ygap=1,
    )
