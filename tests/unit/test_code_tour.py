"""The code page's tour (transformer/analysis/code_tour.py): every tensor its detailed traced pass keeps equals an
independent recomputation from the model's weights and the tensors before it, the pass equals the step-by-step
greedy decode every other page traces, an ordinary trace keeps nothing more than before, and the source it shows is
the running code."""

from __future__ import annotations

import inspect
import math
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.repo import needs_reverse

from transformer.analysis.code_tour import SECTIONS, tour
from transformer.network import budget
from transformer.network.decoding import greedy_decode, teacher_forced

pytestmark = needs_reverse
TEXT = "hgffjercqwa"


@pytest.fixture(scope="module")
def passed(bundle):
    result = greedy_decode(bundle.model, bundle.tokenizer, TEXT)
    return result, tour(bundle.model, bundle.tokenizer, TEXT, result.output_ids)


def t(array) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array))


def test_the_pass_is_the_greedy_decode_every_page_traces(passed):
    result, shown = passed
    assert shown.log_probs.argmax(-1).tolist() == result.output_ids
    assert shown.target_pieces == result.prefix_pieces
    steps = np.stack([step.log_probs.numpy() for step in result.steps])
    np.testing.assert_allclose(shown.log_probs, steps, atol=1e-4)
    for kind, weights in result.attention().items():
        mine = np.stack([shown.attention(kind, layer)[2] for layer in range(weights.shape[0])])
        np.testing.assert_allclose(mine, weights.numpy(), atol=1e-5)


def test_attention_tensors_equal_a_recomputation(bundle, passed):
    _, shown = passed
    model = bundle.model
    layer = model.decoder.layers[1]
    for kind, module, site in (("cross", layer.cross_attn, ("decoder", 1, "cross_attn")),
                               ("decoder_self", layer.self_attn, ("decoder", 1, "self_attn")),
                               ("encoder_self", model.encoder.layers[0].self_attn, ("encoder", 0, "self_attn"))):
        inner = t(shown.tensor(*site, "sublayer_in"))
        keys_from = t(shown.tensor("encoder", "memory")) if kind == "cross" else inner
        heads = module.n_heads

        def split(x: torch.Tensor, heads: int = heads) -> torch.Tensor:
            return x.view(x.size(0), heads, -1).transpose(0, 1)

        with torch.no_grad():
            q, k, v = (split(F.linear(x, *module.projection(name)))
                       for x, name in ((inner, "q_proj"), (keys_from, "k_proj"), (keys_from, "v_proj")))
            scores = q @ k.transpose(-2, -1) / math.sqrt(module.d_head)
            _, mask, weights = shown.attention(kind, 1 if kind != "encoder_self" else 0)
            expected = torch.softmax(scores.masked_fill(~t(mask), float("-inf")), -1)
            concat = (expected @ v).transpose(0, 1).reshape(inner.size(0), -1)
            output = module.out_proj(concat)
        at = (kind, 1 if kind != "encoder_self" else 0)
        for name, value in (("q", q), ("k", k), ("v", v), ("heads", expected @ v)):
            np.testing.assert_allclose(shown.tensor(*at, name), value.numpy(), atol=1e-4, err_msg=f"{kind} {name}")
        np.testing.assert_allclose(weights, expected.numpy(), atol=1e-5)
        np.testing.assert_allclose(shown.tensor(*at, "concat"), concat.numpy(), atol=1e-4)
        np.testing.assert_allclose(shown.tensor(*at, "output"), output.numpy(), atol=1e-4)
        np.testing.assert_allclose(shown.tensor(*site, "sublayer_out"), output.numpy(), atol=1e-4)


def test_layer_tensors_equal_a_recomputation(bundle, passed):
    _, shown = passed
    model = bundle.model
    for side, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        sublayers = ("self_attn", "feed_forward") if side == "encoder" else ("self_attn", "cross_attn", "feed_forward")
        for i, layer in enumerate(stack.layers):
            for j, name in enumerate(sublayers):
                site = (side, i, name)
                x, inner, change, out = (t(shown.tensor(*site, part))
                                         for part in ("x", "sublayer_in", "sublayer_out", "out"))
                with torch.no_grad():
                    np.testing.assert_allclose(inner, layer.residuals[j].norm(x), atol=1e-4)  # pre-norm
                np.testing.assert_allclose(out, x + change, atol=1e-5)
                if j:  # each sublayer reads what the one before it wrote
                    np.testing.assert_allclose(x, t(shown.tensor(side, i, sublayers[j - 1], "out")))
            inner = t(shown.tensor(side, i, "feed_forward", "sublayer_in"))
            first, _, _, second = layer.feed_forward.net
            with torch.no_grad():
                hidden = torch.relu(first(inner))
                np.testing.assert_allclose(shown.tensor(side, i, "feed_forward", "hidden"), hidden, atol=1e-4)
                np.testing.assert_allclose(shown.tensor(side, i, "feed_forward", "sublayer_out"), second(hidden),
                                           atol=1e-4)
    last = t(shown.tensor("encoder", 1, "feed_forward", "out"))
    hidden = t(shown.tensor("decoder", "hidden"))
    with torch.no_grad():
        np.testing.assert_allclose(shown.tensor("encoder", "memory"), model.encoder.norm(last), atol=1e-4)
        np.testing.assert_allclose(shown.log_probs, torch.log_softmax(model.generator.proj(hidden), -1), atol=1e-4)
    tokens, positions = shown.embedding("src")
    np.testing.assert_allclose(shown.tensor("encoder", 0, "self_attn", "x"), tokens + positions, atol=1e-5)


def test_an_ordinary_trace_keeps_no_intermediates(bundle):
    result = teacher_forced(bundle.model, bundle.tokenizer, TEXT, "awqcrejffgh")
    assert result.trace.tensors == {} and not result.trace.detail
    assert result.trace.attention["cross"]  # it still records the attention


def test_the_budget_counts_a_detailed_trace(bundle):
    plain = budget.decode_estimate(bundle.config, 12, 12)
    detailed = budget.decode_estimate(bundle.config, 12, 12, detail=True)
    kept = teacher_forced(bundle.model, bundle.tokenizer, TEXT, "awqcrejffgh", detail=True).trace.tensors
    numbers = sum(tensor.numel() for tensor in kept.values())
    assert detailed.parts["intermediate tensors"] == 4 * budget.detail_numbers(bundle.config, 12, 12)
    assert numbers <= budget.detail_numbers(bundle.config, 12, 12) <= 1.5 * numbers  # counted, not guessed
    assert "intermediate tensors" not in plain.parts


def test_every_section_shows_running_code():
    for section in SECTIONS:
        assert section.code, section.key
        for obj in section.code:
            text = textwrap.dedent(inspect.getsource(obj))
            assert f"{'class' if inspect.isclass(obj) else 'def'} {obj.__name__}(" in text, obj
