"""TrainConfig.optimizer: adam, adamw and muon (Muon for the hidden matrices, Adam for the rest) are
deterministic for a seed and lower the loss; muon splits the parameters as documented."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer.training import BatchedMuon, TrainConfig, Trainer, muon_parameters

MODEL = {"d_model": 16, "n_heads": 2, "d_ff": 32, "qk_norm": True}


def config(**overrides) -> TrainConfig:
    settings = dict(task="copy", task_params={"min_len": 1, "max_len": 4}, steps=1000, batch_size=16, lr=1e-2,
                    warmup=5, eval_every=10, eval_samples=8, confirm_samples=16)
    return TrainConfig(**{**settings, **overrides})


@pytest.mark.parametrize("optimizer", ["adam", "muon"])
def test_a_seed_repeats_exactly_and_another_seed_differs(optimizer):
    def losses(seed):
        trainer = Trainer(config(optimizer=optimizer, seed=seed), MODEL)
        return [trainer.step() for _ in range(6)]

    assert losses(3) == losses(3)
    assert losses(3) != losses(4)


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "muon"])
def test_a_short_run_lowers_the_loss(optimizer):
    trainer = Trainer(config(optimizer=optimizer), MODEL)
    first = sum(trainer.step() for _ in range(5)) / 5
    for _ in range(60):
        trainer.step()
    last = sum(trainer.step() for _ in range(5)) / 5
    assert last < 0.7 * first, (optimizer, first, last)


def test_muon_takes_the_layer_matrices_and_adam_the_rest():
    trainer = Trainer(config(optimizer="muon", muon_lr=0.05), MODEL)
    adam, muon = trainer.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adam, torch.optim.Adam)
    muon_params, adam_params = muon.param_groups[0]["params"], adam.param_groups[0]["params"]
    assert muon_params and all(p.dim() == 2 for p in muon_params)
    embeddings = {id(trainer.model.src_embed.tokens.weight), id(trainer.model.generator.proj.weight)}
    assert embeddings <= {id(p) for p in adam_params}
    assert len(muon_params) + len(adam_params) == len(list(trainer.model.parameters()))
    assert (muon_params, adam_params) == tuple(map(list, muon_parameters(trainer.model)))
    assert muon.param_groups[0]["initial_lr"] == 0.05 and adam.param_groups[0]["initial_lr"] == 1e-2


@pytest.mark.parametrize("nesterov", [True, False])
def test_batched_muon_updates_exactly_as_torch_muon(nesterov):
    torch.manual_seed(0)
    shapes = [(8, 8), (8, 8), (16, 8), (8, 16), (16, 8)]  # square, tall (transposed inside) and wide
    ours = [nn.Parameter(torch.randn(shape)) for shape in shapes]
    theirs = [nn.Parameter(p.detach().clone()) for p in ours]
    settings = dict(lr=0.05, weight_decay=0.1, nesterov=nesterov)
    optimizers = BatchedMuon(ours, **settings), torch.optim.Muon(theirs, **settings)
    for _ in range(4):
        grads = [torch.randn(shape) for shape in shapes]
        for params, optimizer in zip((ours, theirs), optimizers):
            for p, g in zip(params, grads):
                p.grad = g.clone()
            optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_both_rates_follow_the_schedule():
    trainer = Trainer(config(optimizer="muon", warmup=4), MODEL)
    for _ in range(2):
        trainer.step()
    assert [o.param_groups[0]["lr"] for o in trainer.optimizers] == pytest.approx([1e-2 * 3 / 4, 0.02 * 3 / 4])


@pytest.mark.parametrize("bad", [{"optimizer": "sgd"}, {"muon_lr": 0.0}, {"muon_lr": float("nan")}, {"muon_lr": "1"}])
def test_bad_optimizer_settings_are_refused(bad):
    with pytest.raises(ValueError):
        config(**bad).validate()
