"""Train page (AppTest) and its modules (ui/runs.py, ui/run_settings.py, ui/tables/train.py): start/pause/
resume/stop/step, the probe and its snapshots, settings validation, the per-server cap, errors inside training,
using the model, page switches; its view in the URL, a link that restores it (and retrains the same model), and
hostile links."""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlsplit

import numpy as np
import plotly_specs
import pytest
import torch

from ui import runs
from ui.run_settings import MODEL_DEFAULTS_ALL, TRAIN_DEFAULTS, RunSettings, settings_problem, task_defaults
from ui.tables.train import MODEL_FIELDS, PARAM_FIELDS, TRAIN, TRAIN_FIELDS, settings_of, values_of
from transformer import job as job_module
from transformer.charts.training import format_seconds, probe_filename, progress
from transformer.config import BOUNDS, ModelConfig
from transformer.decoding import greedy_decode
from transformer.job import TrainingJob
from transformer.probe import example_input, run_probe
from transformer.tasks import TASKS
from transformer.training import TRAIN_BOUNDS, TrainConfig, Trainer

PAGE = "pages/models/train.py"
_opened: list = []  # the AppTests of this test, whose runs are stopped when it ends


def key(name: str) -> str:
    """The widget key of the Train table's prop `name`."""
    return TRAIN.view().widget_key(name)


@pytest.fixture
def train_page(app):
    """The Train page; every run started by a test is stopped and joined afterwards."""
    _opened.clear()

    def open_page():
        return train_page_from(app(PAGE))

    yield open_page
    for at in _opened:
        if runs.RUN in at.session_state:
            job = at.session_state[runs.RUN].job
            job.stop()
            assert job.join(30)


def train_page_from(at):
    """Register an AppTest opened elsewhere (by a link) so the fixture's cleanup stops its run too."""
    _opened.append(at)
    return at


def job_of(at) -> TrainingJob:
    return at.session_state[runs.RUN].job


def shown_step(at) -> int:
    """The step the progress bar reports."""
    text = at.get("progress")[0].proto.text
    return int(re.match(r"Step ([\d,]+) of", text)[1].replace(",", ""))


