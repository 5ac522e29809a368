"""Train page (AppTest) and its modules (ui/runs.py, ui/run_settings.py, ui/tables/train.py): start/pause/
resume/stop/step, the probe and its snapshots, settings validation, errors inside training and a worker killed
from outside, the server's line of runs (place shown, a full line refused), the keeper, 20 start/stop cycles
without leftovers, the spare worker, using the model, page switches, the device setting; its view in the
URL, a link that restores it (and retrains the same model), and hostile links.

Every run trains in a worker process (a fresh interpreter importing torch: seconds on a loaded machine), so
waits here are generous; the spare worker the page starts when it is shown is what most runs adopt."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import torch
from helpers.jobs import child_pids
from helpers import plotly_specs
from helpers.page_probes import DivergingProbe
from helpers.repo import link_id, needs_reverse
from helpers.train_page import (
    PAGE,
    job_of,
    key,
    linked,
    preset_values,
    probe_chart,
    shown_settings,
    shown_step,
    state,
    train_page_from,
    wait_for,
)

from transformer.charts.training import curves_figure, format_seconds, probe_filename, progress, step_reach
from transformer.network.config import BOUNDS, ModelConfig
from transformer.network.decoding import greedy_decode
from transformer.runs import queue as capacity
from transformer.runs import workers
from transformer.runs.job import Ending, Job, JobSnapshot
from transformer.runs.probe import example_input, run_probe
from transformer.runs.queue import RunQueue
from transformer.runs.thread_job import TrainingJob
from transformer.tasks import TASKS
from transformer.training.config import TRAIN_BOUNDS, TrainConfig
from transformer.training.presets import PRESETS
from transformer.training.trainer import Trainer
from ui import model_registry as registry
from ui import runs
from ui.panels import train_live
from ui.run_settings import MODEL_DEFAULTS_ALL, TRAIN_DEFAULTS, RunSettings, settings_problem, task_defaults
from ui.tables.train import MODEL_FIELDS, PARAM_FIELDS, TRAIN, TRAIN_FIELDS, settings_of, values_of

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the page of a server without CUDA")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def long_run(at) -> None:
    """Settings for a run that is still training when the test acts on it: reverse's preset can reach its bar
    within seconds."""
    at.number_input(key=key("steps")).set_value(20_000)
    at.checkbox(key=key("stop_early")).uncheck().run()


def assert_paused(at) -> None:
    """The run the Pause click made already shows the job paused at the step it stays at (pause() waits
    for the step under way, so the page never shows a count the job has since moved past)."""
    assert state(at) == "paused"
    assert shown_step(at) == job_of(at).snapshot().step


# --------------------------------------------------------------------------------------- page behaviour


def test_defaults_show_the_untrained_probe(train_page):
    at = train_page()
    assert at.title[0].value == "Train live"
    assert at.selectbox(key=key("task")).options == [t.title for t in TASKS.values()] + ["Your own data"]
    assert not at.button(key="train_start").disabled and at.button(key="train_pause").disabled
    text = at.text_input(key=key("probe")).value
    assert text == example_input(TASKS["reverse"]())
    # the preview is the untrained model of the default settings (reverse's preset): the weights of a run's step 0
    bundle = PRESETS["reverse"].trainer().bundle()
    cross = greedy_decode(bundle.model, bundle.tokenizer, text).cross.numpy()
    z = probe_chart(at)[1]
    layers, heads, q, k = cross.shape
    assert z.shape == (layers * (q + 1) - 1, heads * (k + 1) - 1)
    np.testing.assert_allclose(z[:q, :k], cross[0, 0], atol=1e-5)
    np.testing.assert_allclose(z[:q, k + 1 : 2 * k + 1], cross[0, 1], atol=1e-5)


def test_start_pause_resume_stop_then_use_the_model(train_page):
    at = train_page()
    long_run(at)
    at.button(key="train_start").click().run()
    assert not at.exception
    time.sleep(1.5)
    wait_for(at, lambda a: shown_step(a) > 0)
    assert at.button(key="train_start").disabled  # and no settings to change while live: they are lines to read
    assert key("task") not in {box.key for box in at.selectbox} and not at.expander[0].number_input

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
    assert any("you stopped the run" in m.value for m in at.markdown)
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


@pytest.fixture
def server_queue(monkeypatch):
    """`server_queue(limit, max_queued)`: the server's line of runs replaced by a small one of its own."""

    def make(limit: int, max_queued: int) -> RunQueue:
        queue = RunQueue(limit=limit, max_queued=max_queued)
        monkeypatch.setattr(capacity, "_server_queue", queue)
        return queue

    return make


