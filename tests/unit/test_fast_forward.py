"""The training forward (transformer/training/fast_forward.py: the real tokens only, a faster attention kernel)
gives the network's padded pass's logits, loss and gradients, for every model variant, and the Trainer trains
through it."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from transformer.analysis.evaluation import teacher_forced_logits
from transformer.network.attention import MultiHeadAttention, attention
from transformer.network.config import ModelConfig
from transformer.network.masks import padding_mask, subsequent_mask
from transformer.network.model import EncoderDecoder
from transformer.network.positional import alibi_bias, alibi_slopes
from transformer.network.special_tokens import PAD
from transformer.tasks import make_task
from transformer.training.config import TrainConfig
from transformer.training import fast_forward
from transformer.training.fast_forward import (
    WRITTEN_OUT_MAX, additive_mask, fast_attention, packed_logits, row_softmax,
)
from transformer.training.packing import Grid, Packing
from transformer.training.trainer import Trainer

VARIANTS = {
    "default": {},
    "post_norm": {"norm": "post"},
    "qk_norm": {"qk_norm": True},
    "rope": {"positional": "rope"},
    "alibi": {"positional": "alibi"},
    "learned": {"positional": "learned"},
    "two_layers": {"n_enc_layers": 2, "n_dec_layers": 2},
}


def batch(size=12, seed=0):
    """A reverse batch whose sources and targets have different lengths (so both carry padding)."""
    task = make_task("reverse", min_len=2, max_len=11)
    tokenizer = task.make_tokenizer()
    src, tgt = task.batch(size, torch.Generator().manual_seed(seed), tokenizer)
    assert (src == PAD).any() and (tgt == PAD).any()
    return src, tgt, tokenizer.vocab_size


def model(vocab, seed=0, **variant):
    torch.manual_seed(seed)
    config = ModelConfig(src_vocab=vocab, tgt_vocab=vocab, max_len=16, d_model=32, n_heads=4, d_ff=48,
                         dropout=0.0, **variant)
    return EncoderDecoder(config)


def test_packing_keeps_the_real_rows_in_order():
    real = torch.tensor([[True, True, False], [True, False, False]])
    packing = Packing.of(real)
    grid = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)
    assert packing.index.tolist() == [0, 1, 3]
    assert packing.positions.tolist() == [0, 1, 0]
    assert torch.equal(packing.pack(grid), grid[real])


def test_heads_and_rows_gather_each_head_to_its_place_and_back():
    """heads(): the (rows, parts * heads * d_head) projections become (batch, heads, length, d_head) per part,
    each real row at its position; rows() takes an attention output back to the real rows."""
    real = torch.tensor([[True, True, True], [True, True, False]])
    packing, heads, d_head = Packing.of(real), 2, 3
    rows = torch.randn(5, 2 * heads * d_head)
    grid = torch.zeros(2, 3, rows.size(1))
    grid[real] = rows
    expected = grid.view(2, 3, 2, heads, d_head).permute(2, 0, 3, 1, 4)  # (parts, batch, heads, length, d_head)
    for part, got in enumerate(packing.heads(rows, heads, d_head)):
        assert torch.equal(got.transpose(1, 2)[real], expected[part].transpose(1, 2)[real])
        assert torch.isfinite(got).all()  # padding holds a copy of a real row, never garbage
    out = torch.randn(2, heads, 3, d_head)
    assert torch.equal(packing.rows(out), out.transpose(1, 2).reshape(2, 3, -1)[real])


def test_gathers_pass_gradients_back_like_index_select():
    real = torch.tensor([[True, True, False], [True, True, True]])
    packing = Packing.of(real)
    rows = torch.randn(5, 8, requires_grad=True)
    out = torch.randn(2, 2, 3, 2, requires_grad=True)
    weight = torch.randn(2, 2, 3, 2)
    weight[0, :, 2] = 0  # the padding place takes no gradient, as under attention's masks
    q, k = packing.heads(rows, 2, 2)
    ((q * weight).sum() + (k * weight).sum() + (packing.rows(out) ** 2).sum()).backward()
    ref_rows = rows.detach().clone().requires_grad_()
    grid = torch.zeros(6, 8).index_copy(0, packing.index, ref_rows).view(2, 3, 2, 2, 2).permute(2, 0, 3, 1, 4)
    ref_out = out.detach().clone().requires_grad_()
    packed = ref_out.transpose(1, 2).reshape(6, 4).index_select(0, packing.index)
    ((grid[0] * weight).sum() + (grid[1] * weight).sum() + (packed ** 2).sum()).backward()
    assert torch.allclose(rows.grad, ref_rows.grad) and torch.allclose(out.grad, ref_out.grad)


@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
def test_packed_pass_equals_the_padded_pass(variant):
    """Logits at the scored positions, the loss and every parameter's gradient, to float rounding."""
    src, tgt, vocab = batch()
    padded = model(vocab, **VARIANTS[variant])
    packed = copy.deepcopy(padded)
    logits = teacher_forced_logits(padded, src, tgt)
    rows, targets = packed_logits(packed, src, tgt)
    scored = tgt[:, 1:] != PAD
    assert torch.equal(targets, tgt[:, 1:][scored])
    assert torch.allclose(rows, logits[scored], atol=1e-5)
    loss_padded = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
    loss_packed = F.cross_entropy(rows, targets)
    assert torch.allclose(loss_packed, loss_padded, atol=1e-6)
    loss_padded.backward()
    loss_packed.backward()
    for (name, a), b in zip(padded.named_parameters(), packed.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), name


