"""Your own data: a task made of (source, target) pairs from a two-column TSV or CSV file or pasted text.

`parse_pairs` reads the text and says what is wrong with it, one message per problem, naming the lines:
`problems` block training (too large, not UTF-8, one-column or three-column lines, conflicting targets for one
source, fields over MAX_FIELD_CHARS, control characters, too few pairs, too many distinct characters); `notes`
say what was skipped (a detected header row, empty lines, repeated lines) and the held-out split's size.

`CustomTask(data=..., title=..., tokenization="char" | "sentencepiece")` trains on the pairs. A fixed held-out
split (a tenth of the distinct sources, at least one, at most MAX_HELDOUT, chosen by a hash of the source) is
disjoint from the training pairs. Its `params` (what a checkpoint stores) hold no training data: the title, a
SHA-256 digest of the cleaned pairs, the characters of sources and targets, the lengths, the training-pair
count and the held-out pairs themselves, so a checkpoint evaluates, decodes, refuses unknown characters by
name and shows its examples anywhere without the file. `make_task("custom", **params)` rebuilds that
data-less form; every stored value is checked as untrusted.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from transformer.i18n import Localized, t
from transformer.network.tokenizers import CharTokenizer, SentencePieceTokenizer, Tokenizer
from .base import Task, TaskError

# What a file or a paste may hold, in MB of 10^6 bytes as browsers count them, so the Train page's uploader states
# the exact limit (the data travels with the run's settings to its worker).
MAX_DATA_MB = 1
MAX_DATA_BYTES = MAX_DATA_MB * 10**6
MAX_FIELD_CHARS = 64  # characters in one source or target
MIN_PAIRS = 30  # distinct pairs needed: a tenth is held out
MAX_DISTINCT_CHARS = 200  # characters in sources and targets together (the character vocabulary)
HELDOUT_FRACTION, MAX_HELDOUT = 0.1, 500
MAX_TITLE = 64
TOKENIZATIONS = ("char", "sentencepiece")
SENTENCEPIECE_VOCAB = 256  # an upper limit: a small data set yields fewer pieces
HEADER_WORDS = {"source", "target", "input", "output", "src", "tgt", "from", "to", "x", "y", "question",
                "answer", "in", "out", "text", "label", "word", "words", "english", "german", "french"}
SHOWN_LINES = 5  # line numbers named in one message before "and N more"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_STORED = {"digest", "train_pairs", "source_chars", "target_chars", "max_source_chars",
           "max_target_chars", "heldout"}


def _lines(numbers: list[int]) -> str:
    """'Line 3', 'Lines 3, 5 and 9', 'Lines 3, 5, 9, 12, 20 and 7 more' (to begin a sentence)."""
    if len(numbers) == 1:
        return t("custom.line", n=numbers[0])
    shown = ", ".join(map(str, numbers[:SHOWN_LINES]))
    if len(numbers) > SHOWN_LINES:
        return t("custom.lines_more", shown=shown, more=len(numbers) - SHOWN_LINES)
    head, _, last = shown.rpartition(", ")
    return t("custom.lines", head=head, last=last)


@dataclass
class ParsedData:
    """What `parse_pairs` found: the distinct pairs in file order, what blocks training, what was skipped."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    text: str = ""  # the decoded text (without a byte-order mark)

    @property
    def ok(self) -> bool:
        return not self.problems


def too_large(size: int) -> str | None:
    """Why data of `size` bytes is refused (over MAX_DATA_BYTES), or None."""
    if size <= MAX_DATA_BYTES:
        return None
    return t("custom.too_large", n=size, mb=MAX_DATA_MB, most=MAX_DATA_BYTES)


