"""The reader's language, English or Simplified Chinese: the `lang` prop every page's table holds (so `lang=zh` is
in every link), the browser's locale when no link or switch chose one, the sidebar's switch, and the text of every
page and chart following it (`transformer.i18n` reads it through `current`)."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from transformer import i18n
from transformer.i18n import LANGUAGES, NAMES, t

from .tables.shared import LANG, SHARED

# Chinese text in the browser's own CJK font, no web font fetched: Streamlit's Source Sans has no CJK glyphs,
# so each family below is tried in turn (Linux, macOS, Windows); `lang` on the page picks the Simplified forms
# where a font holds several (Noto Sans CJK, whose default forms are Japanese).
FONT_CSS = """<style>
html, body, [data-testid="stApp"] { font-family: "Source Sans", "Source Sans Pro", "Noto Sans CJK SC",
  "Noto Sans SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", "Microsoft YaHei",
  "WenQuanYi Micro Hei", sans-serif; }
</style>"""
# Streamlit writes its file uploader's button and size note in English only (it has no languages of its own,
# streamlit#1353): in Chinese the button says 上传 and the note goes (each page states its limits itself).
UPLOADER_CSS = """<style>
[data-testid=stFileUploaderDropzone] button [data-testid=stMarkdownContainer] p { visibility: hidden; font-size: 0; }
[data-testid=stFileUploaderDropzone] button [data-testid=stMarkdownContainer] p::after {
  visibility: visible; font-size: 1rem; content: "{upload}"; }
[data-testid=stFileUploaderDropzoneInstructions] { display: none; }
</style>"""
HTML_LANG = {"en": "en", "zh": "zh-CN"}


def from_locale(locale: str | None) -> str:
    """The language for a browser's locale ("zh-CN", "zh-Hans-SG", "en-US"; None under tests): Chinese for zh-*."""
    return "zh" if (locale or "").lower().split("-")[0] == "zh" else i18n.DEFAULT


def current() -> str | None:
    """This session's language: the one chosen (a link, the switch), else the browser locale's, kept as the
    session's choice so the page's link carries it. None outside a script run (a worker thread): English."""
    if get_script_run_ctx() is None:
        return None
    if st.session_state.get(LANG.key) not in LANGUAGES:
        st.session_state[LANG.key] = from_locale(st.context.locale)
    return st.session_state[LANG.key]


def follow_session() -> None:
    """Make every text the library and the pages write follow this session's language (app.py, every run)."""
    i18n.follow(current)


def switch() -> None:
    """The sidebar's language switch (English / 中文): the page reruns in the other language, its view kept."""
    SHARED.view().widget(LANG.name, st.segmented_control, t("app.language"), LANGUAGES, format_func=NAMES.get,
                         required=True, width="stretch")
    chinese = UPLOADER_CSS.replace("{upload}", t("app.upload.button")) if i18n.language() == "zh" else ""
    st.html(FONT_CSS + chinese)


def html_lang() -> str:
    """The page's `lang` attribute for the current language (set by the sidebar's page script)."""
    return HTML_LANG[i18n.language()]
