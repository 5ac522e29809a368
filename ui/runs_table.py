"""The runs table (Checkpoints page): every training run of this session (running, paused, finished, failed)
and every other model it can use (pretrained, uploaded, kept snapshots, trained models from a link) in one
table: task, shape, settings, steps, time, final metrics. Pick two to compare (the Compare page opens with
both), one to make active, one to download."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from transformer.i18n import Texts, t
from transformer.runs.job import Ending, JobSnapshot, State
from transformer.store.checkpoints import bundle_to_bytes
from transformer.store.model_store import StoreError
from transformer.tasks import TASKS

from . import display
from . import model_registry as registry
from . import runs
from .failure import callback
from .run_settings import OPTIMIZER_LABELS
from .state import View
from .tables.compare import COMPARE
from .tables.train import PARAM_FIELDS, setting_text

TABLE = "runs_table"  # widget key of the table (its selection)
REFUSED = "runs_table_refused"  # session_state: why Make active could not add a run's model
COMPARE_PAGE = "pages/explore/compare.py"
ORIGIN_NAMES = Texts({"shipped": "checkpoints.origin.shipped", "trained": "checkpoints.origin.trained",
                      "uploaded": "checkpoints.origin.uploaded", "snapshot": "runs.origin.snapshot"})
STATE_NAMES = Texts({State.IDLE: "runs.state.idle", State.QUEUED: "runs.state.queued",
                     State.RUNNING: "runs.state.running", State.PAUSED: "runs.state.paused",
                     State.STOPPED: "runs.state.stopped", State.FINISHED: "runs.state.finished",
                     State.ERROR: "runs.state.error"})
# Why a run ended, where that says more than its state (a "stopped" or "failed" run by the user or an error: no more)
REASONS = Texts({Ending.TARGET: "runs.reason.target", Ending.MAX_STEPS: "runs.reason.max_steps",
                 Ending.TIME_LIMIT: "runs.reason.time_limit", Ending.SESSION_GONE: "runs.reason.session_gone",
                 Ending.KILLED: "runs.reason.killed"})
COLUMNS = Texts({"Source": "runs.column.source", "State": "runs.column.state", "Model": "app.model",
                 "Task": "compare.facts.task", "Shape": "compare.facts.shape", "Settings": "compare.settings.header",
                 "Steps": "runs.column.steps", "Time (s)": "runs.column.time", "Exact match": "errors.exact_match",
                 "Token accuracy": "checkpoints.evaluate.token_accuracy", "Loss": "checkpoints.evaluate.loss"})


@dataclass(frozen=True)
class Row:
    """One line of the table: `run` for a training run of this session, else the model's registry `key`."""

    id: str
    values: dict
    run: runs.Run | None = None
    key: str | None = None


def shape_text(config: dict) -> str:
    """"2+2 × 4 heads, d 64": encoder + decoder layers, heads, d_model."""
    return t("runs.shape", enc=config["n_enc_layers"], dec=config["n_dec_layers"], heads=config["n_heads"],
             d_model=config["d_model"])


def _settings(train: dict | None) -> str:
    if not train:
        return "–"
    optimizer = train.get("optimizer", "?")
    return t("runs.settings", optimizer=OPTIMIZER_LABELS.get(optimizer, optimizer), lr=f"{train.get('lr', 0):g}",
             batch=train.get("batch_size", "?"))


def _task(name: str, params: dict) -> str:
    """The task's title and its short settings (a long one, such as a data set's text, as "…")."""
    title = TASKS[name].title if name in TASKS else name
    shown = [_parameter(k, v) for k, v in list(params.items())[:8]]
    return title + (f" ({t('app.list_comma').join(shown)})" if shown else "")


def _parameter(name: str, value) -> str:
    """A task parameter as the Train page names it ("Longest string 16"); one it has no field for, name=value."""
    if name in PARAM_FIELDS and isinstance(value, int):
        return setting_text(name, value)
    return f"{name}={value if len(str(value)) <= 40 else '…'}"


def _line(source: str, state: str, name: str, task: str, shape: str, settings: str, steps, seconds, metrics: dict
          ) -> dict:
    pct = {k: None if metrics.get(k) is None else 100 * metrics[k] for k in ("exact_match", "token_accuracy")}
    return {"Source": source, "State": state, "Model": name, "Task": task, "Steps": steps, "Time (s)": seconds,
            "Exact match": pct["exact_match"], "Shape": shape, "Settings": settings,
            "Token accuracy": pct["token_accuracy"], "Loss": metrics.get("loss")}


# The columns shown until "Every column" is on: what tells the runs apart (a run's model is named after its task)
# and fits a 1024-pixel window with the sidebar open; the rest made the table scroll sideways there
FEW_COLUMNS = ("Source", "State", "Model", "Steps", "Exact match")


def run_row(run: runs.Run) -> Row:
    snap = run.snapshot()
    train = run.settings.train.to_dict()
    final = snap.history[-1] if snap.history else {}
    line = _line(t("runs.run", n=run.number), state_text(snap), f"{run.task.name}-run{run.number}",
                 _task(train["task"], train["task_params"]), shape_text(run.settings.model), _settings(train),
                 snap.step, round(snap.elapsed, 1), final)
    return Row(f"run:{run.number}", line, run=run)


def state_text(snap: JobSnapshot) -> str:
    """A run's state, and why it ended where that says more: "finished (max steps)", "stopped (session gone)"."""
    state = STATE_NAMES.get(snap.state, snap.state)
    if (reason := REASONS.get(snap.finished_reason)) is not None:
        state += t("runs.because", reason=reason)
    return state


