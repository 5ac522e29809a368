"""Every CSV the app offers is safe to open in a spreadsheet: with models named like formulas, a task whose data
and inputs start with `=`, `+`, `-` and `@`, every download button's CSV on the pages that offer one is read back
and no cell starts like a formula (a neutralised one starts with `'`); numbers stay numbers."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from helpers.repo import ROOT
from transformer.charts.export import FORMULA_STARTS
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer

EVIL = '=HYPERLINK(CONCAT("http:",CHAR(47),CHAR(47),"evil.example"),"Click")'
DATA = "\n".join(f"{start}{a}{b}\t{end}{b}{a}" for start, end in (("=", "-"), ("+", "@"), ("@", "="), ("-", "+"))
                 for a in "abc" for b in "xyz")  # 36 pairs, every source and target starting like a formula
TINY = {"n_enc_layers": 1, "n_dec_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}


@pytest.fixture
def downloads(monkeypatch):
    """Every file a download button hands the browser, by its media URL's file id."""
    files: dict[str, bytes] = {}
    keep = MemoryMediaFileStorage.load_and_get_id

    def recording(self, path_or_data, mimetype, kind, filename=None):
        file_id = keep(self, path_or_data, mimetype, kind, filename)
        files[file_id] = self._files_by_id[file_id].content
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", recording)
    return files


@pytest.fixture(scope="module")
def models():
    """Two untrained models of a task whose every pair starts like a formula, named like formulas."""
    train = TrainConfig(task="custom", task_params={"data": DATA, "title": "+SUM(1,2)"}, steps=10, device="cpu")
    first, second = (Trainer(train, TINY).bundle() for _ in range(2))
    named = {"uploaded": (first, EVIL), "snapshot": (second, "@cmd|' /C calc'!A0")}
    return {f"{origin}:{letter * 22}": (origin, dataclasses.replace(bundle, card=bundle.card | {"name": name}))
            for letter, (origin, (bundle, name)) in zip("AB", named.items())}


def csv_cells(at: AppTest, files: dict[str, bytes]) -> dict[str, list[str]]:
    """Every CSV download of the page as it stands: its file name -> its cells."""
    found = {}
    for button in at.get("download_button"):
        file_id = button.proto.url.rsplit("/", 1)[-1].split(".")[0]
        if file_id in files and button.proto.url.endswith(".csv"):
            rows = csv.reader(io.StringIO(files[file_id].decode("utf-8"), newline=""))
            found[button.proto.id] = [cell for row in rows for cell in row]
    return found


def opened(page: str, models: dict, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["session_models"] = dict(models)
    at.switch_page(page)
    for name, value in {"model": next(iter(models)), **(query or {})}.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_every_csv_neutralises_formulas_from_names_data_and_inputs(clean_caches, downloads, models):
    a, b = models
    pages = {"compare": opened("pages/explore/compare.py", models, {"a": a, "b": b}),
             "errors": opened("pages/explore/errors.py", models, {"samples": "20"}),
             "checkpoints": opened("pages/models/checkpoints.py", models),
             "decode": opened("pages/explore/decode.py", models, {"input": "=ax"})}
    every = {f"{page}:{button}": cells for page, at in pages.items()
             for button, cells in csv_cells(at, downloads).items()}
    assert any("compare_facts_csv" in name for name in every), sorted(every)
    assert any("errors_failures_csv" in name for name in every), sorted(every)
    assert any("runs_table_csv" in name for name in every), sorted(every)
    cells = [cell for found in every.values() for cell in found]
    unsafe = [cell for cell in cells if cell.startswith(FORMULA_STARTS) and not is_number(cell)]
    assert not unsafe, unsafe[:10]
    assert "'" + EVIL in cells and "'+SUM(1,2)" in cells  # the hostile names and title were there, neutralised
    sources = {line.split("\t")[0] for line in DATA.splitlines()}
    assert any(cell[1:] in sources for cell in cells if cell.startswith("'"))  # a failing input, neutralised


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