def test_a_full_line_gives_a_clear_message_and_changes_nothing(train_page, server_queue):
    at = train_page()
    at.number_input(key=key("step_count")).set_value(2)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 2)
    at.button(key="train_stop").click().run()
    earlier = job_of(at)
    queue = server_queue(limit=1, max_queued=0)
    queue.acquire("another session's run", lambda: None)  # the one slot is taken, and no one may wait
    at.button(key="train_start").click().run()
    assert not at.exception
    assert any("Cannot start: the server is full" in e.value and "the limit is 1" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert job_of(at) is earlier and state(at) == "stopped"  # the ended run and its model stay
    assert at.button(key="train_use") and queue.running == 1 and queue.waiting == 0


def test_a_run_beyond_the_slots_waits_in_line_and_shows_its_place(train_page, server_queue):
    queue = server_queue(limit=1, max_queued=8)
    others = ["run A", "run B", "run C"]  # other sessions' runs: A trains, B and C wait
    granted = []
    for other in others:
        queue.acquire(other, lambda other=other: granted.append(other))
    at = train_page()
    at.button(key="train_start").click().run()
    assert not at.exception and state(at) == "queued" and job_of(at).position() == 3
    assert job_of(at).pid is None  # no process until its turn: a full line must not hold interpreters
    assert any("2 runs ahead of yours" in m.value for m in at.markdown), [m.value for m in at.markdown]
    assert at.button(key="train_start").disabled and key("task") not in {box.key for box in at.selectbox}
    assert not at.button(key="train_pause").disabled and at.button(key="train_step").disabled
    queue.release("run A")
    at.run()
    assert granted == ["run B"] and any("1 run ahead of yours" in m.value for m in at.markdown)
    queue.release("run B")
    at.run()
    assert granted == ["run B", "run C"] and any("yours is next" in m.value for m in at.markdown)
    queue.release("run C")  # first come, first served: now ours
    wait_for(at, lambda a: state(a) == "running" and shown_step(a) > 0)
    assert job_of(at).position() == 0 and not any("ahead of yours" in m.value for m in at.markdown)
    at.button(key="train_pause").click().run()
    assert_paused(at)
    assert queue.running == 0  # a paused run gives its slot back


def test_pausing_a_queued_run_takes_it_out_of_the_line(train_page, server_queue):
    queue = server_queue(limit=1, max_queued=8)
    queue.acquire("another session's run", lambda: None)
    at = train_page()
    at.button(key="train_start").click().run()
    assert state(at) == "queued" and any("yours is next" in m.value for m in at.markdown)
    at.button(key="train_pause").click().run()
    assert state(at) == "paused" and queue.waiting == 0 and job_of(at).position() is None
    at.button(key="train_resume").click().run()
    assert state(at) == "queued" and job_of(at).position() == 1  # back at the end of the line
    at.button(key="train_stop").click().run()
    assert state(at) == "stopped" and queue.waiting == 0


def test_an_error_in_training_is_shown_and_the_model_kept(train_page, monkeypatch):
    monkeypatch.setattr(runs, "Probe", DivergingProbe)  # fails in the worker at step 4
    monkeypatch.setattr(runs, "PROBE_EVERY", 2)
    at = train_page()
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: bool(a.error))  # the page's own render (the job's state may be ahead of it)
    assert state(at) == "error"
    assert any("simulated divergence" in e.value and "step 4" in e.value and "kept" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert job_of(at).bundle().card["steps"] == 4  # the worker sent the weights it stopped at
    at.button(key="train_use").click().run()
    assert any(o.endswith("(trained)") for o in at.selectbox(key="active_model_widget").options)


def test_a_worker_killed_from_outside_is_reported_and_its_model_kept(train_page):
    at = train_page()
    at.number_input(key=key("steps")).set_value(20_000).run()  # still training when it is killed
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: shown_step(a) > 20)
    job = job_of(at)
    deadline = time.monotonic() + 60  # until the worker has sent weights past step 20 and a history row
    while (job._weights is None or job._weights[0]["steps"] <= 20 or not job.snapshot().history) \
            and time.monotonic() < deadline:  # weights come every 2 s idle, far later when loaded (a sleep flaked)
        time.sleep(0.1)
    before = job.snapshot().step
    os.kill(job.pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(at, lambda a: bool(a.error), timeout=10)  # the page's own render, not the job's state
    assert time.monotonic() - killed < 5 and state(at) == "error"
    message = " ".join(e.value for e in at.error)
    assert "killed (SIGKILL" in message and "kept" in message, message
    last = job.snapshot()
    assert last.step >= before and last.history  # the last snapshot stays readable
    bundle = job.bundle()
    # weights at most worker.WEIGHTS_EVERY seconds old; the copy is taken between steps just after the progress
    # that goes with it, so it may be one step ahead of the last progress that arrived
    assert 20 < bundle.card["steps"] <= last.step + 1
    at.button(key="train_use").click().run()
    assert not at.exception
    picker = at.selectbox(key="active_model_widget")
    assert picker.value.startswith("trained:")
    assert at.button(key="train_start").disabled is False  # a new run may start


def test_probe_snapshots_follow_training_then_scrub_when_paused(train_page):
    at = train_page()
    long_run(at)
    at.button(key="train_start").click().run()
    # the page drew two probe snapshots (the job's own count may be ahead of the render that was checked)
    wait_for(at, lambda a: plotly_specs.shown(a, "train_probe_chart")
             and any(s.key == key("snapshot") for s in a.select_slider))
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
    long_run(at)
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
    # the page as rendered, not the job: a run may finish between a render and a look at its job
    wait_for(at, lambda a: any(m.value.startswith("**Finished:**") for m in a.markdown)
             and plotly_specs.shown(a, "train_probe_chart"))
    assert state(at) == "finished" and any("completed all" in m.value for m in at.markdown)
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
    at.number_input(key=key("batch_size")).set_value(48).run()
    long_run(at)
    at.switch_page("pages/explore/decode.py").run()
    at.switch_page(PAGE).run()
    assert at.number_input(key=key("batch_size")).value == 48  # kept by the state table
    at.button(key="train_start").click().run()
    job = job_of(at)
    assert job.train.batch_size == 48
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
        long_run(at)
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


TINY = RunSettings(dataclasses.replace(TRAIN_DEFAULTS, steps=100_000, batch_size=8, eval_samples=8),
                   {**MODEL_DEFAULTS_ALL, "d_model": 16, "n_heads": 2, "d_ff": 32}, None)




def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_keeper_heartbeats_live_sessions_and_ends_the_workers_of_gone_ones(monkeypatch):
    made = []
    for session in range(3):  # three sessions' runs (one session may have one live run)
        monkeypatch.setattr(registry, "owner", lambda session=session: f"session {session}")
        made.append(runs.new_run(TINY))
    for run, connected in zip(made, (True, False, False)):
        run.start(steps=1)  # its worker trains one step, then stays paused
        workers.watch(run.job, lambda connected=connected: connected)
    jobs = [run.job for run in made]
    deadline = time.monotonic() + 120
    while not all(j.snapshot().state == "paused" and j.snapshot().step == 1 for j in jobs):
        assert time.monotonic() < deadline, [j.snapshot().state for j in jobs]
        time.sleep(0.1)
    pids = [j.pid for j in jobs]
    assert set(pids) <= child_pids()
    jobs[2].stop()
    assert jobs[2].join(10)
    now = time.monotonic()
    workers.sweep(now=now + workers.IDLE_TIMEOUT / 2)
    assert not workers.watching(jobs[2])  # ended jobs are forgotten
    assert [j.snapshot().state for j in jobs[:2]] == ["paused", "paused"]  # too soon to stop "gone"
    workers.sweep(now=now + workers.IDLE_TIMEOUT + 1)
    assert jobs[1].join(10) and jobs[1].snapshot().finished_reason == "stopped"
    assert pids[1] not in child_pids() and pids[2] not in child_pids()  # its worker ended and was reaped
    assert jobs[0].snapshot().state == "paused" and pids[0] in child_pids()  # its session is connected
    jobs[0].stop()
    assert jobs[0].join(10)
    workers.sweep()
    assert not any(workers.watching(j) for j in jobs)
    assert not set(pids) & child_pids()


def test_the_page_keeps_a_spare_worker_that_the_next_run_adopts(train_page):
    workers.end_spare()
    at = train_page()
    spare = workers.spare_pid()
    assert spare is not None and spare in child_pids()  # started when the page was shown
    at.run()
    assert workers.spare_pid() == spare  # one per server, not one per rerun
    at.button(key="train_start").click().run()
    assert job_of(at).pid == spare and workers.spare_pid() is None  # adopted; no new spare while it trains
    wait_for(at, lambda a: shown_step(a) > 0)
    at.button(key="train_stop").click().run()
    assert state(at) == "stopped" and spare not in child_pids()
    again = workers.spare_pid()
    assert again not in (None, spare)  # shown without a live run again: the next one is on its way
    workers.expire_spare(time.monotonic() + workers.SPARE_IDLE + 1)  # the keeper ends a spare nobody took
    assert workers.spare_pid() is None and again not in child_pids()


def test_workers_run_at_the_cpu_priority_the_setting_says(monkeypatch):
    workers.end_spare()
    own = os.getpriority(os.PRIO_PROCESS, 0)
    for setting, expected in ((None, 0), ("10", 10), ("3", 3)):
        if setting is None:
            monkeypatch.delenv("AP_WORKER_NICE", raising=False)
        else:
            monkeypatch.setenv("AP_WORKER_NICE", setting)
        workers.prepare_spare()
        assert os.getpriority(os.PRIO_PROCESS, workers.spare_pid()) == min(19, own + expected)
        workers.end_spare()
    for bad in ("-1", "20", "ten", "1.5"):
        monkeypatch.setenv("AP_WORKER_NICE", bad)
        with pytest.raises(ValueError, match="AP_WORKER_NICE must be a whole number from 0 to 19"):
            workers.worker_nice()


def test_twenty_start_stop_cycles_leave_no_process_thread_or_memory_behind(train_page):
    """Start and Stop through the page's own code path: every fifth run trains before it is stopped, the
    others are stopped while their worker starts. Afterwards the process's children (a spare worker at most),
    threads and RSS are back at their baseline."""
    at = train_page()
    at.number_input(key=key("steps")).set_value(20_000).run()
    pids = []

    def cycle(i: int) -> None:
        at.button(key="train_start").click().run()
        job = job_of(at)
        pids.append(job.pid)
        if i % 5 == 0:
            wait_for(at, lambda a: shown_step(a) > 0)
        at.button(key="train_stop").click().run()
        assert not at.exception and state(at) == "stopped" and job.join(0)

    for i in range(2):  # warm-up: imports, caches, the first figures
        cycle(i)
    workers.sweep()
    before = child_pids() - {workers.spare_pid()}  # children of other tests (e.g. kaleido's Chromium) stay
    baseline = (len(child_pids()), threading.active_count(), rss_mb())
    for i in range(20):
        cycle(i)
    workers.sweep()  # the keeper forgets ended jobs
    children = child_pids()
    assert len(children) <= max(1, baseline[0]) and children <= before | {workers.spare_pid()}  # a spare at most
    assert not set(pids) & children  # every run's worker ended and was reaped
    deadline = time.monotonic() + 5  # a reader thread ends just after its job says it has ended
    while threading.active_count() > baseline[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= baseline[1]
    grown = rss_mb() - baseline[2]
    print(f"20 start/stop cycles: RSS {baseline[2]:.0f} MB -> {rss_mb():.0f} MB ({grown:+.1f} MB)")
    assert grown < 30, f"RSS grew by {grown:.1f} MB over 20 start/stop cycles"


def test_figure_cache_rebuilds_only_when_the_key_changes():
    cache, built = runs.FigureCache(), []

    def build():
        built.append(1)
        return object()

    first = cache.get("a", 1, build)
    assert cache.get("a", 1, build) is first and len(built) == 1
    assert cache.get("a", 2, build) is not first and len(built) == 2


class SteppingJob:
    """A job whose first step comes `after` seconds from now (never, for None), in `state` until then."""

    def __init__(self, after: float | None, state: str = "running"):
        self.at, self.state = None if after is None else time.monotonic() + after, state

    def snapshot(self):
        step = int(self.at is not None and time.monotonic() >= self.at)
        return JobSnapshot(step, self.state, [], [], None, 0.0, 0.0, None, 0.0, 100, None)

    wait_while = Job.wait_while  # the library's wait, which reads only snapshot()


@pytest.mark.parametrize("after, state, waited", [(0.3, "running", (0.3, 0.6)), (None, "running", (0.5, 0.8)),
                                                  (None, "queued", (0.0, 0.1)), (None, "paused", (0.0, 0.1))])
def test_start_draws_the_live_view_once_the_first_step_is_done(after, state, waited):
    """Start waits for the run's first step (at most the timeout; not for a run that waits in line or is paused),
    so the view it draws shows a step done rather than waiting for its next poll."""
    run = runs.Run(SteppingJob(after, state), None, None, None)
    began = time.monotonic()
    run.await_first_step(timeout=0.5)
    assert waited[0] <= time.monotonic() - began < waited[1]


def snapshot_at(step: int, rate: float, state: str = "running", max_seconds: float | None = None,
                elapsed: float = 0.0, probed: bool = True) -> JobSnapshot:
    return JobSnapshot(step, state, [], [(0, None)] if probed else [], None, rate, elapsed, None, 0.0, 300,
                       max_seconds)


def test_the_time_left_is_to_max_steps_or_to_the_time_limit_whichever_is_sooner():
    assert snapshot_at(100, 50.0).seconds_left() == 4.0
    assert snapshot_at(100, 50.0, max_seconds=10.0, elapsed=8.5).seconds_left() == 1.5
    assert snapshot_at(100, 50.0, max_seconds=10.0, elapsed=12.0).seconds_left() == 0.0
    assert snapshot_at(100, 0.0).seconds_left() is None  # no rate yet
    assert snapshot_at(100, 50.0, "paused").seconds_left() is None


def test_the_curves_span_a_short_run_grow_with_a_long_one_and_fit_one_that_ended():
    """A preset's run (300 steps here): its whole length from the first point. A run of 100,000 steps: twice the step
    reached, rounded up (on its whole length, 300 steps were a sliver at the left). A run that ended: its own steps."""
    assert [step_reach(snapshot_at(step, 50.0)) for step in (0, 25, 280)] == [300, 300, 300]

    def long(step: int, state: str = "running") -> JobSnapshot:
        return dataclasses.replace(snapshot_at(step, 50.0, state), max_steps=100_000)

    assert [step_reach(long(step)) for step in (0, 30, 300, 600, 40_000, 90_000)] == \
        [100_000, 100, 1_000, 2_000, 100_000, 100_000]
    assert step_reach(long(600, "paused")) == 2_000  # it may train on
    assert [step_reach(long(290, state)) for state in ("finished", "stopped", "error")] == [290, 290, 290]
    assert step_reach(snapshot_at(0, 0.0, "stopped")) == 300  # stopped before its first step: nothing to fit
    assert not long(290).ended and long(290, "stopped").ended
    assert list(curves_figure(long(600), "reverse").layout.xaxis2.range) == [0, 2_000]


class Numbered:
    """A run as chart_snapshot knows it: its number in its session."""

    def __init__(self, number: int = 1):
        self.number = number


def test_the_live_charts_are_renewed_at_every_renewal_unless_the_run_ends_before_the_next(monkeypatch):
    """... and always until they hold the first probe."""
    monkeypatch.setattr(runs.st, "session_state", {})
    run = Numbered()
    assert runs.chart_snapshot(run, snapshot_at(0, 0.0, probed=False)).step == 0
    assert runs.chart_snapshot(run, snapshot_at(10, 50.0)).step == 10  # the first probe has come: at once
    for step, shown in ((90, 90), (170, 170), (230, 170), (240, 170)):  # from step 230, 1.4 s left: the end redraws
        assert runs.chart_snapshot(run, snapshot_at(step, 50.0)).step == shown, step
    assert runs.chart_snapshot(run, snapshot_at(240, 50.0, "paused")).step == 240  # no end in sight: renewed
    assert runs.chart_snapshot(Numbered(2), snapshot_at(5, 50.0)).step == 5  # a new run: its own


def test_model_config_defaults_match_the_trainer():
    trainer = Trainer(TrainConfig(steps=1))
    assert {k: getattr(trainer.model.config, k) for k in MODEL_DEFAULTS_ALL} == MODEL_DEFAULTS_ALL
    assert ModelConfig(src_vocab=4, tgt_vocab=4, **MODEL_DEFAULTS_ALL)


# ------------------------------------------------------------------------------------- the view in the URL


def test_settings_and_view_values_convert_both_ways():
    for task in TASKS:
        params = {name: PARAM_FIELDS[name].hi if "max" in name else PARAM_FIELDS[name].lo
                  for name in task_defaults(task)}
        train = TrainConfig(task=task, task_params=params, lr=0.0012345, seed=7, steps=50, label_smoothing=0.1,
                            device="cpu", optimizer="muon", muon_lr=0.0301, schedule="cosine", beta1=0.8, beta2=0.95)
        settings = RunSettings(train, {**MODEL_DEFAULTS_ALL, "n_heads": 2, "norm": "post", "qk_norm": True,
                                       "init": "identity"}, None)
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


def test_initial_weights_decay_and_betas_are_settings_like_the_others(train_page):
    at = train_page()
    init = "xavier" if at.selectbox(key=key("init")).value == "identity" else "identity"  # not the preset's
    schedule = "linear" if at.selectbox(key=key("schedule")).value == "cosine" else "cosine"
    at.selectbox(key=key("init")).set_value(init)
    at.selectbox(key=key("schedule")).set_value(schedule)
    at.number_input(key=key("beta1")).set_value(0.85).run()
    assert not at.exception and not at.error
    query = dict(at.query_params)
    assert {name: query[name] for name in ("init", "schedule", "beta1")} == {
        "init": init, "schedule": schedule, "beta1": "0.85"}
    summary = next(c.value for c in at.caption if c.value.startswith("**Model:**"))
    assert f"{schedule} decay" in summary and "β 0.85, " in summary
    assert ("identity init" in summary) == (init == "identity")
    again = linked(query)
    assert not again.exception and not again.warning and shown_settings(again) == shown_settings(at)
    np.testing.assert_array_equal(probe_chart(again)[1], probe_chart(at)[1])  # the same initial weights


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
    ({"stop_early": "yes"}, {}), ({"norm": "mid"}, {}), ({"positional": "xpos"}, {}),
    ({"probe": "ABC!"}, {}), ({"probe": "a" * 121}, {}), ({"probe": "a\x00b"}, {}),
    ({"layer": "2"}, {}), ({"head": "5"}, {}), ({"head": "-1"}, {}), ({"v": "2", "seed": "1"}, {}),
    ({"unknown": "1"}, {}), ({"step_count": "5"}, {}), ({"snapshot": "3"}, {}), ({"model": "copy"}, {}),
    ({"device": "tpu"}, {}), ({"device": "CUDA"}, {}), ({"optimizer": "sgd"}, {}), ({"qk_norm": "yes"}, {}),
    ({"muon_lr": "5"}, {}), ({"task": "addition", "optimizer": "lion"}, {"task": "addition"}),
    ({"init": "zeros"}, {}), ({"schedule": "step"}, {}), ({"beta1": "1"}, {}), ({"beta2": "nan"}, {}),
    ({"muon_momentum": "1"}, {}),
]


@pytest.mark.parametrize("query, url", HOSTILE, ids=link_id)
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, query, url):
    at = linked(query)
    assert not at.exception, [e.value for e in at.exception]
    assert any("could not be followed" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not at.error  # refused values never reach the settings: Start stays possible
    assert at.selectbox(key="active_model_widget").value == "shipped:reverse"
    assert dict(at.query_params) == ({"v": "1", **url} if url else {})
    defaults = {prop.name: prop.default for prop in TRAIN.props}
    task = url.get("task", "reverse")
    view = {**defaults, **preset_values(task), "task": task}  # a task's shape and recipe: its preset
    expected = {**values_of(settings_of(view)), "probe": example_input(TASKS[task]())}
    assert shown_settings(at) == {name: expected[name] for name in shown_settings(at)}
    assert not at.button(key="train_start").disabled and runs.RUN not in at.session_state


@needs_reverse
def test_one_heads_probe_title_puts_the_step_on_a_line_of_its_own(bundle):
    """Beside the curves the probe's column is narrow: its one-line title was cut off at "training st"."""
    from ui import display

    result = run_probe(bundle, "abcdef")
    fig, plain = runs.probe_figure(result, 250, 0, 1), display.cross_figure(result, 0, 1)
    assert fig.layout.title.text.split("<br>") == ["Cross-attention · layer 1 · head 2", "training step 250"]
    grown = fig.layout.margin.t - plain.layout.margin.t
    assert grown > 0 and fig.layout.title.pad.t == plain.layout.title.pad.t + grown  # room for the second line
    assert fig.layout.height - fig.layout.margin.t == max(plain.layout.height, runs.MIN_PROBE_HEIGHT) - \
        plain.layout.margin.t  # the cells keep their size
    assert "<br>" not in runs.probe_figure(result, 250, 0, None).layout.title.text  # every head: the page's width


def test_live_texts_and_export_names():
    assert format_seconds(42) == "42 s" and format_seconds(185) == "3 min 05 s"
    assert probe_filename("reverse", 250, 0, 2) == "reverse_cross_L1H3_train0250"
    assert probe_filename("reverse", 250, 0, None) == "reverse_cross_L1_train0250"
    job = TrainingJob(Trainer(TrainConfig(steps=4)))
    assert progress(job.snapshot(), 0.99) == (0.0, "Step 0 of 4 · 0 s of training")


def test_every_way_a_run_ends_but_failing_has_its_sentence():
    assert set(train_live.ENDINGS) == set(Ending) - {Ending.ERROR, Ending.KILLED}  # a failed run shows its error
    gone = dataclasses.replace(snapshot_at(40, 0.0, "stopped", elapsed=3.0), finished_reason="session gone")
    assert train_live.ending(gone, 0.99, advise=True) == \
        "**Stopped** after 40 steps (3 s): its browser session went away."


# ------------------------------------------------------------------------------------------------ device


def device_pickers(at) -> list:
    return [box for box in at.selectbox if box.key == key("device")]


@no_cuda
def test_without_cuda_there_is_no_device_picker_and_a_cuda_link_gets_a_note(clean_caches):
    at = linked({"device": "cuda"})
    assert not at.exception and not at.error and not device_pickers(at)
    notes = " ".join(w.value for w in at.warning)
    assert "could not be followed" in notes and "no CUDA GPU" in notes, notes
    assert dict(at.query_params) == {}  # back to auto
    assert not at.button(key="train_start").disabled

    cpu = linked({"device": "cpu"})  # a CPU everywhere: kept, and named in the summary
    assert not cpu.warning and dict(cpu.query_params) == {"v": "1", "device": "cpu"}
    assert any("on the CPU" in c.value for c in cpu.caption)


def test_settings_for_cuda_without_it_are_refused_before_anything_starts():
    settings = RunSettings(dataclasses.replace(TRAIN_DEFAULTS, device="cuda"))
    if torch.cuda.is_available():
        assert settings_problem(settings) is None
    else:
        assert "torch.cuda.is_available() is False" in settings_problem(settings)
        with pytest.raises(ValueError, match="cuda"):
            runs.new_run(settings)
    assert runs.preview(settings.key(), "abc").error is None  # the preview always decodes on the CPU


@needs_cuda
def test_with_cuda_the_page_trains_on_the_picked_device(train_page):
    at = train_page()
    assert [box.options for box in device_pickers(at)] == [["Auto (the GPU when there is one)", "CPU", "GPU (CUDA)"]]
    at.selectbox(key=key("device")).set_value("cuda").run()
    assert at.query_params["device"] == "cuda"
    at.number_input(key=key("step_count")).set_value(3)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 3)
    assert job_of(at).train.device == "cuda"
    bundle = job_of(at).bundle()
    assert all(t.device.type == "cpu" for t in bundle.model.state_dict().values())  # weights come back on the CPU
    assert "training step 3" in probe_chart(at)[0]
