"""Per-task presets exist and validate; the CLI takes a task's preset only when no shape or recipe flag is
given; the new flags (--qk-norm, --optimizer muon, --muon-lr, --init, --schedule, --beta1, --beta2) reach the
run and bad values exit 2."""

from __future__ import annotations

import pytest

from transformer.cli import build_parser, main, train_settings
from transformer.store.checkpoints import load_bundle
from transformer.tasks import TASKS
from transformer.training.config import MODEL_DEFAULTS, run_estimate
from transformer.training.presets import PRESETS, preset


def test_every_task_has_a_preset_that_validates():
    assert set(PRESETS) == set(TASKS)
    for task, chosen in PRESETS.items():
        config = chosen.train_config()
        assert config.task == task
        assert chosen.target == (0.95 if task in ("dates", "numbers", "zh_numbers") else 0.99)
        assert set(chosen.model) <= set(MODEL_DEFAULTS) | {"norm", "positional", "qk_norm", "init"}
        run_estimate(config, chosen.model_overrides()).check()  # a shape the budget allows
        trainer = chosen.trainer(steps=1)
        trainer.step()
        assert trainer.model.config.qk_norm == chosen.model_overrides().get("qk_norm", False)
        assert trainer.model.config.init == chosen.model_overrides().get("init", "xavier")


def test_unknown_task_has_no_preset():
    with pytest.raises(ValueError, match="no preset"):
        preset("chess")


def settings(*flags: str):
    return train_settings(build_parser().parse_args(["train", "--out", "x.safetensors", *flags]))


def test_cli_uses_the_preset_without_shape_or_recipe_flags():
    chosen = PRESETS["addition"]
    train, model, used = settings("--task", "addition", "--steps", "7", "--eval-every", "5")
    assert used == "addition" and model == chosen.model
    assert train == {**chosen.train, "task": "addition", "task_params": {}, "seed": 0, "steps": 7, "eval_every": 5}


@pytest.mark.parametrize("flags, model, recipe", [
    (["--d-model", "32"], {"d_model": 32}, {}),
    (["--lr", "0.001"], {}, {"lr": 0.001}),
    (["--optimizer", "adam"], {}, {"optimizer": "adam"}),
    (["--qk-norm", "off"], {"qk_norm": False}, {}),
])
def test_a_shape_or_recipe_flag_replaces_the_preset(flags, model, recipe):
    """Only the flags given, on the library defaults: nothing of the preset's shape or recipe."""
    assert settings("--task", "addition", *flags) == (
        {"task": "addition", "task_params": {}, "seed": 0, **recipe}, model, None)


def test_new_flags_reach_the_configs():
    train, model, _ = settings("--task", "copy", "--qk-norm", "on", "--optimizer", "muon", "--muon-lr", "0.05",
                               "--muon-momentum", "0.9")
    assert model == {"qk_norm": True}
    assert (train["optimizer"], train["muon_lr"], train["muon_momentum"]) == ("muon", 0.05, 0.9)
    train, model, _ = settings("--task", "copy", "--init", "identity", "--schedule", "cosine", "--beta1", "0.8",
                               "--beta2", "0.95")
    assert model == {"init": "identity"}
    assert (train["schedule"], train["beta1"], train["beta2"]) == ("cosine", 0.8, 0.95)


def test_a_trained_checkpoint_records_the_init_and_the_recipe(tmp_path):
    out = tmp_path / "copy.safetensors"
    assert main(["train", "--task", "copy", "--steps", "3", "--d-model", "16", "--heads", "2", "--d-ff", "32",
                 "--init", "identity", "--schedule", "cosine", "--beta1", "0.8", "--out", str(out)]) == 0
    bundle = load_bundle(out)
    assert bundle.config.init == "identity"
    assert (bundle.card["train"]["schedule"], bundle.card["train"]["beta1"]) == ("cosine", 0.8)


@pytest.mark.parametrize("flags", [["--qk-norm", "maybe"], ["--optimizer", "sgd"], ["--muon-lr", "-1"],
                                   ["--muon-lr", "nan"], ["--muon-lr", "fast"], ["--init", "zeros"],
                                   ["--schedule", "step"], ["--beta1", "1"], ["--beta2", "-0.5"]])
def test_bad_values_exit_2_with_one_line(flags, tmp_path, capsys):
    out = tmp_path / "x.safetensors"
    try:
        code = main(["train", "--task", "copy", *flags, "--out", str(out)])
    except SystemExit as exit_info:  # argparse's usage errors
        code = exit_info.code
    assert code == 2 and not out.exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
