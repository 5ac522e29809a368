"""Compare page (AppTest): every pair of model sources (shipped, trained, uploaded, two kept snapshots of one
run) on one input; outputs, attention, differences, held-out scores and steps against an independent
recomputation; mismatched shapes give a note; the URL round trip; hostile links give a note."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import plotly_specs
from helpers.repo import ROOT, needs_reverse, open_link
from helpers.tiny_runs import stop, tiny_run, train_more
from streamlit.testing.v1 import AppTest

from transformer.analysis.evaluation import evaluate_pairs
from transformer.network.decoding import greedy_decode
from transformer.store.checkpoints import load_bundle
from ui import model_registry as registry
from ui import runs
from ui.markdown import plain
from ui.tables.compare import COMPARE

PAGE = "pages/explore/compare.py"
VIEW = COMPARE.view()
SHIPPED = ROOT / "assets" / "checkpoints"

pytestmark = needs_reverse


def opened(query: dict[str, str], models: dict[str, tuple[str, object]] | None = None):
    """The compare page opened by a link with `query`, in a session that already holds `models`
    ({key: (origin, bundle)}, as trained or uploaded ones are held)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if models:
        at.session_state[registry.SESSION_MODELS] = dict(models)
    at.switch_page(PAGE)
    for name, value in query.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def head_z(at, side: str) -> np.ndarray:
    """The weights of model `side`'s panel ("A" or "B") of the side-by-side heads."""
    traces = plotly_specs.spec(at, "compare_pair")["data"]
    index = next(i for i, t in enumerate(traces) if t.get("name", "").startswith(f"{side}: "))
    return plotly_specs.z(at, "compare_pair", index)


def shown_outputs(at) -> list[str]:
    return [plain(m.value) for m in at.markdown if " wrote " in plain(m.value)]


def notes(at) -> str:
    """The notes about the link the page was opened with."""
    return " ".join(plain(w.value) for w in at.warning if "could not be followed" in plain(w.value))


def expect_difference(at, a: np.ndarray, b: np.ndarray) -> None:
    """A − B shown where the shapes match, else the note saying they do not."""
    if a.shape == b.shape:
        np.testing.assert_allclose(plotly_specs.z(at, "fig-compare_diff"), a - b, atol=1e-6)
    else:
        assert "No difference map: the heatmaps have different shapes" in infos(at)
        assert not plotly_specs.shown(at, "fig-compare_diff")


def infos(at) -> str:
    return " ".join(plain(i.value) for i in at.info)


def facts(at):
    return next(d.value for d in at.dataframe if "Exact match (fresh inputs)" in d.value.index)


def independent_cross(bundle, text: str, layer: int, head: int) -> np.ndarray:
    return greedy_decode(bundle.model, bundle.tokenizer, text).cross[layer, head].numpy()


def fresh_exact_match(bundle, samples: int, seed: int) -> float:
    return evaluate_pairs(bundle.model, bundle.tokenizer, bundle.task.pairs(samples, seed, "heldout"))["exact_match"]


@pytest.fixture(scope="module")
def shipped():
    return {name: load_bundle(SHIPPED / f"{name}.safetensors") for name in ("reverse", "copy", "sort")}


def test_two_shipped_models_outputs_heads_difference_and_scores_match_a_recomputation(clean_caches, shipped):
    rev, cop = shipped["reverse"], shipped["copy"]
    text = "abcdefg"
    at = opened({"a": "reverse", "b": "copy", "input": text, "layer": "2", "head": "3", "samples": "40", "seed": "5"})
    outs = shown_outputs(at)
    want_a, want_b = (greedy_decode(b.model, b.tokenizer, text).output_text for b in (rev, cop))
    assert want_a in outs[0] and "right" in outs[0] and want_b in outs[1] and "right" in outs[1]
    a = independent_cross(rev, text, 1, 2)
    b = independent_cross(cop, text, 1, 2)
    np.testing.assert_allclose(head_z(at, "A"), a, atol=1e-6)
    np.testing.assert_allclose(head_z(at, "B"), b, atol=1e-6)
    np.testing.assert_allclose(plotly_specs.z(at, "fig-compare_diff"), a - b, atol=1e-6)
    assert "layer 2 · head 3" in plotly_specs.title(at, "fig-compare_diff")
    table = facts(at)
    assert list(table.loc["Exact match (fresh inputs)"]) == [
        f"{fresh_exact_match(rev, 40, 5):.1%}", f"{fresh_exact_match(cop, 40, 5):.1%}"]
    assert list(table.loc["Parameters"]) == [f"{rev.model.num_parameters():,}", f"{cop.model.num_parameters():,}"]
    assert list(table.loc["Training steps"]) == [f"{rev.card['steps']:,}", f"{cop.card['steps']:,}"]
    diff = next(d.value for d in at.dataframe if "Setting" in d.value.columns)
    differing = set(diff.loc[diff["Differs"], "Setting"])
    assert "task" in differing and "model.d_model" not in differing  # both 2+2 x 4 heads, d_model 64
    assert any("`train.steps` is a run's step budget" in c.value for c in at.caption)  # what the names mean
    assert at.get("download_button")  # every chart's numbers, the table and the settings as CSV


