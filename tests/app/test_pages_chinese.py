"""Every page in Chinese (issue 26): opened by a link with `lang=zh`, a page shows no English outside tokens, code and
formulas (its labels, help, options, text, tables' columns, its charts' titles, axes, legends and hovers, the step
player's), and its link keeps `lang=zh`. Sections shown only after a click or a switch are opened too."""

from __future__ import annotations

import pytest
from helpers.chinese import english_on
from helpers.repo import needs_reverse, open_link
from helpers.train_page import key, state, train_page_from, wait_for

from transformer.i18n import using
from ui.catalog import PAGES

pytestmark = needs_reverse

# pages with the switches that open their later sections
OPENED = {"pages/concepts/masks.py": {"no_causal": "1"}, "pages/concepts/positions.py": {"no_positions": "1"},
          "pages/explore/errors.py": {"schemes": "1"}}


@pytest.mark.parametrize("page", [info.path for info in PAGES], ids=lambda p: p.rsplit("/", 1)[-1][:-3])
def test_a_chinese_link_shows_every_page_in_chinese(page):
    at = open_link(page, {"lang": "zh", **OPENED.get(page, {})})
    assert not at.exception, at.exception
    assert at.query_params["lang"] == ["zh"] or at.query_params["lang"] == "zh"  # the link keeps it
    assert english_on(at) == []


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self"])
def test_the_code_page_reads_in_chinese_for_each_attention_kind(kind):  # the default, cross, is walked above
    at = open_link("pages/learn/code.py", {"lang": "zh", "kind": kind})
    assert not at.exception, at.exception
    assert english_on(at) == []


def test_the_train_page_reads_in_chinese_once_a_run_has_trained(train_page):  # the fixture stops the run
    at = train_page_from(open_link("pages/models/train.py", {"lang": "zh"}))
    with using("zh"):  # AppTest formats the widgets' values for the next run in this thread, as the page did
        at.number_input(key=key("step_count")).set_value(3)
        at.button(key="train_step").click().run()
        wait_for(at, lambda page: state(page) == "paused", 90)
    assert english_on(at) == []


def test_the_checkpoints_page_reads_in_chinese_after_an_evaluation():
    at = open_link("pages/models/checkpoints.py", {"lang": "zh", "samples": "50"})
    at.button(key="ckpt_evaluate").click().run()
    assert english_on(at) == []
