"""The network's attention() and MultiHeadAttention: the weights are a proper masked softmax that never turns into
NaN, the recorded scores and weights follow the formula, heads see their own slices (the fast training kernel is
held equal to attention() in test_fast_forward.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer.network.attention import MultiHeadAttention, attention
from transformer.network.masks import padding_mask, subsequent_mask
from transformer.network.trace import AttentionTrace


def qkv(batch=2, heads=3, queries=5, keys=5, d_head=4, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, n, d_head, generator=g, requires_grad=grad) for n in (queries, keys, keys)]


def masks(n: int = 5) -> dict[str, torch.Tensor | None]:
    """Masks for batch 2, n queries, n keys (row 1: two tokens, then padding); "empty_row" leaves query 0 of
    batch 1 with no key at all."""
    ids = torch.tensor([[5] * n, [5, 6] + [0] * (n - 2)])
    empty = padding_mask(ids) & subsequent_mask(n)
    empty[1, 0, 0, :] = False
    return {
        "none": None,
        "padding": padding_mask(ids),
        "causal": subsequent_mask(n),
        "padding_causal": padding_mask(ids) & subsequent_mask(n),
        "empty_row": empty,
    }


def traced(q, k, v, mask):
    trace = AttentionTrace()
    out = attention(q, k, v, mask, trace=trace, site=("encoder_self", 0))
    return out, trace.attention["encoder_self"][0]


@pytest.mark.parametrize("name", list(masks()))
def test_weights_are_a_masked_softmax(name):
    mask = masks()[name]
    q, k, v = qkv()
    _, rec = traced(q, k, v, mask)
    allowed = torch.ones(rec.weights.shape, dtype=torch.bool) if mask is None else mask.expand(rec.weights.shape)
    assert torch.equal(rec.mask, allowed)
    assert (rec.weights[~allowed] == 0).all()  # exactly zero, not merely small
    live = allowed.any(-1)
    torch.testing.assert_close(rec.weights.sum(-1)[live], torch.ones(int(live.sum())))
    assert (rec.weights.sum(-1)[~live] == 0).all()
    assert (rec.weights >= 0).all()


def test_recorded_scores_and_weights_match_the_formula():
    q, k, v = qkv()
    mask = masks()["padding_causal"]
    out, rec = traced(q, k, v, mask)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))
    torch.testing.assert_close(rec.scores, scores)
    allowed = torch.where(mask, scores.exp(), 0.0)
    expected = allowed / allowed.sum(-1, keepdim=True)
    torch.testing.assert_close(rec.weights, expected)
    torch.testing.assert_close(out, torch.einsum("bhqk,bhkd->bhqd", expected, v))


def test_causal_weights_are_zero_above_the_diagonal():
    q, k, v = qkv(queries=6, keys=6)
    _, rec = traced(q, k, v, subsequent_mask(6))
    above = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert (rec.weights[..., above] == 0).all()
    assert (rec.weights[..., ~above] > 0).all()


@pytest.mark.parametrize("use_trace", [False, True])
def test_all_masked_row_has_finite_output_and_gradient(use_trace):
    q, k, v = qkv(grad=True)
    mask = masks()["empty_row"]
    trace = AttentionTrace() if use_trace else None
    out = attention(q, k, v, mask, trace=trace, site=("cross", 0))
    assert torch.equal(out[1, :, 0], torch.zeros_like(out[1, :, 0]))  # nothing to attend to: output 0
    out.square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_trace_records_detached_tensors_under_autograd():
    q, k, v = qkv(grad=True)
    _, rec = traced(q, k, v, None)
    assert not rec.scores.requires_grad and not rec.weights.requires_grad


def test_multi_head_attention_traces_what_it_computes_and_splits_heads():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4, dropout=0.0)
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    mask = padding_mask(torch.tensor([[4, 4, 4, 4, 4], [4, 4, 0, 0, 0]]))
    trace = AttentionTrace()
    fast = mha(x, mha.keys_values(memory), mask)
    slow = mha(x, mha.keys_values(memory), mask, trace, ("cross", 2))
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)
    rec = trace.attention["cross"][2]
    assert rec.weights.shape == (2, 4, 3, 5)
    # head h sees only its own slice of the projections
    h = 1
    qh = F.linear(x, *mha.projection("q_proj"))[..., 4 * h : 4 * h + 4]
    kh = F.linear(memory, *mha.projection("k_proj"))[..., 4 * h : 4 * h + 4]
    scores = qh @ kh.transpose(1, 2) / 2.0
    torch.testing.assert_close(rec.scores[:, h], scores)


def test_dropout_applies_only_in_training_mode():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4, dropout=0.5).eval()
    x = torch.randn(1, 4, 16)
    kv = mha.keys_values(x)
    torch.testing.assert_close(mha(x, kv, None), mha(x, kv, None))
    mha.train()
    assert not torch.allclose(mha(x, kv, None), mha(x, kv, None))


def test_checkpoints_keep_the_three_projections():
    """The joint q/k/v projection is saved as q_proj, k_proj and v_proj (own storage each) and loaded back from
    them; a state dict missing one of them is refused by strict loading."""
    torch.manual_seed(0)
    mha, other = MultiHeadAttention(8, 2, 0.0), MultiHeadAttention(8, 2, 0.0)
    state = mha.state_dict()
    assert sorted(state) == sorted(f"{n}.{k}" for n in ("q_proj", "k_proj", "v_proj", "out_proj")
                                   for k in ("weight", "bias"))
    for name in ("q_proj", "k_proj", "v_proj"):
        weight, bias = mha.projection(name)
        assert torch.equal(state[f"{name}.weight"], weight) and torch.equal(state[f"{name}.bias"], bias)
    pointers = {t.untyped_storage().data_ptr() for t in state.values()}
    assert len(pointers) == len(state)
    other.load_state_dict(state)
    assert torch.equal(other.in_proj_weight, mha.in_proj_weight) and torch.equal(other.in_proj_bias, mha.in_proj_bias)
    del state["k_proj.bias"]
    with pytest.raises(RuntimeError, match="Missing key"):
        MultiHeadAttention(8, 2, 0.0).load_state_dict(state)
