"""Where a model fails: metrics by input length (the trained range marked), accuracy by output position and the
most frequent wrong tokens."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import Texts, t

from .common import EXTRA, display_piece, figure, panel_axes, side_by_side

# metric -> line colour (Okabe-Ito), and its name on the chart
METRIC_COLORS = {"exact_match": "#0072B2", "token_accuracy": "#E69F00"}
METRICS = Texts({"exact_match": "charts.exact_match", "token_accuracy": "charts.token_accuracy"})
# position scheme -> line colour and marker (Okabe-Ito; markers tell the lines apart without colour)
SCHEME_STYLES = {"sinusoidal": ("#0072B2", "circle"), "learned": ("#E69F00", "square"),
                 "rope": ("#CC79A7", "diamond"), "alibi": ("#009E73", "triangle-up"), "none": ("#666", "x")}
SCHEMES = Texts({"sinusoidal": "charts.scheme.sinusoidal", "learned": "charts.scheme.learned",
                 "rope": "charts.scheme.rope", "alibi": "charts.scheme.alibi", "none": "charts.scheme.none"})
TRAINED_FILL = "rgba(0, 158, 115, 0.13)"


def _trained_band(trained: tuple[int, int] | None, panels: int = 1) -> dict:
    """Layout shapes and annotations shading lengths trained[0]..trained[1] on each of `panels` x axes (none
    for None)."""
    if trained is None:
        return {}
    lo, hi = trained
    xrefs = [panel_axes(i)["xaxis"] for i in range(panels)]
    yrefs = [f"{panel_axes(i)['yaxis']} domain" if panels > 1 else "paper" for i in range(panels)]
    return dict(
        shapes=[dict(type="rect", xref=x, yref=y, x0=lo - 0.5, x1=hi + 0.5, y0=0, y1=1, layer="below",
                     fillcolor=TRAINED_FILL, line=dict(width=0)) for x, y in zip(xrefs, yrefs)],
        annotations=[dict(xref=x, yref=y, x=(lo + hi) / 2, y=0.02, yanchor="bottom", showarrow=False,
                          text=t("charts.errors.trained" if panels > 1 else "charts.errors.trained_lengths", lo=lo,
                                 hi=hi),
                          font=dict(size=13, color="#00704f")) for x, y in zip(xrefs, yrefs)])


def _count_ticks(top: int) -> dict:
    """Axis settings for whole counts up to `top`: integer ticks only (plotly's own would repeat "1", "1")."""
    return dict(rangemode="tozero", tickformat=",d", dtick=max(1, -(-int(top) // 5)))


def _steps_axis(n: int, title: str) -> dict:
    """An x axis of whole numbers 1..n (every one labelled while they fit)."""
    return dict(title=dict(text=title), dtick=1 if n <= 12 else None, range=[0.4, n + 0.6] if n else None,
                gridcolor="#eee")


def length_metrics(lengths, metrics: dict[str, np.ndarray], trained: tuple[int, int] | None, title: str,
                   counts=None) -> go.Figure:
    """One line per metric (`metrics`: metric, as in METRICS, -> a 0..1 value per length in `lengths`), the trained
    lengths shaded; `counts` (inputs per length) shown on hover."""
    x = np.asarray(lengths, dtype=np.int64)
    hover_n = "" if counts is None else t("charts.hover.inputs")
    traces = []
    for metric, values in metrics.items():
        y, name = np.asarray(values, dtype=np.float32), METRICS.get(metric, metric)
        if y.shape != x.shape:
            raise ValueError(f"{name}: {y.shape[0] if y.ndim else 0} values for {x.shape[0]} lengths")
        traces.append(go.Scatter(
            x=x, y=y, name=name, mode="lines+markers", line=dict(color=METRIC_COLORS.get(metric, "#444"), width=2.5),
            marker=dict(size=8), customdata=None if counts is None else np.asarray(counts),
            hovertemplate=t("charts.hover.length", name=name) + hover_n + EXTRA))
    band = _trained_band(trained)
    return figure(traces, title, height=380, top=96, left=60, **band,
                  legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
                  xaxis=dict(title=dict(text=t("charts.errors.input_length")), dtick=1 if len(x) <= 12 else None,
                             gridcolor="#eee", range=[float(x.min()) - 0.7, float(x.max()) + 0.7] if len(x) else None),
                  yaxis=dict(title=dict(text=t("charts.errors.held_out_inputs")), range=[0, 1.04], tickformat=".0%",
                             gridcolor="#eee"))


def scheme_lengths(lengths, curves: dict[str, dict[str, np.ndarray]], trained: tuple[int, int], title: str,
                   metrics: tuple[str, ...] = ("exact_match", "token_accuracy")) -> go.Figure:
    """Models that differ in their position scheme, side by side: one panel per metric in `metrics` (as in
    METRICS), one line per scheme (`curves`: scheme -> metric -> a 0..1 value per length in `lengths`), the
    trained lengths shaded in every panel."""
    x = np.asarray(lengths, dtype=np.int64)
    traces = []
    for scheme, values in curves.items():
        color, symbol = SCHEME_STYLES.get(scheme, ("#444", "circle"))
        name = SCHEMES.get(scheme, scheme)
        for i, metric in enumerate(metrics):
            y = np.asarray(values[metric], dtype=np.float32)
            if y.shape != x.shape:
                raise ValueError(f"{scheme} {metric}: {y.shape[0] if y.ndim else 0} values for {x.shape[0]} lengths")
            traces.append(go.Scatter(
                x=x, y=y, name=name, legendgroup=scheme, showlegend=i == 0, mode="lines+markers",
                line=dict(color=color, width=2.5), marker=dict(size=8, symbol=symbol), **panel_axes(i),
                hovertemplate=f"{name}<br>" + t("charts.hover.length", name=METRICS.get(metric, metric)) + EXTRA))
    span = [float(x.min()) - 0.7, float(x.max()) + 0.7] if len(x) else None
    panels = side_by_side([METRICS.get(m, m) for m in metrics], 0.08,
                          dict(title=dict(text=t("charts.errors.input_length")), range=span, gridcolor="#eee"),
                          dict(range=[0, 1.04], tickformat=".0%", gridcolor="#eee"), share_y=True)
    band = _trained_band(trained, len(metrics))
    panels["annotations"] += band.pop("annotations")
    return figure(traces, title, height=420, top=110, left=60, **panels, **band,
                  legend=dict(orientation="h", y=1.08, yanchor="bottom", x=1, xanchor="right"))


def position_accuracy(counts, hits, first_errors, title: str) -> go.Figure:
    """Per output position (decode step, 1-based on the axis): the share of outputs with the answer's token
    there (bars, over the inputs whose answer reaches it), and how many failing outputs first go wrong there
    (a line on the right axis)."""
    counts, hits, first = (np.asarray(a, dtype=np.int64) for a in (counts, hits, first_errors))
    if not counts.shape == hits.shape == first.shape:
        raise ValueError(f"counts, hits and first_errors differ in length: {counts.shape}, {hits.shape}, {first.shape}")
    steps = np.arange(1, len(counts) + 1)
    share = np.divide(hits, counts, out=np.zeros(len(counts)), where=counts > 0).astype(np.float32)
    traces = [
        go.Bar(x=steps, y=share, name=t("charts.errors.token_right"), marker=dict(color="#56B4E9"),
               customdata=np.stack([hits, counts], 1), hovertemplate=t("charts.hover.step_right") + EXTRA),
        go.Scatter(x=steps, y=first, name=t("charts.errors.first_wrong"), yaxis="y2", mode="lines+markers",
                   line=dict(color="#D55E00", width=2), marker=dict(size=7),
                   hovertemplate=t("charts.hover.first_wrong") + EXTRA),
    ]
    return figure(traces, title, height=380, top=96, left=60,
                  legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
                  xaxis=_steps_axis(len(steps), t("charts.errors.output_position")),
                  yaxis=dict(title=dict(text=t("charts.errors.token_right")), range=[0, 1.04], tickformat=".0%",
                             gridcolor="#eee"),
                  yaxis2=dict(title=dict(text=t("charts.errors.failing")), overlaying="y", side="right", showgrid=False,
                              **_count_ticks(first.max(initial=0))))


def confusion_bars(confusions: list[tuple[str, str, int]], title: str, top: int = 12) -> go.Figure:
    """The `top` most frequent (expected, produced, count) wrong tokens as horizontal bars, most frequent on top."""
    shown = confusions[:top]
    labels = [f"{display_piece(want)} → {display_piece(got)}" for want, got, _ in shown]
    values = [n for *_, n in shown]
    trace = go.Bar(x=values, y=labels, orientation="h", marker=dict(color="#D55E00"), text=values,
                   textposition="outside", cliponaxis=False,
                   hovertemplate=t("charts.hover.confusion") + EXTRA)
    return figure([trace], title, height=26 * max(len(shown), 1) + 140, left=10,
                  xaxis=dict(title=dict(text=t("charts.errors.failing_first")), gridcolor="#eee",
                             **_count_ticks(max(values, default=0))),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=15)))