def wait_for(at, predicate, timeout: float = 60.0):
    """Rerun the page until predicate(at) holds (run_every never fires under AppTest)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if predicate(at):
            return
        time.sleep(0.3)
    raise AssertionError("timed out waiting for the page")


def state(at) -> str:
    return job_of(at).snapshot().state


def assert_paused(at) -> None:
    """The run the Pause click made already shows the job paused at the step it stays at (pause() waits
    for the step under way, so the page never shows a count the job has since moved past)."""
    assert state(at) == "paused"
    assert shown_step(at) == job_of(at).snapshot().step


def probe_chart(at) -> tuple[str, np.ndarray]:
    """Title and first heatmap's z of the probe's cross-attention chart (the preview's before Start)."""
    key = "train_probe_chart" if runs.RUN in at.session_state else "train_preview_chart"
    return plotly_specs.title(at, key), plotly_specs.z(at, key)


# --------------------------------------------------------------------------------------- page behaviour


def test_defaults_show_the_untrained_probe(train_page):
    at = train_page()
    assert at.title[0].value == "Train live"
    assert at.selectbox(key=key("task")).options == [t.title for t in TASKS.values()]
    assert not at.button(key="train_start").disabled and at.button(key="train_pause").disabled
    text = at.text_input(key=key("probe")).value
    assert text == example_input(TASKS["reverse"]())
    # the preview is the untrained model of the default settings: same seed, same weights as a run's step 0
    bundle = Trainer(TrainConfig(), MODEL_DEFAULTS_ALL).bundle()
    cross = greedy_decode(bundle.model, bundle.tokenizer, text).cross.numpy()
    z = probe_chart(at)[1]
    layers, heads, q, k = cross.shape
    assert z.shape == (layers * (q + 1) - 1, heads * (k + 1) - 1)
    np.testing.assert_allclose(z[:q, :k], cross[0, 0], atol=1e-5)
    np.testing.assert_allclose(z[:q, k + 1 : 2 * k + 1], cross[0, 1], atol=1e-5)


def test_start_pause_resume_stop_then_use_the_model(train_page):
    at = train_page()
    at.button(key="train_start").click().run()
    assert not at.exception
    time.sleep(1.5)
    wait_for(at, lambda a: shown_step(a) > 0)
    assert at.button(key="train_start").disabled and at.selectbox(key=key("task")).disabled  # locked while live

    at.button(key="train_pause").click().run()
    assert_paused(at)
    frozen = shown_step(at)
    time.sleep(1.0)
    at.run()
    assert shown_step(at) == frozen == job_of(at).snapshot().step

    at.button(key="train_resume").click().run()
    wait_for(at, lambda a: shown_step(a) > frozen)

    at.button(key="train_stop").click().run()
    wait_for(at, lambda a: state(a) == "stopped")
    assert job_of(at).join(10)
    at.run()  # the render that saw the job stop may have come just before it did
    assert any("was stopped" in m.value for m in at.markdown)
    stopped_at = job_of(at).snapshot().step

    at.text_input(key=key("name")).input("my reverser").run()
    at.button(key="train_use").click().run()
    assert not at.exception
    picker = at.selectbox(key="active_model_widget")
    assert "my reverser (trained)" in picker.options
    assert picker.value.startswith("trained:")
    assert at.button(key="train_use").disabled  # this step's weights are already in the picker
    assert any(f"{stopped_at:,} steps" in m.value for m in at.sidebar.markdown)
    assert at.get("download_button")


def test_step_n_runs_exactly_n_steps_then_pauses(train_page):
    at = train_page()
    at.number_input(key=key("step_count")).set_value(3)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 3)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 6)
    time.sleep(0.5)
    assert job_of(at).snapshot().step == 6  # and no further
    assert not at.button(key="train_resume").disabled


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_trains_from_the_page(train_page, task):
    """Pick the task (its probe input follows), run a few steps: no error anywhere, and the probe's
    attention is redrawn from the new weights (sentencepiece pieces for numbers)."""
    at = train_page()
    at.selectbox(key=key("task")).set_value(task).run()
    assert not at.exception and not at.error
    at.number_input(key=key("step_count")).set_value(2)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 2)
    assert not at.exception and not at.error
    assert job_of(at).bundle().task.name == task
    title, z = probe_chart(at)
    assert "training step 2" in title  # paused: the probe is redrawn from the weights it stopped at
    weights = z[np.isfinite(z)]
    assert weights.size and weights.min() >= 0 and weights.max() <= 1


@pytest.mark.parametrize("changes, message", [
    ({"n_heads": 3}, "divisible"),
    ({"min_len": 20}, "min_len <= max_len"),
])
def test_invalid_settings_show_a_message_and_block_start(train_page, changes, message):
    at = train_page()
    for name, value in changes.items():
        at.number_input(key=key(name)).set_value(value)
    at.run()
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert at.button(key="train_start").disabled
    assert runs.RUN not in at.session_state


def test_server_cap_gives_a_clear_message(train_page, monkeypatch):
    monkeypatch.setattr(job_module, "MAX_CONCURRENT_JOBS", 0)
    at = train_page()
    at.button(key="train_start").click().run()
    assert any("already running" in e.value for e in at.error), [e.value for e in at.error]
    assert runs.RUN not in at.session_state


def test_an_error_in_training_is_shown_and_the_model_kept(train_page, monkeypatch):
    original = Trainer.step

    def failing(self):
        if self.step_count == 4:
            raise RuntimeError("simulated failure")
        return original(self)

    monkeypatch.setattr(Trainer, "step", failing)
    at = train_page()
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: state(a) == "error")
    assert any("simulated failure" in e.value and "step 4" in e.value for e in at.error)
    at.button(key="train_use").click().run()
    assert any(o.endswith("(trained)") for o in at.selectbox(key="active_model_widget").options)


