"""The runs table on the Checkpoints page (AppTest): every run of the session (an earlier one, the current one)
and every other model in one table with their numbers; two picked open the Compare page with both, one is
made active or downloaded."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers.repo import REVERSE, ROOT, needs_reverse
from helpers.tiny_runs import stop, tiny_run
from safetensors import safe_open
from streamlit.testing.v1 import AppTest

from transformer.runs.job import Ending, JobSnapshot, State
from transformer.store.checkpoints import load_bundle
from transformer.store.headers import list_checkpoints
from ui import model_registry as registry
from ui import runs, runs_table
from ui.tables.checkpoints import CHECKPOINTS

PAGE = "pages/models/checkpoints.py"

pytestmark = needs_reverse


@pytest.fixture
def session(clean_caches):
    """A session whose first run was stopped after 4 steps (now an earlier run) and whose current run, of
    another shape, is paused at step 8."""
    first, second = tiny_run(1, steps=4), tiny_run(2, steps=8, model={"n_heads": 4, "d_model": 32})
    first.stop()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state[runs.HISTORY] = [first]
    at.session_state[runs.RUN] = second
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at, first, second
    for run in (first, second):
        stop(run)


def table(at):
    return next(d.value for d in at.dataframe if "Source" in d.value.columns)


def pick(at, *rows: int):
    at.session_state[runs_table.TABLE] = {"selection": {"rows": list(rows), "columns": []}}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_every_run_and_model_is_one_row_with_its_numbers(session):
    at, first, second = session
    assert list(table(at).columns) == list(runs_table.FEW_COLUMNS)  # what fits a 1024-pixel window
    at.toggle(key=CHECKPOINTS.view().widget_key("every_column")).set_value(True).run()
    assert at.query_params["every_column"] == "1"
    frame = table(at)
    assert list(frame["Source"][:2]) == ["run 1", "run 2"]
    assert list(frame["State"][:2]) == ["stopped", "paused"]
    assert list(frame["Steps"][:2]) == [4, 8]
    assert list(frame["Shape"][:2]) == ["1+1 × 2 heads, d 16", "1+1 × 4 heads, d 32"]
    for i, run in enumerate((first, second)):
        final = run.snapshot().history[-1]
        assert frame["Exact match"][i] == pytest.approx(100 * final["exact_match"])
        assert frame["Loss"][i] == pytest.approx(final["loss"])
        assert frame["Time (s)"][i] == pytest.approx(round(run.snapshot().elapsed, 1))
    shipped = frame[frame["Source"] == "pretrained"]
    files = list_checkpoints(ROOT / "assets" / "checkpoints")
    names = [registry.shipped_name(info.path.stem) for info in files if info.error is None]  # as the picker names them
    assert sorted(shipped["Model"]) == sorted(names)
    reverse = shipped[shipped["Model"] == "reverse"].iloc[0]
    assert reverse["Steps"] == load_bundle(REVERSE).card["steps"]
    # a task's parameters as the Train page names them
    assert reverse["Task"] == "Reverse a string (Shortest string 1, Longest string 16)"
    assert shipped[shipped["Model"] == "dates"].iloc[0]["Task"].endswith("(Earliest year 1950, Latest year 2049)")
    buttons = {b.key: b.disabled for b in at.button}
    assert buttons["runs_compare"] and buttons["runs_activate"]  # nothing picked yet


def test_two_picked_open_the_compare_page_with_both(session):
    at, first, _ = session
    reverse = list(table(at)["Model"]).index("reverse")
    pick(at, 0, reverse)
    at.button(key="runs_compare").click().run()
    assert not at.exception, [e.value for e in at.exception]
    a, b = at.session_state["compare_a"], at.session_state["compare_b"]
    assert b == "shipped:reverse" and a == first.added[4]
    assert registry_name(at, a) == "reverse-run1-step4"
    assert any("Compare two models" in t.value for t in at.title)
    assert at.selectbox(key="compare_a_widget").value == a


def registry_name(at, key: str) -> str:
    return at.session_state[registry.SESSION_MODELS][key][1].name


def test_one_picked_is_made_active_or_downloaded(session):
    at, _, second = session
    pick(at, 1)
    at.button(key="runs_activate").click().run()
    active = at.session_state[registry.ACTIVE]
    assert active == second.added[8] and registry_name(at, active) == "reverse-run2-step8"
    # the run's model row is not listed twice: the run stands for it
    assert list(table(at)["Source"]).count("trained here") == 0
    pick(at, 1)
    assert [b for b in at.get("download_button") if b.key == "runs_download"]
    pick(at)
    assert not [b for b in at.get("download_button") if b.key == "runs_download"]
    reverse = runs_table.Row("shipped:reverse", {}, key="shipped:reverse")
    assert runs_table.file_name(reverse) == "reverse.safetensors"


def test_a_run_downloads_as_a_checkpoint_of_its_weights(session, tmp_path):
    _, _, second = session
    row = runs_table.run_row(second)
    path = tmp_path / runs_table.file_name(row)
    path.write_bytes(runs_table.file_bytes(row))
    loaded = load_bundle(path)
    assert loaded.card["steps"] == 8 and loaded.name == "reverse-run2"
    with safe_open(str(path), "pt") as f:
        for name, tensor in second.bundle().model.state_dict().items():
            assert (f.get_tensor(name) == tensor).all()
    assert path.name == "reverse-run2.safetensors"


def test_a_model_downloads_under_its_files_name_or_its_own_name_made_safe(clean_caches, monkeypatch):
    """The checkpoints page's download and the runs table's name a model alike: a shipped one by its file (the
    under-trained reverse model as reverse-early, not its card's "reverse, under-trained (200 steps)"), any other by
    its own name with nothing a file system or a link could misread."""
    shipped = registry.shipped_entries()
    assert "reverse-early.safetensors" in [entry.path.name for entry in shipped]
    for entry in shipped:
        assert registry.file_name(entry) == entry.path.name
    trained = registry.ModelEntry("trained:1", "x", "trained")
    for name, stem in (("reverse, under-trained (200 steps)", "reverse-under-trained-200-steps"),
                       ("../../etc/passwd", "..-..-etc-passwd"), ("反转 模型", "反转-模型"), ("???", "model")):
        monkeypatch.setattr(registry, "bundle_for", lambda key, name=name: SimpleNamespace(name=name))
        assert registry.file_name(trained) == f"{stem}.safetensors"


def test_launching_a_run_keeps_the_previous_one_and_the_history_is_bounded(monkeypatch):
    state: dict = {}
    monkeypatch.setattr(runs.st, "session_state", state)
    monkeypatch.setattr(runs.workers, "watch", lambda job, alive: None)
    made = [tiny_run(0) for _ in range(runs.MAX_HISTORY + 2)]
    try:
        for run in made:
            runs.launch(run, 1)
        assert [r.number for r in runs.session_runs()] == list(range(2, runs.MAX_HISTORY + 3))
        assert runs.current_run() is made[-1]
        assert all(r.snapshot().state == "stopped" for r in runs.session_runs()[:-1])
        runs.discard_run()
        assert runs.current_run() is None and runs.session_runs()[-1] is made[-1]
    finally:
        for run in made:
            stop(run)


def test_registry_origins_include_kept_snapshots():
    assert "snapshot" in registry.ORIGINS
    assert "snapshot" in runs_table.ORIGIN_NAMES


def test_a_long_task_setting_such_as_a_data_set_is_not_spelled_out():
    text = runs_table._task("reverse", {"min_len": 1, "text": "a\tb\n" * 100})
    assert text == "Reverse a string (Shortest string 1, text=…)"  # a parameter the Train page has no field for: as is


@pytest.mark.parametrize(("state", "reason", "shown"), [
    ("finished", Ending.MAX_STEPS, "finished (max steps)"),
    ("finished", "target reached", "finished (target reached)"),  # as a worker's message brings it: a plain string
    ("stopped", Ending.SESSION_GONE, "stopped (session gone)"),
    ("stopped", Ending.STOPPED, "stopped"),
    ("error", Ending.KILLED, "failed (killed)"),
    ("error", Ending.ERROR, "failed"),
    ("paused", None, "paused"),
])
def test_a_runs_state_says_why_it_ended_where_that_says_more(state, reason, shown):
    snap = JobSnapshot(step=3, state=state, history=[], probes=[], error=None, steps_per_s=0.0, elapsed=1.0,
                       finished_reason=reason, loss=0.5, max_steps=10, max_seconds=None)
    assert runs_table.state_text(snap) == shown


def test_every_state_has_its_name():
    assert set(runs_table.STATE_NAMES) == set(State)
