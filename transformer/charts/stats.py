"""Numbers at a glance: next-token probabilities, per-head statistics, training curves."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import t

from .common import (
    CATEGORY_AXIS, EXTRA, HIGHLIGHT, MUTED, WEIGHT_SCALE, display_piece, figure, figure_spec, panel_axes,
    probability_text, side_by_side,
)

# metric key (as in headstats.head_stats) -> (panel title's catalog key: on two lines to fit a 200 px panel, fixed
# colour range or None for 0..max, colours).
# Entropy's scale runs the other way, so a focused head is bright in every panel.
HEAD_METRICS = {
    "entropy_bits": ("charts.stats.entropy", None, WEIGHT_SCALE + "_r"),
    "max_weight": ("charts.stats.max_weight", (0.0, 1.0), WEIGHT_SCALE),
    "alignment": ("charts.stats.alignment", (0.0, 1.0), WEIGHT_SCALE),
}
CURVE_COLORS = {"loss": "#222222", "token_accuracy": "#0072B2", "exact_match": "#D55E00", "train_loss": "#8c8c8c",
                "train_token_accuracy": "#56B4E9"}
# (metric key, legend name, hover name (catalog keys), axes) in drawing order, a training curve just before the
# held-out one it is shaded to; the legend names the held-out metrics and, once, the dashed training batch (the
# caption says the rest)
CURVES = (("train_loss", "charts.curves.training_batch", "charts.curves.training_loss", ("x", "y")),
          ("loss", "charts.loss", "charts.curves.held_out_loss", ("x", "y")),
          ("train_token_accuracy", "charts.curves.training_token_accuracy", "charts.curves.training_token_accuracy",
           ("x2", "y2")),
          ("token_accuracy", "charts.token_accuracy", "charts.curves.held_out_token_accuracy", ("x2", "y2")),
          ("exact_match", "charts.exact_match", "charts.held_out_exact_match", ("x2", "y2")))
TRAINING = ("train_loss", "train_token_accuracy")  # the latest training batch's, drawn dashed
GAP_OF = {"loss": "train_loss", "token_accuracy": "train_token_accuracy"}  # held-out metric -> its training one
GAP_COLOR = "rgba(213, 94, 0, 0.16)"  # the gap between training and held-out
FEW_POINTS = 12  # with this many points or fewer, every curve shows its points (the first seconds of a run)


# topk_bar scales: catalog keys of (axis title, the scale's name: hover and choices); log-probabilities and logits
# make the runners-up readable
TOPK_SCALES = {
    "probability": ("charts.topk.probability", "charts.topk.probability"),
    "log-probability": ("charts.topk.log_probability_axis", "charts.topk.log_probability"),
    "logit": ("charts.topk.logit_axis", "charts.topk.logit"),
}


def bar_text(value: float, scale: str) -> str:
    """A bar's label: probabilities as shares (`probability_text`), log-probabilities and logits to 2 decimals (small
    ones to 2 significant digits)."""
    if scale == "probability":
        return probability_text(value)
    return f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"  # -0.00031, not -0.00


def topk_spec(pieces: list[str], probs, chosen: str | None = None, title: str | None = None,
              scale: str = "probability") -> dict:
    """Horizontal bars of the top-k next tokens, in the given order from the top; `chosen` highlighted; as a
    spec of plain dicts (figure_spec). `probs` holds the values on `scale` (see TOPK_SCALES): probabilities,
    log-probabilities or logits."""
    if scale not in TOPK_SCALES:
        raise ValueError(f"scale must be one of {', '.join(TOPK_SCALES)}, got {scale!r}")
    p = np.asarray(probs, dtype=np.float32)
    if p.ndim != 1 or len(pieces) != len(p):
        raise ValueError(f"{len(pieces)} pieces for values of shape {p.shape}")
    axis_title, name = (t(key) for key in TOPK_SCALES[scale])
    labels = [display_piece(piece) for piece in pieces]
    colors = [HIGHLIGHT if piece == chosen else MUTED for piece in pieces]
    bars = dict(
        type="bar", x=p, y=labels, orientation="h", marker=dict(color=colors),
        text=[bar_text(float(v), scale) for v in p], textposition="outside", cliponaxis=False,
        hovertemplate=t("charts.hover.token_share" if scale == "probability" else "charts.hover.token_value",
                        name=name) + EXTRA,  # as bar_text labels it
    )
    if scale == "probability":
        xaxis = dict(range=[0, 1.12], tickformat=".0%")
    else:  # room for the labels outside the bars on both sides of 0
        finite = p[np.isfinite(p)]
        lo, hi = (min(float(finite.min()), 0.0), max(float(finite.max()), 0.0)) if finite.size else (-1.0, 0.0)
        pad = 0.18 * max(hi - lo, 1e-6)
        xaxis = dict(range=[lo - (pad if lo < 0 else 0), hi + (pad if hi > 0 else 0)], zeroline=True,
                     zerolinecolor="#888")
    return figure_spec([bars], title or t("charts.topk.title"), height=34 * len(p) + 130, showlegend=False,
                       right=36,  # the labels' room, enlarged (presenter mode) included
                       xaxis=dict(xaxis, title=dict(text=axis_title), gridcolor="#eee"),
                       yaxis=dict(CATEGORY_AXIS, autorange="reversed", tickfont=dict(size=15)))


def topk_bar(pieces: list[str], probs, chosen: str | None = None, title: str | None = None,
             scale: str = "probability") -> go.Figure:
    """`topk_spec` as a figure."""
    return go.Figure(topk_spec(pieces, probs, chosen, title, scale))


def head_stats_heatmap(stats: dict[str, np.ndarray], title: str) -> go.Figure:
    """One small layers x heads panel per metric from `headstats.head_stats`, values written in the cells."""
    names = [name for name in HEAD_METRICS if name in stats]
    layers, heads = np.shape(stats[names[0]])
    traces = []
    for i, name in enumerate(names):
        values = np.asarray(stats[name], dtype=np.float32)
        _, fixed, scale = HEAD_METRICS[name]
        lo, hi = fixed or (0.0, max(float(np.nanmax(values)), 1e-6))
        traces.append(go.Heatmap(
            z=values, x=[f"H{h + 1}" for h in range(heads)], y=[f"L{i + 1}" for i in range(layers)],
            zmin=lo, zmax=hi, colorscale=scale, showscale=False, xgap=2, ygap=2,
            texttemplate="%{z:.2f}", textfont=dict(size=13), name=name,
            hovertemplate=f"%{{y}} %{{x}}<br>{t(HEAD_METRICS[name][0]).replace('<br>', ' ')} %{{z:.3f}}" + EXTRA,
            **panel_axes(i),
        ))
    panels = side_by_side([t(HEAD_METRICS[n][0]) for n in names], spacing=0.1, xaxis={},
                          yaxis=dict(autorange="reversed"))
    return figure(traces, title, height=layers * 42 + 168, width=len(names) * max(heads * 48, 240) + 80, top=98,
                  left=40, **panels)


def _thin(count: int, max_points: int) -> np.ndarray:
    """Indices of at most `max_points` evenly spread entries, always keeping the first and the last."""
    if count <= max_points:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, max_points).round().astype(int))


def training_curves(history: list[dict], title: str | None = None, max_points: int = 400,
                    steps: int | None = None) -> go.Figure:
    """Loss (top) and token accuracy / exact match on 0..1 (bottom) against the step: the held-out metrics, and
    where the rows hold them the training batch's loss and token accuracy, dashed, the gap between training and
    held-out shaded. Entries may lack a metric (exact match is measured less often); at most `max_points` entries
    are drawn, so a live chart sends a bounded amount however long training runs. `steps`: the run's length, the
    step axis's end from the first point on. Zoom survives live updates (uirevision)."""
    rows = [history[i] for i in _thin(len(history), max_points)]
    traces, drawn = [], set()
    for name, legend, label, axes in CURVES:
        points = [(r["step"], r[name]) for r in rows if r.get(name) is not None]
        if name in TRAINING and not points:
            continue
        steps_, values = (list(v) for v in zip(*points)) if points else ([], [])
        gap = GAP_OF.get(name) in drawn  # shaded down (or up) to its training curve, drawn just before
        drawn.add(name)
        traces.append(go.Scatter(
            x=steps_, y=values, name=t(legend), showlegend=name != "train_token_accuracy", xaxis=axes[0],
            yaxis=axes[1], mode="lines+markers" if name == "exact_match" or len(points) <= FEW_POINTS else "lines",
            line=dict(color=CURVE_COLORS[name], width=2 if name in TRAINING else 2.5,
                      dash="dash" if name in TRAINING else "solid"), marker=dict(size=6),
            fill="tonexty" if gap else None, fillcolor=GAP_COLOR if gap else None,
            legendrank=2 if name in TRAINING else 1,
            hovertemplate=t("charts.hover.curve_step", name=t(label)) + EXTRA,
        ))
    span = dict(range=[0, steps]) if steps else {}
    return figure(  # loss on top, accuracies below, one shared step axis
        traces, title or t("charts.training"), height=480, uirevision="training",
        legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", xanchor="left"),
        xaxis=dict(anchor="y", domain=[0.0, 1.0], gridcolor="#eee", matches="x2", showticklabels=False),
        xaxis2=dict(anchor="y2", domain=[0.0, 1.0], gridcolor="#eee", title=dict(text=t("charts.step_axis")), **span),
        yaxis=dict(anchor="x", domain=[0.54, 1.0], gridcolor="#eee", rangemode="tozero",
                   title=dict(text=t("charts.loss"))),
        yaxis2=dict(anchor="x2", domain=[0.0, 0.46], gridcolor="#eee", range=[0, 1.02], tickformat=".0%",
                    title=dict(text=t("charts.accuracy"))),
    )
