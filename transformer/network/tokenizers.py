"""Tokenizers. Every one reserves the same specials: <pad> 0, <s> 1, </s> 2, <unk> 3."""

from __future__ import annotations

import base64
import binascii
import io
from abc import ABC, abstractmethod
from collections.abc import Iterable

import sentencepiece as spm

from transformer.i18n import t
from .special_tokens import BOS, EOS, PAD, UNK

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
WORD_START = "\u2581"  # sentencepiece's word-boundary marker "▁", kept as is in piece() labels
MAX_MODEL_BYTES = 1 << 20  # a sentencepiece model of a few hundred pieces takes a few KB


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

    def _check_id(self, token_id: int) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise TokenizerError(f"token id {token_id} is outside this vocabulary (0..{self.vocab_size - 1})")

    def _content(self, ids: list[int]) -> list[int]:
        """`ids` without specials and without ids outside the vocabulary."""
        return [i for i in ids if len(SPECIALS) <= i < self.vocab_size]


def _reject_unknown(text: str, known: set[str], shown_known: str) -> None:
    unknown = sorted(set(text) - known)
    if unknown:
        shown = ", ".join(repr(c) for c in unknown)
        raise TokenizerError(t("messages.unknown_characters", shown=shown, known=repr(shown_known)))


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
        _reject_unknown(text, set(self._ids), self.alphabet)
        return [self._ids[c] for c in text]

    def piece(self, token_id: int) -> str:
        self._check_id(token_id)
        if token_id < len(SPECIALS):
            return SPECIALS[token_id]
        return self.alphabet[token_id - len(SPECIALS)]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.alphabet[i - len(SPECIALS)] for i in self._content(ids))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "alphabet": self.alphabet}


class SentencePieceTokenizer(Tokenizer):
    """Subword pieces from a sentencepiece model; the serialized model bytes live in `self.model`.

    `train` builds a BPE model in memory (no files) with our specials at ids 0-3 and identity
    normalization, so every character of the text is kept as typed. Pieces keep sentencepiece's
    word-start marker "▁" (`WORD_START`) in `piece()`, so chart labels show where words begin after a
    space. No marker is added before the first word: a word's pieces are then the same at the start of
    a text as inside it ("zwanzig" alone and in "einundzwanzig"), so what is learnt in one place carries over.
    `encode` accepts spaces (runs of them collapse to one, as sentencepiece normalises whitespace) and
    any character the model has as a piece of its own; it rejects everything else, "▁" included, by name.
    """

    kind = "sentencepiece"

    def __init__(self, model: bytes):
        if not isinstance(model, bytes) or not 0 < len(model) <= MAX_MODEL_BYTES:
            raise TokenizerError(f"a sentencepiece model must be 1 to {MAX_MODEL_BYTES} bytes")
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model)
        except RuntimeError:
            raise TokenizerError("the sentencepiece model is damaged or not a sentencepiece model") from None
        size = self._sp.get_piece_size()
        specials = [self._sp.id_to_piece(i) for i in range(min(size, len(SPECIALS)))]
        ids = (self._sp.pad_id(), self._sp.bos_id(), self._sp.eos_id(), self._sp.unk_id()) if size else ()
        if size <= len(SPECIALS) or tuple(specials) != SPECIALS or ids != (PAD, BOS, EOS, UNK):
            raise TokenizerError(f"the sentencepiece model must reserve {', '.join(SPECIALS)} as ids 0-3")
        self.model = model
        pieces = map(self._sp.id_to_piece, range(len(SPECIALS), size))
        self._chars = {p for p in pieces if len(p) == 1} - {WORD_START} | {" "}
        self._shown = "".join(sorted(self._chars))

    @classmethod
    def train(cls, corpus: Iterable[str], vocab_size: int = 300, boundary: str | None = None) -> SentencePieceTokenizer:
        """Train a BPE model on the lines of `corpus` (deterministic for the same lines).

        `vocab_size` is an upper limit: a small corpus yields fewer pieces. `boundary`, if given, is a
        character that marks places in the corpus lines which no piece may span (morpheme boundaries);
        it is removed from the text and never becomes a piece.
        """
        options = dict(
            model_type="bpe", vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0,
            normalization_rule_name="identity", add_dummy_prefix=False, pad_id=PAD, bos_id=BOS, eos_id=EOS, unk_id=UNK,
            pad_piece=SPECIALS[PAD], bos_piece=SPECIALS[BOS], eos_piece=SPECIALS[EOS], unk_piece=SPECIALS[UNK],
            num_threads=1, minloglevel=2,
        )
        if boundary is not None:
            options["pretokenization_delimiter"] = boundary
        writer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(sentence_iterator=iter(list(corpus)), model_writer=writer, **options)
        except RuntimeError as exc:
            raise TokenizerError(f"sentencepiece training failed: {exc}") from None
        return cls(writer.getvalue())

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        _reject_unknown(text, self._chars, self._shown)
        return self._sp.encode(text, add_bos=False, add_eos=False)

    def piece(self, token_id: int) -> str:
        self._check_id(token_id)
        return SPECIALS[token_id] if token_id < len(SPECIALS) else self._sp.id_to_piece(token_id)

    def decode(self, ids: list[int]) -> str:
        return self._sp.decode(self._content(ids))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "model": base64.b64encode(self.model).decode("ascii")}


def _model_bytes(text) -> bytes:
    if not isinstance(text, str) or len(text) > (MAX_MODEL_BYTES + 2) // 3 * 4:
        raise TokenizerError(f"the sentencepiece model must be a base64 string of at most {MAX_MODEL_BYTES} bytes")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise TokenizerError("the sentencepiece model is not valid base64") from None


def tokenizer_from_dict(data: dict) -> Tokenizer:
    """Rebuild a tokenizer saved by `to_dict` (data may be untrusted: TokenizerError on anything odd)."""
    if not isinstance(data, dict):
        raise TokenizerError("tokenizer description must be a JSON object")
    kind = data.get("kind")
    if kind == "char" and isinstance(data.get("alphabet"), str) and set(data) == {"kind", "alphabet"}:
        return CharTokenizer(data["alphabet"])
    if kind == SentencePieceTokenizer.kind and set(data) == {"kind", "model"}:
        return SentencePieceTokenizer(_model_bytes(data["model"]))
    raise TokenizerError(f"unsupported tokenizer description (kind={kind!r})")


__all__ = [
    "BOS", "EOS", "PAD", "UNK", "SPECIALS", "WORD_START", "CharTokenizer", "SentencePieceTokenizer", "Tokenizer",
    "TokenizerError", "tokenizer_from_dict",
]
