"""The home page (AppTest): attention on the first screen (against a decode done here), the architecture of
the active model, one card per page, a message for bad input, its view in the URL, and hostile links."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.plotly_specs import shown, spec, title, z
from helpers.repo import ROOT, needs_reverse, refused_with_a_note

from transformer.network.decoding import greedy_decode
from ui.markdown import plain
from ui.tables.home import HOME

INPUT = HOME.view().widget_key("input")
pytestmark = needs_reverse


@pytest.fixture
def home(app):
    return app()  # the default page


def test_default_page_shows_cross_attention_of_an_example(home, bundle):
    assert home.title[0].value == "Attention Playground" and home.get("latex")
    text = home.text_input(key=INPUT).value
    assert text == bundle.task.examples()[0]
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    assert any(f"`{result.output_text}`" in m.value for m in home.markdown)
    assert any(m.value.startswith("**Output:**") and "right" in m.value for m in home.markdown)
    shown = z(home, "fig-home-cross")
    assert shown.shape == (len(result.steps), len(text) + 1)
    layer, head = (int(n) - 1 for n in title(home, "fig-home-cross").replace("·", " ").split() if n.isdigit())
    np.testing.assert_allclose(shown, result.cross[layer, head].numpy(), atol=1e-5)
    n = len(text)
    assert np.mean([shown[t, n - 1 - t] for t in range(n)]) > 0.5  # the reversal's anti-diagonal, at once


def test_architecture_is_drawn_from_the_active_model(home, bundle):
    cfg = bundle.config
    fig = spec(home, "fig-home-arch")
    texts = " ".join(a["text"] for a in fig["layout"]["annotations"])
    assert f"×{cfg.n_enc_layers}<br>encoder" in texts and f"×{cfg.n_dec_layers}<br>decoder" in texts
    assert f"{cfg.n_heads} heads × {cfg.d_model // cfg.n_heads} dims" in texts
    assert f"{cfg.d_model} → {cfg.d_ff} → {cfg.d_model}" in texts
    assert "Cross-attention" in texts and "Masked self-attention" in texts


def test_one_card_per_page_with_something_to_try(home):
    links = [el.proto for el in home.get("page_link")]
    assert [link.page for link in links] == ["code", "code", "decode", "attention", "errors", "compare", "masks",
                                             "positions", "train", "checkpoints"]  # the heatmap's code link, the cards
    assert all(link.page_script_hash for link in links)  # each resolves to a registered page
    tries = [c.value for c in home.caption if c.value.startswith("Try:")]
    assert len(tries) == 9


@pytest.mark.parametrize("text, message", [("Hello!", "'!', 'H'"), ("", "empty")])
def test_bad_input_shows_a_message_and_the_rest_of_the_page(home, text, message):
    home.text_input(key=INPUT).set_value(text).run()
    assert not home.exception
    assert any(message in plain(e.value) for e in home.error), [e.value for e in home.error]
    assert spec(home, "fig-home-arch") and len(home.get("page_link")) == 9  # the cards, no chart to link to code
    assert not shown(home, "fig-home-cross")


def test_the_input_is_in_the_url_and_shared_with_the_decode_page(home, bundle):
    assert home.query_params == {}  # the default view: a bare address
    home.text_input(key=INPUT).set_value("abcd").run()
    assert home.query_params == {"v": "1", "input": "abcd"}
    assert z(home, "fig-home-cross").shape == (5, 5)
    assert any("right" in m.value for m in home.markdown if m.value.startswith("**Output:** `dcba`"))
    home.switch_page("pages/explore/decode.py").run()
    assert home.text_input(key=INPUT).value == "abcd"  # the shared input travels with the user


def test_a_wrong_output_names_the_right_answer(home, bundle):
    text = "aaaaaaaaaaaaaaaa"  # the shipped model writes 18 a's for these 16
    assert greedy_decode(bundle.model, bundle.tokenizer, text).output_text != text
    home.text_input(key=INPUT).set_value(text).run()
    assert any(m.value.startswith("**Output:**") and "wrong" in m.value for m in home.markdown)
    assert any(m.value == f"The right answer is `{text[::-1]}`." for m in home.markdown)


HOSTILE = [
    ({"model": "nope"}, "showing reverse (pretrained) instead"),
    ({"model": "trained:1a2b3c4d"}, "showing reverse (pretrained) instead"),
    ({"input": "ZZ!"}, "this model cannot decode it"),
    ({"input": "a" * 5000}, "characters long"),
    ({"input": "ab\x01c"}, "control characters"),
    ({"v": "99", "input": "abc"}, "newer version of the app (format 99)"),
    ({"step": "4"}, "“step” is not a setting of this page"),
]


@pytest.mark.parametrize("params, note", HOSTILE, ids=[",".join(p) for p, _ in HOSTILE])
def test_a_hostile_link_says_so_and_shows_the_default_view(clean_caches, bundle, params, note):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update(params)
    at.run()
    refused_with_a_note(at, note, HOME)
    assert at.text_input(key=INPUT).value == bundle.task.examples()[0]
    assert z(at, "fig-home-cross").shape[1] == len(bundle.task.examples()[0]) + 1
    assert at.query_params == {}  # the URL is the default view's again
