"""Error analysis and length generalisation (library and CLI): the counts against a recount made here one input at
a time with the traced greedy decoder, refused lengths, and `eval --lengths`."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from helpers.repo import REVERSE, ROOT, needs_reverse

from transformer.analysis import errors as error_analysis
from transformer.analysis import lengths as lengths_module
from transformer.analysis.errors import analyse_errors
from transformer.analysis.lengths import LengthError, check_fits, evaluate_lengths, parse_lengths
from transformer.charts.errors import confusion_bars, length_metrics, position_accuracy
from transformer.cli import main
from transformer.network.budget import BudgetError
from transformer.network.decoding import greedy_decode
from transformer.network.special_tokens import EOS
from transformer.network.tokenizers import CharTokenizer
from transformer.store.checkpoints import load_bundle
from transformer.tasks import Dates, Reverse, is_heldout
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer

pytestmark = needs_reverse


def recount(bundle, task, samples: int, seed: int) -> dict:
    """The error analysis counted here: one traced greedy decode per input, compared token by token."""
    model, tok = bundle.model.eval(), bundle.tokenizer
    by_length, positions, hits, firsts, confusions, failures = {}, Counter(), Counter(), Counter(), Counter(), []
    for source, target in task.pairs(samples, seed, "heldout"):
        answer = tok.encode(target) + [EOS]
        result = greedy_decode(model, tok, source)
        produced = result.output_ids + [None] * len(answer)  # a short output is wrong where it has no token
        wrong = [t for t, want in enumerate(answer) if produced[t] != want]
        for t, want in enumerate(answer):
            positions[t] += 1
            hits[t] += produced[t] == want
        tally = by_length.setdefault(len(source), [0, 0])
        tally[0] += 1
        tally[1] += not wrong
        if wrong:
            step = wrong[0]
            pair = (tok.piece(answer[step]), tok.piece(produced[step]))
            firsts[step] += 1
            confusions[pair] += 1
            failures.append((source, target, result.output_text + ("" if result.finished else "…"), step, *pair))
    return {"by_length": by_length, "positions": positions, "hits": hits, "firsts": firsts,
            "confusions": confusions, "failures": failures}


def test_error_analysis_counts_equal_a_recount_one_input_at_a_time(bundle):
    task = Reverse(min_len=13, max_len=17)  # 17 is past the trained 1..16: many failures, some right
    got = analyse_errors(bundle.model.eval(), bundle.tokenizer, task, 150, 4)
    want = recount(bundle, task, 150, 4)
    assert 10 < len(want["failures"]) < 140  # both kinds present, so the comparison means something
    assert [(f.source, f.expected, f.produced, f.step, f.expected_piece, f.produced_piece) for f in got.failures] \
        == want["failures"]
    assert dict(zip(got.lengths.tolist(), zip(got.length_counts.tolist(), got.length_exact.tolist()))) \
        == {n: tuple(v) for n, v in want["by_length"].items()}
    width = max(want["positions"]) + 1
    assert got.position_counts.tolist() == [want["positions"][t] for t in range(width)]
    assert got.position_hits.tolist() == [want["hits"][t] for t in range(width)]
    assert got.first_errors.tolist() == [want["firsts"][t] for t in range(width)]
    assert Counter({(a, b): n for a, b, n in got.confusions}) == want["confusions"]
    assert [n for *_, n in got.confusions] == sorted((n for *_, n in got.confusions), reverse=True)
    assert got.exact_match == 1 - len(want["failures"]) / 150


def test_error_analysis_refuses_a_bad_sample_count(bundle):
    with pytest.raises(ValueError, match="samples must be between 1 and"):
        analyse_errors(bundle.model, bundle.tokenizer, bundle.task, 0, 1)


def test_a_task_with_fewer_held_out_inputs_than_asked_counts_those_it_has():
    data = (ROOT / "assets" / "data" / "roman_numerals.tsv").read_text(encoding="utf-8")
    trainer = Trainer(TrainConfig(task="custom", task_params={"data": data}, steps=2))
    trainer.step()
    custom = trainer.bundle("roman")
    held = len(custom.task.heldout_pairs)
    got = analyse_errors(custom.model.eval(), custom.tokenizer, custom.task, 1000, 1)
    assert got.samples == held == int(got.length_counts.sum()) < 1000
    assert got.exact_match == 1 - len(got.failures) / held


def test_error_analysis_over_the_memory_budget_is_refused_before_decoding(bundle, monkeypatch):
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", "1")
    monkeypatch.setattr(error_analysis, "greedy_batch", lambda *a, **k: pytest.fail("decoded before refusing"))
    with pytest.raises(BudgetError, match="limit is 1"):
        analyse_errors(bundle.model, bundle.tokenizer, bundle.task, 1000, 1)


def test_by_length_metrics_equal_a_recount_with_the_traced_decoder(bundle):
    report = evaluate_lengths(bundle, 15, 17, 30, 9)
    assert report["trained"] == [1, 16] and report["samples_per_length"] == 30
    assert [r["length"] for r in report["lengths"]] == [15, 16, 17]
    assert [r["trained"] for r in report["lengths"]] == [True, True, False]
    model, tok = bundle.model.eval(), bundle.tokenizer
    for row in report["lengths"]:
        pairs = Reverse(min_len=row["length"], max_len=row["length"]).pairs(30, 9, "heldout")
        assert all(len(s) == row["length"] and is_heldout(s) for s, _ in pairs)
        exact = hits = tokens = 0
        for source, target in pairs:
            exact += greedy_decode(model, tok, source).output_text == target
            answer = tok.encode(target) + [EOS]  # teacher forcing: the model's own argmax after each right prefix
            forced = greedy_decode(model, tok, source, max_len=len(answer), force=dict(enumerate(answer)))
            hits += sum(step.topk[0].id == want for step, want in zip(forced.steps, answer))
            tokens += len(answer)
        assert row["exact_match"] == exact / 30
        assert row["token_accuracy"] == pytest.approx(hits / tokens)
    assert report["lengths"][-1]["exact_match"] < report["lengths"][0]["exact_match"]


@pytest.mark.parametrize("lo, hi, message", [
    (16, 18, r"inputs of length 18 need 19 positions .* this model has 18 \(its max_len\): it reads at most 17 tokens"),
    (0, 3, "the reverse task cannot make inputs of length 0: min_len must be a whole number from 1 to 48"),
    (49, 49, "cannot make inputs of length 49: min_len must be a whole number from 1 to 48"),
    (9, 3, "the length range 9-3 is empty"),
    (1, 80, "80 lengths asked for; at most 64"),
])
def test_lengths_that_cannot_be_represented_are_refused_before_any_work(bundle, monkeypatch, lo, hi, message):
    monkeypatch.setattr(lengths_module, "evaluate_pairs", lambda *a, **k: pytest.fail("evaluated before refusing"))
    with pytest.raises(LengthError, match=message):
        evaluate_lengths(bundle, lo, hi, 20, 1)


def test_a_tokenizer_that_cannot_write_the_inputs_and_a_task_without_lengths_are_refused():
    with pytest.raises(LengthError, match="the model's tokenizer cannot write inputs of length 3: .*'x'"):
        check_fits(CharTokenizer("abc"), 64, [("abx", "xba")], 3)
    assert check_fits(CharTokenizer("abc"), 4, [("abc", "cba")], 3) == (4, 4)
    with pytest.raises(LengthError, match="this model has 3 .*: it reads at most 2 tokens"):
        check_fits(CharTokenizer("abc"), 3, [("abc", "cba")], 3)
    with pytest.raises(LengthError, match="the dates task has no input-length parameter"):
        lengths_module.trained_lengths(Dates())


@pytest.mark.parametrize("text, expected", [("8-24", (8, 24)), ("20", (20, 20)), (" 3 - 5 ", (3, 5))])
def test_parse_lengths(text, expected):
    assert parse_lengths(text) == expected


def test_charts_take_the_counts_and_mark_the_trained_lengths():
    fig = length_metrics([1, 2, 3], {"exact_match": [1, 0.5, 0]}, (1, 2), "t", counts=[4, 4, 4])
    band = fig.layout.shapes[0]
    assert (band.x0, band.x1) == (0.5, 2.5) and "trained lengths 1–2" in fig.layout.annotations[0].text
    assert list(fig.data[0].y) == [1, 0.5, 0]
    with pytest.raises(ValueError, match="2 values for 3 lengths"):
        length_metrics([1, 2, 3], {"exact_match": [1, 0.5]}, None, "t")
    fig = position_accuracy([4, 2, 0], [3, 1, 0], [1, 1, 0], "t")
    assert np.allclose(fig.data[0].y, [0.75, 0.5, 0]) and list(fig.data[1].y) == [1, 1, 0]
    fig = confusion_bars([("w", "o", 3), (" ", "</s>", 1)], "t")
    assert list(fig.data[0].y) == ["w → o", "␣ → &lt;/s&gt;"] and list(fig.data[0].x) == [3, 1]


# --------------------------------------------------------------------------------------------------- CLI


def test_cli_eval_lengths_prints_one_json_object(capsys):
    assert main(["eval", "--checkpoint", str(REVERSE), "--lengths", "16-17", "--samples", "20", "--seed", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["task"] == "reverse" and out["trained"] == [1, 16] and out["samples_per_length"] == 20
    assert [(r["length"], r["trained"], r["samples"]) for r in out["lengths"]] == [(16, True, 20), (17, False, 20)]
    assert out["lengths"] == evaluate_lengths(load_bundle(REVERSE), 16, 17, 20, 2)["lengths"]


@pytest.mark.parametrize("lengths, message", [
    ("12-30", "inputs of length 18 need 19 positions"),
    ("a-b", "lengths must look like A-B or A"),
    ("5-2", "the length range 5-2 is empty"),
])
def test_cli_eval_lengths_bad_input_exits_2_with_one_line(capsys, lengths, message):
    assert main(["eval", "--checkpoint", str(REVERSE), "--lengths", lengths]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and message in captured.err and captured.err.count("\n") == 1


def test_cli_eval_lengths_on_a_task_without_lengths(capsys):
    dates = REVERSE.parent / "dates.safetensors"
    if not dates.is_file():
        pytest.skip("the shipped dates model is missing")
    assert main(["eval", "--checkpoint", str(dates), "--lengths", "3-5"]) == 2
    assert capsys.readouterr().err == ("error: the dates task has no input-length parameter; evaluation by length "
                                       "covers reverse, copy, sort\n")
