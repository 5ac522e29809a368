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
from ui.markdown import literal
from ui.sidebar import card_notes, model_card_lines
from ui.state import View
from ui.tables.checkpoints import CHECKPOINTS, SAMPLES
from ui.widgets import finish, header, no_model
from transformer.network.budget import BudgetError, evaluation_estimate
from transformer.bundle import ModelBundle
from transformer.store.cards import metrics_source
from transformer.store.checkpoints import CheckpointInfo, bundle_to_bytes
from transformer.analysis.examples import Example, decode_examples
from transformer.analysis.evaluation import evaluate_bundle
from transformer.tasks import TASKS
from transformer.network.tokenizers import SPECIALS

EXAMPLE_POOL = 200  # at most this many of the evaluated pairs are decoded again for worked examples
SHOWN_EXAMPLES = 4
ORIGINS = {"shipped": "pretrained", "trained": "trained here", "uploaded": "uploaded", "snapshot": "snapshot"}


@dataclass(frozen=True)
class Evaluation:
    metrics: dict
    seed: int
    examples: list[Example]


def intro() -> DeltaGenerator:
    notes = header("Checkpoints")
    st.markdown(
        "A **checkpoint** is a trained model saved to one file: its weights, its configuration, its tokenizer "
        "and a model card. Pick a model in the table to read its card, make it the active model for every "
        "page, test it on inputs it never saw in training, download it, or upload one a colleague sent you.")
    st.latex(r"\text{exact match} = \frac{1}{N}\sum_{i=1}^{N} \mathbf{1}\!\left[\,\hat{y}^{(i)} = y^{(i)}\right]")
    st.markdown(r"where $\hat{y}^{(i)}$ is the model's greedy output for the held-out input $x^{(i)}$ and "
                r"$y^{(i)}$ the right answer: a whole output counts only when every token is right.")
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


def row(key: str, origin: str, name: str, task: str, card: dict, size: int) -> dict:
    return {
        "key": key, "Active": "★" if key == registry.active_key() else "", "Model": name,
        "Origin": ORIGINS[origin], "Task": task_title(task),
        "Exact match": None if card.get("exact_match") is None else 100 * card["exact_match"],
        "Size (MB)": size / 1e6,
    }


def shipped_row(info: CheckpointInfo) -> dict:
    """From the file header alone: listing the zoo loads no weights."""
    return row(registry.shipped_key(info.path), "shipped", info.name, info.task, info.card, info.size)


def session_row(key: str, origin: str) -> dict:
    bundle = registry.bundle_for(key)
    return row(key, origin, bundle.name, bundle.task.name, bundle.card, session_size(key, bundle))


def model_table(entries: dict[str, registry.ModelEntry]) -> pd.DataFrame:
    """One row per model this session can use, pretrained first; broken shipped files are reported."""
    infos = registry.shipped_infos()
    for info in infos:
        if info.error is not None:
            st.warning(literal(f"The pretrained checkpoint “{info.path.name}” cannot be used: {info.error}."),
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
    st.subheader("Available models")
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
            "Active": st.column_config.TextColumn("Active", help="★ marks the model every page uses (see the "
                                                  "sidebar)", width=60),
            "Exact match": st.column_config.NumberColumn(
                "Exact match", format="%.1f%%", help="Greedy exact match from the model card, measured on the "
                "training run's own held-out split (not the fresh inputs of Evaluate below)"),
            "Size (MB)": st.column_config.NumberColumn(
                "Size (MB)", format="%.2f", help="The .safetensors file in MB of 10^6 bytes, as the `models` "
                "command and the README give it"),
        },
    )
    st.caption("Click a row (or pick below) to see that model's card. Pretrained models ship with the app; "
               "models trained or uploaded here are kept on this server for a while (the sidebar says how long): "
               "download one to keep it for good.")


# ------------------------------------------------------------------------------------------------- card


