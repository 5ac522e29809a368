"""Train live: train a small Transformer in a worker process of its own and watch its cross-attention form.
Runs beyond the server's training slots wait in line, with their place shown; a session sees only its own run."""

from __future__ import annotations

import re

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import animations, display, runs
from ui import model_registry as registry
from ui.run_settings import (
    DEVICE_LABELS, INIT_LABELS, NORM_LABELS, OPTIMIZER_LABELS, POSITIONAL_LABELS, SCHEDULE_LABELS, TRAIN_DEFAULTS,
    RunSettings, largest_batch, model_problem, settings_problem, settings_summary, task_class, task_defaults,
    task_problem,
)
from ui.state import View
from ui.tables.train import (
    ALL_HEADS, MODEL_FIELDS, MUON_LR, PARAM_FIELDS, PRESET_PROPS, TRAIN, TRAIN_FIELDS, FloatSetting, IntSetting,
    preset_note, setting_text, settings_of, stop_target, values_of,
)
from ui.widgets import finish, header
from transformer.charts.training import (
    curves_figure, format_seconds, mark_step, probe_filename, probe_labels, progress,
)
from transformer.charts.common import COLORBAR_PX
from transformer.store.checkpoints import bundle_to_bytes
from transformer.training.devices import DEVICES, cuda_available
from transformer.runs import workers
from transformer.runs.job import JobLimitError
from transformer.runs.probe import example_input
from transformer.tasks import TASKS, CustomTask, make_task
from transformer.tasks.custom import (
    MAX_DATA_MB, MAX_TITLE, MIN_PAIRS, TOKENIZATIONS, decode_data, parse_pairs, too_large,
)

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
FOLDED = "Settings (locked while the run is live)"
# More room for the run; the curves and the probe side by side only where each column gets LIVE_COLUMN_PX (at
# 1024 px with the sidebar open they were ~270 px: the probe's token labels ran into each other), else stacked
LIVE_COLUMN_PX = 360
LIVE_CSS = f"""<style>
[data-testid="stMainBlockContainer"] {{ padding-top: 1rem; }}
.st-key-train_live_columns [data-testid="stHorizontalBlock"] {{ flex-wrap: wrap; }}
.st-key-train_live_columns [data-testid="stColumn"] {{ min-width: {LIVE_COLUMN_PX}px; }}
.st-key-train_live_columns [data-testid="stColumn"] [data-testid="stColumn"] {{ min-width: 0; }}
</style>"""
LIVE = ("running", "paused", "queued")  # a run in these states is this session's live run
LIVE_CURVES_HEIGHT = 330  # px: the live run's curves and the probe (one head) fit the first screen at 1280x720
PROBE_MAX_HEIGHT = 380
STEP_COUNT_PX = 120  # the Step button's count box: room for 1000 beside its - and + buttons
POLLED = ("running", "queued")  # states whose view redraws itself (a queued run starts by itself)


def intro(live: bool) -> DeltaGenerator:
    """The title and, unless a run is live (its view needs the screen), what the page does."""
    notes = header("Train live")
    if live:
        return notes
    st.markdown(
        "Train a small Transformer right here and watch it learn. Each step shows it a batch of examples and "
        "nudges every weight to make the right next token more likely. Keep an eye on the **cross-attention** "
        "of the probe input: it starts as a blur and sharpens into the alignment the task needs.")
    st.latex(r"\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T} \log p_\theta\left(y_t \mid y_{<t},\, x\right)")
    return notes


# -------------------------------------------------------------------------------------------- settings


@st.cache_data(max_entries=64, show_spinner=False)
def batch_ceiling(settings_key: str, ceiling: int) -> int | None:
    """run_settings.largest_batch for the settings behind `settings_key` (cached: it builds the tokenizer)."""
    return largest_batch(RunSettings.from_key(settings_key), ceiling)


def number(view: View, prop: IntSetting | FloatSetting, disabled: bool, **extra):
    """The number input of a numeric setting, its bounds from the prop; the batch size's upper bound also
    follows the run budget (never below the value already chosen: that one is refused with the estimate)."""
    normal = prop.normal if isinstance(prop, FloatSetting) else None
    args = prop.widget_args()
    if prop.name == "batch_size":
        fits = batch_ceiling(settings_of(view.values()).key(), prop.hi)
        if fits is not None:
            args["max_value"] = max(fits, view.get("batch_size"))
            args["help"] = f"{prop.help} With these settings the run budget allows at most {fits:,}."
    return view.widget(prop.name, st.number_input, prop.label, from_widget=normal, disabled=disabled, **args, **extra)


