"""`python -m transformer`: train / eval / decode / models, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.repo import ROOT
from helpers.cli import cli

from transformer.analysis.evaluation import evaluate_bundle
from transformer.cli import _progress, main, parse_task_params
from transformer.network.decoding import beam_search, greedy_decode
from transformer.runs.thread_job import TrainingJob
from transformer.store.checkpoints import load_bundle
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer

TINY = ["--d-model", "32", "--heads", "2", "--d-ff", "64", "--eval-every", "10", "--eval-samples", "50"]


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, dict]:
    """A copy model (strings of 1-3 letters) trained until 90% held-out exact match."""
    out = tmp_path_factory.mktemp("cli") / "copy.safetensors"
    run = cli("train", "--task", "copy", "--task-param", "min_len=1", "--task-param", "max_len=3", "--steps", "400",
              "--target-accuracy", "0.9", "--confirm-samples", "100", *TINY, "--out", str(out), "--name", "tiny")
    assert run.returncode == 0, run.stderr
    return out, last_json(run.stdout) | {"stderr": run.stderr}


def test_train_stops_at_target_and_saves(trained):
    path, result = trained
    assert result["stopped"] == "target reached" and result["steps"] < 400
    assert result["exact_match"] >= 0.9 and result["samples"] == 100
    assert {"steps", "seconds", "exact_match", "token_accuracy", "loss", "checkpoint"} <= result.keys()
    assert Path(result["checkpoint"]) == path
    card = load_bundle(path).card
    assert (card["name"], card["steps"], card["exact_match"]) == ("tiny", result["steps"], result["exact_match"])
    assert f"step {result['steps']}/400" in result["stderr"] and "Traceback" not in result["stderr"]


def test_the_progress_line_has_no_loss_before_the_first_step():
    """The first step makes torch's optimisers (1-2.5 s in a fresh process): meanwhile the line said "loss nan"."""
    job = TrainingJob(Trainer(TrainConfig(task="copy", steps=3), {"d_model": 32, "n_heads": 2, "d_ff": 64}))
    assert "loss - exact - 0.0 steps/s" in _progress(job.snapshot())
    job.start()
    job.join()
    assert re.search(r"step 3/3 \[#+\] loss \d+\.\d{4} exact \d+\.\d%", _progress(job.snapshot()))


