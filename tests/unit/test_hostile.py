"""Hostile files and inputs for the library and the CLI, crafted here: each is refused (or bounded) before
any work, with one readable line, within the memory budget (peak RSS measured in a subprocess), and
writes nothing. Also: the budget's estimates against measured peaks, and its limits from the environment.

The figures in the README's "Limits" table come from these tests: `python -m pytest tests/unit/test_hostile.py -s`
prints each measured case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
import torch
from helpers.repo import ROOT
from helpers.hostile import BOMB_MIB, MB, endless, pt_zip_bomb, tiny_bundle, with_card

from transformer.cli import ZOO, main
from transformer.network import budget
from transformer.network.budget import BudgetError
from transformer.network.config import ConfigError, ModelConfig
from transformer.network.decoding import DecodeBudgetError, DecodeError, greedy_decode
from transformer.network.model import EncoderDecoder
from transformer.store import atomic, checkpoints
from transformer.store.checkpoints import (
    bundle_metadata,
    load_bundle,
    load_state_dict_file,
    save_bundle,
)
from transformer.store.headers import CheckpointError, list_checkpoints, read_info
from transformer.tasks import make_task
from transformer.training.config import TrainConfig, model_config, run_estimate
from transformer.training.trainer import Trainer



# ------------------------------------------------------------------------------------------------ crafting


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    made = {"bomb": folder / "bomb.pt", "huge_trace": folder / "huge_trace.safetensors",
            "good": folder / "good.safetensors", "fifo": folder / "fifo.safetensors",
            "link_to_fifo": folder / "link_to_fifo.safetensors", "link_to_zero": folder / "zero.safetensors"}
    made["bomb"].write_bytes(pt_zip_bomb())
    # 12+12 layers x 16 heads, max_len 1024, and no </s> ever: ~1.5 GB of traces for one decode
    save_bundle(endless(tiny_bundle(n_enc_layers=12, n_dec_layers=12, n_heads=16, max_len=1024)), made["huge_trace"])
    save_bundle(tiny_bundle(), made["good"])
    os.mkfifo(made["fifo"])
    made["link_to_fifo"].symlink_to(made["fifo"])
    made["link_to_zero"].symlink_to("/dev/zero")
    return made


# ----------------------------------------------------------------------------------------- measuring


FIGURES: dict[str, tuple[float, str]] = {}  # case -> (peak MB, outcome), printed with -s


def run_measured(*args: str, env: dict | None = None, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m transformer ARGS` in a child of a small wrapper that reports the child's peak RSS
    (getrusage(RUSAGE_CHILDREN).ru_maxrss: that one child only; a child's count starts at its parent's
    RSS, so the parent is this small wrapper, not pytest). Returns (the run, peak MB)."""
    wrapper = textwrap.dedent("""
        import resource, subprocess, sys
        run = subprocess.run([sys.executable, "-m", "transformer", *sys.argv[1:]], capture_output=True, text=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr + chr(0) + repr(peak))
        sys.exit(run.returncode)
    """)
    full_env = dict(os.environ, PYTHONPATH=str(ROOT)) | (env or {})
    run = subprocess.run([sys.executable, "-c", wrapper, *args], cwd=ROOT, env=full_env, capture_output=True,
                         text=True, timeout=timeout)
    stderr, _, peak = run.stderr.rpartition("\0")
    return subprocess.CompletedProcess(run.args, run.returncode, run.stdout, stderr), float(peak)


@pytest.fixture(scope="module")
def baseline_mb(tmp_path_factory) -> float:
    """Peak RSS of the CLI doing nearly nothing (Python, torch and the library imported)."""
    run, peak = run_measured("models", "--folder", str(tmp_path_factory.mktemp("empty")))
    assert run.returncode == 0
    FIGURES["baseline: `models` on an empty folder"] = (peak, "listed nothing")
    return peak


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[0]


def refused_measured(case: str, baseline: float, phrase: str, *args: str, env: dict | None = None) -> str:
    started = time.perf_counter()
    run, peak = run_measured(*args, env=env)
    elapsed = time.perf_counter() - started
    assert run.returncode == 2 and run.stdout == "", run.stderr
    line = one_error_line(run.stderr)
    assert phrase in line, line
    assert peak < budget.model_limit_mb() and peak - baseline < 100, (peak, baseline)  # refused before work
    FIGURES[case] = (peak, line[len("error: "):])
    print(f"\n{case}: peak {peak:.0f} MB (baseline {baseline:.0f} MB), {elapsed:.1f} s: {line}")
    return line


