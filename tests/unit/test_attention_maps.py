"""attention_maps: every kind of attention of a finished decode, with masks, labels and expected alignment."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from transformer.analysis.attention_maps import AttentionMap, attention_maps
from transformer.network.config import ModelConfig
from transformer.network.decoding import greedy_decode
from transformer.network.model import EncoderDecoder
from transformer.tasks import make_task

REVERSE = make_task("reverse")
TOKENIZER = REVERSE.make_tokenizer()


@pytest.fixture(scope="module")
def decoded():
    torch.manual_seed(0)
    config = ModelConfig(src_vocab=TOKENIZER.vocab_size, tgt_vocab=TOKENIZER.vocab_size, n_enc_layers=2,
                         n_dec_layers=3, d_model=32, n_heads=4, d_ff=64, max_len=12)
    model = EncoderDecoder(config).eval()
    result = greedy_decode(model, TOKENIZER, "abcd", max_len=6)
    return result, attention_maps(result, REVERSE, "abcd")


def test_shapes_and_axis_tokens_follow_the_decode(decoded):
    result, maps = decoded
    steps, src = len(result.steps), len(result.source_pieces)
    assert maps["encoder_self"].weights.shape == (2, 4, src, src)
    assert maps["decoder_self"].weights.shape == (3, 4, steps, steps)
    assert maps["cross"].weights.shape == (3, 4, steps, src)
    assert maps["cross"].query_pieces == result.prefix_pieces
    assert maps["cross"].key_pieces == ["a", "b", "c", "d", "</s>"]
    assert all(m.weights.dtype == np.float32 for m in maps.values())
    np.testing.assert_allclose(maps["cross"].weights.sum(-1), 1, atol=1e-5)


def test_decoder_self_carries_the_causal_mask_and_others_none(decoded):
    _, maps = decoded
    mask = maps["decoder_self"].mask
    np.testing.assert_array_equal(mask, np.tril(np.ones_like(mask)))
    assert (maps["decoder_self"].weights[..., ~mask] == 0).all()
    assert maps["cross"].mask is None and maps["encoder_self"].mask is None


def test_expected_alignment_is_per_query_row_and_only_for_cross(decoded):
    result, maps = decoded
    steps = len(result.steps)  # a random model runs to max_len=6: two rows past the 4 letters
    assert steps == 6
    assert maps["cross"].expected == [3, 2, 1, 0, None, None]
    assert maps["encoder_self"].expected is None and maps["decoder_self"].expected is None
    assert set(maps["cross"].stats()) == {"entropy_bits", "max_weight", "alignment"}
    assert set(maps["decoder_self"].stats()) == {"entropy_bits", "max_weight"}


def test_head_average_is_the_mean_over_heads(decoded):
    _, maps = decoded
    view = maps["cross"]
    np.testing.assert_allclose(view.head_average(1), view.weights[1].mean(0), rtol=1e-6)


def test_best_aligned_finds_the_head_that_follows_the_alignment():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(5), size=(2, 3, 4)).astype(np.float32)
    weights[1, 2] = np.eye(5, dtype=np.float32)[[3, 2, 1, 0]]  # the anti-diagonal of "abcd" -> "dcba"
    view = AttentionMap("cross", weights, None, list("<dcb"), list("abcd") + ["</s>"], [3, 2, 1, 0])
    assert view.best_aligned() == (1, 2, pytest.approx(1.0))
    assert AttentionMap("cross", weights, None, list("<dcb"), list("abcd") + ["</s>"], None).best_aligned() is None


def test_blanked_hides_only_masked_cells(decoded):
    _, maps = decoded
    view = maps["decoder_self"]
    blanked = view.blanked()
    assert np.isnan(blanked[..., ~view.mask]).all()
    np.testing.assert_array_equal(blanked[..., view.mask], view.weights[..., view.mask])
    assert maps["cross"].blanked() is maps["cross"].weights
