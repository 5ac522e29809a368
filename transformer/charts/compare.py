"""Two models side by side: one head of each on one scale, where they differ, and their held-out scores."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import t

from .attention import axis_labels, blocked_cells, weight_bar, weight_hover
from .common import (
    CATEGORY_AXIS, DIVERGING_SCALE, EXTRA, WEIGHT_SCALE, as_array, bar_title, cell_size, figure, masked_overlay,
    matrix_figure, panel_axes, side_by_side,
)

PAIR_COLORS = ("#0072B2", "#E69F00")  # model A, model B (Okabe-Ito)


def difference_heatmap(a, b, query_labels: list[str], key_labels: list[str], title: str, mask=None) -> go.Figure:
    """A - B of two heads' weights of one shape (queries, keys) on a fixed -1..1 diverging scale (white: equal;
    red: A attends more; blue: B does). Blocked cells (mask False) are left grey with an "×"."""
    wa, wb = as_array(a, 2, "a"), as_array(b, 2, "b")
    if wa.shape != wb.shape:
        raise ValueError(f"the two heads' shapes differ: {wa.shape} and {wb.shape}")
    y, x = axis_labels(wa, query_labels, key_labels)
    diff = wa - wb
    blocked = blocked_cells(mask, diff.shape)
    z = diff if blocked is None else np.where(blocked, np.nan, diff).astype(np.float32)
    traces = [go.Heatmap(
        z=z, x=x, y=y, colorscale=DIVERGING_SCALE, zmin=-1, zmax=1, zmid=0, xgap=1, ygap=1, hoverongaps=False,
        colorbar=dict(title=bar_title("A − B"), tickvals=[-1, -0.5, 0, 0.5, 1], len=0.9),
        hovertemplate=t("charts.hover.difference") + EXTRA,
    )]
    if blocked is not None:
        traces.append(masked_overlay(blocked, x, y, t("charts.masked_both")))
    return matrix_figure(traces, title, y, x, cell_size(*diff.shape))


def score_bars(names: list[str], values: list[float | None], title: str, axis: str | None = None) -> go.Figure:
    """One horizontal bar per model (`names`, top to bottom) on 0..1 (`axis`: held-out exact match), its value
    written beside it; None draws no bar and says "n/a"."""
    axis = axis or t("charts.held_out_exact_match")
    shown = [np.nan if v is None else float(v) for v in values]
    bars = go.Bar(x=shown, y=names, orientation="h", marker=dict(color=list(PAIR_COLORS[:len(names)])),
                  text=[t("charts.n_a") if v is None else f"{v:.1%}" for v in values], textposition="outside",
                  cliponaxis=False, hovertemplate=f"%{{y}}<br>{axis} %{{x:.3f}}" + EXTRA)
    return figure([bars], title, height=60 * len(names) + 120, showlegend=False,
                  xaxis=dict(range=[0, 1.15], tickformat=".0%", title=dict(text=axis), gridcolor="#eee"),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=14)))


def pair_heatmaps(heads: list[tuple | None], names: list[str], title: str) -> go.Figure:
    """Two heads side by side on the one fixed 0..1 weight scale (one colour bar), free width. `heads` holds,
    per model, (weights (queries, keys), query labels, key labels, mask or None), or None where the model
    lacks the head (its panel then says so); `names` titles the panels."""
    traces = []
    shown = [i for i, h in enumerate(heads) if h is not None]
    rows = max((len(heads[i][1]) for i in shown), default=1)
    for i, head in enumerate(heads):
        axes = panel_axes(i)
        if head is None:
            continue
        weights, query_labels, key_labels, mask = head
        w = as_array(weights, 2, "weights")
        y, x = axis_labels(w, query_labels, key_labels)
        blocked = blocked_cells(mask, w.shape)
        traces.append(go.Heatmap(
            z=w if blocked is None else np.where(blocked, np.nan, w).astype(np.float32), x=x, y=y, zmin=0, zmax=1,
            colorscale=WEIGHT_SCALE, colorbar=weight_bar(), showscale=i == shown[-1], xgap=1, ygap=1,
            hoverongaps=False, name=names[i], hovertemplate=f"{names[i]}<br>" + weight_hover(), **axes))
        if blocked is not None:
            traces.append(masked_overlay(blocked, x, y, t("charts.masked_zero")).update(**axes))
    axis = dict(CATEGORY_AXIS, showgrid=False, zeroline=False, tickfont=dict(size=12))
    layout = side_by_side(names, spacing=0.16, xaxis=dict(axis, side="bottom", tickangle=-90),
                          yaxis=dict(axis, autorange="reversed"))
    # a note in the middle of an empty panel, under its title (side_by_side's first annotations, one per panel): a
    # panel without a trace has no axes to place it by
    for i in set(range(len(heads))) - set(shown):
        centre = layout["annotations"][i]["x"]
        layout["annotations"].append(dict(text=t("charts.no_such_head"), xref="paper", yref="paper", x=centre, y=0.5,
                                          showarrow=False, font=dict(size=15, color="#666")))
    return figure(traces, title, height=max(280, min(rows * 30, 560) + 170), top=80, left=60, **layout)
