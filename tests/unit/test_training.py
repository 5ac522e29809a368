"""Trainer, metrics and TrainingJob: determinism, learning, honest metrics, thread control."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from helpers.jobs import waiter
from helpers.repo import ROOT, fresh_python

from transformer.analysis.evaluation import evaluate_bundle, evaluate_pairs, exact_matches, token_hits
from transformer.network.special_tokens import EOS, PAD
from transformer.runs import thread_job as job_module
from transformer.runs.job import JobLimitError, JobSnapshot
from transformer.runs.thread_job import TrainingJob
from transformer.training.config import TrainConfig
from transformer.training.optimizers import FINAL_LR_FRACTION
from transformer.training import trainer as trainer_module
from transformer.training.trainer import Trainer

TINY_MODEL = {"d_model": 16, "n_heads": 2, "d_ff": 32}


def tiny_config(**overrides) -> TrainConfig:
    settings = dict(
        task="copy", task_params={"min_len": 1, "max_len": 4}, steps=100_000, batch_size=16, lr=3e-3, warmup=5,
        eval_every=10, eval_samples=8, confirm_samples=16,
    )
    return TrainConfig(**{**settings, **overrides})


def tiny_trainer(**overrides) -> Trainer:
    return Trainer(tiny_config(**overrides), TINY_MODEL)


wait_for = waiter(20.0, "the training thread")


@pytest.fixture
def make_job():
    """Build TrainingJobs that are always stopped and joined afterwards (they hold process-wide slots)."""
    jobs = []

    def make(trainer=None, **kwargs):
        job = TrainingJob(trainer or tiny_trainer(), **kwargs)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.stop()
    for job in jobs:
        assert job.join(timeout=20)


# -- configuration ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        {"lr": -1e-3},
        {"lr": float("nan")},
        {"steps": 0},
        {"steps": 2.5},
        {"batch_size": True},
        {"batch_size": 10**6},
        {"optimizer": "sgd"},
        {"label_smoothing": 0.9},
        {"clip": -1.0},
        {"eval_samples": 0},
        {"task": "juggling"},
        {"task_params": {"min_len": 5, "max_len": 2}},
    ],
)
def test_config_rejects_absurd_values(bad):
    with pytest.raises(ValueError):
        TrainConfig(**bad).validate()


def test_config_round_trips_and_refuses_unknown_keys():
    config = tiny_config(seed=7)
    assert TrainConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown training settings: momentum"):
        TrainConfig.from_dict({**config.to_dict(), "momentum": 0.9})


def test_model_overrides_cannot_set_what_the_task_decides():
    with pytest.raises(ValueError, match="max_len"):
        Trainer(tiny_config(), {"max_len": 8})


# -- training -----------------------------------------------------------------------------------------
def test_same_seed_gives_same_losses_and_another_seed_differs():
    def losses(seed, dropout):
        trainer = Trainer(tiny_config(seed=seed), {**TINY_MODEL, "dropout": dropout})
        return [trainer.step() for _ in range(5)]

    assert losses(1, 0.0) == losses(1, 0.0)
    assert losses(1, 0.3) == losses(1, 0.3)  # dropout draws from the trainer's own generator state
    assert losses(1, 0.0) != losses(2, 0.0)


def test_a_trainer_makes_its_optimisers_at_its_first_step_so_an_untrained_model_needs_no_dynamo():
    """torch's first optimiser imports torch._dynamo (~2 s of CPU, ~70 MB): a server that only shows an untrained
    model (the Train page's preview) must not pay it. In a fresh process, as a server is."""
    assert fresh_python("import sys\nfrom transformer.training.presets import PRESETS\n"
                        "trainer = PRESETS['reverse'].trainer()\ntrainer.bundle()\n"
                        "print('torch._dynamo' in sys.modules)\n"
                        "trainer.step()\nprint('torch._dynamo' in sys.modules)\n").split() == ["False", "True"]


def test_a_trainers_clock_leaves_out_making_its_optimisers(monkeypatch):
    """Making the optimisers (torch._dynamo's import, in a fresh process) is not training time: a CLI run and a
    Train page run, whose worker imported it before Start, count the same seconds for the same steps."""
    real = trainer_module.make_optimizers

    def slow(*args):
        time.sleep(1.0)
        return real(*args)

    monkeypatch.setattr(trainer_module, "make_optimizers", slow)
    trainer = tiny_trainer()
    trainer.step()
    assert 0 < trainer.elapsed < 1.0


def test_loss_decreases_on_a_tiny_copy_task():
    trainer = tiny_trainer(lr=1e-2)
    first = sum(trainer.step() for _ in range(5)) / 5
    for _ in range(70):
        trainer.step()
    last = sum(trainer.step() for _ in range(5)) / 5
    assert last < 0.7 * first
    assert trainer.step_count == 80


def test_learning_rate_warms_up_then_decays_to_the_floor():
    trainer = tiny_trainer(warmup=10, steps=30)
    rates = []
    for _ in range(40):
        rates.append(trainer.optimizer.param_groups[0]["lr"] / trainer.config.lr)
        trainer.step()
    assert rates[:10] == sorted(rates[:10]) and rates[9] == pytest.approx(1.0)
    assert rates[10:30] == sorted(rates[10:30], reverse=True) and rates[20] == pytest.approx(0.51)
    assert rates[30:] == pytest.approx([FINAL_LR_FRACTION] * 10)


def test_divergence_is_reported():
    trainer = tiny_trainer()
    with torch.no_grad():
        trainer.model.generator.proj.weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        trainer.step()


# -- metrics ------------------------------------------------------------------------------------------
def test_padding_never_counts_as_correct():
    target = torch.tensor([[5, 6, EOS, PAD, PAD], [7, EOS, PAD, PAD, PAD]])
    all_pad = torch.full_like(target, PAD)
    assert token_hits(all_pad, target).sum() == 0
    assert not exact_matches(all_pad, target).any()
    # Right tokens but no </s>: the output never ended, so it is not an exact match.
    no_end = torch.tensor([[5, 6, 9], [7, 9, 9]])
    assert token_hits(no_end, target).sum() == 3
    assert not exact_matches(no_end, target).any()
    # Exact outputs, even when cut short of the padded width, match.
    exact = torch.tensor([[5, 6, EOS], [7, EOS, PAD]])
    assert exact_matches(exact, target).tolist() == [True, True]
    assert token_hits(exact, target).sum() == 5


def test_a_model_that_only_emits_padding_scores_zero():
    trainer = tiny_trainer()
    with torch.no_grad():
        trainer.model.generator.proj.bias.fill_(-100.0)
        trainer.model.generator.proj.bias[PAD] = 100.0
    metrics = evaluate_pairs(trainer.model, trainer.tokenizer, trainer.heldout(20))
    assert metrics["exact_match"] == 0.0 and metrics["token_accuracy"] == 0.0
    assert metrics["samples"] == 20 and math.isfinite(metrics["loss"])


def test_teacher_forced_exact_match_equals_greedy_exact_match():
    trainer = tiny_trainer(lr=1e-2, task_params={"min_len": 1, "max_len": 6})
    for _ in range(120):
        trainer.step()
    pairs = trainer.heldout(200)
    greedy = evaluate_pairs(trainer.model, trainer.tokenizer, pairs)
    forced = evaluate_pairs(trainer.model, trainer.tokenizer, pairs, greedy=False)
    assert 0.05 < greedy["exact_match"] < 0.95  # a half-trained model: both right and wrong outputs
    assert forced["exact_match"] == greedy["exact_match"]
    assert (greedy["decoding"], forced["decoding"]) == ("greedy", "teacher_forced")


def test_evaluate_records_history_and_bundle_carries_a_card():
    trainer = tiny_trainer()
    for _ in range(3):
        trainer.step()
    metrics = trainer.evaluate()
    assert set(metrics) == {"exact_match", "token_accuracy", "loss", "samples", "decoding"}
    assert trainer.history[-1]["step"] == 3 and trainer.history[-1]["samples"] == 8
    bundle = trainer.bundle("mine")
    assert bundle.name == "mine" and bundle.card["steps"] == 3 and bundle.card["train"]["task"] == "copy"
    assert bundle.card["parameters"] == trainer.model.num_parameters()
    assert not bundle.model.training and bundle.model is not trainer.model
    seen = []
    result = evaluate_bundle(bundle, samples=12, seed=3, progress=lambda done, total: seen.append((done, total)))
    assert result["samples"] == 12 and seen[-1] == (12, 12)


# -- the background job -------------------------------------------------------------------------------
def test_pause_freezes_resume_continues_stop_ends(make_job):
    job = make_job()
    job.start()
    wait_for(lambda: job.snapshot().step >= 3)
    job.pause()
    frozen = job.snapshot()
    time.sleep(0.3)
    assert job.snapshot().step == frozen.step and frozen.state == "paused"
    job.resume()
    wait_for(lambda: job.snapshot().step >= frozen.step + 3)
    job.stop()
    assert job.join(timeout=20)
    snap = job.snapshot()
    assert snap.state == "stopped" and snap.finished_reason == "stopped"
    with pytest.raises(RuntimeError, match=r"^this job was already started \(state 'stopped'\)$"):
        job.start()  # the state as its name, not the enum's repr


def test_pause_and_stop_return_after_the_step_under_way(make_job):
    """A step that is still running when pause() or stop() arrives lands before they return, so the
    step count a page reads right after the click is the one the job keeps."""
    trainer = tiny_trainer()
    plain_step = trainer.step
    inside = threading.Event()

    def slow_step():
        inside.set()
        time.sleep(0.3)
        plain_step()

    trainer.step = slow_step
    job = make_job(trainer)
    job.start()
    wait_for(lambda: job.snapshot().step >= 1)
    inside.clear()
    assert inside.wait(5)  # the next step is under way
    job.pause()
    paused_at = job.snapshot().step
    time.sleep(0.5)
    assert job.snapshot().step == paused_at and job.snapshot().state == "paused"

    job.resume()
    inside.clear()
    assert inside.wait(5)
    job.stop()
    assert job.join(timeout=0)  # already ended
    assert job.snapshot().state == "stopped" and job.bundle().card["steps"] == job.snapshot().step


def test_join_interrupted_by_ctrl_c_still_tells_the_truth(make_job):
    """A Ctrl-C during join() (the CLI's wait loop) must not make a running job look ended: the CLI then
    stops it and saves the model, which must not race a step still under way."""
    trainer = tiny_trainer()
    plain_step = trainer.step
    trainer.step = lambda: (time.sleep(0.05), plain_step())
    job = make_job(trainer)
    job.start()

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            job.join(timeout=10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not job.join(timeout=0) and job.snapshot().state == "running"
    job.stop()
    assert job.join(timeout=0) and job.snapshot().state == "stopped"


def test_step_n_advances_exactly_n_then_stays_paused(make_job):
    job = make_job()
    job.step(7)  # an idle job starts paused
    wait_for(lambda: job.snapshot().state == "paused" and job.snapshot().step == 7)
    time.sleep(0.2)
    assert job.snapshot().step == 7
    job.step(3)
    wait_for(lambda: job.snapshot().step == 10 and job.snapshot().state == "paused")


def test_an_exception_in_a_step_is_captured_and_the_model_kept(make_job):
    trainer = tiny_trainer()
    real_step = trainer.step

    def failing_step():
        if trainer.step_count == 4:
            raise RuntimeError("boom at step four")
        return real_step()

    trainer.step = failing_step
    job = make_job(trainer)
    job.start()
    assert job.join(timeout=20)
    snap = job.snapshot()
    assert snap.state == "error" and "boom at step four" in snap.error and snap.step == 4
    assert job.bundle().card["steps"] == 4


def test_job_limit_raises_a_clear_error(make_job, monkeypatch):
    monkeypatch.setattr(job_module, "MAX_CONCURRENT_JOBS", 2)
    first, second, third = make_job(), make_job(), make_job()
    first.start(paused=True)
    second.start(paused=True)
    with pytest.raises(JobLimitError, match="2 training jobs are already running"):
        third.start()
    first.stop()
    assert first.join(timeout=20)
    third.start(paused=True)  # a slot came free
    assert third.snapshot().state == "paused"


def test_a_job_without_heartbeat_stops_itself(make_job):
    job = make_job(idle_timeout=0.3)
    job.start()
    assert job.join(timeout=20)
    assert job.snapshot().finished_reason == "session gone"


def test_a_long_pause_is_not_a_timeout(make_job):
    job = make_job(idle_timeout=1.0)
    job.start(paused=True)
    time.sleep(1.5)  # paused longer than the timeout, with no heartbeat
    job.resume()
    wait_for(lambda: job.snapshot().step >= 1)
    assert job.snapshot().state == "running"


def test_heartbeats_keep_a_job_alive(make_job):
    job = make_job(idle_timeout=0.5)
    job.start()
    for _ in range(10):
        time.sleep(0.1)
        job.heartbeat()
    assert job.snapshot().state == "running"


def test_probe_is_called_and_recorded(make_job):
    calls = []

    def probe(bundle):
        calls.append(bundle.card["steps"])
        return bundle.model.training

    job = make_job(max_steps=20, probe=probe, probe_every=5)
    job.start()
    assert job.join(timeout=20)
    snap = job.snapshot()
    assert [step for step, _ in snap.probes] == calls == [0, 5, 10, 15, 20]
    assert not any(result for _, result in snap.probes)  # each probe got an eval-mode copy


def test_probe_list_is_capped_and_thinned_evenly(make_job, monkeypatch):
    monkeypatch.setattr(job_module, "MAX_PROBES", 4)
    job = make_job(max_steps=12, probe=lambda bundle: None, probe_every=1)
    job.start()
    assert job.join(timeout=20)
    assert [step for step, _ in job.snapshot().probes] == [0, 4, 8, 12]


def test_a_job_finishes_at_max_steps_with_a_final_evaluation(make_job):
    job = make_job(max_steps=15)
    job.start()
    assert job.join(timeout=20)
    snap = job.snapshot()
    assert (snap.state, snap.finished_reason, snap.step) == ("finished", "max steps", 15)
    rows = [(row["step"], row["decoding"], row["samples"]) for row in snap.history]
    assert rows == [(10, "teacher_forced", 8), (15, "teacher_forced", 8), (15, "greedy", 16)]


def test_a_job_stops_at_the_target_after_confirming_it(make_job):
    job = make_job(target_exact_match=0.0)  # any model reaches 0%
    job.start()
    assert job.join(timeout=20)
    snap = job.snapshot()
    assert (snap.state, snap.finished_reason, snap.step) == ("finished", "target reached", 10)
    # a cheap teacher-forced check, then the confirmation by greedy decoding on more samples
    assert [(row["decoding"], row["samples"]) for row in snap.history] == [("teacher_forced", 8), ("greedy", 16)]


def test_a_job_whose_final_evaluation_reaches_the_target_reached_it(make_job):
    """At its last step a job decodes greedily on as many inputs as a confirmation; where the cheap check on fewer
    fell short but these reach the target, the run reached it. The trainer's evaluations run, their exact match
    set: the checks' under the target, the greedy ones' over it."""
    trainer = tiny_trainer()
    evaluate = trainer.evaluate

    def scored(samples=None, greedy=True):
        metrics = evaluate(samples, greedy)
        metrics["exact_match"] = trainer.history[-1]["exact_match"] = 1.0 if greedy else 0.0
        return metrics

    trainer.evaluate = scored
    job = make_job(trainer, max_steps=15, target_exact_match=0.5)
    job.start()
    assert job.join(timeout=20)
    snap = job.snapshot()
    assert (snap.state, snap.finished_reason, snap.step) == ("finished", "target reached", 15)
    assert [(row["step"], row["decoding"]) for row in snap.history] == [
        (10, "teacher_forced"), (15, "teacher_forced"), (15, "greedy")]


def test_a_run_short_of_its_target_is_counted_not_rounded():
    def ended(reason: str, exact: float) -> JobSnapshot:
        return JobSnapshot(step=500, state="finished", history=[{"exact_match": exact, "samples": 10_000}], probes=[],
                           error=None, steps_per_s=0.0, elapsed=12.0, finished_reason=reason, loss=0.1,
                           max_steps=500, max_seconds=None)

    assert ended("max steps", 0.9896).short_of(0.99) == (9896, 10_000)  # "99.0%" would hide the miss
    assert ended("time limit", 0.5).short_of(0.99) == (5000, 10_000)
    assert ended("max steps", 0.99).short_of(0.99) is None  # at the target
    assert ended("max steps", 0.5).short_of(None) is None  # no target
    assert ended("stopped", 0.5).short_of(0.99) is None  # the learner stopped it: not short, unfinished


# A script that ends while its job trains (steps of ~50 ms: the exit comes mid-step). Its own exit handler is
# registered before thread_job's, so it runs after it and sees how the job ended.
EXIT_WHILE_TRAINING = """
import atexit, time
atexit.register(lambda: print("after", job.snapshot().state, job.snapshot().finished_reason, flush=True))
from transformer.runs.thread_job import TrainingJob
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer
config = TrainConfig(task="reverse", steps=100_000, batch_size=64, eval_every=100_000)
job = TrainingJob(Trainer(config, {"d_model": 128, "n_heads": 4, "d_ff": 512, "n_enc_layers": 3, "n_dec_layers": 3}))
job.start()
while job.snapshot().step < 3:
    time.sleep(0.01)
print("exit", flush=True)
"""


def test_a_script_that_ends_while_its_job_trains_stops_the_job_and_exits_cleanly():
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_TRAINING], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # not 134: "terminate called ..."
    assert done.stdout.split() == ["exit", "after", "stopped", "stopped"], done.stdout
