"""Checkpoints: every model this session can use (pretrained, trained here, uploaded) in one table; a model's
card; make it active, evaluate it on fresh held-out samples, download or remove it; upload a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import model_registry as registry
from ui import runs_table, uploads
from ui.failure import callback, fragment
from ui.markdown import literal
from ui.sidebar import card_notes, model_card_lines
from ui.state import View
from ui.tables.checkpoints import CHECKPOINTS, SAMPLES
from ui.widgets import finish, header, no_model
from transformer.network.budget import BudgetError, evaluation_estimate
from transformer.bundle import ModelBundle
from transformer.store.cards import metrics_source
from transformer.store.checkpoints import bundle_to_bytes
from transformer.store.headers import CheckpointInfo
from transformer.analysis.examples import Example, decode_examples
from transformer.analysis.evaluation import evaluate_bundle
from transformer.tasks import TASKS
from transformer.network.tokenizers import SPECIALS
from transformer.i18n import Texts, t

EXAMPLE_POOL = 200  # at most this many of the evaluated pairs are decoded again for worked examples
SHOWN_EXAMPLES = 4
ORIGINS = Texts({"shipped": "checkpoints.origin.shipped", "trained": "checkpoints.origin.trained",
                 "uploaded": "checkpoints.origin.uploaded", "snapshot": "checkpoints.origin.snapshot"})
TOKENIZERS = Texts({"char": "checkpoints.card.char", "sentencepiece": "checkpoints.card.sentencepiece"})
COLUMNS = Texts({"Model": "app.model", "Origin": "compare.facts.origin", "Task": "compare.facts.task",
                 "Exact match": "errors.exact_match"})  # the models table's columns (its data keeps these names)


@dataclass(frozen=True)
class Evaluation:
    metrics: dict
    seed: int
    examples: list[Example]


def intro() -> DeltaGenerator:
    notes = header(t("app.page.checkpoints"))
    st.markdown(t("checkpoints.intro"))
    st.latex(t("checkpoints.formula_name")
             + r" = \frac{1}{N}\sum_{i=1}^{N} \mathbf{1}\!\left[\,\hat{y}^{(i)} = y^{(i)}\right]")
    st.markdown(t("checkpoints.formula_where"))
    return notes


def inspected(view: View) -> str:
    """The entry key whose card is shown: the one picked, else the active model."""
    return view.get("inspect") or registry.active_key()


# ------------------------------------------------------------------------------------------------ table


def task_title(name: str) -> str:
    return TASKS[name].title if name in TASKS else name


@st.cache_data(show_spinner=False, max_entries=64)
def session_size(key: str, _bundle: ModelBundle) -> int:
    """Bytes of a session model's .safetensors file, computed once per model (its key is never reused)."""
    return len(bundle_to_bytes(_bundle))


def created_at(card: dict) -> datetime | None:
    try:
        return datetime.fromisoformat(str(card.get("created")))
    except ValueError:
        return None


def row(key: str, origin: str, name: str, task: str, card: dict) -> dict:
    return {
        "key": key, "Active": "★" if key == registry.active_key() else "", "Model": name,
        "Origin": ORIGINS[origin], "Task": task_title(task),
        "Exact match": None if card.get("exact_match") is None else 100 * card["exact_match"],
    }


def shipped_row(info: CheckpointInfo) -> dict:
    """From the file header alone: listing the zoo loads no weights."""
    return row(registry.shipped_key(info.path), "shipped", registry.shipped_name(info.path.stem), info.task, info.card)


def session_row(key: str, origin: str) -> dict:
    bundle = registry.bundle_for(key)
    return row(key, origin, bundle.name, bundle.task.name, bundle.card)


def model_table(entries: dict[str, registry.ModelEntry]) -> pd.DataFrame:
    """One row per model this session can use, pretrained first; broken shipped files are reported."""
    infos = registry.shipped_infos()
    for info in infos:
        if info.error is not None:
            st.warning(literal(t("checkpoints.broken", name=info.path.name, error=info.error)),
                       icon=":material/warning:")
    rows = [shipped_row(i) for i in infos if registry.shipped_key(i.path) in entries]
    rows += [session_row(key, e.origin) for key, e in entries.items() if e.origin != "shipped"]
    return pd.DataFrame(rows).set_index("key")


