"""The "Where it fails" page (AppTest): its figures against the library, each failing input's link and button
opening the decoding page at the first wrong step, the by-length view with the trained lengths marked, and
lengths the model cannot hold refused with a message."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from helpers.plotly_specs import array, player_choice, player_step, specs
from helpers.repo import REVERSE, needs_reverse, open_link

from transformer.analysis.errors import analyse_errors
from transformer.analysis.lengths import evaluate_lengths
from transformer.network.decoding import greedy_decode
from transformer.network.special_tokens import EOS
from transformer.store.checkpoints import bundle_to_bytes, load_bundle
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer
from ui import uploads

PAGE, DECODE = "pages/explore/errors.py", "pages/explore/decode.py"
pytestmark = needs_reverse


@pytest.fixture(scope="module")
def shipped():
    bundle = load_bundle(REVERSE)
    bundle.model.eval()
    return bundle


def titled(at) -> dict[str, dict]:
    return {s["layout"]["title"]["text"].split(" ·")[0]: s for s in specs(at)}


def decoded_step(at) -> tuple[int, str]:
    """(1-based step the decode page's player shows, the token its "Step N: the model chooses x" sentence names)."""
    return player_step(at) + 1, player_choice(at)


def check_first_wrong_step(bundle, at, source: str, expected: str) -> None:
    """The decoding page shows `source` at the step where the traced greedy decode first leaves the answer."""
    assert not at.exception and at.text_input(key="shared_input_widget").value == source
    answer = bundle.tokenizer.encode(expected) + [EOS]
    output = greedy_decode(bundle.model, bundle.tokenizer, source).output_ids
    first = next(t for t, want in enumerate(answer) if t >= len(output) or output[t] != want)
    step, token = decoded_step(at)
    assert step == first + 1 and token == bundle.tokenizer.piece(output[first]) != bundle.tokenizer.piece(answer[first])


def test_the_page_shows_the_analysis_of_the_library(app, shipped):
    at = app(PAGE)
    want = analyse_errors(shipped.model, shipped.tokenizer, shipped.task, 1000, 1)
    assert [m.value for m in at.metric][:2] == [f"{want.exact_match:.1%}", f"{len(want.failures)}"]
    charts = titled(at)
    assert set(charts) == {"Exact match by input length", "Token accuracy by output position",
                           "Most frequent wrong tokens (expected → produced)",
                           "Held-out exact match and token accuracy by input length"}
    by_length = charts["Exact match by input length"]["data"][0]
    assert array(by_length["x"]).tolist() == want.lengths.tolist()
    assert np.allclose(array(by_length["y"]), want.length_exact / want.length_counts)
    hits = array(charts["Token accuracy by output position"]["data"][0]["y"])
    assert np.allclose(hits, want.position_hits / want.position_counts)
    bars = charts["Most frequent wrong tokens (expected → produced)"]["data"][0]
    assert array(bars["x"]).tolist() == [n for *_, n in want.confusions[:12]]
    table = at.dataframe[0].value
    assert table["input"].tolist() == [f.source for f in want.failures]
    assert table["first wrong step"].tolist() == [f.step + 1 for f in want.failures]
    assert table["there"].tolist() == [f"{f.expected_piece} → {f.produced_piece}" for f in want.failures]
    # six columns fit a 1024-pixel window beside the sidebar (a seventh, length, was hidden behind a scroll)
    assert list(table.columns) == ["input", "decode", "first wrong step", "there", "expected", "produced"]


def test_a_failing_inputs_link_opens_the_decoding_page_at_its_first_wrong_step(app, shipped):
    at = app(PAGE)
    table = at.dataframe[0].value
    assert len(table) > 0
    for row in (0, len(table) - 1):
        link = urlsplit(table["decode"][row])
        assert link.path == "decode"
        linked = open_link(DECODE, dict(parse_qsl(link.query)))
        check_first_wrong_step(shipped, linked, table["input"][row], table["expected"][row])


def test_the_open_button_switches_to_the_decoding_page_at_the_first_wrong_step(app, shipped):
    at = app(PAGE)
    table = at.dataframe[0].value
    at.toggle(key="presenter_widget").set_value(True).run()  # presenter mode stays on across the switch
    at.selectbox(key="errors_pick").set_value(1).run()
    at.button(key="errors_open").click().run()
    check_first_wrong_step(shipped, at, table["input"][1], table["expected"][1])
    assert dict(at.query_params) == {"v": "1", "input": table["input"][1],
                                     "step": str(table["first wrong step"][1]), "presenter": "1"}
    assert at.toggle(key="presenter_widget").value


def test_the_by_length_view_marks_the_trained_lengths_and_refuses_what_the_model_cannot_hold(app, shipped):
    at = app(PAGE)
    chart = titled(at)["Held-out exact match and token accuracy by input length"]
    band = chart["layout"]["shapes"][0]
    assert (band["x0"], band["x1"]) == (0.5, 16.5)  # trained on 1..16
    want = evaluate_lengths(shipped, 1, 17, 100, 1)["lengths"]  # by default: up to the longest it can read
    exact, accuracy = chart["data"]
    assert array(exact["x"]).tolist() == list(range(1, 18))
    assert np.allclose(array(exact["y"]), [r["exact_match"] for r in want])
    assert np.allclose(array(accuracy["y"]), [r["token_accuracy"] for r in want])
    past = [c.value for c in at.caption if c.value.startswith("Past the trained lengths")]
    caption = (f"Past the trained lengths: exact match {want[-1]['exact_match']:.1%} at length 17, the one length "
               "outside the shaded band, on 100 inputs.")
    assert past == [caption]  # not "the lowest" of one length
    at.number_input(key="errors_len_to_widget").set_value(20).run()
    assert not at.exception
    assert "inputs of length 18 need 19 positions" in at.error[0].value and "at most 17 tokens" in at.error[0].value
    assert at.query_params["len_to"] == "20"


def test_a_link_sets_the_inputs_and_a_task_without_lengths_says_so(shipped):
    at = open_link(PAGE, {"v": "1", "samples": "200", "seed": "3", "len_from": "15", "len_to": "17"})
    assert not at.exception and not at.warning
    want = analyse_errors(shipped.model, shipped.tokenizer, shipped.task, 200, 3)
    assert at.metric[1].value == f"{len(want.failures)}" and at.metric[1].label == "Failing inputs (of 200)"
    exact = titled(at)["Held-out exact match and token accuracy by input length"]["data"][0]
    assert array(exact["x"]).tolist() == [15, 16, 17]
    dates = open_link(PAGE, {"v": "1", "model": "dates", "samples": "100"})
    assert not dates.exception
    assert "the dates task has no input-length parameter" in dates.info[0].value.replace("\\", "")
    assert "Exact match by input length" in titled(dates)


def test_an_uploaded_model_of_your_own_data_is_analysed_on_the_held_out_pairs_it_stores(app):
    data = (REVERSE.parents[2] / "assets" / "data" / "roman_numerals.tsv").read_text(encoding="utf-8")
    trainer = Trainer(TrainConfig(task="custom", task_params={"data": data}, steps=2))
    trainer.step()
    at = app("pages/models/checkpoints.py")
    at.file_uploader(key=uploads.FILE).upload("roman.safetensors", bundle_to_bytes(trainer.bundle("roman"))).run()
    at.switch_page(PAGE).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    held = len(trainer.bundle("roman").task.heldout_pairs)
    assert at.metric[1].label == f"Failing inputs (of {held})"
    assert any(f"only {held} held-out inputs" in c.value for c in at.caption)
    assert "Exact match by input length" in titled(at)
    assert "has no input-length parameter" in at.info[0].value.replace("\\", "")


def test_the_servers_warm_up_leaves_the_default_view_nothing_to_analyse(monkeypatch):
    """ui/warm.py analyses the default model in the page's default view at the server's start: the page's first
    visit finds it (and shows it) instead of decoding 1,000 inputs while the learner waits."""
    from ui import decodes, warm

    decodes.clear()
    warm.warm_errors()
    monkeypatch.setattr(decodes, "analyse_errors", lambda *a: pytest.fail("analysed again"))
    at = open_link(PAGE, {})
    assert not at.exception and at.metric[0].value.endswith("%")