def measured_peak_mb(code: str) -> float:
    """Peak RSS growth in MB while a subprocess runs `code`'s work() (after its setup): the process's VmHWM in
    /proc, reset to its RSS just before work() (so the setup's own peak cannot hide the work's; ru_maxrss
    starts at the parent's RSS at fork time, pytest's: too high)."""
    prelude = ("import re, torch\ntorch.set_num_threads(1)\n"
               "def _mb(field):\n"
               "    return int(re.search(field + r':\\s+(\\d+)', open('/proc/self/status').read())[1]) / 1024\n")
    measure = ("\nopen('/proc/self/clear_refs', 'w').write('5')\n_before = _mb('VmRSS')\n"
               "work()\nprint(_mb('VmHWM') - _before)\n")
    body = prelude + textwrap.dedent(code) + measure
    run = subprocess.run([sys.executable, "-c", body], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return float(run.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------- the budget itself


@pytest.mark.parametrize("shape", [
    {}, {"norm": "post"}, {"positional": "learned"}, {"positional": "none", "n_enc_layers": 3},
    {"n_heads": 4, "d_model": 32, "d_ff": 8, "n_dec_layers": 2},
])
def test_parameter_count_is_exact(shape):
    config = ModelConfig(23, 19, **({"n_enc_layers": 1, "n_dec_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}
                                    | shape))
    with torch.device("meta"):
        assert budget.parameter_count(config) == EncoderDecoder(config).num_parameters()


def test_one_function_builds_a_runs_model_config():
    for train, overrides in [(TrainConfig(), {}), (TrainConfig(task="dates"), {"d_model": 32, "n_heads": 2})]:
        task = make_task(train.task, **train.task_params)
        planned = model_config(task, task.make_tokenizer(train.seed), overrides)
        assert planned == Trainer(train, overrides).model.config
        assert planned.src_vocab == planned.tgt_vocab == task.make_tokenizer(train.seed).vocab_size
        assert all(getattr(planned, key) == value for key, value in overrides.items())
    task = make_task("reverse")
    for overrides, message in [({"max_len": 9}, "come from the task"), ({"colour": 1}, "colour"),
                               ({"d_model": 7}, "d_model=7")]:
        with pytest.raises(ConfigError, match=message):
            model_config(task, task.make_tokenizer(0), overrides)
    with pytest.raises(ConfigError, match="max_len 5 is too short"):
        model_config(task, task.make_tokenizer(0), max_len=5)


def test_limits_come_from_the_environment(monkeypatch):
    config = tiny_bundle().config
    assert budget.model_limit_mb() == 1024 and budget.run_limit_mb() == 2048
    assert budget.decode_estimate(config).check().fits()
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", "0.01")
    with pytest.raises(BudgetError, match=r"would need about .*; the limit is 0 MB \(set AP_MODEL_BUDGET_MB"):
        budget.decode_estimate(config).check()
    for bad in ("lots", "-5", "nan", "inf", "0"):
        monkeypatch.setenv("AP_MODEL_BUDGET_MB", bad)
        with pytest.raises(BudgetError, match="AP_MODEL_BUDGET_MB must be a number above 0"):
            budget.model_limit_mb()
    monkeypatch.setenv("AP_RUN_BUDGET_MB", "1")
    with pytest.raises(BudgetError, match="this training run would need about"):
        run_estimate(TrainConfig(), {}).check()


ESTIMATE_CASES = {
    # a traced decode and its full attention matrices, as the decode and attention pages use them
    "decode": ("""
        from transformer.network.decoding import greedy_decode
        from tests.helpers.hostile import endless, tiny_bundle
        bundle = endless(tiny_bundle(n_enc_layers=4, n_dec_layers=4, n_heads=16, max_len=384))
        text = "abcdefgh" * 16
        def work():
            global kept
            result = greedy_decode(bundle.model, bundle.tokenizer, text)
            kept = (result, result.attention())
    """, lambda: budget.decode_estimate(tiny_bundle(n_enc_layers=4, n_dec_layers=4, n_heads=16, max_len=384).config,
                                       129, 384)),
    # the code page's detailed teacher-forced pass: attention and every layer's intermediates kept
    "detailed": ("""
        from transformer.network.decoding import teacher_forced
        from tests.helpers.hostile import tiny_bundle
        bundle = tiny_bundle(n_enc_layers=4, n_dec_layers=4, d_model=256, n_heads=8, d_ff=1024, max_len=256)
        def work():
            global kept
            kept = teacher_forced(bundle.model, bundle.tokenizer, "abcdefgh" * 16, "abcdefgh" * 15, detail=True)
    """, lambda: budget.decode_estimate(tiny_bundle(n_enc_layers=4, n_dec_layers=4, d_model=256, n_heads=8,
                                                    d_ff=1024, max_len=256).config, 129, 121, detail=True)),
    # two training steps and an evaluation of 1,000 held-out pairs
    "training": ("""
        from transformer.training.config import TrainConfig
        from transformer.training.trainer import Trainer
        trainer = Trainer(TrainConfig(batch_size=512, confirm_samples=1000), {"n_enc_layers": 2, "n_dec_layers": 2})
        trainer.heldout(1000)
        def work():
            trainer.step(); trainer.step(); trainer.evaluate(1000)
    """, lambda: run_estimate(TrainConfig(batch_size=512, confirm_samples=1000),
                                     {"n_enc_layers": 2, "n_dec_layers": 2})),
    # loading a 32 MB checkpoint
    "load": ("""
        import tempfile
        from transformer.store.checkpoints import load_bundle, save_bundle
        from tests.helpers.hostile import tiny_bundle
        path = tempfile.mkdtemp() + "/big.safetensors"
        save_bundle(tiny_bundle(n_enc_layers=2, n_dec_layers=2, d_model=384, n_heads=8, d_ff=1536), path)
        import gc; gc.collect()
        def work():
            global kept
            kept = load_bundle(path)
    """, lambda: budget.load_estimate(tiny_bundle(n_enc_layers=2, n_dec_layers=2, d_model=384, n_heads=8,
                                                  d_ff=1536).config)),
}


@pytest.mark.parametrize("case", ESTIMATE_CASES)
def test_estimate_is_within_a_factor_of_three_of_the_measured_peak(case):
    code, estimate = ESTIMATE_CASES[case]
    measured, expected = measured_peak_mb(code), estimate().mb
    if case in ("training", "detailed"):  # the weights existed before the measurement began
        expected -= estimate().parts["weights"] / MB
    print(f"\n{case}: estimated {expected:.0f} MB, measured {measured:.0f} MB")
    FIGURES[f"estimate check: {case}"] = (measured, f"estimated {expected:.0f} MB")
    assert expected / 3 <= measured <= expected * 3


# ---------------------------------------------------------------------------------------- hostile files


def test_pt_zip_bomb_is_refused_before_unpacking(files, baseline_mb):
    data = files["bomb"].read_bytes()
    assert len(data) < 2 * MB
    with zipfile.ZipFile(files["bomb"]) as archive:  # the bomb is real: its record inflates to 1 GiB
        assert sum(i.file_size for i in archive.infolist()) > BOMB_MIB * MB
        with archive.open("archive/data/0") as record:
            assert record.read(MB) == bytes(MB)
    for source in (data, files["bomb"]):
        with pytest.raises(CheckpointError, match=r"would unpack to 1,024.0 MB; the limit is 64.0 MB"):
            load_state_dict_file(source)
    refused_measured(".pt zip bomb (1.0 MB file, 1 GiB inflated), `eval`", baseline_mb,
                     "refused before unpacking", "eval", "--checkpoint", str(files["bomb"]))


def test_pt_that_is_not_a_zip_archive_is_refused_before_torch_load(monkeypatch):
    monkeypatch.setattr(checkpoints.torch, "load", lambda *a, **k: pytest.fail("torch.load ran"))
    import pickle

    for data in (pickle.dumps({"state_dict": {}}, protocol=2), b"PK\x03\x04 broken directory" + bytes(100)):
        with pytest.raises(CheckpointError, match="refused to load this .pt file safely"):
            load_state_dict_file(data)


def test_huge_trace_model_is_refused_before_decoding(files, baseline_mb):
    bundle = load_bundle(files["huge_trace"])  # a valid 0.3 MB checkpoint: loading it is cheap
    assert files["huge_trace"].stat().st_size < MB
    with pytest.raises(DecodeBudgetError) as caught:
        greedy_decode(bundle.model, bundle.tokenizer, "abc")
    assert isinstance(caught.value, DecodeError) and isinstance(caught.value, BudgetError)  # pages show it
    assert "1024 steps x 12+12 layers x 16 heads" in str(caught.value) and "AP_MODEL_BUDGET_MB" in str(caught.value)
    line = refused_measured("valid 0.3 MB checkpoint, 12+12 layers x 16 heads, max_len 1024, `decode --json`",
                            baseline_mb, "would need about", "decode", "--checkpoint", str(files["huge_trace"]),
                            "--input", "abc", "--json")
    assert "the limit is 1.0 GB (set AP_MODEL_BUDGET_MB" in line


def test_training_over_the_run_budget_is_refused_before_the_model_exists(baseline_mb):
    refused_measured("`train` 6+6 layers x 16 heads, d_model 512, d_ff 2048, batch 1024", baseline_mb,
                     "this training run would need about 11.6 GB", "train", "--task", "reverse", "--enc-layers",
                     "6", "--dec-layers", "6", "--heads", "16", "--d-model", "512", "--d-ff", "2048",
                     "--batch-size", "1024", "--out", "never.safetensors")
    assert not (ROOT / "never.safetensors").exists()


@pytest.mark.parametrize("name", ["fifo", "link_to_fifo", "link_to_zero"])
def test_special_files_are_not_regular_files(files, name):
    for call in (load_bundle, load_state_dict_file):
        with pytest.raises(CheckpointError, match="is not a regular file"):
            call(files[name])
    assert "not a regular file" in read_info(files[name]).error


def test_special_files_never_block_listing_or_the_cli(files, capsys):
    cli_refuses(capsys, ["eval", "--checkpoint", str(files["link_to_fifo"])], "is not a regular file")
    run, peak = run_measured("models", "--folder", str(files["fifo"].parent), timeout=30)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sum("not a regular file" in line for line in lines) == 3 and any(line.startswith("tiny") for line in lines)
    FIGURES["`models` on a folder with a FIFO, a symlink to it and one to /dev/zero"] = (
        peak, "every file listed; the special ones as not regular files")


CARDS = {
    "exact_match": "0.5", "steps": "many", "seconds": float("nan"), "loss": -1, "created": "yesterday",
    "name": "\x1b[31mred\x1b[0m", "samples": True, "train": {"lr": 1e9}, "task_params": [1, 2],
    "decoding": "<img src=x>", "parameters": 1.5, "extra": {"nested": "object"}, "token_accuracy": 2,
    "examples": ["ok", "x" * 5000], "under_trained": "yes",
}


def test_wrong_card_fields_are_dropped_with_notes(tmp_path):
    bundle = tiny_bundle()
    path = tmp_path / "bad_card.safetensors"
    path.write_bytes(with_card(bundle, CARDS | {"evaluated_step": 7, "note": "kept"}))
    loaded = load_bundle(path)
    assert loaded.card == {"evaluated_step": 7, "note": "kept"}
    assert loaded.examples() == loaded.task.examples()  # the card's examples were dropped: the task's instead
    assert len(loaded.notes) == len(CARDS)
    for field in CARDS:
        assert any(f"'{field}'" in note for note in loaded.notes)
    shown = " ".join(loaded.notes)
    assert "many" not in shown and "img" not in shown and "\x1b" not in shown and "yesterday" not in shown
    assert loaded.name == "reverse"  # the task's name stands in for the dropped one
    info = read_info(path)
    assert info.error is None and info.notes == loaded.notes and info.name == "bad_card"
    pt = tmp_path / "bad_card.pt"
    torch.save(json.loads(json.dumps(bundle_metadata(bundle) | {"card": {"steps": "many"}}))
               | {"state_dict": bundle.model.state_dict()}, pt)
    expected = "card field 'steps' was dropped: it must be a whole number in 0..1,000,000,000"
    assert load_state_dict_file(pt).notes == [expected]


def test_one_bad_file_never_hides_the_others(files, tmp_path, capsys):
    bundle = tiny_bundle()
    (tmp_path / "a_bad_card.safetensors").write_bytes(with_card(bundle, CARDS))
    (tmp_path / "b_broken.safetensors").write_bytes(b"\x80\x04junk")
    save_bundle(bundle, tmp_path / "c_good.safetensors")
    os.mkfifo(tmp_path / "d_fifo.safetensors")
    (tmp_path / "e_gone.safetensors").symlink_to(tmp_path / "nowhere")
    infos = list_checkpoints(tmp_path)
    assert [i.path.name for i in infos] == ["a_bad_card.safetensors", "b_broken.safetensors", "c_good.safetensors",
                                            "d_fifo.safetensors", "e_gone.safetensors"]
    assert [bool(i.error) for i in infos] == [False, True, False, True, True]
    assert main(["models", "--folder", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and "dropped as invalid" in out[0] and out[2].startswith("tiny")
    assert main(["models", "--folder", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert len(listed) == 5 and listed[0]["notes"]


# ------------------------------------------------------------------------------------------- CLI input


def cli_refuses(capsys, args: list[str], phrase: str, after_progress: bool = False) -> str:
    """`main(args)` exits 2 with one error line containing `phrase` (after training's progress line)."""
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    line = one_error_line(captured.err.splitlines()[-1] if after_progress else captured.err)
    assert phrase in line, line
    return line


@pytest.fixture
def no_training(monkeypatch):
    """Fails a test whose CLI call gets as far as building a Trainer."""
    monkeypatch.setattr("transformer.cli.Trainer", lambda *a, **k: pytest.fail("training started"))


def test_deep_json_task_param_is_one_line(capsys, tmp_path, no_training):
    for depth in (100_000, 500, 17):
        value = "[" * depth + "]" * (depth if depth < 1000 else 0)
        cli_refuses(capsys, ["train", "--task", "reverse", "--task-param", f"max_len={value}",
                             "--out", str(tmp_path / "x.safetensors")], "max_len is nested too deeply")
    assert not list(tmp_path.iterdir())


NEGATIVE = {
    "--lr -inf": (["--lr", "-inf"], "lr=-inf is outside the allowed range"),
    "--lr -1e-3": (["--lr", "-1e-3"], "lr=-0.001 is outside"),
    "--lr -.5": (["--lr", "-.5"], "lr=-0.5 is outside"),
    "--warmup -5": (["--warmup", "-5"], "warmup=-5 is outside"),
    "--max-seconds -1E9": (["--max-seconds", "-1E9"], "--max-seconds must be positive"),
    "--target-accuracy -nan": (["--target-accuracy", "-nan"], "--target-accuracy is a fraction"),
}


@pytest.mark.parametrize("case", NEGATIVE)
def test_negative_numbers_are_values(capsys, tmp_path, no_training, case):
    extra, phrase = NEGATIVE[case]
    line = cli_refuses(capsys, ["train", "--task", "reverse", *extra, "--out", str(tmp_path / "x.safetensors")],
                       phrase)
    assert "expected one argument" not in line


def test_out_is_checked_before_training(capsys, tmp_path, files, no_training):
    base = ["train", "--task", "reverse", "--steps", "5"]
    if os.geteuid() == 0:  # root writes through permission bits; /proc refuses new files to everyone
        unwritable = Path("/proc/self/no/such/model.safetensors")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        unwritable = locked / "model.safetensors"
    line = cli_refuses(capsys, [*base, "--out", str(unwritable)], "is not writable")
    assert str(unwritable) in line and ".tmp" not in line
    cli_refuses(capsys, [*base, "--out", str(files["fifo"])], "is not a regular file")
    cli_refuses(capsys, [*base, "--out", str(files["link_to_zero"])], "is not a regular file")
    folder = tmp_path / "model.safetensors"
    folder.mkdir()
    cli_refuses(capsys, [*base, "--out", str(folder)], "is a folder")
    cli_refuses(capsys, [*base, "--out", str(files["good"] / "x.safetensors")], "Not a directory")


def test_shipped_model_needs_force(capsys, no_training):
    shipped = ZOO / "reverse.safetensors"
    before = (sorted(os.listdir(ZOO)), shipped.read_bytes(), shipped.stat().st_mtime_ns)
    cli_refuses(capsys, ["train", "--task", "reverse", "--out", str(shipped)], "pass --force")
    relative = os.path.relpath(ZOO / "new.safetensors")
    line = cli_refuses(capsys, ["train", "--task", "reverse", "--out", relative], "add a model to the shipped ones")
    assert relative in line
    assert (sorted(os.listdir(ZOO)), shipped.read_bytes(), shipped.stat().st_mtime_ns) == before


def test_save_failure_names_the_users_path(capsys, tmp_path, monkeypatch):
    out = tmp_path / "m.safetensors"

    def full_disk(*args):
        raise OSError(28, "No space left on device", str(tmp_path / ".m.safetensors.abcdefgh.tmp"))

    monkeypatch.setattr(checkpoints.os, "fsync", full_disk)
    line = cli_refuses(capsys, ["train", "--task", "copy", "--steps", "1", "--eval-every", "1", "--eval-samples",
                                "5", "--confirm-samples", "5", "--d-model", "16", "--heads", "2", "--d-ff", "16",
                                "--out", str(out)], f"could not save --out {out}: No space left on device",
                       after_progress=True)
    assert ".tmp" not in line and not list(tmp_path.iterdir())


def test_killed_save_leftovers_are_cleaned_at_the_next_save(tmp_path):
    path = tmp_path / "m.safetensors"
    code = textwrap.dedent(f"""
        import time
        from transformer.store import checkpoints
        from tests.helpers.hostile import tiny_bundle
        checkpoints.os.fsync = lambda fd: time.sleep(120)  # stuck mid-save, its temp file written and locked
        checkpoints.save_bundle(tiny_bundle(), {str(path)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.time() + 60
        while not list(tmp_path.glob(".m.safetensors.*.tmp")) and time.time() < deadline:
            time.sleep(0.05)
        busy = list(tmp_path.glob(".m.safetensors.*.tmp"))
        assert len(busy) == 1
        assert atomic.remove_leftover_temps(tmp_path, path.name) == []  # a save under way holds its temp: kept
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert busy[0].exists() and not path.exists()  # what SIGKILL mid-save leaves
    stale = tmp_path / ".m.safetensors.abcdefgh.tmp"
    stale.write_bytes(b"half a checkpoint")
    others = [tmp_path / ".other.safetensors.abcdefgh.tmp", tmp_path / "notes.tmp", tmp_path / ".m.safetensors.x.tmp"]
    for other in others:
        other.write_bytes(b"not ours")
    os.symlink(tmp_path / "nowhere", tmp_path / ".m.safetensors.linklink.tmp")
    save_bundle(tiny_bundle(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, ".m.safetensors.linklink.tmp"] + [o.name for o in others])
    assert load_bundle(path).card["name"] == "tiny"


def test_decode_json_is_strict_when_the_model_overflows(tmp_path, capsys):
    bundle = tiny_bundle()
    with torch.no_grad():
        bundle.model.generator.proj.weight.fill_(3e38)  # finite, but the logits overflow to inf
    path = save_bundle(bundle, tmp_path / "overflow.safetensors")
    assert main(["decode", "--checkpoint", str(path), "--input", "abc", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))
    assert out["non_finite_values"] > 0 and "non-finite" in out["warning"]
    assert any(step["prob"] is None for step in out["steps"])
    assert captured.err.startswith("warning: the model produced") and len(captured.err.splitlines()) == 1
    assert main(["decode", "--checkpoint", str(files_good(tmp_path)), "--input", "abc", "--json"]) == 0
    assert "non_finite_values" not in json.loads(capsys.readouterr().out)


def files_good(folder: Path) -> Path:
    return save_bundle(tiny_bundle(), folder / "good.safetensors")


def test_eval_and_loading_follow_the_model_budget(capsys, monkeypatch):
    shipped = ZOO / "reverse.safetensors"
    config = load_bundle(shipped).config
    room = budget.load_estimate(config).mb * 1.1  # enough to load, not to evaluate 1,000 sequences at once
    assert budget.evaluation_estimate(config, 1000, 17, 17).mb > room
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", str(room))
    cli_refuses(capsys, ["eval", "--checkpoint", str(shipped)], "evaluating this model would need about")
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", "1")
    with pytest.raises(CheckpointError, match="loading this model would need about 2 MB"):
        load_bundle(shipped)
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", "big")
    cli_refuses(capsys, ["decode", "--checkpoint", str(shipped), "--input", "abc"], "AP_MODEL_BUDGET_MB must be")


def test_zz_print_figures():
    """Prints the measured cases (pytest -s), the source of the README's Limits table."""
    for case, (peak, outcome) in FIGURES.items():
        print(f"| {case} | {outcome} | {peak:.0f} MB |")


def test_card_examples_the_model_cannot_read_are_left_out(tmp_path):
    path = tmp_path / "examples.safetensors"
    path.write_bytes(with_card(tiny_bundle(), {"examples": ["ABC!", "abc"]}))  # reverse reads lowercase only
    assert load_bundle(path).examples() == ["abc"]