def test_probe_snapshots_follow_training_then_scrub_when_paused(train_page):
    at = train_page()
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: len(job_of(a).snapshot().probes) >= 2 and a.get("plotly_chart"))
    slider = at.select_slider(key=key("snapshot"))
    assert slider.disabled and at.toggle(key=key("follow")).value  # following: the newest snapshot
    assert str(slider.value) == slider.options[-1] and f"training step {slider.value:,}" in probe_chart(at)[0]

    at.toggle(key=key("follow")).set_value(False).run()
    assert not at.select_slider(key=key("snapshot")).disabled
    at.button(key="train_pause").click().run()
    assert_paused(at)
    snapshot = job_of(at).snapshot()
    steps = [step for step, _ in snapshot.probes]
    if steps[-1] < snapshot.step:
        steps.append(snapshot.step)  # paused: the probe catches up with the weights it stopped at
    assert at.select_slider(key=key("snapshot")).options == [str(s) for s in steps]
    assert not at.select_slider(key=key("snapshot")).disabled  # paused: scrub freely

    at.select_slider(key=key("snapshot")).set_value(0).run()
    assert "training step 0" in probe_chart(at)[0]
    at.selectbox(key=key("head")).set_value(2).run()
    title, z = probe_chart(at)
    assert "head 2" in title and "training step 0" in title
    step0 = job_of(at).snapshot().probes[0][1]
    np.testing.assert_allclose(z[: step0.cross.shape[2]], step0.cross[0, 1], atol=1e-5)


def test_pausing_while_following_shows_the_probe_at_the_paused_step(train_page):
    at = train_page()
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: job_of(a).snapshot().step > runs.PROBE_EVERY + 3)
    at.button(key="train_pause").click().run()
    assert_paused(at)
    step = job_of(at).snapshot().step
    assert f"training step {step:,}" in probe_chart(at)[0]
    assert at.select_slider(key=key("snapshot")).value == step


def test_a_run_that_finishes_while_followed_shows_its_final_probe(train_page):
    at = train_page()
    at.number_input(key=key("steps")).set_value(runs.PROBE_EVERY + 5).run()
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: state(a) == "finished" and a.get("plotly_chart"))
    assert any("ran all its steps" in m.value for m in at.markdown)
    assert f"training step {runs.PROBE_EVERY + 5}" in probe_chart(at)[0]
    assert at.button(key="train_use") and not at.button(key="train_start").disabled


def test_editing_the_probe_while_paused_decodes_it_now(train_page):
    at = train_page()
    at.number_input(key=key("step_count")).set_value(2)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused")
    at.text_input(key=key("probe")).input("abc").run()
    assert any("`abc`" in m.value for m in at.markdown)
    assert job_of(at).snapshot().probes[-1][1].source != "abc"  # shown from an on-demand probe
    assert at.session_state[runs.RUN].probe.text == "abc"  # and probed from now on

    at.text_input(key=key("probe")).input("ABC!").run()
    assert any("keeps its previous input" in w.value for w in at.warning)
    assert at.session_state[runs.RUN].probe.text == "abc"


def test_switching_pages_keeps_the_run_and_the_settings(train_page):
    at = train_page()
    at.number_input(key=key("batch_size")).set_value(32).run()
    at.switch_page("pages/explore/decode.py").run()
    at.switch_page(PAGE).run()
    assert at.number_input(key=key("batch_size")).value == 32  # kept by the state table
    at.button(key="train_start").click().run()
    job = job_of(at)
    assert job.trainer.config.batch_size == 32
    wait_for(at, lambda a: shown_step(a) > 0)
    at.selectbox(key=key("head")).set_value(1).run()  # a click while training
    at.switch_page("pages/explore/decode.py").run()
    assert not at.exception
    before = job.snapshot().step
    time.sleep(1.0)
    at.switch_page(PAGE).run()
    assert job_of(at) is job and job.snapshot().state == "running"
    wait_for(at, lambda a: shown_step(a) > before)


