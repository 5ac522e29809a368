"""Sampling (transformer.network.sampling): the filters against a hand count, greedy as its limit, seeded draws, bad
settings refused, the CLI's --sample contract and the sampling / top-k charts."""

from __future__ import annotations

import json
import math
import string

import numpy as np
import pytest
import torch

from transformer.bundle import ModelBundle
from transformer.charts import sampling_bars, topk_bar
from transformer.cli import main
from transformer.network.config import ModelConfig
from transformer.network.decoding import DecodeError, greedy_decode
from transformer.network.model import EncoderDecoder
from transformer.network.sampling import SampleSettings, filter_logits, output_logits, sample, samples
from transformer.network.special_tokens import EOS
from transformer.network.tokenizers import CharTokenizer, TokenizerError
from transformer.store.checkpoints import save_bundle
from transformer.tasks import make_task

TOKENIZER = CharTokenizer(string.ascii_lowercase)
V = TOKENIZER.vocab_size
SOURCE = "sampling"


@pytest.fixture(scope="module")
def model() -> EncoderDecoder:
    """An untrained model: its distributions are wide, so samples differ from greedy and from each other."""
    torch.manual_seed(0)
    config = ModelConfig(src_vocab=V, tgt_vocab=V, n_enc_layers=1, n_dec_layers=2, d_model=32, n_heads=4,
                         d_ff=64, max_len=12)
    model = EncoderDecoder(config).eval()
    with torch.no_grad():
        model.generator.proj.weight.mul_(8)  # logits a few units apart: sharp enough for greedy ties to be rare
        model.generator.proj.bias[EOS] += 1.0
    return model


def settings(**kw) -> SampleSettings:
    return SampleSettings(**kw)


# ----------------------------------------------------------------------------------------------- filters


LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])


def test_distributions_are_softmax_of_the_logits_and_each_sums_to_one():
    dist = filter_logits(LOGITS, settings(temperature=0.5, top_k=4, top_p=0.8))
    x = LOGITS.numpy().astype(np.float64)
    np.testing.assert_allclose(dist["probs"], np.exp(x) / np.exp(x).sum(), rtol=1e-12)
    scaled = np.exp(x / 0.5)
    np.testing.assert_allclose(dist["tempered"], scaled / scaled.sum(), rtol=1e-12)
    for name in ("probs", "tempered", "filtered"):
        assert float(dist[name].sum()) == pytest.approx(1.0, abs=1e-12)
        assert dist[name].dtype == torch.float64 and (dist[name] >= 0).all()


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.6652, 0.7, 0.9, 0.99, 1.0])
def test_top_p_keeps_the_smallest_set_of_most_likely_tokens_with_mass_at_least_p(p):
    dist = filter_logits(LOGITS, settings(top_p=p))
    probs = dist["probs"].numpy()
    kept = np.flatnonzero(dist["filtered"].numpy() > 0)
    # LOGITS are sorted, so the kept set must be a prefix 0..n-1 with the smallest n whose mass reaches p
    n = next(n for n in range(1, len(probs) + 1) if probs[:n].sum() >= p or n == len(probs))
    assert kept.tolist() == list(range(n))
    assert probs[kept].sum() >= p - 1e-12 and (n == 1 or probs[: n - 1].sum() < p)
    np.testing.assert_allclose(dist["filtered"][kept], probs[kept] / probs[kept].sum(), rtol=1e-12)


def test_top_k_keeps_the_k_most_likely_then_top_p_works_on_what_is_left():
    for k in range(1, len(LOGITS) + 2):
        kept = (filter_logits(LOGITS, settings(top_k=k))["filtered"] > 0).nonzero().flatten().tolist()
        assert kept == list(range(min(k, len(LOGITS))))
    # top-k 3 renormalises the three best (0.574, 0.211, 0.128 of 0.913 -> 0.629, 0.231, 0.140): top-p 0.8 keeps 2
    both = filter_logits(LOGITS, settings(top_k=3, top_p=0.8))["filtered"]
    assert (both > 0).nonzero().flatten().tolist() == [0, 1]
    assert (filter_logits(LOGITS, settings(top_p=0.8))["filtered"] > 0).sum() == 3  # without top-k: 3


