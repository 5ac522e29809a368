"""Train page: per-task presets (transformer.training.presets) as its defaults, the qk-norm and optimizer options
from the page to the worker and through the URL, and the live demo layout (settings folded while a run is live, the
probe's step marked on the curves)."""

from __future__ import annotations

import plotly.graph_objects as go
from helpers import plotly_specs
from helpers.train_page import (
    job_of,
    key,
    linked,
    preset_values,
    shown_settings,
    shown_step,
    state,
    wait_for,
)

from transformer.charts.stats import training_curves
from transformer.charts.training import STEP_MARK, mark_step
from transformer.i18n import using
from transformer.tasks import CustomTask
from transformer.training.config import TRAIN_BOUNDS
from transformer.training.presets import PRESETS
from ui import runs
from ui.run_settings import settings_summary
from ui.tables.train import MUON_FIELDS, PRESET_PROPS, TRAIN, preset_note, setting_text, stop_target

PRESET_NOTE = "Preset for"
FOLDED = "Settings (locked while the run is live)"


def preset_line(at) -> str:
    return next(m.value for m in at.markdown if PRESET_NOTE in m.value)


def test_every_preset_setting_is_a_page_setting_within_its_bounds():
    for task, preset in PRESETS.items():
        values = preset_values(task)
        for name, value in {**preset.model, **preset.train}.items():
            assert name in PRESET_PROPS, f"{task}: the page cannot show the preset's {name}"
            assert values[name] == value and TRAIN.by_name[name].admits(value)
        assert stop_target(task) == preset.target
    assert "Muon learning rate 0.04" in preset_note("addition") and "Batch size 32" in preset_note("reverse")
    assert preset_note("reverse").startswith("Identity layers, small embeddings, Warm-up steps 50, Cosine decay, ")
    assert preset_note(CustomTask.name) == "the library defaults"  # your own data: no preset
    for name, prop in MUON_FIELDS.items():
        lo, hi = TRAIN_BOUNDS[name]
        assert lo <= prop.lo <= prop.default <= prop.hi <= hi


def test_picking_a_task_loads_its_preset_and_reset_returns_to_it(train_page):  # noqa: F811
    at = train_page()
    at.number_input(key=key("seed")).set_value(5).run()
    for task in ("addition", "sort", "reverse", "addition"):
        at.selectbox(key=key("task")).set_value(task).run()
        assert not at.exception and not at.error
        shown = shown_settings(at)
        assert {name: shown[name] for name in PRESET_PROPS} == preset_values(task)
        assert shown["seed"] == 5  # not part of a preset: kept across tasks
        assert dict(at.query_params) == {"v": "1", "seed": "5", **({"task": task} if task != "reverse" else {})}
        assert f"{PRESET_NOTE} " in preset_line(at) and "changed" not in preset_line(at)
        assert at.button(key="train_preset_reset").disabled
    assert "qk-norm on" in preset_line(at) and "Stop once held-out exact match reaches 99%" in at.checkbox[0].label

    steps = PRESETS["addition"].train["steps"] + 100  # not the preset's
    at.number_input(key=key("steps")).set_value(steps)
    at.toggle(key=key("qk_norm")).set_value(False).run()
    assert f"changed: qk-norm off, Total steps {steps:,}" in preset_line(at)
    assert dict(at.query_params) == {"v": "1", "seed": "5", "task": "addition", "qk_norm": "0", "steps": str(steps)}
    at.button(key="train_preset_reset").click().run()
    shown = shown_settings(at)
    assert {name: shown[name] for name in PRESET_PROPS} == preset_values("addition") and shown["seed"] == 5
    assert dict(at.query_params) == {"v": "1", "seed": "5", "task": "addition"}

    at.selectbox(key=key("task")).set_value("dates").run()  # a 95% bar
    assert "reaches 95%" in at.checkbox(key=key("stop_early")).label


