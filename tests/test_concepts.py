"""transformer.concepts: the traced padded batch, the positional rotation, the best-aligned head."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformer.concepts import (
    BatchError, best_aligned_head, greedy_targets, masked_batch, model_positions, pe_frequencies,
    rotation_demo, rotation_matrix, weight_above_diagonal,
)
from transformer.config import ModelConfig
from transformer.model import EncoderDecoder
from transformer.positional import sinusoidal_table
from transformer.special_tokens import BOS, EOS, PAD
from transformer.tasks import make_task
from transformer.tokenizers import TokenizerError

PAIRS = [("ab", "ba"), ("abcdef", "fedcba"), ("xyzw", "wzyx")]


@pytest.fixture(scope="module")
def setup():
    task = make_task("reverse", max_len=8)
    tokenizer = task.make_tokenizer()
    torch.manual_seed(0)
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, n_enc_layers=2,
                         n_dec_layers=2, d_model=32, n_heads=2, d_ff=64, max_len=10)
    return EncoderDecoder(config).eval(), tokenizer


def test_batch_is_padded_as_in_training(setup):
    model, tok = setup
    b = masked_batch(model, tok, PAIRS)
    assert b.src.shape == (3, 7) and b.tgt_in.shape == (3, 7)
    a = tok.encode("a")[0]
    assert b.src[0].tolist() == [a, a + 1, EOS, PAD, PAD, PAD, PAD]
    assert b.tgt_in[0].tolist() == [BOS, a + 1, a, EOS, PAD, PAD, PAD]  # short rows keep </s> as input
    assert b.tgt_out[0].tolist() == [a + 1, a, EOS, PAD, PAD, PAD, PAD]
    assert b.tgt_in[1, -1].item() == a  # the longest row's </s> is only ever predicted
    assert b.src_pieces[0][:4] == ["a", "b", "</s>", "<pad>"] and b.tgt_pieces[0][0] == "<s>"
    assert b.scored.sum(1).tolist() == [3, 7, 5]


def test_masks_are_built_and_traced(setup):
    model, tok = setup
    b = masked_batch(model, tok, PAIRS)
    assert b.src_mask.shape == (3, 1, 1, 7) and b.tgt_mask.shape == (3, 1, 7, 7)
    heads = model.config.n_heads
    enc, dec, cross = (b.trace.attention[k][1] for k in ("encoder_self", "decoder_self", "cross"))
    assert enc.mask.shape == (3, heads, 7, 7) and cross.mask.shape == (3, heads, 7, 7)
    lengths = torch.tensor([3, 7, 5])
    expected_src = torch.arange(7)[None, :] < lengths[:, None]
    assert torch.equal(enc.mask[:, 1, 4], expected_src)
    tgt_lengths = torch.tensor([4, 7, 6])  # <s> + tokens (+ </s> when the row is not the longest)
    causal = torch.ones(7, 7).tril().bool()
    expected_tgt = causal[None] & (torch.arange(7)[None, None, :] < tgt_lengths[:, None, None])
    assert torch.equal(dec.mask[:, 0], expected_tgt)
    assert (dec.weights[~dec.mask] == 0).all()


def test_no_causal_mask_puts_weight_above_the_diagonal(setup):
    model, tok = setup
    causal, open_ = masked_batch(model, tok, PAIRS), masked_batch(model, tok, PAIRS, causal=False)
    assert open_.tgt_mask.shape == (3, 1, 1, 7)
    assert weight_above_diagonal(causal.trace.weights("decoder_self")).max() == 0
    assert weight_above_diagonal(open_.trace.weights("decoder_self")).max() > 0.1
    assert torch.equal(causal.trace.weights("encoder_self"), open_.trace.weights("encoder_self"))
    assert not torch.allclose(causal.log_probs, open_.log_probs)


def test_batch_errors(setup):
    model, tok = setup
    with pytest.raises(BatchError, match="2 to 4"):
        masked_batch(model, tok, PAIRS[:1])
    with pytest.raises(BatchError, match="2 to 4"):
        masked_batch(model, tok, PAIRS + PAIRS)
    with pytest.raises(BatchError, match="empty"):
        masked_batch(model, tok, [("", ""), ("ab", "ba")])
    with pytest.raises(BatchError, match="too long"):
        masked_batch(model, tok, [("a" * 10, "a"), ("ab", "ba")])
    with pytest.raises(TokenizerError, match="'A'"):
        masked_batch(model, tok, [("aA", "a"), ("ab", "ba")])
    with pytest.raises(BatchError, match="target 'aaaaaaaaaa' is too long"):
        masked_batch(model, tok, [("a", "a" * 10), ("ab", "ba")])
    for sources in ([], ["ab", ""], ["a" * 10, "ab"]):  # refused before any decoding
        with pytest.raises(BatchError):
            greedy_targets(model, tok, sources)


def test_greedy_targets_match_the_decoder(setup):
    model, tok = setup
    from transformer.decoding import greedy_decode

    outs = greedy_targets(model, tok, ["ab", "xyzw"])
    assert outs == [greedy_decode(model, tok, s, max_len=9).output_text for s in ["ab", "xyzw"]]


def test_rotation_moves_encodings_by_k():
    d, k = 16, 3
    m = rotation_matrix(d, k)
    assert m.shape == (d, d)
    assert torch.allclose(m @ m.T, torch.eye(d, dtype=torch.float64), atol=1e-12)  # a rotation
    assert torch.count_nonzero(m) == 2 * d  # block-diagonal 2x2 blocks only
    w = pe_frequencies(d)
    assert w[1].item() == pytest.approx(10000 ** (-2 / d))
    demo = rotation_demo(d, k, [0, 1, 7, 30])
    assert demo.errors.shape == (4,) and demo.max_error < 1e-5
    np.testing.assert_allclose(demo.angles, k * w.numpy())
    wrong = (rotation_matrix(d, k + 1) @ sinusoidal_table(40, d).double()[7] - sinusoidal_table(40, d)[10]).abs()
    assert wrong.max() > 1e-2  # the matrix depends on k: the one for k + 1 does not fit
    with pytest.raises(ValueError, match="even"):
        rotation_matrix(15, 2)
    with pytest.raises(ValueError):
        rotation_demo(16, 2, [])


def test_model_positions_are_read_only_copies(setup):
    model, _ = setup
    kind, table = model_positions(model, "src")
    assert kind == "sinusoidal" and table.shape == (10, 32)
    np.testing.assert_allclose(table[3, :2], [math.sin(3), math.cos(3)], atol=1e-6)
    table[:] = 0
    assert model.src_embed.positions.full_table().abs().sum() > 0


def test_best_aligned_head():
    w = np.full((2, 3, 4, 4), 0.25)
    w[1, 2] = np.eye(4)[::-1]  # layer 2, head 3 attends anti-diagonally
    assert best_aligned_head(w, [3, 2, 1, 0]) == (1, 2)
    assert best_aligned_head(w, [3, 2, 1, 0, 9]) == (1, 2)  # extra / out-of-range expectations ignored
    assert best_aligned_head(w, None) is None and best_aligned_head(w, [None]) is None
