"""Train live: train a small Transformer in a background thread and watch its cross-attention form."""

from __future__ import annotations

import dataclasses
import re

import streamlit as st

from ui import display
from ui import model_registry as registry
from ui import training_runs as ts
from transformer.checkpoints import bundle_to_bytes
from transformer.job import JobLimitError
from transformer.tasks import TASKS, make_task

PROBE = "train_probe"
MESSAGE = "train_message"
START = "train_start_request"
FOLLOW, SNAPSHOT = "train_follow", "train_snapshot"
DRAWN = "_train_drawn_state"  # the job state the page was last drawn for
ALL_HEADS = -1
STATE_LINES = {
    "running": ":green[**Training…**]",
    "paused": ":orange[**Paused.**] Resume, run a few steps, or stop.",
}
REASONS = {
    "target reached": "reached the target held-out exact match",
    "max steps": "ran all its steps",
    "time limit": "hit its time limit",
    "stopped": "was stopped",
    "session gone": "was stopped because its browser session went away",
}


# -------------------------------------------------------------------------------------------- settings


def number(key: str, spec: ts.Field, default, disabled: bool):
    """A bounded number input whose value survives visits to other pages."""
    return st.number_input(spec.label, min_value=spec.lo, max_value=spec.hi, value=default, step=spec.step,
                           format=spec.fmt, help=spec.help, key=key, disabled=disabled, persist_state="session")


def grid(fields: dict[str, ts.Field], defaults: dict, prefix: str, disabled: bool, columns: int = 2) -> dict:
    """Number inputs for `fields`, `columns` to a row; returns {name: value}."""
    cols, values = st.columns(columns), {}
    for i, (name, spec) in enumerate(fields.items()):
        with cols[i % columns]:
            values[name] = number(f"{prefix}{name}", spec, defaults[name], disabled)
    return values


def task_changed() -> None:
    """A new task gets its own example as the probe input."""
    st.session_state[PROBE] = ts.example_input(TASKS[st.session_state[ts.TASK_KEY]]())


def settings_panel(locked: bool) -> ts.RunSettings:
    """Task and its parameters on one row; model shape and training settings in two expanders below, with a
    one-line summary (read-only while a run is live)."""
    cols = st.columns([1.3, 0.75, 0.75, 2.2], vertical_alignment="bottom")
    task = cols[0].selectbox("Task", list(TASKS), format_func=lambda name: TASKS[name].title, key=ts.TASK_KEY,
                             on_change=task_changed, disabled=locked, persist_state="session")
    task_params = {}
    for col, (name, default) in zip(cols[1:3], ts.task_defaults(task).items()):
        with col:
            task_params[name] = number(f"train_{task}_{name}", ts.PARAM_FIELDS[name], default, locked)
    cols[3].caption(TASKS[task].description)
    defaults = ts.MODEL_DEFAULTS_ALL
    shape_col, train_col = st.columns(2, gap="medium")
    with shape_col, st.expander("Model shape", icon=":material/account_tree:"):
        model = grid(ts.MODEL_FIELDS, defaults, "train_model_", locked, columns=3)
        norm_col, pos_col = st.columns(2)
        model["norm"] = norm_col.selectbox("Norm placement", list(ts.NORM_LABELS), format_func=ts.NORM_LABELS.get,
                                           index=list(ts.NORM_LABELS).index(defaults["norm"]), key="train_norm",
                                           disabled=locked, persist_state="session")
        model["positional"] = pos_col.selectbox(
            "Positional encoding", list(ts.POSITIONAL_LABELS), format_func=ts.POSITIONAL_LABELS.get,
            index=list(ts.POSITIONAL_LABELS).index(defaults["positional"]), key="train_positional",
            disabled=locked, persist_state="session")
    with train_col, st.expander("Training settings", icon=":material/tune:"):
        train = grid(ts.TRAIN_FIELDS, dataclasses.asdict(ts.TRAIN_DEFAULTS), "train_opt_", locked, columns=3)
        stop_early = st.checkbox(f"Stop once held-out exact match reaches {ts.TARGET_EXACT_MATCH:.0%}", value=True,
                                 key="train_stop_early", disabled=locked, persist_state="session",
                                 help=f"Checked every {ts.TRAIN_DEFAULTS.eval_every} steps on "
                                 f"{ts.TRAIN_DEFAULTS.eval_samples} held-out inputs, confirmed on "
                                 f"{ts.TRAIN_DEFAULTS.confirm_samples}.")
    config = dataclasses.replace(ts.TRAIN_DEFAULTS, task=task, task_params=task_params, **train)
    settings = ts.RunSettings(config, model, ts.TARGET_EXACT_MATCH if stop_early else None)
    st.caption(ts.settings_summary(settings) + (" · *locked while the run is live*" if locked else ""))
    return settings


