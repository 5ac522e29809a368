"""The Train page's settings: the task (a built-in one with its preset, or your own pairs), the model's shape and
the training recipe, each a prop of the page's state table, checked before Start; and, while a run is live, its
settings as read-only lines."""

from __future__ import annotations

import streamlit as st

from transformer.tasks import TASKS, CustomTask
from transformer.tasks.custom import (
    MAX_DATA_MB, MAX_TITLE, MIN_PAIRS, TOKENIZATIONS, decode_data, heldout_size, parse_pairs, too_large,
)
from transformer.i18n import Texts, t
from transformer.training.devices import DEVICES, cuda_available
from transformer.training.diagnosis import MIN_LEARNING_PAIRS
from ui.failure import callback
from ui.run_settings import (
    DEVICE_LABELS, INIT_LABELS, NORM_LABELS, OPTIMIZER_LABELS, POSITIONAL_LABELS, SCHEDULE_LABELS, TRAIN_DEFAULTS,
    RunSettings, few_pairs_note, largest_batch, model_problem, settings_summary, task_class, task_defaults,
    task_problem,
)
from ui.state import View
from ui.tables.train import (
    MODEL_FIELDS, MUON_FIELDS, PARAM_FIELDS, PRESET_PROPS, TRAIN_FIELDS, FloatSetting, IntSetting, preset_note,
    settings_of, settings_text, stop_target,
)

TOKENIZATION_LABELS = Texts({"char": "train.custom.char", "sentencepiece": "train.custom.sentencepiece"})


@st.cache_data(max_entries=64, show_spinner=False)
def batch_ceiling(settings_key: str, ceiling: int) -> int | None:
    """run_settings.largest_batch for the settings behind `settings_key` (cached: it builds the tokenizer)."""
    return largest_batch(RunSettings.from_key(settings_key), ceiling)


def number(view: View, prop: IntSetting | FloatSetting, disabled: bool = False, **extra):
    """The number input of a numeric setting, its bounds from the prop; the batch size's upper bound also
    follows the run budget (never below the value already chosen: that one is refused with the estimate)."""
    normal = prop.normal if isinstance(prop, FloatSetting) else None
    args = prop.widget_args()
    if prop.name == "batch_size":
        fits = batch_ceiling(settings_of(view.values()).key(), prop.hi)
        if fits is not None:
            args["max_value"] = max(fits, view.get("batch_size"))
            args["help"] += t("train.batch_fits", n=fits)
    return view.widget(prop.name, st.number_input, prop.label(), from_widget=normal, disabled=disabled, **args,
                       **extra)


def grid(view: View, fields: dict, columns: int = 3, disabled: bool = False) -> None:
    """Number inputs for `fields`, `columns` to a row."""
    cols = st.columns(columns)
    for i, prop in enumerate(fields.values()):
        with cols[i % columns]:
            number(view, prop, disabled=disabled)


def check_settings(view: View) -> None:
    """What a link set that cannot be used returns to its default with a note:
    a parameter the task does not have, task parameters that do not go together (shortest > longest), a model
    shape that cannot be built (d_model not divisible by the heads). Values typed on the page stay, with an
    error that blocks Start."""
    task = view.get("task")
    own = task_defaults(task)
    for name, prop in PARAM_FIELDS.items():
        if name not in own and view.get(name) != prop.default:
            view.refuse(name, t("train.link.no_setting", task=task))
    values = view.values()
    if view.get("device") == "cuda" and not cuda_available():
        view.refuse("device", t("train.link.no_cuda"))
    checks = ((own, task_problem(task, {name: values[name] for name in own})),
              (MODEL_FIELDS, model_problem(settings_of(values).model)))
    for names, problem in checks:
        for name in names:
            if problem is not None and view.from_link(name):
                view.refuse(name, problem)


def reset_to_preset(view: View) -> None:
    for name in PRESET_PROPS:
        view.reset(name)


def preset_row(view: View, task: str) -> None:
    """What the task's preset sets, the settings changed since, and a button back to the preset."""
    changed = [name for name in PRESET_PROPS if view.get(name) != view.default(name)]
    note = t("train.preset", task=task_class(task).title, settings=preset_note(task))
    if changed:
        note += t("train.changed", settings=settings_text({name: view.get(name) for name in changed}))
    note_col, button_col = st.columns([4, 1.3], vertical_alignment="center")  # one row: Start on the first screen
    note_col.markdown(note, help=t("train.preset_help"))
    button_col.button(t("train.reset_preset"), key="train_preset_reset", icon=":material/settings_backup_restore:",
                      disabled=not changed, on_click=callback(reset_to_preset), args=(view,))