def card_facts(bundle: ModelBundle) -> None:
    """The model card: task, shape, training, metrics, tokenizer; config and training settings on request."""
    card, tokenizer = bundle.card, bundle.tokenizer
    st.markdown(f"_{bundle.task.description}_")
    lines = model_card_lines(bundle)
    if card.get("token_accuracy") is not None:
        lines.append(f"**Held-out token accuracy:** {card['token_accuracy']:.1%}")
    if card.get("exact_match") is not None or card.get("token_accuracy") is not None:
        lines.append(f"**Accuracies measured on:** {metrics_source(card)}, not the fresh inputs of Evaluate below")
    lines.append(f"**Tokenizer:** {tokenizer.kind}, {tokenizer.vocab_size} tokens ({len(SPECIALS)} of them special)")
    if bundle.task.params:
        lines.append("**Task settings:** " + literal(", ".join(f"{k} = {v}" for k, v in bundle.task.params.items())))
    if (created := created_at(card)) is not None:
        lines.append(f"**Created:** {created:%Y-%m-%d %H:%M} UTC")
    st.markdown("  \n".join(lines))
    if (notes := card_notes(bundle)) is not None:  # fields of a hostile or broken card, dropped on loading
        st.caption(notes)
    config_col, train_col = st.columns(2)
    with config_col.expander("Model configuration"):
        st.json(bundle.config.to_dict())
    with train_col.expander("Training settings"):
        st.json(card.get("train") or {"note": "not recorded in this checkpoint"})


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
    row.button("Active" if active else "Make active", icon=":material/check_circle:", type="primary",
               key="ckpt_activate", disabled=active, on_click=registry.set_active, args=(key,), width="stretch",
               help="Every page (decoding, attention, masks, ...) uses the active model.")
    row.download_button(
        "Download", data=entry.path.read_bytes if entry.path else lambda: bundle_to_bytes(bundle),
        file_name=f"{bundle.name}.safetensors", mime="application/octet-stream", key="ckpt_download",
        icon=":material/download:", on_click="ignore", width="stretch",
        help="The .safetensors file: weights plus the JSON config, tokenizer and model card. No pickle.")
    row.button("Remove", icon=":material/delete:", key="ckpt_remove", disabled=entry.origin == "shipped",
               on_click=remove, args=(view, key), width="stretch",
               help="Pretrained models cannot be removed." if entry.origin == "shipped"
               else "Take this model off this session's list (download it first to keep it).")


def card_section(view: View, entries: dict[str, registry.ModelEntry]) -> tuple[str, ModelBundle]:
    """The picked model's card and actions; returns (its key, its bundle)."""
    st.subheader("Model card")
    key = inspected(view)
    view.widget("inspect", st.selectbox, "Model", list(entries), format_func=lambda k: entries[k].label,
                to_widget=lambda _: key)
    bundle = registry.bundle_for(key)
    with st.container(border=True):
        card_facts(bundle)
        actions(view, key, entries[key], bundle)
    return key, bundle


# --------------------------------------------------------------------------------------------- evaluate


def run_evaluation(bundle: ModelBundle, samples: int, seed: int) -> Evaluation:
    """Metrics on `samples` fresh held-out pairs with a progress bar, plus worked examples from them."""
    bar = st.progress(0.0, text="Generating held-out inputs…")

    def progress(done: int, total: int) -> None:
        bar.progress(0.9 * done / total, text=f"Scored {done:,} of {total:,} held-out inputs…")

    metrics = evaluate_bundle(bundle, samples, seed, progress)
    bar.progress(0.9, text="Decoding worked examples…")
    examples = decode_examples(bundle, bundle.task.pairs(min(samples, EXAMPLE_POOL), seed, "heldout"))
    bar.empty()
    return Evaluation(metrics, seed, examples)


def show_examples(examples: list[Example]) -> None:
    """Mistakes first, then right answers; st.table renders markdown in its cells, so every text is literal
    (a sentencepiece model's pieces come from its file)."""
    right = [e for e in examples if e.correct][:SHOWN_EXAMPLES]
    wrong = [e for e in examples if not e.correct][:SHOWN_EXAMPLES]
    table = pd.DataFrame([{"": "✓" if e.correct else "✗", "Input": literal(e.source), "Expected": literal(e.expected),
                           "Model wrote": literal(e.output) if e.output else "(nothing)"} for e in wrong + right])
    st.table(table, hide_index=True, border="horizontal")
    if not wrong:
        st.caption(f"Every one of the first {len(examples):,} inputs was answered exactly right.")


