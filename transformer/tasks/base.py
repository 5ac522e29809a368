"""Shared parts of the toy tasks: TaskError, the held-out split, batch padding and the abstract Task.

A source belongs to the held-out split when a stable hash of its text falls in a fixed bucket, so the
split is the same in every run, for every seed, in training and in evaluation.
"""

from __future__ import annotations

import itertools
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

from transformer.i18n import t
from transformer.network.special_tokens import BOS, EOS, PAD
from transformer.network.tokenizers import Tokenizer

if TYPE_CHECKING:  # annotations only
    import torch

HASH_BASE, HASH_MOD, HELDOUT_BUCKETS = 131, 2_147_483_647, 10


class TaskError(ValueError):
    """A task name or parameter is invalid, or a source is not a valid input for the task."""


def stable_hash(codepoints: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Polynomial hash of (n, L) codepoints (only the first `lengths[i]` of each row count)."""
    import torch  # function-local: a server's first page reads tasks without torch

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


def bounded_int(name: str, value, low: int, high: int) -> int:
    """`value` when it is a whole number in low..high; TaskError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TaskError(t("messages.bounded", name=name, lo=low, hi=high, got=repr(value)))
    return value


def draw_up_to(rng: random.Random, max_value: int) -> int:
    """A number in 0..max_value: a digit count drawn uniformly first, so short numbers are common too."""
    digits = rng.randint(1, len(str(max_value)))
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), min(10**digits - 1, max_value))


def _pad(rows: list[list[int]]) -> torch.Tensor:
    """The rows right-padded with PAD to the longest, as one tensor: built in one call (a tensor per row cost
    1.6 ms of an `addition` batch of 64, 5% of its training step on an AVX2 EPYC)."""
    import torch  # function-local: a server's first page reads tasks without torch

    width = max(map(len, rows))
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows], dtype=torch.int64)


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

    def answer(self, source: str) -> str | None:
        """`target(source)`, or None when `source` is not a valid input for this task."""
        try:
            return self.target(source)
        except ValueError:  # TaskError is one
            return None

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

    def card_params(self) -> dict:
        """The parameters a model card records (plain values only)."""
        return dict(self.params)

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
        import torch  # function-local: a server's first page reads tasks without torch

        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        return encode_pairs(tokenizer, self.pairs(n, seed, "train"))
