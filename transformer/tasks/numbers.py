"""The numbers task: English number words -> German number words, tokenised with sentencepiece."""

from __future__ import annotations

import random
from collections.abc import Callable

from transformer.i18n import Localized, t
from transformer.network.tokenizers import SentencePieceTokenizer, Tokenizer
from .base import Task, TaskError, bounded_int

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


def draw_number(rng: random.Random, max_value: int) -> int:
    """A number in 0..max_value: half below 1000 (when max_value allows more), each group of a thousand uniform,
    so no handful of tiny numbers dominates either split."""
    top = max_value // 1000
    thousands = rng.randint(1, top) if top and rng.random() < 0.5 else 0
    return 1000 * thousands + rng.randint(0, min(999, max_value - 1000 * thousands))


def read_english(words: str) -> int | None:
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

    name, title = "numbers", Localized("tasks.numbers.title")
    description = Localized("tasks.numbers.description")
    corpus_pairs, vocab_size, boundary = 2000, 300, "|"

    def __init__(self, max_value: int = 999):
        super().__init__(max_value=bounded_int("max_value", max_value, 10, MAX_NUMBER))
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
        return english_number(draw_number(rng, self.max_value))

    def number(self, source: str) -> int:
        """The value of `source`; TaskError unless it is written as `english_number` writes it, in range."""
        words = " ".join(source.lower().split())
        value = read_english(words)
        if value is None or value > MAX_NUMBER or english_number(value) != words:
            raise TaskError(t("messages.english_number", got=repr(source)))
        if value > self.max_value:
            raise TaskError(t("messages.number_too_big", most=self.max_value, got=repr(source)))
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
