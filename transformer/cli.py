"""`python -m transformer`: train, evaluate, decode and list models from the command line.

    train  --task NAME [--task-param k=v ...] [--steps N] [--max-seconds S] [--target-accuracy A]
           (or --task-file PAIRS.tsv|.csv [--tokenization char|sentencepiece]: your own two-column data)
           [--seed K] [model and training options, --device auto|cpu|cuda among them] --out PATH [--name NAME]
           (no model shape or recipe flag: the task's preset, transformer.training.presets; --steps may still be set)
    eval   --checkpoint PATH [--samples N] [--seed K] [--device auto|cpu|cuda] [--lengths A-B]
    decode --checkpoint PATH --input TEXT [--json] [--beam K] [--topk K]
           [--sample [--temperature T] [--top-k K] [--top-p P] [--seed S]]
    ablate --checkpoint PATH [--samples N] [--mode zero|mean] [--heads KIND:L1H2,...] [--seed K]
    models [--folder DIR] [--json]

Results go to stdout (for `train` and `eval` the last line is one JSON object); progress goes to stderr.
Bad input of any kind exits with status 2 and one line on stderr starting with "error: ", before any work
where it can be known before: `--out` is checked before training (a writable place, a regular file, not
a shipped model unless --force), and a run, an evaluation or a decode whose estimated memory exceeds its
budget (transformer.network.budget: AP_RUN_BUDGET_MB, AP_MODEL_BUDGET_MB) is refused with the estimate.
Every JSON output is strict JSON: a non-finite number is written as null, and `decode --json` then says
how many there were. Negative numbers are values (`--lr -1`, `--lr -inf`), never taken for flags.
Checkpoints ending in `.pt` are read as PyTorch state dicts (see `checkpoints.load_state_dict_file`).
Text is UTF-8 whatever the locale (LANG=C, none, one that is not UTF-8): stdout and stderr are written as UTF-8, and
--input, --name and a --task-file's name are read as the UTF-8 bytes typed; JSON escapes what is not ASCII.
"""

from __future__ import annotations

import argparse
import codecs
import json
import math
import os
import re
import stat
import sys
import tempfile
from dataclasses import MISSING, fields
from pathlib import Path

from transformer.analysis.ablation import ablated, check_heads, exact_match, head_means, importance
from transformer.analysis.knockout import MODES, Head
from transformer.network.budget import evaluation_estimate
from transformer.training.config import run_estimate
from .bundle import ModelBundle
from transformer.store.checkpoints import load_bundle, load_state_dict_file, save_bundle
from transformer.store.headers import list_checkpoints
from transformer.network.config import INITS, NORMS, POSITIONALS, ModelConfig
from transformer.network.decoding import beam_search, check_decode_budget, greedy_decode
from transformer.training.devices import DEVICES, resolve_device
from transformer.network.sampling import SampleSettings, sample
from transformer.analysis.evaluation import check_samples, evaluate_bundle
from transformer.runs.thread_job import TrainingJob
from transformer.analysis.lengths import evaluate_lengths, parse_lengths
from transformer.training.presets import PRESETS
from .tasks import TASKS, CustomTask
from transformer.tasks.custom import TOKENIZATIONS, parse_pairs, read_data_file
from transformer.training.config import MODEL_DEFAULTS, OPTIMIZERS, SCHEDULES, TrainConfig
from transformer.training.trainer import Trainer

