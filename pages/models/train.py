"""Train live: train a small Transformer in a worker process of its own and watch its cross-attention form.
Runs beyond the server's training slots wait in line, with their place shown; a session sees only its own run."""

from __future__ import annotations

import re

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer.runs import workers
from transformer.runs.job import JobLimitError, State
from transformer.runs.probe import example_input
from transformer.store.checkpoints import bundle_to_bytes
from transformer.store.model_store import StoreError
from transformer.tasks import TASKS, CustomTask, make_task
from transformer.tasks.custom import parse_pairs
from ui import model_registry as registry
from ui import runs
from ui.failure import callback
from ui.panels.train_live import check_probe_view, live_polling, live_static, preview_view, probe_box, show_message
from ui.panels.train_settings import check_settings, live_settings, number, settings_panel
from ui.run_settings import RunSettings, settings_problem
from ui.state import View
from ui.tables.train import TRAIN, settings_of, values_of
from ui.widgets import finish, header
from transformer.i18n import t

# More room for the run; the curves and the probe side by side only where each column gets LIVE_COLUMN_PX (at
# 1024 px with the sidebar open they were ~270 px: the probe's token labels ran into each other), else stacked.
# The progress bar steps to each poll's value instead of sliding there for 0.5 s (Streamlit's transition): drawn
# without a GPU, the slides took Chromium ~0.1 of a core while a run trained, and training beside it ran ~15% slower
# (docs/MEASUREMENTS.md, "The progress bar's slide").
LIVE_COLUMN_PX = 360
LIVE_CSS = f"""<style>
[data-testid="stMainBlockContainer"] {{ padding-top: 1rem; }}
.st-key-train_live_columns [data-testid="stHorizontalBlock"] {{ flex-wrap: wrap; }}
.st-key-train_live_columns [data-testid="stColumn"] {{ min-width: {LIVE_COLUMN_PX}px; }}
.st-key-train_live_columns [data-testid="stColumn"] [data-testid="stColumn"] {{ min-width: 0; }}
[data-testid="stProgressBarTrack"] > div {{ transition: none; }}
</style>"""
STEP_COUNT_PX = 120  # the Step button's count box: room for 1000 beside its - and + buttons


def intro(live: bool) -> DeltaGenerator:
    """The title and, unless a run is live (its view needs the screen), what the page does."""
    notes = header(t("app.page.train"))
    if live:
        return notes
    st.markdown(t("train.intro"))
    st.latex(r"\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T} \log p_\theta\left(y_t \mid y_{<t},\, x\right)")
    return notes


def default_probe(settings: RunSettings, problem: str | None) -> str:
    """The probe input until one is typed: the task's first held-out example."""
    train = settings.train
    if problem and train.task == CustomTask.name:
        return ""
    return example_input(TASKS[train.task]() if problem else make_task(train.task, **train.task_params))


# -------------------------------------------------------------------------------------------- controls


def start(view: View, settings: RunSettings, text: str, steps: int | None = None) -> None:
    """Start a new run (or run `steps` steps, then pause) in place of this session's ended one. When it
    cannot start (the server's line is full, settings the library refuses) a message says why and nothing
    changes: the ended run and its model stay."""
    if not text or runs.preview(settings.key(), text).error:
        view.reset("probe")
        text = default_probe(settings, None)
    try:
        run = runs.new_run(settings, text)
        runs.launch(run, steps)
    except JobLimitError as exc:  # the server's line is full, or this session's or computer's share of runs
        runs.say("error", t("train.cannot_start", error=exc))
        return
    except ValueError as exc:  # settings the library refuses
        runs.say("error", t("train.cannot_start", error=exc))
        return
    view.set("follow", True)
    run.await_first_step()


def resume(view: View, run: runs.Run) -> None:
    try:
        run.resume()
    except JobLimitError as exc:  # the server's line is full: the run stays paused
        runs.say("error", t("train.cannot_resume", error=exc))
        return
    view.set("follow", True)