def grid(view: View, fields: dict, disabled: bool, columns: int = 3) -> None:
    """Number inputs for `fields`, `columns` to a row."""
    cols = st.columns(columns)
    for i, prop in enumerate(fields.values()):
        with cols[i % columns]:
            number(view, prop, disabled)


def check_settings(view: View) -> None:
    """What a link set that cannot be used returns to its default with a note:
    a parameter the task does not have, task parameters that do not go together (shortest > longest), a model
    shape that cannot be built (d_model not divisible by the heads). Values typed on the page stay, with an
    error that blocks Start."""
    task = view.get("task")
    own = task_defaults(task)
    for name, prop in PARAM_FIELDS.items():
        if name not in own and view.get(name) != prop.default:
            view.refuse(name, f"the {task} task has no such setting")
    values = view.values()
    if view.get("device") == "cuda" and not cuda_available():
        view.refuse("device", "this server has no CUDA GPU (torch.cuda.is_available() is False); "
                    "training runs on the CPU")
    checks = ((own, task_problem(task, {name: values[name] for name in own})),
              (MODEL_FIELDS, model_problem(settings_of(values).model)))
    for names, problem in checks:
        for name in names:
            if problem is not None and view.from_link(name):
                view.refuse(name, problem)


def reset_to_preset(view: View) -> None:
    for name in PRESET_PROPS:
        view.reset(name)


def preset_row(view: View, task: str, locked: bool) -> None:
    """What the task's preset sets, the settings changed since, and a button back to the preset."""
    changed = [name for name in PRESET_PROPS if view.get(name) != view.default(name)]
    note = f"**Preset for {task_class(task).title}:** {preset_note(task)}"
    if changed:
        note += " · :orange[changed: " + ", ".join(setting_text(name, view.get(name)) for name in changed) + "]"
    with st.container(horizontal=True, vertical_alignment="center", key="train_preset"):
        st.markdown(note, help="Picking a task loads its preset: the model shape and training recipe measured "
                    "fastest to its bar (transformer/presets.py). Your seed, early stop and device stay.")
        st.button("Reset to preset", key="train_preset_reset", icon=":material/settings_backup_restore:",
                  disabled=locked or not changed, on_click=reset_to_preset, args=(view,))


def section(title: str, icon: str, nested: bool):
    """A collapsed expander, or (inside the live run's settings expander, where expanders cannot nest) a
    bordered container under a bold title."""
    if not nested:
        return st.expander(title, icon=icon)
    box = st.container(border=True)
    box.markdown(f"{icon} **{title}**")
    return box