def table_key(view: View) -> str:
    return view.widget_key("table_version", slot=f"v{view.get('table_version')}")


def row_picked(view: View, keys: list[str]) -> None:
    """on_select of the table: the picked row's model gets the card below."""
    rows = st.session_state[table_key(view)].selection.rows
    if rows:
        view.set("inspect", keys[rows[0]])


def table_section(view: View, entries: dict[str, registry.ModelEntry]) -> None:
    st.subheader(t("checkpoints.available"))
    table = model_table(entries)
    keys = list(table.index)
    picked = [keys.index(inspected(view))] if inspected(view) in keys else []
    event = st.session_state.get(table_key(view))
    if event is not None and list(event.selection.rows) != picked:  # the card changed elsewhere (the model
        view.set("table_version", view.get("table_version") + 1)  # picker, a link, Remove): a fresh table
    st.dataframe(  # widget takes the new row as its default selection
        table, hide_index=True, key=table_key(view), on_select=lambda: row_picked(view, keys),
        selection_mode="single-row", selection_default={"selection": {"rows": picked}}, placeholder="—",
        column_config={
            "Active": st.column_config.TextColumn("★", help=t("checkpoints.table.active_help"), width=40),
            "Model": st.column_config.TextColumn(COLUMNS["Model"], width=250),
            "Origin": st.column_config.TextColumn(COLUMNS["Origin"]),
            "Task": st.column_config.TextColumn(COLUMNS["Task"]),
            "Exact match": st.column_config.NumberColumn(
                COLUMNS["Exact match"], format="%.1f%%", help=t("checkpoints.table.exact_match_help")),
        },
    )
    st.caption(t("checkpoints.table.caption"))
    st.caption(f":material/hard_drive: {registry.share_text()}")


# ------------------------------------------------------------------------------------------------- card


def file_size(key: str, entry: registry.ModelEntry, bundle: ModelBundle) -> int:
    """Bytes of a model's .safetensors file: the shipped file's, or the one a session model downloads as."""
    return entry.path.stat().st_size if entry.path is not None else session_size(key, bundle)


def card_facts(bundle: ModelBundle, size: int) -> None:
    """The model card: task, shape, training, metrics, tokenizer; config and training settings on request."""
    card, tokenizer, facts = bundle.card, bundle.tokenizer, bundle.facts()
    st.markdown(f"_{bundle.task.description}_")
    lines = model_card_lines(facts)
    if card.get("token_accuracy") is not None:
        lines.append(t("checkpoints.card.token_accuracy", share=card["token_accuracy"]))
    if card.get("exact_match") is not None or card.get("token_accuracy") is not None:
        lines.append(t("checkpoints.card.measured_on", source=metrics_source(card)))
    lines.append(t("checkpoints.card.tokenizer", kind=TOKENIZERS.get(tokenizer.kind, tokenizer.kind),
                   n=tokenizer.vocab_size, special=len(SPECIALS)))
    if bundle.task.params:
        lines.append(t("checkpoints.card.task_settings",
                       settings=literal(", ".join(f"{k} = {v}" for k, v in bundle.task.params.items()))))
    lines.append(t("checkpoints.card.file_size", mb=size / 1e6))  # MB of 10^6 bytes, as the `models` command says
    if (created := created_at(card)) is not None:
        lines.append(t("checkpoints.card.created", when=f"{created:%Y-%m-%d %H:%M}"))
    st.markdown("  \n".join(lines))
    if (notes := card_notes(facts)) is not None:  # fields of a hostile or broken card, dropped on loading
        st.caption(notes)
    config_col, train_col = st.columns(2)
    with config_col.expander(t("checkpoints.card.config")):
        st.json(bundle.config.to_dict())
    with train_col.expander(t("checkpoints.card.training")):
        st.json(card.get("train") or {"note": t("checkpoints.card.not_recorded")})


