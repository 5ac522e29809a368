"""Toy tasks: seeded generators of (source, target) pairs, with held-out inputs kept out of training.

A source belongs to the held-out split when a stable hash of its text falls in a fixed bucket, so the
split is the same in every run, for every seed, in training and in evaluation.
"""

from __future__ import annotations

import random
import string
from abc import ABC, abstractmethod

import torch

from .masks import EOS, PAD
from .tokenizers import CharTokenizer, Tokenizer

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
    """True when `source` is reserved for evaluation and never trained on."""
    codes = torch.tensor([[ord(c) for c in source]] if source else [[0]], dtype=torch.int64)
    return bool(stable_hash(codes, torch.tensor([len(source)]))[0] % HELDOUT_BUCKETS == 0)


def encode_pairs(tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad a batch: source = tokens </s>; target = <s> tokens </s>. Returns (src, tgt) int64 tensors."""
    srcs = [tokenizer.encode(s) + [EOS] for s, _ in pairs]
    tgts = [[1] + tokenizer.encode(t) + [EOS] for _, t in pairs]
    return _pad(srcs), _pad(tgts)


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

    def examples(self) -> list[str]:
        """A few inputs worth trying, held out from training."""
        return [s for s, _ in self.pairs(4, seed=12345, split="heldout")]

    def pairs(self, n: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
        """`n` seeded pairs from the "train" or "heldout" split."""
        if split not in ("train", "heldout"):
            raise TaskError(f"split must be 'train' or 'heldout', got {split!r}")
        rng, want_heldout, out = random.Random(seed), split == "heldout", []
        for _ in range(1000 * n + 1000):
            source = self.random_source(rng)
            if is_heldout(source) == want_heldout:
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

    def batch(self, n, generator, tokenizer):
        offset = tokenizer.encode(self.alphabet[0])[0]  # id of "a": letters are contiguous ids
        lengths = torch.randint(self.min_len, self.max_len + 1, (n,), generator=generator)
        letters = torch.randint(0, len(self.alphabet), (n, self.max_len), generator=generator)
        live = torch.arange(self.max_len)[None, :] < lengths[:, None]
        letters = letters.masked_fill(~live, -1)
        codes = (letters + ord(self.alphabet[0])).masked_fill(~live, 0)
        keep = stable_hash(codes, lengths) % HELDOUT_BUCKETS != 0  # drop held-out strings
        letters, lengths, live = letters[keep], lengths[keep], live[keep]
        rows = torch.arange(len(lengths))
        src = torch.full((len(lengths), self.max_len + 1), PAD, dtype=torch.int64)
        src[:, : self.max_len] = (letters + offset).masked_fill(~live, PAD)
        src[rows, lengths] = EOS
        tgt = torch.full((len(lengths), self.max_len + 2), PAD, dtype=torch.int64)
        tgt[:, 0] = 1
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


TASKS: dict[str, type[Task]] = {t.name: t for t in (Reverse, Copy, Sort)}


def make_task(name: str, **params) -> Task:
    """The task called `name` with `params`; TaskError for an unknown name or bad parameters."""
    if name not in TASKS:
        raise TaskError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    try:
        return TASKS[name](**params)
    except TypeError as exc:
        raise TaskError(f"bad parameters for {name}: {exc}") from None
