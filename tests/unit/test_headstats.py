"""Per-head statistics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.analysis.heads import alignment_score, best_aligned_head, entropy_bits, head_stats, max_weight


def test_entropy_in_bits_for_known_distributions():
    uniform = np.full((2, 4), 0.25)
    one_hot = np.eye(3)
    assert entropy_bits(uniform) == pytest.approx(2.0)
    assert entropy_bits(one_hot) == pytest.approx(0.0)
    mixed = np.array([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    assert entropy_bits(mixed) == pytest.approx(0.5)  # mean of 1 bit and 0 bits


def test_entropy_ignores_masked_keys_and_fully_masked_rows():
    weights = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 0.0]])
    mask = np.array([[True, True, False], [True, False, False], [False, False, False]])
    # row 0: 1 bit; row 1: only key 0 allowed -> -0.2 log2 0.2; row 2: no allowed key -> skipped
    expected = (1.0 + -0.2 * np.log2(0.2)) / 2
    assert entropy_bits(weights, mask) == pytest.approx(expected)
    assert max_weight(weights, mask) == pytest.approx((0.5 + 0.2) / 2)


def test_max_weight_is_mean_of_row_maxima():
    assert max_weight(np.array([[0.7, 0.3], [0.5, 0.5]])) == pytest.approx(0.6)


def test_alignment_score_averages_weight_on_expected_keys():
    weights = np.array([[0.1, 0.9, 0.0], [0.3, 0.3, 0.4], [0.6, 0.2, 0.2], [0.0, 0.0, 1.0]])
    assert alignment_score(weights, [1, None, 0]) == pytest.approx((0.9 + 0.6) / 2)  # row 3 undefined
    assert np.isnan(alignment_score(weights, [None, None]))
    with pytest.raises(ValueError):
        alignment_score(weights, [3])
    with pytest.raises(ValueError):
        alignment_score(weights, [0] * 5)


def test_head_stats_gives_one_value_per_layer_and_head():
    weights = np.zeros((2, 3, 4, 4))
    weights[..., np.arange(4), np.arange(4)[::-1]] = 1.0  # every head reverses perfectly
    weights[1, 2] = 0.25  # except one uniform head
    stats = head_stats(weights, expected=[3, 2, 1, 0])
    assert set(stats) == {"entropy_bits", "max_weight", "alignment"}
    assert all(v.shape == (2, 3) for v in stats.values())
    assert stats["alignment"][0, 0] == pytest.approx(1.0) and stats["alignment"][1, 2] == pytest.approx(0.25)
    assert stats["entropy_bits"][1, 2] == pytest.approx(2.0) and stats["max_weight"][1, 2] == pytest.approx(0.25)
    assert "alignment" not in head_stats(weights)


def test_best_aligned_head():
    w = np.full((2, 3, 4, 4), 0.25)
    w[1, 2] = np.eye(4)[::-1]  # layer 2, head 3 attends anti-diagonally
    assert best_aligned_head(w, [3, 2, 1, 0]) == (1, 2)
    assert best_aligned_head(w, [3, 2, 1, 0, 9]) == (1, 2)  # extra / out-of-range expectations ignored
    assert best_aligned_head(w, None) is None and best_aligned_head(w, [None]) is None
