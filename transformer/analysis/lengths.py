"""Length generalisation: held-out metrics by input length, also beyond the lengths a model was trained on.

The letter tasks (reverse, copy, sort) take their input length as parameters (`min_len`..`max_len`): the
trained range is the checkpoint's task parameters, and inputs of exactly length L come from the same task
with min_len = max_len = L (held-out split only). Every length is checked before any work: a task without a
length parameter, a length the task cannot make, text the tokenizer cannot write, or more positions than the
model has (`ModelConfig.max_len`: the source is the tokens and </s>, the decoder reads <s> and the tokens)
is a `LengthError` (a ValueError) saying why.
"""

from __future__ import annotations

import re
from typing import Callable

from transformer.i18n import t
from transformer.network.budget import evaluation_estimate
from .evaluation import MAX_EVAL_SAMPLES, evaluate_pairs
from transformer.tasks import LetterTask, Task, TaskError
from transformer.network.tokenizers import Tokenizer

MAX_LENGTHS = 64  # lengths one evaluation may cover
LENGTH_TASKS = ("reverse", "copy", "sort")  # the tasks whose input length is a parameter


class LengthError(ValueError):
    """A length range that cannot be evaluated for this model and task; the message says why."""


def trained_lengths(task: Task) -> tuple[int, int]:
    """(shortest, longest) input length the task was trained on; LengthError for a task without a length."""
    if not isinstance(task, LetterTask):
        raise LengthError(t("messages.no_lengths", task=task.name, tasks=", ".join(LENGTH_TASKS)))
    return task.min_len, task.max_len


def parse_lengths(text: str) -> tuple[int, int]:
    """"8-24" -> (8, 24), "20" -> (20, 20); LengthError for anything else or an empty range."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*(?:-\s*(\d{1,6})\s*)?", text)
    if not match:
        raise LengthError(f"lengths must look like A-B or A (whole numbers, e.g. 8-24), got {text[:40]!r}")
    lo, hi = int(match[1]), int(match[2] or match[1])
    if lo > hi:
        raise LengthError(f"the length range {lo}-{hi} is empty: the first length must not exceed the last")
    return lo, hi


def length_task(task: Task, length: int) -> Task:
    """The task making inputs of exactly `length` (same task, min_len = max_len = length)."""
    trained_lengths(task)
    try:
        return type(task)(min_len=length, max_len=length)
    except TaskError as exc:
        raise LengthError(f"the {task.name} task cannot make inputs of length {length}: {exc}") from None


def check_fits(tokenizer: Tokenizer, max_len: int, pairs: list[tuple[str, str]], length: int) -> tuple[int, int]:
    """(source tokens with </s>, decoder tokens with <s>) of the longest pair; LengthError when the tokenizer
    cannot write a pair or the model's `max_len` positions cannot hold it."""
    try:
        source = max(len(tokenizer.encode(s)) for s, _ in pairs) + 1
        target = max(len(tokenizer.encode(t)) for _, t in pairs) + 1
    except ValueError as exc:  # TokenizerError
        raise LengthError(f"the model's tokenizer cannot write inputs of length {length}: {exc}") from None
    if max(source, target) > max_len:
        raise LengthError(f"inputs of length {length} need {max(source, target)} positions (the input's tokens and "
                          f"</s>, or <s> and the answer's), but this model has {max_len} (its max_len): it reads at "
                          f"most {max_len - 1} tokens")
    return source, target


def evaluate_lengths(bundle, lo: int, hi: int, samples: int, seed: int,
                     progress: Callable[[int, int], None] | None = None) -> dict:
    """Greedy exact match and teacher-forced token accuracy (`evaluation.evaluate_pairs`) on `samples` held-out
    inputs of each length lo..hi, with the trained range; every length is checked (and the memory budgeted)
    before any is evaluated. `progress(done, total)` counts lengths."""
    trained = trained_lengths(bundle.task)
    if lo > hi:
        raise LengthError(f"the length range {lo}-{hi} is empty")
    if hi - lo + 1 > MAX_LENGTHS:
        raise LengthError(f"{hi - lo + 1} lengths asked for; at most {MAX_LENGTHS} at once")
    if not 1 <= samples <= MAX_EVAL_SAMPLES:
        raise LengthError(f"samples per length must be between 1 and {MAX_EVAL_SAMPLES:,}, got {samples:,}")
    sets, longest = {}, (1, 1)
    for length in range(lo, hi + 1):
        sets[length] = length_task(bundle.task, length).pairs(samples, seed, "heldout")
        fits = check_fits(bundle.tokenizer, bundle.config.max_len, sets[length], length)
        longest = (max(longest[0], fits[0]), max(longest[1], fits[1]))
    evaluation_estimate(bundle.config, samples, *longest).check()
    rows = []
    for done, (length, pairs) in enumerate(sets.items(), 1):
        metrics = evaluate_pairs(bundle.model, bundle.tokenizer, pairs)
        rows.append({"length": length, "trained": trained[0] <= length <= trained[1],
                     **{k: metrics[k] for k in ("exact_match", "token_accuracy", "loss", "samples")}})
        if progress is not None:
            progress(done, len(sets))
    return {"task": bundle.task.name, "trained": list(trained), "seed": seed, "samples_per_length": samples,
            "lengths": rows}
