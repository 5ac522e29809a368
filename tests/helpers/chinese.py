"""Reading a page in Chinese for English left on it: the words a Chinese page may show (names, units, symbols),
the text an AppTest run shows (every element's words, its charts' titles, axes, legends and hovers, the step
player's), and the same text with tokens, code and formulas taken out."""

from __future__ import annotations

import json
import re

from google.protobuf.json_format import MessageToDict

from transformer.store.headers import list_checkpoints
from transformer.tasks import TASKS, CustomTask

from .repo import ROOT

# Latin-script words a Chinese page may show: names of methods, formats and programs, units, and symbols written
# in Latin letters. A word with an underscore or a digit in it is an identifier (d_model, L1H4): code.
ALLOWED = {
    "Transformer", "softmax", "logit", "logits", "RoPE", "ALiBi", "Adam", "Muon", "Xavier", "top", "PNG", "SVG",
    "CSV", "TSV", "GIF", "MP4", "HTML", "JSON", "UTF", "ISO", "PE", "GPU", "CPU", "CUDA", "MB", "sin", "cos", "diag",
    "sentencepiece", "pos", "RMS", "Enter", "Esc", "norm", "sublayer", "Noto", "CJK", "Top", "inf", "README", "PyTorch",
    "UTC", "pickle", "QK", "png", "svg", "ReLU", "KV", "log", "Annotated",  # Annotated: the Annotated Transformer
    "max", "xW",  # the feed-forward's formula in a chart title, max(0, xW₁+b₁) (plotly titles are plain text)
}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'’-]*[A-Za-z0-9]")
TEXT_FIELDS = {"label", "help", "body", "placeholder", "content", "displayText", "text", "title", "name",
               "tip", "caption", "sentence", "waiting", "labels"}
# formulas, code, data shown as JSON, the app's own markup (CSS, the copy-link button)
SKIPPED = {"latex", "code", "json", "html", "iframe"}
# widgets whose words are not the app's: the input's example pills (the task's inputs, data) and the language
# switch (each language named in its own words)
OWN_WORDS = ("_examples", "lang_widget")


def names() -> set[str]:
    """Words that name things on a page: the shipped models, the tasks."""
    stems = {path.stem for path in (ROOT / "assets" / "checkpoints").rglob("*.safetensors")}
    found = set(TASKS) | {CustomTask.name} | {info.task for info in list_checkpoints(ROOT / "assets" / "checkpoints")}
    return {part for name in stems | found for part in re.split(r"[-_/]", name)} | stems | found


def english_words(text: str, allowed: set[str] = frozenset()) -> list[str]:
    """Latin-script words of two letters or more in `text` that are not in ALLOWED or `allowed`; an identifier
    (with an underscore or a digit) counts as code."""
    known = ALLOWED | set(allowed)
    return [word for word in WORD.findall(text) if word not in known and not re.search(r"[_0-9]", word)
            and not all(part in known for part in re.split(r"[-'’]", word) if len(part) > 1)]


def prose(text: str) -> str:
    """What a reader reads of a markdown or HTML text: code spans, formulas, tags, tokens (<pad>, </s>), icons,
    colour directives, placeholders a browser fills (%{y}, {step}), and code written as it is (paths, module
    names, a file's suffix, a JSON key in quotes) taken out."""
    text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)  # markdown's escapes (ui.markdown.literal) undone
    text = re.sub(r"(`+)(.+?)\1", " ", text, flags=re.S)
    text = re.sub(r"\$\$.+?\$\$|\$[^$]+\$", " ", text, flags=re.S)
    text = re.sub(r"<code>.*?</code>", " ", text, flags=re.S)
    text = re.sub(r"&lt;/?\w+&gt;|</?[a-z][^>]*>", " ", text)
    text = re.sub(r":material/\w+:|:[a-z-]+\[|%\{[^}]*\}|\{\w+\}", " ", text)  # icons, colours, placeholders
    text = re.sub(r"[!-~]*\w[/.]\w[!-~]*|\.\w+\b|\"\w+\"", " ", text)  # paths, modules, calls, .suffixes, "keys"
    return text


def _strings(value, field: str = ""):
    """The strings of a proto (as a dict) or a JSON value under text-bearing fields."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _strings(inner, key)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner, field)
    elif isinstance(value, str) and field in TEXT_FIELDS:
        yield value


def figure_texts(spec: dict):
    """A plotly figure's words: its titles, axis and colour-bar titles, annotations, trace names and hovers."""
    layout = spec.get("layout", {})
    for name, part in layout.items():
        if isinstance(part, dict) and isinstance(part.get("title"), dict):
            yield part["title"].get("text") or ""
        if name == "annotations":
            yield from (note.get("text") or "" for note in part)
    for trace in spec.get("data", []):
        if trace.get("type", "scatter") in ("scatter", "bar") and trace.get("showlegend") is not False:
            yield trace.get("name") or ""  # in the legend
        yield trace.get("hovertemplate") or ""
        colorbar = trace.get("colorbar") or {}
        yield (colorbar.get("title") or {}).get("text") or ""
        yield from (str(tick) for tick in colorbar.get("ticktext") or [])
        if trace.get("type") == "bar":
            continue
        yield from (str(tick) for tick in trace.get("text") or [] if isinstance(tick, str) and len(tick) > 3)


def page_texts(at) -> list[tuple[str, str]]:
    """(element type, text) of every word an AppTest run shows, in the reader's terms (tokens, code and
    formulas out); the step player's and the charts' texts included."""
    found = []
    for el in at._tree:  # every node, depth first (the root's proto is None)
        kind, proto = getattr(el, "type", None), getattr(el, "proto", None)
        if kind in SKIPPED or proto is None or not hasattr(proto, "DESCRIPTOR"):
            continue
        data = MessageToDict(proto)
        if str(data.get("id", "")).endswith(OWN_WORDS):
            continue
        texts = list(_strings({k: v for k, v in data.items() if k not in ("spec", "json", "columns")}))
        if "spec" in data:
            texts += figure_texts(json.loads(data["spec"]))
        if "json" in data:
            component = json.loads(data["json"])
            texts += _strings({k: v for k, v in component.items() if k not in ("figures", "source", "start_chip")})
            texts += list(component.get("texts", {}).values())  # the player's buttons and slider
            texts += [text for figure in component.get("figures", []) for text in figure_texts(figure)]
            texts += [chip["tip"] for chip in component.get("source", [])]
        configured = json.loads(data.get("columns") or "{}")  # a table's columns shown by another label
        texts += _strings(configured)
        if kind in ("dataframe", "arrow_data_frame") and hasattr(el, "value"):
            texts += [str(column) for column in el.value.columns if str(column) not in configured]
        found += [(kind, prose(text)) for text in texts if text]
    return found


def english_on(at, allowed: set[str] = frozenset()) -> list[str]:
    """"word (in: the text)" for every English word the page shows outside tokens, code and formulas."""
    known = names() | set(allowed)
    return [f"{word} (in {kind}: {text.strip()[:120]!r})" for kind, text in page_texts(at)
            for word in english_words(text, known)]