def settings_panel(view: View, locked: bool) -> RunSettings:
    """Task and its parameters on one row, the task's preset under it; model shape and training settings in two
    expanders below, with a one-line summary (read-only while a run is live, and then inside one collapsed
    expander of its own: see main)."""
    cols = st.columns([1.3, 0.75, 0.75, 2.2], vertical_alignment="bottom")
    with cols[0]:
        task = view.widget("task", st.selectbox, "Task", [*TASKS, CustomTask.name],
                           format_func=lambda name: task_class(name).title,
                           disabled=locked)
    for col, name in zip(cols[1:3], task_defaults(task)):
        with col:
            number(view, PARAM_FIELDS[name], locked)
    cols[3].caption(task_class(task).description)
    if task == CustomTask.name:
        custom_data_panel(view, locked)
    preset_row(view, task, locked)
    shape_col, train_col = st.columns(2, gap="medium")
    with shape_col, section("Model shape", ":material/account_tree:", nested=locked):
        grid(view, MODEL_FIELDS, locked)
        norm_col, pos_col = st.columns(2)
        with norm_col:
            view.widget("norm", st.selectbox, "Norm placement", list(NORM_LABELS), format_func=NORM_LABELS.get,
                        disabled=locked)
        with pos_col:
            view.widget("positional", st.selectbox, "Positional encoding", list(POSITIONAL_LABELS),
                        format_func=POSITIONAL_LABELS.get, disabled=locked)
        qk_col, init_col = st.columns(2, vertical_alignment="bottom")
        with qk_col:
            view.widget("qk_norm", st.toggle, "qk-norm", disabled=locked,
                        help="RMS-normalise each head's queries and keys before their dot product (the attention "
                        "shown is of the normalised ones): steadier training at higher learning rates.")
        with init_col:
            view.widget("init", st.selectbox, "Initial weights", list(INIT_LABELS), format_func=INIT_LABELS.get,
                        disabled=locked, help="Identity: the output weights of every attention and feed-forward "
                        "branch start at zero, so each layer starts by passing its input on (plus a bias), and the "
                        "token embeddings start small. Reverse learns from about a quarter of the examples Xavier "
                        "needs.")
    with train_col, section("Training settings", ":material/tune:", nested=locked):
        grid(view, TRAIN_FIELDS, locked)
        opt_col, muon_col, schedule_col = st.columns(3)
        with opt_col:
            optimizer = view.widget("optimizer", st.selectbox, "Optimizer", list(OPTIMIZER_LABELS),
                                    format_func=OPTIMIZER_LABELS.get, disabled=locked,
                                    help="Muon orthogonalises the update of each weight matrix inside the layers "
                                    "(torch.optim.Muon); Adam trains everything else.")
        with muon_col:
            number(view, MUON_LR, locked or optimizer != "muon")
        with schedule_col:
            view.widget("schedule", st.selectbox, "Learning-rate decay", list(SCHEDULE_LABELS),
                        format_func=SCHEDULE_LABELS.get, disabled=locked,
                        help="After the warm-up the learning rate falls to 2% of its peak by the last step: along a "
                        "line, or half a cosine (high for longer, a softer landing).")
        view.widget("stop_early", st.checkbox, f"Stop once held-out exact match reaches {stop_target(task):.0%}",
                    disabled=locked, help=f"Checked every {TRAIN_DEFAULTS.eval_every} steps on "
                    f"{TRAIN_DEFAULTS.eval_samples} held-out inputs, confirmed on {TRAIN_DEFAULTS.confirm_samples}.")
        if cuda_available():  # on a server without a GPU there is nothing to choose
            view.widget("device", st.selectbox, "Device", list(DEVICES), format_func=DEVICE_LABELS.get,
                        disabled=locked, help="Where the run trains. Auto uses the GPU; the weights you use or "
                        "download are the same either way (kept on the CPU).")
    settings = settings_of(view.values())
    st.caption(settings_summary(settings) + (" · *locked while the run is live*" if locked else ""))
    return settings


TOKENIZATION_LABELS = {"char": "Characters (one token each)", "sentencepiece": "Sentencepiece subwords"}


def upload_problem(view: View, upload) -> str | None:
    """Take a newly uploaded file's text as the data (and its name as the data's name); what is wrong with the
    file (too large, not UTF-8) while it stays uploaded, or None."""
    oversized = too_large(upload.size)  # refused before its bytes are read
    text, why = (None, oversized) if oversized else decode_data(upload.getvalue())
    if text is None:
        return f"{upload.name}: {why}"
    if st.session_state.get("train_custom_file") != upload.file_id:  # each upload is taken once
        st.session_state["train_custom_file"] = upload.file_id
        view.set("custom_data", text)
        view.set("custom_title", upload.name.rsplit(".", 1)[0][:MAX_TITLE].strip() or None)
    return None


