"""Small UI pieces shared by the home, masks and positional-encoding pages."""

from __future__ import annotations

import streamlit as st

from transformer.charts.common import COLORBAR_PX
from transformer.decoding import DecodeResult, greedy_decode
from transformer.headstats import best_aligned_head

from . import display
from . import model_registry as registry

HALF_WIDTH = 470  # a figure in one of two columns of the wide layout at a 1400-pixel window


def fit(fig, width: int):
    """Shrink a matrix figure wider than `width` pixels, keeping its cells square (labels keep their size)."""
    full, height, margin = fig.layout.width, fig.layout.height, fig.layout.margin
    if full and height and full > width:
        scale = (width - margin.l - COLORBAR_PX) / (full - margin.l - COLORBAR_PX)
        cells = height - margin.t - margin.b
        fig.update_layout(width=width, height=int(margin.t + margin.b + cells * scale))
    return fig


def heatmap(fig, matrix, rows: list[str], cols: list[str], filename: str, key: str, width: int | None = None) -> None:
    """A heatmap at its own size (square cells, or fitted into `width`), its toolbar export and a CSV."""
    if width:
        fit(fig, width)
    display.show_figure(fig, filename, key=f"fig-{key}", width="content")
    display.csv_download(matrix, rows, cols, filename, key=f"csv-{key}")


def varied_lengths(examples: list[str], n: int = 3) -> list[str]:
    """Up to `n` examples of clearly different lengths: the shortest, the longest, and ones between."""
    ordered = sorted(dict.fromkeys(examples), key=len)
    if len(ordered) <= n:
        return ordered
    short, long_ = len(ordered[0]), len(ordered[-1])
    picked = [ordered[0], ordered[-1]]
    for i in range(1, n - 1):
        goal = short + (long_ - short) * i / (n - 1)
        picked.insert(-1, min((e for e in ordered if e not in picked), key=lambda e: abs(len(e) - goal)))
    return picked


@st.cache_resource(max_entries=32, show_spinner="Decoding…")
def decode(key: str, version: int, text: str, positions: bool = True) -> DecodeResult:
    """The traced greedy decode of `text` by model `key` at `registry.version` `version` (`positions=False`:
    with positions switched off)."""
    bundle = registry.bundle_for(key)
    return greedy_decode(bundle.model, bundle.tokenizer, text, positions=positions)


def focus_head(result: DecodeResult, task, text: str) -> tuple[int, int | None]:
    """(layer, head) of the cross-attention worth showing first: the head that best follows the task's
    alignment for `text`, else the last layer with head None (its head average)."""
    alignment = task.alignment(text) if task.answer(text) is not None else None
    return best_aligned_head(result.cross.numpy(), alignment) or (result.cross.shape[0] - 1, None)


def output(text: str) -> str:
    """A model's output for markdown: in code style, or a note when it is empty."""
    return f"`{text}`" if text else "*(nothing: it ended with `</s>` at once)*"


def active_model():
    """(entry key, bundle) of the active model; says so and stops the page when there is none."""
    key = registry.active_key()
    if key is None:
        st.warning("No model is available yet: the pretrained checkpoints are missing. Train one on the "
                   "Train live page, then come back.")
        st.stop()
    return key, registry.bundle_for(key)
