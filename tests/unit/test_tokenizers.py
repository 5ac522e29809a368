"""Tokenizers: character and sentencepiece; specials, round trips, unknown characters, untrusted data."""

from __future__ import annotations

import base64
import io
import json

import pytest
import sentencepiece as spm

from transformer.network.special_tokens import BOS, EOS, PAD, UNK
from transformer.network.tokenizers import (
    SPECIALS,
    WORD_START,
    CharTokenizer,
    SentencePieceTokenizer,
    TokenizerError,
    tokenizer_from_dict,
)

CORPUS = ["zwei|und|vierzig", "forty-two", "drei|und|zwanzig", "twenty-three", "vier|und|dreißig", "thirty-four",
          "zwei|hundert", "two hundred", "drei", "three", "vier", "four"] * 20


@pytest.fixture(scope="module")
def sp():
    return SentencePieceTokenizer.train(CORPUS, vocab_size=80, boundary="|")


def test_specials_are_fixed():
    assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)
    assert SPECIALS == ("<pad>", "<s>", "</s>", "<unk>")


def test_char_round_trip_and_specials():
    tok = CharTokenizer("abc")
    assert tok.vocab_size == 7
    ids = tok.encode("cab")
    assert ids == [6, 4, 5]
    assert tok.decode([BOS, *ids, EOS, PAD, 99]) == "cab"
    assert tok.pieces([0, 1, 2, 3, 4]) == ["<pad>", "<s>", "</s>", "<unk>", "a"]
    with pytest.raises(TokenizerError, match="outside"):
        tok.piece(7)
    with pytest.raises(TokenizerError, match="outside"):
        tok.piece(-1)


def test_char_rejects_unknown_characters_by_name():
    with pytest.raises(TokenizerError) as err:
        CharTokenizer("abc").encode("abXcY!")
    assert "'X'" in str(err.value) and "'Y'" in str(err.value) and "'!'" in str(err.value)
    with pytest.raises(TokenizerError, match="repeated"):
        CharTokenizer("aba")


def test_char_to_dict_round_trip():
    tok = tokenizer_from_dict(json.loads(json.dumps(CharTokenizer("xyz").to_dict())))
    assert isinstance(tok, CharTokenizer) and tok.encode("zyx") == [6, 5, 4]


def test_sp_specials_and_vocab(sp):
    assert [sp.piece(i) for i in range(4)] == list(SPECIALS)
    assert 4 < sp.vocab_size <= 80


def test_sp_round_trip_never_emits_specials(sp):
    for line in set(CORPUS):
        text = line.replace("|", "")
        ids = sp.encode(text)
        assert ids and min(ids) >= len(SPECIALS), (text, ids)
        assert sp.decode(ids) == text
        assert sp.decode([BOS, *ids, EOS, PAD]) == text


def test_sp_pieces_respect_boundaries_and_show_word_starts(sp):
    assert sp.pieces(sp.encode("zweiundvierzig")) == ["zwei", "und", "vierzig"]
    assert sp.pieces(sp.encode("two hundred")) == ["two", WORD_START + "hundred"]  # marker after a space only
    assert not any("|" in sp.piece(i) for i in range(sp.vocab_size))


def test_sp_rejects_unknown_characters_by_name(sp):
    with pytest.raises(TokenizerError) as err:
        sp.encode("forty Qtwo\t" + WORD_START)
    message = str(err.value)
    assert "'Q'" in message and "'\\t'" in message and repr(WORD_START) in message
    assert "'f'" not in message.split(";")[0]


def test_sp_training_is_deterministic_and_writes_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = SentencePieceTokenizer.train(CORPUS, vocab_size=60, boundary="|")
    second = SentencePieceTokenizer.train(CORPUS, vocab_size=60, boundary="|")
    assert first.model == second.model
    assert list(tmp_path.iterdir()) == []


def test_sp_training_failure_is_a_tokenizer_error():
    with pytest.raises(TokenizerError, match="training failed"):
        SentencePieceTokenizer.train([])


def test_sp_to_dict_round_trip(sp):
    data = json.loads(json.dumps(sp.to_dict()))
    assert data["kind"] == "sentencepiece"
    again = tokenizer_from_dict(data)
    assert isinstance(again, SentencePieceTokenizer) and again.model == sp.model
    assert again.encode("zweiundvierzig forty-two") == sp.encode("zweiundvierzig forty-two")
    assert again.pieces(range(again.vocab_size)) == sp.pieces(range(sp.vocab_size))


def _foreign_model() -> bytes:
    """A valid sentencepiece model with sentencepiece's default special ids (unk 0, bos 1, eos 2, no pad)."""
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=writer, vocab_size=40,
                                   hard_vocab_limit=False, minloglevel=2)
    return writer.getvalue()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize("data", [
    None, [], "sentencepiece",
    {"kind": "bpe", "model": "AAAA"},
    {"kind": "sentencepiece"},
    {"kind": "sentencepiece", "model": 12},
    {"kind": "sentencepiece", "model": "not base64 at all!"},
    {"kind": "sentencepiece", "model": ""},
    {"kind": "sentencepiece", "model": _b64(b"garbage bytes that are no model")},
    {"kind": "sentencepiece", "model": _b64(bytes(range(256)) * 4)},
    {"kind": "sentencepiece", "model": "A" * (4 << 20)},
    {"kind": "sentencepiece", "model": _b64(_foreign_model())},
    {"kind": "char", "alphabet": "aa"},
    {"kind": "char", "alphabet": "ab", "extra": 1},
])
def test_from_dict_rejects_bad_data(data):
    with pytest.raises(TokenizerError):
        tokenizer_from_dict(data)


def test_from_dict_rejects_truncated_model(sp):
    raw = sp.model
    for cut in (len(raw) // 2, len(raw) - 5):
        with pytest.raises(TokenizerError):
            tokenizer_from_dict({"kind": "sentencepiece", "model": _b64(raw[:cut])})


def test_sp_constructor_rejects_non_bytes():
    with pytest.raises(TokenizerError):
        SentencePieceTokenizer("a model")  # type: ignore[arg-type]