# -------------------------------------------------------------------------------------------- controls


def say(kind: str, text: str, slot: str = "controls") -> None:
    """Leave a message for the next run of the page, shown at `slot` (callbacks cannot draw there)."""
    st.session_state[f"{MESSAGE}_{slot}"] = (kind, text)


def show_message(slot: str) -> None:
    if (message := st.session_state.pop(f"{MESSAGE}_{slot}", None)) is not None:
        getattr(st, message[0])(message[1])


def request_start(steps: int | None = None) -> None:
    """Start/Step callback: the page starts the run once it has read this rerun's settings (a callback's
    bound arguments would hold the settings of the previous run, missing an edit made just before)."""
    st.session_state[START] = {"steps": steps}


def start(settings: ts.RunSettings, steps: int | None = None) -> None:
    """Replace any ended run with a new one and start it (or run `steps` steps, then pause)."""
    ts.discard_run()
    text = st.session_state.get(PROBE)
    if not text or ts.preview(settings.key(), text).error:
        text = ts.example_input(make_task(settings.train.task, **settings.train.task_params))
        st.session_state[PROBE] = text
    try:
        ts.launch(ts.new_run(settings, text), steps)
    except JobLimitError as exc:
        say("error", f"Cannot start: {exc}.")
    except ValueError as exc:
        say("error", f"Cannot start: {exc}")
    st.session_state[FOLLOW] = True


def resume(run: ts.Run) -> None:
    run.job.resume()
    st.session_state[FOLLOW] = True


def step_clicked(run: ts.Run | None) -> None:
    """Step N: a paused run runs exactly N more steps; otherwise a new run starts paused and runs N."""
    steps = int(st.session_state["train_step_n"])
    if run is not None and run.job.snapshot().state == "paused":
        run.job.step(steps)
    else:
        request_start(steps)


def model_name(run: ts.Run, step: int) -> str:
    """The typed name, else the task and the step the weights are at."""
    typed = (st.session_state.get("train_model_name") or "").strip()
    return typed or f"{run.task.name}-{step}"


def use_model(run: ts.Run) -> None:
    """Add the run's current weights to this session's models and make them active (a callback: the
    sidebar picker is drawn before the page)."""
    step = run.job.snapshot().step
    bundle = run.job.bundle(model_name(run, step))
    run.added[step] = registry.add_session_model(bundle, "trained")
    say("success", f"“{bundle.name}” is now the active model: every page uses it (see the sidebar).", "result")


def probe_changed() -> None:
    run, text = ts.current_run(), st.session_state[PROBE]
    if run is not None and (result := run.probe_now(text)).error:
        say("warning", f"The probe keeps its previous input: {result.error}")


def controls(run: ts.Run | None, state: str | None, problem: str | None) -> None:
    live = state in ("running", "paused")
    cols = st.columns([1, 1, 1, 1, 0.9, 1.1, 1], vertical_alignment="bottom")
    cols[0].button("Start", key="train_start", icon=":material/play_arrow:", type="primary", width="stretch",
                   disabled=live or problem is not None, on_click=request_start)
    cols[1].button("Pause", key="train_pause", icon=":material/pause:", width="stretch",
                   disabled=state != "running", on_click=lambda: run.job.pause())
    cols[2].button("Resume", key="train_resume", icon=":material/resume:", width="stretch",
                   disabled=state != "paused", on_click=lambda: resume(run))
    cols[3].button("Stop", key="train_stop", icon=":material/stop:", width="stretch", disabled=not live,
                   on_click=lambda: run.job.stop(),
                   help="End training for good; the model so far is kept and can be used below.")
    cols[4].number_input("Step count", min_value=1, max_value=1000, value=10, key="train_step_n",
                         persist_state="session")
    cols[5].button("Step", key="train_step", icon=":material/skip_next:", width="stretch",
                   disabled=state == "running" or (state != "paused" and problem is not None),
                   on_click=step_clicked, args=(run,),
                   help="Run exactly this many steps, then pause (a new run starts paused if none is live).")
    cols[6].button("Reset", key="train_reset", icon=":material/restart_alt:", width="stretch",
                   disabled=run is None, on_click=ts.discard_run,
                   help="Stop and discard this run (use or download its model first).")


# ------------------------------------------------------------------------------------------- live view


