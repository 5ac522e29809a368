"""The pages on the Chinese task (AppTest): decoding writes the numeral and names a character it does not know, the
attention page starts on a head that follows the expected alignment, the errors page lists an under-trained model's
failures with their Chinese answers, and the Train page's preset run stops at its bar."""

from __future__ import annotations

from helpers.train_page import job_of, key, state, wait_for
from transformer.store.checkpoints import bundle_to_bytes
from transformer.training.presets import PRESETS
from transformer.tasks import make_task
from transformer.tasks.zh_numbers import ZH_CHARS
from ui import uploads
from ui.markdown import plain

MODEL, INPUT = "active_model_widget", "shared_input_widget"


def open_on_zh(app, page: str):
    at = app(page)
    at.selectbox(key=MODEL).set_value("shipped:zh_numbers").run()
    assert not at.exception and not at.error
    return at


def test_decoding_writes_the_numeral_and_names_an_unknown_character(app):
    at = open_on_zh(app, "pages/explore/decode.py")
    at.text_input(key=INPUT).input("four hundred and five").run()
    lines = [m.value for m in at.markdown]
    assert "**Expected** (the task's rule): `四百零五`" in lines
    assert any(line.startswith("**Output:**") and "right" in line for line in lines)
    at.text_input(key=INPUT).input("两百").run()
    assert any("does not know these characters: '两'" in plain(e.value) for e in at.error)


def test_the_attention_page_starts_on_a_head_that_follows_the_alignment(app):
    at = open_on_zh(app, "pages/explore/attention.py")
    assert at.success and "Layer" in at.success[0].value
    assert at.dataframe[0].value["Alignment"].max() >= 0.9  # most weight on the word each character comes from


def test_the_errors_page_lists_chinese_failures(app):
    trainer = PRESETS["zh_numbers"].trainer(steps=40)  # far from the bar: many failures
    for _ in range(40):
        trainer.step()
    at = app("pages/models/checkpoints.py")
    at.file_uploader(key=uploads.FILE).upload("early.safetensors", bundle_to_bytes(trainer.bundle("early"))).run()
    at.switch_page("pages/explore/errors.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table, task = at.dataframe[0].value, make_task("zh_numbers")
    assert len(table) and all(task.target(s) == e for s, e in zip(table["input"], table["expected"]))
    assert set("".join(table["expected"])) <= set(ZH_CHARS)


def test_the_train_page_reaches_the_bar_with_the_preset(train_page):  # noqa: F811
    at = train_page()
    at.selectbox(key=key("task")).set_value("zh_numbers").run()
    assert "reaches 95%" in at.checkbox(key=key("stop_early")).label
    at.button(key="train_start").click().run()
    wait_for(at, lambda a: state(a) == "finished", timeout=180)
    snap = job_of(at).snapshot()
    assert snap.finished_reason == "target reached" and snap.history[-1]["exact_match"] >= 0.95
