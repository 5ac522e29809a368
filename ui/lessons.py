"""The experiments the pages suggest that name an example: one home for each example and the tokens it names, so
the page shows the very example that tests/app/test_lessons.py holds to what the shipped model does."""

from __future__ import annotations

from typing import NamedTuple


class ForceLesson(NamedTuple):
    """Force a token at `step` (1-based) of `example`: `recovers` is one the reverse model recovers from (its second
    choice there), `loses_place` the letter due one step later, which throws it off."""

    example: str
    step: int
    recovers: str
    loses_place: str


FORCE = ForceLesson("hgffjercqwa", 3, "x", "c")
