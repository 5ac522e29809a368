"""Resource budgets: estimated peak memory and time of loading, decoding and training, before any work.

Every estimate is arithmetic on a `ModelConfig` (plus, for training, the batch size and sequence lengths;
for decoding, the source length and the number of steps), so it costs nothing and allocates nothing. An
entry point builds the estimate, calls `check()` and only then allocates; over the limit it gets one
`BudgetError` whose one-line message gives the estimate and the limit.

Limits (megabytes of 2**20 bytes), settings read at each check (transformer.settings):

    AP_MODEL_BUDGET_MB  1024   loading one model, or one traced decode of it (the CLI, every page)
    AP_RUN_BUDGET_MB    2048   one training run: weights, gradients, optimizer state, activations, evaluation

What is counted (float32, 4 bytes a number; P = parameters):
  * weights 4P; loading also holds the file's bytes and the tensors read from them (2 x 4P more);
  * decoding: attention traces, scores and weights for every kind, layer, head, query and key:
    2 x 4 x heads x (enc_layers x S^2 + dec_layers x (T^2 + T x S)) for a source of S tokens and T steps
    (by default S = T = max_len, the worst case), plus the KV cache and one step's full trace;
    `decode --json` adds the JSON text of every attention number (Python floats, then text: ~60 bytes each);
    a detailed trace (the code page's) adds every layer's intermediates: per encoder layer 14 S d_model + S d_ff
    numbers (q, k, v, the heads, their concatenation and W^O's output; each sublayer's input, normalised input,
    output and sum; the feed-forward's hidden layer), per decoder layer 22 T d_model + 2 S d_model + T d_ff;
    plus the two stacks' outputs;
  * training: weights, gradients and Adam's two moments (4 x 4P), the activations kept for the backward
    pass of one batch (per token and layer: ~12 d_model + 2 d_ff numbers, plus 3 attention matrices of
    heads x keys), the logits three times (logits, log-softmax, gradient), and the larger of that and an
    evaluation chunk of EVAL_CHUNK sequences without gradients.
The estimates are upper-bound-ish approximations, checked against measured peak RSS in
tests/unit/test_hostile.py (within a factor of 3 either way).

Time: FLOPs (2 per multiply-add; training 3x the forward pass) divided by FLOPS_PER_SECOND, the rate
one CPU thread reached on this project's machine, plus a fixed overhead per traced decoding step and layer
(which dominates small models) or per training step. Rough: it orders settings, it is not a stopwatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformer import settings

from .config import ModelConfig

MB = 2**20
FLOAT = 4  # bytes of a float32
MODEL_BUDGET_ENV, RUN_BUDGET_ENV = "AP_MODEL_BUDGET_MB", "AP_RUN_BUDGET_MB"  # transformer.settings
EVAL_CHUNK = 1000  # sequences an evaluation decodes at once (analysis.evaluation): bounds its memory
JSON_BYTES_PER_NUMBER = 64  # a traced float as a Python float in a list (32 B) and as JSON text (~20 B, twice)
JSON_SECONDS_PER_NUMBER = 5e-7  # tolist() and json.dumps of one attention number
FLOPS_PER_SECOND = 2.5e10  # measured float32 training rate of one CPU thread (d_model 64-512)
TRACED_LAYER_STEP_S = 6e-4  # a traced greedy step costs about this per decoder layer whatever its size
TRAIN_STEP_OVERHEAD_S, LAYER_OVERHEAD_S = 5e-3, 2e-3  # batch building, optimizer; dispatch per layer


class BudgetError(ValueError):
    """An estimate is over its limit; the message gives both, in one line."""


def limit_mb(env: str) -> float:
    """The limit in MB that the setting `env` holds (transformer.settings); BudgetError for a bad value."""
    try:
        return settings.get(env)
    except settings.SettingError as exc:
        raise BudgetError(str(exc)) from None


def model_limit_mb() -> float:
    return limit_mb(MODEL_BUDGET_ENV)


def run_limit_mb() -> float:
    return limit_mb(RUN_BUDGET_ENV)


@dataclass(frozen=True)
class Estimate:
    """Estimated peak bytes by part, FLOPs and seconds of one piece of work; `env` names its limit."""

    what: str  # "loading this model", "decoding this input", "this training run", ...
    parts: dict[str, int]  # part -> bytes, e.g. {"weights": ..., "traces": ...}
    flops: float
    seconds: float
    env: str = MODEL_BUDGET_ENV
    detail: str = ""  # the sizes that drive it, e.g. "1024 steps x 12+12 layers x 16 heads"
    extra: dict = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(self.parts.values())

    @property
    def mb(self) -> float:
        return self.bytes / MB

    def limit_mb(self) -> float:
        return run_limit_mb() if self.env == RUN_BUDGET_ENV else model_limit_mb()

    def fits(self) -> bool:
        return self.mb <= self.limit_mb()

    def message(self) -> str:
        biggest = max(self.parts, key=self.parts.get)
        detail = f" ({self.detail})" if self.detail else ""
        return (f"{self.what} would need about {_size(self.bytes)}, mostly {biggest}{detail}; the limit is "
                f"{_size(self.limit_mb() * MB)} (set {self.env} to change it)")

    def check(self) -> "Estimate":
        """Self when within the limit; BudgetError otherwise."""
        if not self.fits():
            raise BudgetError(self.message())
        return self


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:,.0f} s"


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / MB:.0f} MB"


# -------------------------------------------------------------------------------------------- counting


def parameter_count(config: ModelConfig) -> int:
    """Exactly `EncoderDecoder(config).num_parameters()`, by arithmetic."""
    d, f = config.d_model, config.d_ff
    attention = 4 * (d * d + d) + (2 * config.d_head if config.qk_norm else 0)
    feed_forward = d * f + f + f * d + d
    norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    stack_norms = 2 * norm if config.norm == "pre" else 0
    positions = 2 * config.max_len * d if config.positional == "learned" else 0
    embeddings = (config.src_vocab + config.tgt_vocab) * d + positions
    generator = d * config.tgt_vocab + config.tgt_vocab
    return (config.n_enc_layers * encoder_layer + config.n_dec_layers * decoder_layer + stack_norms + embeddings
            + generator)


def _matmul_params(config: ModelConfig) -> tuple[int, int]:
    """Multiply-adds per token of one encoder layer and one decoder layer (projections and feed-forward)."""
    d, f = config.d_model, config.d_ff
    return 4 * d * d + 2 * d * f, 8 * d * d + 2 * d * f


def trace_numbers(config: ModelConfig, source_len: int, steps: int) -> int:
    """Attention weights of one decode: heads x (enc_layers x S^2 + dec_layers x (T^2 + T x S))."""
    s, t = source_len, steps
    return config.n_heads * (config.n_enc_layers * s * s + config.n_dec_layers * (t * t + t * s))


def _lengths(config: ModelConfig, source_len: int | None, steps: int | None) -> tuple[int, int]:
    s = config.max_len if source_len is None else max(1, min(int(source_len), config.max_len))
    t = config.max_len if steps is None else max(1, min(int(steps), config.max_len))
    return s, t


# ------------------------------------------------------------------------------------------- estimates


def load_estimate(config: ModelConfig) -> Estimate:
    """Loading a checkpoint: the model's weights, the file's bytes and the tensors read from them."""
    weights = FLOAT * parameter_count(config)
    return Estimate("loading this model", {"weights": weights, "file and tensor copies": 2 * weights},
                    flops=0.0, seconds=weights / 1e9, env=MODEL_BUDGET_ENV,
                    detail=f"{parameter_count(config):,} parameters")


def detail_numbers(config: ModelConfig, source_len: int, steps: int) -> int:
    """The intermediate tensors' numbers a detailed trace of one pass keeps (see the module's docstring)."""
    s, t, d, f = source_len, steps, config.d_model, config.d_ff
    return (config.n_enc_layers * (14 * s * d + s * f) + config.n_dec_layers * (22 * t * d + 2 * s * d + t * f)
            + (s + t) * d)


def decode_estimate(config: ModelConfig, source_len: int | None = None, steps: int | None = None,
                    json_output: bool = False, rows: int = 1, detail: bool = False) -> Estimate:
    """One traced greedy decode of a `source_len`-token source (with </s>) for up to `steps` steps, the
    model loaded; defaults: both max_len (the worst case a model allows). `json_output`: `decode --json`.
    `rows`: a traced batch of that many sequences (the masks page's teacher-forced pass). `detail`: a detailed
    trace (the code page's teacher-forced pass)."""
    s, t = _lengths(config, source_len, steps)
    d, heads, layers = config.d_model, config.n_heads, config.n_enc_layers + config.n_dec_layers
    numbers = rows * trace_numbers(config, s, t)
    parts = {
        "weights": FLOAT * parameter_count(config),
        "attention traces": 2 * FLOAT * numbers,  # scores and weights
        "KV cache and activations": rows * FLOAT * (config.n_dec_layers * 4 * d * (s + t)
                                                    + layers * s * (d + config.d_ff) + t * config.tgt_vocab),
    }
    if json_output:
        parts["JSON output"] = JSON_BYTES_PER_NUMBER * numbers
    if detail:
        parts["intermediate tensors"] = rows * FLOAT * detail_numbers(config, s, t)
    enc_mac, dec_mac = _matmul_params(config)
    flops = 2 * (s * config.n_enc_layers * enc_mac + t * config.n_dec_layers * dec_mac + t * d * config.tgt_vocab)
    flops += 4 * d * (config.n_enc_layers * s * s + config.n_dec_layers * (t * t / 2 + t * s))
    seconds = flops / FLOPS_PER_SECOND + t * config.n_dec_layers * TRACED_LAYER_STEP_S
    if json_output:
        seconds += numbers * JSON_SECONDS_PER_NUMBER
    detail = (f"traces of {s} source tokens and up to {t} steps x {config.n_enc_layers}+{config.n_dec_layers} "
              f"layers x {heads} heads")
    return Estimate("decoding this input" if source_len is not None else "decoding with this model", parts,
                    flops, seconds, MODEL_BUDGET_ENV, detail)


def training_estimate(config: ModelConfig, batch_size: int, source_len: int | None = None,
                      target_len: int | None = None, eval_rows: int | None = None) -> Estimate:
    """One training run of `config` on batches of `batch_size` pairs of `source_len` source tokens (with
    </s>) and `target_len` decoder tokens (with <s>); defaults max_len. Evaluation runs `eval_rows`
    sequences at once without gradients (the library evaluates in chunks of EVAL_CHUNK)."""
    s, t = _lengths(config, source_len, target_len)
    b, d, f, h, v = int(batch_size), config.d_model, config.d_ff, config.n_heads, config.tgt_vocab
    le, ld = config.n_enc_layers, config.n_dec_layers
    weights = FLOAT * parameter_count(config)
    per_token_enc = 12 * d + 2 * f + 3 * h * s
    per_token_dec = 18 * d + 2 * f + 3 * h * (t + s)
    activations = FLOAT * b * (s * (le * per_token_enc + 2 * d) + t * (ld * per_token_dec + 2 * d) + 3 * t * v)
    r = EVAL_CHUNK if eval_rows is None else max(1, int(eval_rows))
    evaluation = _evaluation_bytes(config, r, s, t)
    parts = {
        "weights": weights,
        "gradients and optimizer state": 3 * weights,
        "activations" if activations >= evaluation else "evaluation": max(activations, evaluation),
    }
    enc_mac, dec_mac = _matmul_params(config)
    forward = 2 * b * (s * le * enc_mac + t * ld * dec_mac + t * d * v)
    forward += 4 * b * d * (le * s * s + ld * (t * t + t * s))
    flops = 3 * forward  # forward + backward (twice the forward)
    seconds = flops / FLOPS_PER_SECOND + TRAIN_STEP_OVERHEAD_S + (le + ld) * LAYER_OVERHEAD_S
    detail = (f"batch {b}, {s}+{t} tokens, {le}+{ld} layers x {h} heads, d_model {d}, d_ff {f}, "
              f"{parameter_count(config):,} parameters; about {_duration(seconds)} a step")
    return Estimate("this training run", parts, flops, seconds, RUN_BUDGET_ENV, detail)


def _evaluation_bytes(config: ModelConfig, rows: int, s: int, t: int) -> int:
    """No gradients: the KV cache of a greedy decode, the encoder output, one layer's temporaries, the logits."""
    d, f, h, v = config.d_model, config.d_ff, config.n_heads, config.tgt_vocab
    per_row = config.n_dec_layers * 2 * d * (s + t) + s * d + t * (f + 4 * d) + h * t * max(s, t) + 2 * t * v
    return FLOAT * rows * per_row


def evaluation_estimate(config: ModelConfig, samples: int, source_len: int | None = None,
                        target_len: int | None = None) -> Estimate:
    """Evaluating a loaded model on `samples` pairs (greedy and teacher-forced, in chunks of EVAL_CHUNK)."""
    s, t = _lengths(config, source_len, target_len)
    rows = max(1, min(int(samples), EVAL_CHUNK))
    parts = {"weights": FLOAT * parameter_count(config), "evaluation": _evaluation_bytes(config, rows, s, t)}
    enc_mac, dec_mac = _matmul_params(config)
    per_pair = 2 * (s * config.n_enc_layers * enc_mac + 2 * t * config.n_dec_layers * dec_mac)
    flops = float(samples) * per_pair
    seconds = flops / FLOPS_PER_SECOND + -(-int(samples) // rows) * t * config.n_dec_layers * LAYER_OVERHEAD_S
    detail = f"{rows:,} sequences at once of {s}+{t} tokens, {config.n_enc_layers}+{config.n_dec_layers} layers"
    return Estimate("evaluating this model", parts, flops, seconds, MODEL_BUDGET_ENV, detail)
