"""The zh_numbers task: English number words -> Chinese numerals ("four hundred and five" -> "四百零五")."""

from __future__ import annotations

import random

from transformer.i18n import Localized, t
from transformer.network.tokenizers import SentencePieceTokenizer, Tokenizer
from .base import Task, TaskError
from .numbers import EN_SMALL, EN_TENS, draw_number, english_number, read_english

ZH_DIGITS = "零一二三四五六七八九"
ZH_PLACES = ((1000, "千"), (100, "百"), (10, "十"), (1, ""))
WAN = "万"  # ten thousand: Chinese groups digits by four, English by three
ZH_CHARS = ZH_DIGITS + "十百千" + WAN
ZH_MAX = 99_999
# Alignment keys: what a Chinese character takes from the English words. A digit takes its decimal place (0 units
# .. 4 ten-thousands) from the word that says it; 十 takes place 1 like the tens digit ("forty" gives 四 and 十);
# 百 and 千 take the words "hundred" and "thousand". 零 and 万 take no single word.
_UNIT_KEY = {"十": 1, "百": "hundred", "千": "thousand"}
_PLACE_OF_UNIT = {"十": 1, "百": 2, "千": 3, WAN: 4}


def _group(n: int, after: bool) -> list[str]:
    """British words of 0..999 ([] for 0), "and" before the tens and units when a hundred or `after` precedes."""
    hundreds, rest = divmod(n, 100)
    words = [EN_SMALL[hundreds], "hundred"] if hundreds else []
    if rest:
        words += ["and"] * bool(words or after) + [english_number(rest)]
    return words


def british_number(n: int) -> str:
    """British English words of 0..999999: "and" before the tens and units that follow a hundred or a thousand,
    tens and units joined by "-": 405 -> "four hundred and five", 1005 -> "one thousand and five", 1100 -> "one
    thousand one hundred"."""
    if n == 0:
        return EN_SMALL[0]
    thousands, rest = divmod(n, 1000)
    words = _group(thousands, after=False) + ["thousand"] if thousands else []
    return " ".join(words + _group(rest, after=bool(thousands)))


def _below_10000(n: int, leading: bool) -> str:
    """Chinese numeral of 1..9999: one 零 for each run of inner zeros, none for trailing ones; "十" for a
    leading 10-19 when `leading` (the numeral starts here), "一十" otherwise."""
    out, zeros = [], False
    for place, name in ZH_PLACES:
        digit = n // place % 10
        if digit == 0:
            zeros = bool(out)
            continue
        out += ["零"] * zeros + ["" if place == 10 and digit == 1 and leading and not out else ZH_DIGITS[digit], name]
        zeros = False
    return "".join(out)


def chinese_number(n: int) -> str:
    """Chinese numeral of 0..99999999 (no 两): 10 -> 十, 110 -> 一百一十, 1010 -> 一千零一十, 10001 -> 一万零一."""
    if n == 0:
        return "零"
    wan, rest = divmod(n, 10_000)
    head = _below_10000(wan, leading=True) + WAN if wan else ""
    if not rest:
        return head
    return head + "零" * (wan > 0 and rest < 1000) + _below_10000(rest, leading=not wan)


def _tens_and_units(n: int, place: int) -> list[tuple[str, tuple]]:
    """The pieces of 1..99 said at `place` (0, or 3 before "thousand"), each with the places it gives a digit."""
    if n < 20 or n % 10 == 0:
        return [(english_number(n), (place, place + 1))]
    tens, units = english_number(n).split("-")
    return [(tens, (place + 1,)), ("-", ()), (units, (place,))]


def _english_pieces(n: int) -> list[tuple[str, tuple]]:
    """The pieces of `british_number(n)` (0..99999: a word, or "-" inside "forty-two"), each with the alignment
    keys it gives the Chinese numeral."""
    thousands, rest = divmod(n, 1000)
    hundreds, tens_units = divmod(rest, 100)
    pieces = _tens_and_units(thousands, 3) + [("thousand", ("thousand",))] if thousands else []
    if hundreds:
        pieces += [(EN_SMALL[hundreds], (2,)), ("hundred", ("hundred",))]
    if tens_units:
        pieces += [("and", ())] * bool(pieces) + _tens_and_units(tens_units, 0)
    return pieces or [(EN_SMALL[0], (0,))]


