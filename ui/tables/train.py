"""The Train page's view: the task and its parameters, the model shape, the training settings, the probe input
and the probe view's layer and head. Each numeric setting's prop is also its number input's spec (label,
bounds, step, help): one source for the bounds a widget offers and a link may set.

Training is seeded, so a link with these settings retrains the same model (opening it fills the settings; it
does not start training). `device` (auto / cpu / cuda, transformer.training.devices) is in the view too: the page
shows its picker only where CUDA is available and refuses a link's "cuda" with a note where it is not.
`settings_of` turns the view into RunSettings, `values_of` a run's settings back into the view (for the
link that retrains a run's model).

The model shape and the training recipe follow the task's preset (transformer.training.presets): picking a task resets
them to it, and the URL leaves out the values equal to the picked task's preset (a link names only what the
user changed). The seed, early stop and device are kept across tasks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from transformer.i18n import Texts, t
from transformer.network.config import BOUNDS
from transformer.training.devices import DEVICES
from transformer.training.presets import PRESETS
from transformer.tasks import TASKS, CustomTask
from transformer.tasks.custom import MAX_DATA_BYTES, MAX_TITLE, TOKENIZATIONS
from ui.run_settings import (
    INIT_LABELS, MODEL_CHOICES, MODEL_DEFAULTS_ALL, NORM_LABELS, OPTIMIZER_LABELS, POSITIONAL_LABELS, SCHEDULE_LABELS,
    TARGET_EXACT_MATCH, TRAIN_DEFAULTS, RunSettings, task_defaults,
)
from ui.state import Choice, Flag, Float, Int, StateTable, Text, register
from ui.tables.shared import LANG, PRESENTER


class Setting:
    """A numeric setting's number input: its bounds are the prop's, its label and help the catalog's
    `train.field.<name>` and `train.field.<name>_help`."""

    name: str
    step: float
    fmt: str | None

    def keys(self) -> tuple[str, str]:
        """The catalog keys of its label and its help."""
        return f"train.field.{self.name}", f"train.field.{self.name}_help"

    def label(self) -> str:
        return t(self.keys()[0])

    def widget_args(self) -> dict:
        """st.number_input's arguments after the label."""
        return {**self.bounds(), "step": self.step, "format": self.fmt, "help": t(self.keys()[1])}


@dataclass(frozen=True)
class IntSetting(Setting, Int):
    """A whole-number setting."""

    step: int = 1
    fmt: str | None = None


@dataclass(frozen=True)
class FloatSetting(Setting, Float):
    """A setting that takes any number in its bounds (`fmt`: the number input's printf format)."""

    step: float = 0.01
    fmt: str | None = None

    def format(self, value: float) -> str:
        return f"{value:.12g}"  # a learning rate keeps its digits (%g would round it to six)

    def normal(self, value: float) -> float:
        """`value` as a link writes it back (0.15, not a number input's 0.15000000000000002), so the run
        trained from the view and the run a link retrains get the very same number."""
        return float(self.format(value))


def _param_defaults() -> dict[str, int]:
    """Every task parameter's default (tasks that share a parameter share its default)."""
    out: dict[str, int] = {}
    for task in TASKS:
        for name, default in task_defaults(task).items():
            if out.setdefault(name, default) != default:
                raise ValueError(f"tasks disagree on the default of {name}")
    return out


def preset_settings(task: str) -> dict:
    """A task's preset as {setting: value}: what it changes of the library defaults ({} without a preset)."""
    preset = PRESETS.get(task)
    return {} if preset is None else {**preset.model, **preset.train}


def stop_target(task: str) -> float:
    """The held-out exact match a run of `task` stops at: its preset's bar (99%, or 95% for dates, numbers)."""
    preset = PRESETS.get(task)
    return TARGET_EXACT_MATCH if preset is None else preset.target


def follows_preset(prop):
    """`prop` with its default per task taken from the presets; picking a task resets it to that default."""
    by_task = {task: preset_settings(task)[prop.name] for task in PRESETS if prop.name in preset_settings(task)}
    return dataclasses.replace(prop, depends_on=("task",), defaults_by=by_task)


_M, _T, _P = MODEL_DEFAULTS_ALL, dataclasses.asdict(TRAIN_DEFAULTS), _param_defaults()

