"""Text from outside the app (a file name, a model name, a checkpoint's error, a link's query) shown through
Streamlit's markdown (st.markdown, alerts, captions, st.table cells) exactly as written, never rendered.

Measured in Streamlit 1.67: backslash escapes stop emphasis, images (which fetch their URL), links, HTML,
code, math, colour directives and emoji shortcodes, but not GitHub's bare-URL and e-mail autolinks (found in
the parsed text, after the escapes are gone), so an invisible word joiner breaks those."""

from __future__ import annotations

import re

PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # all ASCII punctuation: CommonMark lets each be escaped
AUTOLINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)")  # where a bare URL or e-mail address starts
WORD_JOINER = "\u2060"


def literal(text: str) -> str:
    """Markdown that shows `text` as written, on one line."""
    flat = " ".join(str(text).splitlines())
    return PUNCTUATION.sub(r"\\\1", AUTOLINK.sub(WORD_JOINER, flat))


def code(text: str) -> str:
    """Markdown inline code that shows `text` as written: fenced by one backtick more than its longest run of
    backticks (CommonMark), so a token like `a`<img>` cannot close the span and render what follows."""
    flat = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip(" ") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def plain(markdown: str) -> str:
    """The text `literal` was given (its line breaks as spaces): what the reader sees."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace(WORD_JOINER, "")