def custom_data_panel(view: View, locked: bool) -> None:
    """Your own data: upload a two-column TSV/CSV file or paste pairs, choose the tokenisation, and see every
    problem the checks find (and what they skipped) before starting."""
    with st.container(border=True, key="train_custom"):
        up_col, name_col, tok_col = st.columns([2.2, 1, 1.2])
        with up_col:
            upload = st.file_uploader("Upload a two-column TSV or CSV file (UTF-8): source, target",
                                      type=["tsv", "csv", "txt"], key="train_custom_upload", disabled=locked,
                                      max_upload_size=MAX_DATA_MB)  # the limit the box shows
        why = upload_problem(view, upload) if upload is not None else None  # before the widgets it fills
        with name_col:
            view.widget("custom_title", st.text_input, "Name of the data", max_chars=MAX_TITLE,
                        placeholder="my data", disabled=locked)
        with tok_col:
            view.widget("tokenization", st.radio, "Tokenisation", list(TOKENIZATIONS),
                        format_func=TOKENIZATION_LABELS.get, disabled=locked)
        view.widget("custom_data", st.text_area, "Or paste the pairs, one per line: source, a tab or a comma, "
                    "target", height=160, disabled=locked, placeholder="12\tXII\n13\tXIII",
                    help=f"At most {MAX_DATA_MB} MB. The data stays in this session and in the run's "
                    "settings; a link does not carry it.")
        if why:
            st.error(why, icon=":material/error:")
        if not view.get("custom_data"):
            st.info(f"Upload a file or paste at least {MIN_PAIRS} pairs.", icon=":material/upload_file:")
            return
        parsed = parse_pairs(view.get("custom_data"))
        for problem in parsed.problems:
            st.error(problem, icon=":material/error:")
        for note in parsed.notes:
            st.caption(note)


def default_probe(settings: RunSettings, problem: str | None) -> str:
    """The probe input until one is typed: the task's first held-out example."""
    train = settings.train
    if problem and train.task == CustomTask.name:
        return ""
    return example_input(TASKS[train.task]() if problem else make_task(train.task, **train.task_params))


def check_probe_view(view: View, layers: int, heads: int) -> None:
    """A layer or head the model does not have returns to the default (with a note when a link named it)."""
    if view.get("layer") > layers:
        view.refuse("layer", f"this model has {layers} decoder layer(s)")
    if view.get("head") > heads:
        view.refuse("head", f"this model has {heads} heads per layer")


# -------------------------------------------------------------------------------------------- controls


def show_message(slot: str) -> None:
    if (message := runs.take_message(slot)) is not None:
        getattr(st, message[0])(message[1])


def start(view: View, settings: RunSettings, text: str, steps: int | None = None) -> None:
    """Start a new run (or run `steps` steps, then pause) in place of this session's ended one. When it
    cannot start (the server's line is full, settings the library refuses) a message says why and nothing
    changes: the ended run and its model stay."""
    if not text or runs.preview(settings.key(), text).error:
        view.reset("probe")
        text = default_probe(settings, None)
    try:
        runs.launch(runs.new_run(settings, text), steps)
    except JobLimitError as exc:  # the server's line is full (capacity.QueueFullError)
        runs.say("error", f"Cannot start: {exc}.")
        return
    except ValueError as exc:  # settings the library refuses
        runs.say("error", f"Cannot start: {exc}")
        return
    view.set("follow", True)


def resume(view: View, run: runs.Run) -> None:
    run.resume()
    view.set("follow", True)


def step_clicked(view: View, run: runs.Run | None) -> None:
    """Step N: a paused run runs exactly N more steps; otherwise a new run starts paused and runs N."""
    steps = view.get("step_count")
    if run is not None and run.snapshot().state == "paused":
        run.step(steps)
    else:
        runs.request_start(steps)


def controls(view: View, run: runs.Run | None, state: str | None, problem: str | None) -> None:
    """The run's buttons in one row that wraps where the window is narrow (1024 px, presenter mode), so no label
    is cut short."""
    live = state in LIVE
    with st.container(horizontal=True, vertical_alignment="bottom", key="train_controls"):
        st.button("Start", key="train_start", icon=":material/play_arrow:", type="primary",
                  disabled=live or problem is not None, on_click=runs.request_start)
        st.button("Pause", key="train_pause", icon=":material/pause:", disabled=state not in POLLED,
                  on_click=lambda: run.pause(), help="Pause after the step under way (a waiting run leaves the line).")
        st.button("Resume", key="train_resume", icon=":material/resume:", disabled=state != "paused",
                  on_click=resume, args=(view, run))
        st.button("Stop", key="train_stop", icon=":material/stop:", disabled=not live, on_click=lambda: run.stop(),
                  help="End training for good; the model so far is kept and can be used below.")
        number(view, TRAIN.by_name["step_count"], disabled=False, label_visibility="collapsed",  # Step's count
               width=STEP_COUNT_PX)
        st.button("Step", key="train_step", icon=":material/skip_next:",
                  disabled=state in POLLED or (state != "paused" and problem is not None),
                  on_click=step_clicked, args=(view, run),
                  help="Run exactly this many steps, then pause (a new run starts paused if none is live).")
        st.button("Reset", key="train_reset", icon=":material/restart_alt:", disabled=run is None,
                  on_click=runs.discard_run,
                  help="Stop this run and clear this page (it stays in the runs table on the Checkpoints page).")


