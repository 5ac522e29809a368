"""ui.markdown.code: inline code that no text can close early (CommonMark: a span closes only on a run of
backticks as long as the one that opened it)."""

from __future__ import annotations

import re

import pytest

from ui.markdown import code


@pytest.mark.parametrize("text", ["abc", "a`b", "``x``", "`", "a```b`", "<img src=x>", "", "  ", "line\\nbreak"])
def test_the_fence_is_longer_than_any_backtick_run_inside(text):
    out = code(text)
    fence = re.match(r"`+", out)[0]
    inner = out[len(fence):-len(fence)]
    assert out.endswith(fence) and fence not in inner
    assert max((len(r) for r in re.findall(r"`+", inner)), default=0) < len(fence)
    assert inner.strip(" ") == " ".join(text.splitlines()).strip(" ") or inner == " " + text + " "
