"""The masks page (AppTest): its batch and masks against the library's, recomputed here; scores and weights
against an independent traced pass; what removing the causal mask shows; messages for bad input; the view in
the URL, restored from a link, and hostile links."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.plotly_specs import shown, spec, title, z
from helpers.repo import ROOT, link_id, needs_reverse, open_link, refused_with_a_note

from transformer.analysis.masked_batch import varied_lengths
from transformer.network.decoding import greedy_decode
from transformer.network.masks import padding_mask, subsequent_mask, target_mask
from transformer.network.trace import AttentionTrace
from transformer.tasks import encode_pairs
from ui import decodes
from ui.markdown import plain
from ui.tables.masks import MASKS

PAGE = "pages/concepts/masks.py"
KEY = MASKS.view().widget_key  # a prop's widget key
INPUTS = KEY("inputs")
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
    row = page.selectbox(key=KEY("row")).value
    assert len(sources[row]) == min(map(len, sources))  # the shortest row shows its padding by default
    t = tgt_in.shape[1]
    np.testing.assert_array_equal(allowed(page, "fig-masks-combined"), target_mask(tgt_in)[row, 0].numpy())
    np.testing.assert_array_equal(allowed(page, "fig-masks-causal"), subsequent_mask(t)[0, 0].numpy())
    np.testing.assert_array_equal(allowed(page, "fig-masks-tgt-pad"),
                                  padding_mask(tgt_in)[row, 0].expand(t, t).numpy())
    np.testing.assert_array_equal(allowed(page, "fig-masks-cross"), padding_mask(src)[row, 0].expand(t, -1).numpy())
    assert allowed(page, "fig-masks-combined").sum() < allowed(page, "fig-masks-causal").sum()  # padding counts
    assert any("Equals padding AND causal, cell by cell" in c.value for c in page.caption)  # what the page checked
    assert any(k[0] == "masked_batch" for k in decodes._cache)  # the batch is kept in the byte-bounded cache


def test_scores_and_weights_come_from_a_real_traced_pass(page, bundle):
    _, src, tgt_in = batch(bundle, page)
    trace = AttentionTrace()
    with torch.no_grad():
        bundle.model(src, tgt_in, padding_mask(src), target_mask(tgt_in), trace)
    row = page.selectbox(key=KEY("score_row")).value
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
    assert not shown(page, "fig-masks-open-False")
    page.toggle(key=KEY("no_causal")).set_value(True).run()
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
    page.radio(key=KEY("targets")).set_value("greedy").run()
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
        return any(part in plain(e.value) for e in page.error for part in message.split("|"))

    page.text_area(key=INPUTS).set_value(text).run()
    assert not page.exception and says_why(), [e.value for e in page.error]
    assert page.title[0].value == "Masks"
    page.radio(key=KEY("targets")).set_value("greedy").run()
    assert not page.exception and says_why(), [e.value for e in page.error]


def test_the_view_is_in_the_url_and_a_link_restores_it(page, bundle):
    assert page.query_params == {}
    page.text_area(key=INPUTS).set_value("abc\nabcdefg").run()
    page.radio(key=KEY("targets")).set_value("greedy").run()
    page.selectbox(key=KEY("row")).set_value(1).run()
    page.selectbox(key=KEY("kind")).set_value("cross").run()
    page.selectbox(key=KEY("layer")).set_value(1).run()
    page.selectbox(key=KEY("head")).set_value(3).run()
    page.selectbox(key=KEY("score_row")).set_value(0).run()
    page.toggle(key=KEY("no_causal")).set_value(True).run()
    page.selectbox(key=KEY("open_head")).set_value(2).run()
    page.selectbox(key=KEY("open_row")).set_value(0).run()
    assert not page.exception
    query = dict(page.query_params)
    assert query == {"v": "1", "inputs": "abc\nabcdefg", "targets": "greedy", "row": "2", "kind": "cross",
                     "layer": "2", "head": "4", "score_row": "1", "no_causal": "1", "open_head": "3", "open_row": "1"}
    charts = ("masks-batch-tgt", "fig-masks-combined", "fig-masks-scores", "fig-masks-weights", "fig-masks-open-False")
    shown = {key: spec(page, key) for key in charts}
    assert "Cross · layer 2 · head 4<br>scores, seq 1" in title(page, "fig-masks-scores")

    linked = link(query)
    assert not linked.exception and not linked.warning
    assert {key: spec(linked, key) for key in charts} == shown
    assert dict(linked.query_params) == query
    for name in ("inputs", "targets", "row", "kind", "layer", "head", "score_row", "no_causal", "open_head"):
        widget = linked.text_area if name == "inputs" else linked.radio if name == "targets" else \
            linked.toggle if name == "no_causal" else linked.selectbox
        assert widget(key=KEY(name)).value == (page.text_area if name == "inputs" else page.radio
                                               if name == "targets" else page.toggle if name == "no_causal"
                                               else page.selectbox)(key=KEY(name)).value, name


def test_another_model_starts_from_its_own_inputs(page):
    page.text_area(key=INPUTS).set_value("abc\nabcdefg").run()
    page.selectbox(key=KEY("row")).set_value(1).run()
    page.selectbox(key=MASKS.view().widget_key("model")).set_value("shipped:sort").run()
    assert not page.exception and not page.error
    from transformer.store.checkpoints import load_bundle

    sort = load_bundle(ROOT / "assets" / "checkpoints" / "sort.safetensors")
    assert page.text_area(key=INPUTS).value == "\n".join(varied_lengths(sort.task.examples()))
    assert dict(page.query_params) == {"v": "1", "model": "sort"}  # inputs and row went back to their defaults


def link(query: dict[str, str]):
    """An AppTest of the masks page opened by a link with `query` as its parameters."""
    return open_link(PAGE, query)


HOSTILE = [
    ({"model": "nope"}, "showing reverse (pretrained) instead"),
    ({"inputs": "abc\nAB1"}, "they cannot form a batch for this model"),
    ({"inputs": "a\nb\nc\nd\ne"}, "2 to 4"),
    ({"inputs": "abc\n" + "x" * 40}, "too long"),
    ({"inputs": "ab\x00c\nabc"}, "control characters"),
    ({"inputs": "ab\n" * 3000}, "characters long"),
    ({"targets": "mine"}, "“mine” is not one of correct, greedy"),
    ({"kind": "everything"}, "is not one of"),
    ({"layer": "3"}, "this model has only 2 decoder layers"),
    ({"kind": "encoder_self", "layer": "9"}, "this model has only 2 encoder layers"),
    ({"layer": "0"}, "0 lies outside 1..64"),
    ({"head": "-1"}, "-1 lies outside"),
    ({"head": "5"}, "this model has only 4 heads"),
    ({"head": "nan"}, "“nan” is not a whole number"),
    ({"head": "99999999999999999999"}, "lies outside"),
    ({"row": "4"}, "the batch has only 3 rows"),
    ({"score_row": "1e3"}, "not a whole number"),
    ({"no_causal": "yes"}, "neither 0 nor 1"),
    ({"no_causal": "1", "open_layer": "7"}, "this model has only 2 decoder layers"),
    ({"no_causal": "1", "open_row": "4"}, "the batch has only 3 rows"),
    ({"v": "2", "row": "2"}, "newer version of the app"),
    ({"step": "3"}, "“step” is not a setting of this page"),
]


@pytest.mark.parametrize("query, note", HOSTILE, ids=link_id)
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, bundle, query, note):
    at = link(query)
    warning = refused_with_a_note(at, note, MASKS)
    newer = query.get("v", "1") != "1"  # a newer format: nothing of the link is used
    refused = set(query) if newer else {name for name in query if f"{name}: " in warning or name not in MASKS.by_name}
    kept = set(query) - refused - {"v"}  # a link's usable values stay (e.g. a kind beside a layer it lacks)
    defaults = {
        "inputs": (at.text_area, "\n".join(varied_lengths(bundle.task.examples()))), "targets": (at.radio, "correct"),
        "kind": (at.selectbox, "decoder_self"), "layer": (at.selectbox, 0), "head": (at.selectbox, 0),
        "row": (at.selectbox, 0),  # the shortest input
        "no_causal": (at.toggle, False),
    }
    for name, (widget, default) in defaults.items():
        if name not in kept:
            assert widget(key=KEY(name)).value == default, name
    assert not at.error
    assert set(at.query_params) <= {"v"} | kept, dict(at.query_params)  # the URL shows the default view