def test_the_options_reach_the_worker(train_page):  # noqa: F811
    at = train_page()
    at.selectbox(key=key("task")).set_value("addition").run()
    at.number_input(key=key("muon_lr")).set_value(0.03)
    at.number_input(key=key("step_count")).set_value(2)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 2)
    bundle = job_of(at).bundle()  # built by the worker's Trainer
    config, train = bundle.model.config, bundle.card["train"]
    assert config.qk_norm and config.n_enc_layers == 2 and config.n_dec_layers == 1
    recipe = PRESETS["addition"].train
    assert (train["optimizer"], train["muon_lr"], train["muon_momentum"], train["steps"], train["task"]) == (
        "muon", 0.03, recipe["muon_momentum"], recipe["steps"], "addition")
    assert at.session_state["train_run"].settings.target == PRESETS["addition"].target
    summary = next(m.value for m in at.markdown if m.value.startswith("**Model:**"))  # the live run's settings
    assert "qk-norm" in summary and f"Muon lr 0.03 (momentum {recipe['muon_momentum']:g}) + Adam lr {recipe['lr']:g}" \
        in summary
    assert f"batch {recipe['batch_size']}, up to {recipe['steps']:,} steps" in summary


def test_the_options_round_trip_through_the_url(train_page):  # noqa: F811
    at = train_page()
    assert at.number_input(key=key("muon_lr")).disabled  # Adam: no Muon learning rate or momentum to set
    assert at.number_input(key=key("muon_momentum")).disabled
    at.toggle(key=key("qk_norm")).set_value(True)
    at.selectbox(key=key("optimizer")).set_value("muon").run()
    assert not at.number_input(key=key("muon_momentum")).disabled
    at.number_input(key=key("muon_lr")).set_value(0.05).run()
    at.number_input(key=key("muon_momentum")).set_value(0.85).run()
    query = dict(at.query_params)
    assert query == {"v": "1", "qk_norm": "1", "optimizer": "muon", "muon_lr": "0.05", "muon_momentum": "0.85"}
    again = linked(query)
    assert not again.exception and not again.warning and not again.error
    assert shown_settings(again) == shown_settings(at) and dict(again.query_params) == query

    addition = linked({"task": "addition"})  # a link naming only the task: its preset
    shown = shown_settings(addition)
    assert {name: shown[name] for name in PRESET_PROPS} == preset_values("addition")


def test_a_setting_in_a_sentence_groups_thousands_but_not_in_a_year():
    assert setting_text("steps", 1500) == "Total steps 1,500"
    assert setting_text("min_year", 1950) == "Earliest year 1950"
    with using("zh"):
        assert setting_text("max_year", 2049) == "最晚年份 2049"


def test_mark_step_draws_a_line_at_the_step_on_both_panels():
    history = [{"step": s, "loss": 1 / s, "token_accuracy": s / 100, "exact_match": s / 200} for s in (25, 50, 75)]
    fig = training_curves(history)
    marked = mark_step(fig, 50)
    assert not fig.layout.shapes  # the figure given is left as it was
    assert [(s.xref, s.x0, s.x1, s.line.color) for s in marked.layout.shapes] == [
        ("x", 50, 50, STEP_MARK), ("x2", 50, 50, STEP_MARK)]
    assert marked.layout.annotations[-1].text == "probe: step 50"
    assert isinstance(marked, go.Figure) and len(marked.data) == len(fig.data)


def test_live_settings_fold_away_and_the_scrubbed_step_is_marked_on_the_curves(train_page):  # noqa: F811
    at = train_page()
    assert at.get("latex") and [e.label for e in at.expander] == ["Model shape", "Training settings"]
    at.number_input(key=key("step_count")).set_value(60)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 60)
    assert [(e.label, e.proto.expanded) for e in at.expander] == [(FOLDED, False)]  # inner sections: no expanders
    assert not at.get("latex")  # the explanation gives the screen to the run
    folded, run = at.expander[0], at.session_state[runs.RUN]  # the run's settings, to read, not widgets
    assert [m.value for m in folded.markdown] == [
        "**Task:** Reverse a string (Shortest string 1, Longest string 16)", settings_summary(run.settings)]
    assert not (folded.selectbox or folded.number_input or folded.checkbox or folded.toggle)

    steps = at.select_slider(key=TRAIN.view().widget_key("snapshot")).options
    assert len(steps) >= 3
    for step in (steps[1], steps[-1]):
        at.select_slider(key=TRAIN.view().widget_key("snapshot")).set_value(step).run()
        shapes = plotly_specs.spec(at, "train_curves")["layout"]["shapes"]
        assert [s["x0"] for s in shapes] == [s["x1"] for s in shapes] == [int(step)] * 2
        assert f"training step {int(step):,}" in plotly_specs.title(at, "train_probe_chart")

    at.button(key="train_stop").click().run()
    wait_for(at, lambda a: state(a) == "stopped")
    at.run()
    assert [e.label for e in at.expander] == ["Model shape", "Training settings"]
    assert not at.selectbox(key=key("task")).disabled
