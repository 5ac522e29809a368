"""Toy tasks: seeded generators of (source, target) pairs, with held-out inputs kept out of training.

A source belongs to the held-out split when a stable hash of its text falls in a fixed bucket, so the
split is the same in every run, for every seed, in training and in evaluation.

Submodules:
  base      TaskError, the stable hash and held-out split, encode_pairs, shared helpers, the abstract Task
  letters   LetterTask and its tasks Reverse, Copy, Sort
  addition  Addition
  dates     the date formats (DateFormat, DATE_FORMATS) and Dates
  numbers   English and German number words and Numbers
  zh_numbers  British English number words, Chinese numerals and ZhNumbers
  custom    your own (source, target) pairs: parse_pairs (the checks) and CustomTask (not in TASKS: it needs data)
This package holds the registry (TASKS, make_task) and re-exports the public names of the submodules.
"""

from __future__ import annotations

from .addition import Addition
from .base import HASH_BASE, HASH_MOD, HELDOUT_BUCKETS, Task, TaskError, encode_pairs, is_heldout, stable_hash
from .custom import CustomTask, parse_pairs
from .dates import DATE_FORMATS, MONTHS, WEEKDAYS, DateFormat, Dates
from .letters import Copy, LetterTask, Reverse, Sort
from .numbers import (
    DE_SMALL, DE_TENS, EN_SMALL, EN_TENS, MAX_NUMBER, Numbers, english_number, german_morphemes, german_number,
)
from .zh_numbers import ZH_MAX, ZhNumbers, british_number, chinese_number

__all__ = [
    "DATE_FORMATS", "DE_SMALL", "DE_TENS", "EN_SMALL", "EN_TENS", "HASH_BASE", "HASH_MOD", "HELDOUT_BUCKETS",
    "MAX_NUMBER", "MONTHS", "TASKS", "WEEKDAYS", "ZH_MAX", "Addition", "Copy", "CustomTask", "DateFormat", "Dates",
    "LetterTask", "Numbers", "Reverse", "Sort", "Task", "TaskError", "ZhNumbers", "british_number", "chinese_number",
    "encode_pairs", "english_number", "german_morphemes", "german_number", "is_heldout", "make_task", "parse_pairs",
    "stable_hash",
]

TASKS: dict[str, type[Task]] = {t.name: t for t in (Reverse, Copy, Sort, Addition, Dates, Numbers, ZhNumbers)}


def make_task(name: str, **params) -> Task:
    """The task called `name` with `params` ("custom": a CustomTask); TaskError for an unknown name or bad
    parameters."""
    if name == CustomTask.name:
        return CustomTask(**params)
    if name not in TASKS:
        raise TaskError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    try:
        return TASKS[name](**params)
    except TypeError as exc:
        raise TaskError(f"bad parameters for {name}: {exc}") from None