def probe_changed(view: View) -> None:
    run = runs.current_run()
    if run is not None and (result := run.probe_now(view.get("probe") or "")).error:
        runs.say("warning", f"The probe keeps its previous input: {result.error}")


def probe_box(view: View, text: str) -> None:
    view.widget("probe", st.text_input, "Probe input", to_widget=lambda _: text, on_change=lambda: probe_changed(view),
                max_chars=120, help="The model greedy-decodes this input every few steps while it trains; its "
                "cross-attention is kept so you can replay it.")


# ------------------------------------------------------------------------------------------- live view


def pick_snapshot(view: View, timeline: list, running: bool) -> int:
    """The probe snapshot to show: the newest while following a running job, else the slider's choice."""
    steps = [step for step, _ in timeline]
    if len(steps) < 2:
        return 0
    following = running and view.get("follow")
    if following or view.get("snapshot") not in steps:
        view.set("snapshot", steps[-1])
    chosen = view.widget("snapshot", st.select_slider, "Snapshot (training step)", options=steps, disabled=following,
                         help="Drag back to replay how the heads formed (turn off Follow training, or pause, first). "
                         f"The probe is decoded every {runs.PROBE_EVERY} steps (less often in long runs).")
    return steps.index(chosen)


def probe_panel(view: View, timeline: list, task, state: str, scrub: DeltaGenerator,
                wide: DeltaGenerator) -> int | None:
    """The probe's output and cross-attention at the chosen snapshot, with its layer/head pickers (the snapshot
    slider and Follow go into `scrub`, above the curves it marks; every head's grid into `wide`, the page's
    width, where its tiles are large enough to read); returns the training step of the snapshot shown (None
    before the first)."""
    if not timeline:
        waiting = "The first snapshot of the probe comes once training starts." if state == "queued" else \
            "Taking the first snapshot of the probe…"
        st.info(waiting, icon=":material/hourglass_top:")
        return None
    running = state in POLLED
    row = scrub.container(horizontal=True, vertical_alignment="center")
    slider_col, follow_col = row.container(), row.container(width="content")  # Follow keeps its whole label
    if running:
        with follow_col:
            view.widget("follow", st.toggle, "Follow",
                        help="Follow training: show the newest snapshot; turn off to replay earlier ones.")
    with slider_col:
        step, result = timeline[pick_snapshot(view, timeline, running)]
    if result.error:
        st.warning(f"The probe input “{result.source}” cannot be decoded: {result.error}")
        return step
    layers, heads = result.cross.shape[:2]
    check_probe_view(view, layers, heads)
    top = st.columns(2)
    with top[0]:  # the options name themselves ("Layer 1", "Head 2"): no labels above, more room for the chart
        layer = view.widget("layer", st.selectbox, "Layer", list(range(1, layers + 1)),
                            format_func=lambda i: f"Layer {i}", label_visibility="collapsed") - 1
    with top[1]:
        head = view.widget("head", st.selectbox, "Head", [ALL_HEADS, *range(1, heads + 1)],
                           format_func=lambda h: "All heads" if h == ALL_HEADS else f"Head {h}",
                           label_visibility="collapsed", help="One head, large, with its tokens; or every head.")
    head = None if head == ALL_HEADS else head - 1
    fig = runs.figures().get("probe", (id(result), layer, head),
                             lambda: first_screen(runs.probe_figure(result, step, layer, head), head))
    filename = probe_filename(task.name, step, layer, head)
    if head is None:
        st.caption(":material/south: Every head of every layer, at the page's width below.")
    with wide if head is None else st.container():
        display.show_figure(fig, filename, key="train_probe_chart")
    expected = task.answer(result.source)
    verdict = "" if expected is None else (" · :green[**right**]" if result.output_text == expected
                                           else f" · :red[**wrong**], expected `{expected}`")
    st.markdown(f"Step **{step:,}**: `{result.source}` → `{result.output_text or '(nothing)'}`{verdict}")
    if head is not None:
        rows, cols = probe_labels(result)
        display.csv_download(display.cross_weights(result.cross, layer, head), rows, cols, filename,
                             key="train_probe_csv")
    st.caption(display.DECODER_ROWS + " Columns: the input tokens.")
    return step