def test_shipped_against_a_trained_model_of_another_shape_notes_what_cannot_be_compared(clean_caches, shipped):
    run = tiny_run(1, steps=4)
    try:
        small = run.bundle("small")
    finally:
        stop(run)
    key = "trained:0a1b2c3d"
    text = "abcdef"
    at = opened({"a": "reverse", "b": key, "input": text, "kind": "cross", "layer": "2"},
                {key: ("trained", small)})
    assert not notes(at)
    assert "B: small has no layer 2, head 4 of this kind: it has 1 × 2 (layers × heads)." in infos(at)
    assert "No difference map" in infos(at)
    assert "no such head" in str(plotly_specs.spec(at, "compare_pair")["layout"]["annotations"])
    assert list(facts(at).loc["Shape"]) == ["2+2 × 4 heads, d 64", "1+1 × 2 heads, d 16"]
    # encoder self-attention, layer 1, head 1: both models read the same source tokens, so it is compared
    at.segmented_control(key=VIEW.widget_key("kind")).set_value("encoder_self").run()
    at.selectbox(key=VIEW.widget_key("layer")).set_value(0).run()
    at.selectbox(key=VIEW.widget_key("head")).set_value(0).run()
    assert not at.exception
    a = greedy_decode(shipped["reverse"].model, shipped["reverse"].tokenizer, text).encoder_self[0, 0].numpy()
    b = greedy_decode(small.model, small.tokenizer, text).encoder_self[0, 0].numpy()
    np.testing.assert_allclose(plotly_specs.z(at, "fig-compare_diff"), a - b, atol=1e-6)
    at.segmented_control(key=VIEW.widget_key("kind")).set_value("cross").run()  # back to A's best head
    at.selectbox(key=VIEW.widget_key("layer")).set_value(0).run()
    at.selectbox(key=VIEW.widget_key("head")).set_value(0).run()
    a = independent_cross(shipped["reverse"], text, 0, 0)
    b = independent_cross(small, text, 0, 0)
    np.testing.assert_allclose(head_z(at, "B"), b, atol=1e-6)
    expect_difference(at, a, b)


def test_an_uploaded_model_against_a_shipped_one_and_mismatched_outputs(clean_caches, shipped):
    key = "uploaded:00ff00ff"
    at = opened({"a": key, "b": "sort", "input": "dcba", "samples": "20"}, {key: ("uploaded", shipped["copy"])})
    assert not notes(at)
    assert "copy (uploaded)" in at.selectbox(key=VIEW.widget_key("a")).format_func(key)
    outs = shown_outputs(at)
    assert "abcd" in outs[1] and "dcba" in outs[0]  # sort and copy: same length, so the cross maps compare
    layer, head = greedy_best(shipped["copy"], "dcba")
    a = independent_cross(shipped["copy"], "dcba", layer, head)
    b = independent_cross(shipped["sort"], "dcba", layer, head)
    np.testing.assert_allclose(head_z(at, "A"), a, atol=1e-6)
    np.testing.assert_allclose(plotly_specs.z(at, "fig-compare_diff"), a - b, atol=1e-6)
    assert "same shape but not the same tokens" in " ".join(w.value for w in at.warning)  # dcba against abcd
    assert "different tasks" in " ".join(c.value for c in at.caption)  # each scored on its own task's inputs
    table = facts(at)
    assert list(table.loc["Exact match (fresh inputs)"]) == [
        f"{fresh_exact_match(shipped['copy'], 20, 7):.1%}", f"{fresh_exact_match(shipped['sort'], 20, 7):.1%}"]


def test_an_input_only_one_model_can_read_is_an_error_for_the_other_alone(clean_caches):
    at = opened({"a": "addition", "b": "copy", "input": "12+34"})
    assert not notes(at)
    assert any("B: copy cannot decode this input" in plain(e.value) for e in at.error)
    outs = shown_outputs(at)
    assert len(outs) == 1 and "A: addition" in outs[0] and "`46`" in outs[0]
    assert plotly_specs.spec(at, "compare_topk_A") and not plotly_specs.shown(at, "compare_pair")


def greedy_best(bundle, text: str) -> tuple[int, int]:
    """The head the page shows first: model A's best-aligned cross-attention head."""
    from transformer.analysis.attention_maps import attention_maps

    best = attention_maps(greedy_decode(bundle.model, bundle.tokenizer, text), bundle.task, text)["cross"]
    layer, head, _ = best.best_aligned() or (0, 0, None)
    return layer, head


