"""Attention charts: one head, every head in one tiled figure, a decoding step's heads, scores and masks."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import t

from .common import (
    CATEGORY_AXIS, DIVERGING_SCALE, EXTRA, KIND_TITLES, MASKED_COLOR, WEIGHT_COLORS, WEIGHT_SCALE, as_array,
    bar_title, cell_size, check_labels, display_piece, figure, masked_overlay, matrix_figure, matrix_spec,
)

GUTTER = 1  # NaN cells between the tiles of head_grid


def weight_hover() -> str:
    """A weight cell's hover: query, key, weight."""
    return t("charts.hover.weight") + EXTRA


def weight_bar() -> dict:
    """The colour bar of every chart of attention weights: the fixed 0..1 scale."""
    return dict(title=bar_title(t("charts.weight")), tickvals=[0, 0.25, 0.5, 0.75, 1], len=0.9)


def _written(written, shape) -> dict:
    """The heatmap arguments that add "wrote <token>" to each cell's hover, given the token each query row
    wrote (decoder queries, labelled by the token the decoder read there, <s> first); none when `written` is
    None."""
    if written is None:
        return {"hovertemplate": weight_hover()}
    rows = np.array([display_piece(p) for p in written], dtype=object)
    if len(rows) != shape[0]:
        raise ValueError(f"{len(rows)} written tokens for {shape[0]} query rows")
    return {"customdata": np.broadcast_to(rows[:, None], shape),
            "hovertemplate": t("charts.hover.written", wrote="%{customdata}") + EXTRA}


def axis_labels(matrix: np.ndarray, query_labels, key_labels) -> tuple[list[str], list[str]]:
    """The query and key labels of `matrix`'s last two axes, checked against its shape."""
    q, k = matrix.shape[-2:]
    return check_labels(query_labels, q, "query labels"), check_labels(key_labels, k, "key labels")


def blocked_cells(mask, shape) -> np.ndarray | None:
    """True where a key is blocked (mask False), broadcast to `shape`; None when nothing is masked."""
    if mask is None:
        return None
    blocked = ~np.broadcast_to(np.asarray(mask, dtype=bool), shape)
    return blocked if blocked.any() else None


def _click_layer(weights: np.ndarray, x: list[str], y: list[str], side: int, written=None) -> go.Scatter:
    """Invisible markers on every cell, each a click target numbered by one index (a heatmap's points have two):
    a point's customdata is [query, key, weight]; its index is query * n_keys + key; its text, with `written`,
    the token its row wrote (for the hover)."""
    q, k = weights.shape
    rows, cols = np.divmod(np.arange(q * k), k)
    hover = t("charts.hover.cell") if written is None else t("charts.hover.written_cell", wrote="%{text}")
    return go.Scatter(
        x=np.array(x, dtype=object)[cols], y=np.array(y, dtype=object)[rows], mode="markers",
        customdata=np.column_stack([rows, cols, weights.ravel()]).astype(np.float32),
        text=None if written is None else np.array([display_piece(p) for p in written], dtype=object)[rows],
        marker=dict(size=side, symbol="square", opacity=0), selected=dict(marker=dict(opacity=0)),
        unselected=dict(marker=dict(opacity=0)), showlegend=False, name="cells",
        hovertemplate=hover + EXTRA,
    )


def attention_heatmap(weights, query_labels: list[str], key_labels: list[str], title: str, mask=None,
                      clickable: bool = False, highlight: tuple[int, int] | None = None,
                      written: list[str] | None = None) -> go.Figure:
    """One head's weights (queries, keys) on the fixed 0..1 scale. Blocked cells (mask False) are drawn
    grey with an "×"; `clickable` adds the invisible click layer; `highlight` = (query, key) outlines a cell;
    `written` (decoder queries, labelled by the token read) puts the token each row wrote in the hover."""
    w = as_array(weights, 2, "weights")
    y, x = axis_labels(w, query_labels, key_labels)
    blocked = blocked_cells(mask, w.shape)
    z = w if blocked is None else np.where(blocked, np.nan, w).astype(np.float32)
    side = cell_size(*w.shape)
    traces = [go.Heatmap(
        z=z, x=x, y=y, colorscale=WEIGHT_SCALE, zmin=0, zmax=1, colorbar=weight_bar(), xgap=1, ygap=1,
        hoverongaps=False, hoverinfo="skip" if clickable else None, **_written(written, w.shape),
    )]
    if blocked is not None:
        traces.append(masked_overlay(blocked, x, y, t("charts.masked_zero")))
    extra = {}
    if clickable:
        traces.append(_click_layer(w, x, y, side, written))
        extra["clickmode"] = "event+select"
    if highlight is not None:
        row, col = highlight
        extra["shapes"] = [dict(type="rect", x0=col - 0.5, x1=col + 0.5, y0=row - 0.5, y1=row + 0.5,
                                line=dict(color="#E69F00", width=3))]
    return matrix_figure(traces, title, y, x, side, **extra)