def metrics_line(snapshot) -> None:
    """The latest losses and accuracies on one line above the curves and the probe (a live run's screen has no
    room for more)."""
    latest = snapshot.history[-1] if snapshot.history else {}
    values = {"Training loss": f"{snapshot.loss:.3f}" if snapshot.step else "–",
              "Held-out loss": f"{latest['loss']:.3f}" if latest else "–",
              "Token accuracy": f"{latest['token_accuracy']:.1%}" if latest else "–",
              "Exact match": f"{latest['exact_match']:.1%}" if latest else "–"}
    st.markdown(" · ".join(f"{name} **{value}**" for name, value in values.items()),
                help="Exact match: greedy outputs identical to the answer, on held-out inputs never trained on.")


def queue_line(run: runs.Run) -> str:
    """Where a queued run stands: "2 runs ahead of yours", or next."""
    position = run.position()
    slots, _ = runs.queue_limits()
    busy = f"all {slots} of this server's training slots are busy" if slots > 1 else \
        "this server's training slot is busy"
    if not position:  # its turn came since the snapshot was taken
        return ":blue[**Starting…**]"
    ahead = position - 1
    where = ("yours is next" if ahead == 0 else f"{ahead:,} run{'s' if ahead != 1 else ''} ahead of yours")
    return (f":blue[**Waiting for a training slot:**] {where}. Training starts by itself when one frees up "
            f"({busy}); Pause leaves the line.")


def status_line(run: runs.Run, snapshot) -> None:
    value, text = progress(snapshot, run.settings.target)
    if snapshot.state == "queued":
        st.markdown(queue_line(run))
    elif snapshot.state == "running" and not snapshot.step and not snapshot.probes:
        st.markdown(":green[**Starting a training process…**] (a few seconds: it loads the model code first)")
    elif snapshot.state == "error":
        st.error(f"Training failed at step {snapshot.step:,}: {snapshot.error}. The model as of that step is "
                 "kept: you can still use or download it below.")
    elif snapshot.state in STATE_LINES:  # on the progress bar's line: a live run's screen needs the room
        text = f"{STATE_LINES[snapshot.state]} {text}"
    else:
        st.markdown(f"**Finished:** the run {REASONS.get(snapshot.finished_reason, 'ended')} "
                    f"after {snapshot.step:,} steps ({format_seconds(snapshot.elapsed)}).")
    st.progress(value, text=text)


def live_view(view: View, run: runs.Run) -> None:
    """Progress, curves and the probe of this session's run (its place in line while it waits)."""
    snapshot = run.snapshot()
    run.heartbeat()
    if snapshot.state != runs.drawn_state():
        st.rerun()  # running -> paused/finished: redraw the whole page (controls, polling off)
    status_line(run, snapshot)
    metrics_line(snapshot)
    curves, probe = st.container(key="train_live_columns").columns([1, 1.15], gap="medium")  # LIVE_CSS
    with curves:
        scrub = st.container()
    wide = st.container()
    with probe:
        step = probe_panel(view, run.timeline(snapshot), run.task, snapshot.state, scrub, wide)
    with curves:
        fig = runs.figures().get("curves", (id(run.job), len(snapshot.history), step),
                                 lambda: curves_at(snapshot, run.task.name, step))
        display.show_figure(fig, f"{run.task.name}_training_curves", key="train_curves")
        st.caption(f"{run.task.name.capitalize()}: held-out metrics, measured every "
                   f"{run.settings.train.eval_every} steps"
                   + (". The dotted line marks the step of the probe shown." if step is not None else "."))
        if snapshot.probes:
            animations.training_animation(view, run, snapshot)
    keep_row(run, snapshot)
    view.sync_url()


def curves_at(snapshot, task_name: str, step: int | None):
    """The held-out curves, marked at the probe's `step` (when a probe is shown)."""
    fig = curves_figure(snapshot, task_name).update_layout(  # the caption under it names it: no title
        height=LIVE_CURVES_HEIGHT, title_text=None, margin_t=36)
    return fig if step is None else mark_step(fig, step)