def test_two_sessions_train_independently(train_page):
    first, second = train_page(), train_page()
    for at in (first, second):
        at.button(key="train_start").click().run()
    assert job_of(first) is not job_of(second)
    wait_for(first, lambda a: shown_step(a) > 0)
    first.button(key="train_pause").click().run()
    assert_paused(first)
    paused_at = job_of(first).snapshot().step
    moving = job_of(second).snapshot().step
    wait_for(second, lambda a: shown_step(a) > moving)
    assert job_of(first).snapshot().step == paused_at and state(second) == "running"


# ------------------------------------------------------------------------------------ state module


def test_widget_bounds_lie_inside_the_library_bounds():
    for name, spec in MODEL_FIELDS.items():
        lo, hi = BOUNDS[name]
        assert lo <= spec.lo <= MODEL_DEFAULTS_ALL[name] <= spec.hi <= hi
    defaults = TRAIN_DEFAULTS.to_dict()
    for name, spec in TRAIN_FIELDS.items():
        lo, hi = TRAIN_BOUNDS[name]
        assert lo <= spec.lo <= defaults[name] <= spec.hi <= hi
    for task in TASKS:
        for name, default in task_defaults(task).items():
            assert PARAM_FIELDS[name].lo <= default <= PARAM_FIELDS[name].hi


def test_settings_problem_names_the_bad_value():
    assert settings_problem(RunSettings()) is None
    bad_heads = RunSettings(model={**MODEL_DEFAULTS_ALL, "n_heads": 5})
    assert "divisible" in settings_problem(bad_heads)
    bad_task = RunSettings(train=TrainConfig(task="addition", task_params={"max_digits": 0}))
    assert "max_digits" in settings_problem(bad_task)


def test_probe_reports_bad_input_instead_of_raising():
    bundle = Trainer(TrainConfig(steps=1)).bundle()
    assert "'A', 'B', 'C'" in run_probe(bundle, "ABC").error
    assert "empty" in run_probe(bundle, "").error
    assert "reads at most" in run_probe(bundle, "a" * 40).error
    good = run_probe(bundle, "abc")
    assert good.error is None and good.cross.shape[2:] == (len(good.output_pieces), 4)  # a b c </s>


def test_keeper_heartbeats_live_sessions_and_stops_gone_ones():
    jobs = [TrainingJob(Trainer(TrainConfig(steps=5))) for _ in range(3)]
    for job, session in zip(jobs, ("here", "gone", "gone")):
        job.start(paused=True)
        runs._register(job, session)
    jobs[2].stop()
    assert jobs[2].join(10)
    now = time.monotonic()
    runs.sweep(lambda session: session == "here", now=now + runs.IDLE_TIMEOUT / 2)
    assert jobs[2] not in runs._registry  # ended jobs are forgotten
    assert [j.snapshot().state for j in jobs[:2]] == ["paused", "paused"]  # too soon to stop "gone"
    runs.sweep(lambda session: session == "here", now=now + runs.IDLE_TIMEOUT + 1)
    assert jobs[1].join(10) and jobs[1].snapshot().finished_reason == "stopped"
    assert jobs[0].snapshot().state == "paused"  # its session is connected
    jobs[0].stop()
    assert jobs[0].join(10)
    runs.sweep(lambda session: True)
    assert not any(j in runs._registry for j in jobs)


def test_figure_cache_rebuilds_only_when_the_key_changes():
    cache, built = runs.FigureCache(), []

    def build():
        built.append(1)
        return object()

    first = cache.get("a", 1, build)
    assert cache.get("a", 1, build) is first and len(built) == 1
    assert cache.get("a", 2, build) is not first and len(built) == 2