def step_clicked(view: View, run: runs.Run | None) -> None:
    """Step N: a paused run runs exactly N more steps; otherwise a new run starts paused and runs N."""
    steps = view.get("step_count")
    if run is not None and run.snapshot().state == State.PAUSED:
        try:
            run.step(steps)
        except JobLimitError as exc:
            runs.say("error", t("train.cannot_step", error=exc))
    else:
        runs.request_start(steps)


def controls(view: View, run: runs.Run | None, state: str | None, problem: str | None) -> None:
    """The run's buttons in one row that wraps where the window is narrow (1024 px, presenter mode), so no label
    is cut short."""
    live = state in runs.LIVE
    with st.container(horizontal=True, vertical_alignment="bottom", key="train_controls"):
        st.button(t("train.start"), key="train_start", icon=":material/play_arrow:", type="primary",
                  disabled=live or problem is not None, on_click=callback(runs.request_start))
        st.button(t("train.pause"), key="train_pause", icon=":material/pause:", disabled=state not in runs.POLLED,
                  on_click=callback(lambda: run.pause()), help=t("train.pause_help"))
        st.button(t("train.resume"), key="train_resume", icon=":material/resume:", disabled=state != State.PAUSED,
                  on_click=callback(resume), args=(view, run))
        st.button(t("train.stop"), key="train_stop", icon=":material/stop:", disabled=not live,
                  on_click=callback(lambda: run.stop()), help=t("train.stop_help"))
        number(view, TRAIN.by_name["step_count"], label_visibility="collapsed",  # Step's count
               width=STEP_COUNT_PX)
        st.button(t("train.step"), key="train_step", icon=":material/skip_next:",
                  disabled=state in runs.POLLED or (state != State.PAUSED and problem is not None),
                  on_click=callback(step_clicked), args=(view, run), help=t("train.step_help"))
        st.button(t("train.reset"), key="train_reset", icon=":material/restart_alt:", disabled=run is None,
                  on_click=callback(runs.discard_run), help=t("train.reset_help"))


# ---------------------------------------------------------------------------------------------- result


def model_name(view: View, run: runs.Run, step: int) -> str:
    """The typed name, else the task and the step the weights are at."""
    return (view.get("name") or "").strip() or f"{run.task.name}-{step}"


def use_model(view: View, run: runs.Run) -> None:
    """Add the run's current weights to this session's models and make them active (a callback: the
    sidebar picker is drawn before the page)."""
    step = run.snapshot().step
    bundle = run.bundle(model_name(view, run, step))
    try:
        run.added[step] = registry.add_session_model(bundle, "trained")
    except StoreError as exc:
        runs.say("error", t("train.result.not_added", name=bundle.name, error=exc), "result")
        return
    runs.say("success", t("train.result.active", name=bundle.name), "result")


def result_panel(view: View, run: runs.Run) -> None:
    """Name the model, add it to the sidebar's picker, or download it as a checkpoint."""
    st.subheader(t("train.result.header"))
    snapshot = run.snapshot()
    step, state = snapshot.step, snapshot.state
    name_col, use_col, download_col = st.columns([2, 1, 1], vertical_alignment="bottom")
    with name_col:
        view.widget("name", st.text_input, t("train.result.name"), to_widget=lambda value: value or "",
                    placeholder=f"{run.task.name}-{step}", max_chars=60, help=t("train.result.name_help"))
    name = model_name(view, run, step)
    added = run.added.get(step)
    use_col.button(t("train.result.use"), key="train_use", icon=":material/check_circle:", type="primary",
                   width="stretch", disabled=added is not None, on_click=callback(use_model), args=(view, run),
                   help=t("train.result.use_help"))
    download_col.download_button(
        t("train.result.download"), data=lambda: bundle_to_bytes(run.bundle(name)), key="train_download",
        file_name=f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.safetensors", mime="application/octet-stream",
        icon=":material/download:", width="stretch", on_click="ignore",
    )
    show_message("result")
    if added is not None and state == State.PAUSED:
        st.caption(t("train.result.added"))