def decode_data(data: bytes | str) -> tuple[str | None, str | None]:
    """(text, None) for data within MAX_DATA_BYTES that is UTF-8 (a byte-order mark dropped), else (None, why)."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if why := too_large(size):
        return None, why
    if isinstance(data, str):
        return data.removeprefix("\ufeff"), None
    try:
        return data.decode("utf-8").removeprefix("\ufeff"), None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return None, t("custom.not_utf8", byte=exc.start, line=line)


def _fields(line: str, delimiter: str) -> list[str] | None:
    """The stripped fields of one line, trailing empty ones dropped; None when a CSV line cannot be read."""
    if delimiter == "\t":
        cells = line.split("\t")
    else:
        try:
            cells = next(csv.reader([line], strict=True))
        except csv.Error:
            return None
    cells = [c.strip() for c in cells]
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _line_problem(row: str, cells: list[str] | None) -> str | None:
    """The check a non-empty line fails ("unreadable", "wide", "short", "control", "long"), or None."""
    if cells is None:
        return "unreadable"
    if len(cells) > 2:
        return "wide"
    if len(cells) < 2 or not all(cells):
        return "short"
    if _CONTROL.search(row.replace("\t", "")):
        return "control"
    if max(map(len, cells)) > MAX_FIELD_CHARS:
        return "long"
    return None


def _is_header(row: str, first: list[str] | None, rest: list[list[str] | None]) -> bool:
    """True when the first line passes the checks a data line must and its two cells are column names: both
    common names (source, target, input, ...), or both words made of characters that no later line has in that
    column, where every character of the later lines recurs ("number, roman" over "12, XII", but not "a, .-"
    over single letters and their Morse codes)."""
    if _line_problem(row, first) is not None:
        return False
    if all(c.lower() in HEADER_WORDS for c in first):
        return True
    if not rest or not all(c.replace(" ", "").replace("_", "").isalpha() for c in first):
        return False
    columns = [Counter(), Counter()]
    for cells in rest:
        for column, cell in zip(columns, cells or ()):
            column.update(set(cell))
    return all(not set(cell) & set(column) and min(column.values(), default=0) >= 2
               for cell, column in zip(first, columns))


def parse_pairs(data: bytes | str, delimiter: str | None = None) -> ParsedData:
    """Check two-column data (TSV, or CSV with quotes when no line has a tab; `delimiter` forces one)."""
    text, why = decode_data(data)
    if text is None:
        return ParsedData(problems=[why])
    out = ParsedData(text=text)
    rows = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if rows and rows[-1] == "":
        rows.pop()  # the final newline ends the last line; it is no empty line
    if delimiter is None:
        delimiter = "\t" if any("\t" in row for row in rows) else ","
    found = {k: [] for k in ("empty", "short", "wide", "unreadable", "long", "control", "repeated")}
    targets: dict[str, tuple[str, int]] = {}
    conflicts: list[str] = []
    lines = [(number, row, _fields(row, delimiter)) for number, row in enumerate(rows, 1) if row.strip()]
    if lines and _is_header(*lines[0][1:], [cells for _, _, cells in lines[1:]]):
        number, _, cells = lines.pop(0)
        out.notes.append(t("custom.header", n=number, first=cells[0], second=cells[1]))
    found["empty"] = [number for number, row in enumerate(rows, 1) if not row.strip()]
    for number, row, cells in lines:
        if problem := _line_problem(row, cells):
            found[problem].append(number)
        else:
            source, target = cells
            if source not in targets:
                targets[source] = (target, number)
                out.pairs.append((source, target))
            elif targets[source][0] == target:
                found["repeated"].append(number)
            elif len(conflicts) < SHOWN_LINES:
                conflicts.append(t("custom.conflict", source=repr(source), first=repr(targets[source][0]),
                                   first_line=targets[source][1], second=repr(target), second_line=number))
            else:
                conflicts.append("")
    separator = t("custom.tabs" if delimiter == "\t" else "custom.commas")
    messages = {
        "short": t("custom.short", separator=separator),
        "wide": t("custom.wide", separator=separator) + ("" if delimiter == "\t" else t("custom.quote")),
        "unreadable": t("custom.unreadable"),
        "control": t("custom.control"),
        "long": t("custom.long", n=MAX_FIELD_CHARS),
    }
    out.problems.extend(t("custom.at_lines", lines=_lines(found[key]), problem=problem)
                        for key, problem in messages.items() if found[key])
    if conflicts:
        shown = [c for c in conflicts if c]
        more = t("custom.more", n=len(conflicts) - len(shown)) if len(conflicts) > len(shown) else ""
        out.problems.append(t("custom.conflicts", conflicts=t("app.list_separator").join(shown), more=more))
    chars = {c for pair in out.pairs for c in "".join(pair)}
    if len(chars) > MAX_DISTINCT_CHARS:
        out.problems.append(t("custom.characters", n=len(chars), most=MAX_DISTINCT_CHARS))
    if len(out.pairs) < MIN_PAIRS:
        out.problems.append(t("custom.too_few", n=len(out.pairs), least=MIN_PAIRS))
    if found["empty"]:
        out.notes.append(t("custom.at_lines", lines=_lines(found["empty"]), problem=t("custom.empty")))
    if found["repeated"]:
        out.notes.append(t("custom.at_lines", lines=_lines(found["repeated"]), problem=t("custom.repeated")))
    if out.ok:
        held = heldout_size(len(out.pairs))
        out.notes.append(t("custom.split", n=len(out.pairs), train=len(out.pairs) - held, held=held))
    return out


@lru_cache(maxsize=4)
def _prepared(data: str) -> tuple[ParsedData, str, list, list]:
    """(parse_pairs(data), its digest, training pairs, held-out pairs), kept for the same text: a page builds
    the task from its settings several times a rerun (read-only: CustomTask never changes what it gets)."""
    parsed = parse_pairs(data)
    return (parsed, digest(parsed.pairs), *_split(parsed.pairs)) if parsed.ok else (parsed, "", [], [])


@lru_cache(maxsize=4)
def _sentencepiece(data: str) -> SentencePieceTokenizer:
    """The BPE model of `data`'s sources and targets (deterministic; kept, like `_prepared`, for the same text)."""
    return SentencePieceTokenizer.train([text for pair in _prepared(data)[0].pairs for text in pair],
                                        SENTENCEPIECE_VOCAB)


