"""Knocking heads out on the all-heads page: the output, the charts and the URL follow the ablated model, and
head importance matches the library's sweep."""

from __future__ import annotations

import numpy as np
from helpers.attention_page import INPUT_BOX, PAGE, VIEW, big_heatmap, shown_input
from helpers.plotly_specs import array, player_step, specs, step_spec
from helpers.repo import needs_reverse, open_link

from transformer.analysis import ablation as A
from transformer.network.decoding import greedy_decode
from transformer.network.sampling import output_logits
from ui import decodes
from ui import model_registry as registry

pytestmark = needs_reverse
KNOCKED, MODE = VIEW.widget_key("knocked"), VIEW.widget_key("knock_mode")
HEADS = (A.Head("cross", 0, 3), A.Head("encoder_self", 0, 2))


def ablated_decode(bundle, text: str, heads, mode: str = "zero", means=None):
    with A.ablated(bundle.model, heads, mode, means):
        return greedy_decode(bundle.model, bundle.tokenizer, text)


def test_knocked_out_heads_redecode_the_input_and_every_chart_shows_the_ablated_model(app, bundle):
    text = next(s for s, _ in bundle.task.pairs(50, 3, "heldout")  # an input these two heads matter for
                if ablated_decode(bundle, s, HEADS).output_text != greedy_decode(bundle.model, bundle.tokenizer, s)
                .output_text)
    at = app(PAGE)
    at.text_input(key=INPUT_BOX).set_value(text).run()
    at.multiselect(key=KNOCKED).set_value(list(HEADS)).run()
    assert not at.exception
    knocked = ablated_decode(bundle, text, HEADS)
    intact = greedy_decode(bundle.model, bundle.tokenizer, text)
    shown = " ".join(m.value for m in at.markdown)
    assert f"Intact model:** `{intact.output_text}`" in shown and f"knocked out:** `{knocked.output_text}`" in shown
    title, weights = big_heatmap(at)  # the cross head shown (the best aligned) comes from the ablated decode
    layer, head = (int(n) - 1 for n in title.split("layer ")[1].split(" · head "))
    np.testing.assert_allclose(weights, knocked.cross[layer, head].numpy(), atol=1e-5)
    assert dict(at.query_params)["knocked"] == "cross:L1H4,encoder_self:L1H3"
    grid = [s for s in specs(at) if "all 2 layers" in s["layout"]["title"]["text"]]
    assert grid and grid[0]["layout"]["title"]["text"].endswith("knocked out: L1 H4")
    shared = registry.bundle_for("shipped:reverse").model  # every session's model: never hooked
    assert not any(m._forward_pre_hooks for m in shared.modules())


def test_a_knocked_out_head_is_marked_and_its_weights_still_shown(app, bundle):
    at = app(PAGE)
    at.multiselect(key=KNOCKED).set_value([A.Head("cross", 1, 0)]).run()
    at.selectbox(key=VIEW.widget_key("layer", "cross")).set_value(1).run()
    at.selectbox(key=VIEW.widget_key("head", "cross")).set_value(0).run()
    title, weights = big_heatmap(at)
    assert title == "Cross-attention · layer 2 · head 1 · knocked out"
    knocked = ablated_decode(bundle, shown_input(at), [A.Head("cross", 1, 0)])
    np.testing.assert_allclose(weights, knocked.cross[1, 0].numpy(), atol=1e-5)
    assert any("is knocked out" in w.value for w in at.warning)
    intact = greedy_decode(bundle.model, bundle.tokenizer, shown_input(at))
    assert intact.cross.shape == knocked.cross.shape  # the same output length here: the change is drawn
    change = next(s for s in specs(at) if s["layout"]["title"]["text"].endswith("change from the intact model"))
    np.testing.assert_allclose(array(change["data"][0]["z"]), (knocked.cross[1, 0] - intact.cross[1, 0]).numpy(),
                               atol=1e-5)


