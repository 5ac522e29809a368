"""The decode page's sampling section and top-k scale switch (AppTest): what they show against the library
recomputed here, the controls (their ranges the props') and the URL, and notes for bad links."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from helpers.plotly_specs import array, player_step, spec, step_spec
from helpers.repo import REVERSE, needs_reverse, open_link
from transformer.charts.common import probability_text
from transformer.network.decoding import DecodeError, greedy_decode
from transformer.network.sampling import SampleSettings, output_logits, samples
from transformer.store.checkpoints import load_bundle
from ui.markdown import code
from ui.tables.decode import DECODE, SAMPLES

PAGE = "pages/explore/decode.py"
pytestmark = needs_reverse
TEMPERATURE, TOP_K, TOP_P, SEED = ("decode_temperature_widget", "decode_top_k_widget", "decode_top_p_widget",
                                   "decode_seed_widget")


@pytest.fixture
def page(app):
    return app(PAGE)


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(REVERSE)


def shown_input(at) -> str:
    return at.text_input(key="shared_input_widget").value


def sample_boxes(at) -> list[str]:
    """The greedy and sample outputs side by side, as "name: output" (the line after each box's name)."""
    values = [m.value for m in at.markdown]
    values = values[next(i for i, v in enumerate(values) if v.startswith("Chatbots rarely")):]  # the section
    return [f"{values[i].strip('*')}: {values[i + 1].split(' ')[0]}" for i, v in enumerate(values)
            if v == "**Greedy**" or v.startswith("**Sample · seed")]


def expected_boxes(bundle, text: str, settings: SampleSettings) -> list[str]:
    drawn = samples(bundle.model, bundle.tokenizer, text, settings, SAMPLES)
    greedy = greedy_decode(bundle.model, bundle.tokenizer, text)
    return [f"Greedy: {code(greedy.output_text)}"] + [f"Sample · seed {d.settings.seed}: {code(d.output_text)}"
                                                      for d in drawn]


def stage_values(at) -> dict[str, np.ndarray]:
    return {bar["name"]: array(bar["x"]) for bar in spec(at, "decode_chart_sampling")["data"]}


def mattering(step) -> list[int]:
    """The tokens the chart gives a bar: at least 1% in some stage (the six likeliest at most), and the drawn one."""
    share = np.maximum(np.maximum(step.probs.numpy(), step.tempered.numpy()), step.filtered.numpy())
    ids = [int(i) for i in np.argsort(-share, kind="stable")[:6] if share[i] >= 0.01]
    return ids + ([] if step.token in ids else [step.token])


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def test_default_samples_and_distributions_equal_the_library(page, bundle):
    text = shown_input(page)
    assert sample_boxes(page) == expected_boxes(bundle, text, SampleSettings())
    assert [n.value for n in page.number_input] == [1.0, None, 1.0, 0] and not page.query_params
    drawn = samples(bundle.model, bundle.tokenizer, text, SampleSettings(), 1)[0]
    step = drawn.steps[0]
    chart = spec(page, "decode_chart_sampling")
    assert chart["layout"]["title"]["text"] == "Sampling distributions · step 1"
    ids = mattering(step)
    rest = len(step.probs) - len(ids)
    assert list(chart["data"][0]["y"]) == [bundle.tokenizer.piece(i) for i in ids] + [f"the other {rest}"]
    shown = stage_values(page)
    for name, full in (("model", step.probs), ("after temperature", step.tempered), ("after top-k / top-p",
                                                                                    step.filtered)):
        np.testing.assert_allclose(shown[name][:-1], full[ids].numpy(), rtol=1e-6)
        assert float(full.sum()) == pytest.approx(1.0, abs=1e-9) and shown[name].sum() == pytest.approx(1.0, abs=1e-6)
    for bar in chart["data"]:  # each reads its share in percent, as the axis does (not 1e-07)
        assert list(bar["text"]) == [probability_text(v) for v in array(bar["x"])] and all(
            text == "0" or text.endswith("%") for text in bar["text"])
    assert chart["layout"]["height"] <= 17 * 3 * 4 + 170  # a few bars, not eight tokens' worth of 1e-07
    assert any(m.value.startswith(f"**Step 1:** drew **{code(step.piece)}**") for m in page.markdown)


def test_settings_go_into_the_url_and_change_the_samples_and_filters(page, bundle):
    page.number_input(key=TEMPERATURE).set_value(4.0).run()
    page.number_input(key=TOP_K).set_value(3).run()
    page.number_input(key=TOP_P).set_value(0.95).run()
    page.number_input(key=SEED).set_value(5).run()
    assert not page.exception and not errors(page)
    assert {k: page.query_params[k] for k in ("temperature", "top_k", "top_p", "seed")} == {
        "temperature": "4", "top_k": "3", "top_p": "0.95", "seed": "5"}
    settings = SampleSettings(temperature=4.0, top_k=3, top_p=0.95, seed=5)
    text = shown_input(page)
    assert sample_boxes(page) == expected_boxes(bundle, text, settings)
    kept = stage_values(page)["after top-k / top-p"]
    assert 1 <= (kept > 0).sum() <= 3
    step = samples(bundle.model, bundle.tokenizer, text, settings, 1)[0].steps[0]
    assert (kept > 0).sum() == step.kept

    page.number_input(key=TOP_K).set_value(None).run()  # emptied: top-k off, and out of the URL
    assert "top_k" not in page.query_params and not errors(page)
    expected = SampleSettings(temperature=4.0, top_p=0.95, seed=5)
    assert sample_boxes(page) == expected_boxes(bundle, text, expected)


def test_the_sample_step_slider_shows_that_steps_distributions(page, bundle):
    drawn = samples(bundle.model, bundle.tokenizer, shown_input(page), SampleSettings(), 1)[0]
    kept = page.session_state["decode_samples_drawn"][1]
    page.slider(key="decode_sample_step_widget").set_value(3).run()
    assert page.session_state["decode_samples_drawn"][1] is kept  # a step click draws nothing anew
    assert spec(page, "decode_chart_sampling")["layout"]["title"]["text"] == "Sampling distributions · step 3"
    ids = mattering(drawn.steps[2])
    np.testing.assert_allclose(stage_values(page)["model"][: len(ids)], drawn.steps[2].probs[ids].numpy(), rtol=1e-6)
    assert page.query_params["sample_step"] == "3"


@pytest.mark.parametrize("key,name", [(TEMPERATURE, "temperature"), (TOP_K, "top_k"), (TOP_P, "top_p"), (SEED, "seed")])
def test_each_box_offers_only_values_the_library_takes(page, key, name):
    """A box's range is its prop's: both ends sample, and just past them the library refuses (so a link's value
    outside the range, which the prop refuses with a note, would have been an error)."""
    box = page.number_input(key=key).proto
    prop = DECODE.by_name[name]
    assert (box.min, box.max) == (prop.lo, prop.hi)
    for value in (prop.lo, prop.hi):
        SampleSettings(**{name: value})
    with pytest.raises(DecodeError):
        SampleSettings(**{name: 0 if name != "seed" else -1})


@pytest.mark.parametrize("scale", ["log-probability", "logit"])
def test_the_topk_switch_shows_log_probabilities_and_logits_as_the_model_computed_them(page, bundle, scale):
    page.segmented_control(key="decode_scale_widget").set_value(scale).run()
    assert not page.exception and page.query_params["scale"] == scale
    text, t = shown_input(page), player_step(page)
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    ids = [c.id for c in result.steps[t].topk]
    chart = step_spec(page, "decode_chart_topk")
    plural = {"log-probability": "log-probabilities", "logit": "logits"}[scale]
    assert chart["layout"]["title"]["text"].startswith(f"Next-token {plural} · step {t + 1}")
    if scale == "log-probability":
        wanted = result.steps[t].log_probs[ids]
    else:
        wanted = output_logits(bundle.model, bundle.tokenizer, text, result.output_ids)[t, ids]
        np.testing.assert_allclose(torch.log_softmax(output_logits(bundle.model, bundle.tokenizer, text,
                                                                   result.output_ids)[t], -1)[ids],
                                   result.steps[t].log_probs[ids], atol=1e-4)
    np.testing.assert_allclose(array(chart["data"][0]["x"]), wanted.numpy(), rtol=1e-5, atol=1e-6)
    assert len(set(chart["data"][0]["text"])) == len(ids)  # the runners-up are told apart
    page.segmented_control(key="decode_scale_widget").set_value("probability").run()
    assert "scale" not in page.query_params


def test_a_link_restores_the_scale_and_sampling_settings(clean_caches, bundle):
    query = {"v": "1", "input": "hello", "scale": "log-probability", "temperature": "3", "top_k": "4",
             "top_p": "0.9", "seed": "7", "sample_step": "2"}
    at = open_link(PAGE, query)
    assert not at.exception and not at.warning and not errors(at)
    assert [n.value for n in at.number_input] == [3.0, 4, 0.9, 7]
    assert at.segmented_control(key="decode_scale_widget").value == "log-probability"
    assert sample_boxes(at) == expected_boxes(bundle, "hello", SampleSettings(3.0, 4, 0.9, 7))
    assert spec(at, "decode_chart_sampling")["layout"]["title"]["text"].endswith("step 2")
    assert dict(at.query_params) == query


@pytest.mark.parametrize("query", [{"temperature": "-1"}, {"temperature": "nan"}, {"top_p": "1.5"},
                                   {"top_k": "-2"}, {"seed": "-1"}, {"scale": "odds"}, {"sample_step": "999"},
                                   {"temperature": "0"}, {"temperature": "inf"}, {"top_k": "0"}, {"top_p": "0"}])
def test_a_hostile_sampling_link_gives_a_note_and_the_default(clean_caches, query):
    at = open_link(PAGE, {"v": "1", **query})
    assert not at.exception, [e.value for e in at.exception]
    assert any("could not be followed" in w.value for w in at.warning), [w.value for w in at.warning]
    assert [n.value for n in at.number_input] == [1.0, None, 1.0, 0] and not errors(at)
    assert not set(query) & set(at.query_params)  # the address holds the default view