ZOO = Path(__file__).resolve().parents[1] / "assets" / "checkpoints"
BAR_WIDTH = 20
MAX_PARAM_DEPTH = 16  # nesting levels a --task-param value may have (task parameters are plain numbers)
REFERENCE_PAIRS = 500  # held-out pairs whose head outputs `ablate --mode mean` averages (a seed apart from the scored)
MAX_MESSAGE = 500  # characters of an error line (a message may quote a huge input)
TASK_WIDTH = max(map(len, [*TASKS, CustomTask.name]))  # the task column of `models`

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
    "--qk-norm": ("qk_norm", "on_off", "RMS-normalise each head's queries and keys: on or off"),
    "--init": ("init", str, f"initial weights: {', '.join(INITS)} (identity: zero branch outputs, small embeddings)"),
}
TRAIN_OPTIONS = {
    "--lr": ("lr", float, "peak learning rate"),
    "--warmup": ("warmup", int, "warmup steps"),
    "--schedule": ("schedule", str, f"learning-rate decay after the warmup: {', '.join(SCHEDULES)}"),
    "--batch-size": ("batch_size", int, "sequences per step"),
    "--optimizer": ("optimizer", str, f"one of {', '.join(OPTIMIZERS)} (muon: Muon for the layer matrices + Adam)"),
    "--muon-lr": ("muon_lr", float, "peak learning rate of Muon's matrices (--optimizer muon)"),
    "--muon-momentum": ("muon_momentum", float, "Muon's momentum (--optimizer muon; torch.optim.Muon's default 0.95)"),
    "--beta1": ("beta1", float, "Adam's first-moment decay rate"),
    "--beta2": ("beta2", float, "Adam's second-moment decay rate"),
    "--weight-decay": ("weight_decay", float, "weight decay"),
    "--label-smoothing": ("label_smoothing", float, "label smoothing"),
    "--clip": ("clip", float, "gradient-norm clip (0: off)"),
    "--eval-every": ("eval_every", int, "evaluate every N steps"),
    "--eval-samples": ("eval_samples", int, "held-out pairs per evaluation"),
    "--confirm-samples": ("confirm_samples", int, "held-out pairs confirming a reached target"),
    "--device": ("device", str, f"where to train: {', '.join(DEVICES)} (auto: CUDA when available)"),
}


