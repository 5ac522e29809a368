"""The all-heads attention page (AppTest): charts, their shapes and values against an independent traced
recomputation, the pickers, per-head statistics, bad input, and the view in the URL (a link restores it; a
hostile one gives a note and the default view)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from helpers.attention_page import INPUT_BOX, KIND, MODEL_PICKER, PAGE, VIEW, big_heatmap, figure, figures, shown_input
from helpers.plotly_specs import alone, array
from helpers.repo import REVERSE, ROOT, link_id, needs_reverse, open_link

from transformer.analysis.heads import alignment_score
from transformer.charts.export import image_export_available
from transformer.network.decoding import greedy_batch, greedy_decode
from transformer.network.masks import padding_mask
from transformer.network.special_tokens import BOS, EOS
from transformer.network.trace import AttentionTrace
from transformer.store.checkpoints import load_bundle
from ui import decodes
from ui import model_registry as registry
from ui.markdown import plain
from ui.tables.attention import ATTENTION

pytestmark = needs_reverse


def picker(at, prop: str, kind: str):
    """The layer or head selectbox of one kind of attention."""
    return at.selectbox(key=VIEW.widget_key(prop, kind))


@torch.no_grad()
def traced(bundle, text: str) -> dict[str, np.ndarray]:
    """Independently: greedy output (no trace), then ONE teacher-forced traced pass over it."""
    model, tokenizer = bundle.model.eval(), bundle.tokenizer
    src = torch.tensor([tokenizer.encode(text) + [EOS]])
    output = greedy_batch(model, src, model.config.max_len)[0].tolist()
    output = output[: output.index(EOS) + 1] if EOS in output else output
    tgt = torch.tensor([[BOS] + output[:-1]])
    trace = AttentionTrace()
    memory = model.encode(src, padding_mask(src), trace)
    model.decode(memory, padding_mask(src), tgt, trace=trace)
    return {kind: trace.weights(kind)[:, 0].numpy() for kind in ("encoder_self", "decoder_self", "cross")}


def spec_heads(spec: dict) -> int:
    """Heads across a head grid: one H tick per head."""
    return len(spec["layout"]["xaxis"]["ticktext"])


def picked(title: str) -> tuple[int, int]:
    layer, head = re.search(r"layer (\d+) · head (\d+)", title).groups()
    return int(layer) - 1, int(head) - 1


def test_default_shows_the_shared_example_decoded_and_every_chart(app, bundle):
    at = app(PAGE)
    text = shown_input(at)
    assert text == bundle.task.examples()[0]
    assert any(":green-badge[:material/check: right]" in md.value for md in at.markdown)
    titles = list(figures(at))
    assert len(titles) == 4, titles
    assert {t.split(" · ")[0] for t in titles} == {"Cross-attention"}
    assert not at.error


def test_grid_tiles_every_head_of_every_layer(app, bundle):
    at = app(PAGE)
    weights = traced(bundle, shown_input(at))["cross"]
    layers, heads, queries, keys = weights.shape
    assert (layers, heads) == (bundle.config.n_dec_layers, bundle.config.n_heads)
    title, spec = figure(at, "Cross-attention · all")
    grid = array(spec["data"][0]["z"])
    assert grid.shape == (layers * (queries + 1) - 1, heads * (keys + 1) - 1)
    np.testing.assert_allclose(grid[: queries, keys + 1: 2 * keys + 1], weights[0, 1], atol=1e-5)  # L1 H2
    assert f"{layers} layers × {heads} heads" in title


def test_large_heatmap_matches_a_traced_recomputation_and_starts_on_the_best_head(app, bundle):
    at = app(PAGE)
    text = shown_input(at)
    weights = traced(bundle, text)["cross"]
    title, spec = figure(at, r"Cross-attention · layer \d · head")
    layer, head = picked(title)
    np.testing.assert_allclose(array(spec["data"][0]["z"]), weights[layer, head], atol=1e-5)
    scores = alignment_score(weights, bundle.task.alignment(text)[: weights.shape[2]])
    assert (layer, head) == np.unravel_index(np.argmax(scores), scores.shape)
    callout = at.success[0].value
    assert f"Layer {layer + 1}, head {head + 1}" in callout and f"{scores.max():.0%}" in callout
    assert scores.max() > 0.5
    _, mean_spec = figure(at, f"Cross-attention · layer {layer + 1} · mean")
    np.testing.assert_allclose(array(mean_spec["data"][0]["z"]), weights[layer].mean(0), atol=1e-5)


def test_switching_kind_layer_and_head_changes_title_and_values(app, bundle):
    at = app(PAGE)
    weights = traced(bundle, shown_input(at))
    at.segmented_control(key=KIND).set_value("encoder_self").run()
    title, spec = figure(at, r"Encoder self-attention · layer \d · head")
    layer, head = picked(title)
    np.testing.assert_allclose(array(spec["data"][0]["z"]), weights["encoder_self"][layer, head], atol=1e-5)
    picker(at, "layer", "encoder_self").set_value(1).run()
    picker(at, "head", "encoder_self").set_value(2).run()
    title, spec = figure(at, r"Encoder self-attention · layer \d · head")
    assert title == "Encoder self-attention · layer 2 · head 3"
    np.testing.assert_allclose(array(spec["data"][0]["z"]), weights["encoder_self"][1, 2], atol=1e-5)
    assert not at.success  # the alignment callout belongs to cross-attention

    at.segmented_control(key=KIND).set_value("decoder_self").run()
    title, spec = figure(at, r"Decoder self-attention \(masked\) · layer \d · head")
    layer, head = picked(title)
    shown = array(spec["data"][0]["z"])
    expected = weights["decoder_self"][layer, head]
    below = np.tril(np.ones_like(expected, dtype=bool))
    np.testing.assert_allclose(shown[below], expected[below], atol=1e-5)
    assert np.isnan(shown[~below]).all()  # masked cells are drawn grey, never as a small number
    _, grid_spec = figure(at, "Decoder self-attention \\(masked\\) · all")
    size = expected.shape[0]
    first_tile = array(grid_spec["data"][0]["z"])[:size, :size]
    np.testing.assert_allclose(first_tile[below], weights["decoder_self"][0, 0][below], atol=1e-5)
    assert np.isnan(first_tile[~below]).all()  # blank in the grid too


def test_figures_are_kept_in_the_byte_bounded_cache_per_decode_and_chart(app, bundle):
    at = app(PAGE)
    text = shown_input(at)
    figures = [k for k in decodes._cache.keys() if k[0] == "figure"]
    assert {k[1] for k in figures} == {"en"}  # built in the reader's language, and kept per language
    named = {k[2:] for k in figures}
    assert {k[5:7] for k in named} == {("head", "cross"), ("mean", "cross"), ("grid", "cross"), ("stats", "cross")}
    assert all(k[2:5] == (text, (), "zero") for k in named)  # named by the decode they show
    picker(at, "head", "cross").set_value(0).run()
    _, spec = figure(at, r"Cross-attention · layer \d · head 1$")
    layer, _ = picked(figure(at, r"Cross-attention · layer \d · head 1$")[0])
    np.testing.assert_allclose(array(spec["data"][0]["z"]), traced(bundle, text)["cross"][layer, 0], atol=1e-5)
    assert decodes._cache.currsize <= decodes._cache.maxsize


def test_head_statistics_table_has_one_row_per_head(app, bundle):
    at = app(PAGE)
    table = at.dataframe[0].value
    assert len(table) == bundle.config.n_dec_layers * bundle.config.n_heads
    assert list(table.columns) == ["Layer", "Head", "Entropy (bits)", "Max weight", "Alignment"]
    at.segmented_control(key=KIND).set_value("encoder_self").run()
    table = at.dataframe[0].value
    assert len(table) == bundle.config.n_enc_layers * bundle.config.n_heads
    assert "Alignment" not in table.columns
    _, spec = figure(at, "Encoder self-attention · per-head")
    assert len(spec["data"]) == 2  # entropy and max weight panels only


def test_input_is_shared_and_bad_input_gives_a_message(app):
    at = app(PAGE)
    at.text_input(key=INPUT_BOX).input("abc").run()
    assert at.session_state[ATTENTION.key("input")] == "abc" and at.query_params["input"] == "abc"
    assert any("`cba`" in md.value and "right" in md.value for md in at.markdown)
    _, spec = figure(at, "Cross-attention · all")
    assert array(spec["data"][0]["z"]).shape[1] == (4 + 1) * spec_heads(spec) - 1
    at.text_input(key=INPUT_BOX).input("Hello!").run()
    assert not at.exception
    assert at.error and "'!', 'H'" in plain(at.error[0].value)
    assert not alone(at)
    at.text_input(key=INPUT_BOX).input("").run()
    assert not at.exception and "empty" in at.error[0].value


def test_input_typed_on_the_decode_page_is_used(app):
    at = app("pages/explore/decode.py")
    at.text_input(key=INPUT_BOX).input("xyz").run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception
    assert shown_input(at) == "xyz"
    assert any("`zyx`" in md.value for md in at.markdown)


def test_every_chart_exports_under_a_meaningful_name(app):
    at = app(PAGE)
    names = {}
    for data in alone(at).values():
        names[data["figures"][0]["layout"]["title"]["text"]] = data["filenames"][0]
    layer, head = picked(next(t for t in names if "· head" in t))
    expected = [f"reverse_cross_L{layer + 1}H{head + 1}", f"reverse_cross_L{layer + 1}_mean",
                "reverse_cross_all-heads", "reverse_cross_head-stats"]
    assert sorted(names.values()) == sorted(expected)


def download_labels(at) -> list[str]:
    return [el.proto.label for el in at.get("download_button")]


def test_grid_exports_as_one_image_or_says_why_it_cannot(app, monkeypatch):
    at = app(PAGE)
    labels = download_labels(at)
    assert "Download all heads as HTML" in labels and "Numbers (CSV)" in labels
    assert ("Download all heads as PNG" in labels) == image_export_available()[0]
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    at.run()
    labels = download_labels(at)
    assert "Download all heads as PNG" not in labels and "Download all heads as HTML" in labels
    assert any("/nonexistent/chromium" in info.value and "HTML" in info.value for info in at.info)


def test_a_model_without_known_alignment_still_shows_every_head(app):
    """An untrained session model of a task with no alignment: no callout, no alignment column, and the
    unfinished decode is said so."""
    from streamlit.testing.v1 import AppTest

    from transformer.bundle import ModelBundle
    from transformer.network.config import ModelConfig
    from transformer.network.model import EncoderDecoder
    from transformer.tasks import make_task

    task = make_task("addition")
    tokenizer = task.make_tokenizer()
    torch.manual_seed(0)
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, n_enc_layers=1,
                         n_dec_layers=3, d_model=16, n_heads=2, d_ff=32, max_len=8)
    bundle = ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "tiny-addition"})
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state[registry.SESSION_MODELS] = {"trained:tiny": ("trained", bundle)}
    at.session_state[registry.ACTIVE] = "trained:tiny"
    at.session_state[ATTENTION.key("input")] = "1+2"
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception and not at.error and not at.success
    assert len(at.dataframe[0].value) == 3 * 2 and "Alignment" not in at.dataframe[0].value.columns
    result = greedy_decode(bundle.model, tokenizer, "1+2")
    _, spec = figure(at, "Cross-attention · all")
    assert array(spec["data"][0]["z"]).shape == (3 * (len(result.steps) + 1) - 1, 2 * (len("1+2") + 2) - 1)
    assert any("length limit" in md.value for md in at.markdown) == (not result.finished)


def test_every_shipped_model_shows_its_heads(app):
    """Switching the sidebar model starts from that model's first example and draws every chart."""
    at = app(PAGE)
    for path in sorted(REVERSE.parent.glob("*.safetensors")):
        at.selectbox(key=MODEL_PICKER).set_value(f"shipped:{path.stem}").run()
        assert not at.exception and not at.error, path.stem
        bundle = load_bundle(path)
        assert shown_input(at) == bundle.examples()[0]  # the card's own examples first (the beam demo has some)
        title, _ = figure(at, "Cross-attention · all")
        assert f"{bundle.config.n_dec_layers} layers × {bundle.config.n_heads} heads" in title
        assert len(at.dataframe[0].value) == bundle.config.n_dec_layers * bundle.config.n_heads
        assert bool(at.success) == (bundle.task.alignment(shown_input(at)) is not None), path.stem
        title, _ = figure(at, r"Cross-attention · layer \d · head")
        layer, head = picked(title)
        if at.success:  # each model starts on its own best-aligned head
            assert f"Layer {layer + 1}, head {head + 1}" in at.success[0].value
        assert any(bundle.task.description in caption.value for caption in at.caption)