@pytest.mark.parametrize("dense", ["sources", "targets", "both"])
def test_a_side_without_much_padding_runs_padded_with_the_same_result(dense):
    """Under DENSE a side runs padded (its rows picked afterwards): the same logits, loss and gradients."""
    src, tgt, vocab = batch()
    if dense in ("sources", "both"):
        src = torch.where(src == PAD, 7, src)  # every source as long as the longest
    if dense in ("targets", "both"):
        tgt = torch.where(tgt == PAD, 7, tgt)
    assert (src != PAD).all() == (dense != "targets") and (tgt != PAD).all() == (dense != "sources")
    padded = model(vocab)
    packed = copy.deepcopy(padded)
    logits = teacher_forced_logits(padded, src, tgt)
    rows, targets = packed_logits(packed, src, tgt)
    scored = tgt[:, 1:] != PAD
    assert torch.allclose(rows, logits[scored], atol=1e-5) and torch.equal(targets, tgt[:, 1:][scored])
    F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD).backward()
    F.cross_entropy(rows, targets).backward()
    for (name, a), b in zip(padded.named_parameters(), packed.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), name


LONG = 40  # LONG x LONG pairs: past WRITTEN_OUT_MAX, so the kernel is SDPA's
assert LONG * LONG > WRITTEN_OUT_MAX >= 5 * 5


@pytest.mark.parametrize("n", [5, LONG])
@pytest.mark.parametrize("alibi", [False, True])
def test_the_fast_kernel_computes_the_networks_attention(n, alibi):
    """Written out (short) and SDPA (long), with additive masks and ALiBi's bias: attention()'s output, and its
    gradients."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 8, generator=g, requires_grad=True) for _ in range(3))
    ids = torch.tensor([[5] * n, [5, 6] + [0] * (n - 2)])
    bias = alibi_bias(alibi_slopes(4), torch.arange(n), torch.arange(n)) if alibi else None
    for mask in (padding_mask(ids), subsequent_mask(n), padding_mask(ids) & subsequent_mask(n)):
        fast = fast_attention(q, k, v, additive_mask(mask), bias=bias)
        plain = attention(q, k, v, mask, bias=bias)
        assert torch.allclose(fast, plain, atol=1e-6)
        grads = torch.autograd.grad(fast.square().sum(), (q, k, v))
        for got, want in zip(grads, torch.autograd.grad(plain.square().sum(), (q, k, v))):
            assert torch.allclose(got, want, atol=1e-5)
    additive = additive_mask(padding_mask(ids))
    assert additive.dtype == torch.float32 and additive[1, 0, 0, 2] == torch.finfo(torch.float32).min


@pytest.mark.parametrize("width", [1, 8, 16])
def test_the_padded_softmax_is_torchs_softmax(monkeypatch, width):
    """Rows shorter than the kernel's vector, padded with -inf keys and cut back: torch.softmax's weights and
    gradients, masked keys (the additive mask's most negative float) included, at every row length."""
    monkeypatch.setattr(fast_forward, "SOFTMAX_WIDTH", width)
    g = torch.Generator().manual_seed(1)
    for keys in (1, 3, 5, 8, 12, 16, 17):
        scores = torch.randn(6, 4, keys, generator=g, dtype=torch.float64)
        scores[:, 1:, 0] = torch.finfo(scores.dtype).min if keys > 1 else 0.0
        scores.requires_grad_(True)
        weights, want = row_softmax(scores), torch.softmax(scores, -1)
        assert weights.shape == want.shape and torch.allclose(weights, want, atol=1e-12)
        pull = torch.randn(weights.shape, generator=g, dtype=torch.float64)
        got, = torch.autograd.grad(weights, scores, pull)
        expected, = torch.autograd.grad(want, scores, pull)
        assert torch.isfinite(got).all() and torch.allclose(got, expected, atol=1e-12), keys


def test_a_grid_splits_and_merges_heads_as_the_network_does():
    torch.manual_seed(0)
    mha, grid = MultiHeadAttention(12, 3, 0.0), Grid(2, 5)
    y = torch.randn(2, 5, 36)
    for ours, theirs in zip(grid.heads(y, 3, 4), mha.split_heads(y)):
        assert torch.equal(ours, theirs)
    out = torch.randn(2, 3, 5, 4)
    assert torch.equal(grid.rows(out), out.transpose(1, 2).reshape(2, 5, 12))
    assert grid.pack(y) is y


def test_trainer_trains_through_the_packed_pass_deterministically():
    def losses():
        trainer = Trainer(TrainConfig(task="reverse", batch_size=16, lr=3e-3, warmup=5, steps=30, seed=3,
                                      task_params={"min_len": 2, "max_len": 8}))
        return [trainer.step() for _ in range(30)]

    first, second = losses(), losses()
    assert first == second
    assert sum(first[-5:]) / 5 < sum(first[:5]) / 5 - 0.3
