"""Chart builders of the compare page (transformer/charts/compare.py): pure functions, checked on their arrays."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.plotly_specs import array

from transformer.charts.compare import difference_heatmap, pair_heatmaps, score_bars

ROWS, COLS = ["00 <s>", "01 a", "02 b"], ["00 x", "01 y"]


def weights(seed: int, shape=(3, 2)) -> np.ndarray:
    w = np.random.default_rng(seed).random(shape).astype(np.float32)
    return w / w.sum(-1, keepdims=True)


def z_of(trace) -> np.ndarray:
    values = trace["z"]
    if isinstance(values, dict):
        return array(values).astype(np.float64)
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)


def test_difference_is_a_minus_b_on_a_fixed_symmetric_scale_with_masked_cells_blank():
    a, b = weights(1), weights(2)
    mask = np.array([[True, False], [True, True], [True, True]])
    fig = difference_heatmap(a, b, ROWS, COLS, "t", mask=mask).to_plotly_json()
    heat = fig["data"][0]
    want = (a - b).astype(np.float64)
    want[0, 1] = np.nan
    np.testing.assert_allclose(z_of(heat), want, atol=1e-6)
    assert (heat["zmin"], heat["zmax"], heat["zmid"]) == (-1, 1, 0)
    assert len(fig["data"]) == 2  # the grey "×" layer over the masked cell


def test_difference_of_two_shapes_is_refused():
    with pytest.raises(ValueError, match="shapes differ"):
        difference_heatmap(weights(1), weights(2, (2, 2)), ROWS, COLS, "t")


def test_pair_shows_both_heads_on_one_scale_and_says_where_a_head_is_missing():
    a, b = weights(1), weights(2, (2, 2))
    fig = pair_heatmaps([(a, ROWS, COLS, None), (b, ROWS[:2], COLS, None)], ["A: m", "B: n"], "t").to_plotly_json()
    first, second = fig["data"]
    np.testing.assert_allclose(z_of(first), a, atol=1e-6)
    np.testing.assert_allclose(z_of(second), b, atol=1e-6)
    assert all((t["zmin"], t["zmax"]) == (0, 1) for t in (first, second))
    assert [t["showscale"] for t in (first, second)] == [False, True]  # one colour bar for both
    assert (first["xaxis"], second["xaxis"]) == ("x", "x2")
    lone = pair_heatmaps([(a, ROWS, COLS, None), None], ["A: m", "B: n"], "t").to_plotly_json()
    assert len(lone["data"]) == 1 and lone["data"][0]["showscale"]
    note = next(n for n in lone["layout"]["annotations"] if n["text"] == "no such head")
    x0, x1 = lone["layout"]["xaxis2"]["domain"]  # in the middle of B's empty panel, by the page's coordinates
    assert (note["xref"], note["yref"], note["x"], note["y"]) == ("paper", "paper", (x0 + x1) / 2, 0.5)


def test_score_bars_write_each_value_and_none_as_not_available():
    fig = score_bars(["A: m", "B: n"], [0.5, None], "t").to_plotly_json()
    bars = fig["data"][0]
    assert list(bars["text"]) == ["50.0%", "n/a"]
    assert np.isnan(np.asarray(bars["x"], dtype=float)[1])
