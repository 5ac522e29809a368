"""EncoderDecoder and ModelConfig: every variant builds and runs, the traced path equals the fast one,
the recorded attention is what the layers really computed, and the model keeps no per-call state."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from transformer.network.config import BOUNDS, NORMS, POSITIONALS, ConfigError, ModelConfig
from transformer.network.masks import padding_mask, subsequent_mask, target_mask
from transformer.network.model import DecoderCache, EncoderDecoder
from transformer.network.positional import sinusoidal_table
from transformer.network.trace import KINDS, AttentionTrace

VARIANTS = [(norm, positional) for norm in NORMS for positional in POSITIONALS]
HEADS = 4

# Two sources and targets of different lengths: row 1 is padded on both sides.
SRC = torch.tensor([[5, 6, 7, 8, 9, 2], [9, 10, 11, 2, 0, 0]])
TGT = torch.tensor([[1, 5, 6, 7, 8], [1, 8, 9, 0, 0]])


def make_model(norm="pre", positional="sinusoidal", seed=0) -> EncoderDecoder:
    torch.manual_seed(seed)
    config = ModelConfig(src_vocab=12, tgt_vocab=11, n_enc_layers=2, n_dec_layers=2, d_model=16, n_heads=HEADS,
                         d_ff=32, norm=norm, positional=positional, max_len=10)
    return EncoderDecoder(config).eval()


def traced_forward(model, src=SRC, tgt=TGT, positions=True):
    trace = AttentionTrace()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask, trace, positions)
    out = model.generator(model.decode(memory, src_mask, tgt, target_mask(tgt), trace, positions=positions))
    return out, trace


@pytest.fixture(params=VARIANTS, ids=lambda v: f"{v[0]}-{v[1]}")
def model(request):
    return make_model(*request.param)


# ------------------------------------------------------------------------------------------- both paths


def test_fast_and_traced_paths_agree(model):
    fast = model(SRC, TGT, padding_mask(SRC), target_mask(TGT))
    slow, trace = traced_forward(model)
    assert fast.shape == (2, 5, 11)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    assert set(trace.attention["decoder_self"]) == {0, 1}


def test_recorded_weights_are_masked_softmax_rows(model):
    _, trace = traced_forward(model)
    for kind in KINDS:
        for layer, rec in trace.attention[kind].items():
            assert rec.weights.shape == rec.mask.shape == rec.scores.shape
            assert (rec.weights[~rec.mask] == 0).all(), (kind, layer)
            live = rec.mask.any(-1)
            torch.testing.assert_close(rec.weights.sum(-1)[live], torch.ones(int(live.sum())))


def test_trace_records_the_masks_actually_applied(model):
    _, trace = traced_forward(model)
    src_keys = SRC != 0
    for layer in range(2):
        enc = trace.attention["encoder_self"][layer]
        cross = trace.attention["cross"][layer]
        dec = trace.attention["decoder_self"][layer]
        assert enc.mask.shape == (2, HEADS, 6, 6) and cross.mask.shape == (2, HEADS, 5, 6)
        assert torch.equal(enc.mask, src_keys[:, None, None, :].expand(2, HEADS, 6, 6))
        assert torch.equal(cross.mask, src_keys[:, None, None, :].expand(2, HEADS, 5, 6))
        assert torch.equal(dec.mask, target_mask(TGT).expand(2, HEADS, 5, 5))
        upper = torch.ones(5, 5, dtype=torch.bool).triu(1)
        assert not dec.mask[..., upper].any()
        assert (dec.weights[..., upper] == 0).all()
        assert (enc.weights[1, :, :, 4:] == 0).all() and (cross.weights[1, :, :, 4:] == 0).all()


def test_traced_and_fast_paths_survive_an_all_padding_row(model):
    """A source of nothing but padding masks every key of its encoder and cross rows."""
    src = SRC.clone()
    src[1] = 0
    for trace in (None, AttentionTrace()):
        model.zero_grad()
        src_mask = padding_mask(src)
        memory = model.encode(src, src_mask, trace)
        out = model.generator(model.decode(memory, src_mask, TGT, target_mask(TGT), trace))
        assert torch.isfinite(out).all()
        out[:, :, 4].sum().backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert (trace.attention["cross"][0].weights[1] == 0).all()


# ------------------------------------------------------------------------------ independent recomputation


def _heads(x):
    batch, length, d_model = x.shape
    return x.view(batch, length, HEADS, d_model // HEADS).transpose(1, 2)


def _recompute(attn, query_in, key_in, mask):
    """Weights and output of one attention sublayer, from its raw projection matrices."""
    q = _heads(F.linear(query_in, *attn.projection("q_proj")))
    k = _heads(F.linear(key_in, *attn.projection("k_proj")))
    v = _heads(F.linear(key_in, *attn.projection("v_proj")))
    scores = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).flatten(2) @ attn.out_proj.weight.T + attn.out_proj.bias
    return weights, out


@pytest.mark.parametrize("norm", NORMS)
@torch.no_grad()
def test_recorded_weights_equal_a_recomputation_from_the_projections(norm):
    model = make_model(norm)
    pre = norm == "pre"
    _, trace = traced_forward(model)
    src_mask, tgt_mask = padding_mask(SRC), target_mask(TGT)

    x = model.src_embed(SRC)
    for i, layer in enumerate(model.encoder.layers):
        y = layer.residuals[0].norm(x) if pre else x
        weights, _ = _recompute(layer.self_attn, y, y, src_mask)
        torch.testing.assert_close(trace.attention["encoder_self"][i].weights, weights)
        x = layer(x, src_mask)
    memory = model.encoder.norm(x)

    x = model.tgt_embed(TGT)
    for i, layer in enumerate(model.decoder.layers):
        first, second = layer.residuals[0].norm, layer.residuals[1].norm
        y = first(x) if pre else x
        weights, out = _recompute(layer.self_attn, y, y, tgt_mask)
        torch.testing.assert_close(trace.attention["decoder_self"][i].weights, weights)
        h = x + out if pre else first(x + out)
        weights, _ = _recompute(layer.cross_attn, second(h) if pre else h, memory, src_mask)
        torch.testing.assert_close(trace.attention["cross"][i].weights, weights)
        x = layer(x, memory, src_mask, tgt_mask)


@pytest.mark.parametrize("positional", POSITIONALS)
def test_trace_records_embeddings(positional):
    model = make_model(positional=positional)
    _, trace = traced_forward(model)
    src = trace.embeddings["src"]
    torch.testing.assert_close(src.tokens, model.src_embed.tokens.weight[SRC] * 4.0)  # sqrt(16)
    if positional == "learned":
        expected = model.src_embed.positions.embedding.weight[:6].detach()
    else:
        expected = sinusoidal_table(6, 16) if positional == "sinusoidal" else torch.zeros(6, 16)
    torch.testing.assert_close(src.positions[0], expected)
    assert trace.embeddings["tgt"].tokens.shape == (2, 5, 16)


def test_positions_off_zeroes_the_positional_term_and_changes_the_output():
    model = make_model()
    with_positions, _ = traced_forward(model)
    without, trace = traced_forward(model, positions=False)
    assert (trace.embeddings["src"].positions == 0).all() and (trace.embeddings["tgt"].positions == 0).all()
    assert not torch.allclose(with_positions, without)


def test_sequences_longer_than_max_len_are_refused():
    model = make_model()
    with pytest.raises(ValueError, match="max_len"):
        model.encode(torch.full((1, 11), 5), None)


# ------------------------------------------------------------------------------------- incremental


@torch.no_grad()
def test_incremental_decoding_equals_full_recomputation(model):
    src_mask = padding_mask(SRC)
    memory = model.encode(SRC, src_mask)
    full_trace = AttentionTrace()
    full = model.decode(memory, src_mask, TGT, trace=full_trace)
    cache, rows = DecoderCache(), []
    for t in range(TGT.size(1)):
        step_trace = AttentionTrace()
        rows.append(model.decode(memory, src_mask, TGT[:, t : t + 1], trace=step_trace, cache=cache))
        assert cache.length == t + 1
        for kind in ("decoder_self", "cross"):
            keys = step_trace.weights(kind).size(-1)
            full_row = full_trace.weights(kind)[..., t, :keys]
            torch.testing.assert_close(step_trace.weights(kind)[..., 0, :], full_row)
    torch.testing.assert_close(torch.cat(rows, dim=1), full, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_cache_select_reorders_the_batch():
    model = make_model()
    src_mask = padding_mask(SRC)
    memory = model.encode(SRC, src_mask)
    cache = DecoderCache()
    model.decode(memory, src_mask, TGT[:, :2], cache=cache)
    swap = torch.tensor([1, 0])
    step = model.decode(memory[swap], src_mask[swap], TGT[swap, 2:3], cache=cache.select(swap))
    full = model.decode(memory[swap], src_mask[swap], TGT[swap, :3])
    torch.testing.assert_close(step[:, 0], full[:, 2], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------- no hidden state


def _snapshot(model):
    tensors = {k: v.clone() for k, v in model.state_dict(keep_vars=True).items()}
    tensors.update({f"buffer:{k}": v.clone() for k, v in model.named_buffers()})
    attributes = {name: {k: (len(v) if isinstance(v, dict) else v) for k, v in vars(m).items()}
                  for name, m in model.named_modules()}
    return tensors, attributes


def test_model_keeps_no_per_call_state(model):
    tensors, attributes = _snapshot(model)
    traced_forward(model)
    with torch.no_grad():
        src_mask = padding_mask(SRC)
        memory = model.encode(SRC, src_mask)
        cache = DecoderCache()
        for t in range(3):
            model.decode(memory, src_mask, TGT[:, t : t + 1], trace=AttentionTrace(), cache=cache)
    after_tensors, after_attributes = _snapshot(model)
    assert after_attributes == attributes
    assert tensors.keys() == after_tensors.keys()
    assert all(torch.equal(tensors[k], after_tensors[k]) for k in tensors)
    assert not model.training


def test_positional_variants_own_the_right_parameters():
    names = {p: set(make_model(positional=p).state_dict()) for p in POSITIONALS}
    assert "src_embed.positions.embedding.weight" in names["learned"]
    assert not any("positions" in n for n in names["sinusoidal"] | names["none"])  # the table is not saved
    assert names["sinusoidal"] == names["none"]


def test_post_norm_has_no_final_stack_norm():
    pre, post = make_model("pre"), make_model("post")
    assert "encoder.norm.weight" in pre.state_dict() and "encoder.norm.weight" not in post.state_dict()
    assert post.num_parameters() == sum(p.numel() for p in post.parameters())


# ------------------------------------------------------------------------------------- ModelConfig


def test_config_round_trips_through_json():
    config = ModelConfig(src_vocab=30, tgt_vocab=40, n_enc_layers=3, norm="post", positional="learned")
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert config.d_head == 16


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelConfig(src_vocab=30, tgt_vocab=30).d_model = 8


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_config_rejects_values_outside_bounds(key):
    base = {"src_vocab": 30, "tgt_vocab": 30, "d_model": 16, "n_heads": 1}
    lo, hi = BOUNDS[key]
    step = 1 if isinstance(lo, int) else 0.01
    for bad in (lo - step, hi + step):
        with pytest.raises(ConfigError, match=key):
            ModelConfig(**{**base, key: bad})
    ModelConfig(**{**base, key: hi if key not in ("d_model", "n_heads") else lo})  # the edge itself is fine


@pytest.mark.parametrize(
    "change, message",
    [
        ({"d_model": 64.0}, "d_model must be a number"),
        ({"n_heads": True}, "n_heads must be a number"),
        ({"dropout": "0.1"}, "dropout must be a number"),
        ({"norm": "middle"}, "norm must be one of"),
        ({"positional": "rotary"}, "positional must be one of"),
        ({"d_model": 30, "n_heads": 4}, "divisible"),
    ],
)
def test_config_rejects_bad_types_and_choices(change, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**{"src_vocab": 30, "tgt_vocab": 30, **change})


def test_config_from_dict_rejects_unknown_and_missing_keys():
    with pytest.raises(ConfigError, match="unknown model config keys: evil, extra"):
        ModelConfig.from_dict({"src_vocab": 30, "tgt_vocab": 30, "extra": 1, "evil": 2})
    with pytest.raises(ConfigError, match="tgt_vocab"):
        ModelConfig.from_dict({"src_vocab": 30})
    with pytest.raises(ConfigError, match="JSON object"):
        ModelConfig.from_dict([("src_vocab", 30)])


def test_subsequent_mask_with_offset_matches_the_cached_rows():
    full = subsequent_mask(5)
    assert torch.equal(subsequent_mask(2, offset=3), full[:, :, 3:, :])