def _chinese_keys(numeral: str) -> list:
    """The alignment key of each character of a Chinese numeral (None: an inner 零, and 万)."""
    if numeral == "零":
        return [0]
    return [_PLACE_OF_UNIT.get(numeral[i + 1 : i + 2], 0) if c in ZH_DIGITS[1:] else _UNIT_KEY.get(c)
            for i, c in enumerate(numeral)]


class ZhNumbers(Task):
    """English number words (British style) -> Chinese numerals for 0..99999.

    English is written as `british_number` writes it ("twelve thousand three hundred and forty-five"); `target`
    accepts exactly that, in any case and spacing. The Chinese numeral groups digits by four (万 = ten
    thousand), so "twelve thousand" becomes 一万二千: one English word feeds two Chinese places. Inner zeros
    are one 零 ("one thousand and five" -> 一千零五), while the English "and" often stands for nothing.

    The tokenizer is sentencepiece trained on the lexicon alone: every English word is one piece ("-" in
    "forty-two" another), every Chinese character one piece. The pieces are therefore known from the words, and
    `alignment` gives, for each Chinese character, the English word it comes from: a digit from its digit word
    ("forty" for the 四 and 十 of 四十), 百 from "hundred", 千 from "thousand"; 零 and 万 come from no single word
    (None)."""

    name, title = "zh_numbers", Localized("tasks.zh_numbers.title")
    description = Localized("tasks.zh_numbers.description")
    vocab_size, boundary = 160, "|"

    @property
    def max_source_chars(self) -> int:
        return len(british_number(77_777))  # "seventy-seven thousand seven hundred and seventy-seven"

    @property
    def max_target_chars(self) -> int:
        return len(chinese_number(ZH_MAX))

    def random_source(self, rng: random.Random) -> str:
        """Half the numbers below 1000, half from 1000 on (see `draw_number`)."""
        return british_number(draw_number(rng, ZH_MAX))

    def number(self, source: str) -> int:
        """The value of `source`; TaskError unless it is written as `british_number` writes it, in range."""
        words = " ".join(source.lower().split())
        value = read_english(" ".join(w for w in words.split(" ") if w != "and"))
        if value is None or value > ZH_MAX or british_number(value) != words:
            raise TaskError(t("messages.british_number", most=ZH_MAX, got=repr(source)))
        return value

    def target(self, source: str) -> str:
        return chinese_number(self.number(source))

    def alignment(self, source: str) -> list[int | None] | None:
        """Per Chinese character, the position of the English piece it comes from (None for 零 and 万); None
        for a source that is not a valid input."""
        try:
            value = self.number(source)
        except TaskError:
            return None
        position = {given: i for i, (_, gives) in enumerate(_english_pieces(value)) for given in gives}
        return [position.get(key) for key in _chinese_keys(chinese_number(value))]

    def corpus(self) -> list[str]:
        """Tokenizer training text: each English word alone and after a space, the Chinese characters apart."""
        words = [*EN_SMALL, *filter(None, EN_TENS), "hundred", "thousand", "and", "-"]
        return [*words, " ".join(words), self.boundary.join(ZH_CHARS)]

    def make_tokenizer(self, seed: int = 0) -> Tokenizer:
        """The same for every seed (the lexicon does not depend on it)."""
        return SentencePieceTokenizer.train(self.corpus(), self.vocab_size, boundary=self.boundary)

    def examples(self) -> list[str]:
        """Held-out inputs whose numerals show a gap after 百, all five places (万 regrouping the thousands), an
        inner 一十, and a gap after 万."""
        shapes = (lambda z: "百零" in z, lambda z: len(z) == 9, lambda z: "一十" in z, lambda z: "万零" in z)
        return self._heldout_like([lambda s, shape=shape: shape(self.target(s)) for shape in shapes])
