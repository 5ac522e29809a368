"""transformer.analysis.examples: the worked examples behind an evaluation."""

from __future__ import annotations

from helpers.repo import REVERSE, needs_reverse

from transformer.analysis.examples import decode_examples
from transformer.network.decoding import greedy_decode
from transformer.store.checkpoints import load_bundle


@needs_reverse
def test_decode_examples_agree_with_step_by_step_decoding():
    bundle = load_bundle(REVERSE)
    pairs = bundle.task.pairs(12, 5, "heldout") + [("ab", "notreversed")]
    examples = decode_examples(bundle, pairs)
    assert [(e.source, e.expected) for e in examples] == pairs
    for e in examples:
        assert e.output == greedy_decode(bundle.model, bundle.tokenizer, e.source).output_text
        assert e.correct == (e.output == e.expected)
    assert not examples[-1].correct and decode_examples(bundle, []) == []
