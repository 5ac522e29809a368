"""The shipped models that differ only in their position scheme (assets/build_position_zoo.py): they load, differ
in nothing but `positional`, meet their bar inside the trained lengths on fresh inputs, stay out of the model
list, and the "Where it fails" page shows their numbers by input length as transformer.analysis.lengths computes
them."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.plotly_specs import array, specs
from helpers.repo import ROOT, open_link

from transformer.analysis.evaluation import evaluate_bundle
from transformer.analysis.lengths import evaluate_lengths
from transformer.charts.errors import scheme_lengths
from transformer.store.checkpoints import load_bundle
from transformer.store.headers import read_info
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer

FOLDER = ROOT / "assets" / "checkpoints" / "positions"
SCHEMES = ("alibi", "learned", "rope", "sinusoidal")
TRAINED, MAX_LEN, BAR = (3, 10), 26, 0.99
PAGE, TITLE = "pages/explore/errors.py", "Held-out reverse by input length, one model per position scheme"
pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason="run assets/build_position_zoo.py")


@pytest.fixture(scope="module")
def bundles():
    return {scheme: load_bundle(FOLDER / f"{scheme}.safetensors") for scheme in SCHEMES}


def test_four_small_checkpoints_differ_only_in_their_position_scheme():
    assert sorted(p.stem for p in FOLDER.glob("*.safetensors")) == list(SCHEMES)
    infos = {scheme: read_info(FOLDER / f"{scheme}.safetensors") for scheme in SCHEMES}
    for scheme, info in infos.items():
        assert info.error is None and info.path.stat().st_size < 1024 * 1024
        assert info.config["positional"] == scheme and info.config["max_len"] == MAX_LEN
        assert info.task == "reverse" and info.card["task_params"] == {"min_len": TRAINED[0], "max_len": TRAINED[1]}
    others = [({k: v for k, v in i.config.items() if k != "positional"}, i.card["train"], i.card["steps"])
              for i in infos.values()]
    assert all(other == others[0] for other in others)
    assert not {p.stem for p in FOLDER.parent.glob("*.safetensors")} & set(SCHEMES)  # not in the model list


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_meets_its_bar_inside_the_trained_lengths_on_fresh_inputs(bundles, scheme):
    result = evaluate_bundle(bundles[scheme], 500, 4242)
    assert result["samples"] == 500 and result["exact_match"] >= BAR, result


def test_a_trainer_gives_the_model_more_positions_than_the_task_needs_and_refuses_fewer():
    train = TrainConfig(task="reverse", task_params={"min_len": 3, "max_len": 10}, steps=1)
    assert Trainer(train).model.config.max_len == 12  # 10 letters and <s> / </s>
    assert Trainer(train, max_len=30).model.config.max_len == 30
    with pytest.raises(ValueError, match="needs 12 positions"):
        Trainer(train, max_len=11)


def test_the_chart_shades_the_trained_lengths_in_both_panels_and_refuses_a_short_curve():
    curves = {"rope": {"exact_match": [1, 0.5, 0], "token_accuracy": [1, 0.9, 0.8]}}
    fig = scheme_lengths([3, 4, 5], curves, (3, 4), "t")
    assert [(s.xref, s.x0, s.x1) for s in fig.layout.shapes] == [("x", 2.5, 4.5), ("x2", 2.5, 4.5)]
    assert [(t.xaxis, t.name, t.showlegend) for t in fig.data] == [("x", "rope", True), ("x2", "rope", False)]
    with pytest.raises(ValueError, match="2 values for 3 lengths"):
        scheme_lengths([3, 4, 5], {"rope": {"exact_match": [1, 0.5], "token_accuracy": [1, 1, 1]}}, (3, 4), "t")


def test_the_page_shows_each_scheme_by_length_as_the_library_computes_it(app, bundles):
    at = app(PAGE)
    assert TITLE not in [s["layout"]["title"]["text"] for s in specs(at)]  # off until asked: it evaluates 4 models
    at.number_input(key="errors_per_length_widget").set_value(20).run()
    at.toggle(key="errors_schemes_widget").set_value(True).run()
    assert not at.exception and at.query_params["schemes"] == "1"
    chart = next(s for s in specs(at) if s["layout"]["title"]["text"] == TITLE)
    assert [(s["x0"], s["x1"]) for s in chart["layout"]["shapes"]] == [(2.5, 10.5)] * 2
    lines = {(t["name"], t["xaxis"]): t for t in chart["data"]}
    caption = next(c.value for c in at.caption if "held-out inputs per length" in c.value)
    for scheme, bundle in bundles.items():
        want = evaluate_lengths(bundle, TRAINED[0], MAX_LEN - 1, 20, 1)["lengths"]
        for axis, metric in (("x", "exact_match"), ("x2", "token_accuracy")):
            line = lines[(scheme, axis)]
            assert array(line["x"]).tolist() == list(range(TRAINED[0], MAX_LEN))
            assert np.allclose(array(line["y"]), [r[metric] for r in want])
        reach = TRAINED[1]
        while reach + 1 < MAX_LEN and want[reach + 1 - TRAINED[0]]["exact_match"] >= 0.9:
            reach += 1
        inside = min(r["exact_match"] for r in want if r["trained"])
        assert f"**{scheme}** at least {inside:.1%} inside, holds ≥ 90% to length {reach}" in caption
    assert at.get("download_button")


def test_a_scheme_made_active_joins_the_list_and_a_link_finds_it(app, bundles):
    at = app(PAGE)
    at.number_input(key="errors_per_length_widget").set_value(10).run()
    at.toggle(key="errors_schemes_widget").set_value(True).run()
    picker = "active_model_widget"
    assert "positions:rope" not in at.selectbox(key=picker).options
    at.button(key="errors_open_rope").click().run()
    assert not at.exception and at.selectbox(key=picker).value == "positions:rope"
    assert at.query_params["model"] == "positions:rope"
    by_length = next(s for s in specs(at) if s["layout"]["title"]["text"].startswith("Held-out exact match and"))
    want = evaluate_lengths(bundles["rope"], 3, 18, 10, 1)["lengths"]  # trained 3-10, and 8 past by default
    assert np.allclose(array(by_length["data"][0]["y"]), [r["exact_match"] for r in want])
    for page in ("pages/models/checkpoints.py", "pages/explore/decode.py"):  # every page takes it
        at.switch_page(page).run()
        assert not at.exception and at.selectbox(key=picker).value == "positions:rope"
    linked = open_link(PAGE, {"v": "1", "model": "positions:alibi"})
    assert not linked.exception and not linked.warning and linked.selectbox(key=picker).value == "positions:alibi"
    refused = open_link(PAGE, {"v": "1", "model": "positions:../reverse"})
    assert not refused.exception and refused.selectbox(key=picker).value == "shipped:reverse"
    assert "positions:../reverse" not in refused.selectbox(key=picker).options