def model_row(key: str, entry: registry.ModelEntry, infos: dict) -> Row:
    """A model from its card (a pretrained one from its file header alone: no weights loaded)."""
    info = infos.get(key)
    if info is not None:
        task, params, config, card = info.task, info.task_params, info.config, info.card
    else:
        bundle = registry.bundle_for(key)
        task, params, card = bundle.task.name, bundle.task.card_params(), bundle.card
        config = bundle.config.to_dict()
    name = registry.display_name(key)  # as the picker names it
    source = ORIGIN_NAMES.get(entry.origin, entry.origin)
    return Row(key, _line(source, t("runs.state.ready"), name, _task(task, params), shape_text(config),
                          _settings(card.get("train")), card.get("steps"), card.get("seconds"), card), key=key)


def rows() -> list[Row]:
    """The session's runs (oldest first), then every model not already a run's (pretrained first)."""
    session_runs = runs.session_runs()
    from_runs = {key for run in session_runs for key in run.added.values()}
    infos = {registry.shipped_key(i.path): i for i in registry.shipped_infos() if i.error is None}
    return [run_row(run) for run in session_runs] + [
        model_row(key, entry, infos) for key, entry in registry.entries().items() if key not in from_runs]


def model_key(row: Row) -> str:
    """The registry key of a row's model: a run's weights as of now join the session's models first."""
    return row.key if row.run is None else runs.run_model(row.run)


def picked(table: list[Row]) -> list[Row]:
    event = st.session_state.get(TABLE)
    return [table[i] for i in (event["selection"]["rows"] if event else []) if i < len(table)]


def activate(table: list[Row]) -> None:
    """on_click of Make active (before the sidebar's picker renders)."""
    chosen = picked(table)
    if len(chosen) == 1:
        try:
            registry.set_active(model_key(chosen[0]))
        except StoreError as exc:
            st.session_state[REFUSED] = refusal(exc)


def refusal(exc: StoreError) -> str:
    return t("runs.not_added", error=exc)


def file_name(row: Row) -> str:
    if row.run is not None:
        return f"{row.run.task.name}-run{row.run.number}.safetensors"
    return registry.file_name(registry.entries()[row.key])


def file_bytes(row: Row) -> bytes:
    """The row's model as a .safetensors file (made only when the download is clicked)."""
    if row.run is not None:
        return bundle_to_bytes(row.run.bundle(file_name(row).removesuffix(".safetensors")))
    entry = registry.entries()[row.key]
    return entry.path.read_bytes() if entry.path is not None else bundle_to_bytes(registry.bundle_for(row.key))


def section(view: View) -> None:
    """The table: the few columns that fit a narrow window, or every column (it may then scroll sideways, the
    model's name pinned), as the page's `every_column` switch says."""
    st.subheader(t("runs.header"))
    every = view.widget("every_column", st.toggle, t("runs.every_column"), help=t("runs.every_column_help"))
    table = rows()
    frame = pd.DataFrame([r.values for r in table])
    st.dataframe(frame if every else frame[list(FEW_COLUMNS)], hide_index=True, key=TABLE, on_select="rerun",
                 selection_mode="multi-row", placeholder="—", column_config={
                     **{name: st.column_config.TextColumn(COLUMNS[name]) for name in COLUMNS},
                     "Source": st.column_config.TextColumn(COLUMNS["Source"], width=85),
                     "State": st.column_config.TextColumn(COLUMNS["State"], width=150),
                     "Model": st.column_config.TextColumn(COLUMNS["Model"], pinned=every, width=230),
                     "Steps": st.column_config.NumberColumn(COLUMNS["Steps"], format="localized"),
                     "Time (s)": st.column_config.NumberColumn(COLUMNS["Time (s)"], format="%.1f"),
                     "Exact match": st.column_config.NumberColumn(COLUMNS["Exact match"], format="%.1f%%",
                                                                  help=t("runs.exact_match_help")),
                     "Token accuracy": st.column_config.NumberColumn(COLUMNS["Token accuracy"], format="%.1f%%"),
                     "Loss": st.column_config.NumberColumn(COLUMNS["Loss"], format="%.4f")})
    chosen = picked(table)
    with st.container(horizontal=True):
        compare = st.button(t("runs.compare"), key="runs_compare", icon=":material/compare:",
                            disabled=len(chosen) != 2, help=t("runs.compare_help"))
        st.button(t("checkpoints.actions.activate"), key="runs_activate", icon=":material/check_circle:",
                  disabled=len(chosen) != 1, on_click=callback(activate), args=(table,), help=t("runs.activate_help"))
        if len(chosen) == 1:
            row = chosen[0]
            st.download_button(t("checkpoints.actions.download"), data=lambda: file_bytes(row),
                               file_name=file_name(row), mime="application/octet-stream",
                               key="runs_download", icon=":material/download:", on_click="ignore")
        else:
            st.button(t("checkpoints.actions.download"), key="runs_download_off", icon=":material/download:",
                      disabled=True, help=t("runs.download_help"))
        display.table_download(frame.rename(columns=dict(COLUMNS)), "runs_and_models", key="runs_table_csv",
                               label=t("runs.csv"))
    st.caption(t("runs.caption", n=runs.MAX_HISTORY))
    if (message := st.session_state.pop(REFUSED, None)) is not None:
        st.error(message, icon=":material/block:")
    if compare and len(chosen) == 2:
        view = COMPARE.view()
        try:
            a, b = (model_key(row) for row in chosen)
        except StoreError as exc:
            st.error(refusal(exc), icon=":material/block:")
            return
        view.set("a", a)
        view.set("b", b)
        st.switch_page(COMPARE_PAGE)
