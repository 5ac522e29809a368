"""Every chart builder in Chinese (issue 26): built while the language is Chinese, a figure's title, axis and
colour-bar titles, annotations, legend and hover texts hold no English outside tokens and formulas; in English
(the command line's, a notebook's) the same builders still write English."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from helpers.chinese import english_words, figure_texts, prose

from transformer import charts
from transformer.charts import ablation, compare, errors, positions_inside, sampling
from transformer.i18n import using

RNG = np.random.default_rng(0)
W = RNG.random((3, 3)).astype(np.float32)
LABELS = charts.token_labels(["a", "b", "c"])
HEAD_ROWS = [{"kind": "cross", "layer": 0, "head": 0, "drop": 0.5, "exact_match": 0.4}]
FIGURES = {  # every builder, with its own title left to it where it has one
    "attention": lambda: charts.attention_heatmap(W, LABELS, LABELS, charts.attention_title("cross", 0, 1),
                                                  mask=np.tril(np.ones((3, 3), bool)), clickable=True,
                                                  written=["a", "b", "c"]),
    "grid": lambda: charts.head_grid(RNG.random((2, 2, 3, 3)), LABELS, LABELS, "encoder_self", written=list("abc")),
    "step": lambda: charts.step_attention_rows(RNG.random((2, 2, 3)), LABELS, charts.attention_title("cross", step=2)),
    "scores": lambda: charts.scores_heatmap(W, np.tril(np.ones((3, 3), bool)), LABELS, LABELS, "t"),
    "mask": lambda: charts.mask_heatmap(np.tril(np.ones((3, 3), bool)), LABELS, LABELS, "t"),
    "batch": lambda: charts.padded_batch_heatmap(np.array([[5, 2, 0]]), [["a", "</s>", "<pad>"]], "t"),
    "architecture": lambda: charts.architecture_diagram(2, 2, 4, 64, 128, "post", "rope"),
    "matrix": lambda: charts.positional_matrix(W), "curves": lambda: charts.positional_curves(W, [0, 1]),
    "similarity": lambda: charts.position_similarity(W),
    "sum": lambda: charts.embedding_sum(W, W, LABELS),
    "topk": lambda: charts.topk_bar(["a", "b"], [0.6, 0.4], "a", scale="log-probability"),
    "stats": lambda: charts.head_stats_heatmap({"entropy_bits": W[:2], "max_weight": W[:2], "alignment": W[:2]},
                                               charts.KIND_TITLES["cross"]),
    "training": lambda: charts.training_curves([{"step": 1, "loss": 1.0, "token_accuracy": 0.5, "exact_match": 0.2}]),
    "sampling": lambda: sampling.sampling_bars(["a", "b"], {"model": [0.6, 0.4], "tempered": [0.7, 0.3],
                                                            "filtered": [1.0, 0.0]}),
    "importance": lambda: ablation.importance_heatmap({"cross": W[:2]}, "t"),
    "removal": lambda: ablation.removal_curve([{"removed": 0, "exact_match": 1.0, "head": None},
                                               {"removed": 1, "exact_match": 0.5, "head": "cross:L1H1"}], "t"),
    "difference": lambda: compare.difference_heatmap(W, W.T, LABELS, LABELS, "t", mask=np.tril(np.ones((3, 3), bool))),
    "pair": lambda: compare.pair_heatmaps([(W, LABELS, LABELS, None), None], ["A", "B"], "t"),
    "scores_bars": lambda: compare.score_bars(["A", "B"], [0.5, None], "t"),
    "rope": lambda: positions_inside.rope_pairs(W[:2, :2], W[:2, :2], W[:2, :2], W[:2, :2], W[0, :2], 2, 0),
    "offset": lambda: positions_inside.rope_offset_check([0, 1], [0.5, 0.5], 2, 0),
    "alibi": lambda: positions_inside.alibi_bias_grid(-RNG.random((2, 3, 3)), [0.5, 0.25], LABELS),
    "lengths": lambda: errors.length_metrics([1, 2], {"exact_match": [1, 0.5], "token_accuracy": [1, 0.8]}, (1, 1),
                                             "t", counts=[3, 3]),
    "schemes": lambda: errors.scheme_lengths([1, 2], {"rope": {"exact_match": [1, 0.5],
                                                               "token_accuracy": [1, 0.8]}}, (1, 1), "t"),
    "positions": lambda: errors.position_accuracy([4, 2], [3, 1], [1, 1], "t"),
    "confusions": lambda: errors.confusion_bars([("w", "o", 3)], "t"),
}


def words_of(build) -> list[str]:
    spec = json.loads(build().to_json())  # as the browser gets it
    return [word for text in figure_texts(spec) for word in english_words(prose(text))]


@pytest.mark.parametrize("name", FIGURES)
def test_a_chart_built_in_chinese_has_no_english(name):
    with using("zh"):
        assert words_of(FIGURES[name]) == []


@pytest.mark.parametrize("name", FIGURES)
def test_no_line_of_a_chinese_chart_strands_one_character(name):
    """A label the chart breaks over lines (<br>) never leaves one Chinese character alone on a line (the diagram's
    stacks read "×2 / 编码器 / 层"). Its notes only: a hover's or a legend's line may be a one-character word (键)."""
    with using("zh"):
        spec = json.loads(FIGURES[name]().to_json())
    notes = [note.get("text") or "" for note in spec["layout"].get("annotations", [])]
    lines = [line.strip() for text in notes for line in re.split(r"<br\s*/?>", text)]
    assert not [line for line in lines if len(line) == 1 and "\u4e00" <= line <= "\u9fff"]


def test_the_same_charts_write_english_by_default():  # and the check above finds it
    assert {"query", "key", "weight"} <= set(words_of(FIGURES["attention"]))
    assert "weight" in json.loads(FIGURES["attention"]().to_json())["data"][0]["hovertemplate"]
    assert charts.attention_title("cross", 0, 1) == "Cross-attention · layer 1 · head 2"