class _Parser(argparse.ArgumentParser):
    """Usage mistakes print one line, like every other error, and exit with status 2. Any negative number
    (-1, -0.5, -1e-3, -inf, -nan) is a value, not a flag, so it reaches validation and its clear message."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)

    def error(self, message):
        self.exit(2, f"error: {_one_line(message)} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m transformer", description="Attention Playground's transformer library.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser("train", help="train a model and save it as a checkpoint")
    which = train.add_mutually_exclusive_group(required=True)
    which.add_argument("--task", help=f"one of {', '.join(TASKS)}")
    which.add_argument("--task-file", type=Path, metavar="PAIRS",
                       help="your own data: a UTF-8 TSV or CSV file of (source, target) lines")
    train.add_argument("--tokenization", choices=TOKENIZATIONS, default="char",
                       help="with --task-file: one token per character, or sentencepiece subwords (default char)")
    train.add_argument("--task-param", action="append", default=[], metavar="KEY=VALUE",
                       help="a task parameter (value read as JSON when it parses, e.g. min_len=10)")
    train.add_argument("--steps", type=int, metavar="N", help=f"stop after N steps (default {TrainConfig().steps})")
    train.add_argument("--max-seconds", type=float, metavar="S", help="stop after S seconds of training")
    train.add_argument("--target-accuracy", type=float, metavar="A",
                       help="stop once held-out greedy exact match reaches A (0..1)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", required=True, type=Path, help="checkpoint path (.safetensors)")
    train.add_argument("--force", action="store_true",
                       help="allow --out to replace or add a shipped model in assets/checkpoints")
    train.add_argument("--name", type=typed_text, help="model name shown in the app (default: task-steps)")
    model_defaults = {f.name: f.default for f in fields(ModelConfig) if f.default is not MISSING} | MODEL_DEFAULTS
    for title, options, prefix, defaults in (
        ("model", MODEL_OPTIONS, "model_", model_defaults),
        ("training", TRAIN_OPTIONS, "train_", TrainConfig().to_dict()),
    ):
        group = train.add_argument_group(f"{title} options", "without any model or recipe option: the task's "
                                         "preset (transformer.training.presets) instead of the defaults shown")
        for flag, (field, kind, help_text) in options.items():
            group.add_argument(flag, dest=prefix + field, type=_on_off if kind == "on_off" else kind,
                               metavar=field.upper(),
                               help=f"{help_text} (default {defaults[field]})")
    train.set_defaults(run=run_train)

    evaluate = commands.add_parser("eval", help="held-out metrics of a checkpoint on fresh inputs")
    evaluate.add_argument("--checkpoint", required=True, type=Path)
    evaluate.add_argument("--samples", type=int, default=1000)
    evaluate.add_argument("--seed", type=int, default=1, help="seed of the held-out inputs")
    evaluate.add_argument("--device", default="auto", help=f"where to evaluate: {', '.join(DEVICES)}")
    evaluate.add_argument("--lengths", metavar="A-B",
                          help="by input length instead: --samples held-out inputs of each length A..B, which may "
                               "pass the trained lengths (reverse, copy, sort; at most the model's max_len - 1)")
    evaluate.set_defaults(run=run_eval)

    decode = commands.add_parser("decode", help="decode one input, optionally as JSON with attention")
    decode.add_argument("--checkpoint", required=True, type=Path)
    decode.add_argument("--input", required=True, type=typed_text)
    decode.add_argument("--json", action="store_true", help="steps, top-k and attention as one JSON object")
    decode.add_argument("--beam", type=int, help="beam search of this width instead of greedy")
    decode.add_argument("--topk", type=int, default=5, help="candidates listed per step with --json")
    sampling = decode.add_argument_group("sampling options (with --sample)")
    sampling.add_argument("--sample", action="store_true", help="draw each token instead of taking the argmax")
    sampling.add_argument("--temperature", type=float, metavar="T", help="> 0; below 1 sharper (default 1)")
    sampling.add_argument("--top-k", type=int, metavar="K", help="draw only from the K most likely tokens (>= 1)")
    sampling.add_argument("--top-p", type=float, metavar="P",
                          help="draw only from the smallest set of tokens with mass >= P, in (0, 1] (default 1)")
    sampling.add_argument("--seed", type=int, metavar="S", help="seed of the draws (default 0)")
    decode.set_defaults(run=run_decode)

    ablate = commands.add_parser("ablate", help="held-out exact match with attention heads knocked out")
    ablate.add_argument("--checkpoint", required=True, type=Path)
    ablate.add_argument("--samples", type=int, default=500, help="held-out inputs (default 500)")
    ablate.add_argument("--mode", choices=MODES, default="zero",
                        help="zero a head's output, or put its mean over a reference batch in its place")
    ablate.add_argument("--heads", metavar="KIND:L1H2,...",
                        help="ablate these heads together (kinds: encoder_self, decoder_self, cross); "
                             "default: every head alone")
    ablate.add_argument("--seed", type=int, default=1, help="seed of the held-out inputs")
    ablate.set_defaults(run=run_ablate)

    models = commands.add_parser("models", help="list checkpoints and their model cards")
    models.add_argument("--folder", type=Path, default=ZOO)
    models.add_argument("--json", action="store_true")
    models.set_defaults(run=run_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    utf8_streams()
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, OSError) as exc:  # every library input error is a ValueError
        message = _one_line(str(exc)) or type(exc).__name__
    except RecursionError:
        message = "the input is nested too deeply"
    except MemoryError:
        message = "out of memory (lower AP_MODEL_BUDGET_MB / AP_RUN_BUDGET_MB so that such work is refused)"
    print(f"error: {message}", file=sys.stderr)
    return 2


def utf8_streams() -> None:
    """Write stdout and stderr as UTF-8 where the locale chose another encoding (Python leaves UTF-8 mode off
    under, e.g., PYTHONUTF8=0 LANG=C: ASCII, where a Chinese answer or message could not be printed)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        if codecs.lookup(encoding).name != "utf-8" and hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors=stream.errors)


