"""What each head is worth: exact match lost when it is knocked out, and as heads are removed in turn."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import t

from .common import EXTRA, KIND_COLORS, KIND_TITLES, WEIGHT_SCALE, bar_title, figure, panel_axes, side_by_side


def importance_heatmap(drops: dict[str, np.ndarray], title: str) -> go.Figure:
    """One layers x heads panel per attention kind (`drops`: kind -> (layers, heads) exact-match drop), on one
    shared 0..max scale; the drop written in each cell, a negative one (the head hurt) too."""
    kinds = list(drops)
    top = max(max(float(np.max(d)) for d in drops.values()), 1e-6)
    traces = []
    for i, kind in enumerate(kinds):
        values = np.asarray(drops[kind], dtype=np.float32)
        layers, heads = values.shape
        traces.append(go.Heatmap(
            z=values, x=[f"H{h + 1}" for h in range(heads)], y=[f"L{i + 1}" for i in range(layers)],
            zmin=0.0, zmax=top, colorscale=WEIGHT_SCALE, showscale=i == len(kinds) - 1, xgap=2, ygap=2,
            colorbar=dict(title=bar_title(t("charts.ablation.drop")), thickness=14), texttemplate="%{z:.2f}",
            textfont=dict(size=13), name=kind, hovertemplate=t("charts.hover.drop", kind=KIND_TITLES[kind]) + EXTRA,
            **panel_axes(i)))
    layers = max(np.shape(d)[0] for d in drops.values())
    heads = max(np.shape(d)[1] for d in drops.values())
    panels = side_by_side([KIND_TITLES[k] for k in kinds], spacing=0.08, xaxis={}, yaxis=dict(autorange="reversed"))
    return figure(traces, title, height=layers * 46 + 150, width=len(kinds) * max(heads * 52, 220) + 140, top=80,
                  left=40, **panels)


def removal_curve(removal: list[dict], title: str) -> go.Figure:
    """Exact match against the number of heads removed, most important first; each point names the head
    that went last (its kind's colour)."""
    counts = [step["removed"] for step in removal]
    values = [step["exact_match"] for step in removal]
    names = [step["head"] or t("charts.ablation.intact") for step in removal]
    colors = [KIND_COLORS.get((step["head"] or "").split(":")[0], "#222222") for step in removal]
    trace = go.Scatter(x=counts, y=values, mode="lines+markers", line=dict(color="#444444", width=2),
                       marker=dict(size=9, color=colors), customdata=names,
                       hovertemplate=t("charts.hover.removed") + EXTRA)
    return figure([trace], title, height=360, width=max(420, 26 * len(counts) + 160), left=60,
                  xaxis=dict(title=dict(text=t("charts.ablation.removed_axis")), dtick=1 if len(counts) <= 30
                             else None, zeroline=False),
                  yaxis=dict(title=dict(text=t("charts.held_out_exact_match")), range=[0, 1.02]))
