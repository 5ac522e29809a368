"""The positional-encoding page (AppTest): the table against the formula written out here, the rotation demo,
the model's own encodings and embedding sum against the weights, decoding without positions, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import needs_reverse
from plotly_specs import spec, title, z

PAGE = "pages/concepts/positions.py"
INPUT = "pe_input:reverse"
pytestmark = needs_reverse


@pytest.fixture
def page(app):
    return app(PAGE)


def formula(length: int, d_model: int) -> np.ndarray:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)), one number at a time."""
    table = np.zeros((length, d_model))
    for pos in range(length):
        for dim in range(d_model):
            angle = pos / 10000 ** ((dim - dim % 2) / d_model)
            table[pos, dim] = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
    return table


def test_defaults_show_every_chart(page):
    assert page.title[0].value == "Positional encoding" and page.get("latex")
    for key in ("fig-pe-matrix", "fig-pe-curves", "fig-pe-sim", "fig-pe-rotation", "fig-pe-own", "fig-pe-sum"):
        assert spec(page, key)["data"], key
    assert not page.exception


def test_the_matrix_shown_is_the_formula(page):
    d, length = page.slider(key="pe_d_model").value, page.slider(key="pe_length").value
    np.testing.assert_allclose(z(page, "fig-pe-matrix"), formula(length, d), atol=2e-5)
    page.slider(key="pe_d_model").set_value(30).run()
    page.slider(key="pe_length").set_value(21).run()
    np.testing.assert_allclose(z(page, "fig-pe-matrix"), formula(21, 30), atol=2e-5)
    assert "21 positions × 30 dimensions" in title(page, "fig-pe-matrix")
    sim = z(page, "fig-pe-sim")
    np.testing.assert_allclose(sim, formula(21, 30) @ formula(21, 30).T, atol=1e-3)
    curves = spec(page, "fig-pe-curves")["data"]
    assert [c["name"] for c in curves] == ["dimension 4", "dimension 5", "dimension 12", "dimension 24"]


def test_rotation_demo_is_exact_to_rounding_and_block_diagonal(page):
    for k in (5, 17):
        page.slider(key="pe_offset").set_value(k).run()
        error = float(page.metric[0].value)
        assert 0 <= error < 1e-4
        m = z(page, "fig-pe-rotation")
        d = page.slider(key="pe_d_model").value
        assert m.shape == (d, d)
        blocks = np.kron(np.eye(d // 2), np.ones((2, 2))).astype(bool)
        assert np.abs(m[~blocks]).max() == 0
        w = 10000 ** (-2 / d)  # the second pair's frequency
        c, s = math.cos(k * w), math.sin(k * w)
        np.testing.assert_allclose(m[2:4, 2:4], [[c, s], [-s, c]], atol=1e-6)
        pe = formula(200 + k + 1, d)
        np.testing.assert_allclose(pe[[3, 50, 200]] @ m.T, pe[[3 + k, 50 + k, 200 + k]], atol=1e-4)


def test_model_encodings_and_embedding_sum_match_its_weights(page, bundle):
    cfg = bundle.config
    np.testing.assert_allclose(z(page, "fig-pe-own"), formula(cfg.max_len, cfg.d_model), atol=2e-5)
    text = page.text_input(key=INPUT).value
    assert len(set(text)) < len(text)  # the default repeats a token
    ids = bundle.tokenizer.encode(text) + [2]
    weight = bundle.model.src_embed.tokens.weight.detach().numpy()
    emb, pos, total = (z(page, "fig-pe-sum", i) for i in range(3))
    np.testing.assert_allclose(emb, weight[ids] * math.sqrt(cfg.d_model), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pos, formula(len(ids), cfg.d_model), atol=2e-5)
    np.testing.assert_allclose(total, emb + pos, atol=1e-5)


def test_decoding_without_positions_breaks_the_reversal(page, bundle):
    assert not [m for m in page.markdown if m.value.startswith("**Without positions")]
    page.toggle(key="pe_no_positions").set_value(True).run()
    assert not page.exception
    lines = {m.value.split(":")[0]: m.value for m in page.markdown if m.value.startswith("**With")}
    assert "✓ correct" in lines["**With positions"] and "✗ wrong" in lines["**Without positions"]
    text = page.text_input(key=INPUT).value
    assert f"`{bundle.task.target(text)}`" in lines["**With positions"]
    with_pos, without = z(page, "fig-pe-cross-with positions"), z(page, "fig-pe-cross-without positions")
    n = len(text)
    anti = [with_pos[t, n - 1 - t] for t in range(n)]
    assert np.mean(anti) > 0.5  # the normal decode reads the source backwards
    steps = min(n, without.shape[0])
    assert np.mean([without[t, n - 1 - t] for t in range(steps)]) < np.mean(anti) / 2
    scores = [float(c.value.split("**")[1].rstrip("%")) for c in page.caption if c.value.startswith("Mean weight")]
    assert len(scores) == 2 and scores[0] > scores[1]


@pytest.mark.parametrize("text, message", [("ABC", "'A', 'B', 'C'"), ("", "empty"), ("a" * 40, "at most")])
def test_bad_input_shows_a_message_not_an_exception(page, text, message):
    page.text_input(key=INPUT).set_value(text).run()
    assert not page.exception
    assert any(message in e.value for e in page.error), [e.value for e in page.error]
    assert spec(page, "fig-pe-matrix")["data"]  # the sections that need no input still show