def read_data_file(path: str | Path) -> bytes:
    """The bytes of a data file, at most MAX_DATA_BYTES + 1 read (TaskError when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_DATA_BYTES + 1)
    except OSError as exc:
        raise TaskError(f"cannot read the data file {path}: {exc.strerror or type(exc).__name__}") from None


def heldout_size(pairs: int) -> int:
    """How many of `pairs` distinct pairs are held out."""
    return min(MAX_HELDOUT, max(1, round(pairs * HELDOUT_FRACTION)))


def digest(pairs: list[tuple[str, str]]) -> str:
    """SHA-256 (hex) of the cleaned pairs in order: the same pairs give the same digest, as TSV or CSV."""
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def _split(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(training pairs in file order, held-out pairs): the held-out ones have the smallest hashes of their source."""
    ranked = sorted(pairs, key=lambda p: hashlib.sha256(p[0].encode("utf-8")).digest())
    held = set(ranked[: heldout_size(len(pairs))])
    return [p for p in pairs if p not in held], [p for p in ranked if p in held]


def _excerpt(text: str, limit: int = 40) -> str:
    """`text` for a message: cut after `limit` characters, with its length when cut (a value from a file or a
    checkpoint is never quoted back whole)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _text(name: str, value, low: int, high: int) -> str:
    if not isinstance(value, str) or not low <= len(value) <= high or _CONTROL.search(value.replace("\t", " ")):
        raise TaskError(f"custom task: {name} must be text of {low}-{high} characters without control characters")
    return value


def _count(name: str, value, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise TaskError(f"custom task: {name} must be a whole number from 0 to {high}")
    return value


class CustomTask(Task):
    """(source, target) pairs of your own: from `data` (TSV/CSV text, checked by `parse_pairs`), or, without
    it, from the stored fields a checkpoint keeps (see the module docstring)."""

    name, title = "custom", Localized("tasks.custom.title")  # an instance's title: the user's
    description = Localized("tasks.custom.description")

    def __init__(self, data: str | None = None, title: str = "my data", tokenization: str = "char", **stored):
        title = _text("title", title, 1, MAX_TITLE)
        if tokenization not in TOKENIZATIONS:
            raise TaskError(f"tokenization must be one of {', '.join(TOKENIZATIONS)}, "
                            f"got {_excerpt(repr(tokenization))}")
        self.title, self.tokenization, self._tokenizer, self._heldout_sources = title, tokenization, None, None
        if data is not None:
            if stored:
                raise TaskError(f"custom task: give data or stored fields, not both ({', '.join(sorted(stored))})")
            self._from_data(data)
        else:
            self._from_stored(stored)
        super().__init__(**self._params())

    def _from_data(self, data) -> None:
        if not isinstance(data, str):
            raise TaskError("custom task: data must be text")
        parsed, self.digest, self.train_pairs, self.heldout_pairs = _prepared(data)
        if not parsed.ok:
            raise TaskError(" · ".join(parsed.problems))
        if self.tokenization == "sentencepiece":
            spaced = [i for i, pair in enumerate(parsed.pairs) if any("  " in s for s in pair)]
            if spaced:
                raise TaskError(f"{len(spaced)} pair(s) hold runs of spaces (the first: {parsed.pairs[spaced[0]]!r}); "
                                f"sentencepiece keeps only one: use character tokenisation or single spaces")
        self.parsed, self._data = parsed, data
        self.source_chars = "".join(sorted({c for s, _ in parsed.pairs for c in s}))
        self.target_chars = "".join(sorted({c for _, t in parsed.pairs for c in t}))
        self._max_source = max(len(s) for s, _ in parsed.pairs)
        self._max_target = max(len(t) for _, t in parsed.pairs)
        self._answers = dict(parsed.pairs)
        self._train_count = len(self.train_pairs)

    def _from_stored(self, stored: dict) -> None:
        if set(stored) != _STORED:
            wrong = sorted(set(stored) ^ _STORED)
            raise TaskError(f"custom task: without data the stored fields are needed exactly (wrong: "
                            f"{_excerpt(', '.join(map(str, wrong)), 200)})")
        self.parsed, self.train_pairs = None, []
        self.digest = stored["digest"]
        if not (isinstance(self.digest, str) and re.fullmatch("[0-9a-f]{64}", self.digest)):
            raise TaskError("custom task: digest must be 64 hexadecimal digits")
        self.source_chars = _text("source_chars", stored["source_chars"], 1, MAX_DISTINCT_CHARS)
        self.target_chars = _text("target_chars", stored["target_chars"], 1, MAX_DISTINCT_CHARS)
        self._max_source = _count("max_source_chars", stored["max_source_chars"], MAX_FIELD_CHARS)
        self._max_target = _count("max_target_chars", stored["max_target_chars"], MAX_FIELD_CHARS)
        self._train_count = _count("train_pairs", stored["train_pairs"], MAX_DATA_BYTES)
        held = stored["heldout"]
        if not (isinstance(held, list) and 1 <= len(held) <= MAX_HELDOUT):
            raise TaskError(f"custom task: heldout must be a list of 1 to {MAX_HELDOUT} pairs")
        pairs = []
        for pair in held:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise TaskError("custom task: each held-out pair must be [source, target]")
            source = _text("a held-out source", pair[0], 1, self._max_source)
            target = _text("a held-out target", pair[1], 1, self._max_target)
            if set(source) - set(self.source_chars) or set(target) - set(self.target_chars):
                raise TaskError("custom task: a held-out pair uses characters outside the stored ones")
            pairs.append((source, target))
        self._answers = dict(pairs)
        if len(self._answers) != len(pairs):
            raise TaskError("custom task: the held-out sources must be distinct")
        self.heldout_pairs = pairs

    def _params(self) -> dict:
        return {"title": self.title, "tokenization": self.tokenization, "digest": self.digest,
                "train_pairs": self._train_count, "source_chars": self.source_chars,
                "target_chars": self.target_chars, "max_source_chars": self._max_source,
                "max_target_chars": self._max_target, "heldout": [list(p) for p in self.heldout_pairs]}

    def card_params(self) -> dict:
        """The parameters without the held-out pairs (a card holds plain values only), with their count."""
        return {k: v for k, v in self.params.items() if k != "heldout"} | {"heldout_pairs": len(self.heldout_pairs)}

    @property
    def has_data(self) -> bool:
        """True when built from the data (it can train); False when rebuilt from a checkpoint's fields."""
        return self.parsed is not None

    @property
    def max_source_chars(self) -> int:
        return self._max_source

    @property
    def max_target_chars(self) -> int:
        return self._max_target

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        """Characters of sources and targets, or a BPE model trained on every source and target (the held-out
        ones too: segmentation only, no answers are learnt from it)."""
        if self._tokenizer is None:
            if self.tokenization == "char":
                self._tokenizer = CharTokenizer("".join(sorted(set(self.source_chars + self.target_chars))))
            elif not self.has_data:
                raise TaskError("this custom task's sentencepiece model lives in its checkpoint; "
                                "training it again needs the data")
            else:
                self._tokenizer = _sentencepiece(self._data)
        return self._tokenizer

    def _check(self, source: str) -> None:
        unknown = sorted(set(source) - set(self.source_chars))
        if not source or unknown:
            shown = ", ".join(repr(c) for c in unknown) or "nothing"
            raise TaskError(t("custom.unknown_characters", title=self.title, shown=shown,
                              known=repr(self.source_chars)))

    def target(self, source: str) -> str:
        self._check(source)
        if source not in self._answers:
            where = t("custom.the_data" if self.has_data else "custom.stored_pairs")
            raise TaskError(t("custom.not_an_input", source=repr(source), where=where))
        return self._answers[source]

    def random_source(self, rng: random.Random) -> str:
        return rng.choice(self.train_pairs or self.heldout_pairs)[0]

    def in_heldout(self, source: str) -> bool:
        if self._heldout_sources is None:
            self._heldout_sources = {s for s, _ in self.heldout_pairs}
        return source in self._heldout_sources

    def examples(self) -> list[str]:
        return [s for s, _ in self.heldout_pairs[:4]]

    def pairs(self, n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
        """`n` training pairs drawn with replacement (seeded); or up to `n` distinct held-out pairs, seeded
        order (all of them when `n` is larger: there are no more)."""
        if split not in ("train", "heldout"):
            raise TaskError(f"split must be 'train' or 'heldout', got {split!r}")
        rng = random.Random(seed)
        if split == "heldout":
            return rng.sample(self.heldout_pairs, min(n, len(self.heldout_pairs)))
        if not self.train_pairs:
            raise TaskError("this custom task was loaded without its data; training needs the data file")
        return [rng.choice(self.train_pairs) for _ in range(n)]
