"""What a head knockout names, without torch (a server's first page reads it): the head (`Head`, written
`cross:L1H2`) and how it is knocked out (`MODES`: zeroed, or replaced by its mean output). ablation.py does it."""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("encoder_self", "decoder_self", "cross")
MODES = ("zero", "mean")
HEAD_PATTERN = re.compile(r"(\w+):L(\d+)H(\d+)")


@dataclass(frozen=True, order=True)
class Head:
    """One attention head: its kind, 0-based layer and 0-based head."""

    kind: str
    layer: int
    head: int

    @classmethod
    def parse(cls, text: str) -> Head:
        """`cross:L1H2` (1-based layer and head, as the pages show them)."""
        match = HEAD_PATTERN.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a head: write KIND:L<layer>H<head>, e.g. cross:L1H2")
        kind, layer, head = match[1], int(match[2]), int(match[3])
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r} in {text!r}: one of {', '.join(KINDS)}")
        if layer < 1 or head < 1:
            raise ValueError(f"layers and heads count from 1, got {text!r}")
        return cls(kind, layer - 1, head - 1)

    def __str__(self) -> str:
        return f"{self.kind}:L{self.layer + 1}H{self.head + 1}"
