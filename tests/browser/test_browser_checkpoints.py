"""Checkpoints page in a real browser: upload a good checkpoint through the file input (a file of a model already
listed is named as that model, not added), make models active, download, refuse a hostile file, decode with the
uploaded model on the decoding page, and show a file named like markdown as written; a copied link restores the
view (models and evaluation) on a fresh server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from helpers.browser import choose, on_a_fresh_server, open_app_page, read_settled, screenshot, settle
from helpers.repo import REVERSE, needs_reverse

from transformer.network.decoding import greedy_decode
from transformer.store.checkpoints import bundle_to_bytes, load_bundle
from transformer.store.headers import list_checkpoints
from ui import uploads
from ui.tables.checkpoints import CHECKPOINTS

ROW_PX = 35  # st.dataframe's header and row height
VIEW = CHECKPOINTS.view()
INSPECT, SAMPLES, SEED = (f".st-key-{VIEW.widget_key(name)}" for name in ("inspect", "samples", "seed"))
MARKUP = "**bold**![x](http:example.invalid) <img src=x.png> :red[r] `c` $x$"  # a file name: no "/" in one

pytestmark = [pytest.mark.browser, needs_reverse]


def variant(nudge: float):
    """The shipped reverse model with its generator's biases moved by `nudge`: a model not in the list."""
    bundle = load_bundle(REVERSE)
    with torch.no_grad():
        bundle.model.generator.proj.bias.add_(nudge)
    return bundle


def upload(pg, path: Path | dict) -> None:
    files = path if isinstance(path, dict) else str(path)  # a dict: a file by name and bytes
    pg.locator(f".st-key-{uploads.FILE} input[type=file]").set_input_files(files)
    settle(pg, 500)


def active_model(pg) -> str:
    return pg.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input[role=combobox]").first.input_value()


def inspect(pg, label: str) -> None:
    """Pick `label` in the card's model picker."""
    choose(pg, pg.locator(f"{INSPECT} input[role=combobox]"), label)
    settle(pg, 500)


def test_upload_activate_download_refuse_and_decode(fresh_server, page, tmp_path):
    pg = page
    open_app_page(pg, f"{fresh_server.url}/checkpoints")
    pg.locator("[data-testid=stDataFrame]").first.wait_for()
    assert "reverse (pretrained)" in active_model(pg)

    again = tmp_path / "reverse_again.safetensors"  # the shipped file itself: named, not added a second time
    shutil.copyfile(REVERSE, again)
    upload(pg, again)
    success = pg.locator("[data-testid=stAlertContentSuccess]")
    assert "holds the same model as “reverse (pretrained)”" in success.inner_text()
    assert "reverse (pretrained)" in active_model(pg)

    reference = variant(1e-3)
    mine = tmp_path / "my_reverse.safetensors"
    mine.write_bytes(bundle_to_bytes(reference))
    upload(pg, mine)
    assert "loaded as “my_reverse”" in success.inner_text()
    assert "my_reverse (uploaded)" in active_model(pg)
    screenshot(pg, "checkpoints_uploaded")

    first = next(i.path.stem for i in list_checkpoints(REVERSE.parent) if i.error is None)
    grid = pg.locator("[data-testid=stDataFrame]").first.bounding_box()
    pg.mouse.click(grid["x"] + 16, grid["y"] + ROW_PX * 1.5)  # the first row's selection box
    settle(pg, 500)
    picked = read_settled(pg, lambda p: p.locator(f"{INSPECT} input[role=combobox]").input_value(),
                          f"{first} (pretrained)")  # a busy server may start the pick's run after settle's pause
    assert picked == f"{first} (pretrained)"

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
    pg.set_viewport_size({"width": 1024, "height": 768})  # a narrow column: the three figures wrap, each whole
    pg.wait_for_timeout(500)
    assert pg.evaluate(CUT_JS) == []
    screenshot(pg, "checkpoints_evaluated_1024")
    pg.set_viewport_size({"width": 1400, "height": 900})

    pg.get_by_role("link", name="Step-by-step decoding").click()
    settle(pg, 500)
    pg.get_by_text("Source (encoder)").first.wait_for()
    assert "my_reverse (uploaded)" in active_model(pg)
    example = reference.task.examples()[0]
    output = greedy_decode(reference.model, reference.tokenizer, example).output_text
    assert output == reference.task.target(example)
    assert f"<s>{output}</s>" in pg.locator("[data-testid=stMain]").inner_text()  # the decoder's own tokens
    screenshot(pg, "checkpoints_decode_with_upload")

    pg.get_by_role("link", name="Checkpoints").click()  # a file named like markdown shows as written
    settle(pg, 500)
    fetched = []
    pg.on("request", lambda request: fetched.append(request.url) if "x.png" in request.url
          or "example.invalid" in request.url else None)
    upload(pg, {"name": f"{MARKUP}.safetensors", "mimeType": "application/octet-stream",
                "buffer": bundle_to_bytes(variant(2e-3))})
    alert = pg.locator("[data-testid=stAlertContentSuccess]")
    assert f"“{MARKUP}.safetensors” loaded as “{MARKUP}”" in alert.inner_text()
    assert alert.locator("img, strong, a, code, span[class*=math]").count() == 0
    assert active_model(pg) == f"{MARKUP} (uploaded)"
    assert pg.locator(f"{INSPECT} input[role=combobox]").input_value() == f"{MARKUP} (uploaded)"
    assert not fetched
    screenshot(pg, "checkpoints_markdown_file_name")


