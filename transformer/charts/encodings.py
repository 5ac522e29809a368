"""Positional-encoding charts: the matrix, the classic sine curves, similarity between positions, and
how token embedding and position add up for one input."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import t

from .common import (
    CATEGORY_AXIS, DIVERGING_SCALE, EXTRA, as_array, bar_title, check_labels, figure, panel_axes, side_by_side,
)

SIMILARITY_SCALE = "Cividis"  # sequential: sinusoidal dot products are mostly positive
LINE_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]


def _bound(*arrays: np.ndarray) -> float:
    """Symmetric colour range covering every value (at least a tiny one, so all-zero tables still draw)."""
    return max(max(float(np.abs(a).max()) for a in arrays), 1e-6)


def _signed_heatmap(z: np.ndarray, hover: str, bound: float, **kwargs) -> go.Heatmap:
    return go.Heatmap(z=z, colorscale=DIVERGING_SCALE, zmin=-bound, zmax=bound, zmid=0,
                      hovertemplate=hover + EXTRA, **kwargs)


def _titled(text: str) -> dict:
    return dict(title=bar_title(text))


def positional_matrix(table, title: str | None = None) -> go.Figure:
    """The (length, d_model) table: positions down, dimensions across, on a diverging scale around 0."""
    pe = as_array(table, 2, "table")
    heatmap = _signed_heatmap(pe, t("charts.hover.encoding"), _bound(pe), colorbar=_titled(t("charts.value")))
    return figure([heatmap], title or t("charts.pe.matrix"), height=min(700, max(360, 8 * pe.shape[0] + 180)),
                  top=110, left=60, xaxis=dict(_titled(t("charts.dimension")), side="top", showgrid=False),
                  yaxis=dict(_titled(t("charts.position")), autorange="reversed", showgrid=False))


def positional_curves(table, dims: list[int], title: str | None = None) -> go.Figure:
    """The classic figure: one curve per chosen dimension, value against position."""
    pe = as_array(table, 2, "table")
    if not dims or any(not 0 <= d < pe.shape[1] for d in dims):
        raise ValueError(f"choose dimensions in 0..{pe.shape[1] - 1}")
    curves = [go.Scatter(
        x=np.arange(pe.shape[0]), y=pe[:, d], name=t("charts.dimension_n", n=d), mode="lines",
        line=dict(color=LINE_COLORS[i % len(LINE_COLORS)], width=2.5),
        hovertemplate=t("charts.hover.curve", n=d) + EXTRA,
    ) for i, d in enumerate(dims)]
    return figure(curves, title or t("charts.pe.curves"), height=420, legend=dict(orientation="h", y=-0.18, x=0),
                  xaxis=dict(_titled(t("charts.position")), gridcolor="#eee", zeroline=False),
                  yaxis=dict(_titled(t("charts.value")), gridcolor="#eee", zerolinecolor="#bbb"))


def position_similarity(table, title: str | None = None) -> go.Figure:
    """PE(i) · PE(j) for every pair of positions: nearby positions look alike, far ones less so."""
    pe = as_array(table, 2, "table")
    dots = (pe @ pe.T).astype(np.float32)
    heatmap = go.Heatmap(z=dots, colorscale=SIMILARITY_SCALE, colorbar=_titled(t("charts.dot")),
                         hovertemplate=t("charts.hover.similarity") + EXTRA)
    return figure([heatmap], title or t("charts.pe.similarity"), height=600, width=640, top=110, left=60,
                  xaxis=dict(_titled(t("charts.position")), side="top", showgrid=False, constrain="domain"),
                  yaxis=dict(_titled(t("charts.position")), autorange="reversed", showgrid=False, scaleanchor="x",
                             constrain="domain"))  # square in a narrow column: the plot shrinks, not the range


def embedding_sum(token_embeddings, positional, labels: list[str], title: str | None = None) -> go.Figure:
    """Three aligned panels for one input, (tokens, d_model) each, on one shared colour scale: the scaled
    token embedding, the positional term, and their sum (what the first layer receives)."""
    emb = as_array(token_embeddings, 2, "token embeddings")
    pos = as_array(np.reshape(positional, emb.shape), 2, "positional term")
    total = emb + pos
    y = check_labels(labels, emb.shape[0], "token labels")
    bound = _bound(emb, pos, total)
    panels = ((t("charts.pe.token_embedding"), emb), (t("charts.pe.plus_positional"), pos), (t("charts.pe.sum"), total))
    traces = [_signed_heatmap(
        z, t("charts.hover.embedding", name=name), bound, y=y,
        showscale=i == len(panels) - 1, colorbar=_titled(t("charts.value")), **panel_axes(i),
    ) for i, (name, z) in enumerate(panels)]
    layout = side_by_side([name for name, _ in panels], spacing=0.03, share_y=True, title_size=15,
                          xaxis=dict(_titled(t("charts.dimension")), showgrid=False),
                          yaxis=dict(CATEGORY_AXIS, autorange="reversed", showgrid=False, tickfont=dict(size=13)))
    return figure(traces, title or t("charts.pe.embedding_sum"), height=max(300, 26 * len(y) + 170), top=90, **layout)


def token_vectors(values, labels: list[str], title: str, what: str | None = None, bound: float | None = None
                  ) -> go.Figure:
    """One vector per token (tokens, width): tokens down in order, `what` (its columns in words: "dimension", the
    default, or "hidden unit") across, on a diverging scale around 0 (symmetric; `bound` fixes its ends, so two
    charts compare)."""
    what = what or t("charts.dimension")
    v = as_array(values, 2, "values")
    y = check_labels(labels, v.shape[0], "token labels")
    heatmap = _signed_heatmap(v, t("charts.hover.vector", what=what), bound or _bound(v), y=y,
                              colorbar=dict(_titled(t("charts.value")), thickness=12))
    return figure([heatmap], title, height=max(200, 22 * len(y) + 110), top=64, left=10,
                  xaxis=dict(_titled(what), showgrid=False),
                  yaxis=dict(CATEGORY_AXIS, autorange="reversed", showgrid=False, tickfont=dict(size=13)))
