"""The layouts of one side (sources or targets) of a training batch in the fast forward (fast_forward.py).

Padding is masked wherever it could reach a scored output, so the rows of a padded position are wasted work in
every position-wise layer (embeddings' sum, projections, feed-forward, norms, generator). `Packing` names the real
rows of a (batch, length) grid: the position-wise layers run on those alone, and attention gathers each head's
rows onto the grid and its output rows back, one gather each way. `Grid` is the same interface for a side that
runs padded (whole grid), where the gathers would cost more than the rows they save.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch


class _Gather(torch.autograd.Function):
    """x.index_select(0, index), with a backward cheaper than index_select's own (an index_add into zeros).

    With `inverse` (x's rows' places in the output), the gradient is gathered back: for an `index` that repeats
    rows only at places whose gradient is zero. Without, it is scattered into zeros: for an `index` without
    repeats, the rows it leaves out getting zero gradient."""

    @staticmethod
    def forward(ctx, x, index, inverse):
        ctx.save_for_backward(index, inverse)
        ctx.rows = x.size(0)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        index, inverse = ctx.saved_tensors
        if inverse is not None:
            return grad.index_select(0, inverse), None, None
        return grad.new_zeros(ctx.rows, *grad.shape[1:]).index_copy_(0, index, grad), None, None


@dataclass(frozen=True)
class Packing:
    """The real positions of a (batch, length) grid, as flat indices batch * length + position."""

    index: torch.Tensor
    batch: int
    length: int
    _head_indices: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, real: torch.Tensor) -> "Packing":
        """From a (batch, length) bool grid, True where the row is kept."""
        return cls(real.flatten().nonzero().squeeze(1), *real.shape)

    @functools.cached_property
    def positions(self) -> torch.Tensor:
        """(rows,) each row's position in its sequence."""
        return self.index % self.length

    def place(self, table: torch.Tensor) -> torch.Tensor:
        """A (1, length, d) positional table -> (rows, d): each row's own position's."""
        return table[0].index_select(0, self.positions)

    def pack(self, grid: torch.Tensor) -> torch.Tensor:
        """(batch, length, ...) -> (rows, ...): the real rows, in order (ids, targets or hidden states)."""
        return grid.flatten(0, 1).index_select(0, self.index)

    def heads(self, rows: torch.Tensor, heads: int, d_head: int) -> tuple[torch.Tensor, ...]:
        """(rows, parts * heads * d_head) projections -> `parts` tensors (batch, heads, length, d_head), each head's
        rows at their positions, in one gather. A padding position holds a copy of another row, so attention must
        mask it as a key and drop it as a query (its gradient must be zero)."""
        parts = rows.size(-1) // (heads * d_head)
        source, place = self._indices(parts, heads)
        grid = _Gather.apply(rows.reshape(-1, d_head), source, place).view(parts, self.batch, heads, self.length, -1)
        return grid.unbind(0) if parts > 1 else (grid.squeeze(0),)  # squeeze: no stack in backward

    def rows(self, heads: torch.Tensor) -> torch.Tensor:
        """(batch, heads, length, d_head) attention output -> (rows, heads * d_head): the real rows, in one gather."""
        n_heads, d_head = heads.size(1), heads.size(-1)
        _, place = self._indices(1, n_heads)
        return _Gather.apply(heads.reshape(-1, d_head), place, None).view(-1, n_heads * d_head)

    @functools.cached_property
    def _row_of(self) -> torch.Tensor:
        """(batch * length,) each grid position's packed row (padding: row 0)."""
        rows = torch.arange(self.index.numel(), device=self.index.device)
        grid = torch.zeros(self.batch * self.length, dtype=torch.long, device=rows.device)
        return grid.index_copy_(0, self.index, rows)

    def _indices(self, parts: int, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The gather between (rows, parts, heads) and (parts, batch, heads, length) rows of d_head, both ways:
        (the grid's source row for each place, padding taking row 0; each packed row's place in the grid)."""
        key = (parts, heads)
        if key not in self._head_indices:
            device, batch, length = self.index.device, self.batch, self.length
            part_head = torch.arange(parts * heads, device=device).view(parts, 1, heads, 1)  # p * heads + h
            source = self._row_of.view(1, batch, 1, length) * (parts * heads) + part_head
            # place of (p, b, h, l): p * batch * heads * length + h * length + (b * heads * length + l)
            offsets = torch.tensor([(p * batch * heads + h) * length for p in range(parts) for h in range(heads)],
                                   device=device)
            place = (self.index + self.index // length * ((heads - 1) * length))[:, None] + offsets
            self._head_indices[key] = (source.flatten(), place.flatten())
        return self._head_indices[key]


@dataclass(frozen=True)
class Grid:
    """A side that runs padded: its rows are the whole (batch, length) grid, Packing's interface as no-ops."""

    batch: int
    length: int

    def pack(self, grid: torch.Tensor) -> torch.Tensor:
        return grid

    def place(self, table: torch.Tensor) -> torch.Tensor:
        return table

    def heads(self, rows: torch.Tensor, heads: int, d_head: int) -> tuple[torch.Tensor, ...]:
        """(batch, length, parts * heads * d_head) -> `parts` contiguous tensors (batch, heads, length, d_head)."""
        parts = rows.size(-1) // (heads * d_head)
        grid = rows.view(self.batch, self.length, parts, heads, d_head).permute(2, 0, 3, 1, 4).contiguous()
        return grid.unbind(0)

    def rows(self, heads: torch.Tensor) -> torch.Tensor:
        """(batch, heads, length, d_head) -> (batch, length, heads * d_head)."""
        return heads.transpose(1, 2).reshape(self.batch, self.length, -1)