def test_two_kept_snapshots_of_one_run(clean_caches):
    """Keep weights on the Train page at two steps, then compare them: the steps shown are theirs and the
    difference is the recomputed one."""
    run = tiny_run(1, steps=4)
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.session_state[runs.RUN] = run
        at.switch_page("pages/models/train.py")
        at.run()
        at.button(key="train_keep").click().run()
        train_more(run, 8)
        at.run()
        at.button(key="train_keep").click().run()
        assert not at.exception, [e.value for e in at.exception]
        first, second = at.session_state[runs.KEPT]
        assert sorted(run.kept) == [4, 12] and at.session_state[registry.ACTIVE] == "shipped:reverse"
        at.session_state["compare_a"], at.session_state["compare_b"] = first, second
        at.switch_page(PAGE)
        at.run()
    finally:
        stop(run)
    assert not at.exception, [e.value for e in at.exception]
    bundles = [at.session_state[registry.SESSION_MODELS][k][1] for k in (first, second)]
    assert [b.name for b in bundles] == ["reverse-run1-step4", "reverse-run1-step12"]
    assert list(facts(at).loc["Training steps"]) == ["4", "12"]
    assert list(facts(at).loc["Origin"]) == ["snapshot", "snapshot"]
    text = at.text_input(key=VIEW.widget_key("input")).value
    outs = [greedy_decode(b.model, b.tokenizer, text) for b in bundles]
    layer, head = greedy_best(bundles[0], text)
    expect_difference(at, *(out.cross[layer, head].numpy() for out in outs))
    for shown, out in zip(shown_outputs(at), outs, strict=True):
        assert out.output_text in shown


def test_snapshots_are_bounded_and_the_oldest_goes_first(clean_caches):
    run = tiny_run(1, steps=1)
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.session_state[runs.RUN] = run
        at.switch_page("pages/models/train.py")
        at.run()
        made = []
        for _ in range(runs.MAX_SNAPSHOTS + 2):
            at.button(key="train_keep").click().run()
            made.append(at.session_state[runs.KEPT][-1])
            train_more(run, 1)
            at.run()
    finally:
        stop(run)
    kept = at.session_state[runs.KEPT]
    assert kept == made[2:] and len(kept) == runs.MAX_SNAPSHOTS
    models = at.session_state[registry.SESSION_MODELS]
    assert not set(made[:2]) & set(models) and set(kept) <= set(models)


def test_the_url_holds_the_view_and_brings_it_back(clean_caches):
    at = opened({"a": "reverse", "b": "copy"})
    at.segmented_control(key=VIEW.widget_key("kind")).set_value("decoder_self").run()
    at.selectbox(key=VIEW.widget_key("layer")).set_value(1).run()
    at.selectbox(key=VIEW.widget_key("head")).set_value(2).run()
    at.slider(key=VIEW.widget_key("step")).set_value(3).run()
    at.text_input(key=VIEW.widget_key("input")).set_value("hello").run()
    assert not at.exception
    params = dict(at.query_params)
    assert {k: params[k] for k in ("a", "b", "kind", "input")} == {
        "a": "reverse", "b": "copy", "kind": "decoder_self", "input": "hello"}
    at.selectbox(key=VIEW.widget_key("layer")).set_value(1).run()
    at.selectbox(key=VIEW.widget_key("head")).set_value(2).run()
    at.slider(key=VIEW.widget_key("step")).set_value(3).run()
    params = dict(at.query_params)
    assert (params["layer"], params["head"], params["step"]) == ("2", "3", "3")
    again = open_link(PAGE, params)
    assert not again.exception and not notes(again)
    assert dict(again.query_params) == params
    for key in ("compare_pair", "fig-compare_diff", "compare_topk_A"):
        assert plotly_specs.spec(again, key) == plotly_specs.spec(at, key)


@pytest.mark.parametrize("query, said", [
    ({"a": "nope", "b": "trained:deadbeef"}, ["“nope”", "“trained:deadbeef”"]),
    ({"a": "reverse", "b": "copy", "layer": "9", "head": "64"}, ["layer: neither model", "head: neither model"]),
    ({"a": "reverse", "b": "copy", "kind": "bogus", "step": "x"}, ["kind:", "step:"]),
    ({"a": "reverse", "b": "copy", "input": "ABC!", "zz": "1"}, ["input: reverse cannot decode it", "“zz”"]),
    ({"a": "reverse", "b": "copy", "step": "999"}, ["step: the longer decode has"]),
    ({"a": "reverse", "b": "copy", "samples": "5", "v": "9"}, ["newer version"]),
])
def test_hostile_links_give_a_note_and_the_default_view(clean_caches, query, said):
    at = open_link(PAGE, query)
    assert not at.exception, [e.value for e in at.exception]
    text = notes(at)
    assert "could not be followed" in text and all(s in text for s in said), text
    assert plotly_specs.alone(at)  # the page still shows its charts


def test_a_setting_only_one_model_has_reads_as_a_dash(clean_caches):
    at = opened({"a": "reverse", "b": "dates", "input": "abc"})
    diff = next(d.value for d in at.dataframe if "Setting" in d.value.columns).set_index("Setting")
    assert list(diff.loc["task.min_len", ["A", "B"]]) == ["1", "–"]  # not the JSON of a dash, "\u2013"
    assert diff.loc["task.min_len", "Differs"] and diff.loc["task", "B"] == '"dates"'


def test_a_shipped_model_is_named_as_the_picker_names_it(clean_caches):
    at = opened({"a": "reverse", "b": "reverse-early", "input": "abc"})
    assert list(facts(at).loc["Model"]) == ["reverse", "reverse, under-trained"]  # not "..., under-trained (200 steps)"