def test_mean_mode_and_a_link_bring_the_same_ablation_back(clean_caches, bundle):
    at = open_link(PAGE, {"knocked": "cross:L1H4", "knock_mode": "mean"})
    assert not at.exception and at.multiselect(key=KNOCKED).value == [A.Head("cross", 0, 3)]
    assert at.segmented_control(key=MODE).value == "mean"
    means = A.head_means(bundle.model, bundle.tokenizer, bundle.task.pairs(*decodes.REFERENCE, "heldout"))
    expected = ablated_decode(bundle, shown_input(at), [A.Head("cross", 0, 3)], "mean", means)
    assert f"knocked out:** `{expected.output_text}`" in " ".join(m.value for m in at.markdown)


def test_head_importance_is_the_library_sweep_on_the_same_inputs(app, bundle):
    at = app(PAGE)
    at.number_input(key=VIEW.widget_key("samples")).set_value(100).run()
    at.button(key="attention_measure").click().run()
    assert not at.exception
    expected = A.importance(bundle.model, bundle.tokenizer,
                            bundle.task.pairs(100, decodes.IMPORTANCE_SEED, "heldout"))
    spec = next(s for s in specs(at) if s["layout"]["title"]["text"].startswith("Exact match lost"))
    for panel, kind in zip(spec["data"], ("encoder_self", "decoder_self", "cross")):
        drops = np.array([[r["drop"] for r in expected["heads"] if r["kind"] == kind and r["layer"] == layer]
                          for layer in range(2)])
        np.testing.assert_allclose(array(panel["z"]), drops, atol=1e-6)
    curve = next(s for s in specs(at) if s["layout"]["title"]["text"].startswith("Exact match as heads"))
    np.testing.assert_allclose(array(curve["data"][0]["y"]), [r["exact_match"] for r in expected["removal"]])
    at.run()  # the measurement stays on the page on the next run
    assert any(s["layout"]["title"]["text"].startswith("Exact match lost") for s in specs(at))


DECODE = "pages/explore/decode.py"


def test_the_decode_page_steps_through_the_ablated_model_and_shares_the_knockout(app, bundle):
    text = next(s for s, _ in bundle.task.pairs(50, 3, "heldout")
                if ablated_decode(bundle, s, HEADS).output_text != greedy_decode(bundle.model, bundle.tokenizer, s)
                .output_text)
    at = app(PAGE)
    at.text_input(key=INPUT_BOX).set_value(text).run()
    at.multiselect(key=KNOCKED).set_value(list(HEADS)).run()
    at.switch_page(DECODE).run()  # the knockout is shared, like the input
    assert not at.exception and at.multiselect(key=KNOCKED).value == list(HEADS)
    knocked = ablated_decode(bundle, text, HEADS)
    assert f"knocked out:** `{knocked.output_text}`" in " ".join(m.value for m in at.markdown)
    t = player_step(at)
    top = step_spec(at, "decode_chart_topk")
    np.testing.assert_allclose(array(top["data"][0]["x"]), [c.prob for c in knocked.steps[t].topk], atol=1e-6)
    cross = step_spec(at, "decode_chart_cross")
    layers, heads, keys = knocked.steps[t].cross_attention.shape
    np.testing.assert_allclose(array(cross["data"][0]["z"]),
                               knocked.steps[t].cross_attention.reshape(layers * heads, keys).numpy(), atol=1e-6)
    at.segmented_control(key="decode_scale_widget").set_value("logit").run()
    with A.ablated(bundle.model, HEADS):
        wanted = output_logits(bundle.model, bundle.tokenizer, text, knocked.output_ids)[t, [c.id for c in
                                                                                            knocked.steps[t].topk]]
    top = step_spec(at, "decode_chart_topk")
    assert top["layout"]["title"]["text"].startswith("Next-token logits")
    np.testing.assert_allclose(array(top["data"][0]["x"]), wanted.numpy(), rtol=1e-5, atol=1e-5)
    assert dict(at.query_params)["knocked"] == "cross:L1H4,encoder_self:L1H3"