# ------------------------------------------------------------------------------------------- the view in the URL


def linked(query: dict[str, str]):
    """An AppTest of this page opened by a link with `query` as its parameters."""
    return open_link(PAGE, query)


def test_the_url_follows_kind_layer_and_head_and_a_kind_keeps_its_pick(app):
    at = app(PAGE)
    assert set(at.query_params) <= {"v"}  # the default view
    at.segmented_control(key=KIND).set_value("encoder_self").run()
    picker(at, "layer", "encoder_self").set_value(1).run()
    picker(at, "head", "encoder_self").set_value(2).run()
    assert dict(at.query_params) == {"v": "1", "kind": "encoder_self", "layer": "2", "head": "3"}
    at.segmented_control(key=KIND).set_value("cross").run()  # cross shows its best-aligned head again
    assert "layer" not in at.query_params and "head" not in at.query_params
    at.segmented_control(key=KIND).set_value("encoder_self").run()  # and the encoder its pick
    assert big_heatmap(at)[0] == "Encoder self-attention · layer 2 · head 3"
    assert dict(at.query_params) == {"v": "1", "kind": "encoder_self", "layer": "2", "head": "3"}


def test_a_link_restores_model_input_kind_layer_head_and_cell(clean_caches):
    copy = load_bundle(REVERSE.with_name("copy.safetensors"))
    query = {"v": "1", "model": "copy", "input": "hello", "kind": "decoder_self", "layer": "2", "head": "4",
             "cell": "3,1"}
    at = linked(query)
    assert not at.exception and not at.warning
    assert at.selectbox(key=MODEL_PICKER).value == "shipped:copy" and shown_input(at) == "hello"
    assert at.segmented_control(key=KIND).value == "decoder_self"
    assert (picker(at, "layer", "decoder_self").value, picker(at, "head", "decoder_self").value) == (1, 3)
    title, shown = big_heatmap(at)
    assert title == "Decoder self-attention (masked) · layer 2 · head 4"
    expected = traced(copy, "hello")["decoder_self"][1, 3]
    below = np.tril(np.ones_like(expected, dtype=bool))
    np.testing.assert_allclose(shown[below], expected[below], atol=1e-5)
    words = next(md.value for md in at.markdown if "gives key" in md.value)
    assert words.startswith("Query `03 ") and "key `01 " in words and f"**{expected[3, 1]:.3f}**" in words
    assert dict(at.query_params) == query  # the page writes back the view it was given


