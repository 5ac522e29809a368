"""The model card's wording of where its accuracies come from (transformer.store.cards.metrics_source)."""

from __future__ import annotations

from transformer.i18n import using
from transformer.store.cards import clean_card, held_out_source, metrics_source


def test_metrics_source_names_the_runs_own_held_out_split_with_what_the_card_knows():
    card, _ = clean_card({"exact_match": 0.997, "samples": 1000, "decoding": "teacher_forced", "evaluated_step": 2400})
    assert metrics_source(card) == f"{held_out_source()} (1,000 inputs, teacher-forced, at step 2,400)"
    assert metrics_source({"exact_match": 0.5}) == held_out_source() == "the training run's own held-out split"
    with using("zh"):
        assert metrics_source(card) == "训练时自己留出的测试集（1,000 个输入，教师强制，第 2,400 步）"


def test_metrics_source_ignores_fields_the_card_cleaning_dropped():
    card, notes = clean_card({"exact_match": 0.9, "samples": "many", "evaluated_step": -3})
    assert len(notes) == 2 and metrics_source(card) == held_out_source()
