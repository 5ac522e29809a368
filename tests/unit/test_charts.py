"""Chart builders: each figure carries exactly the numbers and labels it was given, in the conventions."""

from __future__ import annotations

import numpy as np
import plotly.colors
import pytest

from transformer import charts as C
from transformer import i18n
from transformer.analysis.heads import head_stats
from transformer.charts.common import MASKED_COLOR

RNG = np.random.default_rng(0)
VIRIDIS = plotly.colors.get_colorscale("Viridis")


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def labels(n: int) -> list[str]:
    return C.token_labels(["<s>"] + ["a"] * (n - 1))


def z(trace) -> np.ndarray:
    return np.asarray(trace.z, dtype=np.float64)


def assert_weight_scale(trace):
    assert (trace.zmin, trace.zmax) == (0, 1)
    assert [c[1] for c in trace.colorscale] == [c[1] for c in VIRIDIS]
    np.testing.assert_allclose([c[0] for c in trace.colorscale], [c[0] for c in VIRIDIS])


def assert_rows_top_down(fig, n_rows: int):
    lo, hi = fig.layout.yaxis.range
    assert (lo, hi) == (n_rows - 0.5, -0.5)  # reversed: row 0 on top, every row in view


def test_token_labels_are_positioned_unique_and_plotly_safe():
    out = C.token_labels(["<s>", "a", "a", " ", "</s>", "<pad>"])
    assert out == ["00 &lt;s&gt;", "01 a", "02 a", "03 ␣", "04 &lt;/s&gt;", "05 &lt;pad&gt;"]
    assert len(set(out)) == len(out)
    assert C.token_labels(["x"] * 101)[100] == "100 x"


def test_attention_heatmap_holds_weights_labels_and_fixed_scale():
    w = softmax(RNG.normal(size=(5, 7)))
    q, k = labels(5), labels(7)
    fig = C.attention_heatmap(w, q, k, "Cross-attention · layer 1 · head 2")
    (heat,) = fig.data
    np.testing.assert_array_equal(z(heat), w)
    assert heat.z.dtype == np.float32
    assert list(heat.y) == q and list(heat.x) == k
    assert_weight_scale(heat)
    assert all(s in heat.hovertemplate for s in ("query %{y}", "key %{x}", "weight %{z"))
    assert fig.layout.title.text == "Cross-attention · layer 1 · head 2"
    assert_rows_top_down(fig, 5)


def test_masked_weights_are_a_grey_layer_not_small_numbers():
    w = softmax(RNG.normal(size=(4, 4)))
    mask = np.tril(np.ones((4, 4), bool))
    fig = C.attention_heatmap(w, labels(4), labels(4), "t", mask=mask)
    heat, overlay = fig.data
    assert np.isnan(z(heat)[~mask]).all() and np.allclose(z(heat)[mask], w[mask])
    assert np.isnan(z(overlay)[mask]).all() and not np.isnan(z(overlay)[~mask]).any()
    assert {c[1] for c in overlay.colorscale} == {MASKED_COLOR} and overlay.showscale is False
    assert (np.asarray(overlay.text) == "×").sum() == (~mask).sum()
    assert "masked" in overlay.hovertemplate


def test_clickable_layer_covers_every_cell_and_stays_invisible():
    w = softmax(RNG.normal(size=(3, 4)))
    q, k = labels(3), labels(4)
    fig = C.attention_heatmap(w, q, k, "t", clickable=True, highlight=(2, 1))
    heat, cells = fig.data
    assert cells.type == "scatter" and heat.hoverinfo == "skip"
    assert len(cells.x) == 12 and cells.marker.opacity == 0
    assert cells.selected.marker.opacity == 0 and cells.unselected.marker.opacity == 0
    index = 2 * 4 + 1  # point_index = query * n_keys + key
    assert (cells.y[index], cells.x[index]) == (q[2], k[1])
    np.testing.assert_allclose(cells.customdata[index], [2, 1, w[2, 1]], rtol=1e-6)
    (box,) = fig.layout.shapes
    assert (box.x0, box.x1, box.y0, box.y1) == (0.5, 1.5, 1.5, 2.5)


def test_head_grid_is_one_trace_with_each_head_at_its_offset():
    layers, heads, q, k = 3, 8, 5, 6
    w = softmax(RNG.normal(size=(layers, heads, q, k)))
    fig = C.head_grid(w, labels(q), labels(k), "cross")
    (heat,) = fig.data
    tiled = z(heat)
    assert tiled.shape == (layers * (q + 1) - 1, heads * (k + 1) - 1)
    for layer in range(layers):
        for head in range(heads):
            r, c = layer * (q + 1), head * (k + 1)
            np.testing.assert_array_equal(tiled[r:r + q, c:c + k], w[layer, head])
    assert np.isnan(tiled[q, :]).all() and np.isnan(tiled[:, k]).all()  # gutters
    assert np.isfinite(tiled).sum() == w.size
    assert_weight_scale(heat)
    assert list(fig.layout.xaxis.ticktext) == [f"H{h + 1}" for h in range(heads)]
    assert list(fig.layout.yaxis.ticktext) == [f"L{i + 1}" for i in range(layers)]
    assert len(set(heat.x)) == len(heat.x) and len(set(heat.y)) == len(heat.y)
    assert heat.y[q + 1 + 2].startswith("L2 · query 02") and heat.x[k + 1].startswith("H2 · key 00")
    assert "Cross-attention" in fig.layout.title.text and fig.layout.yaxis.autorange == "reversed"