def first_screen(fig, head: int | None):
    """One head's probe heatmap no taller than PROBE_MAX_HEIGHT (its cells shrink, its labels keep their size), so
    it fits the first screen at 1280x720 beside the curves (every head's grid goes below them at its own size)."""
    height, margin = fig.layout.height, fig.layout.margin
    if head is not None and height and height > PROBE_MAX_HEIGHT and fig.layout.width:
        scale = (PROBE_MAX_HEIGHT - margin.t - margin.b) / (height - margin.t - margin.b)
        display.fit(fig, int(margin.l + COLORBAR_PX + (fig.layout.width - margin.l - COLORBAR_PX) * scale))
        fig.update_xaxes(tickmode="linear", dtick=1).update_yaxes(tickmode="linear", dtick=1)  # label every token
    return fig


def keep_clicked(run: runs.Run) -> None:
    key = runs.keep_snapshot(run)
    runs.say("success", f"Kept “{registry.entries()[key].label}”: pick it on the Compare page or in the sidebar.",
             "keep")


def keep_row(run: runs.Run, snapshot) -> None:
    """Keep the weights as of now (a snapshot, at most runs.MAX_SNAPSHOTS per session) to compare them later."""
    kept = [(step, key) for step, key in sorted(run.kept.items()) if key in registry.entries()]
    with st.container(horizontal=True, vertical_alignment="center"):
        st.button(f"Keep weights at step {snapshot.step:,}", key="train_keep", icon=":material/bookmark_add:",
                  disabled=snapshot.step == 0 or snapshot.step in dict(kept), on_click=keep_clicked, args=(run,),
                  help="Keep the model as it is now, to compare it with a later step on the Compare page "
                       f"(at most {runs.MAX_SNAPSHOTS} kept; the oldest goes first).")
        done = f"Kept: {', '.join(f'step {step:,}' for step, _ in kept)}. " if kept else ""
        st.caption(done + "Compare two kept steps, or a step with the finished model, on the Compare page.")
    show_message("keep")


@st.fragment(run_every=runs.POLL_SECONDS)
def live_polling(view: View, run: runs.Run) -> None:
    """The live view while the run trains: it redraws itself every POLL_SECONDS."""
    live_view(view, run)


@st.fragment
def live_static(view: View, run: runs.Run) -> None:
    """The live view of a run that is not stepping: a pick reruns only this part."""
    live_view(view, run)


def preview_view(settings: RunSettings, text: str) -> None:
    """Before Start: the untrained model's cross-attention on the probe."""
    result = runs.preview(settings.key(), text)
    if result.error:
        st.warning(f"The probe input cannot be decoded: {result.error}")
        return
    st.info("This is the **untrained** model: its cross-attention has no structure yet. Press **Start** and "
            "watch it change as the model learns (for *reverse*, an anti-diagonal appears).", icon=":material/info:")
    fig = runs.probe_figure(result, 0, 0, None)
    display.show_figure(fig, probe_filename(settings.train.task, 0, 0, None), key="train_preview_chart")
    st.markdown(f"Untrained output: `{result.output_text or '(nothing)'}`")


# ---------------------------------------------------------------------------------------------- result


def model_name(view: View, run: runs.Run, step: int) -> str:
    """The typed name, else the task and the step the weights are at."""
    return (view.get("name") or "").strip() or f"{run.task.name}-{step}"


def use_model(view: View, run: runs.Run) -> None:
    """Add the run's current weights to this session's models and make them active (a callback: the
    sidebar picker is drawn before the page)."""
    step = run.snapshot().step
    bundle = run.bundle(model_name(view, run, step))
    run.added[step] = registry.add_session_model(bundle, "trained")
    runs.say("success", f"“{bundle.name}” is now the active model: every page uses it (see the sidebar).", "result")