# The evaluation's figures and labels whose text is cut (Streamlit ends a text too wide for its box with an ellipsis)
CUT_JS = """() => [...document.querySelectorAll('[data-testid=stMetric] *')]
  .filter(el => getComputedStyle(el).textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth)
  .map(el => el.textContent)"""


def view(pg) -> dict:
    """What the page shows: the models picked, the evaluation settings, and the card and evaluation text."""
    value = {name: pg.locator(f"{key} input").first.input_value()
             for name, key in (("inspect", INSPECT), ("samples", SAMPLES), ("seed", SEED))}
    value["active"] = active_model(pg)
    value["text"] = pg.locator("[data-testid=stMainBlockContainer]").inner_text().split("Upload a checkpoint")[0]
    return value


def set_number(pg, key: str, value: int) -> None:
    box = pg.locator(f"{key} input")
    box.fill(str(value))
    box.press("Enter")
    settle(pg)


def evaluate(pg) -> None:
    pg.locator(".st-key-ckpt_evaluate").get_by_role("button", name="Evaluate").click()
    pg.locator("[data-testid=stMetric]").first.wait_for()
    settle(pg)


def test_a_copied_link_restores_the_view_on_a_fresh_server(fresh_server, page, _browser):
    pg = page
    open_app_page(pg, f"{fresh_server.url}/checkpoints")
    choose(pg, pg.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input[role=combobox]").first,
           "copy (pretrained)")  # the active model
    settle(pg)
    inspect(pg, "sort (pretrained)")  # another model's card
    set_number(pg, SAMPLES, 60)
    set_number(pg, SEED, 11)
    pg.wait_for_function("() => ['samples=60', 'seed=11'].every(p => location.search.includes(p))")  # a busy server
    link = pg.url
    for param in ("model=copy", "inspect=sort", "samples=60", "seed=11", "v=1"):
        assert param in link, link
    original = view(pg)
    assert original["inspect"] == "sort (pretrained)" and original["active"] == "copy (pretrained)"
    assert "Press Evaluate to measure this model on 60 held-out inputs drawn with seed 11" in original["text"]
    evaluate(pg)
    evaluated = view(pg)
    screenshot(pg, "checkpoints_linked_view")

    with on_a_fresh_server(_browser, link, fresh_server.url) as fresh:  # nothing of the first session
        fresh.locator("[data-testid=stDataFrame]").first.wait_for()
        assert read_settled(fresh, view, original) == original  # Evaluate ready with the link's settings, not run
        assert fresh.locator("[data-testid=stMetric]").count() == 0
        evaluate(fresh)
        assert view(fresh) == evaluated  # the same held-out inputs, the same figures and worked examples
        assert fresh.url.split("?")[1] == link.split("?")[1]
        screenshot(fresh, "checkpoints_link_restored")
