"""Letter tasks: random lowercase strings mapped character by character (reverse, copy, sort)."""

from __future__ import annotations

import random
import string
from abc import abstractmethod
from typing import TYPE_CHECKING

from transformer.i18n import Localized, t
from transformer.network.special_tokens import BOS, EOS, PAD
from transformer.network.tokenizers import CharTokenizer, Tokenizer
from .base import HELDOUT_BUCKETS, Task, TaskError, bounded_int, stable_hash

if TYPE_CHECKING:  # annotations only
    import torch


class LetterTask(Task):
    """Random lowercase strings mapped character-by-character: reverse, copy, sort.

    Batches are built with tensor operations (no per-sample Python)."""

    alphabet = string.ascii_lowercase

    def __init__(self, min_len: int = 1, max_len: int = 16):
        super().__init__(min_len=bounded_int("min_len", min_len, 1, 48),
                         max_len=bounded_int("max_len", max_len, 1, 48))
        if min_len > max_len:
            raise TaskError(t("messages.lengths_order", lo=min_len, hi=max_len))
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
            raise TaskError(t("messages.letters", task=self.name, got=repr(source)))

    @abstractmethod
    def _permute(self, letters: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(n, L) letter indices (padded with -1 past each length) -> the target's letter indices."""

    def target(self, source: str) -> str:
        import torch  # function-local: a server's first page reads tasks without torch

        self._check(source)
        letters = torch.tensor([[self.alphabet.index(c) for c in source]])
        out = self._permute(letters, torch.tensor([len(source)]))[0]
        return "".join(self.alphabet[i] for i in out.tolist())

    def _train_letters(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`n` random train-split strings: (n, max_len) letter indices (-1 past each length), (n,) lengths."""
        import torch  # function-local: a server's first page reads tasks without torch

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
        import torch  # function-local: a server's first page reads tasks without torch

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
        width = int(lengths.max())  # padded to the longest string of this batch, as encode_pairs pads
        return src[:, : width + 1], tgt[:, : width + 2]


class Reverse(LetterTask):
    name, title = "reverse", Localized("tasks.reverse.title")
    description = Localized("tasks.reverse.description")

    def _permute(self, letters, lengths):
        import torch  # function-local: a server's first page reads tasks without torch

        index = (lengths[:, None] - 1 - torch.arange(letters.size(1))[None, :]).clamp(min=0)
        return letters.gather(1, index).masked_fill(letters < 0, -1)

    def alignment(self, source):
        return [len(source) - 1 - i for i in range(len(source))]


class Copy(LetterTask):
    name, title = "copy", Localized("tasks.copy.title")
    description = Localized("tasks.copy.description")

    def _permute(self, letters, lengths):
        return letters

    def alignment(self, source):
        return list(range(len(source)))


class Sort(LetterTask):
    name, title = "sort", Localized("tasks.sort.title")
    description = Localized("tasks.sort.description")

    def _permute(self, letters, lengths):
        big = letters.masked_fill(letters < 0, len(self.alphabet))  # padding sorts last
        return big.sort(dim=1, stable=True).values.masked_fill(letters < 0, -1)

    def alignment(self, source):
        order = sorted(range(len(source)), key=lambda i: (source[i], i))
        return order