@st.fragment
def evaluation_section(view: View, key: str, bundle: ModelBundle) -> None:
    """Evaluate on demand, never on opening a link: 2,000 inputs take several seconds."""
    st.subheader("Evaluate on fresh held-out inputs")
    st.markdown("Held-out inputs are never used in training (a fixed hash decides which inputs are held out), "
                "so this measures how well the model **generalises**. The model decodes each one greedily.")
    left, right = st.columns(2)
    with left:
        samples = view.widget("samples", st.number_input, "Held-out inputs", min_value=SAMPLES[0],
                              max_value=SAMPLES[1], step=100,
                              help="More inputs give a steadier figure; 500 take a second or two, 2,000 "
                              "several seconds.")
    with right:
        seed = view.widget("seed", st.number_input, "Seed", min_value=0, max_value=2**31 - 1, step=1,
                           help="Another seed draws another set of held-out inputs.")
    if st.button("Evaluate", icon=":material/speed:", key="ckpt_evaluate", type="primary"):
        try:  # the model budget, as the CLI's eval checks it: before any input is drawn
            task = bundle.task
            evaluation_estimate(bundle.config, int(samples), task.max_source_chars + 1,
                                task.max_target_chars + 1).check()
        except BudgetError as exc:
            st.error(literal(f"Cannot evaluate: {exc}."), icon=":material/block:")
        else:
            view.set("evaluations", evaluations(view) | {key: run_evaluation(bundle, int(samples), int(seed))})
    result = evaluations(view).get(key)
    if result is None:
        st.caption(f"Press Evaluate to measure this model on {samples:,} held-out inputs drawn with seed {seed}.")
    else:
        m = result.metrics
        cols = st.columns(3)
        cols[0].metric("Exact match", f"{m['exact_match']:.1%}", help="Whole answer right, </s> included")
        cols[1].metric("Token accuracy", f"{m['token_accuracy']:.1%}",
                       help="Next tokens right when the decoder is fed the correct previous ones (teacher forcing)")
        cols[2].metric("Loss", f"{m['loss']:.3f}", help="Cross-entropy per target token, in nats")
        st.caption(f"{m['samples']:,} held-out inputs drawn with seed {result.seed}. Worked examples, "
                   "mistakes first:")
        show_examples(result.examples)
    view.sync_url()


# ----------------------------------------------------------------------------------------------- upload


def uploaded(view: View) -> None:
    """on_change of both uploaders: handle a new upload once; an accepted model is active, its card shown."""
    outcome = uploads.handle_widgets()
    if outcome is not None and outcome.ok:
        view.reset("inspect")


def upload_section(view: View) -> None:
    st.subheader("Upload a checkpoint")
    st.markdown(
        "A `.safetensors` file saved by this app (the Download button above, or `python -m transformer train`), "
        "or a PyTorch `.pt` file of the model's state dict, of at most "
        f"{uploads.LIMIT_TEXT}. Every file is checked before use: its size (a `.pt` archive's unpacked size too), "
        "its header, its configuration, the memory loading it needs and the shape of every tensor. A file that "
        "fails any check is refused and nothing changes; a model card's invalid fields are dropped with a note. "
        "`.pt` files are read with `torch.load(weights_only=True)`, so no code inside them runs.")
    left, right = st.columns([3, 2])
    file = left.file_uploader("Checkpoint (.safetensors or .pt)", type=uploads.CHECKPOINT_TYPES, key=uploads.FILE,
                              on_change=uploaded, args=(view,), max_upload_size=uploads.UPLOAD_LIMIT_MB)
    right.file_uploader(
        "Metadata for a bare .pt state dict (.json, optional)", type=["json"], key=uploads.METADATA,
        on_change=uploaded, args=(view,), max_upload_size=uploads.UPLOAD_LIMIT_MB,
        help='A JSON object with "config", "tokenizer" and "task" (as stored in a .safetensors checkpoint). '
             "Only needed when the .pt file holds the tensors alone.")
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
        runs_table.section()
    st.divider()
    upload_section(view)
    finish(view, notes)


main()