def test_step_attention_rows_has_one_row_per_head():
    w = softmax(RNG.normal(size=(2, 3, 5)))
    fig = C.step_attention_rows(w, labels(5), "Cross-attention · step 4")
    heat = fig.data[0]
    np.testing.assert_array_equal(z(heat), w.reshape(6, 5))
    assert list(heat.y) == ["L1 H1", "L1 H2", "L1 H3", "L2 H1", "L2 H2", "L2 H3"]
    assert len(fig.layout.shapes) == 1  # one rule between the two layers
    assert_weight_scale(heat)
    assert_rows_top_down(fig, 6)


def test_scores_heatmap_diverges_around_zero_and_marks_masked_cells():
    scores = RNG.normal(size=(4, 4)).astype(np.float32) * 3
    mask = np.tril(np.ones((4, 4), bool))
    scores[~mask] = -np.inf  # what a trace may hold there
    fig = C.scores_heatmap(scores, mask, labels(4), labels(4), "scores")
    heat, overlay = fig.data
    bound = np.abs(scores[mask]).max()
    assert heat.zmid == 0 and heat.zmin == pytest.approx(-bound) and heat.zmax == pytest.approx(bound)
    assert np.isnan(z(heat)[~mask]).all() and np.allclose(z(heat)[mask], scores[mask])
    assert not np.isnan(z(overlay)[~mask]).any() and "masked (-inf)" in overlay.hovertemplate


def test_mask_heatmap_shows_two_named_states():
    mask = np.array([[True, False, False], [True, True, False]])
    fig = C.mask_heatmap(mask, labels(2), labels(3), "causal")
    allowed, blocked = fig.data
    assert np.array_equal(~np.isnan(z(allowed)), mask)
    assert np.array_equal(~np.isnan(z(blocked)), ~mask)
    assert list(allowed.colorbar.ticktext) == ["blocked", "may attend"]
    assert "may attend" in allowed.hovertemplate and "blocked" in blocked.hovertemplate


def test_padded_batch_heatmap_marks_padding_and_specials():
    ids = np.array([[5, 6, 2, 0], [7, 2, 0, 0]])
    pieces = [["a", "b", "</s>", "<pad>"], ["c", "</s>", "<pad>", "<pad>"]]
    heat = C.padded_batch_heatmap(ids, pieces, "batch").data[0]
    np.testing.assert_array_equal(z(heat), [[2, 2, 1, 0], [2, 1, 0, 0]])
    assert heat.text[0][2] == "&lt;/s&gt;<br>2"  # a piece of five characters or more is written smaller
    assert heat.text[1][3] == '<span style="font-size:10px">&lt;pad&gt;</span><br>0'
    with pytest.raises(ValueError):
        C.padded_batch_heatmap(ids, pieces[:1], "batch")


def test_topk_bar_highlights_the_chosen_token():
    fig = C.topk_bar(["d", " ", "</s>"], [0.7, 0.2, 0.1], chosen=" ", title="step 3")
    (bar,) = fig.data
    np.testing.assert_allclose(bar.x, [0.7, 0.2, 0.1], rtol=1e-6)
    assert list(bar.y) == ["d", "␣", "&lt;/s&gt;"] and bar.orientation == "h"
    colors = list(bar.marker.color)
    assert colors[1] != colors[0] == colors[2]
    assert fig.layout.yaxis.autorange == "reversed"


def test_head_stats_heatmap_panels_hold_the_metrics():
    w = softmax(RNG.normal(size=(2, 4, 3, 3)))
    stats = head_stats(w, expected=[2, 1, 0])
    fig = C.head_stats_heatmap(stats, "stats")
    assert [t.name for t in fig.data] == ["entropy_bits", "max_weight", "alignment"]
    for trace in fig.data:
        np.testing.assert_allclose(z(trace), stats[trace.name], rtol=1e-6)
    assert (fig.data[2].zmin, fig.data[2].zmax) == (0, 1)
    assert_side_by_side(fig, [i18n.t(C.stats.HEAD_METRICS[t.name][0]) for t in fig.data])


def assert_side_by_side(fig, titles: list[str]):
    """Trace i sits on panel i's own axes; the panels run left to right without overlapping, each under
    its title, and rows read top-down in every panel."""
    domains = []
    for i, trace in enumerate(fig.data):
        suffix = "" if i == 0 else str(i + 1)
        assert (trace.xaxis, trace.yaxis) == (f"x{suffix}", f"y{suffix}")
        xaxis, yaxis = fig.layout[f"xaxis{suffix}"], fig.layout[f"yaxis{suffix}"]
        assert (xaxis.anchor, yaxis.anchor) == (f"y{suffix}", f"x{suffix}") and yaxis.autorange == "reversed"
        domains.append(tuple(xaxis.domain))
    assert all(lo < hi <= next_lo for (lo, hi), (next_lo, _) in zip(domains, domains[1:]))
    assert domains[0][0] == 0 and domains[-1][1] == pytest.approx(1)
    centres = {a.text: a.x for a in fig.layout.annotations}
    assert [centres[t] for t in titles] == pytest.approx([(lo + hi) / 2 for lo, hi in domains])