def settings_panel(view: View) -> RunSettings:
    """Task and its parameters on one row, the task's preset under it; model shape and training settings in two
    collapsed expanders below, with a one-line summary."""
    cols = st.columns([1.3, 0.75, 0.75, 2.2], vertical_alignment="bottom")
    with cols[0]:
        task = view.widget("task", st.selectbox, t("compare.facts.task"), [*TASKS, CustomTask.name],
                           format_func=lambda name: task_class(name).title)
    for col, name in zip(cols[1:3], task_defaults(task)):
        with col:
            number(view, PARAM_FIELDS[name])
    cols[3].caption(task_class(task).description)
    if task == CustomTask.name:
        custom_data_panel(view)
    preset_row(view, task)
    shape_col, train_col = st.columns(2, gap="medium")
    with shape_col, st.expander(t("train.shape"), icon=":material/account_tree:"):
        grid(view, MODEL_FIELDS)
        norm_col, pos_col = st.columns(2)
        with norm_col:
            view.widget("norm", st.selectbox, t("train.norm_placement"), list(NORM_LABELS),
                        format_func=NORM_LABELS.get)
        with pos_col:
            view.widget("positional", st.selectbox, t("train.positional"), list(POSITIONAL_LABELS),
                        format_func=POSITIONAL_LABELS.get)
        qk_col, init_col = st.columns(2, vertical_alignment="bottom")
        with qk_col:
            view.widget("qk_norm", st.toggle, t("train.qk_norm"), help=t("train.qk_norm_help"))
        with init_col:
            view.widget("init", st.selectbox, t("train.init"), list(INIT_LABELS), format_func=INIT_LABELS.get,
                        help=t("train.init_help"))
    with train_col, st.expander(t("checkpoints.card.training"), icon=":material/tune:"):
        grid(view, TRAIN_FIELDS)
        opt_col, schedule_col = st.columns(2)
        with opt_col:
            optimizer = view.widget("optimizer", st.selectbox, t("train.optimizer"), list(OPTIMIZER_LABELS),
                                    format_func=OPTIMIZER_LABELS.get, help=t("train.optimizer_help"))
        with schedule_col:
            view.widget("schedule", st.selectbox, t("train.schedule"), list(SCHEDULE_LABELS),
                        format_func=SCHEDULE_LABELS.get, help=t("train.schedule_help"))
        grid(view, MUON_FIELDS, disabled=optimizer != "muon")
        view.widget("stop_early", st.checkbox, t("train.stop_early", target=stop_target(task)),
                    help=t("train.stop_early_help", every=TRAIN_DEFAULTS.eval_every, n=TRAIN_DEFAULTS.eval_samples,
                           confirm=TRAIN_DEFAULTS.confirm_samples))
        if cuda_available():  # on a server without a GPU there is nothing to choose
            view.widget("device", st.selectbox, t("train.device"), list(DEVICES), format_func=DEVICE_LABELS.get,
                        help=t("train.device_help"))
    settings = settings_of(view.values())
    st.caption(settings_summary(settings))
    return settings


def live_settings(settings: RunSettings) -> None:
    """A live run's settings as lines to read: its task (and the task's parameters), model and recipe. Not its
    widgets, locked: the browser mounts every one anew when the run's view takes the page, which on a 2-core AVX2
    laptop held the first progress line after Start back by half a second (docs/MEASUREMENTS.md)."""
    train = settings.train
    if train.task == CustomTask.name:
        task = train.task_params.get("title") or t("train.custom.my_data")
        params = ""
    else:
        task = task_class(train.task).title
        values = {**task_defaults(train.task), **train.task_params}  # what the run left out, the task's default
        params = settings_text(values)
    st.markdown(t("train.summary.task", task=task, params=t("train.summary.params", list=params) if params else ""))
    st.markdown(settings_summary(settings))


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


def too_few(train: int) -> None:
    """Before Start: warn when own data has fewer training pairs than the recipe needs to learn much."""
    if train < MIN_LEARNING_PAIRS:
        st.warning(t("train.too_few", n=train, note=few_pairs_note()), icon=":material/warning:")


def custom_data_panel(view: View) -> None:
    """Your own data: upload a two-column TSV/CSV file or paste pairs, choose the tokenisation, and see every
    problem the checks find (and what they skipped) before starting."""
    with st.container(border=True, key="train_custom"):
        up_col, name_col, tok_col = st.columns([2.2, 1, 1.2])
        with up_col:
            upload = st.file_uploader(t("train.custom.upload"), type=["tsv", "csv", "txt"], key="train_custom_upload",
                                      max_upload_size=MAX_DATA_MB)  # the limit the box shows
        why = upload_problem(view, upload) if upload is not None else None  # before the widgets it fills
        with name_col:
            view.widget("custom_title", st.text_input, t("train.custom.name"), max_chars=MAX_TITLE,
                        placeholder=t("train.custom.my_data"))
        with tok_col:
            view.widget("tokenization", st.radio, t("train.custom.tokenization"), list(TOKENIZATIONS),
                        format_func=TOKENIZATION_LABELS.get)
        view.widget("custom_data", st.text_area, t("train.custom.paste"), height=160,
                    placeholder="12\tXII\n13\tXIII", help=t("train.custom.paste_help", mb=MAX_DATA_MB))
        if why:
            st.error(why, icon=":material/error:")
        if not view.get("custom_data"):
            st.info(t("train.custom.empty", n=MIN_PAIRS), icon=":material/upload_file:")
            return
        parsed = parse_pairs(view.get("custom_data"))
        for problem in parsed.problems:
            st.error(problem, icon=":material/error:")
        for note in parsed.notes:
            st.caption(note)
        if parsed.ok:
            too_few(len(parsed.pairs) - heldout_size(len(parsed.pairs)))
