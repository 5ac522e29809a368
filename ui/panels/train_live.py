"""The Train page's live view: progress and status, the loss and accuracy curves, the probe's cross-attention as
training forms it (scrub back through its snapshots), and the untrained preview before Start."""

from __future__ import annotations

import time

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer.charts.common import COLORBAR_PX
from transformer.charts.training import curves_figure, format_seconds, mark_step, probe_filename, probe_labels, progress
from transformer.runs.job import Ending, State
from transformer.store.model_store import StoreError
from transformer.tasks import CustomTask
from transformer.training.diagnosis import Memorising, memorising, preset_pairs
from ui import animations, display, runs
from ui.code_links import code_link
from ui import model_registry as registry
from ui.run_settings import RunSettings, few_pairs_note
from ui.failure import callback, fragment
from ui.markdown import code
from ui.state import View
from ui.tables.train import ALL_HEADS
from transformer.i18n import Texts, sentences, t

STATE_LINES = Texts({State.RUNNING: "train.live.running", State.PAUSED: "train.live.paused"})
# How a finished or stopped run ended, as one sentence each ({steps}: the steps it ran, {time}: how long it
# trained); a failed one (ERROR, KILLED) shows its error instead
ENDINGS = {Ending.TARGET: "train.live.end.target", Ending.MAX_STEPS: "train.live.end.max_steps",
           Ending.TIME_LIMIT: "train.live.end.time_limit", Ending.STOPPED: "train.live.end.stopped",
           Ending.SESSION_GONE: "train.live.end.session_gone"}
ENDED = "train.live.end.other"
LIVE_CURVES_HEIGHT = 330  # px: the live run's curves and the probe (one head) fit the first screen at 1280x720
PROBE_MAX_HEIGHT = 380


def show_message(slot: str) -> None:
    if (message := runs.take_message(slot)) is not None:
        getattr(st, message[0])(message[1])


def check_probe_view(view: View, layers: int, heads: int) -> None:
    """A layer or head the model does not have returns to the default (with a note when a link named it)."""
    if view.get("layer") > layers:
        view.refuse("layer", t("train.link.layers", n=layers))
    if view.get("head") > heads:
        view.refuse("head", t("train.link.heads", n=heads))


def probe_changed(view: View) -> None:
    run = runs.current_run()
    if run is not None and (result := run.probe_now(view.get("probe") or "")).error:
        runs.say("warning", t("train.live.probe_kept", error=result.error))


def probe_box(view: View, text: str) -> None:
    view.widget("probe", st.text_input, t("train.live.probe"), to_widget=lambda _: text,
                on_change=lambda: probe_changed(view), max_chars=120, help=t("train.live.probe_help"))


def pick_snapshot(view: View, timeline: list, running: bool) -> int:
    """The probe snapshot to show: the newest while following a running job, else the slider's choice."""
    steps = [step for step, _ in timeline]
    if len(steps) < 2:
        return 0
    following = running and view.get("follow")
    if following or view.get("snapshot") not in steps:
        view.set("snapshot", steps[-1])
    chosen = view.widget("snapshot", st.select_slider, t("train.live.snapshot"), options=steps, disabled=following,
                         help=t("train.live.snapshot_help", n=runs.PROBE_EVERY))
    return steps.index(chosen)