def result_panel(view: View, run: runs.Run) -> None:
    """Name the model, add it to the sidebar's picker, or download it as a checkpoint."""
    st.subheader("Use the trained model")
    snapshot = run.snapshot()
    step, state = snapshot.step, snapshot.state
    name_col, use_col, download_col = st.columns([2, 1, 1], vertical_alignment="bottom")
    with name_col:
        view.widget("name", st.text_input, "Name", to_widget=lambda value: value or "",
                    placeholder=f"{run.task.name}-{step}", max_chars=60,
                    help="Shown in the sidebar's model picker and stored in the checkpoint.")
    name = model_name(view, run, step)
    added = run.added.get(step)
    use_col.button("Use this model", key="train_use", icon=":material/check_circle:", type="primary",
                   width="stretch", disabled=added is not None, on_click=use_model, args=(view, run),
                   help="Adds it to the sidebar's model picker (for this session) and makes it active.")
    download_col.download_button(
        "Download .safetensors", data=lambda: bundle_to_bytes(run.bundle(name)), key="train_download",
        file_name=f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.safetensors", mime="application/octet-stream",
        icon=":material/download:", width="stretch", on_click="ignore",
    )
    show_message("result")
    if added is not None and state == "paused":
        st.caption("This model is in the sidebar's picker. Resume training to add a later version.")


def retrain_link(view: View, run: runs.Run) -> None:
    """The link that fills this page with the run's settings and probe: training is seeded, so Start then
    trains the same model, step for step, on any server (a link to the trained model itself works only where
    the server still keeps it; the note such a link gives elsewhere points here)."""
    probe = run.probe.text if run.probe.text != example_input(run.task) else None
    view_defaults = {name: TRAIN.by_name[name].default for name in ("layer", "head")}  # the settings, not the view
    link = view.link({**values_of(run.settings), "probe": probe, **view_defaults})
    with st.container(key="train_retrain"):
        st.markdown("**Link that retrains this model**")
        st.code(link, language=None, wrap_lines=True)
        st.caption("Opening it fills in this run's task, model shape, training settings and probe input; "
                   "**Start** then trains the same model again, step for step (training is seeded), on this "
                   "server or any other. Links to the trained model itself work only while this server keeps it.")


# ------------------------------------------------------------------------------------------------ page


def main() -> None:
    view = TRAIN.view()
    run = runs.current_run()
    snapshot = run.snapshot() if run is not None else None
    state = snapshot.state if snapshot is not None else None
    live = state in LIVE
    notes = intro(live)
    check_settings(view)  # before the widgets show the values
    areas = [st.container() for _ in range(3)]  # settings, then the controls, then the run ...
    settings_area, controls_area, run_area = (areas[2], areas[0], areas[1]) if live else areas
    if live:  # ... unless a run is live: its view takes the first screen, the locked settings fold below it
        st.html(LIVE_CSS)
        with settings_area, st.expander(FOLDED, icon=":material/settings:", expanded=False):
            settings = settings_panel(view, locked=True)
    else:
        with settings_area:
            settings = settings_panel(view, locked=False)
    problem = settings_problem(settings)
    if problem and settings.train.task == CustomTask.name and not parse_pairs(settings.train.task_params["data"]).ok:
        problem = "your data (upload or paste pairs; the problems found are listed above)"
    if problem and not live:
        settings_area.error(f"Fix this setting before starting: {problem}.", icon=":material/error:")
    shape = (run.settings if run is not None else settings).model
    check_probe_view(view, shape["n_dec_layers"], shape["n_heads"])
    text = view.get("probe")
    if text is not None and view.from_link("probe") and problem is None:
        if (error := runs.preview(settings.key(), text).error) is not None:
            view.refuse("probe", error)
            text = None
    if text is None:
        text = run.probe.text if run is not None else default_probe(settings, problem)

    if (request := runs.take_start_request()) is not None and problem is None:
        start(view, settings, text, request["steps"])
        st.rerun()  # draw the page for the live run: settings locked, polling on
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


def run_view(view: View, run: runs.Run | None, snapshot, settings: RunSettings, text: str,
             problem: str | None) -> None:
    """The untrained preview before a run; the run's live view (from `snapshot` on), its result and its
    retrain link after."""
    if run is None:
        if problem is None:
            preview_view(settings, text)
    else:
        state = snapshot.state
        following = runs.drawn_state() == "running" and view.get("follow")
        runs.set_drawn_state(state)
        if state not in POLLED:
            run.catch_up()  # the probe at the weights training stopped at
            if following:  # it just stopped: keep showing the newest snapshot
                view.set("snapshot", run.timeline(run.snapshot())[-1][0])
        (live_polling if state in POLLED else live_static)(view, run)
        if state not in POLLED and snapshot.step > 0:
            result_panel(view, run)
        retrain_link(view, run)


main()
