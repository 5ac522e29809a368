"""Train page, runs that explain themselves (AppTest, issue 27): own data too small for the recipe is named before
Start; a run that learns its few pairs by heart says so, with the gap on its curves and what helps; a preset run
never does; the status reads as a sentence, and a run that ends under its bar says by how much (and, unless it
memorises, what to try)."""

from __future__ import annotations

import random
from pathlib import Path

from helpers.plotly_specs import spec
from helpers.train_page import job_of, key, wait_for

from transformer.training.diagnosis import MIN_LEARNING_PAIRS
from ui.markdown import plain

EXAMPLE = Path(__file__).resolve().parents[2] / "assets" / "data" / "roman_numerals.tsv"
PAIRS = EXAMPLE.read_text().splitlines()[1:]
FEW = "\n".join(random.Random(0).sample(PAIRS, 42))  # the 42: 38 to train on, 4 held out
STEPS = 150


def warnings(at) -> list[str]:
    return [plain(w.value) for w in at.warning]


def note_slot(at):
    """The element after the live view's metrics line: the memorising note's own slot (an empty one where the run
    does not memorise, so that a note that stops holding goes in the poll that says so, not when the poll ends).
    AppTest walks its tree depth first, so the node after a leaf is its next sibling where it has one."""
    shown = list(at.main)
    for here, after in zip(shown, shown[1:]):
        if here.type == "markdown" and here.value.startswith("Training loss **"):
            return after
    raise AssertionError("no metrics line")


def own_data(train_page, data: str):  # noqa: F811 - the fixture
    at = train_page()
    at.selectbox(key=key("task")).set_value("custom").run()
    at.text_area(key=key("custom_data")).input(data).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def finished(at) -> str:
    """Train STEPS steps; the sentence that says how the run ended."""
    at.number_input(key=key("steps")).set_value(STEPS).run()
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: any(m.value.startswith("**Finished:**") for m in a.markdown), timeout=300)
    (ending,) = [m.value for m in at.markdown if m.value.startswith("**Finished:**")]
    return ending


def under_target(at) -> str:
    """What the ending must say of a run that ended under its 99% target: its last evaluation, counted."""
    last = job_of(at).snapshot().history[-1]
    assert last["exact_match"] < 0.99 and last["decoding"] == "greedy"
    right = round(last["exact_match"] * last["samples"])
    return f"At the end {right:,} of {last['samples']:,} held-out inputs came out exactly right: under its 99% target."


def test_too_few_own_pairs_are_named_before_start_and_enough_are_not(train_page):
    at = own_data(train_page, FEW)
    (warning,) = [w for w in warnings(at) if "pairs to train on" in w]
    assert warning.startswith("Your data has 38 pairs to train on: probably too few")
    assert f"given fewer than {MIN_LEARNING_PAIRS} pairs" in warning and "3,600 to 32,000" in warning
    assert not at.button(key="train_start").disabled  # a warning, not a refusal
    at.text_area(key=key("custom_data")).input("\n".join(PAIRS)).run()
    assert not [w for w in warnings(at) if "pairs to train on" in w]


def test_a_tiny_own_data_run_is_called_memorising_with_what_helps(train_page):
    at = own_data(train_page, FEW)
    ending = finished(at)
    assert f"the run completed all {STEPS} of its steps" in ending
    assert under_target(at) in ending and "try more total steps" not in ending  # the note below says what helps
    (note,) = [w for w in warnings(at) if "memorising" in w]
    assert note.startswith("**The model is memorising its training pairs.**")
    slot = note_slot(at)
    assert slot.type == "warning" and plain(slot.value) == note
    assert "your data has 38 to train on" in note and "A smaller model" in note
    curves = {trace["name"]: trace for trace in spec(at, "train_curves")["data"]}
    assert {"training batch", "loss", "training token accuracy", "token accuracy"} <= set(curves)
    assert curves["loss"]["fill"] == "tonexty"  # the held-out loss's gap to the training loss, shaded
    assert curves["loss"]["y"][-1] > curves["training batch"]["y"][-1] + 1  # and it is wide


def test_a_preset_run_under_its_bar_says_what_to_try_and_is_not_called_memorising(train_page):
    at = train_page()  # reverse, its preset, cut to STEPS: short of its bar
    ending = finished(at)
    assert not [w for w in warnings(at) if "memorising" in w]
    assert note_slot(at).type == "empty"  # the note's slot, kept
    assert ending.startswith(f"**Finished:** the run completed all {STEPS} of its steps")
    assert ending.endswith(f"{under_target(at)} To reach it, try more total steps or another seed (training "
                           "settings) and Start again.")