def probe_panel(view: View, timeline: list, task, state: str, scrub: DeltaGenerator,
                wide: DeltaGenerator) -> int | None:
    """The probe's output and cross-attention at the chosen snapshot, with its layer/head pickers (the snapshot
    slider and Follow go into `scrub`, above the curves it marks; every head's grid into `wide`, the page's
    width, where its tiles are large enough to read); returns the training step of the snapshot shown (None
    before the first)."""
    if not timeline:
        st.info(t("train.live.first_later" if state == State.QUEUED else "train.live.first_now"),
                icon=":material/hourglass_top:")
        return None
    running = state in runs.POLLED
    row = scrub.container(horizontal=True, vertical_alignment="center")
    slider_col, follow_col = row.container(), row.container(width="content")  # Follow keeps its whole label
    if running:
        with follow_col:
            view.widget("follow", st.toggle, t("train.live.follow"), help=t("train.live.follow_help"))
    with slider_col:
        step, result = timeline[pick_snapshot(view, timeline, running)]
    if result.error:
        st.warning(t("train.live.probe_error", probe=result.source, error=result.error))
        return step
    layers, heads = result.cross.shape[:2]
    check_probe_view(view, layers, heads)
    top = st.columns(2)
    with top[0]:  # the options name themselves ("Layer 1", "Head 2"): no labels above, more room for the chart
        layer = view.widget("layer", st.selectbox, t("masks.layer"), list(range(1, layers + 1)),
                            format_func=lambda i: t("attention.layer_n", n=i), label_visibility="collapsed") - 1
    with top[1]:
        head = view.widget("head", st.selectbox, t("masks.head"), [ALL_HEADS, *range(1, heads + 1)],
                           format_func=lambda h: t("train.live.all_heads") if h == ALL_HEADS
                           else t("attention.head_n", n=h), label_visibility="collapsed",
                           help=t("train.live.head_help"))
    head = None if head == ALL_HEADS else head - 1
    fig = runs.figures().get("probe", (id(result), layer, head),
                             lambda: first_screen(runs.probe_figure(result, step, layer, head), head))
    filename = probe_filename(task.name, step, layer, head)
    if head is None:
        st.caption(":material/south: " + t("train.live.grid_below"))
    with wide if head is None else st.container():  # one head at its own size: stretched, its cells went flat
        display.show_figure(fig, filename, key="train_probe_chart", width="stretch" if head is None else "content")
    expected = task.answer(result.source)
    verdict = "" if expected is None else (t("train.live.right") if result.output_text == expected
                                           else t("train.live.wrong", expected=code(expected)))
    st.markdown(t("train.live.probe_line", step=step, probe=code(result.source),
                  output=code(result.output_text or t("checkpoints.evaluate.nothing"))) + verdict)
    if head is not None:
        rows, cols = probe_labels(result)
        display.csv_download(display.cross_weights(result.cross, layer, head), rows, cols, filename,
                             key="train_probe_csv")
    st.caption(display.decoder_rows() + " " + t("train.live.columns"))
    code_link("attention", text=result.source, kind="cross", layer=layer, head=head)
    return step


def metrics_line(snapshot) -> None:
    """The latest losses and accuracies on one line above the curves and the probe (a live run's screen has no
    room for more)."""
    latest = snapshot.history[-1] if snapshot.history else {}
    values = {t("train.live.training_loss"): f"{snapshot.loss:.3f}" if snapshot.step else "–",
              t("train.live.held_out_loss"): f"{latest['loss']:.3f}" if latest else "–",
              t("checkpoints.evaluate.token_accuracy"): f"{latest['token_accuracy']:.1%}" if latest else "–",
              t("errors.exact_match"): f"{latest['exact_match']:.1%}" if latest else "–"}
    st.markdown(" · ".join(f"{name} **{value}**" for name, value in values.items()),
                help=t("train.live.metrics_help"))


def memorising_note(run: runs.Run, found: Memorising) -> None:
    """Say that the run is learning its training pairs by heart rather than the task, and what helps."""
    seen = []
    if found.rising:
        seen.append(t("train.memorising.rising", step=found.best_step, best=found.best_loss, loss=found.loss,
                      train=found.train_loss))
    if found.gap:
        seen.append(t("train.memorising.gap", train=found.train_accuracy, held_out=found.accuracy,
                      exact=found.exact_match))
    helps = [t("train.memorising.helps", more=more_pairs(run.task)), t("train.memorising.smaller")]
    if found.rising:
        helps.append(t("train.memorising.fewer_steps", step=found.best_step))
    st.warning(t("train.memorising.title", text=sentences(seen + helps)),
               icon=":material/school:")


def more_pairs(task) -> str:
    """The sentence on data size: the run's own pairs against what the recipe needs and the presets train on."""
    if task.name == CustomTask.name:
        return t("train.memorising.more_own", n=task.card_params()["train_pairs"], note=few_pairs_note())
    low, high = preset_pairs()
    return t("train.memorising.more_different", low=low, high=high)


