"""Charts of positions applied inside attention: RoPE's query/key pair turned per frequency, its q.k over a
shift of both positions, and ALiBi's bias matrix per head."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import t

from .common import (
    CATEGORY_AXIS, EXTRA, KIND_COLORS, as_array, bar_title, check_labels, figure, panel_axes, side_by_side,
)

QUERY_COLOR, KEY_COLOR = KIND_COLORS["decoder_self"], KIND_COLORS["encoder_self"]
BIAS_SCALE = "Cividis"  # sequential: a bias is 0 on the diagonal and ever more negative away from it


def _arrow(pair: np.ndarray, name: str, color: str, dash: str, panel: int, first: bool, hover: str) -> go.Scatter:
    return go.Scatter(x=[0.0, pair[0]], y=[0.0, pair[1]], mode="lines+markers", name=name, legendgroup=name,
                      showlegend=first, line=dict(color=color, width=3 if dash == "solid" else 2, dash=dash),
                      marker=dict(size=[0, 9], color=color), hovertemplate=hover + EXTRA,
                      **panel_axes(panel))


def rope_pairs(q, k, q_rot, k_rot, freqs, query_pos: int, key_pos: int, title: str | None = None) -> go.Figure:
    """One panel per frequency pair i ((pairs, 2) arrays, `freqs` (pairs,) in radians per position): the
    query before (dotted) and after (solid) turning by query_pos * w_i, the key likewise by key_pos * w_i.
    Each panel is scaled to its own pair's length (the hover gives the values)."""
    q, k, q_rot, k_rot = (as_array(a, 2, name) for a, name in ((q, "q"), (k, "k"), (q_rot, "q_rot"),
                                                                   (k_rot, "k_rot")))
    w = as_array(freqs, 1, "freqs")
    if not q.shape == k.shape == q_rot.shape == k_rot.shape == (len(w), 2):
        raise ValueError("q, k and their rotations must be (pairs, 2) with one frequency per pair")
    arrows = ((t("charts.query"), "dot", QUERY_COLOR, 0),
              (t("charts.rope.query_at", pos=query_pos), "solid", QUERY_COLOR, query_pos),
              (t("charts.key"), "dot", KEY_COLOR, 0),
              (t("charts.rope.key_at", pos=key_pos), "solid", KEY_COLOR, key_pos))
    traces = []
    for i, (wi, *vectors) in enumerate(zip(w, q, q_rot, k, k_rot, strict=True)):
        relative = f"{np.degrees((query_pos - key_pos) * wi):.1f}°"
        for vec, (name, dash, color, pos) in zip(vectors, arrows, strict=True):
            hover = t("charts.hover.rope", pair=i, a=2 * i, b=2 * i + 1, name=name,
                      turned=f"{np.degrees(pos * wi):.1f}°", relative=relative)
            traces.append(_arrow(vec, name, color, dash, i, i == 0, hover))
    axis = dict(showticklabels=False, showgrid=False, zeroline=True, zerolinecolor="#ddd")
    layout = side_by_side([t("charts.rope.pair", pair=i, omega=f"{wi:.3g}") for i, wi in enumerate(w)], spacing=0.012,
                          xaxis=axis, yaxis=axis, title_size=12)
    lengths = np.maximum(np.linalg.norm(q, axis=-1), np.linalg.norm(k, axis=-1))  # rotation keeps lengths
    for i, length in enumerate(lengths):  # each panel fits its own pair, y scaled like x (circles stay round)
        suffix, bound = "" if i == 0 else str(i + 1), 1.15 * max(float(length), 1e-6)
        layout[f"xaxis{suffix}"]["range"] = layout[f"yaxis{suffix}"]["range"] = [-bound, bound]
        layout[f"yaxis{suffix}"]["scaleanchor"] = f"x{suffix}"
    return figure(traces, title or t("charts.rope.pairs_title"), height=300, top=100,
                  legend=dict(orientation="h", y=-0.05, x=0), **layout)


def rope_offset_check(shifts, dots, query_pos: int, key_pos: int, title: str | None = None) -> go.Figure:
    """q.k (`dots`, (S,)) of the rotated pair with the query at query_pos + s and the key at key_pos + s."""
    s, d = as_array(shifts, 1, "shifts"), as_array(dots, 1, "dots")
    if len(s) != len(d):
        raise ValueError(f"{len(s)} shifts for {len(d)} dot products")
    line = go.Scatter(x=s, y=d, mode="lines+markers", line=dict(color=QUERY_COLOR, width=2.5),
                      hovertemplate=t("charts.hover.offset", query=query_pos, key=key_pos) + EXTRA)
    pad = max(1e-3, 0.05 * abs(float(d.mean())))
    return figure([line], title or t("charts.rope.offset_title"), height=300,
                  xaxis=dict(title=dict(text=t("charts.rope.shift")), gridcolor="#eee"),
                  yaxis=dict(title=dict(text="q·k"), gridcolor="#eee",
                             range=[float(d.min()) - pad, float(d.max()) + pad]))


def alibi_bias_grid(bias, slopes, labels: list[str], title: str | None = None) -> go.Figure:
    """One heatmap per head of the (heads, len, len) bias -slope * |i - j| (queries down, keys across,
    labelled by `labels`), its slope in the panel title, on one shared scale."""
    b, m = as_array(bias, 3, "bias"), as_array(slopes, 1, "slopes")
    if b.shape[0] != len(m) or b.shape[1] != b.shape[2]:
        raise ValueError("bias must be (heads, len, len) with one slope per head")
    y = check_labels(labels, b.shape[1], "labels")
    lowest = min(float(b.min()), -1e-6)
    traces = [go.Heatmap(
        z=z, x=y, y=y, zmin=lowest, zmax=0.0, colorscale=BIAS_SCALE, showscale=h == len(m) - 1,
        colorbar=dict(title=bar_title(t("charts.alibi.bias"))), **panel_axes(h),
        hovertemplate=t("charts.hover.alibi", head=h + 1, slope=f"{slope:.4g}") + EXTRA,
    ) for h, (z, slope) in enumerate(zip(b, m, strict=True))]
    axis = dict(CATEGORY_AXIS, showgrid=False, tickfont=dict(size=11))
    layout = side_by_side([t("charts.alibi.panel", head=h + 1, slope=f"{slope:.4g}") for h, slope in enumerate(m)],
                          spacing=0.02, xaxis=dict(axis, side="bottom"), yaxis=dict(axis, autorange="reversed"),
                          share_y=True, title_size=13)
    return figure(traces, title or t("charts.alibi.title"), height=max(300, 16 * len(y) + 150), top=90, **layout)
