"""`--device` in the CLI (issue 10): train and eval take auto / cpu / cuda; an unknown name, or cuda where CUDA is
not available, exits with status 2 and one line before any work; checkpoints stay device-free (CPU tensors)."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.repo import REVERSE as REVERSE_PATH
from transformer.cli import main
from transformer.store.checkpoints import load_bundle

REVERSE = str(REVERSE_PATH)
TINY = ["--task", "copy", "--task-param", "max_len=3", "--steps", "2", "--d-model", "16", "--heads", "2",
        "--d-ff", "32", "--eval-samples", "10", "--confirm-samples", "10"]
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and not captured.out, captured
    return lines[0]


@pytest.mark.parametrize("command", ["train", "eval"])
def test_an_unknown_device_exits_2_with_one_line(command, tmp_path, capsys):
    args = [*TINY, "--out", str(tmp_path / "m.safetensors")] if command == "train" else ["--checkpoint", REVERSE]
    assert main([command, *args, "--device", "tpu"]) == 2
    assert "device must be one of auto, cpu, cuda, got 'tpu'" in one_error_line(capsys)
    assert not (tmp_path / "m.safetensors").exists()


@no_cuda
@pytest.mark.parametrize("command", ["train", "eval"])
def test_cuda_without_cuda_exits_2_with_one_line(command, tmp_path, capsys):
    args = [*TINY, "--out", str(tmp_path / "m.safetensors")] if command == "train" else ["--checkpoint", REVERSE]
    assert main([command, *args, "--device", "cuda"]) == 2
    assert "torch.cuda.is_available() is False" in one_error_line(capsys)
    assert not (tmp_path / "m.safetensors").exists()


@pytest.mark.parametrize("device", ["cpu", "auto", pytest.param("cuda", marks=needs_cuda)])
def test_train_and_eval_on_a_device_save_a_cpu_checkpoint(device, tmp_path, capsys):
    out = tmp_path / "m.safetensors"
    assert main(["train", *TINY, "--device", device, "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["steps"] == 2
    bundle = load_bundle(out)
    assert all(t.device.type == "cpu" for t in bundle.model.state_dict().values())
    assert main(["eval", "--checkpoint", str(out), "--samples", "20", "--device", device]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["samples"] == 20