def queue_line(run: runs.Run) -> str:
    """Where a queued run stands: "2 runs ahead of yours", or next."""
    position = run.position()
    slots, _ = runs.queue_limits()
    busy = t("train.queue.busy", n=slots) if slots > 1 else t("train.queue.busy_one")
    if not position:  # its turn came since the snapshot was taken
        return t("train.queue.starting")
    ahead = position - 1
    where = t("train.queue.next") if ahead == 0 else t("train.queue.ahead", n=ahead)
    return t("train.queue.waiting", where=where, busy=busy)


def ending(snapshot, target: float | None, advise: bool) -> str:
    """How a finished run ended. One that ran out of steps under its target says by how much and, with
    `advise`, what to try: a preset misses its bar on some seeds (`addition`'s on 3 of 18 on one CPU kind:
    docs/MEASUREMENTS.md, "How often addition's preset misses its bar here")."""
    parts = [t(ENDINGS.get(snapshot.finished_reason, ENDED), steps=snapshot.step,
               time=format_seconds(snapshot.elapsed))]
    if short := snapshot.short_of(target):
        parts.append(t("train.live.end.short", right=short[0], samples=short[1], target=target))
        if advise:
            parts.append(t("train.live.end.advice"))
    return sentences(parts)


def status_line(run: runs.Run, snapshot, advise: bool) -> None:
    """The line above the progress bar where the state has one (in line, starting, resuming, failed, ended), then
    the bar. The line has its slot in every state: a poll that drew fewer elements than the last left the last one's
    metrics line below its own while it watched the run (runs.watch_until_next_poll), two lines of metrics at once."""
    value, text = progress(snapshot, run.settings.target)
    line = st.empty()
    if snapshot.state == State.QUEUED:
        line.markdown(queue_line(run))
    elif snapshot.state == State.RUNNING and not snapshot.step and not snapshot.probes:
        line.markdown(t("train.live.starting"))
    elif snapshot.state == State.RUNNING and snapshot.parked:
        line.markdown(t("train.live.resuming"))
    elif snapshot.state == State.PAUSED and snapshot.parked:
        text = sentences([STATE_LINES[State.PAUSED], t("train.live.parked"), text])
    elif snapshot.state == State.ERROR:
        line.error(t("train.live.failed", step=snapshot.step, error=snapshot.error))
    elif snapshot.state in STATE_LINES:  # on the progress bar's line: a live run's screen needs the room
        text = f"{STATE_LINES[snapshot.state]} {text}"
    else:
        line.markdown(ending(snapshot, run.settings.target, advise))
    st.progress(value, text=text)


def newest(run: runs.Run):
    """The run's newest snapshot; a run that has changed state since the page was drawn (running -> paused or
    finished) reruns the whole page instead (its controls, the polling off)."""
    snapshot = run.snapshot()
    if snapshot.state != runs.drawn_state():
        st.rerun()
    return snapshot


def live_status(run: runs.Run):
    """The run's progress (its place in line while it waits) and latest metrics; returns the snapshot drawn."""
    snapshot = newest(run)
    run.heartbeat()
    found = memorising(snapshot.history)
    status_line(run, snapshot, advise=found is None)  # a memorising run's note says what helps instead
    metrics_line(snapshot)
    note = st.empty()  # in every poll, as the status line: a note that no longer holds goes with the poll that says so
    if found is not None:
        with note:
            memorising_note(run, found)
    return snapshot


def live_charts(view: View, run: runs.Run, snapshot, now) -> None:
    """The curves and the probe of this session's run as of `snapshot`, and the button that keeps its weights as of
    `now` (the run's newest snapshot)."""
    curves, probe = st.container(key="train_live_columns").columns([1, 1.15], gap="medium")  # LIVE_CSS
    with curves:
        scrub = st.container()
    wide = st.container()
    with probe:
        step = probe_panel(view, run.timeline(snapshot), run.task, snapshot.state, scrub, wide)
    with curves:
        every = run.settings.train.eval_every
        if not snapshot.history:
            st.info(t("train.live.curves_later", n=every), icon=":material/show_chart:")
        else:
            fig = runs.figures().get("curves", (id(run.job), len(snapshot.history), step),
                                     lambda: curves_at(snapshot, run.task.name, step))
            display.show_figure(fig, f"{run.task.name}_training_curves", key="train_curves")
            st.caption(t("train.live.curves_marked" if step is not None else "train.live.curves", n=every))
        if snapshot.probes:
            animations.training_animation(view, run, snapshot)
    keep_row(run, now)
    view.sync_url()


