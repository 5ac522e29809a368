"""Training: a Trainer that runs one optimisation step at a time (TrainConfig says how to train).

transformer.job runs a Trainer in a background thread. Nothing here imports streamlit.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Callable

import torch
from torch import nn

from .attention import PROJECTIONS, joint_projections
from .bundle import ModelBundle
from .config import ModelConfig, check_bounds
from .devices import resolve_device
from .evaluation import evaluate_pairs
from .model import EncoderDecoder
from .packing import packed_logits
from .special_tokens import PAD
from .tasks import make_task

__all__ = ["MODEL_DEFAULTS", "TrainConfig", "Trainer"]

# The model shape that reaches 99% held-out exact match on `reverse` fastest (benchmarks/train_reverse.py).
MODEL_DEFAULTS: dict[str, Any] = {
    "n_enc_layers": 1, "n_dec_layers": 1, "d_model": 64, "n_heads": 4, "d_ff": 128, "dropout": 0.0,
}
DERIVED_MODEL_KEYS = ("src_vocab", "tgt_vocab", "max_len")  # come from the task and tokenizer
OPTIMIZERS = ("adam", "adamw", "muon")  # muon: torch.optim.Muon for the hidden matrices, Adam for the rest
SCHEDULES = ("linear", "cosine")  # how the learning rate falls after the warm-up (to FINAL_LR_FRACTION of lr)
ADAM = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
EVAL_SEED = 20_240_601  # the fixed held-out set a Trainer scores itself on
FINAL_LR_FRACTION = 0.02  # the learning rate ends at this fraction of `lr` (and stays there past `steps`)

# Inclusive bounds: anything outside is an input mistake, not a training choice.
TRAIN_BOUNDS: dict[str, tuple[float, float]] = {
    "steps": (1, 1_000_000),
    "batch_size": (1, 4096),
    "lr": (1e-7, 1.0),
    "warmup": (0, 100_000),
    "weight_decay": (0.0, 1.0),
    "label_smoothing": (0.0, 0.5),
    "clip": (0.0, 1000.0),
    "muon_lr": (1e-7, 1.0),
    "beta1": (0.0, 0.999),
    "beta2": (0.0, 0.9999),
    "seed": (0, 2**31 - 1),
    "eval_every": (1, 100_000),
    "eval_samples": (1, 10_000),
    "confirm_samples": (1, 10_000),
}


@dataclass
class TrainConfig:
    """How to train: plain JSON-able values. Defaults are tuned for `reverse` (benchmarks/train_reverse.py).

    clip = 0 turns gradient clipping off. The learning rate rises linearly over `warmup` steps, then
    falls to 2% of `lr` at `steps`, along a line or (schedule "cosine") half a cosine. Adam's moment decay
    rates are `beta1` and `beta2`. optimizer "muon": torch.optim.Muon (as BatchedMuon; peak rate `muon_lr`, same
    schedule) for the 2-D weight matrices inside the encoder and decoder layers, Adam (`lr`) for the
    embeddings, the generator, biases and norms. Evaluation runs every `eval_every` steps on `eval_samples`
    held-out pairs; a result at or above a target is confirmed on `confirm_samples` pairs before training stops.
    device: "auto" (CUDA when available, else the CPU), "cpu" or "cuda" (transformer.devices); settings saved
    before it existed load as "auto".
    """

    task: str = "reverse"
    task_params: dict = field(default_factory=dict)
    steps: int = 600
    batch_size: int = 64
    lr: float = 7e-3
    warmup: int = 100
    schedule: str = "linear"
    optimizer: str = "adam"
    beta1: float = 0.9
    beta2: float = 0.98
    muon_lr: float = 0.02
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    clip: float = 1.0
    seed: int = 0
    eval_every: int = 25
    eval_samples: int = 200
    confirm_samples: int = 1000
    device: str = "auto"

    def validate(self) -> "TrainConfig":
        """Raise ValueError naming the first absurd value; return self when all is well."""
        check_bounds(self, TRAIN_BOUNDS)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not isinstance(self.task_params, dict):
            raise ValueError(f"task_params must be a dict, got {self.task_params!r}")
        make_task(self.task, **self.task_params)  # TaskError (a ValueError) names a bad task or parameter
        resolve_device(self.device)  # ValueError for an unknown name, or "cuda" without CUDA
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown training settings: {', '.join(unknown)}")
        return cls(**data).validate()


def card_settings(train: TrainConfig, task) -> dict:
    """`train` as a model card records it: the task's card parameters (a custom task's data stays out)."""
    return train.to_dict() | {"task_params": task.card_params()}


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
    """torch.optim.Muon (default learning-rate adjustment) with the Newton-Schulz iterations of all
    same-shaped matrices run as one batched matmul: bit for bit the same update, cheaper for many small
    matrices on a CPU (the 22 of a 2+1-layer d_model 64 model: 11.4 ms of CPU time a step down to 4.2 ms).
    A param group's "blocks" (default 1) splits each of its parameters by rows into that many matrices,
    orthogonalised one by one (the joint q/k/v projection: as three separate projections)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["adjust_lr_fn"] not in (None, "original"):
                raise ValueError(f"BatchedMuon has the original lr adjustment only, not {group['adjust_lr_fn']!r}")
            by_shape: dict[torch.Size, list[tuple[torch.Tensor, torch.Tensor]]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.lerp_(p.grad, 1 - group["momentum"])
                update = p.grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                blocks = group.get("blocks", 1)  # a joint q/k/v projection: each block a matrix of its own
                for block, block_update in zip(p.chunk(blocks), update.chunk(blocks)):
                    by_shape.setdefault(block.shape, []).append((block, block_update))
            for shape, items in by_shape.items():
                updates = newton_schulz(torch.stack([u for _, u in items]), group["ns_coefficients"],
                                        group["ns_steps"], group["eps"])
                lr = group["lr"]
                adjusted = lr * math.sqrt(max(1.0, shape[0] / shape[1]))
                for (p, _), update in zip(items, updates):
                    p.mul_(1 - lr * group["weight_decay"])
                    p.add_(update, alpha=-adjusted)
        return loss


def newton_schulz(grads: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
                  ) -> torch.Tensor:
    """torch.optim.Muon's orthogonalisation (bfloat16, quintic iteration) of a (n, rows, cols) stack at once."""
    a, b, c = coefficients
    tall = grads.size(1) > grads.size(2)
    x = grads.bfloat16()
    if tall:
        x = x.mT
    x = x / x.flatten(1).norm(dim=1).clamp(min=eps)[:, None, None]
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.mT if tall else x


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
        optimizers.append(BatchedMuon(groups, lr=train.muon_lr, weight_decay=train.weight_decay))
    return optimizers


class Trainer:
    """A task, its tokenizer, a model and an optimiser, advanced one `step()` at a time."""

    def __init__(self, train: TrainConfig, model: dict | None = None, max_len: int | None = None):
        """`max_len`: the model's positions when more than the task needs (to evaluate it on longer inputs
        later); None: what the task needs."""
        self.config = train.validate()
        overrides = dict(model or {})
        derived = sorted(set(overrides) & set(DERIVED_MODEL_KEYS))
        if derived:
            raise ValueError(f"{', '.join(derived)} come from the task and tokenizer; do not set them")
        self.task = make_task(train.task, **train.task_params)
        self.tokenizer = self.task.make_tokenizer(train.seed)
        vocab = self.tokenizer.vocab_size
        needed = max(self.task.max_source_chars, self.task.max_target_chars) + 2  # + <s>/</s>
        if max_len is not None and max_len < needed:
            raise ValueError(f"max_len {max_len} is too short: this task needs {needed} positions")
        model_config = ModelConfig(src_vocab=vocab, tgt_vocab=vocab, max_len=max_len or needed,
                                   **{**MODEL_DEFAULTS, **overrides})
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(train.seed)
            self.model = EncoderDecoder(model_config)
            self._rng_state = torch.get_rng_state()  # dropout draws from it, kept apart from other users
        # Built on the CPU above (the same weights on every device), then moved. On CUDA, dropout draws from
        # the CUDA generator rather than _rng_state: runs with dropout repeat exactly on the CPU only.
        self.device = resolve_device(train.device)
        self.model.to(self.device)
        self.batches = torch.Generator().manual_seed(train.seed)
        self.optimizers = make_optimizers(self.model, train)
        self.optimizer = self.optimizers[0]  # Adam / AdamW: every parameter, or with muon the non-matrices
        schedule = warmup_decay(train.warmup, train.steps, train.schedule)
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(o, schedule) for o in self.optimizers]
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=train.label_smoothing)
        self.step_count = 0
        self.elapsed = 0.0  # seconds spent in step() and evaluate()
        self.history: list[dict] = []
        self.last_loss = float("nan")
        self._heldout: list[tuple[str, str]] = []

    def step(self) -> float:
        """One optimisation step on a fresh batch; returns its loss. FloatingPointError if it diverged."""
        start = time.perf_counter()
        if not self.model.training:  # train() walks every module: ~0.5 ms, so only when needed
            self.model.train()
        src, tgt = self.task.batch(self.config.batch_size, self.batches, self.tokenizer)
        src, tgt = src.to(self.device), tgt.to(self.device)  # no copy on the CPU
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self._rng_state)
            logits, targets = packed_logits(self.model, src, tgt)  # CrossEntropyLoss applies the log-softmax
            self._rng_state = torch.get_rng_state()
        loss = self.loss_fn(logits, targets)
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip)
        for optimizer, scheduler in zip(self.optimizers, self.schedulers):
            optimizer.step()
            scheduler.step()
        self.step_count += 1
        self.last_loss = float(loss.detach())
        self.elapsed += time.perf_counter() - start
        if not math.isfinite(self.last_loss):
            raise FloatingPointError(
                f"the loss became {self.last_loss} at step {self.step_count}; lower the learning rate"
            )
        return self.last_loss

    def heldout(self, samples: int) -> list[tuple[str, str]]:
        """The first `samples` pairs of this trainer's fixed held-out set. Built once, big enough for the
        confirmation too (building 1,000 reverse pairs takes ~0.5 s)."""
        if samples > len(self._heldout):
            size = max(samples, self.config.confirm_samples)
            self._heldout = self.task.pairs(size, seed=EVAL_SEED, split="heldout")
        return self._heldout[:samples]

    def evaluate(self, samples: int | None = None, greedy: bool = True) -> dict:
        """Metrics on `samples` (default eval_samples) held-out pairs; appends a row to `history`.
        greedy=False: exact match from the teacher-forced pass (equal, cheaper; see evaluate_pairs)."""
        start = time.perf_counter()
        pairs = self.heldout(samples or self.config.eval_samples)
        metrics = evaluate_pairs(self.model, self.tokenizer, pairs, greedy=greedy)
        self.elapsed += time.perf_counter() - start
        self.history.append({"step": self.step_count, "seconds": self.elapsed, "train_loss": self.last_loss, **metrics})
        return metrics

    def evaluate_for_target(self, target: float | None) -> bool:
        """The periodic check: a cheap evaluation on eval_samples (teacher-forced exact match); if that
        reaches `target`, a confirmation by greedy decoding on confirm_samples. True when the
        confirmation reached `target` too (training can stop)."""
        metrics = self.evaluate(greedy=False)
        if target is None or metrics["exact_match"] < target:
            return False
        return self.evaluate(max(self.config.confirm_samples, metrics["samples"]))["exact_match"] >= target

    def bundle(self, name: str | None = None) -> ModelBundle:
        """A ModelBundle holding a deep copy of the current model (eval mode, on the CPU) and its model card."""
        model = copy.deepcopy(self.model).to("cpu").eval()
        latest = self.history[-1] if self.history else {}
        card = {
            "name": name or f"{self.task.name}-{self.step_count}",
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "task": self.task.name,
            "task_params": self.task.card_params(),
            "steps": self.step_count,
            "seconds": round(self.elapsed, 3),
            **{k: latest[k] for k in ("exact_match", "token_accuracy", "loss", "samples", "decoding") if k in latest},
            "evaluated_step": latest.get("step"),  # the metrics above were measured at this step
            "train": card_settings(self.config, self.task),
            "parameters": model.num_parameters(),
        }
        return ModelBundle(model, self.tokenizer, self.task, card)
