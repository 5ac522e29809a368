"""The masks page (AppTest): its batch and masks against the library's, recomputed here; scores and weights
against an independent traced pass; what removing the causal mask shows; messages for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import needs_reverse
from plotly_specs import spec, title, z
from transformer.decoding import greedy_decode
from transformer.masks import padding_mask, subsequent_mask, target_mask
from transformer.tasks import encode_pairs
from transformer.trace import AttentionTrace

PAGE = "pages/concepts/masks.py"
INPUTS = "masks_inputs:reverse"
pytestmark = needs_reverse


@pytest.fixture
def page(app):
    return app(PAGE)


def batch(bundle, at):
    """The page's inputs padded here with the library: (sources, src, decoder input)."""
    sources = at.text_area(key=INPUTS).value.split("\n")
    src, tgt = encode_pairs(bundle.tokenizer, [(s, bundle.task.target(s)) for s in sources])
    return sources, src, tgt[:, :-1]


def allowed(at, key: str) -> np.ndarray:
    """A mask chart's cells: True where drawn as "may attend" (the blocked ones are left empty)."""
    return ~np.isnan(z(at, key))


def test_defaults_show_inputs_of_different_lengths_padded_as_the_library_pads_them(page, bundle):
    sources, src, tgt_in = batch(bundle, page)
    assert 2 <= len(sources) <= 4 and len({len(s) for s in sources}) == len(sources)
    assert all(s in bundle.task.examples() for s in sources)
    cells = spec(page, "masks-batch-src")["data"][0]["text"]
    assert [[cell.split("<br>")[1] for cell in row] for row in cells] == [[str(i) for i in r] for r in src.tolist()]
    cells = spec(page, "masks-batch-tgt")["data"][0]["text"]
    assert [[int(cell.split("<br>")[1]) for cell in row] for row in cells] == tgt_in.tolist()
    text = " ".join(m.value for m in page.markdown)
    b, s = src.shape
    t, heads = tgt_in.shape[1], bundle.config.n_heads
    for shape in [(b, 1, 1, s), (b, 1, t, t), (b, heads, s, s), (b, heads, t, s)]:
        assert f"`{shape}`" in text


def test_masks_shown_equal_the_library_masks_for_the_same_batch(page, bundle):
    sources, src, tgt_in = batch(bundle, page)
    np.testing.assert_array_equal(allowed(page, "fig-masks-src-pad"), padding_mask(src)[:, 0, 0].numpy())
    row = page.selectbox(key="masks_row").value
    assert len(sources[row]) == min(map(len, sources))  # the shortest row shows its padding by default
    t = tgt_in.shape[1]
    np.testing.assert_array_equal(allowed(page, "fig-masks-combined"), target_mask(tgt_in)[row, 0].numpy())
    np.testing.assert_array_equal(allowed(page, "fig-masks-causal"), subsequent_mask(t)[0, 0].numpy())
    np.testing.assert_array_equal(allowed(page, "fig-masks-tgt-pad"),
                                  padding_mask(tgt_in)[row, 0].expand(t, t).numpy())
    np.testing.assert_array_equal(allowed(page, "fig-masks-cross"), padding_mask(src)[row, 0].expand(t, -1).numpy())
    assert allowed(page, "fig-masks-combined").sum() < allowed(page, "fig-masks-causal").sum()  # padding counts


def test_scores_and_weights_come_from_a_real_traced_pass(page, bundle):
    _, src, tgt_in = batch(bundle, page)
    trace = AttentionTrace()
    with torch.no_grad():
        bundle.model(src, tgt_in, padding_mask(src), target_mask(tgt_in), trace)
    row = page.selectbox(key="masks_score_row").value
    record = trace.attention["decoder_self"][0]  # defaults: decoder self-attention, layer 1, head 1
    blocked = ~record.mask[row, 0].numpy()
    scores, weights = z(page, "fig-masks-scores"), z(page, "fig-masks-weights")
    assert np.isnan(scores[blocked]).all() and np.isnan(weights[blocked]).all()  # masked: not a colour
    np.testing.assert_allclose(scores[~blocked], record.scores[row, 0].numpy()[~blocked], atol=1e-4)
    np.testing.assert_allclose(weights[~blocked], record.weights[row, 0].numpy()[~blocked], atol=1e-5)
    np.testing.assert_allclose(np.nansum(weights, axis=1), 1, atol=1e-5)
    overlay = spec(page, "fig-masks-scores")["data"][1]
    assert "masked" in overlay["hovertemplate"]
    np.testing.assert_array_equal(~np.isnan(z(page, "fig-masks-scores", 1)), blocked)
    assert "layer 1 · head 1" in title(page, "fig-masks-scores")


def test_removing_the_causal_mask_puts_weight_above_the_diagonal_and_changes_predictions(page):
    assert not [el for el in page.get("plotly_chart") if el.proto.id.endswith("fig-masks-open-False")]
    page.toggle(key="masks_no_causal").set_value(True).run()
    assert not page.exception
    causal, open_ = z(page, "fig-masks-open-True"), z(page, "fig-masks-open-False")
    assert "no causal mask" in title(page, "fig-masks-open-False")
    later = np.triu_indices_from(causal, 1)
    assert np.isnan(causal[later]).all()  # the causal run masks every later key
    assert np.nansum(open_[later]) > 0.5  # without it the decoder puts weight on later tokens
    table = page.dataframe[0].value
    assert list(table.columns) == ["position", "decoder reads", "should predict", "with causal mask", "without it",
                                   "changed"]
    assert (table["changed"] != "").sum() == (table["with causal mask"] != table["without it"]).sum() > 0


def test_greedy_targets_feed_the_models_own_output(page, bundle):
    page.radio(key="masks_targets").set_value("greedy").run()
    assert not page.exception
    sources = page.text_area(key=INPUTS).value.split("\n")
    cells = spec(page, "masks-batch-tgt")["data"][0]["text"]
    for source, row in zip(sources, cells):
        output = greedy_decode(bundle.model, bundle.tokenizer, source).output_ids
        assert [int(cell.split("<br>")[1]) for cell in row][1 : len(output) + 1][: len(output) - 1] == output[:-1]


@pytest.mark.parametrize("text, message", [
    ("abc\nAB1", "'1', 'A', 'B'"),
    ("abc", "2 to 4"),
    ("", "2 to 4"),
    ("a\nb\nc\nd\ne", "2 to 4"),
    ("abc\n" + "x" * 40, "too long"),
])
def test_bad_input_shows_a_message_not_an_exception(page, text, message):
    def says_why():
        return any(part in e.value for e in page.error for part in message.split("|"))

    page.text_area(key=INPUTS).set_value(text).run()
    assert not page.exception and says_why(), [e.value for e in page.error]
    assert page.title[0].value == "Masks"
    page.radio(key="masks_targets").set_value("greedy").run()
    assert not page.exception and says_why(), [e.value for e in page.error]
