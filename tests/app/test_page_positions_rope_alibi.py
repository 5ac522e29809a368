"""The positional-encoding page on RoPE and ALiBi models (tiny ones built here, AppTest): the RoPE view's
query/key pair, its rotation, scores and offset check, and ALiBi's bias per head and slopes, against an
independent computation from the model's weights with the rotation and bias written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.plotly_specs import alone, array, spec, title, z

from transformer.bundle import ModelBundle
from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import EOS
from transformer.tasks import make_task
from ui.tables.positions import POSITIONS

PAGE = "pages/concepts/positions.py"
KEY = POSITIONS.view().widget_key
TEXT = "abcdab"
TASK = make_task("reverse", min_len=2, max_len=8)
TOKENIZER = TASK.make_tokenizer()


def tiny(positional: str, n_heads: int) -> ModelBundle:
    torch.manual_seed(0)
    config = ModelConfig(TOKENIZER.vocab_size, TOKENIZER.vocab_size, 1, 1, d_model=16, n_heads=n_heads, d_ff=32,
                         max_len=12, positional=positional)
    return ModelBundle(EncoderDecoder(config).eval(), TOKENIZER, TASK, {"name": f"tiny-{positional}"})


def opened(app, bundle: ModelBundle):
    at = app(PAGE)
    at.session_state["session_models"] = {"trained:tiny": ("trained", bundle)}
    at.run()
    picker = at.selectbox(key="active_model_widget")
    picker.select(f"{bundle.name} (trained)").run()
    at.text_input(key=KEY("text")).input(TEXT).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def rotation(pos: int, d: int) -> np.ndarray:
    r = np.zeros((d, d))
    for i in range(d // 2):
        a = pos * 10000.0 ** (-2 * i / d)
        r[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    return r


def query_key(model: EncoderDecoder, head: int) -> tuple[np.ndarray, np.ndarray]:
    """(len, d_head) queries and keys of the first encoder layer's `head` for TEXT, unrotated, computed here."""
    ids = torch.tensor([[*TOKENIZER.encode(TEXT), EOS]])
    layer, d_head = model.encoder.layers[0], model.config.d_head
    with torch.no_grad():
        x = model.src_embed.tokens(ids)[0] * math.sqrt(model.config.d_model)  # nothing added for rope
        norm = layer.residuals[0].norm
        x = F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, norm.eps)
        q = F.linear(x, *layer.self_attn.projection("q_proj"))
        k = F.linear(x, *layer.self_attn.projection("k_proj"))
    cols = slice(head * d_head, (head + 1) * d_head)
    return q[:, cols].double().numpy(), k[:, cols].double().numpy()


def metric(at, label: str) -> float:
    return float(next(m.value for m in at.metric if m.label.startswith(label)))


@pytest.mark.parametrize("head", [1, 2])
def test_rope_view_turns_the_models_own_pair_and_its_scores_match(app, head):
    bundle = tiny("rope", n_heads=2)
    at = opened(app, bundle)
    assert "3b · RoPE" in [h.value for h in at.header][3]
    at.selectbox(key=KEY("head")).select(head).run()
    m, n = at.select_slider(key=KEY("query_pos")).value, at.select_slider(key=KEY("key_pos")).value
    assert (m, n) == (len(TEXT), 0)  # defaults: the last token (</s>) and the first
    at.select_slider(key=KEY("query_pos")).set_value(4).run()
    at.select_slider(key=KEY("key_pos")).set_value(1).run()
    q, k = query_key(bundle.model, head - 1)
    q_rot, k_rot = rotation(4, 8) @ q[4], rotation(1, 8) @ k[1]
    data = spec(at, "fig-rope-pairs")["data"]
    assert len(data) == 4 * 4  # 4 frequency pairs, 4 arrows each: query, query at m, key, key at n
    for i in range(4):
        ends = [(array(t["x"])[1], array(t["y"])[1]) for t in data[4 * i: 4 * i + 4]]
        np.testing.assert_allclose(ends, [q[4, 2 * i: 2 * i + 2], q_rot[2 * i: 2 * i + 2],
                                          k[1, 2 * i: 2 * i + 2], k_rot[2 * i: 2 * i + 2]], atol=1e-4)
    score = q_rot @ k_rot / math.sqrt(8)
    assert metric(at, "score") == pytest.approx(score, abs=1e-3)
    assert metric(at, "the trace's recorded score") == pytest.approx(score, abs=1e-3)
    assert metric(at, "max |") < 1e-4
    dots = array(spec(at, "fig-rope-offset")["data"][0]["y"])
    shifted = [(rotation(4 + s, 8) @ q[4]) @ (rotation(1 + s, 8) @ k[1]) for s in range(len(dots))]
    np.testing.assert_allclose(dots, shifted, atol=1e-4)
    assert len(dots) == bundle.config.max_len - 4
    assert f"head {head}" in title(at, "fig-rope-pairs")
    assert at.query_params["query_pos"] == "4" and at.query_params["key_pos"] == "1"


def test_rope_position_from_a_link_past_the_input_is_refused(app):
    at = opened(app, tiny("rope", n_heads=2))
    at.query_params["query_pos"] = "11"
    at.query_params["model"] = "trained:tiny"
    at.query_params["text"] = TEXT
    at.run()
    assert not at.exception
    assert at.select_slider(key=KEY("query_pos")).value == len(TEXT)


def test_alibi_view_shows_each_heads_bias_and_slope(app):
    at = opened(app, tiny("alibi", n_heads=4))
    assert "3b · ALiBi" in [h.value for h in at.header][3]
    slopes = [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]  # Press et al. for 4 heads, written out
    n = len(TEXT) + 1
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    for h, slope in enumerate(slopes):
        np.testing.assert_allclose(z(at, "fig-alibi-bias", h), -slope * distance, atol=1e-7)
    layout = spec(at, "fig-alibi-bias")["layout"]
    assert [a["text"] for a in layout["annotations"]] == [f"head {h + 1} · slope {s:.4g}" for h, s in
                                                          enumerate(slopes)]
    table = at.dataframe[-1].value
    np.testing.assert_allclose(table["slope m_h"], slopes)


@pytest.mark.parametrize("positional", ["rope", "alibi"])
def test_decoding_without_positions_still_runs(app, positional):
    at = opened(app, tiny(positional, n_heads=2))
    at.toggle(key=KEY("no_positions")).set_value(True).run()
    assert not at.exception and not at.error
    assert len([key for key in alone(at) if "cross" in key]) == 2


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_the_train_page_offers_the_scheme_and_a_link_selects_it(clean_caches, scheme):
    from helpers.repo import open_link

    from ui.tables.train import TRAIN

    at = open_link("pages/models/train.py", {"v": "1", "positional": scheme})
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    box = at.selectbox(key=TRAIN.view().widget_key("positional"))
    assert box.value == scheme and len(box.options) == 5
    assert at.query_params["positional"] == scheme


def test_the_masks_page_says_what_the_scores_hold(app):
    at = opened(app, tiny("alibi", n_heads=2))
    at.switch_page("pages/concepts/masks.py").run()
    assert not at.exception
    assert any("include the head's bias" in c.value for c in at.caption)


def test_the_train_page_names_a_shape_rope_cannot_turn():
    from ui.run_settings import MODEL_DEFAULTS_ALL, model_problem

    odd = {**MODEL_DEFAULTS_ALL, "d_model": 24, "n_heads": 8, "positional": "rope"}
    assert "must be even" in model_problem(odd)
    assert model_problem({**odd, "positional": "alibi"}) is None