def evaluations(view: View) -> dict:
    return view.get("evaluations") or {}


def remove(view: View, key: str) -> None:
    """on_click of Remove: forget a session model (the default becomes active if it was); show the active
    model's card."""
    registry.remove_session_model(key)
    view.set("evaluations", {k: e for k, e in evaluations(view).items() if k != key})
    view.reset("inspect")


def actions(view: View, key: str, entry: registry.ModelEntry, bundle: ModelBundle) -> None:
    active = key == registry.active_key()
    row = st.container(horizontal=True)  # wraps onto a second row where a narrow column cannot hold all three
    row.button(t("checkpoints.actions.active") if active else t("checkpoints.actions.activate"),
               icon=":material/check_circle:", type="primary", key="ckpt_activate", disabled=active,
               on_click=callback(registry.set_active), args=(key,), width="stretch",
               help=t("checkpoints.actions.activate_help"))
    row.download_button(
        t("checkpoints.actions.download"),
        data=entry.path.read_bytes if entry.path else lambda: bundle_to_bytes(bundle),
        file_name=registry.file_name(entry), mime="application/octet-stream", key="ckpt_download",
        icon=":material/download:", on_click="ignore", width="stretch", help=t("checkpoints.actions.download_help"))
    row.button(t("checkpoints.actions.remove"), icon=":material/delete:", key="ckpt_remove",
               disabled=entry.origin == "shipped", on_click=callback(remove), args=(view, key), width="stretch",
               help=t("checkpoints.actions.shipped" if entry.origin == "shipped"
                      else "checkpoints.actions.remove_help"))


def card_section(view: View, entries: dict[str, registry.ModelEntry]) -> tuple[str, ModelBundle]:
    """The picked model's card and actions; returns (its key, its bundle)."""
    st.subheader(t("checkpoints.card.header"))
    key = inspected(view)
    view.widget("inspect", st.selectbox, t("app.model"), list(entries), format_func=lambda k: entries[k].label,
                to_widget=lambda _: key)
    bundle = registry.bundle_for(key)
    with st.container(border=True):
        card_facts(bundle, file_size(key, entries[key], bundle))
        actions(view, key, entries[key], bundle)
    return key, bundle


# --------------------------------------------------------------------------------------------- evaluate


def run_evaluation(bundle: ModelBundle, samples: int, seed: int) -> Evaluation:
    """Metrics on `samples` fresh held-out pairs with a progress bar, plus worked examples from them."""
    bar = st.progress(0.0, text=t("checkpoints.evaluate.generating"))

    def progress(done: int, total: int) -> None:
        bar.progress(0.9 * done / total, text=t("checkpoints.evaluate.scored", done=done, total=total))

    metrics = evaluate_bundle(bundle, samples, seed, progress)
    bar.progress(0.9, text=t("checkpoints.evaluate.examples"))
    examples = decode_examples(bundle, bundle.task.pairs(min(samples, EXAMPLE_POOL), seed, "heldout"))
    bar.empty()
    return Evaluation(metrics, seed, examples)


def show_examples(examples: list[Example]) -> None:
    """Mistakes first, then right answers; st.table renders markdown in its cells, so every text is literal
    (a sentencepiece model's pieces come from its file)."""
    right = [e for e in examples if e.correct][:SHOWN_EXAMPLES]
    wrong = [e for e in examples if not e.correct][:SHOWN_EXAMPLES]
    table = pd.DataFrame([{"": "✓" if e.correct else "✗", t("app.input"): literal(e.source),
                           t("checkpoints.evaluate.expected"): literal(e.expected),
                           t("checkpoints.evaluate.wrote"): literal(e.output) if e.output
                           else t("checkpoints.evaluate.nothing")} for e in wrong + right])
    st.table(table, hide_index=True, border="horizontal")
    if not wrong:
        st.caption(t("checkpoints.evaluate.all_right", n=len(examples)))