def test_model_config_defaults_match_the_trainer():
    trainer = Trainer(TrainConfig(steps=1))
    assert {k: getattr(trainer.model.config, k) for k in MODEL_DEFAULTS_ALL} == MODEL_DEFAULTS_ALL
    assert ModelConfig(src_vocab=4, tgt_vocab=4, **MODEL_DEFAULTS_ALL)


# ------------------------------------------------------------------------------------- the view in the URL


def linked(query: dict[str, str]):
    """An AppTest of the Train page opened by a link with `query` as its parameters (a fresh session)."""
    from streamlit.testing.v1 import AppTest

    from conftest import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(PAGE)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def shown_settings(at) -> dict:
    """Every setting the page's widgets show, by prop name."""
    shown = {name: at.number_input(key=key(name)).value
             for name in (*MODEL_FIELDS, *TRAIN_FIELDS, *task_defaults(at.selectbox(key=key("task")).value))}
    shown.update({name: at.selectbox(key=key(name)).value for name in ("task", "norm", "positional")})
    shown["stop_early"] = at.checkbox(key=key("stop_early")).value
    shown["probe"] = at.text_input(key=key("probe")).value
    return shown


def test_settings_and_view_values_convert_both_ways():
    for task in TASKS:
        params = {name: PARAM_FIELDS[name].hi if "max" in name else PARAM_FIELDS[name].lo
                  for name in task_defaults(task)}
        train = TrainConfig(task=task, task_params=params, lr=0.0012345, seed=7, steps=50, label_smoothing=0.1)
        settings = RunSettings(train, {**MODEL_DEFAULTS_ALL, "n_heads": 2, "norm": "post"}, None)
        assert settings_of(values_of(settings)) == settings
    for prop in TRAIN.props:  # the table's defaults are the library's
        if prop.name in MODEL_DEFAULTS_ALL:
            assert prop.default == MODEL_DEFAULTS_ALL[prop.name]
        elif prop.name in TRAIN_FIELDS:
            assert prop.default == getattr(TRAIN_DEFAULTS, prop.name)


def test_changes_go_into_the_url_and_the_link_restores_them(train_page):
    at = train_page()
    assert not at.query_params  # the default view: a bare /train
    at.selectbox(key=key("task")).set_value("copy").run()
    assert at.text_input(key=key("probe")).value == example_input(TASKS["copy"]())  # the new task's example
    at.number_input(key=key("max_len")).set_value(8).run()
    at.selectbox(key=key("task")).set_value("reverse").run()
    assert at.number_input(key=key("max_len")).value == 16  # a new task starts from its own defaults
    at.number_input(key=key("max_len")).set_value(9)
    at.number_input(key=key("d_model")).set_value(32)
    at.number_input(key=key("n_heads")).set_value(2)
    at.number_input(key=key("lr")).set_value(0.0025)
    at.number_input(key=key("seed")).set_value(3)
    at.selectbox(key=key("positional")).set_value("learned")
    at.checkbox(key=key("stop_early")).uncheck()
    at.text_input(key=key("probe")).input("hello").run()
    assert not at.exception and not at.error
    query = dict(at.query_params)
    assert query == {"v": "1", "max_len": "9", "d_model": "32", "n_heads": "2", "positional": "learned",
                     "lr": "0.0025", "seed": "3", "stop_early": "0", "probe": "hello"}

    again = linked(query)
    assert not again.exception and not again.warning and not again.error
    assert shown_settings(again) == shown_settings(at)
    assert dict(again.query_params) == query
    np.testing.assert_array_equal(probe_chart(again)[1], probe_chart(at)[1])  # the same untrained weights