def _tile(weights: np.ndarray) -> np.ndarray:
    """(layers, heads, Q, K) -> one (layers*(Q+1)-1, heads*(K+1)-1) matrix, NaN in the gutters."""
    layers, heads, q, k = weights.shape
    padded = np.pad(weights, ((0, 0), (0, 0), (0, GUTTER), (0, GUTTER)), constant_values=np.nan)
    tiled = padded.transpose(0, 2, 1, 3).reshape(layers * (q + GUTTER), heads * (k + GUTTER))
    return tiled[:-GUTTER, :-GUTTER]


def _tiled_categories(prefix: str, count: int, role: str, labels: list[str]) -> list[str]:
    """Unique category names for one tiled axis: "L2 · query 03 e" per cell, "L2|3 gutter" between tiles."""
    names = []
    for i in range(count):
        names += [f"{prefix}{i + 1} · {role} {label}" for label in labels]
        if i < count - 1:
            names += [f"{prefix}{i + 1}|{i + 2} gutter {g}" for g in range(GUTTER)]
    return names


def head_grid(weights, query_labels: list[str], key_labels: list[str], kind: str, title: str | None = None,
              written: list[str] | None = None) -> go.Figure:
    """Every head of every layer in ONE heatmap trace: layers down, heads across, NaN gutters between tiles.
    Head (L, H) occupies rows L*(Q+1) .. +Q and columns H*(K+1) .. +K of the single z matrix.
    One trace builds and paints far faster than a make_subplots grid (benchmarks/chart_speed.py)."""
    w = as_array(weights, 4, "weights")
    layers, heads, q, k = w.shape
    axis_labels(w, query_labels, key_labels)
    y = _tiled_categories("L", layers, t("charts.query"), list(query_labels))
    x = _tiled_categories("H", heads, t("charts.key"), list(key_labels))
    side = int(np.clip(960 / len(x), 3, 26))
    hover = {"hovertemplate": t("charts.hover.grid", row="%{y}") + EXTRA}
    if written is not None:  # the token each decoder query row wrote, repeated over the tiles (gutters blank)
        wrote = np.array([t("charts.wrote", token=display_piece(p)) for p in check_labels(written, q, "written tokens")]
                         + [""], dtype=object)
        rows = np.tile(np.arange(q + GUTTER), layers)[: len(y)]
        rows[rows >= q] = q
        hover = {"customdata": np.broadcast_to(wrote[rows][:, None], (len(y), len(x))),
                 "hovertemplate": t("charts.hover.grid", row="%{y}, %{customdata}") + EXTRA}
    heatmap = go.Heatmap(z=_tile(w), x=x, y=y, colorscale=WEIGHT_SCALE, zmin=0, zmax=1, colorbar=weight_bar(),
                         hoverongaps=False, **hover)
    centre_q, centre_k = q // 2, k // 2
    xaxis = dict(CATEGORY_AXIS, side="top", showgrid=False,
                 tickvals=[x[h * (k + GUTTER) + centre_k] for h in range(heads)],
                 ticktext=[f"H{h + 1}" for h in range(heads)], tickfont=dict(size=14))
    yaxis = dict(CATEGORY_AXIS, autorange="reversed", showgrid=False, scaleanchor="x", constrain="domain",
                 tickvals=[y[i * (q + GUTTER) + centre_q] for i in range(layers)],
                 ticktext=[f"L{i + 1}" for i in range(layers)], tickfont=dict(size=14))
    title = title or t("charts.all_heads", kind=KIND_TITLES.get(kind, kind), layers=layers, heads=heads)
    return figure([heatmap], title, height=len(y) * side + 110, width=len(x) * side + 150, xaxis=xaxis,
                  yaxis=yaxis)


def step_attention_spec(weights, key_labels: list[str], title: str) -> dict:
    """One decoding step's attention, every head as a row, as a spec of plain dicts (figure_spec): weights
    (layers, heads, keys) -> rows "L1 H3", columns the keys (source tokens for cross-attention, the prefix for
    decoder self-attention)."""
    w = as_array(weights, 3, "weights")
    layers, heads, k = w.shape
    x = check_labels(key_labels, k, "key labels")
    y = [f"L{i + 1} H{h + 1}" for i in range(layers) for h in range(heads)]
    heatmap = dict(
        type="heatmap", z=w.reshape(layers * heads, k), x=x, y=y, colorscale=WEIGHT_COLORS, zmin=0, zmax=1,
        colorbar=weight_bar(), xgap=1, ygap=1, hovertemplate=t("charts.hover.step_head") + EXTRA,
    )
    rules = [dict(type="line", x0=-0.5, x1=k - 0.5, y0=i * heads - 0.5, y1=i * heads - 0.5,
                  line=dict(color="#222", width=2)) for i in range(1, layers)]  # a dark rule between layers
    return matrix_spec([heatmap], title, y, x, col_px=int(np.clip(560 / k, 26, 48)),
                       row_px=int(np.clip(480 / len(y), 16, 28)), shapes=rules)


