"""transformer.analysis.positions: the rotation that shifts sinusoidal encodings by k, and a model's own encodings."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformer.analysis.positions import model_positions, pe_frequencies, rotation_demo, rotation_matrix
from transformer.network.positional import sinusoidal_table


def test_rotation_moves_encodings_by_k():
    d, k = 16, 3
    m = rotation_matrix(d, k)
    assert m.shape == (d, d)
    assert torch.allclose(m @ m.T, torch.eye(d, dtype=torch.float64), atol=1e-12)  # a rotation
    assert torch.count_nonzero(m) == 2 * d  # block-diagonal 2x2 blocks only
    w = pe_frequencies(d)
    assert w[1].item() == pytest.approx(10000 ** (-2 / d))
    demo = rotation_demo(d, k, [0, 1, 7, 30])
    assert demo.errors.shape == (4,) and demo.max_error < 1e-5
    np.testing.assert_allclose(demo.angles, k * w.numpy())
    wrong = (rotation_matrix(d, k + 1) @ sinusoidal_table(40, d).double()[7] - sinusoidal_table(40, d)[10]).abs()
    assert wrong.max() > 1e-2  # the matrix depends on k: the one for k + 1 does not fit
    with pytest.raises(ValueError, match="even"):
        rotation_matrix(15, 2)
    with pytest.raises(ValueError):
        rotation_demo(16, 2, [])


def test_model_positions_are_read_only_copies(small_reverse):
    model, _ = small_reverse
    kind, table = model_positions(model, "src")
    assert kind == "sinusoidal" and table.shape == (10, 32)
    np.testing.assert_allclose(table[3, :2], [math.sin(3), math.cos(3)], atol=1e-6)
    table[:] = 0
    assert model.src_embed.positions.full_table().abs().sum() > 0
