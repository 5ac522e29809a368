"""Tokenizers. Every one reserves the same specials: <pad> 0, <s> 1, </s> 2, <unk> 3."""

from __future__ import annotations

from abc import ABC, abstractmethod

from .masks import BOS, EOS, PAD, UNK

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


class TokenizerError(ValueError):
    """The text cannot be represented by this tokenizer; the message says why, in plain words."""


class Tokenizer(ABC):
    """Text <-> token ids (without <s>/</s>; callers add those)."""

    kind: str

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """Ids for `text`; raises TokenizerError naming any characters the vocabulary lacks."""

    @abstractmethod
    def piece(self, token_id: int) -> str:
        """Display string of one id (specials as <s>, </s>, <pad>, <unk>)."""

    @abstractmethod
    def decode(self, ids: list[int]) -> str:
        """Text for `ids`, specials dropped."""

    @abstractmethod
    def to_dict(self) -> dict:
        """Plain JSON-able data; `tokenizer_from_dict` rebuilds the tokenizer from it."""

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.piece(i) for i in ids]


class CharTokenizer(Tokenizer):
    """One token per character of a fixed alphabet."""

    kind = "char"

    def __init__(self, alphabet: str):
        if len(set(alphabet)) != len(alphabet):
            raise TokenizerError("alphabet has repeated characters")
        self.alphabet = alphabet
        self._ids = {c: i + len(SPECIALS) for i, c in enumerate(alphabet)}

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        unknown = sorted({c for c in text if c not in self._ids})
        if unknown:
            shown = ", ".join(repr(c) for c in unknown)
            raise TokenizerError(f"the model does not know the character(s) {shown}; it knows: {self.alphabet!r}")
        return [self._ids[c] for c in text]

    def piece(self, token_id: int) -> str:
        if token_id < len(SPECIALS):
            return SPECIALS[token_id]
        return self.alphabet[token_id - len(SPECIALS)]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.alphabet[i - len(SPECIALS)] for i in ids if len(SPECIALS) <= i < self.vocab_size)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "alphabet": self.alphabet}


def tokenizer_from_dict(data: dict) -> Tokenizer:
    """Rebuild a tokenizer saved by `to_dict` (data may be untrusted: TokenizerError on anything odd)."""
    if not isinstance(data, dict):
        raise TokenizerError("tokenizer description must be a JSON object")
    kind = data.get("kind")
    if kind == "char" and isinstance(data.get("alphabet"), str) and set(data) == {"kind", "alphabet"}:
        return CharTokenizer(data["alphabet"])
    raise TokenizerError(f"unsupported tokenizer description (kind={kind!r})")


__all__ = ["BOS", "EOS", "PAD", "UNK", "SPECIALS", "CharTokenizer", "Tokenizer", "TokenizerError", "tokenizer_from_dict"]