def pick_snapshot(timeline: list, running: bool) -> int:
    """The probe snapshot to show: the newest while following a running job, else the slider's choice."""
    steps = [step for step, _ in timeline]
    if len(steps) < 2:
        return 0
    following = running and st.session_state.get(FOLLOW, True)
    if following or st.session_state.get(SNAPSHOT) not in steps:
        st.session_state[SNAPSHOT] = steps[-1]
    chosen = st.select_slider("Snapshot (training step)", options=steps, key=SNAPSHOT, disabled=following,
                              help="Drag back to replay how the heads formed (turn off Follow training, or pause, "
                              f"first). The probe is decoded every {ts.PROBE_EVERY} steps (less often in long runs).")
    return steps.index(chosen)


def probe_panel(timeline: list, task, running: bool) -> None:
    """The probe's output and cross-attention at the chosen snapshot, with its layer/head pickers."""
    if not timeline:
        st.info("Taking the first snapshot of the probe…", icon=":material/hourglass_top:")
        return
    top = st.columns([1, 1, 1.2], vertical_alignment="bottom")
    if running:
        st.session_state.setdefault(FOLLOW, True)
        top[2].toggle("Follow training", key=FOLLOW, help="Show the newest snapshot; turn off to replay earlier ones.")
    index = pick_snapshot(timeline, running)
    step, result = timeline[index]
    if result.error:
        st.warning(f"The probe input “{result.source}” cannot be decoded: {result.error}")
        return
    layers, heads = result.cross.shape[:2]
    layer = top[0].selectbox("Layer", range(layers), format_func=lambda i: f"Layer {i + 1}", key="train_layer")
    head = top[1].selectbox("Head", [ALL_HEADS, *range(heads)], key="train_head",
                            format_func=lambda h: "All heads" if h == ALL_HEADS else f"Head {h + 1}")
    head = None if head == ALL_HEADS else head
    expected = task.answer(result.source)
    verdict = "" if expected is None else (" · :green[**right**]" if result.output_text == expected
                                           else f" · :red[**wrong**], expected `{expected}`")
    st.markdown(f"Step **{step:,}**: `{result.source}` → `{result.output_text or '(nothing)'}`{verdict}")
    fig = figures().get("probe", (id(result), layer, head), lambda: ts.probe_figure(result, step, layer, head))
    filename = ts.probe_filename(task.name, step, layer, head)
    display.show_figure(fig, filename, key="train_probe_chart")
    if head is not None:
        rows, cols = ts.probe_labels(result)
        display.csv_download(result.cross[layer, head], rows, cols, filename, key="train_probe_csv")
    st.caption("Rows: the output token written at each decoding step; columns: the input tokens it reads.")


def figures() -> ts.FigureCache:
    return st.session_state.setdefault("_train_figures", ts.FigureCache())


def metrics_row(snapshot) -> None:
    latest = snapshot.history[-1] if snapshot.history else {}
    cols = st.columns(4)
    cols[0].metric("Training loss", f"{snapshot.loss:.3f}" if snapshot.step else "–")
    cols[1].metric("Held-out loss", f"{latest['loss']:.3f}" if latest else "–")
    cols[2].metric("Token accuracy", f"{latest['token_accuracy']:.1%}" if latest else "–")
    cols[3].metric("Exact match", f"{latest['exact_match']:.1%}" if latest else "–",
                   help="Greedy outputs identical to the answer, on held-out inputs never trained on.")


def status_line(run: ts.Run, snapshot) -> None:
    if snapshot.state == "error":
        st.error(f"Training failed at step {snapshot.step:,}: {snapshot.error}. The model as of that step is "
                 "kept: you can still use or download it below.")
    elif snapshot.state in STATE_LINES:
        st.markdown(STATE_LINES[snapshot.state])
    else:
        st.markdown(f"**Finished:** the run {REASONS.get(snapshot.finished_reason, 'ended')} "
                    f"after {snapshot.step:,} steps ({ts.format_seconds(snapshot.elapsed)}).")
    st.progress(*ts.progress(snapshot, run.settings.target))


def live_view() -> None:
    """Progress, curves and the probe of this session's run; redraws itself while the run trains."""
    run = ts.current_run()
    snapshot = run.job.snapshot()
    run.job.heartbeat()
    if snapshot.state != st.session_state.get(DRAWN):
        st.rerun()  # running -> paused/finished: redraw the whole page (controls, polling off)
    status_line(run, snapshot)
    metrics_row(snapshot)
    probe, curves = st.columns([1.5, 1], gap="large")
    with curves:
        fig = figures().get("curves", (id(run.job), len(snapshot.history)),
                            lambda: ts.curves_figure(snapshot, run.task.name))
        display.show_figure(fig, f"{run.task.name}_training_curves", key="train_curves")
        st.caption(f"Measured on held-out inputs every {run.settings.train.eval_every} steps.")
    with probe:
        probe_panel(run.timeline(snapshot), run.task, snapshot.state == "running")


