"""transformer.analysis.masked_batch: a padded batch traced through the model with its masks."""

from __future__ import annotations

import pytest
import torch

from transformer.analysis.masked_batch import BatchError, greedy_targets, masked_batch, weight_above_diagonal
from transformer.network.special_tokens import BOS, EOS, PAD
from transformer.network.tokenizers import TokenizerError

PAIRS = [("ab", "ba"), ("abcdef", "fedcba"), ("xyzw", "wzyx")]


def test_batch_is_padded_as_in_training(small_reverse):
    model, tok = small_reverse
    b = masked_batch(model, tok, PAIRS)
    assert b.src.shape == (3, 7) and b.tgt_in.shape == (3, 7)
    a = tok.encode("a")[0]
    assert b.src[0].tolist() == [a, a + 1, EOS, PAD, PAD, PAD, PAD]
    assert b.tgt_in[0].tolist() == [BOS, a + 1, a, EOS, PAD, PAD, PAD]  # short rows keep </s> as input
    assert b.tgt_out[0].tolist() == [a + 1, a, EOS, PAD, PAD, PAD, PAD]
    assert b.tgt_in[1, -1].item() == a  # the longest row's </s> is only ever predicted
    assert b.src_pieces[0][:4] == ["a", "b", "</s>", "<pad>"] and b.tgt_pieces[0][0] == "<s>"
    assert b.scored.sum(1).tolist() == [3, 7, 5]


def test_masks_are_built_and_traced(small_reverse):
    model, tok = small_reverse
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


def test_no_causal_mask_puts_weight_above_the_diagonal(small_reverse):
    model, tok = small_reverse
    causal, open_ = masked_batch(model, tok, PAIRS), masked_batch(model, tok, PAIRS, causal=False)
    assert open_.tgt_mask.shape == (3, 1, 1, 7)
    assert weight_above_diagonal(causal.trace.weights("decoder_self")).max() == 0
    assert weight_above_diagonal(open_.trace.weights("decoder_self")).max() > 0.1
    assert torch.equal(causal.trace.weights("encoder_self"), open_.trace.weights("encoder_self"))
    assert not torch.allclose(causal.log_probs, open_.log_probs)


def test_batch_errors(small_reverse):
    model, tok = small_reverse
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


def test_greedy_targets_match_the_decoder(small_reverse):
    model, tok = small_reverse
    from transformer.network.decoding import greedy_decode

    outs = greedy_targets(model, tok, ["ab", "xyzw"])
    assert outs == [greedy_decode(model, tok, s, max_len=9).output_text for s in ["ab", "xyzw"]]