def curves_at(snapshot, task_name: str, step: int | None):
    """The held-out curves, marked at the probe's `step` (when a probe is shown)."""
    fig = curves_figure(snapshot, task_name).update_layout(  # the caption under it names it: no title
        height=LIVE_CURVES_HEIGHT, title_text=None, margin_t=88)  # the legend's two rows, below the hover toolbar
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
    try:
        key = runs.keep_snapshot(run)
    except StoreError as exc:
        runs.say("error", t("train.live.not_kept", error=exc), "keep")
        return
    runs.say("success", t("train.live.kept", model=registry.entries()[key].label), "keep")


def keep_row(run: runs.Run, snapshot) -> None:
    """Keep the weights as of now (a snapshot, at most runs.MAX_SNAPSHOTS per session) to compare them later."""
    kept = [(step, key) for step, key in sorted(run.kept.items()) if key in registry.entries()]
    with st.container(horizontal=True, vertical_alignment="center"):
        running = snapshot.state == State.RUNNING
        label = t("train.live.keep_now") if running else t("train.live.keep", step=snapshot.step)
        st.button(label, key="train_keep", icon=":material/bookmark_add:",  # running: the step moves on before a click
                  disabled=snapshot.step == 0 or snapshot.step in dict(kept), on_click=callback(keep_clicked),
                  args=(run,), help=t("train.live.keep_help", n=runs.MAX_SNAPSHOTS))
        done = t("train.live.kept_steps", steps=t("app.list_items").join(t("charts.step", n=f"{step:,}")
                                                                          for step, _ in kept)) if kept else ""
        st.caption(done + t("train.live.keep_caption"))
    show_message("keep")


def live_polling(view: View, run: runs.Run) -> None:
    """The live view while the run trains, in two fragments that redraw themselves: its progress every
    POLL_SECONDS, and its charts, renewed, every CHART_SECONDS. Each fragment run sends all its elements to the
    browser again, and the browser draws them again whether they changed or not: on a 2-core AVX2 laptop the
    charts sent at every progress poll cost Chromium a fifth of a core, which training lost (docs/MEASUREMENTS.md).
    Between its polls the progress fragment watches for the run's end (runs.watch_until_next_poll); the charts'
    renewal, like a click, ends that watch and runs next."""
    fragment(live_poll, run_every=runs.POLL_SECONDS)(run)
    fragment(live_chart_renewal, run_every=runs.CHART_SECONDS)(view, run)


def live_poll(run: runs.Run) -> None:
    polled = time.monotonic()
    now = live_status(run)
    runs.watch_until_next_poll(run, polled, now.state, now.step)


def live_chart_renewal(view: View, run: runs.Run) -> None:
    now = newest(run)
    live_charts(view, run, runs.chart_snapshot(run, now), now)


@fragment
def live_static(view: View, run: runs.Run) -> None:
    """The live view of a run that is not stepping: a pick reruns only this part."""
    now = live_status(run)
    live_charts(view, run, now, now)


def preview_view(settings: RunSettings, text: str) -> None:
    """Before Start: the untrained model's cross-attention on the probe."""
    result = runs.preview(settings.key(), text)
    if result.error:
        st.warning(t("train.live.preview_error", error=result.error))
        return
    st.info(t("train.live.untrained"), icon=":material/info:")
    fig = runs.probe_figure(result, 0, 0, None)
    display.show_figure(fig, probe_filename(settings.train.task, 0, 0, None), key="train_preview_chart")
    st.markdown(t("train.live.untrained_output", output=code(result.output_text or t("checkpoints.evaluate.nothing"))))
