"""The link under every attention, mask and positional chart to the code that computed it: its section of the code
page, opened with the input and the attention kind, layer and head the chart shows."""

from __future__ import annotations

import streamlit as st

from transformer.i18n import t

from .state import FORMAT_VERSION, VERSION_PARAM
from .tables.code import CODE

CODE_PAGE = "pages/learn/code.py"


def code_link(section: str, *, text: str | None = None, kind: str = "cross", layer: int | None = None,
              head: int | None = None) -> None:
    """A link to `section` of the code page. `text`: the input (the shared one unless given); `kind`, `layer` and
    `head` (0-based; None: the code page's choice): the attention shown. The link names the whole view, so it
    opens the same however the code page was last left."""
    values = {"section": section, "kind": kind, "layer": None if layer is None else layer + 1,
              "head": None if head is None else head + 1}
    if text is not None:
        values["input"] = text
    params = {VERSION_PARAM: str(FORMAT_VERSION), **CODE.view().params(values)}
    st.page_link(CODE_PAGE, label=t("app.code_link"), icon=":material/code:", query_params=params)
