"""The addition task: the sum of two whole numbers written in digits."""

from __future__ import annotations

import random
import re

from transformer.i18n import Localized, t
from transformer.network.tokenizers import CharTokenizer, Tokenizer
from .base import Task, TaskError, bounded_int, draw_up_to, is_heldout


class Addition(Task):
    """Sum of two whole numbers written in digits, each with 1..max_digits digits and no leading zeros."""

    name, title = "addition", Localized("tasks.addition.title")
    description = Localized("tasks.addition.description")
    alphabet = "0123456789+"

    def __init__(self, max_digits: int = 3):
        super().__init__(max_digits=bounded_int("max_digits", max_digits, 1, 8))
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
        return f"{draw_up_to(rng, top)}+{draw_up_to(rng, top)}"

    def in_heldout(self, source: str) -> bool:
        """The 100 single-digit sums all stay in training: too few to spare, and holding some out hid whole
        answers ("1" comes only from 1+0 and 0+1), so the model could never learn to write them."""
        single_digits = len(source) == 3 and self.max_digits > 1
        return not single_digits and is_heldout(source)

    def target(self, source: str) -> str:
        match = self._pattern.fullmatch(source)
        if not match:
            raise TaskError(t("messages.addition", n=self.max_digits, got=repr(source)))
        return str(int(match[1]) + int(match[2]))

    def examples(self) -> list[str]:
        def longer_sum(s):
            return len(self.target(s)) > max(map(len, s.split("+")))

        def mixed_lengths(s):
            return len({len(x) for x in s.split("+")}) == 2

        def full_width(s):
            return all(len(x) == self.max_digits for x in s.split("+"))

        return self._heldout_like([longer_sum, mixed_lengths, full_width])
