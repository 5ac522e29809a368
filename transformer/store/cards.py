"""Model cards are validated like configs: every field has a type and bounds.

A card comes from an untrusted checkpoint. `clean_card` keeps every field that is what it should be and
drops the others, each with a note that names the field and what it should have been (never the value it
held: a note is safe to show anywhere). A card therefore never stops a checkpoint from loading or listing,
and the code that shows a card can format `exact_match` as a percentage without guarding.

Known fields (written by `training.Trainer.bundle` and `checkpoints.bundle_metadata`):

    name            text, 1-100 characters, no control or bidirectional-override characters
    created         ISO 8601 date-time text (at most 40 characters)
    task            text, 1-64 characters
    task_params     object of at most 32 plain values (number, short text, true/false, null)
    steps           whole number 0 .. 10^9
    evaluated_step  whole number 0 .. 10^9, or null
    seconds         number 0 .. 10^9
    exact_match     number 0 .. 1
    token_accuracy  number 0 .. 1
    loss            number 0 .. 10^6
    samples         whole number 0 .. 10^7
    decoding        "greedy" or "teacher_forced"
    train           object: the training settings, every bounded setting within its TRAIN_BOUNDS
    parameters      whole number 0 .. 10^10

Any other field is kept when its name is short plain text and its value a plain value (a finite number,
text of at most 1,000 characters, true/false, null); at most 64 fields in all.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

from transformer.i18n import t
from transformer.training.config import TRAIN_BOUNDS

MAX_FIELDS = 64
DECODINGS = {"greedy": "cards.greedy", "teacher_forced": "cards.teacher_forced"}  # how a card's scores were decoded
MAX_TEXT = 1000
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


def _whole(lo: int, hi: int, nullable: bool = False):
    def ok(v):
        return (nullable and v is None) or (type(v) is int and lo <= v <= hi)
    return ok, f"a whole number in {lo:,}..{hi:,}" + (" or null" if nullable else "")


def _number(lo: float, hi: float):
    def ok(v):
        return type(v) in (int, float) and math.isfinite(v) and lo <= v <= hi
    return ok, f"a number in {lo:g}..{hi:g}"


def _text(lo: int, hi: int):
    def ok(v):
        return isinstance(v, str) and lo <= len(v) <= hi and not _UNSAFE.search(v)
    return ok, f"text of {lo}-{hi} characters without control characters"


def _plain(v) -> bool:
    if v is None or type(v) is bool:
        return True
    if type(v) in (int, float):
        return math.isfinite(v) and abs(v) < 1e300
    return isinstance(v, str) and len(v) <= MAX_TEXT


def _created(v) -> bool:
    if not (isinstance(v, str) and 1 <= len(v) <= 40):
        return False
    try:
        datetime.fromisoformat(v)
    except ValueError:
        return False
    return True


def _task_params(v) -> bool:
    return isinstance(v, dict) and len(v) <= 32 and all(
        isinstance(k, str) and len(k) <= 64 and _plain(x) and not (isinstance(x, str) and len(x) > 200)
        for k, x in v.items())


def _train(v) -> bool:
    if not isinstance(v, dict) or len(v) > 64:
        return False
    for key, value in v.items():
        if not isinstance(key, str) or len(key) > 64:
            return False
        if key == "task_params":
            if not _task_params(value):
                return False
        elif key in TRAIN_BOUNDS:
            lo, hi = TRAIN_BOUNDS[key]
            if type(value) not in (int, float) or not math.isfinite(value) or not lo <= value <= hi:
                return False
        elif not _plain(value) or isinstance(value, str) and len(value) > 200:
            return False
    return True


def _examples(v) -> bool:
    text_ok = _text(1, 200)[0]
    return isinstance(v, list) and 1 <= len(v) <= 8 and all(text_ok(x) for x in v)


FIELDS = {
    "name": _text(1, 100),
    "created": (_created, "an ISO 8601 date-time"),
    "task": _text(1, 64),
    "task_params": (_task_params, "an object of at most 32 plain values"),
    "steps": _whole(0, 10**9),
    "evaluated_step": _whole(0, 10**9, nullable=True),
    "seconds": _number(0, 1e9),
    "exact_match": _number(0, 1),
    "token_accuracy": _number(0, 1),
    "loss": _number(0, 1e6),
    "samples": _whole(0, 10**7),
    "decoding": (lambda v: v in DECODINGS, '"greedy" or "teacher_forced"'),
    "train": (_train, "an object of training settings within their bounds"),
    "parameters": _whole(0, 10**10),
    # inputs chosen for this model (e.g. where beam search beats greedy), shown before the task's own
    "examples": (_examples, "a list of 1-8 texts of 1-200 characters without control characters"),
    "under_trained": (lambda v: type(v) is bool, "true or false"),
}


def clean_card(card) -> tuple[dict, list[str]]:
    """(the card without its invalid fields, one note per dropped field). Never raises for any JSON value."""
    if not isinstance(card, dict):
        return {}, ["the model card was not an object and was dropped"]
    clean, notes, dropped_names = {}, [], 0
    for key, value in card.items():
        if len(clean) >= MAX_FIELDS:
            notes.append(f"the model card has more than {MAX_FIELDS} fields; the rest were dropped")
            break
        if key in FIELDS:
            ok, wanted = FIELDS[key]
            try:
                good = bool(ok(value))
            except (TypeError, ValueError, RecursionError):
                good = False
            if good:
                clean[key] = value
            else:
                notes.append(f"card field {key!r} was dropped: it must be {wanted}")
        elif not (isinstance(key, str) and _PLAIN_KEY.fullmatch(key)):
            dropped_names += 1
        elif _plain(value):
            clean[key] = value
        else:
            notes.append(f"card field {key!r} was dropped: extra fields must be a number, short text, "
                         f"true/false or null")
    if dropped_names:
        notes.append(f"{dropped_names} card field(s) with unusual names were dropped")
    return clean, notes



def held_out_source() -> str:
    """Where a card's accuracies were measured, in a few words."""
    return t("cards.held_out_source")


def metrics_source(card: dict) -> str:
    """Where a (cleaned) card's accuracies were measured, in words: the held-out inputs the training run itself
    evaluated on (Trainer.bundle copies its last evaluation), with how many, the decoding and the step when the
    card says. Not fresh `eval` inputs (another seed), which score slightly differently."""
    details = [t("cards.inputs", n=card["samples"]) if card.get("samples") else None,
               t(DECODINGS[card["decoding"]]) if card.get("decoding") in DECODINGS else None,
               t("cards.at_step", step=card["evaluated_step"]) if card.get("evaluated_step") is not None else None]
    details = [d for d in details if d]
    return held_out_source() + (t("cards.details", details=t("app.list_comma").join(details)) if details else "")
