"""Checkpoints page in a real browser: upload a good checkpoint through the file input, make models active,
download, refuse a hostile file, then decode with the uploaded model on the decoding page."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from conftest import REVERSE, needs_reverse, open_app_page, screenshot, settle
from transformer.checkpoints import list_checkpoints, load_bundle
from transformer.decoding import greedy_decode

ROW_PX = 35  # st.dataframe's header and row height

pytestmark = [pytest.mark.browser, needs_reverse]


def upload(pg, path: Path) -> None:
    pg.locator(".st-key-ckpt_upload input[type=file]").set_input_files(str(path))
    settle(pg, 500)


def active_model(pg) -> str:
    return pg.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input[role=combobox]").first.input_value()


def inspect(pg, label: str) -> None:
    """Pick `label` in the card's model picker (a second click on a combobox that kept focus does not open
    it; the arrow key does)."""
    box = pg.locator(".st-key-ckpt_inspect input[role=combobox]")
    box.click()
    if box.get_attribute("aria-expanded") != "true":
        box.press("ArrowDown")
    pg.get_by_role("option", name=label).click()
    settle(pg, 500)


def test_upload_activate_download_refuse_and_decode(fresh_server, page, tmp_path):
    pg = page
    open_app_page(pg, f"{fresh_server.url}/checkpoints")
    pg.locator("[data-testid=stDataFrame]").first.wait_for()
    assert "reverse (pretrained)" in active_model(pg)

    mine = tmp_path / "my_reverse.safetensors"
    shutil.copyfile(REVERSE, mine)
    upload(pg, mine)
    success = pg.locator("[data-testid=stAlertContentSuccess]")
    assert "loaded as “my_reverse”" in success.inner_text()
    assert "my_reverse (uploaded)" in active_model(pg)
    screenshot(pg, "checkpoints_uploaded")

    first = next(i.path.stem for i in list_checkpoints(REVERSE.parent) if i.error is None)
    grid = pg.locator("[data-testid=stDataFrame]").first.bounding_box()
    pg.mouse.click(grid["x"] + 16, grid["y"] + ROW_PX * 1.5)  # the first row's selection box
    settle(pg, 500)
    assert pg.locator(".st-key-ckpt_inspect input[role=combobox]").input_value() == f"{first} (pretrained)"

    inspect(pg, "reverse (pretrained)")
    pg.locator(".st-key-ckpt_activate").get_by_role("button", name="Make active").click()
    settle(pg, 500)
    assert "reverse (pretrained)" in active_model(pg)
    inspect(pg, "my_reverse (uploaded)")
    pg.locator(".st-key-ckpt_activate").get_by_role("button", name="Make active").click()
    settle(pg, 500)
    assert "my_reverse (uploaded)" in active_model(pg)

    with pg.expect_download() as download:
        pg.locator(".st-key-ckpt_download").get_by_role("button", name="Download").click()
    assert download.value.suggested_filename == "my_reverse.safetensors"
    fetched = load_bundle(download.value.path())
    reference = load_bundle(REVERSE)
    assert fetched.name == "my_reverse"
    assert all(torch.equal(a, b) for a, b in zip(fetched.model.state_dict().values(),
                                                  reference.model.state_dict().values()))

    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(REVERSE.read_bytes()[:4000])
    upload(pg, junk)
    error = pg.locator("[data-testid=stAlertContentError]")
    assert "“junk.safetensors” was refused" in error.inner_text()
    assert "my_reverse (uploaded)" in active_model(pg)
    pg.locator(".st-key-ckpt_evaluate").get_by_role("button", name="Evaluate").click()
    settle(pg, 500)
    assert pg.locator("[data-testid=stMetric]").count() == 3 and pg.locator("[data-testid=stTable]").count() == 1
    screenshot(pg, "checkpoints_refused_and_evaluated")

    pg.get_by_role("link", name="Step-by-step decoding").click()
    settle(pg, 500)
    pg.get_by_text("Source (encoder)").first.wait_for()
    assert "my_reverse (uploaded)" in active_model(pg)
    example = reference.task.examples()[0]
    output = greedy_decode(reference.model, reference.tokenizer, example).output_text
    assert output == reference.task.target(example)
    assert f"<s>{output}</s>" in pg.locator("[data-testid=stMain]").inner_text()  # the decoder's own tokens
    screenshot(pg, "checkpoints_decode_with_upload")
