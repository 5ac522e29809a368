"""Every experiment a page suggests, held to what the shipped models really do on the example it names (issue 27:
the home page's "force a wrong token at step 3 and see whether it recovers" read `wrong` on its own example).

The home page's cards (pages/learn/home.py CARDS, the decode card's example in ui/lessons.py), the decode page's
beam-search note (ui/panels/decode_search.py), the masks and positions pages' sections, and the Train page's
preview ("for reverse, an anti-diagonal appears") each say what the model does; each claim is checked here, on the
page where a page shows it."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import numpy as np
from helpers.plotly_specs import alone, spec, z
from helpers.repo import ROOT, needs_reverse, open_link

from transformer.analysis.heads import alignment_score, focus_head
from transformer.network.decoding import beam_search, greedy_decode
from transformer.store.checkpoints import load_bundle
from ui.lessons import FORCE
from ui.markdown import plain

pytestmark = needs_reverse
CHECKPOINTS = ROOT / "assets" / "checkpoints"


def forced_at(bundle, letter: str) -> dict[str, str]:
    """The decode page's link with `letter` forced at the lesson's step (what Force does there)."""
    return {"model": "reverse", "input": FORCE.example, "step": str(FORCE.step),
            "force": f"{FORCE.step}:{bundle.tokenizer.encode(letter)[0]}"}


def test_the_home_cards_decode_link_opens_the_lessons_example_at_its_step(clean_caches, bundle):
    home = open_link("pages/learn/home.py", {})
    card = next(el.proto for el in home.get("page_link") if el.proto.page == "decode")
    assert parse_qs(card.query_string) == {"model": ["reverse"], "input": [FORCE.example], "step": [str(FORCE.step)]}
    lesson = next(c.value for c in home.caption if FORCE.example in c.value)
    assert f"Force `{FORCE.recovers}`" in lesson and f"Force `{FORCE.loses_place}`" in lesson
    at = open_link("pages/explore/decode.py", {k: v[0] for k, v in parse_qs(card.query_string).items()})
    pick = at.selectbox(key=f"decode_force_pick_{FORCE.step - 1}")  # the force panel offers the second choice first
    assert bundle.tokenizer.piece(pick.value) == FORCE.recovers


def test_forcing_the_second_choice_recovers_and_the_next_letter_does_not(clean_caches, bundle):
    answer = bundle.task.answer(FORCE.example)
    for letter, recovers in ((FORCE.recovers, True), (FORCE.loses_place, False)):
        forced = greedy_decode(bundle.model, bundle.tokenizer, FORCE.example,
                               force={FORCE.step - 1: bundle.tokenizer.encode(letter)[0]})
        assert (forced.output_text[FORCE.step:] == answer[FORCE.step:]) is recovers, forced.output_text
        at = open_link("pages/explore/decode.py", forced_at(bundle, letter))
        said = [m.value for m in at.markdown if m.value.startswith(f"After the token you forced at step {FORCE.step}")]
        assert said and said[0].endswith("the model recovered." if recovers else "the model did not recover."), said
    assert answer[FORCE.step] == FORCE.loses_place  # "the letter due one step later"


def test_the_attention_page_opens_on_the_head_that_follows_the_reversal(clean_caches, bundle):
    at = open_link("pages/explore/attention.py", {})
    text = bundle.task.examples()[0]
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    layer, head = focus_head(result.cross.numpy(), bundle.task, text)
    key = next(key for key in alone(at) if key.startswith("attention_big_"))
    np.testing.assert_allclose(z(at, key), result.cross[layer, head].numpy(), atol=1e-5)
    n = len(text)
    assert np.mean([z(at, key)[t, n - 1 - t] for t in range(n)]) > 0.8  # a sharp anti-diagonal


def test_removing_the_causal_mask_changes_predictions(clean_caches):
    at = open_link("pages/concepts/masks.py", {"no_causal": "1"})
    line = next(plain(m.value) for m in at.markdown if m.value.startswith("**Predictions of seq"))
    changed, total = (int(n) for n in re.search(r"(\d+) of (\d+) in the whole batch", line).groups())
    assert 0 < changed < total  # "some of its predictions change"


def test_decoding_without_positions_turns_the_reversal_wrong_and_fades_its_anti_diagonal(clean_caches):
    at = open_link("pages/concepts/positions.py", {"no_positions": "1"})
    lines = [m.value for m in at.markdown]
    assert any(line.startswith("**With positions:**") and "right" in line for line in lines)
    assert any(line.startswith("**Without positions:**") and "wrong" in line for line in lines)
    scores = [int(n) for c in at.caption for n in re.findall(r"should read: \*\*(\d+)%\*\*", c.value)]
    assert len(scores) == 2 and scores[0] > 80 and scores[1] < scores[0] / 2


def test_copy_draws_a_diagonal_and_reverse_an_anti_diagonal(bundle):
    copy = load_bundle(CHECKPOINTS / "copy.safetensors")  # trained with the Train page's preset for copy
    for model, text in ((copy, copy.task.examples()[0]), (bundle, bundle.task.examples()[0])):
        result = greedy_decode(model.model, model.tokenizer, text)
        layer, head = focus_head(result.cross.numpy(), model.task, text)
        alignment = model.task.alignment(text)
        assert alignment_score(result.cross[layer, head].numpy(), alignment[: len(result.steps)]) > 0.8
    assert copy.task.alignment("abc")[:3] == [0, 1, 2] and bundle.task.alignment("abc")[:3] == [2, 1, 0]


def test_beam_search_only_helps_the_under_trained_model(clean_caches, bundle):
    for text in bundle.task.examples():  # "a well-trained model ... greedy and beam search almost always agree"
        assert beam_search(bundle.model, bundle.tokenizer, text, 4).text == \
            greedy_decode(bundle.model, bundle.tokenizer, text).output_text
    early = load_bundle(CHECKPOINTS / "reverse-early.safetensors")
    only_beam = [text for text in early.examples()  # "example inputs include some where only beam search is right"
                 if beam_search(early.model, early.tokenizer, text, 4).text == early.task.answer(text)
                 != greedy_decode(early.model, early.tokenizer, text).output_text]
    assert only_beam
    at = open_link("pages/explore/decode.py", {})
    assert any("try the under-trained reverse model" in c.value for c in at.caption)
    at = open_link("pages/explore/decode.py", {"model": "reverse-early", "input": only_beam[0]})
    assert any(m.value.startswith(":orange-badge") for m in at.markdown)  # the page shows them differ
    assert spec(at, "decode_chart_sampling")  # and the page is whole