def test_train_under_its_target_says_by_how_much(trained, tmp_path, capsys):
    assert "under --target-accuracy" not in trained[1]["stderr"]  # reached: nothing to say
    out = tmp_path / "short.safetensors"
    assert main(["train", "--task", "copy", "--steps", "3", "--target-accuracy", "0.99", *TINY, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.splitlines()[-1])
    right = round(result["exact_match"] * result["samples"])
    assert result["stopped"] == "max steps" and result["samples"] == 1000 and right < 990
    assert (f"under --target-accuracy 0.99: {right:,} of 1,000 held-out inputs exactly right at the end; more --steps"
            in captured.err.splitlines()[-1])


def test_eval_on_fresh_heldout_inputs(trained, capsys):
    path, result = trained
    assert main(["eval", "--checkpoint", str(path), "--samples", "300", "--seed", "5"]) == 0
    metrics = last_json(capsys.readouterr().out)
    expected = evaluate_bundle(load_bundle(path), 300, 5)
    assert metrics["samples"] == 300 and metrics["exact_match"] == expected["exact_match"] >= 0.5
    assert metrics["token_accuracy"] == expected["token_accuracy"]


def test_decode_json_structure_and_attention(trained):
    path, _ = trained
    run = cli("decode", "--checkpoint", str(path), "--input", "abc", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["input_tokens"] == ["a", "b", "c", "</s>"]
    assert out["output_tokens"][-1] == "</s>" and out["output"] == "".join(out["output_tokens"][:-1])
    assert [s["token"] for s in out["steps"]] == out["output_tokens"]
    for step in out["steps"]:
        probs = [p for _, p in step["topk"]]
        assert len(probs) == 5 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
        assert step["topk"][0][0] == step["token"]
    src, tgt = len(out["input_tokens"]), len(out["output_tokens"])
    expected = {"encoder_self": (src, src), "decoder_self": (tgt, tgt), "cross": (tgt, src)}
    for kind, (queries, keys) in expected.items():
        layers = out["attention"][kind]
        assert len(layers) == 1 and len(layers[0]) == 2  # one layer, two heads
        for head in layers[0]:
            assert len(head) == queries and all(len(row) == keys for row in head)
            assert all(abs(sum(row) - 1) < 1e-5 for row in head)
    for head in out["attention"]["decoder_self"][0]:
        assert all(head[q][k] == 0 for q in range(tgt) for k in range(q + 1, tgt))


def test_decode_plain_and_beam(trained, capsys):
    path, _ = trained
    bundle = load_bundle(path)
    assert main(["decode", "--checkpoint", str(path), "--input", "cab"]) == 0
    assert capsys.readouterr().out == greedy_decode(bundle.model, bundle.tokenizer, "cab").output_text + "\n"
    assert main(["decode", "--checkpoint", str(path), "--input", "cab", "--beam", "3", "--json", "--topk", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    best = beam_search(bundle.model, bundle.tokenizer, "cab", beam=3)
    assert out["beam"] == 3 and out["output"] == best.text and out["output_tokens"] == best.best.pieces
    assert abs(out["score"] - best.score) < 1e-5
    assert all(len(step["topk"]) == 2 and step["forced"] for step in out["steps"])


def test_train_time_limit_and_models_listing(trained, tmp_path, capsys):
    out = tmp_path / "timed.safetensors"
    args = ["train", "--task", "reverse", "--steps", "100000", "--max-seconds", "0.3", *TINY, "--out", str(out)]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["stopped"] == "time limit" and 0 < result["steps"] < 100000 and out.exists()
    (tmp_path / "broken.safetensors").write_bytes(b"junk")
    assert main(["models", "--folder", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["path"] for m in listed] == [str(tmp_path / "broken.safetensors"), str(out)]
    assert listed[0]["error"] and listed[1]["task"] == "reverse" and listed[1]["card"]["steps"] == result["steps"]
    assert main(["models", "--folder", str(trained[0].parent)]) == 0
    assert "tiny" in capsys.readouterr().out


def as_in_a_terminal() -> None:
    """A terminal starts a command with Ctrl-C's signal handled as by default and not blocked. A child inherits both
    from its parent, and a shell without job control starts a background command (`... &` in a script) with SIGINT
    ignored: a test run started so handed its CLI a Ctrl-C that never arrived, and the CLI trained on for minutes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_saves_what_it_has(tmp_path):
    out, log = tmp_path / "interrupted.safetensors", tmp_path / "stderr.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with log.open("w") as err:
        command = [sys.executable, "-m", "transformer", "train", "--task", "reverse", "--steps", "100000", *TINY,
                   "--out", str(out)]
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                preexec_fn=as_in_a_terminal)
        try:
            deadline = time.time() + 60
            while "step " not in log.read_text() and time.time() < deadline:
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            stdout, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:  # it did not stop: end it, not leave it training beside the other tests
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, log.read_text()
    result = last_json(stdout)
    assert result["stopped"] == "interrupted" and result["steps"] >= 1
    assert load_bundle(out).card["steps"] == result["steps"]
    assert "Traceback" not in log.read_text()


# --------------------------------------------------------------------------------------------- bad input


def test_bad_checkpoint_in_a_real_process(tmp_path):
    hostile = tmp_path / "hostile.safetensors"
    hostile.write_bytes(b"\x80\x04 pickled payload")
    run = cli("eval", "--checkpoint", str(hostile))
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "pickle" in lines[0]


BAD = {
    "missing file": ["eval", "--checkpoint", "no/such/file.safetensors"],
    "a folder": ["eval", "--checkpoint", "assets"],
    "unknown characters": ["decode", "--checkpoint", "{model}", "--input", "ABC!"],
    "empty input": ["decode", "--checkpoint", "{model}", "--input", ""],
    "zero beam": ["decode", "--checkpoint", "{model}", "--input", "abc", "--beam", "0"],
    "zero samples": ["eval", "--checkpoint", "{model}", "--samples", "0"],
    "huge samples": ["eval", "--checkpoint", "{model}", "--samples", "99999999999"],
    "unknown task": ["train", "--task", "chess", "--out", "{out}"],
    "param without =": ["train", "--task", "reverse", "--task-param", "max_len", "--out", "{out}"],
    "param out of range": ["train", "--task", "reverse", "--task-param", "max_len=1000", "--out", "{out}"],
    "unknown param": ["train", "--task", "reverse", "--task-param", "colour=red", "--out", "{out}"],
    "negative lr": ["train", "--task", "reverse", "--lr", "-1", "--out", "{out}"],
    "zero steps": ["train", "--task", "reverse", "--steps", "0", "--out", "{out}"],
    "huge model": ["train", "--task", "reverse", "--d-model", "100000", "--out", "{out}"],
    "heads do not divide": ["train", "--task", "reverse", "--d-model", "30", "--heads", "4", "--out", "{out}"],
    "unknown norm": ["train", "--task", "reverse", "--norm", "side", "--out", "{out}"],
    "accuracy above 1": ["train", "--task", "reverse", "--target-accuracy", "99", "--out", "{out}"],
    "negative seconds": ["train", "--task", "reverse", "--max-seconds", "-1", "--out", "{out}"],
    "out is not .safetensors": ["train", "--task", "reverse", "--out", "{out}.pt"],
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_exits_2_with_one_line(trained, tmp_path, capsys, case):
    args = [a.format(model=trained[0], out=tmp_path / "x.safetensors") for a in BAD[case]]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not (tmp_path / "x.safetensors").exists()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) > len("error: ") + 10


USAGE = [[], ["fly"], ["train", "--task", "reverse"], ["train", "--task", "reverse", "--steps", "many", "--out", "x"],
         ["decode", "--input", "abc"]]


@pytest.mark.parametrize("args", USAGE)
def test_usage_errors_exit_2_with_one_line(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")


def test_task_params_are_read_as_json_where_they_parse():
    assert parse_task_params(["min_len=10", "name=x y", "flag=true"]) == {"min_len": 10, "name": "x y", "flag": True}