def step_attention_rows(weights, key_labels: list[str], title: str) -> go.Figure:
    """`step_attention_spec` as a figure."""
    return go.Figure(step_attention_spec(weights, key_labels, title))


def scores_heatmap(scores, mask, query_labels: list[str], key_labels: list[str], title: str) -> go.Figure:
    """Pre-softmax scores on a diverging scale centred on 0. Masked cells are not coloured at all: the
    score trace holds NaN there and a grey "×" layer on top says "masked (-inf)" on hover."""
    s = as_array(scores, 2, "scores")
    y, x = axis_labels(s, query_labels, key_labels)
    blocked = blocked_cells(mask, s.shape)
    shown = s if blocked is None else np.where(blocked, np.nan, s).astype(np.float32)
    magnitudes = np.abs(shown[np.isfinite(shown)])
    bound = float(magnitudes.max()) if magnitudes.size and magnitudes.max() > 0 else 1.0
    traces = [go.Heatmap(
        z=shown, x=x, y=y, colorscale=DIVERGING_SCALE, zmin=-bound, zmax=bound, zmid=0, xgap=1, ygap=1,
        colorbar=dict(title=bar_title(t("charts.score")), len=0.9), hoverongaps=False,
        hovertemplate=t("charts.hover.score") + EXTRA,
    )]
    if blocked is not None:
        traces.append(masked_overlay(blocked, x, y))
    return matrix_figure(traces, title, y, x, cell_size(*s.shape))


def _category_bar(names: list[str]) -> dict:
    """A colour bar with one labelled band per integer category 0..n-1."""
    n = len(names)
    return dict(tickvals=[(i + 0.5) * (n - 1) / n for i in range(n)], ticktext=names, len=0.5,
                thickness=18, y=1, yanchor="top")


def _discrete_scale(colors: list[str]) -> list[list]:
    n = len(colors)
    return [[edge, color] for i, color in enumerate(colors) for edge in (i / n, (i + 1) / n)]


def mask_heatmap(mask, query_labels: list[str], key_labels: list[str], title: str) -> go.Figure:
    """A boolean mask (queries, keys): "may attend" in blue, "blocked" in grey with an "×" (the same grey
    layer the weight and score charts draw over masked cells), with a two-band colour bar naming both."""
    allowed = np.asarray(mask, dtype=bool)
    if allowed.ndim != 2:
        raise ValueError(f"mask must have 2 dimensions, got shape {allowed.shape}")
    y, x = axis_labels(allowed, query_labels, key_labels)
    traces = [go.Heatmap(
        z=np.where(allowed, 1.0, np.nan).astype(np.float32), x=x, y=y, zmin=0, zmax=1, xgap=1, ygap=1,
        colorscale=_discrete_scale([MASKED_COLOR, "#0072B2"]),
        colorbar=_category_bar([t("charts.blocked"), t("charts.may_attend")]), hoverongaps=False,
        hovertemplate=t("charts.hover.masked", label=t("charts.may_attend")) + EXTRA,
    )]
    if not allowed.all():
        traces.append(masked_overlay(~allowed, x, y, t("charts.blocked")))
    return matrix_figure(traces, title, y, x, cell_size(*allowed.shape))


LONG_PIECE = 5  # characters: a piece this long ("<pad>") is written smaller, to fit its cell in a narrow column


def _cell_piece(piece: str) -> str:
    shown = display_piece(piece)
    return f'<span style="font-size:10px">{shown}</span>' if len(piece) >= LONG_PIECE else shown


def padded_batch_heatmap(ids, pieces: list[list[str]], title: str, pad_id: int = 0,
                         special_ids: tuple[int, ...] = (1, 2, 3)) -> go.Figure:
    """A padded batch as the model sees it: rows = sequences, columns = positions, each cell its piece and
    id; padding grey, special tokens amber, ordinary tokens light blue."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 2 or [len(row) for row in pieces] != [ids.shape[1]] * ids.shape[0]:
        raise ValueError("ids must be (sequences, positions) with one piece per id")
    kind = np.where(ids == pad_id, 0, np.where(np.isin(ids, special_ids), 1, 2))
    text = [[f"{_cell_piece(p)}<br>{i}" for p, i in zip(row_p, row_i)] for row_p, row_i in zip(pieces, ids.tolist())]
    rows, cols = [t("charts.seq", n=b + 1) for b in range(ids.shape[0])], [str(i) for i in range(ids.shape[1])]
    heatmap = go.Heatmap(
        z=kind.astype(np.float32), x=cols, y=rows, zmin=0, zmax=2, xgap=2, ygap=2,
        colorscale=_discrete_scale(["#BDBDBD", "#F3C77B", "#CFE3F3"]),
        colorbar=_category_bar([display_piece("<pad>"), t("charts.special"), t("charts.token")]),
        text=text, texttemplate="%{text}", textfont=dict(size=13, color="#111"),
        hovertemplate=t("charts.hover.batch") + EXTRA,
    )
    return matrix_figure([heatmap], title, rows, cols, col_px=52, row_px=48)
