"""The optimisers and the learning-rate schedule a run trains with: Adam / AdamW for every parameter, or Muon
for the hidden matrices with Adam for the rest; a warm-up, then a linear or cosine fall.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from transformer.network.attention import PROJECTIONS, joint_projections
from transformer.network.model import EncoderDecoder

from .config import TrainConfig

ADAM = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
FINAL_LR_FRACTION = 0.02  # the learning rate ends at this fraction of `lr` (and stays there past `steps`)


def warmup_decay(warmup: int, steps: int, schedule: str = "linear", floor: float = FINAL_LR_FRACTION
                 ) -> Callable[[int], float]:
    """LR factor: a linear rise to 1 over `warmup` steps, then a fall to `floor` at `steps` (and `floor` after),
    along a line or (`schedule` "cosine") half a cosine, which keeps the rate high longer and lands softer.

    Decaying to the end of the run settles the last errors: on reverse 10-19 the same recipe with
    1/sqrt(step) decay needed ~1300-1600 steps to 99% exact match, with linear decay 550-600."""
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        done = min(1.0, (step - warmup) / max(1, steps - warmup))
        fall = done if schedule == "linear" else 0.5 * (1.0 - math.cos(math.pi * done))
        return floor + (1.0 - floor) * (1.0 - fall)

    return factor


def muon_parameters(model: EncoderDecoder) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(the 2-D weight matrices of the encoder and decoder layers, every other parameter): Muon orthogonalises
    hidden matrices only; embeddings, the generator, biases and norms stay with Adam."""
    hidden = {id(p) for stack in (model.encoder, model.decoder) for p in stack.layers.parameters() if p.dim() == 2}
    params = list(model.parameters())
    return [p for p in params if id(p) in hidden], [p for p in params if id(p) not in hidden]


class BatchedMuon(torch.optim.Muon):
    """torch.optim.Muon (default learning-rate adjustment) with the Newton-Schulz iterations of all matrices of one
    shape (a tall one transposed, as torch's is, so it joins the wide ones; from every group) run as one batched
    matmul, cheaper for many small matrices on a CPU (the 22 of a 2+1-layer d_model 64 model: 11.4 ms of CPU time
    a step down to 4.2 ms; tall with wide, 6.2 -> 5.6 ms on an AVX2 EPYC; one stack across groups and foreach
    element-wise work, 6.6 -> 6.1 ms there), in `ns_dtype`: float32, where torch.optim.Muon uses bfloat16 (in
    bfloat16 the update is torch's bit for bit; tests/unit/test_optimizers.py).
    A param group's "blocks" (default 1) splits each of its parameters by rows into that many matrices,
    orthogonalised one by one (the joint q/k/v projection: as three separate projections)."""

    # A CPU without native bfloat16 (AVX2 laptops: most learners') runs a bfloat16 matmul 15-20x slower than a
    # float32 one; one with it (AVX512-BF16) runs the whole step no faster in bfloat16 at these sizes
    # (docs/MEASUREMENTS.md, "Muon"). So float32 everywhere: one path, full speed on every CPU.
    ns_dtype: torch.dtype = torch.float32

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # Every matrix of one shape joins one stack, whatever its group (tall ones transposed into the wide shape):
        # one batched iteration each. The element-wise work runs as foreach calls: per group, then per step size.
        stacks: dict[tuple, list[tuple[torch.Tensor, torch.Tensor, bool, dict]]] = {}
        for group in self.param_groups:
            if group["adjust_lr_fn"] not in (None, "original"):
                raise ValueError(f"BatchedMuon has the original lr adjustment only, not {group['adjust_lr_fn']!r}")
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            buffers = [self._momentum_buffer(p) for p in params]
            torch._foreach_lerp_(buffers, grads, 1 - group["momentum"])
            updates = torch._foreach_lerp(grads, buffers, group["momentum"]) if group["nesterov"] else buffers
            blocks = group.get("blocks", 1)  # a joint q/k/v projection: each block a matrix of its own
            iteration = (group["ns_coefficients"], group["ns_steps"], group["eps"])
            for p, update in zip(params, updates):
                for block, block_update in zip(p.chunk(blocks), update.chunk(blocks)):
                    tall = block.size(0) > block.size(1)
                    wide = block_update.mT if tall else block_update
                    stacks.setdefault((wide.shape, iteration), []).append((block, wide, tall, group))
        # (alpha, decay): the blocks that move by them, and their updates
        moves: dict[tuple[float, float], tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for (_, iteration), items in stacks.items():
            orthogonal = newton_schulz(torch.stack([wide for _, wide, _, _ in items]), *iteration, self.ns_dtype)
            for (block, _, tall, group), update in zip(items, orthogonal):
                lr = group["lr"]
                move = (-lr * math.sqrt(max(1.0, block.size(0) / block.size(1))), 1 - lr * group["weight_decay"])
                blocks, block_updates = moves.setdefault(move, ([], []))
                blocks.append(block)
                block_updates.append(update.mT if tall else update)
        for (alpha, decay), (blocks, block_updates) in moves.items():
            if decay != 1:  # torch.optim.Muon multiplies by it even when it is 1 (no weight decay): no change
                torch._foreach_mul_(blocks, decay)
            torch._foreach_add_(blocks, block_updates, alpha=alpha)
        return loss

    def _momentum_buffer(self, p: torch.Tensor) -> torch.Tensor:
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p)
        return state["momentum_buffer"]


def newton_schulz(grads: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """torch.optim.Muon's orthogonalisation (the quintic iteration) of a (n, rows, cols) stack of wide matrices
    (rows <= cols; torch's transposes a tall one first) at once, in `dtype` (torch's is bfloat16); the result in
    `dtype`."""
    a, b, c = coefficients
    x = grads.to(dtype)
    x = x / x.flatten(1).norm(dim=1).clamp(min=eps)[:, None, None]
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x


def make_optimizers(model: EncoderDecoder, train: TrainConfig) -> list[torch.optim.Optimizer]:
    """The optimizers `train.optimizer` names: one Adam / AdamW, or Muon for the hidden matrices plus Adam."""
    adam = ADAM.get(train.optimizer, torch.optim.Adam)
    matrices, rest = muon_parameters(model) if train.optimizer == "muon" else ([], list(model.parameters()))
    optimizers = [adam(
        rest, lr=train.lr, betas=(train.beta1, train.beta2), eps=1e-9, weight_decay=train.weight_decay,
        fused=True,  # one kernel for all parameters: the per-tensor loop cost ~2 ms of a ~20 ms step
    )]
    if matrices:
        joint = {id(p) for p in joint_projections(model)}
        groups = [{"params": [p for p in matrices if id(p) not in joint]},
                  {"params": [p for p in matrices if id(p) in joint], "blocks": len(PROJECTIONS)}]
        optimizers.append(BatchedMuon(groups, lr=train.muon_lr, momentum=train.muon_momentum,
                                      weight_decay=train.weight_decay))
    return optimizers