@fragment
def evaluation_section(view: View, key: str, bundle: ModelBundle) -> None:
    """Evaluate on demand, never on opening a link: 2,000 inputs take several seconds."""
    st.subheader(t("checkpoints.evaluate.header"))
    st.markdown(t("checkpoints.evaluate.text"))
    left, right = st.columns(2)
    with left:
        samples = view.widget("samples", st.number_input, t("attention.importance.samples"), min_value=SAMPLES[0],
                              max_value=SAMPLES[1], step=100, help=t("checkpoints.evaluate.samples_help"))
    with right:
        seed = view.widget("seed", st.number_input, t("errors.seed"), min_value=0, max_value=2**31 - 1, step=1,
                           help=t("compare.seed_help"))
    if st.button(t("checkpoints.evaluate.button"), icon=":material/speed:", key="ckpt_evaluate", type="primary"):
        try:  # the model budget, as the CLI's eval checks it: before any input is drawn
            task = bundle.task
            evaluation_estimate(bundle.config, int(samples), task.max_source_chars + 1,
                                task.max_target_chars + 1).check()
        except BudgetError as exc:
            st.error(literal(t("checkpoints.evaluate.cannot", error=exc)), icon=":material/block:")
        else:
            view.set("evaluations", evaluations(view) | {key: run_evaluation(bundle, int(samples), int(seed))})
    result = evaluations(view).get(key)
    if result is None:
        st.caption(t("checkpoints.evaluate.press", n=samples, seed=seed))
    else:
        m = result.metrics
        with st.container(horizontal=True, gap="medium", key="ckpt_metrics"):  # a narrow column wraps them, whole
            st.metric(t("errors.exact_match"), f"{m['exact_match']:.1%}", help=t("checkpoints.evaluate.exact_help"),
                      width="content")
            st.metric(t("checkpoints.evaluate.token_accuracy"), f"{m['token_accuracy']:.1%}",
                      help=t("checkpoints.evaluate.token_help"), width="content")
            st.metric(t("checkpoints.evaluate.loss"), f"{m['loss']:.3f}", help=t("checkpoints.evaluate.loss_help"),
                      width="content")
        st.caption(t("checkpoints.evaluate.drawn", n=m["samples"], seed=result.seed))
        show_examples(result.examples)
    view.sync_url()


# ----------------------------------------------------------------------------------------------- upload


def uploaded(view: View) -> None:
    """on_change of both uploaders: handle a new upload once; an accepted model (or the listed one it equals) has
    its card shown, and is active if the switch says so."""
    outcome = uploads.handle_widgets(view.get("activate"))
    if outcome is not None and outcome.ok:
        view.set("inspect", outcome.key)


def upload_section(view: View) -> None:
    st.subheader(t("checkpoints.upload.header"))
    st.markdown(t("checkpoints.upload.text", limit=uploads.limit_text()))
    view.widget("activate", st.toggle, t("checkpoints.upload.activate"), help=t("checkpoints.upload.activate_help"))
    left, right = st.columns([3, 2])
    file = left.file_uploader(t("checkpoints.upload.file"), type=uploads.CHECKPOINT_TYPES, key=uploads.FILE,
                              on_change=callback(uploaded), args=(view,), max_upload_size=uploads.UPLOAD_LIMIT_MB)
    right.file_uploader(
        t("checkpoints.upload.metadata"), type=["json"], key=uploads.METADATA,
        on_change=callback(uploaded), args=(view,), max_upload_size=uploads.UPLOAD_LIMIT_MB,
        help=t("checkpoints.upload.metadata_help"))
    if (outcome := uploads.shown_outcome(file)) is not None:  # file names and errors shown as written
        if outcome.ok:
            st.success(literal(outcome.message), icon=":material/check_circle:")
        else:
            st.error(literal(outcome.message), icon=":material/block:")


def main() -> None:
    view = CHECKPOINTS.view()
    notes = intro()
    entries = registry.entries()
    if not entries:
        st.warning(no_model(), icon=":material/info:")
    else:
        table_section(view, entries)
        left, right = st.columns([1, 1], gap="large")
        with left:
            key, bundle = card_section(view, entries)
        with right:
            evaluation_section(view, key, bundle)
        runs_table.section(view)
    st.divider()
    upload_section(view)
    finish(view, notes)


main()