def test_temperature_sharpens_below_one_and_flattens_above():
    cold, hot = (filter_logits(LOGITS, settings(temperature=t))["tempered"] for t in (0.5, 2.0))
    probs = filter_logits(LOGITS, settings())["probs"]
    assert cold[0] > probs[0] > hot[0] and cold[-1] < probs[-1] < hot[-1]
    tiny = filter_logits(LOGITS, settings(temperature=1e-300))["tempered"]  # no overflow, no NaN
    assert tiny.tolist() == [1.0, 0, 0, 0, 0, 0]


BAD = [
    (dict(temperature=0), "temperature"), (dict(temperature=-1.0), "temperature"),
    (dict(temperature=math.nan), "temperature"), (dict(temperature=math.inf), "temperature"),
    (dict(temperature="1"), "temperature"), (dict(top_k=0), "top-k"), (dict(top_k=-3), "top-k"),
    (dict(top_k=2.5), "top-k"), (dict(top_k=True), "top-k"), (dict(top_p=0), "top-p"), (dict(top_p=1.01), "top-p"),
    (dict(top_p=math.nan), "top-p"), (dict(top_p=-0.5), "top-p"), (dict(seed=-1), "seed"), (dict(seed=2**63), "seed"),
]


@pytest.mark.parametrize("kw,name", BAD, ids=[repr(kw) for kw, _ in BAD])
def test_bad_settings_are_refused_with_a_message_naming_them(kw, name):
    with pytest.raises(DecodeError, match=f"^{name} must be"):
        SampleSettings(**kw)


# ----------------------------------------------------------------------------------------------- decoding


def test_temperature_near_zero_and_top_k_one_equal_greedy(model):
    greedy = greedy_decode(model, TOKENIZER, SOURCE)
    for chosen in (settings(temperature=1e-6, seed=3), settings(top_k=1, temperature=5.0, seed=4),
                   settings(top_p=1e-9, seed=5)):
        drawn = sample(model, TOKENIZER, SOURCE, chosen)
        assert drawn.output_ids == greedy.output_ids, chosen
        assert all(step.kept == 1 and step.prob == 1.0 for step in drawn.steps)
        for mine, theirs in zip(drawn.steps, greedy.steps):  # the same model distribution at every step
            np.testing.assert_allclose(mine.probs.log(), theirs.log_probs.double(), atol=1e-4)


def test_a_seed_reproduces_and_different_seeds_differ(model):
    chosen = settings(temperature=1.5, seed=7)
    first, again = sample(model, TOKENIZER, SOURCE, chosen), sample(model, TOKENIZER, SOURCE, chosen)
    assert first.output_ids == again.output_ids
    for a, b in zip(first.steps, again.steps):
        assert torch.equal(a.filtered, b.filtered) and torch.equal(a.logits, b.logits)
    many = samples(model, TOKENIZER, SOURCE, chosen, 6)
    assert many[0].output_ids == first.output_ids
    assert [d.settings.seed for d in many] == list(range(7, 13))
    assert len({tuple(d.output_ids) for d in many}) > 1
    assert many[3].output_ids == sample(model, TOKENIZER, SOURCE, settings(temperature=1.5, seed=10)).output_ids
    torch.manual_seed(123)  # the global RNG plays no part
    assert sample(model, TOKENIZER, SOURCE, chosen).output_ids == first.output_ids


def test_each_drawn_token_was_allowed_and_its_logits_are_the_models(model):
    drawn = sample(model, TOKENIZER, SOURCE, settings(temperature=1.2, top_k=5, top_p=0.9, seed=1))
    logits = output_logits(model, TOKENIZER, SOURCE, drawn.output_ids)
    assert len(drawn.steps) == len(drawn.output_ids) <= model.config.max_len
    for t, step in enumerate(drawn.steps):
        assert step.filtered[step.token] > 0 and 1 <= step.kept <= 5
        assert step.token == drawn.output_ids[t] and step.piece == TOKENIZER.piece(step.token)
        np.testing.assert_allclose(step.logits, logits[t], atol=1e-4)  # cached steps vs one causal pass
        for name in ("probs", "tempered", "filtered"):
            assert float(getattr(step, name).sum()) == pytest.approx(1.0, abs=1e-9)
    assert drawn.finished == (drawn.output_ids[-1] == EOS)