MODEL_FIELDS: dict[str, IntSetting | FloatSetting] = {p.name: follows_preset(p) for p in (
    IntSetting("n_enc_layers", _M["n_enc_layers"], lo=1, hi=6),
    IntSetting("n_dec_layers", _M["n_dec_layers"], lo=1, hi=6),
    IntSetting("n_heads", _M["n_heads"], lo=1, hi=16),
    IntSetting("d_model", _M["d_model"], lo=8, hi=512, step=8),
    IntSetting("d_ff", _M["d_ff"], lo=8, hi=2048, step=8),
    FloatSetting("dropout", _M["dropout"], lo=0.0, hi=0.5, step=0.05, fmt="%.2f"),
)}
TRAIN_FIELDS: dict[str, IntSetting | FloatSetting] = {p.name: p if p.name == "seed" else follows_preset(p) for p in (
    FloatSetting("lr", _T["lr"], lo=1e-5, hi=0.05, step=5e-4, fmt="%.4f"),
    IntSetting("warmup", _T["warmup"], lo=0, hi=5000, step=50),
    IntSetting("batch_size", _T["batch_size"], lo=1, hi=1024, step=16),
    IntSetting("steps", _T["steps"], lo=1, hi=100_000, step=100),
    FloatSetting("label_smoothing", _T["label_smoothing"], lo=0.0, hi=0.5, step=0.05, fmt="%.2f"),
    IntSetting("seed", _T["seed"], lo=0, hi=2**31 - 1),
    FloatSetting("beta1", _T["beta1"], lo=0.0, hi=0.999, step=0.05, fmt="%.3f"),
    FloatSetting("beta2", _T["beta2"], lo=0.0, hi=0.9999, step=0.01, fmt="%.4f"),
)}
# a task's own parameters; the others do not apply to it (a link that sets one is refused with a note)
PARAM_FIELDS: dict[str, IntSetting] = {p.name: p for p in (
    IntSetting("min_len", _P["min_len"], lo=1, hi=48, depends_on=("task",)),
    IntSetting("max_len", _P["max_len"], lo=1, hi=48, depends_on=("task",)),
    IntSetting("max_digits", _P["max_digits"], lo=1, hi=8, depends_on=("task",)),
    IntSetting("min_year", _P["min_year"], lo=1000, hi=9999, fmt="%d", depends_on=("task",)),  # 1950, not 1,950
    IntSetting("max_year", _P["max_year"], lo=1000, hi=9999, fmt="%d", depends_on=("task",)),
    IntSetting("max_value", _P["max_value"], lo=10, hi=999_999, depends_on=("task",)),
)}
# Muon's own settings (optimizer "muon" only)
MUON_FIELDS: dict[str, FloatSetting] = {p.name: follows_preset(p) for p in (
    FloatSetting("muon_lr", _T["muon_lr"], lo=1e-4, hi=0.2, step=0.005, fmt="%.4f"),
    FloatSetting("muon_momentum", _T["muon_momentum"], lo=0.0, hi=0.999, step=0.05, fmt="%.3f"),
)}
ALL_HEADS = 0  # the `head` prop's value for "every head" (a head is 1-based)
TRAIN_CHOICES = ("optimizer", *MUON_FIELDS, "schedule")  # the training settings outside the TRAIN_FIELDS grid

