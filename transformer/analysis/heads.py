"""Per-head statistics of attention weights, in plain numpy: how spread out a head is, how peaked, and how
well it follows a task's expected alignment ("which head learned to reverse").

Every function takes weights shaped (..., queries, keys) and returns one number per leading index, e.g.
(layers, heads) for a whole stack of one example; best_aligned_head picks the (layer, head) that best follows
an expected alignment.
"""

from __future__ import annotations

import numpy as np


def _prepare(weights, mask) -> tuple[np.ndarray, np.ndarray]:
    """Weights with blocked keys zeroed, and which query rows have any allowed key at all."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim < 2:
        raise ValueError(f"weights must be (..., queries, keys), got shape {w.shape}")
    if mask is None:
        return w, np.ones(w.shape[:-1], dtype=bool)
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), w.shape)
    return np.where(allowed, w, 0.0), allowed.any(axis=-1)


def _mean_rows(per_row: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean over the query axis of the rows marked in `rows`; NaN where no row counts."""
    count = rows.sum(axis=-1)
    total = np.where(rows, per_row, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan)


def entropy_bits(weights, mask=None) -> np.ndarray:
    """Mean over query rows of the entropy -sum p log2 p (bits) of each row's distribution over its allowed
    keys. 0 = every query looks at one key; log2(n keys) = uniform. Rows with no allowed key are skipped."""
    w, rows = _prepare(weights, mask)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, -w * np.log2(w), 0.0)
    return _mean_rows(terms.sum(axis=-1), rows)


def max_weight(weights, mask=None) -> np.ndarray:
    """Mean over query rows of each row's largest weight (1 = every query puts all its weight on one key)."""
    w, rows = _prepare(weights, mask)
    return _mean_rows(w.max(axis=-1), rows)


def alignment_score(weights, expected: list[int | None]) -> np.ndarray:
    """Mean weight each query puts on the key it should attend to: expected[q] is that key's position, or
    None where undefined (rows past len(expected) are undefined too). 1 = perfect alignment."""
    w = np.asarray(weights, dtype=np.float64)
    n_queries, n_keys = w.shape[-2:]
    if len(expected) > n_queries:
        raise ValueError(f"{len(expected)} expected positions for {n_queries} queries")
    pairs = [(q, k) for q, k in enumerate(expected) if k is not None]
    if any(not 0 <= k < n_keys for _, k in pairs):
        raise ValueError(f"expected key positions must lie in 0..{n_keys - 1}")
    if not pairs:
        return np.full(w.shape[:-2], np.nan)
    queries, keys = np.array(pairs).T
    return w[..., queries, keys].mean(axis=-1)


def head_stats(weights, mask=None, expected: list[int | None] | None = None) -> dict[str, np.ndarray]:
    """All statistics for weights (layers, heads, queries, keys): {"entropy_bits", "max_weight"} and, when an
    expected alignment is given, "alignment"; each (layers, heads)."""
    stats = {"entropy_bits": entropy_bits(weights, mask), "max_weight": max_weight(weights, mask)}
    if expected is not None:
        stats["alignment"] = alignment_score(weights, expected)
    return stats


def best_aligned_head(weights, expected: list[int | None] | None) -> tuple[int, int] | None:
    """(layer, head) whose attention (layers, heads, Q, K) best follows `expected` (per query, the key it
    should attend to); None when there is no expected alignment to judge by."""
    if not expected or all(k is None for k in expected):
        return None
    w = np.asarray(weights)
    usable = [k if k is not None and k < w.shape[-1] else None for k in expected[: w.shape[-2]]]
    scores = np.nan_to_num(alignment_score(w, usable), nan=-1.0)
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head)


def focus_head(cross, task, text: str) -> tuple[int, int | None]:
    """(layer, head) of a decode's cross-attention (layers, heads, Q, K) worth showing first: the head that
    best follows `task`'s alignment for `text`, else the last layer with head None (its head average)."""
    alignment = task.alignment(text) if task.answer(text) is not None else None
    return best_aligned_head(cross, alignment) or (np.shape(cross)[0] - 1, None)