def test_output_logits_give_greedys_log_probs(model):
    greedy = greedy_decode(model, TOKENIZER, SOURCE)
    logits = output_logits(model, TOKENIZER, SOURCE, greedy.output_ids)
    np.testing.assert_allclose(torch.log_softmax(logits, -1), torch.stack([s.log_probs for s in greedy.steps]),
                               atol=1e-4)


def test_bad_input_and_counts_are_refused(model):
    with pytest.raises(TokenizerError):
        sample(model, TOKENIZER, "ABC", settings())
    with pytest.raises(DecodeError, match="empty"):
        sample(model, TOKENIZER, "", settings())
    with pytest.raises(DecodeError, match="number of samples"):
        samples(model, TOKENIZER, SOURCE, settings(), 0)
    with pytest.raises(DecodeError, match="max_len"):
        sample(model, TOKENIZER, SOURCE, settings(), max_len=0)


# ----------------------------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def checkpoint(model, tmp_path_factory) -> str:
    task = make_task("reverse", min_len=1, max_len=8)
    path = tmp_path_factory.mktemp("sampling") / "tiny.safetensors"
    save_bundle(ModelBundle(model, TOKENIZER, task, {"name": "tiny"}), path)
    return str(path)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["decode", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_sample_prints_the_seeded_output_and_json_with_the_distributions(model, checkpoint, capsys):
    flags = ["--checkpoint", checkpoint, "--input", SOURCE, "--sample", "--temperature", "1.5", "--top-k", "6",
             "--top-p", "0.95", "--seed", "11"]
    expected = sample(model, TOKENIZER, SOURCE, settings(temperature=1.5, top_k=6, top_p=0.95, seed=11))
    code, out, err = run(capsys, *flags)
    assert (code, out, err) == (0, expected.output_text + "\n", "")
    code, out, _ = run(capsys, *flags, "--json", "--topk", "3")
    data = json.loads(out)
    assert code == 0 and data["output_ids"] == expected.output_ids and data["finished"] == expected.finished
    assert data["sample"] == {"temperature": 1.5, "top_k": 6, "top_p": 0.95, "seed": 11}
    for step, mine in zip(data["steps"], expected.steps):
        assert step["token"] == mine.token and step["kept"] == mine.kept
        ids = [c["id"] for c in step["candidates"]]
        assert ids[:3] == mine.probs.topk(3).indices.tolist() and mine.token in ids and len(ids) <= 4
        for c in step["candidates"]:
            assert c["filtered"] == pytest.approx(float(mine.filtered[c["id"]]))
            assert c["logit"] == pytest.approx(float(mine.logits[c["id"]]))


def test_cli_greedy_limits_are_sampling_limits(checkpoint, capsys):
    greedy = run(capsys, "--checkpoint", checkpoint, "--input", SOURCE)[1]
    assert run(capsys, "--checkpoint", checkpoint, "--input", SOURCE, "--sample", "--top-k", "1")[1] == greedy


CLI_BAD = {
    "zero temperature": (["--sample", "--temperature", "0"], "temperature must be a finite number > 0"),
    "negative temperature": (["--sample", "--temperature", "-1"], "temperature must be"),
    "nan temperature": (["--sample", "--temperature", "nan"], "temperature must be"),
    "top-p above 1": (["--sample", "--top-p", "1.5"], "top-p must be a number in (0, 1]"),
    "top-p zero": (["--sample", "--top-p", "0"], "top-p must be"),
    "top-k zero": (["--sample", "--top-k", "0"], "top-k must be a whole number >= 1"),
    "negative seed": (["--sample", "--seed", "-2"], "seed must be"),
    "without --sample": (["--temperature", "2", "--top-p", "0.5"], "--temperature, --top-p apply only with --sample"),
    "with --beam": (["--sample", "--beam", "3"], "--sample and --beam exclude each other"),
    "not a number": (["--sample", "--top-k", "two"], "invalid int value"),
}


@pytest.mark.parametrize("case", CLI_BAD)
def test_cli_bad_sampling_values_exit_2_with_one_line(checkpoint, capsys, case):
    flags, message = CLI_BAD[case]
    try:
        code = main(["decode", "--checkpoint", checkpoint, "--input", SOURCE, *flags])
    except SystemExit as stop:  # argparse's own usage errors
        code = stop.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_cli_refuses_bad_settings_before_reading_the_checkpoint(tmp_path, capsys):
    code, out, err = run(capsys, "--checkpoint", str(tmp_path / "missing.safetensors"), "--input", "a",
                         "--sample", "--top-p", "2")
    assert code == 2 and "top-p must be" in err


# ----------------------------------------------------------------------------------------------- charts


def test_sampling_bars_show_the_given_values_and_mark_the_drawn_token():
    stages = {"model": [0.5, 0.3, 0.2], "tempered": [0.7, 0.2, 0.1], "filtered": [0.8, 0.2, 0]}
    fig = sampling_bars(["a", " ", "</s>"], stages, drawn=" ", title="step 2")
    assert [bar.name for bar in fig.data] == ["model", "after temperature", "after top-k / top-p"]
    for bar, values in zip(fig.data, stages.values()):
        np.testing.assert_array_equal(bar.x, values)
        assert list(bar.y) == ["a", "␣", "&lt;/s&gt;"] and list(bar.marker.line.width) == [0, 3, 0]
    assert [list(bar.text) for bar in fig.data] == [["50.0%", "30.0%", "20.0%"], ["70.0%", "20.0%", "10.0%"],
                                                    ["80.0%", "20.0%", "0"]]
    # hovering a bar reads its share as its label does (99.8%), not as a fraction (0.998)
    assert all(bar.hovertemplate.startswith("token %{y}<br>") and "%{x:.3~p}" in bar.hovertemplate for bar in fig.data)
    with pytest.raises(ValueError):
        sampling_bars(["a"], {"model": [0.5, 0.5]})


@pytest.mark.parametrize("scale,title", [("probability", "probability"), ("log-probability", "log-probability"),
                                         ("logit", "logit")])
def test_topk_bar_shows_values_on_each_scale_with_readable_labels(scale, title):
    values = {"probability": [0.9999, 4e-5, 0.0], "log-probability": [-1e-4, -10.1, -12.3],
              "logit": [9.5, -0.6, -2.8]}[scale]
    fig = topk_bar(["a", "b", "c"], values, chosen="a", scale=scale)
    np.testing.assert_allclose(fig.data[0].x, values, rtol=1e-6)
    assert fig.layout.xaxis.title.text.startswith(title)
    lo, hi = fig.layout.xaxis.range
    assert lo <= min(values) and hi >= max(values)
    assert len(set(fig.data[0].text)) == 3  # the runners-up never all read the same "0.0%"
    # probabilities read and hover as shares, as the axis and the sampling bars write them; the other scales as numbers
    if scale == "probability":
        assert list(fig.data[0].text) == ["100.0%", "0.004%", "0"]
        assert "%{x:.3~p}" in fig.data[0].hovertemplate
    else:
        assert "%{x:.4g}" in fig.data[0].hovertemplate and "%{x:.3~p}" not in fig.data[0].hovertemplate
    with pytest.raises(ValueError, match="scale"):
        topk_bar(["a"], [1.0], scale="odds")


@pytest.mark.parametrize("p,text", [(0.9996, "100.0%"), (0.5, "50.0%"), (0.001, "0.1%"), (0.00042, "0.042%"),
                                    (4.2e-6, "0.00042%"), (1e-6, "0.0001%"), (3.1e-7, "3.1e-05%"), (0.0, "0")])
def test_a_probability_reads_as_a_share_and_a_small_one_never_as_zero(p, text):
    from transformer.charts.common import probability_text

    assert probability_text(p) == text


def test_the_tokens_that_matter_are_those_with_a_share_in_some_stage_and_the_drawn_one():
    from transformer.charts import tokens_that_matter

    stages = {"model": np.array([0.9, 0.05, 0.001, 0.049]), "after temperature": np.array([0.6, 0.2, 0.003, 0.197])}
    assert tokens_that_matter(stages, drawn=0) == [0, 1, 3]  # by their largest share: 0.9, 0.2, 0.197
    assert tokens_that_matter(stages, drawn=2) == [0, 1, 3, 2]  # the drawn one is always there
    assert tokens_that_matter(stages, drawn=0, most=1) == [0]
    flat = {"model": np.full(200, 1 / 200)}  # nobody holds 1%: the likeliest one, then the drawn
    assert tokens_that_matter(flat, drawn=7) == [0, 7]
