"""Small training runs for the compare page and runs table tests: a Run of the app (ui/runs.py) driven by an
in-process TrainingJob (the worker process's API, without starting an interpreter), trained a few steps."""

from __future__ import annotations

import dataclasses

from transformer.runs.probe import Probe, example_input
from transformer.runs.thread_job import TrainingJob
from transformer.tasks import make_task
from transformer.training.trainer import Trainer
from ui import runs
from ui.run_settings import MODEL_DEFAULTS_ALL, TRAIN_DEFAULTS, RunSettings

SMALL = {**MODEL_DEFAULTS_ALL, "d_model": 16, "n_heads": 2, "d_ff": 32, "n_enc_layers": 1, "n_dec_layers": 1}


def tiny_run(number: int, steps: int = 0, model: dict | None = None, task: str = "reverse") -> runs.Run:
    """Run `number` of a session: a small model (one layer each side, two heads) on `task`, trained `steps`
    steps and paused (idle at 0 steps); its evaluations every 4 steps on 16 held-out pairs."""
    train = dataclasses.replace(TRAIN_DEFAULTS, task=task, task_params={}, steps=1000, batch_size=16,
                                eval_every=4, eval_samples=16, confirm_samples=16, warmup=2)
    settings = RunSettings(train, {**SMALL, **(model or {})}, None)
    task_obj = make_task(task)
    probe = Probe(example_input(task_obj))
    job = TrainingJob(Trainer(settings.train, settings.model), max_steps=1000, probe=probe, probe_every=4)
    run = runs.Run(job, probe, settings, task_obj, number=number)
    if steps:
        train_more(run, steps)
    return run


def train_more(run: runs.Run, steps: int) -> None:
    """Run exactly `steps` more steps and wait until the job is paused again."""
    target = run.snapshot().step + steps
    run.job.step(steps)
    for _ in range(6000):
        snap = run.snapshot()
        if snap.step >= target and snap.state == "paused":
            return
        run.job.join(0.01)
    raise AssertionError(f"the run did not reach step {target}")


def stop(run: runs.Run) -> None:
    run.stop()
    assert run.job.join(30)
