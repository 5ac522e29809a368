"""The positional-encoding page (AppTest): the table against the formula written out here, the rotation demo,
the model's own encodings and embedding sum against the weights, decoding without positions, bad input, the
view in the URL, restored from a link, and hostile links."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.plotly_specs import spec, title, z
from helpers.repo import link_id, needs_reverse, open_link, refused_with_a_note

from ui import decodes
from ui.markdown import plain
from ui.tables.positions import POSITIONS

PAGE = "pages/concepts/positions.py"
KEY = POSITIONS.view().widget_key  # a prop's widget key
INPUT = KEY("text")
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
    assert any(k[0] == "source_embedding" for k in decodes._cache)  # kept in the byte-bounded cache


def test_the_matrix_shown_is_the_formula(page):
    d, length = page.slider(key=KEY("d_model")).value, page.slider(key=KEY("length")).value
    np.testing.assert_allclose(z(page, "fig-pe-matrix"), formula(length, d), atol=2e-5)
    page.slider(key=KEY("d_model")).set_value(30).run()
    page.slider(key=KEY("length")).set_value(21).run()
    np.testing.assert_allclose(z(page, "fig-pe-matrix"), formula(21, 30), atol=2e-5)
    assert "21 positions × 30 dimensions" in title(page, "fig-pe-matrix")
    sim = z(page, "fig-pe-sim")
    np.testing.assert_allclose(sim, formula(21, 30) @ formula(21, 30).T, atol=1e-3)
    curves = spec(page, "fig-pe-curves")["data"]
    assert [c["name"] for c in curves] == ["dimension 4", "dimension 5", "dimension 12", "dimension 24"]


def test_rotation_demo_is_exact_to_rounding_and_block_diagonal(page):
    for k in (5, 17):
        page.slider(key=KEY("k")).set_value(k).run()
        error = float(page.metric[0].value)
        assert 0 <= error < 1e-4
        m = z(page, "fig-pe-rotation")
        d = page.slider(key=KEY("d_model")).value
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
    page.toggle(key=KEY("no_positions")).set_value(True).run()
    assert not page.exception
    lines = {m.value.split(":")[0]: m.value for m in page.markdown if m.value.startswith("**With")}
    assert "right" in lines["**With positions"] and "wrong" in lines["**Without positions"]
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
    assert any(message in plain(e.value) for e in page.error), [e.value for e in page.error]
    assert spec(page, "fig-pe-matrix")["data"]  # the sections that need no input still show


def test_the_view_is_in_the_url_and_a_link_restores_it(page):
    assert page.query_params == {}
    page.slider(key=KEY("d_model")).set_value(32).run()
    page.slider(key=KEY("length")).set_value(40).run()
    page.multiselect(key=KEY("dims")).set_value([1, 6, 30]).run()
    page.slider(key=KEY("k")).set_value(9).run()
    page.text_input(key=INPUT).set_value("abcabc").run()
    page.toggle(key=KEY("no_positions")).set_value(True).run()
    assert not page.exception
    query = dict(page.query_params)
    assert query == {"v": "1", "d_model": "32", "length": "40", "dims": "1,6,30", "k": "9", "text": "abcabc",
                     "no_positions": "1"}
    charts = ("fig-pe-matrix", "fig-pe-curves", "fig-pe-sim", "fig-pe-rotation", "fig-pe-sum",
              "fig-pe-cross-with positions", "fig-pe-cross-without positions")
    shown = {key: spec(page, key) for key in charts}
    assert [c["name"] for c in shown["fig-pe-curves"]["data"]] == ["dimension 1", "dimension 6", "dimension 30"]

    linked = link(query)
    assert not linked.exception and not linked.warning
    assert {key: spec(linked, key) for key in charts} == shown
    assert dict(linked.query_params) == query
    assert linked.multiselect(key=KEY("dims")).value == [1, 6, 30] and linked.text_input(key=INPUT).value == "abcabc"
    assert [linked.slider(key=KEY(n)).value for n in ("d_model", "length", "k")] == [32, 40, 9]


def test_a_new_d_model_plots_its_default_dimensions_again(page):
    page.multiselect(key=KEY("dims")).set_value([7]).run()
    page.slider(key=KEY("d_model")).set_value(20).run()
    assert page.multiselect(key=KEY("dims")).value == [4, 5, 12]
    assert "dims" not in page.query_params and page.query_params["d_model"] == "20"


def link(query: dict[str, str]):
    """An AppTest of the positional-encoding page opened by a link with `query` as its parameters."""
    return open_link(PAGE, query)


HOSTILE = [
    ({"model": "nope"}, "showing reverse (pretrained) instead"),
    ({"d_model": "31"}, "31 is odd"),
    ({"d_model": "4"}, "4 lies outside 8..512"),
    ({"d_model": "100000"}, "lies outside"),
    ({"d_model": "nan"}, "not a whole number"),
    ({"length": "-3"}, "-3 lies outside 8..256"),
    ({"length": "9" * 40}, "lies outside"),
    ({"dims": "600"}, "600 is larger than 511"),
    ({"dims": "4,64"}, "a 64-dimensional table has dimensions 0..63 only"),
    ({"dims": "a,b"}, "not whole numbers"),
    ({"dims": ",".join(map(str, range(9)))}, "at most 8"),
    ({"k": "0"}, "0 lies outside 1..50"),
    ({"k": "1e3"}, "not a whole number"),
    ({"text": "ABC"}, "this model cannot read it"),
    ({"text": "a" * 40}, "this model cannot read it"),
    ({"text": "a" * 3000}, "characters long"),
    ({"text": "a\tb"}, "control characters"),
    ({"no_positions": "2"}, "neither 0 nor 1"),
    ({"v": "7", "k": "9"}, "newer version of the app"),
    ({"input": "abc"}, "“input” is not a setting of this page"),
]


@pytest.mark.parametrize("query, note", HOSTILE, ids=link_id)
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, bundle, query, note):
    at = link(query)
    refused_with_a_note(at, note, POSITIONS)
    assert [at.slider(key=KEY(n)).value for n in ("d_model", "length", "k")] == [64, 64, 5]
    assert at.multiselect(key=KEY("dims")).value == [4, 5, 12, 24]
    examples = bundle.task.examples()
    assert at.text_input(key=INPUT).value == next(e for e in examples if len(set(e)) < len(e))
    assert not at.toggle(key=KEY("no_positions")).value and not at.error
    assert spec(at, "fig-pe-sum")["data"] and spec(at, "fig-pe-matrix")["data"]
    assert set(at.query_params) <= {"v"}, dict(at.query_params)  # the URL shows the default view