def test_positional_figures_hold_the_table():
    table = RNG.normal(size=(10, 8)).astype(np.float32)
    np.testing.assert_array_equal(z(C.positional_matrix(table).data[0]), table)
    curves = C.positional_curves(table, [0, 3])
    assert [t.name for t in curves.data] == ["dimension 0", "dimension 3"]
    np.testing.assert_array_equal(curves.data[1].y, table[:, 3])
    np.testing.assert_allclose(z(C.position_similarity(table).data[0]), table @ table.T, rtol=1e-5)
    with pytest.raises(ValueError):
        C.positional_curves(table, [8])


def test_embedding_sum_panels_add_up_on_one_scale():
    emb, pos = RNG.normal(size=(4, 6)), RNG.normal(size=(1, 4, 6))
    fig = C.embedding_sum(emb, pos, labels(4))
    token, positional, total = fig.data
    np.testing.assert_allclose(z(total), z(token) + z(positional), rtol=1e-6)
    np.testing.assert_allclose(z(positional), pos[0], rtol=1e-6)
    assert len({(t.zmin, t.zmax) for t in fig.data}) == 1
    assert [t.showscale for t in fig.data] == [False, False, True]
    assert_side_by_side(fig, ["token embedding × √d", "+ positional encoding", "= sum"])
    assert fig.layout.yaxis2.matches == fig.layout.yaxis3.matches == "y"  # the panels zoom together


def test_training_curves_split_loss_and_bounded_accuracies():
    history = [{"step": s, "loss": 3.0 / (s + 1), "token_accuracy": s / 100,
                "exact_match": s / 100 if s % 10 == 0 else None} for s in range(100)]
    fig = C.training_curves(history)
    loss, acc, exact = fig.data
    assert list(loss.x) == list(range(100)) and exact.x == tuple(range(0, 100, 10))
    assert loss.yaxis == "y" and acc.yaxis == exact.yaxis == "y2"
    assert list(fig.layout.yaxis2.range) == [0, 1.02]
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]  # loss on top, accuracies below
    assert fig.layout.xaxis.matches == "x2" and fig.layout.xaxis2.title.text == "step"  # one step axis
    thinned = C.training_curves(history, max_points=20).data[0]
    assert len(thinned.x) <= 20 and thinned.x[0] == 0 and thinned.x[-1] == 99


def test_training_curves_span_the_run_from_its_first_point_and_shade_the_gap_to_training():
    first = [{"step": 25, "loss": 2.3, "token_accuracy": 0.3, "exact_match": 0.0, "train_loss": 1.0,
              "train_token_accuracy": 0.6}]
    fig = C.training_curves(first, steps=600)
    assert list(fig.layout.xaxis2.range) == [0, 600]  # the whole run's axis, not 24-26 around one point
    assert all(trace.mode == "lines+markers" for trace in fig.data)  # a lone point is drawn
    names = [trace.name for trace in fig.data]
    assert names == ["training batch", "loss", "training token accuracy", "token accuracy", "exact match"]
    assert [trace.showlegend for trace in fig.data] == [True, True, False, True, True]  # dashed: said once
    assert "held-out loss" in fig.data[1].hovertemplate and "training loss" in fig.data[0].hovertemplate
    held_out, training = fig.data[1], fig.data[0]
    assert held_out.fill == "tonexty" and training.line.dash == "dash" and held_out.line.dash == "solid"
    assert C.training_curves(first).layout.xaxis2.range is None  # no run length given: plotly's own


def test_architecture_diagram_follows_the_config():
    fig = C.architecture_diagram(3, 2, 8, 64, 256, norm="post")
    text = " ".join(a.text for a in fig.layout.annotations)
    assert "×3<br>encoder" in text and "×2<br>decoder" in text
    assert "8 heads × 8 dims" in text and "64 → 256 → 64" in text and "norm(x + sublayer(x))" in text
    for kind in ("Self-attention", "Masked self-attention", "Cross-attention", "memory"):
        assert kind in text
    single = [a.text for a in C.architecture_diagram(1, 1, 1, 32, 64).layout.annotations]
    assert "×1<br>encoder<br>layer" in single and any("1 head × 32 dims" in t for t in single)


def test_figures_reject_mismatched_labels():
    with pytest.raises(ValueError):
        C.attention_heatmap(np.zeros((3, 3)), labels(2), labels(3), "t")
    with pytest.raises(ValueError):
        C.head_grid(np.zeros((3, 3)), labels(3), labels(3), "cross")


def test_attention_title_is_one_based():
    assert C.attention_title("cross", layer=0, head=2, step=4) == "Cross-attention · layer 1 · head 3 · step 5"
    assert C.attention_title("encoder_self") == "Encoder self-attention"
