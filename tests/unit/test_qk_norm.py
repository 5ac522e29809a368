"""ModelConfig.qk_norm: the traced path equals the fast path, the recorded scores are those of the normalised
queries and keys (recomputed here with the normalisation written out), checkpoints round-trip, old configs load."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers.small_models import TASK, TOKENIZER, heldout_batch, small_model

from transformer.bundle import ModelBundle
from transformer.network.budget import parameter_count
from transformer.network.config import ConfigError, ModelConfig
from transformer.network.decoding import greedy_batch
from transformer.network.masks import padding_mask, subsequent_mask, target_mask
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import BOS, EOS
from transformer.network.trace import AttentionTrace
from transformer.store.checkpoints import load_bundle, save_bundle


def qk_model(seed: int = 0) -> EncoderDecoder:
    """A small qk-norm model (its norm scales random)."""
    return small_model(seed, d_model=16, n_heads=2, d_ff=32, max_len=10, qk_norm=True)


def rms_normalised(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (nn.RMSNorm's default eps)."""
    eps = torch.finfo(x.dtype).eps
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, n, d = x.shape
    return x.view(b, n, n_heads, d // n_heads).transpose(1, 2)


def test_traced_forward_equals_fast_forward():
    model, (src, tgt) = qk_model(), heldout_batch()
    fast = model(src, tgt, padding_mask(src), target_mask(tgt))
    trace = AttentionTrace()
    slow = model(src, tgt, padding_mask(src), target_mask(tgt), trace=trace)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    assert sorted(trace.attention["cross"]) == [0, 1]


def test_recorded_scores_are_those_of_the_normalised_queries_and_keys():
    model, (src, _) = qk_model(), heldout_batch()
    trace = AttentionTrace()
    with torch.no_grad():
        model.encode(src, padding_mask(src), trace)
        layer = model.encoder.layers[0]
        attn = layer.self_attn
        x = layer.residuals[0].norm(model.src_embed(src))  # pre-norm: the sublayer sees norm(x)
        q = rms_normalised(heads(F.linear(x, *attn.projection("q_proj")), 2), attn.q_norm.weight)
        k = rms_normalised(heads(F.linear(x, *attn.projection("k_proj")), 2), attn.k_norm.weight)
        expected = q @ k.transpose(-2, -1) / math.sqrt(8)
        raw_q = heads(F.linear(x, *attn.projection("q_proj")), 2)
        raw_k = heads(F.linear(x, *attn.projection("k_proj")), 2)
        unnormalised = raw_q @ raw_k.transpose(-2, -1) / math.sqrt(8)
    recorded = trace.attention["encoder_self"][0].scores
    torch.testing.assert_close(recorded, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(recorded, unnormalised, atol=1e-2)  # the check can tell the two apart


def test_cached_greedy_decode_equals_teacher_forced_argmax():
    """The KV cache stores normalised keys: step-by-step greedy ids equal the argmax of one full pass over them."""
    model, (src, _) = qk_model(1), heldout_batch()
    ids = greedy_batch(model, src, 8)  # without <s>; </s> then <pad> where a row ended
    prefix = torch.cat([torch.full((ids.size(0), 1), BOS), ids[:, :-1]], dim=1)
    with torch.no_grad():
        predicted = model(src, prefix, padding_mask(src), subsequent_mask(prefix.size(1))).argmax(-1)
    eos = (ids == EOS).int()
    decoded = (eos.cumsum(1) - eos) == 0  # up to and including the first </s>
    assert torch.equal(predicted[decoded], ids[decoded])


def test_checkpoint_round_trip_keeps_qk_norm(tmp_path):
    model, (src, tgt) = qk_model(), heldout_batch()
    loaded = load_bundle(save_bundle(ModelBundle(model, TOKENIZER, TASK, {}), tmp_path / "qk.safetensors"))
    assert loaded.config.qk_norm and loaded.config == model.config
    with torch.no_grad():
        assert torch.equal(loaded.model(src, tgt, padding_mask(src), target_mask(tgt)),
                           model(src, tgt, padding_mask(src), target_mask(tgt)))


def test_configs_without_the_key_load_as_off_and_non_bools_are_refused():
    old = ModelConfig(20, 20).to_dict()
    del old["qk_norm"]
    assert ModelConfig.from_dict(old).qk_norm is False
    with pytest.raises(ConfigError, match="qk_norm"):
        ModelConfig(20, 20, qk_norm=1)


def test_shipped_checkpoint_still_loads_without_qk_norm():
    from transformer.cli import ZOO

    assert load_bundle(ZOO / "reverse.safetensors").config.qk_norm is False


def test_budget_counts_the_norm_scales():
    config = ModelConfig(20, 20, 2, 3, d_model=32, n_heads=4, qk_norm=True)
    assert parameter_count(config) == EncoderDecoder(config).num_parameters()
