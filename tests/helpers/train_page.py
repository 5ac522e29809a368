"""The Train page under AppTest: the fixture that opens it (and stops every run a test started), and
readings of its widgets and its run."""

from __future__ import annotations

import re
import time

import numpy as np

from helpers import plotly_specs
from helpers.repo import open_link
from transformer.runs.process_job import ProcessJob
from ui import runs
from ui.run_settings import task_defaults
from ui.tables.train import MODEL_FIELDS, MUON_FIELDS, PRESET_PROPS, TRAIN, TRAIN_FIELDS

PAGE = "pages/models/train.py"


opened: list = []  # the AppTests of this test, whose runs are stopped when it ends


def key(name: str) -> str:
    """The widget key of the Train table's prop `name`."""
    return TRAIN.view().widget_key(name)


def train_page_from(at):
    """Register an AppTest opened elsewhere (by a link) so the fixture's cleanup stops its run too."""
    opened.append(at)
    return at


def job_of(at) -> ProcessJob:
    return at.session_state[runs.RUN].job


def shown_step(at) -> int:
    """The step the progress bar reports."""
    text = at.get("progress")[0].proto.text
    return int(re.search(r"Step ([\d,]+) of", text)[1].replace(",", ""))


def wait_for(at, predicate, timeout: float = 120.0):
    """Rerun the page until predicate(at) holds (run_every never fires under AppTest)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if predicate(at):
            return
        time.sleep(0.3)
    raise AssertionError("timed out waiting for the page")


def state(at) -> str:
    return job_of(at).snapshot().state


def probe_chart(at) -> tuple[str, np.ndarray]:
    """Title and first heatmap's z of the probe's cross-attention chart (the preview's before Start)."""
    key = "train_probe_chart" if runs.RUN in at.session_state else "train_preview_chart"
    return plotly_specs.title(at, key), plotly_specs.z(at, key)


def linked(query: dict[str, str]):
    """An AppTest of the Train page opened by a link with `query` as its parameters (a fresh session)."""
    return open_link(PAGE, query)


def shown_settings(at) -> dict:
    """Every setting the page's widgets show, by prop name."""
    shown = {name: at.number_input(key=key(name)).value
             for name in (*MODEL_FIELDS, *TRAIN_FIELDS, *MUON_FIELDS,
                          *task_defaults(at.selectbox(key=key("task")).value))}
    shown.update({name: at.selectbox(key=key(name)).value
                  for name in ("task", "norm", "positional", "optimizer", "init", "schedule")})
    shown["qk_norm"] = at.toggle(key=key("qk_norm")).value
    shown["stop_early"] = at.checkbox(key=key("stop_early")).value
    shown["probe"] = at.text_input(key=key("probe")).value
    return shown


def preset_values(task: str) -> dict:
    """The model shape and recipe of `task`'s preset as the Train table's view values (the library defaults where it
    sets none): what the page shows once the task is picked."""
    return {name: TRAIN.by_name[name].defaults_by.get(task, TRAIN.by_name[name].default) for name in PRESET_PROPS}