HOSTILE = [
    {"model": "nope"}, {"model": "trained:12345678"}, {"unknown": "1"}, {"v": "2", "kind": "encoder_self"},
    {"input": "x" * 5000}, {"input": "ABC!"}, {"input": "a\x00b"}, {"input": "abcdefghijklmnopqrstuvwxyz"},
    {"kind": "bogus"}, {"kind": ""},
    {"layer": "3"}, {"layer": "0"}, {"layer": "-1"}, {"layer": "nan"}, {"layer": "99999999999999999999"},
    {"head": "5"}, {"head": "1.5"}, {"head": "1" * 3000},
    {"cell": "99,0"}, {"cell": "0,99"}, {"cell": "1,2,3"}, {"cell": "-1,2"}, {"cell": "a,b"}, {"cell": "1e9,1"},
    {"knocked": "cross:L9H1"}, {"knocked": "cross:L1H9"}, {"knocked": "attn:L1H1"}, {"knocked": "cross:L1H1," * 300},
    {"knock_mode": "half"}, {"samples": "5"},
]


@pytest.mark.parametrize("query", HOSTILE, ids=link_id)
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, bundle, query):
    at = linked(query)
    assert not at.exception, [e.value for e in at.exception]
    assert any("could not be followed" in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.selectbox(key=MODEL_PICKER).value == "shipped:reverse"
    example = bundle.task.examples()[0]
    assert shown_input(at) == example and at.segmented_control(key=KIND).value == "cross"
    title, shown = big_heatmap(at)
    layer, head = picked(title)
    weights = traced(bundle, example)["cross"]
    scores = alignment_score(weights, bundle.task.alignment(example)[: weights.shape[2]])
    assert (layer, head) == np.unravel_index(np.argmax(scores), scores.shape)  # the best-aligned head
    np.testing.assert_allclose(shown, weights[layer, head], atol=1e-5)
    assert not any("gives key" in md.value for md in at.markdown)  # no cell selected
    assert set(at.query_params) <= {"v"}, dict(at.query_params)  # the URL shows the default view