def test_the_link_of_a_run_retrains_the_same_model(train_page):
    at = train_page()
    at.number_input(key=key("d_model")).set_value(32)
    at.number_input(key=key("n_heads")).set_value(2)
    at.number_input(key=key("seed")).set_value(11)
    at.number_input(key=key("step_count")).set_value(3)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 3)
    at.selectbox(key=key("head")).set_value(2).run()
    assert at.query_params["head"] == "2"
    link = at.get("code")[0].proto.code_text
    assert link.startswith("/train?")
    query = {name: values[0] for name, values in parse_qs(urlsplit(link).query).items()}
    assert query == {"v": "1", "d_model": "32", "n_heads": "2", "seed": "11"}  # the settings, not the head shown
    at.button(key="train_stop").click().run()
    wait_for(at, lambda a: state(a) == "stopped")
    at.number_input(key=key("seed")).set_value(12).run()  # the page's URL follows an edit, the run's link does not
    assert at.query_params["seed"] == "12" and at.get("code")[0].proto.code_text == link

    again = train_page_from(linked(query))
    assert not again.warning
    again.number_input(key=key("step_count")).set_value(3)
    again.button(key="train_step").click().run()
    wait_for(again, lambda a: state(a) == "paused" and shown_step(a) == 3)
    again.selectbox(key=key("head")).set_value(2).run()
    theirs, ours = job_of(again).bundle().model.state_dict(), job_of(at).bundle().model.state_dict()
    assert theirs.keys() == ours.keys() and all(torch.equal(theirs[k], ours[k]) for k in ours)
    assert probe_chart(again)[0] == probe_chart(at)[0]  # "head 2", "training step 3"
    np.testing.assert_array_equal(probe_chart(again)[1], probe_chart(at)[1])


HOSTILE = [  # (query, the URL the page shows after it: the default view, bar what the link could set)
    ({"task": "nope"}, {}), ({"task": "r" * 5000}, {}), ({"n_heads": "3"}, {}), ({"n_heads": "0"}, {}),
    ({"d_model": "nan"}, {}), ({"lr": "nan"}, {}), ({"lr": "inf"}, {}), ({"lr": "-0.01"}, {}), ({"dropout": "0.9"}, {}),
    ({"steps": "99999999999999999999"}, {}), ({"seed": "-1"}, {}), ({"batch_size": "1e3"}, {}),
    ({"min_len": "20"}, {}), ({"task": "addition", "min_len": "3"}, {"task": "addition"}),
    ({"stop_early": "yes"}, {}), ({"norm": "mid"}, {}), ({"positional": "rope"}, {}),
    ({"probe": "ABC!"}, {}), ({"probe": "a" * 121}, {}), ({"probe": "a\x00b"}, {}),
    ({"layer": "2"}, {}), ({"head": "5"}, {}), ({"head": "-1"}, {}), ({"v": "2", "seed": "1"}, {}),
    ({"unknown": "1"}, {}), ({"step_count": "5"}, {}), ({"snapshot": "3"}, {}), ({"model": "copy"}, {}),
]


@pytest.mark.parametrize("query, url", HOSTILE, ids=lambda q: "&".join(f"{k}={v[:10]!r}" for k, v in q.items()))
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, query, url):
    at = linked(query)
    assert not at.exception, [e.value for e in at.exception]
    assert any("could not be followed" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not at.error  # refused values never reach the settings: Start stays possible
    assert at.selectbox(key="active_model_widget").value == "shipped:reverse"
    assert dict(at.query_params) == ({"v": "1", **url} if url else {})
    defaults = {prop.name: prop.default for prop in TRAIN.props}
    task = url.get("task", "reverse")
    expected = {**values_of(settings_of({**defaults, "task": task})), "probe": example_input(TASKS[task]())}
    assert shown_settings(at) == {name: expected[name] for name in shown_settings(at)}
    assert not at.button(key="train_start").disabled and runs.RUN not in at.session_state


def test_live_texts_and_export_names():
    assert format_seconds(42) == "42 s" and format_seconds(185) == "3 min 05 s"
    assert probe_filename("reverse", 250, 0, 2) == "reverse_cross_L1H3_train0250"
    assert probe_filename("reverse", 250, 0, None) == "reverse_cross_L1_train0250"
    job = TrainingJob(Trainer(TrainConfig(steps=4)))
    assert progress(job.snapshot(), 0.99) == (0.0, "Step 0 of 4 · 0 s of training")
