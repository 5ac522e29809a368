"""`python -m transformer`: train, evaluate, decode and list models from the command line.

    train  --task NAME [--task-param k=v ...] [--steps N] [--max-seconds S] [--target-accuracy A]
           [--seed K] [model and training options] --out PATH [--name NAME]
    eval   --checkpoint PATH [--samples N] [--seed K]
    decode --checkpoint PATH --input TEXT [--json] [--beam K] [--topk K]
    models [--folder DIR] [--json]

Results go to stdout (for `train` and `eval` the last line is one JSON object); progress goes to stderr.
Bad input of any kind exits with status 2 and one line on stderr starting with "error: ".
Checkpoints ending in `.pt` are read as PyTorch state dicts (see `checkpoints.load_state_dict_file`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import MISSING, fields
from pathlib import Path

from .bundle import ModelBundle
from .checkpoints import list_checkpoints, load_bundle, load_state_dict_file, save_bundle
from .config import NORMS, POSITIONALS, ModelConfig
from .decoding import beam_search, greedy_decode
from .evaluation import evaluate_bundle
from .job import TrainingJob
from .tasks import TASKS
from .training import MODEL_DEFAULTS, OPTIMIZERS, TrainConfig, Trainer

ZOO = Path(__file__).resolve().parents[1] / "assets" / "checkpoints"
BAR_WIDTH = 20

# flag -> (ModelConfig / TrainConfig field, type, help); unset flags keep the library's defaults.
MODEL_OPTIONS = {
    "--d-model": ("d_model", int, "model width"),
    "--heads": ("n_heads", int, "attention heads"),
    "--enc-layers": ("n_enc_layers", int, "encoder layers"),
    "--dec-layers": ("n_dec_layers", int, "decoder layers"),
    "--d-ff": ("d_ff", int, "feed-forward width"),
    "--dropout": ("dropout", float, "dropout probability"),
    "--norm": ("norm", str, f"residual norm placement: {', '.join(NORMS)}"),
    "--positional": ("positional", str, f"positional encoding: {', '.join(POSITIONALS)}"),
}
TRAIN_OPTIONS = {
    "--lr": ("lr", float, "peak learning rate"),
    "--warmup": ("warmup", int, "warmup steps"),
    "--batch-size": ("batch_size", int, "sequences per step"),
    "--optimizer": ("optimizer", str, f"one of {', '.join(OPTIMIZERS)}"),
    "--weight-decay": ("weight_decay", float, "weight decay"),
    "--label-smoothing": ("label_smoothing", float, "label smoothing"),
    "--clip": ("clip", float, "gradient-norm clip (0: off)"),
    "--eval-every": ("eval_every", int, "evaluate every N steps"),
    "--eval-samples": ("eval_samples", int, "held-out pairs per evaluation"),
    "--confirm-samples": ("confirm_samples", int, "held-out pairs confirming a reached target"),
}


class _Parser(argparse.ArgumentParser):
    """Usage mistakes print one line, like every other error, and exit with status 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m transformer", description="Attention Playground's transformer library.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser("train", help="train a model and save it as a checkpoint")
    train.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    train.add_argument("--task-param", action="append", default=[], metavar="KEY=VALUE",
                       help="a task parameter (value read as JSON when it parses, e.g. min_len=10)")
    train.add_argument("--steps", type=int, metavar="N", help=f"stop after N steps (default {TrainConfig().steps})")
    train.add_argument("--max-seconds", type=float, metavar="S", help="stop after S seconds of training")
    train.add_argument("--target-accuracy", type=float, metavar="A",
                       help="stop once held-out greedy exact match reaches A (0..1)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", required=True, type=Path, help="checkpoint path (.safetensors)")
    train.add_argument("--name", help="model name shown in the app (default: task-steps)")
    model_defaults = {f.name: f.default for f in fields(ModelConfig) if f.default is not MISSING} | MODEL_DEFAULTS
    for title, options, prefix, defaults in (
        ("model", MODEL_OPTIONS, "model_", model_defaults),
        ("training", TRAIN_OPTIONS, "train_", TrainConfig().to_dict()),
    ):
        group = train.add_argument_group(f"{title} options")
        for flag, (field, kind, help_text) in options.items():
            group.add_argument(flag, dest=prefix + field, type=kind, metavar=field.upper(),
                               help=f"{help_text} (default {defaults[field]})")
    train.set_defaults(run=run_train)

    evaluate = commands.add_parser("eval", help="held-out metrics of a checkpoint on fresh inputs")
    evaluate.add_argument("--checkpoint", required=True, type=Path)
    evaluate.add_argument("--samples", type=int, default=1000)
    evaluate.add_argument("--seed", type=int, default=1, help="seed of the held-out inputs")
    evaluate.set_defaults(run=run_eval)

    decode = commands.add_parser("decode", help="decode one input, optionally as JSON with attention")
    decode.add_argument("--checkpoint", required=True, type=Path)
    decode.add_argument("--input", required=True)
    decode.add_argument("--json", action="store_true", help="steps, top-k and attention as one JSON object")
    decode.add_argument("--beam", type=int, help="beam search of this width instead of greedy")
    decode.add_argument("--topk", type=int, default=5, help="candidates listed per step with --json")
    decode.set_defaults(run=run_decode)

    models = commands.add_parser("models", help="list checkpoints and their model cards")
    models.add_argument("--folder", type=Path, default=ZOO)
    models.add_argument("--json", action="store_true")
    models.set_defaults(run=run_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, OSError) as exc:  # every library input error is a ValueError
        print(f"error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 2


# ------------------------------------------------------------------------------------------------ train


def parse_task_params(items: list[str]) -> dict:
    """["min_len=10", "name=x"] -> {"min_len": 10, "name": "x"} (values read as JSON when they parse)."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--task-param must look like key=value, got {item!r}")
        try:
            params[key.strip()] = json.loads(text)
        except ValueError:
            params[key.strip()] = text
    return params


def _options(args: argparse.Namespace, prefix: str) -> dict:
    return {name[len(prefix):]: v for name, v in vars(args).items() if name.startswith(prefix) and v is not None}


def _check_limits(args: argparse.Namespace) -> None:
    """Refuse, before any training, what would only fail at the end or never stop sensibly."""
    if args.out.suffix != ".safetensors" or args.out.is_dir():
        raise ValueError(f"--out must name a .safetensors file, got {str(args.out)!r}")
    if args.max_seconds is not None and not 0 < args.max_seconds <= 7 * 24 * 3600:
        raise ValueError(f"--max-seconds must be positive (at most a week), got {args.max_seconds}")
    if args.target_accuracy is not None and not 0 < args.target_accuracy <= 1:
        raise ValueError(f"--target-accuracy is a fraction in (0, 1], got {args.target_accuracy}")


def _progress(snap) -> str:
    filled = int(BAR_WIDTH * min(snap.step / snap.max_steps, 1.0))
    exact = f"{snap.history[-1]['exact_match']:.1%}" if snap.history else "-"
    rate = snap.steps_per_s or (snap.step / snap.elapsed if snap.elapsed else 0.0)  # overall rate once stopped
    return (f"\rstep {snap.step}/{snap.max_steps} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
            f"loss {snap.loss:.4f} exact {exact} {rate:.1f} steps/s   ")


def run_train(args: argparse.Namespace) -> int:
    _check_limits(args)
    settings = {"task": args.task, "task_params": parse_task_params(args.task_param), "seed": args.seed,
                **_options(args, "train_")}
    if args.steps is not None:
        settings["steps"] = args.steps
    trainer = Trainer(TrainConfig(**settings), _options(args, "model_"))
    job = TrainingJob(trainer, max_seconds=args.max_seconds, target_exact_match=args.target_accuracy)
    job.start()
    interrupted = False
    try:
        while not job.join(timeout=0.2):
            sys.stderr.write(_progress(job.snapshot()))
    except KeyboardInterrupt:
        interrupted = True
        job.stop()
        job.join()
    snap = job.snapshot()
    sys.stderr.write(_progress(snap) + "\n")
    if snap.error:
        raise ValueError(f"training failed at step {snap.step}: {snap.error}")
    if not trainer.history or trainer.history[-1]["step"] != trainer.step_count:
        trainer.evaluate()  # stopped between evaluations (Ctrl-C): measure what is being saved
    bundle = trainer.bundle(args.name)
    path = save_bundle(bundle, args.out)
    card = bundle.card
    metrics = {key: card[key] for key in ("steps", "seconds", "exact_match", "token_accuracy", "loss", "samples")}
    print(json.dumps({
        **metrics, "train_loss": trainer.last_loss, "stopped": "interrupted" if interrupted else snap.finished_reason,
        "parameters": card["parameters"], "name": bundle.name, "checkpoint": str(path),
    }))
    return 130 if interrupted else 0  # 130: Ctrl-C (the model was saved all the same)


# ------------------------------------------------------------------------------------------ eval, decode


def load_checkpoint(path: Path) -> ModelBundle:
    """A `.pt` state dict or (anything else) a `.safetensors` checkpoint, validated as untrusted."""
    return load_state_dict_file(path) if path.suffix == ".pt" else load_bundle(path)


def run_eval(args: argparse.Namespace) -> int:
    bundle = load_checkpoint(args.checkpoint)

    live = sys.stderr.isatty()  # a counter rewritten in place on a terminal; nothing in a log file

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\revaluating {done:,}/{total:,}")

    metrics = evaluate_bundle(bundle, args.samples, args.seed, progress if live else None)
    if live:
        sys.stderr.write("\n")
    print(json.dumps({**metrics, "seed": args.seed, "task": bundle.task.name, "checkpoint": str(args.checkpoint)}))
    return 0


def run_decode(args: argparse.Namespace) -> int:
    """Greedy by default. With --beam the beam's best sequence is replayed step by step (every token
    forced), so --json shows the model's own top-k and attention along exactly that sequence."""
    bundle = load_checkpoint(args.checkpoint)
    model, tokenizer = bundle.model, bundle.tokenizer
    extra = {}
    if args.beam is None:
        result = greedy_decode(model, tokenizer, args.input, k=args.topk)
    else:
        best = beam_search(model, tokenizer, args.input, beam=args.beam)
        result = greedy_decode(model, tokenizer, args.input, max_len=len(best.ids), k=args.topk,
                               force=dict(enumerate(best.ids)))
        extra = {"beam": args.beam, "score": best.score}
    print(json.dumps(result.to_dict() | extra) if args.json else result.output_text)
    return 0


# ----------------------------------------------------------------------------------------------- models


def run_models(args: argparse.Namespace) -> int:
    infos = list_checkpoints(args.folder)
    if args.json:
        print(json.dumps([{**vars(i), "path": str(i.path)} for i in infos]))
        return 0
    if not infos:
        print(f"no checkpoints in {args.folder}")
    for info in infos:
        if info.error:
            print(f"{info.path.name}: broken ({info.error})")
            continue
        exact = info.card.get("exact_match")
        shown = "-" if exact is None else f"{exact:.1%}"
        print(f"{info.name:<16} task {info.task:<9} {info.parameters:>9,} params  exact {shown:>6}  "
              f"{info.size / 1e6:.2f} MB  {info.created}  {info.path}")
    return 0