TRAIN = register(StateTable("train", (
    Choice("task", default=TRAIN_DEFAULTS.task, options=(*TASKS, CustomTask.name)),
    # your own data (task "custom"): the pairs' text and its name stay out of the URL; the tokenisation is in it
    Choice("tokenization", default=TOKENIZATIONS[0], options=TOKENIZATIONS, depends_on=("task",)),
    Text("custom_data", default=None, max_chars=MAX_DATA_BYTES, url=False),
    Text("custom_title", default=None, max_chars=MAX_TITLE, url=False),
    *PARAM_FIELDS.values(),
    *MODEL_FIELDS.values(),
    follows_preset(Choice("norm", default=_M["norm"], options=tuple(NORM_LABELS))),
    follows_preset(Choice("positional", default=_M["positional"], options=tuple(POSITIONAL_LABELS))),
    follows_preset(Flag("qk_norm", default=_M["qk_norm"])),
    follows_preset(Choice("init", default=_M["init"], options=tuple(INIT_LABELS))),
    *TRAIN_FIELDS.values(),
    follows_preset(Choice("optimizer", default=_T["optimizer"], options=tuple(OPTIMIZER_LABELS))),
    *MUON_FIELDS.values(),
    follows_preset(Choice("schedule", default=_T["schedule"], options=tuple(SCHEDULE_LABELS))),
    Flag("stop_early", default=True),  # stop at the task's bar (stop_target) of held-out exact match
    Choice("device", default=TRAIN_DEFAULTS.device, options=DEVICES),  # where the run trains
    Text("probe", default=None, max_chars=120, depends_on=("task", "custom_data")),  # None: the task's first example
    Int("layer", default=1, lo=1, hi=int(BOUNDS["n_dec_layers"][1])),  # the probe view's decoder layer, 1-based
    Int("head", default=1, lo=0, hi=int(BOUNDS["n_heads"][1])),  # 1-based, or ALL_HEADS
    # the page's own, not in the URL: Step's count, following the newest probe, the snapshot shown, the name
    IntSetting("step_count", 10, lo=1, hi=1000, url=False),
    Flag("follow", default=True, url=False),
    Int("snapshot", default=None, lo=0, hi=10**9, url=False),
    Text("name", default=None, max_chars=60, url=False),
    PRESENTER,
    LANG,
)))


def settings_of(values: dict) -> RunSettings:
    """The run settings a view shows (`values`: {prop name: value}, e.g. View.values())."""
    task = values["task"]
    task_params = {name: values[name] for name in task_defaults(task)}
    if task == CustomTask.name:
        task_params = {"data": values["custom_data"] or "", "title": (values["custom_title"] or "").strip()
                       or t("train.custom.my_data"), "tokenization": values["tokenization"]}
    model = {name: values[name] for name in (*MODEL_FIELDS, *MODEL_CHOICES)}
    train = dataclasses.replace(TRAIN_DEFAULTS, task=task, task_params=task_params, device=values["device"],
                                **{name: values[name] for name in (*TRAIN_FIELDS, *TRAIN_CHOICES)})
    return RunSettings(train, model, stop_target(task) if values["stop_early"] else None)


def values_of(settings: RunSettings) -> dict:
    """The view values of a run's settings (the inverse of `settings_of` on the settings props)."""
    train = settings.train
    params = dict(train.task_params)
    if train.task == CustomTask.name:
        params = {"custom_data": params["data"], "custom_title": params["title"],
                  "tokenization": params["tokenization"]}
    return {"task": train.task, **{name: p.default for name, p in PARAM_FIELDS.items()}, **params,
            **{name: settings.model.get(name, MODEL_DEFAULTS_ALL[name]) for name in (*MODEL_FIELDS, *MODEL_CHOICES)},
            **{name: getattr(train, name) for name in (*TRAIN_FIELDS, *TRAIN_CHOICES)},
            "stop_early": settings.target is not None,
            "device": train.device}
PRESET_PROPS = tuple(p.name for p in TRAIN.props if p.defaults_by is not None)  # the model shape and recipe
ON_OFF = Texts({True: "train.on", False: "train.off"})
CHOICE_LABELS = {"norm": ("train.norm", NORM_LABELS), "positional": ("train.positional", POSITIONAL_LABELS),
                 "qk_norm": ("train.qk_norm", ON_OFF), "optimizer": ("train.optimizer", OPTIMIZER_LABELS),
                 "init": ("", INIT_LABELS), "schedule": ("", SCHEDULE_LABELS)}  # "": the value says what it is


def setting_text(name: str, value) -> str:
    """One setting for a sentence: "Total steps 1,500", "Earliest year 1950", "qk-norm on", "Optimizer Muon + Adam"."""
    if name in CHOICE_LABELS:
        label, labels = CHOICE_LABELS[name]
        return f"{t(label) if label else ''} {labels[value]}".strip()
    setting = TRAIN.by_name[name]
    if not isinstance(value, int):
        return f"{setting.label()} {value:g}"
    return f"{setting.label()} {setting.fmt % value if setting.fmt else f'{value:,}'}"  # a year: no thousands comma


def settings_text(values: dict) -> str:
    """Settings for a sentence, listed: "Batch size 32, Total steps 300"."""
    return t("app.list_comma").join(setting_text(name, value) for name, value in values.items())


def preset_note(task: str) -> str:
    """What `task`'s preset sets, in words ("the library defaults" when it changes nothing)."""
    return settings_text(preset_settings(task)) or t("train.library_defaults")