def typed_text(value: str) -> str:
    """A text argument as typed: UTF-8 bytes that a non-UTF-8 locale decoded otherwise (under ASCII to surrogate
    escapes) are decoded as UTF-8 again; anything else is kept."""
    try:
        return os.fsencode(value).decode("utf-8")
    except UnicodeError:
        return value


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def strict_json(data, flag: bool = False) -> tuple[str, int]:
    """(JSON text that is strict JSON, how many non-finite numbers in `data` were written as null). With
    `flag` (a dict `data`), such a text also holds "non_finite_values" (the count) and a "warning"."""
    try:
        return json.dumps(data, allow_nan=False), 0
    except ValueError:  # NaN or infinity somewhere: the rare path walks the data
        count = [0]

        def finite(value):
            if isinstance(value, float) and not math.isfinite(value):
                count[0] += 1
                return None
            if isinstance(value, dict):
                return {key: finite(v) for key, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [finite(v) for v in value]
            return value

        clean = finite(data)
        if flag:
            clean |= {"non_finite_values": count[0], "warning": non_finite_warning(count[0])}
        return json.dumps(clean, allow_nan=False), count[0]


def non_finite_warning(count: int) -> str:
    return f"the model produced {count:,} non-finite values (NaN or infinity); they are written as null"


# ------------------------------------------------------------------------------------------------ train


def parse_task_params(items: list[str]) -> dict:
    """["min_len=10", "name=x"] -> {"min_len": 10, "name": "x"} (values read as JSON when they parse)."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--task-param must look like key=value, got {item!r}")
        try:
            value = json.loads(text)
        except RecursionError:
            raise ValueError(f"--task-param {key.strip()[:40]} is nested too deeply "
                             f"(at most {MAX_PARAM_DEPTH} levels)") from None
        except ValueError:
            value = text
        if _depth(value) > MAX_PARAM_DEPTH:
            raise ValueError(f"--task-param {key.strip()[:40]} is nested too deeply (at most {MAX_PARAM_DEPTH} levels)")
        params[key.strip()] = value
    return params


def _depth(value) -> int:
    """Nesting levels of a JSON value, without recursion: 0 for a number, 2 for [[1]]."""
    deepest, stack = 0, [(value, 0)]
    while stack and deepest <= MAX_PARAM_DEPTH:
        item, outer = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, outer + 1)
            stack.extend((child, outer + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _options(args: argparse.Namespace, prefix: str) -> dict:
    return {name[len(prefix):]: v for name, v in vars(args).items() if name.startswith(prefix) and v is not None}


def _on_off(text: str) -> bool:
    """on/true/1 -> True, off/false/0 -> False (a usage error otherwise)."""
    words = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}
    if text.lower() not in words:
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return words[text.lower()]


NOT_RECIPE = {"eval_every", "eval_samples", "confirm_samples", "device"}  # these flags keep the preset


def train_settings(args: argparse.Namespace) -> tuple[dict, dict, str | None]:
    """(TrainConfig settings, model overrides, the preset's task or None): the task's preset when no model
    shape or recipe flag is given, else the library defaults with the flags."""
    model, recipe = _options(args, "model_"), _options(args, "train_")
    chosen = PRESETS.get(args.task) if args.task and not model and not set(recipe) - NOT_RECIPE else None
    params = custom_task_params(args) if args.task_file is not None else parse_task_params(args.task_param)
    settings = {**(chosen.train if chosen else {}), "task": args.task or CustomTask.name,
                "task_params": params, "seed": args.seed, **recipe}
    if args.steps is not None:
        settings["steps"] = args.steps
    return settings, (dict(chosen.model) if chosen else model), chosen and chosen.task


def custom_task_params(args: argparse.Namespace) -> dict:
    """The custom task's parameters from --task-file (ValueError naming every problem the data has; what was
    skipped, such as a header row, and the held-out split's size go to stderr)."""
    if args.task_param:
        raise ValueError("--task-param does not apply to --task-file")
    parsed = parse_pairs(read_data_file(args.task_file))
    if not parsed.ok:
        raise ValueError(f"{args.task_file}: " + " · ".join(parsed.problems))
    for note in parsed.notes:
        print(f"{args.task_file}: {note}", file=sys.stderr)
    title = typed_text(args.task_file.stem)[:64].strip() or "my data"
    return {"data": parsed.text, "title": title, "tokenization": args.tokenization}


def _check_limits(args: argparse.Namespace) -> None:
    """Refuse, before any training, what would only fail at the end or never stop sensibly."""
    check_out(args.out, args.force)
    if args.max_seconds is not None and not 0 < args.max_seconds <= 7 * 24 * 3600:
        raise ValueError(f"--max-seconds must be positive (at most a week), got {args.max_seconds}")
    if args.target_accuracy is not None and not 0 < args.target_accuracy <= 1:
        raise ValueError(f"--target-accuracy is a fraction in (0, 1], got {args.target_accuracy}")


def check_out(out: Path, force: bool = False) -> None:
    """ValueError, naming `out` as given, unless a checkpoint can be saved there: a `.safetensors` name, not
    a folder or special file (FIFO, device, a symlink to one), a folder that exists or can be made and
    can be written (tried with a temp file, removed at once), and not in the shipped model folder
    (assets/checkpoints) unless `force`."""
    name = str(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"--out must name a .safetensors file, got {name!r}")
    try:
        found = os.stat(out)
    except FileNotFoundError:
        found = None
    except OSError as exc:
        raise ValueError(f"cannot save to --out {name}: {exc.strerror or exc}") from None
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ValueError(f"--out {name} is a folder; give a file name ending in .safetensors")
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise ValueError(f"--out {name} is not a regular file (a FIFO, device or socket); refused")
    if Path(os.path.realpath(out)).parent == Path(os.path.realpath(ZOO)) and not force:
        what = "replace the shipped model" if found is not None else "add a model to the shipped ones"
        raise ValueError(f"--out {name} would {what} in assets/checkpoints; pass --force to do that")
    folder = out.parent
    while not folder.exists() and folder != folder.parent:  # save_bundle makes the missing folders
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"cannot save to --out {name}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:
        raise ValueError(f"cannot save to --out {name}: the folder {folder} is not writable "
                         f"({exc.strerror or type(exc).__name__})") from None
    os.close(fd)
    os.unlink(probe)


def _progress(snap) -> str:
    filled = int(BAR_WIDTH * min(snap.step / snap.max_steps, 1.0))
    exact = f"{snap.history[-1]['exact_match']:.1%}" if snap.history else "-"
    rate = snap.steps_per_s or (snap.step / snap.elapsed if snap.elapsed else 0.0)  # overall rate once stopped
    loss = f"{snap.loss:.4f}" if snap.step else "-"  # none before the first step (it read "nan", as if diverged)
    return (f"\rstep {snap.step}/{snap.max_steps} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
            f"loss {loss} exact {exact} {rate:.1f} steps/s   ")


def run_train(args: argparse.Namespace) -> int:
    _check_limits(args)
    settings, model, preset = train_settings(args)
    run_estimate(TrainConfig(**settings), model).check()  # before any model exists
    trainer = Trainer(TrainConfig(**settings), model)
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
    if short := snap.short_of(args.target_accuracy):
        sys.stderr.write(f"under --target-accuracy {args.target_accuracy:g}: {short[0]:,} of {short[1]:,} held-out "
                         "inputs exactly right at the end; more --steps (or --max-seconds) or another --seed may "
                         "reach it\n")
    bundle = trainer.bundle(args.name)
    try:
        path = save_bundle(bundle, args.out)
    except OSError as exc:  # its text would name the temp file; the user knows only --out
        raise ValueError(f"could not save --out {args.out}: {exc.strerror or type(exc).__name__}") from None
    card = bundle.card
    metrics = {key: card[key] for key in ("steps", "seconds", "exact_match", "token_accuracy", "loss", "samples")}
    print(strict_json({
        **metrics, "train_loss": trainer.last_loss, "stopped": "interrupted" if interrupted else snap.finished_reason,
        "parameters": card["parameters"], "name": bundle.name, "checkpoint": str(path), "preset": preset,
        "task": bundle.task.name, "task_params": card["task_params"],
    })[0])
    return 130 if interrupted else 0  # 130: Ctrl-C (the model was saved all the same)


# ------------------------------------------------------------------------------------------ eval, decode


def load_checkpoint(path: Path) -> ModelBundle:
    """A `.pt` state dict or (anything else) a `.safetensors` checkpoint, validated as untrusted."""
    return load_state_dict_file(path) if path.suffix == ".pt" else load_bundle(path)


def run_eval(args: argparse.Namespace) -> int:
    lengths = parse_lengths(args.lengths) if args.lengths is not None else None  # before the checkpoint is read
    device = resolve_device(args.device)  # ValueError (exit 2) for an unknown name, or cuda without CUDA
    bundle = load_checkpoint(args.checkpoint)
    bundle.model.to(device)  # evaluation follows the model's device
    if args.lengths is not None:
        return _eval_lengths(args, bundle, lengths)
    task = bundle.task  # lengths in characters: at least the token counts, whatever the tokenizer
    evaluation_estimate(bundle.config, args.samples, task.max_source_chars + 1, task.max_target_chars + 1).check()

    live = sys.stderr.isatty()  # a counter rewritten in place on a terminal; nothing in a log file

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\revaluating {done:,}/{total:,}")

    metrics = evaluate_bundle(bundle, args.samples, args.seed, progress if live else None)
    if live:
        sys.stderr.write("\n")
    print(strict_json({**metrics, "seed": args.seed, "task": bundle.task.name, "checkpoint": str(args.checkpoint)})[0])
    return 0


def _eval_lengths(args: argparse.Namespace, bundle: ModelBundle, lengths: tuple[int, int]) -> int:
    """`eval --lengths A-B`: one JSON object with the trained range and a row per length (analysis.lengths)."""
    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\revaluated {done}/{total} lengths")

    report = evaluate_lengths(bundle, *lengths, args.samples, args.seed, progress if sys.stderr.isatty() else None)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    print(strict_json({**report, "checkpoint": str(args.checkpoint)})[0])
    return 0


def run_decode(args: argparse.Namespace) -> int:
    """Greedy by default. With --beam the beam's best sequence is replayed step by step (every token
    forced), so --json shows the model's own top-k and attention along exactly that sequence. With --sample
    --json shows each step's distributions (model, tempered, filtered) for its top-k and the drawn token."""
    settings = _sample_settings(args)  # refused before the checkpoint is read
    bundle = load_checkpoint(args.checkpoint)
    model, tokenizer = bundle.model, bundle.tokenizer
    source_len = len(tokenizer.encode(args.input)) + 1  # TokenizerError first, as the decode would give it
    check_decode_budget(model, source_len, model.config.max_len, json_output=args.json)  # before any work
    extra = {}
    if settings is not None:
        drawn = sample(model, tokenizer, args.input, settings)
        print(strict_json(drawn.to_dict(tokenizer, args.topk), flag=True)[0] if args.json else drawn.output_text)
        return 0
    if args.beam is None:
        result = greedy_decode(model, tokenizer, args.input, k=args.topk)
    else:
        best = beam_search(model, tokenizer, args.input, beam=args.beam)
        result = greedy_decode(model, tokenizer, args.input, max_len=len(best.ids), k=args.topk,
                               force=dict(enumerate(best.ids)))
        extra = {"beam": args.beam, "score": best.score}
    if not args.json:
        print(result.output_text)
        return 0
    text, non_finite = strict_json(result.to_dict() | extra, flag=True)
    if non_finite:
        print(f"warning: {non_finite_warning(non_finite)}", file=sys.stderr)
    print(text)
    return 0


SAMPLE_FLAGS = ("temperature", "top_k", "top_p", "seed")


def _sample_settings(args: argparse.Namespace) -> SampleSettings | None:
    """The --sample settings (ValueError for a bad value), or None for greedy / beam decoding."""
    chosen = {name: getattr(args, name) for name in SAMPLE_FLAGS if getattr(args, name) is not None}
    if not args.sample:
        if chosen:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in chosen)
            raise ValueError(f"{flags} {'applies' if len(chosen) == 1 else 'apply'} only with --sample")
        return None
    if args.beam is not None:
        raise ValueError("--sample and --beam exclude each other")
    if args.topk < 1:
        raise ValueError(f"--topk must be >= 1, got {args.topk}")
    return SampleSettings(**chosen)


# ----------------------------------------------------------------------------------------------- models


def run_ablate(args: argparse.Namespace) -> int:
    """One JSON object: the baseline exact match and, per head ablated alone (or for --heads together), the
    exact match and its drop; layers and heads count from 1 as on the pages."""
    heads = [Head.parse(item) for item in args.heads.split(",")] if args.heads is not None else None
    bundle = load_checkpoint(args.checkpoint)
    if heads is not None:
        heads = check_heads(bundle.model, heads)
    task = bundle.task
    check_samples(args.samples)
    evaluation_estimate(bundle.config, args.samples, task.max_source_chars + 1, task.max_target_chars + 1).check()
    pairs = task.pairs(args.samples, args.seed, "heldout")
    means = head_means(bundle.model, bundle.tokenizer, task.pairs(REFERENCE_PAIRS, args.seed + 1, "heldout")) \
        if args.mode == "mean" else None
    report = {"checkpoint": str(args.checkpoint), "task": task.name, "mode": args.mode, "samples": args.samples,
              "seed": args.seed}
    if heads is None:
        result = importance(bundle.model, bundle.tokenizer, pairs, args.mode, means, removal=False)
        report |= {"baseline": result["baseline"], "heads": [
            {**row, "layer": row["layer"] + 1, "head": row["head"] + 1} for row in result["heads"]]}
    else:
        baseline = exact_match(bundle.model, bundle.tokenizer, pairs)
        with ablated(bundle.model, heads, args.mode, means):
            together = exact_match(bundle.model, bundle.tokenizer, pairs)
        report |= {"baseline": baseline, "ablated": [str(h) for h in heads], "exact_match": together,
                   "drop": baseline - together}
    print(strict_json(report)[0])
    return 0


def run_models(args: argparse.Namespace) -> int:
    infos = list_checkpoints(args.folder)
    if args.json:
        print(strict_json([{**vars(i), "path": str(i.path)} for i in infos])[0])
        return 0
    if not infos:
        print(f"no checkpoints in {args.folder}")
    for info in infos:  # one line each, whatever a card holds: one bad file never hides the others
        if info.error:
            print(f"{info.path.name}: broken ({_one_line(info.error)})")
            continue
        exact = info.card.get("exact_match")
        shown = f"{exact:.1%}" if isinstance(exact, (int, float)) else "-"
        notes = f"  ({len(info.notes)} card field(s) dropped as invalid)" if info.notes else ""
        print(f"{_one_line(info.name):<16} task {info.task:<{TASK_WIDTH}} {info.parameters:>9,} params  "
              f"exact {shown:>6}  {info.size / 1e6:.2f} MB  {_one_line(info.created)}  {info.path}{notes}")
    return 0
