"""The shipped model zoo: every task has a pretrained checkpoint that loads safely, is small, carries its
model card, and meets its held-out exact-match bar on freshly generated inputs."""

from __future__ import annotations

import sys

import pytest
from helpers.repo import ROOT

from transformer.analysis.evaluation import evaluate_bundle
from transformer.network.decoding import beam_search, greedy_decode
from transformer.store.checkpoints import load_bundle
from transformer.store.headers import read_info
from transformer.tasks import TASKS
from transformer.training.presets import PRESETS

ZOO = ROOT / "assets" / "checkpoints"
BARS = {task: row.target for task, row in PRESETS.items()}  # each task's pass mark, from its row
SAMPLES = 300  # a modest sample keeps CI fast; a fixed seed the trainer never scored itself on
SEED = 4242


DEMOS = {"reverse-early"}  # assets/build_beam_demo.py: under-trained on purpose, no bar


def test_every_task_has_a_bar_a_zoo_recipe_and_a_checkpoint():
    assert set(BARS) == set(TASKS) and all(0 < bar <= 1 for bar in BARS.values())
    assert all(PRESETS[task].zoo for task in TASKS)
    assert {p.stem for p in ZOO.glob("*.safetensors")} == set(TASKS) | DEMOS


def test_the_zoo_script_builds_each_task_from_its_row(monkeypatch):
    """assets/build_zoo.py runs the CLI with the row's recipe (no second copy of it), and refuses unknown tasks."""
    sys.path.insert(0, str(ROOT / "assets"))
    import build_zoo

    calls = []
    monkeypatch.setattr(build_zoo, "main", lambda argv: calls.append(argv) or 0)
    assert build_zoo.run(["sort"]) == 0
    assert calls == [["train", "--task", "sort", *PRESETS["sort"].zoo, "--name", "sort", "--out",
                      str(ZOO / "sort.safetensors"), "--force"]]
    assert build_zoo.run(["nope"]) == 2 and len(calls) == 1


def test_the_beam_demo_is_labelled_under_trained_and_beam_search_matters_on_its_examples():
    bundle = load_bundle(ZOO / "reverse-early.safetensors")
    card = bundle.card
    assert card["under_trained"] is True and "under-trained" in bundle.name and card["exact_match"] < 0.9
    examples = bundle.examples()
    assert examples == card["examples"] and len(examples) == 4
    outcomes = []
    for text in examples:
        answer = bundle.task.answer(text)
        greedy = greedy_decode(bundle.model, bundle.tokenizer, text).output_text
        beam = beam_search(bundle.model, bundle.tokenizer, text, beam=4).text
        outcomes.append((greedy == answer, beam == answer))
    assert outcomes[:3] == [(False, True)] * 3  # beam search right where greedy is wrong
    assert outcomes[3] == (True, True)  # and one where it changes nothing


@pytest.mark.parametrize("task", sorted(BARS))
def test_checkpoint_is_small_carries_its_card_and_meets_its_bar(task):
    path = ZOO / f"{task}.safetensors"
    assert path.stat().st_size < 5 * 1024 * 1024
    info = read_info(path)
    assert info.error is None and info.task == task
    card = info.card
    assert card["steps"] > 0 and card["seconds"] > 0 and card["exact_match"] >= BARS[task]
    assert card["parameters"] == info.parameters  # counted from the tensor shapes in the header

    bundle = load_bundle(path)
    assert bundle.task.name == task
    result = evaluate_bundle(bundle, SAMPLES, SEED)
    assert result["samples"] == SAMPLES
    assert result["exact_match"] >= BARS[task], result
