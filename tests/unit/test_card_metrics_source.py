"""The model card's wording of where its accuracies come from (transformer.store.cards.metrics_source)."""

from __future__ import annotations

from transformer.store.cards import HELD_OUT_SOURCE, clean_card, metrics_source


def test_metrics_source_names_the_runs_own_held_out_split_with_what_the_card_knows():
    card, _ = clean_card({"exact_match": 0.997, "samples": 1000, "decoding": "teacher_forced", "evaluated_step": 2400})
    assert metrics_source(card) == f"{HELD_OUT_SOURCE} (1,000 inputs, teacher-forced, at step 2,400)"
    assert metrics_source({"exact_match": 0.5}) == HELD_OUT_SOURCE


def test_metrics_source_ignores_fields_the_card_cleaning_dropped():
    card, notes = clean_card({"exact_match": 0.9, "samples": "many", "evaluated_step": -3})
    assert len(notes) == 2 and metrics_source(card) == HELD_OUT_SOURCE