def retrain_link(view: View, run: runs.Run) -> None:
    """The link that fills this page with the run's settings and probe: training is seeded, so Start then
    trains the same model, step for step, on any server (a link to the trained model itself works only where
    the server still keeps it; the note such a link gives elsewhere points here)."""
    probe = run.probe.text if run.probe.text != example_input(run.task) else None
    view_defaults = {name: TRAIN.by_name[name].default for name in ("layer", "head")}  # the settings, not the view
    link = view.link({**values_of(run.settings), "probe": probe, **view_defaults})
    with st.container(key="train_retrain"):
        st.markdown(t("train.retrain.header"))
        st.code(link, language=None, wrap_lines=True)
        st.caption(t("train.retrain.caption"))


# ------------------------------------------------------------------------------------------------ page


def main() -> None:
    view = TRAIN.view()
    check_settings(view)  # before the widgets show the values
    if (request := runs.take_start_request()) is not None:
        start_requested(view, request["steps"])
    run = runs.current_run()
    snapshot = run.snapshot() if run is not None else None
    state = snapshot.state if snapshot is not None else None
    live = state in runs.LIVE
    notes = intro(live)
    areas = [st.container() for _ in range(3)]  # settings, then the controls, then the run ...
    settings_area, controls_area, run_area = (areas[2], areas[0], areas[1]) if live else areas
    if live:  # ... unless a run is live: its view takes the first screen, its settings fold below it, to read
        st.html(LIVE_CSS)
        settings = settings_of(view.values())
        with settings_area, st.expander(t("train.folded"), icon=":material/settings:", expanded=False):
            live_settings(run.settings)
    else:
        with settings_area:
            settings = settings_panel(view)
    problem = run_problem(settings)
    if problem and not live:
        settings_area.error(t("train.fix", problem=problem), icon=":material/error:")
    shape = (run.settings if run is not None else settings).model
    check_probe_view(view, shape["n_dec_layers"], shape["n_heads"])
    text = view.get("probe")
    if text is not None and view.from_link("probe") and problem is None:
        if (error := runs.preview(settings.key(), text).error) is not None:
            view.refuse("probe", error)
            text = None
    if text is None:
        text = run.probe.text if run is not None else default_probe(settings, problem)

    with controls_area:
        controls(view, run, state, problem)
        show_message("controls")
    with settings_area if live else controls_area:
        probe_box(view, text)
    with run_area:
        run_view(view, run, snapshot, settings, text, problem)
    if not live and problem is None:
        workers.prepare_spare()  # a spare worker starts up while the user reads the page, not after Start
    finish(view, notes)


def start_requested(view: View, steps: int | None) -> None:
    """Start (or Step on no run) was clicked: start the run before the page draws anything, from the settings the
    widgets' callbacks have just written, so that this script run draws the live view (one run from the click to
    the first progress line, where starting mid-page and rerunning took two)."""
    settings = settings_of(view.values())
    if run_problem(settings) is not None:  # Start is disabled then; a Step on no run shows the problem below
        return
    run = runs.current_run()
    start(view, settings, view.get("probe") or (run.probe.text if run is not None else ""), steps)


def run_problem(settings: RunSettings) -> str | None:
    """Why a run of `settings` cannot start (the library's check, and own data that does not parse), or None."""
    problem = settings_problem(settings)
    if problem and settings.train.task == CustomTask.name and not parse_pairs(settings.train.task_params["data"]).ok:
        return t("train.custom.problem")
    return problem


def run_view(view: View, run: runs.Run | None, snapshot, settings: RunSettings, text: str,
             problem: str | None) -> None:
    """The untrained preview before a run; the run's live view (from `snapshot` on), its result and its
    retrain link after."""
    if run is None:
        if problem is None:
            preview_view(settings, text)
    else:
        state = snapshot.state
        following = runs.drawn_state() == State.RUNNING and view.get("follow")
        runs.set_drawn_state(state)
        if state not in runs.POLLED:
            run.catch_up()  # the probe at the weights training stopped at
            if following:  # it just stopped: keep showing the newest snapshot
                view.set("snapshot", run.timeline(run.snapshot())[-1][0])
        (live_polling if state in runs.POLLED else live_static)(view, run)
        if state not in runs.POLLED and snapshot.step > 0:
            result_panel(view, run)
        retrain_link(view, run)


main()
