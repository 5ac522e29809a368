"""The Trainer: a task, its tokenizer, a model and its optimisers, advanced one `step()` at a time.

`transformer.runs` runs a Trainer in a thread, a worker process or a Ray actor. A step trains through the fast
forward (`fast_forward.packed_logits`: the real tokens only); evaluation decodes with the network as it is.
"""

from __future__ import annotations

import copy
import functools
import math
import time
from datetime import datetime, timezone

import torch
from torch import nn

from transformer.analysis.evaluation import evaluate_pairs
from transformer.bundle import ModelBundle
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import PAD
from transformer.tasks import make_task

from .config import TrainConfig, card_settings, model_config
from .devices import resolve_device
from .fast_forward import packed_logits
from .optimizers import make_optimizers, warmup_decay

EVAL_SEED = 20_240_601  # the fixed held-out set a Trainer scores itself on


class Trainer:
    """A task, its tokenizer, a model and an optimiser, advanced one `step()` at a time."""

    def __init__(self, train: TrainConfig, model: dict | None = None, max_len: int | None = None):
        """`max_len`: the model's positions when more than the task needs (to evaluate it on longer inputs
        later); None: what the task needs."""
        self.config = train.validate()
        self.task = make_task(train.task, **train.task_params)
        self.tokenizer = self.task.make_tokenizer(train.seed)
        config = model_config(self.task, self.tokenizer, model, max_len)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(train.seed)
            self.model = EncoderDecoder(config)
            self._rng_state = torch.get_rng_state()  # dropout draws from it, kept apart from other users
        # Built on the CPU above (the same weights on every device), then moved. On CUDA, dropout draws from
        # the CUDA generator rather than _rng_state: runs with dropout repeat exactly on the CPU only.
        self.device = resolve_device(train.device)
        self.model.to(self.device)
        self.batches = torch.Generator().manual_seed(train.seed)
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=train.label_smoothing)
        self.step_count = 0
        self.elapsed = 0.0  # seconds spent training and evaluating (`step`, `evaluate`)
        self.history: list[dict] = []
        self.last_loss = float("nan")
        self.last_accuracy = float("nan")  # the latest batch's token accuracy (training data, teacher-forced)
        self._heldout: list[tuple[str, str]] = []

    @functools.cached_property
    def _optimizing(self) -> tuple[list[torch.optim.Optimizer], list[torch.optim.lr_scheduler.LambdaLR]]:
        """The optimisers and their schedules, made at first use (a step, `state`, `restore`): torch's first
        optimiser in a process imports torch._dynamo (~2 s of CPU, ~70 MB), which a server showing an untrained
        model (the Train page's preview, a run's bundle before its first weights) never needs."""
        optimizers = make_optimizers(self.model, self.config)
        schedule = warmup_decay(self.config.warmup, self.config.steps, self.config.schedule)
        return optimizers, [torch.optim.lr_scheduler.LambdaLR(o, schedule) for o in optimizers]

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        return self._optimizing[0]

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Adam / AdamW: every parameter, or with muon the non-matrices."""
        return self.optimizers[0]

    @property
    def schedulers(self) -> list[torch.optim.lr_scheduler.LambdaLR]:
        return self._optimizing[1]

    def step(self) -> float:
        """One optimisation step on a fresh batch; returns its loss. FloatingPointError if it diverged.

        The first step makes the optimisers before its clock starts: in a fresh process that imports torch._dynamo
        (1-2.5 s, once per process), which `elapsed` (a card's seconds, --max-seconds) would otherwise count in a
        CLI run and not in a Train page run, whose worker imported it before Start."""
        optimizers, schedulers = self._optimizing
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
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip)
        for optimizer, scheduler in zip(optimizers, schedulers):
            optimizer.step()
            scheduler.step()
        self.step_count += 1
        self.last_loss = float(loss.detach())
        self.last_accuracy = float((logits.detach().argmax(-1) == targets).float().mean())
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
        self.history.append({"step": self.step_count, "seconds": self.elapsed, "train_loss": self.last_loss,
                             "train_token_accuracy": self.last_accuracy, **metrics})
        return metrics

    def evaluate_for_target(self, target: float | None) -> bool:
        """The periodic check: a cheap evaluation on eval_samples (teacher-forced exact match); if that
        reaches `target`, a confirmation by greedy decoding on confirm_samples. True when the
        confirmation reached `target` too (training can stop)."""
        metrics = self.evaluate(greedy=False)
        if target is None or metrics["exact_match"] < target:
            return False
        return self.confirm(target, max(self.config.confirm_samples, metrics["samples"]))

    def confirm(self, target: float | None, samples: int | None = None) -> bool:
        """A confirmation: greedy decoding on `samples` held-out pairs (default confirm_samples), a row of
        `history`. True when it reaches `target`."""
        metrics = self.evaluate(samples or self.config.confirm_samples)
        return target is not None and metrics["exact_match"] >= target

    def state(self) -> dict:
        """Everything that decides the steps to come, for `restore` in another process: weights, every optimiser's
        state (Adam's moments, Muon's momentum), the schedules, the batch generator, the dropout RNG, the step
        count, the time spent and the history. Tensors on the CPU; `torch.save` / `torch.load(weights_only=True)`
        carry it."""
        return {
            "model": {name: t.detach().cpu() for name, t in self.model.state_dict().items()},
            "optimizers": [o.state_dict() for o in self.optimizers],
            "schedulers": [s.state_dict() for s in self.schedulers],
            "batches": self.batches.get_state(), "dropout": self._rng_state,
            "step_count": self.step_count, "elapsed": self.elapsed, "history": [dict(row) for row in self.history],
            "last_loss": self.last_loss,
        }

    def restore(self, state: dict) -> None:
        """Continue from `state()` of a Trainer built from the same settings: its next step is the one that
        Trainer would have taken, bit for bit on the CPU."""
        self.model.load_state_dict(state["model"])
        for optimizer, saved in zip(self.optimizers, state["optimizers"], strict=True):
            optimizer.load_state_dict(saved)
        for scheduler, saved in zip(self.schedulers, state["schedulers"], strict=True):
            scheduler.load_state_dict(saved)
        self.batches.set_state(state["batches"])
        self._rng_state = state["dropout"]
        self.step_count, self.elapsed, self.last_loss = state["step_count"], state["elapsed"], state["last_loss"]
        self.history = [dict(row) for row in state["history"]]

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
