"""Toy tasks: seeded generators of (source, target) pairs, with held-out inputs kept out of training.

A source belongs to the held-out split when a stable hash of its text falls in a fixed bucket, so the
split is the same in every run, for every seed, in training and in evaluation.
"""

from __future__ import annotations

import itertools
import random
import re
import string
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import date, timedelta

import torch

from .masks import BOS, EOS, PAD
from .tokenizers import CharTokenizer, SentencePieceTokenizer, Tokenizer

HASH_BASE, HASH_MOD, HELDOUT_BUCKETS = 131, 2_147_483_647, 10


class TaskError(ValueError):
    """A task name or parameter is invalid, or a source is not a valid input for the task."""


def stable_hash(codepoints: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Polynomial hash of (n, L) codepoints (only the first `lengths[i]` of each row count)."""
    powers = torch.ones(codepoints.size(1), dtype=torch.int64)
    for i in range(1, codepoints.size(1)):
        powers[i] = powers[i - 1] * HASH_BASE % HASH_MOD
    live = torch.arange(codepoints.size(1))[None, :] < lengths[:, None]
    return (codepoints.long() * powers * live).sum(dim=1) % HASH_MOD


def is_heldout(source: str) -> bool:
    """True when `source` is reserved for evaluation and never trained on (the hash of `stable_hash`,
    in plain Python: one string at a time is ~20x faster without tensors)."""
    value = 0
    for c in reversed(source):  # Horner's rule for sum(ord(c_i) * HASH_BASE**i)
        value = (value * HASH_BASE + ord(c)) % HASH_MOD
    return value % HELDOUT_BUCKETS == 0


def encode_pairs(tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad a batch: source = tokens </s>; target = <s> tokens </s>. Returns (src, tgt) int64 tensors."""
    srcs = [tokenizer.encode(s) + [EOS] for s, _ in pairs]
    tgts = [[BOS] + tokenizer.encode(t) + [EOS] for _, t in pairs]
    return _pad(srcs), _pad(tgts)


def _bounded_int(name: str, value, low: int, high: int) -> int:
    """`value` when it is a whole number in low..high; TaskError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TaskError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


def _draw_up_to(rng: random.Random, max_value: int) -> int:
    """A number in 0..max_value: a digit count drawn uniformly first, so short numbers are common too."""
    digits = rng.randint(1, len(str(max_value)))
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), min(10**digits - 1, max_value))


def _pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD, dtype=torch.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


class Task(ABC):
    """A toy sequence-to-sequence task with validated parameters."""

    name: str
    title: str
    description: str

    def __init__(self, **params):
        self.params = params

    @abstractmethod
    def random_source(self, rng: random.Random) -> str:
        """One random input (from either split)."""

    @abstractmethod
    def target(self, source: str) -> str:
        """The right answer for `source`; TaskError if `source` is not a valid input for this task."""

    @abstractmethod
    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        """A tokenizer covering every source and target this task produces."""

    @property
    @abstractmethod
    def max_source_chars(self) -> int: ...

    @property
    @abstractmethod
    def max_target_chars(self) -> int: ...

    def alignment(self, source: str) -> list[int] | None:
        """For each target token, the source position it should attend to; None where undefined."""
        return None

    def in_heldout(self, source: str) -> bool:
        """True when `source` is reserved for evaluation (the stable hash split, unless a task says more)."""
        return is_heldout(source)

    def examples(self) -> list[str]:
        """A few inputs worth trying, held out from training."""
        return [s for s, _ in self.pairs(4, seed=12345, split="heldout")]

    def _heldout_like(self, wanted: list[Callable[[str], bool]], seed: int = 12345, tries: int = 5000) -> list[str]:
        """Examples: for each predicate, the first new held-out source drawn (seeded) that satisfies it."""
        rng, out = random.Random(seed), []
        for want in wanted:
            drawn = (self.random_source(rng) for _ in range(tries))
            out.extend(itertools.islice((s for s in drawn if want(s) and self.in_heldout(s) and s not in out), 1))
        return out or Task.examples(self)

    def pairs(self, n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
        """`n` seeded pairs from the "train" or "heldout" split."""
        if split not in ("train", "heldout"):
            raise TaskError(f"split must be 'train' or 'heldout', got {split!r}")
        rng, want_heldout, out = random.Random(seed), split == "heldout", []
        for _ in range(1000 * n + 1000):
            source = self.random_source(rng)
            if self.in_heldout(source) == want_heldout:
                out.append((source, self.target(source)))
                if len(out) == n:
                    return out
        raise TaskError(f"the {self.name} task with {self.params} has too few distinct {split} inputs")

    def batch(self, n: int, generator: torch.Generator, tokenizer: Tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
        """A padded training batch (src, tgt) of `n` train-split pairs; see `encode_pairs`."""
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        return encode_pairs(tokenizer, self.pairs(n, seed, "train"))


class LetterTask(Task):
    """Random lowercase strings mapped character-by-character: reverse, copy, sort.

    Batches are built with tensor operations (no per-sample Python)."""

    alphabet = string.ascii_lowercase

    def __init__(self, min_len: int = 1, max_len: int = 16):
        if not (isinstance(min_len, int) and isinstance(max_len, int) and 1 <= min_len <= max_len <= 48):
            raise TaskError(f"string lengths must satisfy 1 <= min_len <= max_len <= 48, got {min_len}..{max_len}")
        super().__init__(min_len=min_len, max_len=max_len)
        self.min_len, self.max_len = min_len, max_len

    @property
    def max_source_chars(self) -> int:
        return self.max_len

    @property
    def max_target_chars(self) -> int:
        return self.max_len

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        return CharTokenizer(self.alphabet)

    def random_source(self, rng: random.Random) -> str:
        return "".join(rng.choice(self.alphabet) for _ in range(rng.randint(self.min_len, self.max_len)))

    def _check(self, source: str) -> None:
        if not source or any(c not in self.alphabet for c in source):
            raise TaskError(f"{self.name} inputs are lowercase letters a-z, got {source!r}")

    @abstractmethod
    def _permute(self, letters: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(n, L) letter indices (padded with -1 past each length) -> the target's letter indices."""

    def target(self, source: str) -> str:
        self._check(source)
        letters = torch.tensor([[self.alphabet.index(c) for c in source]])
        out = self._permute(letters, torch.tensor([len(source)]))[0]
        return "".join(self.alphabet[i] for i in out.tolist())

    def _train_letters(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`n` random train-split strings: (n, max_len) letter indices (-1 past each length), (n,) lengths."""
        kept_letters, kept_lengths, have = [], [], 0
        while have < n:
            lengths = torch.randint(self.min_len, self.max_len + 1, (n,), generator=generator)
            letters = torch.randint(0, len(self.alphabet), (n, self.max_len), generator=generator)
            live = torch.arange(self.max_len)[None, :] < lengths[:, None]
            letters = letters.masked_fill(~live, -1)
            codes = (letters + ord(self.alphabet[0])).masked_fill(~live, 0)
            keep = stable_hash(codes, lengths) % HELDOUT_BUCKETS != 0  # drop held-out strings
            kept_letters.append(letters[keep])
            kept_lengths.append(lengths[keep])
            have += int(keep.sum())
        return torch.cat(kept_letters)[:n], torch.cat(kept_lengths)[:n]

    def batch(self, n, generator, tokenizer):
        offset = tokenizer.encode(self.alphabet[0])[0]  # id of "a": letters are contiguous ids
        letters, lengths = self._train_letters(n, generator)
        live = letters >= 0
        rows = torch.arange(n)
        src = torch.full((n, self.max_len + 1), PAD, dtype=torch.int64)
        src[:, : self.max_len] = (letters + offset).masked_fill(~live, PAD)
        src[rows, lengths] = EOS
        tgt = torch.full((n, self.max_len + 2), PAD, dtype=torch.int64)
        tgt[:, 0] = BOS
        tgt[:, 1 : self.max_len + 1] = (self._permute(letters, lengths) + offset).masked_fill(~live, PAD)
        tgt[rows, lengths + 1] = EOS
        return src, tgt


class Reverse(LetterTask):
    name, title = "reverse", "Reverse a string"
    description = "Write the letters backwards: 'abc' -> 'cba'. Cross-attention learns an anti-diagonal."

    def _permute(self, letters, lengths):
        index = (lengths[:, None] - 1 - torch.arange(letters.size(1))[None, :]).clamp(min=0)
        return letters.gather(1, index).masked_fill(letters < 0, -1)

    def alignment(self, source):
        return [len(source) - 1 - i for i in range(len(source))]


class Copy(LetterTask):
    name, title = "copy", "Copy a string"
    description = "Write the letters again unchanged: 'abc' -> 'abc'. Cross-attention learns the diagonal."

    def _permute(self, letters, lengths):
        return letters

    def alignment(self, source):
        return list(range(len(source)))


class Sort(LetterTask):
    name, title = "sort", "Sort the letters"
    description = "Put the letters in alphabetical order: 'dab' -> 'abd'. Each output looks up its letter."

    def _permute(self, letters, lengths):
        big = letters.masked_fill(letters < 0, len(self.alphabet))  # padding sorts last
        return big.sort(dim=1, stable=True).values.masked_fill(letters < 0, -1)

    def alignment(self, source):
        order = sorted(range(len(source)), key=lambda i: (source[i], i))
        return order


class Addition(Task):
    """Sum of two whole numbers written in digits, each with 1..max_digits digits and no leading zeros."""

    name, title = "addition", "Add two numbers"
    description = "Add two whole numbers: '123+45' -> '168'. Each digit of the answer needs a carry from the right."
    alphabet = "0123456789+"

    def __init__(self, max_digits: int = 3):
        super().__init__(max_digits=_bounded_int("max_digits", max_digits, 1, 8))
        self.max_digits = max_digits
        number = rf"(0|[1-9][0-9]{{0,{max_digits - 1}}})"
        self._pattern = re.compile(rf"{number}\+{number}")

    @property
    def max_source_chars(self) -> int:
        return 2 * self.max_digits + 1

    @property
    def max_target_chars(self) -> int:
        return self.max_digits + 1

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        return CharTokenizer(self.alphabet)

    def random_source(self, rng: random.Random) -> str:
        top = 10**self.max_digits - 1
        return f"{_draw_up_to(rng, top)}+{_draw_up_to(rng, top)}"

    def in_heldout(self, source: str) -> bool:
        """The 100 single-digit sums all stay in training: too few to spare, and holding some out hid whole
        answers ("1" comes only from 1+0 and 0+1), so the model could never learn to write them."""
        single_digits = len(source) == 3 and self.max_digits > 1
        return not single_digits and is_heldout(source)

    def target(self, source: str) -> str:
        match = self._pattern.fullmatch(source)
        if not match:
            raise TaskError(f"addition inputs are two whole numbers of 1 to {self.max_digits} digit(s), without "
                            f"leading zeros, joined by '+' (like '123+45'); got {source!r}")
        return str(int(match[1]) + int(match[2]))

    def examples(self) -> list[str]:
        def longer_sum(s):
            return len(self.target(s)) > max(map(len, s.split("+")))

        def mixed_lengths(s):
            return len({len(x) for x in s.split("+")}) == 2

        def full_width(s):
            return all(len(x) == self.max_digits for x in s.split("+"))

        return self._heldout_like([longer_sum, mixed_lengths, full_width])


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NUMBER = {name.lower(): i + 1 for i, m in enumerate(MONTHS) for name in (m, m[:3])}
_WEEKDAY_NUMBER = {name.lower(): i for i, w in enumerate(WEEKDAYS) for name in (w, w[:3])}
_LEAP_YEAR = [date(2000, 1, 1) + timedelta(days=i) for i in range(366)]  # every month, day and weekday


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _choice(group: str, names) -> str:
    return f"(?P<{group}>{'|'.join(names)})"


# field -> (how a date renders it, the pattern that reads it back)
_DATE_FIELDS = {
    "year": (lambda d: f"{d.year:04d}", r"(?P<year>[0-9]{4})"),
    "mm": (lambda d: f"{d.month:02d}", r"(?P<mm>[0-9]{1,2})"),
    "dd": (lambda d: f"{d.day:02d}", r"(?P<day>[0-9]{1,2})"),
    "day": (lambda d: str(d.day), r"(?P<day>[0-9]{1,2})"),
    "nth": (lambda d: _ordinal(d.day), r"(?P<nth>[0-9]{1,2}(?:st|nd|rd|th))"),
    "month": (lambda d: MONTHS[d.month - 1], _choice("month", MONTHS)),
    "mon": (lambda d: MONTHS[d.month - 1][:3], _choice("month", (m[:3] for m in MONTHS))),
    "weekday": (lambda d: WEEKDAYS[d.weekday()], _choice("weekday", WEEKDAYS)),
    "wkd": (lambda d: WEEKDAYS[d.weekday()][:3], _choice("weekday", (w[:3] for w in WEEKDAYS))),
}
_FIELD_WIDTH = {f: max(len(render(d)) for d in _LEAP_YEAR) for f, (render, _) in _DATE_FIELDS.items()}


class DateFormat:
    """One human way of writing a date, e.g. "{month} {day}, {year}"; renders dates and reads them back."""

    def __init__(self, template: str):
        parts = [(literal, field) for literal, field, _, _ in string.Formatter().parse(template)]
        self.template = template
        self.fields = [field for _, field in parts if field]
        self.pattern = re.compile("".join(re.escape(lit) + (_DATE_FIELDS[f][1] if f else "") for lit, f in parts),
                                  re.IGNORECASE)
        self.max_chars = sum(len(lit) for lit, _ in parts) + sum(_FIELD_WIDTH[f] for f in self.fields)

    def render(self, day: date) -> str:
        return self.template.format(**{f: _DATE_FIELDS[f][0](day) for f in self.fields})

    def read(self, text: str) -> date | None:
        """The date `text` names in this format; None if it is not in this format; TaskError if impossible."""
        match = self.pattern.fullmatch(text)
        if not match:
            return None
        got = {k: v.lower() for k, v in match.groupdict().items()}
        month = int(got["mm"]) if "mm" in got else _MONTH_NUMBER[got["month"]]
        day = int(got["day"] if "day" in got else got["nth"][:-2])
        if "nth" in got and got["nth"] != _ordinal(day):
            raise TaskError(f"the {day}{got['nth'][-2:]} of a month is written {_ordinal(day)!r}")
        try:
            result = date(int(got["year"]), month, day)
        except ValueError:
            raise TaskError(f"there is no such date as {text!r}") from None
        if "weekday" in got and _WEEKDAY_NUMBER[got["weekday"]] != result.weekday():
            raise TaskError(f"{result.isoformat()} was a {WEEKDAYS[result.weekday()]}, not a {match['weekday']}")
        return result


# Slashed dates are US style, month first: "03/04/2021" is March 4. No two-digit years.
DATE_FORMATS = tuple(map(DateFormat, (
    "{month} {day}, {year}",             # March 3, 2021
    "{day} {month} {year}",              # 3 March 2021
    "{mm}/{dd}/{year}",                  # 03/03/2021
    "{mon} {day} {year}",                # Mar 3 2021
    "{year}.{mm}.{dd}",                  # 2021.03.03
    "{weekday}, {month} {day}, {year}",  # Wednesday, March 3, 2021
    "{wkd} {day} {mon} {year}",          # Wed 3 Mar 2021
    "{nth} of {month} {year}",           # 3rd of March 2021
)))


class Dates(Task):
    """A random date written in one of `DATE_FORMATS` -> ISO 8601 "YYYY-MM-DD".

    Sources are generated in the formats' own capitalisation; `target` reads them in any case and
    accepts one- or two-digit days and months. Any real date with a four-digit year is a valid input,
    the year range only bounds what is generated."""

    name, title = "dates", "Normalise dates"
    description = ("Rewrite a date as ISO 8601: 'March 3, 2021', '3rd of March 2021' or '03/03/2021' (US order, "
                   "month first) -> '2021-03-03'.")
    alphabet = "".join(sorted({c for f in DATE_FORMATS for d in _LEAP_YEAR for c in f.render(d)} | set("-")))

    def __init__(self, min_year: int = 1950, max_year: int = 2049):
        super().__init__(min_year=_bounded_int("min_year", min_year, 1000, 9999),
                         max_year=_bounded_int("max_year", max_year, 1000, 9999))
        if min_year > max_year:
            raise TaskError(f"min_year must not exceed max_year, got {min_year}..{max_year}")
        self.min_year, self.max_year = min_year, max_year
        self._days = (date(min_year, 1, 1).toordinal(), date(max_year, 12, 31).toordinal())

    @property
    def max_source_chars(self) -> int:
        return max(f.max_chars for f in DATE_FORMATS)

    @property
    def max_target_chars(self) -> int:
        return len("YYYY-MM-DD")

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        return CharTokenizer(self.alphabet)

    def random_source(self, rng: random.Random) -> str:
        day = date.fromordinal(rng.randint(*self._days))
        return rng.choice(DATE_FORMATS).render(day)

    def target(self, source: str) -> str:
        for form in DATE_FORMATS:
            if (day := form.read(source)) is not None:
                return day.isoformat()
        shown = ", ".join(repr(f.render(date(2021, 3, 3))) for f in DATE_FORMATS)
        raise TaskError(f"{source!r} is not a date in a known format; the formats are: {shown}")

    def examples(self) -> list[str]:
        return self._heldout_like([f.pattern.fullmatch for f in DATE_FORMATS])


EN_SMALL = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
            "sixteen seventeen eighteen nineteen").split()
EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
DE_SMALL = ("null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn "
            "sechzehn siebzehn achtzehn neunzehn").split()
DE_TENS = ("", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig")
_EN_VALUE = {w: i for i, w in enumerate(EN_SMALL)} | {w: 10 * i for i, w in enumerate(EN_TENS) if w}
MAX_NUMBER = 999_999


def _english_below_1000(n: int) -> list[str]:
    hundreds, rest = divmod(n, 100)
    words = [EN_SMALL[hundreds], "hundred"] if hundreds else []
    if rest >= 20:
        return words + [EN_TENS[rest // 10] + (f"-{EN_SMALL[rest % 10]}" if rest % 10 else "")]
    return words + [EN_SMALL[rest]] if rest else words


def english_number(n: int) -> str:
    """US English words, no "and", tens and units hyphenated: 342 -> "three hundred forty-two"."""
    if n == 0:
        return EN_SMALL[0]
    thousands, rest = divmod(n, 1000)
    words = _english_below_1000(thousands) + ["thousand"] if thousands else []
    return " ".join(words + _english_below_1000(rest))


def _german_below_1000(n: int, last: bool) -> list[str]:
    """Morphemes of 1..999 ("ein" for 1 inside a word, "eins" when it ends the number)."""
    unit = {1: "eins" if last else "ein"}
    hundreds, rest = divmod(n, 100)
    parts = ["ein" if hundreds == 1 else DE_SMALL[hundreds], "hundert"] if hundreds else []
    if rest >= 20 and rest % 10:
        return parts + ["ein" if rest % 10 == 1 else DE_SMALL[rest % 10], "und", DE_TENS[rest // 10]]
    if rest >= 20:
        return parts + [DE_TENS[rest // 10]]
    return parts + [unit.get(rest, DE_SMALL[rest])] if rest else parts


def german_morphemes(n: int) -> list[str]:
    """German number word split into morphemes: 42 -> ["zwei", "und", "vierzig"]."""
    if n == 0:
        return [DE_SMALL[0]]
    thousands, rest = divmod(n, 1000)
    parts = _german_below_1000(thousands, last=False) + ["tausend"] if thousands else []
    return parts + _german_below_1000(rest, last=True)


def german_number(n: int) -> str:
    """German number word, one word up to 999999: 342 -> "dreihundertzweiundvierzig"."""
    return "".join(german_morphemes(n))


def _read_english(words: str) -> int | None:
    """The value of lower-case English number words (None for an unknown word); style is not checked."""
    total = current = 0
    for word in words.split(" "):
        if word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        elif all(part in _EN_VALUE for part in word.split("-")):
            current += sum(_EN_VALUE[part] for part in word.split("-"))
        else:
            return None
    return total + current


class Numbers(Task):
    """English number words -> German number words for 0..max_value, tokenised with sentencepiece.

    English is written US style by `english_number`: no "and", tens and units joined by "-"
    ("three hundred forty-two"); `target` accepts exactly that, in any case and spacing. German is
    one word ("dreihundertzweiundvierzig"), "einhundert"/"eintausend" for 100/1000, units before tens.
    `alignment` is None: which source piece a target piece should attend to depends on the trained
    tokenizer's pieces, which `alignment(source)` does not know."""

    name, title = "numbers", "Numbers: English to German"
    description = ("Translate number words: 'forty-two' -> 'zweiundvierzig'. German says the units before the "
                   "tens, so attention must jump back and forth.")
    corpus_pairs, vocab_size, boundary = 2000, 300, "|"

    def __init__(self, max_value: int = 999):
        super().__init__(max_value=_bounded_int("max_value", max_value, 10, MAX_NUMBER))
        self.max_value = max_value
        self._max_chars = tuple(self._longest(words) for words in (english_number, german_number))

    def _longest(self, words: Callable[[int], str]) -> int:
        """An upper bound on len(words(n)) for n in 0..max_value."""
        if self.max_value < 1000:
            return max(len(words(n)) for n in range(self.max_value + 1))
        thousands = max(len(words(1000 * k)) for k in range(1, self.max_value // 1000 + 1))
        return thousands + 1 + max(len(words(n)) for n in range(1000))

    @property
    def max_source_chars(self) -> int:
        return self._max_chars[0]

    @property
    def max_target_chars(self) -> int:
        return self._max_chars[1]

    def random_source(self, rng: random.Random) -> str:
        """Half the numbers are below 1000 (when max_value allows more); each group of a thousand is uniform,
        so no handful of tiny numbers dominates either split."""
        top = self.max_value // 1000
        thousands = rng.randint(1, top) if top and rng.random() < 0.5 else 0
        return english_number(1000 * thousands + rng.randint(0, min(999, self.max_value - 1000 * thousands)))

    def number(self, source: str) -> int:
        """The value of `source`; TaskError unless it is written as `english_number` writes it, in range."""
        words = " ".join(source.lower().split())
        value = _read_english(words)
        if value is None or value > MAX_NUMBER or english_number(value) != words:
            raise TaskError(f"write the number in English words like 'three hundred forty-two' (no 'and', tens "
                            f"and units joined by '-'); got {source!r}")
        if value > self.max_value:
            raise TaskError(f"this task's numbers go up to {self.max_value}, got {source!r}")
        return value

    def target(self, source: str) -> str:
        return german_number(self.number(source))

    def corpus(self, seed: int = 0) -> list[str]:
        """Tokenizer training text: the lexicon of both languages, then train pairs (source line, target line
        with morphemes separated by `boundary`, so no piece spans two morphemes)."""
        lexicon = [*EN_SMALL, *filter(None, EN_TENS), "hundred", "thousand", *DE_SMALL, *filter(None, DE_TENS),
                   "ein", "und", "hundert", "tausend"]
        numbers = [self.number(s) for s, _ in self.pairs(self.corpus_pairs, seed, "train")]
        lines = ((english_number(n), self.boundary.join(german_morphemes(n))) for n in numbers)
        return lexicon + [line for pair in lines for line in pair]

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        return SentencePieceTokenizer.train(self.corpus(seed), self.vocab_size, boundary=self.boundary)

    def examples(self) -> list[str]:
        def tens_and_units(s):
            return "-" in s and " " not in s

        def hundreds(s):
            return "hundred" in s and "-" in s and "thousand" not in s

        def teen(s):
            return s.endswith("teen")

        def thousands(s):
            return "thousand" in s and "-" in s

        return self._heldout_like([tens_and_units, hundreds, teen, thousands])


TASKS: dict[str, type[Task]] = {t.name: t for t in (Reverse, Copy, Sort, Addition, Dates, Numbers)}


def make_task(name: str, **params) -> Task:
    """The task called `name` with `params`; TaskError for an unknown name or bad parameters."""
    if name not in TASKS:
        raise TaskError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    try:
        return TASKS[name](**params)
    except TypeError as exc:
        raise TaskError(f"bad parameters for {name}: {exc}") from None