live_polling = st.fragment(run_every=ts.POLL_SECONDS)(live_view)
live_static = st.fragment(live_view)


def preview_view(settings: ts.RunSettings) -> None:
    """Before Start: the untrained model's cross-attention on the probe."""
    text = st.session_state.get(PROBE, "")
    result = ts.preview(settings.key(), text)
    if result.error:
        st.warning(f"The probe input cannot be decoded: {result.error}")
        return
    st.info("This is the **untrained** model: its cross-attention has no structure yet. Press **Start** and "
            "watch it change as the model learns (for *reverse*, an anti-diagonal appears).", icon=":material/info:")
    fig = ts.probe_figure(result, 0, 0, None)
    display.show_figure(fig, ts.probe_filename(settings.train.task, 0, 0, None), key="train_preview_chart")
    st.markdown(f"Untrained output: `{result.output_text or '(nothing)'}`")


# ---------------------------------------------------------------------------------------------- result


def result_panel(run: ts.Run) -> None:
    """Name the model, add it to the sidebar's picker, or download it as a checkpoint."""
    st.subheader("Use the trained model")
    snapshot = run.job.snapshot()
    step, state = snapshot.step, snapshot.state
    name_col, use_col, download_col = st.columns([2, 1, 1], vertical_alignment="bottom")
    name_col.text_input("Name", key="train_model_name", placeholder=f"{run.task.name}-{step}", max_chars=60,
                        help="Shown in the sidebar's model picker and stored in the checkpoint.")
    name = model_name(run, step)
    added = run.added.get(step)
    use_col.button("Use this model", key="train_use", icon=":material/check_circle:", type="primary",
                   width="stretch", disabled=added is not None, on_click=use_model, args=(run,),
                   help="Adds it to the sidebar's model picker (for this session) and makes it active.")
    download_col.download_button(
        "Download .safetensors", data=lambda: bundle_to_bytes(run.job.bundle(name)), key="train_download",
        file_name=f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.safetensors", mime="application/octet-stream",
        icon=":material/download:", width="stretch", on_click="ignore",
    )
    show_message("result")
    if added is not None and state == "paused":
        st.caption("This model is in the sidebar's picker. Resume training to add a later version.")


# ------------------------------------------------------------------------------------------------ page

st.title("Train live")
st.markdown(
    "Train a small Transformer right here and watch it learn. Each step shows it a batch of examples and "
    "nudges every weight to make the right next token more likely. Keep an eye on the **cross-attention** of "
    "the probe input: it starts as a blur and sharpens into the alignment the task needs."
)
st.latex(r"\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T} \log p_\theta\left(y_t \mid y_{<t},\, x\right)")

run = ts.current_run()
snapshot = run.job.snapshot() if run is not None else None
state = snapshot.state if snapshot is not None else None
live = state in ("running", "paused")
settings = settings_panel(locked=live)
problem = ts.settings_problem(settings)
if problem and not live:
    st.error(f"Fix this setting before starting: {problem}.", icon=":material/error:")
if PROBE not in st.session_state:
    st.session_state[PROBE] = run.probe.text if run is not None else ts.example_input(TASKS[settings.train.task]())

if (request := st.session_state.pop(START, None)) is not None and problem is None:
    start(settings, request["steps"])
    st.rerun()  # draw the page for the live run: settings locked, polling on
controls(run, state, problem)
show_message("controls")
st.text_input("Probe input", key=PROBE, on_change=probe_changed, max_chars=120, persist_state="session",
              help="The model greedy-decodes this input every few steps while it trains; its cross-attention is "
              "kept so you can replay it.")

if run is None:
    if problem is None:
        preview_view(settings)
else:
    following = st.session_state.get(DRAWN) == "running" and st.session_state.get(FOLLOW, True)
    st.session_state[DRAWN] = state
    if state != "running":
        run.catch_up()  # the probe at the weights training stopped at
        if following:  # it just stopped: keep showing the newest snapshot
            st.session_state[SNAPSHOT] = run.timeline(run.job.snapshot())[-1][0]
    (live_polling if state == "running" else live_static)()
    if state != "running" and snapshot.step > 0:
        result_panel(run)
