"""ModelConfig: the one plain, JSON-able description a model is built from and stored with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from transformer.i18n import t

NORMS = ("pre", "post")
POSITIONALS = ("sinusoidal", "learned", "none", "rope", "alibi")  # rope, alibi: inside self-attention
# Initial weights: Xavier-uniform everywhere (the Annotated Transformer's), or "identity": the same, then every
# residual branch's output weights zeroed (each layer starts as the identity but for its output biases) and the
# token embeddings at a quarter of their scale (transformer.network.model.IDENTITY_EMBED_SCALE)
INITS = ("xavier", "identity")

# Inclusive bounds for every numeric field. They keep an untrusted checkpoint or an absurd form input
# from allocating gigabytes: the largest model they allow is still a few hundred MB.
BOUNDS: dict[str, tuple[float, float]] = {
    "src_vocab": (4, 32_000),
    "tgt_vocab": (4, 32_000),
    "n_enc_layers": (1, 12),
    "n_dec_layers": (1, 12),
    "d_model": (8, 1024),
    "n_heads": (1, 16),
    "d_ff": (8, 4096),
    "dropout": (0.0, 0.9),
    "max_len": (2, 1024),
}


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of bounds."""


def check_bounds(config, bounds: dict[str, tuple[float, float]]) -> None:
    """Raise ConfigError naming the first field of the dataclass `config` that is not a number of its
    declared kind (int fields want whole numbers; bools never count) or lies outside `bounds` (NaN does)."""
    for f in fields(config):
        if f.name not in bounds:
            continue
        value, (lo, hi) = getattr(config, f.name), bounds[f.name]
        whole = f.type == "int"
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            kind = "a number (a whole one)" if whole else "a number"
            raise ConfigError(f"{f.name} must be {kind}, got {value!r}")
        if not lo <= value <= hi:
            raise ConfigError(f"{f.name}={value} is outside the allowed range {lo}..{hi}")


@dataclass(frozen=True)
class ModelConfig:
    """Shape and options of an encoder-decoder Transformer."""

    src_vocab: int
    tgt_vocab: int
    n_enc_layers: int = 2
    n_dec_layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.0
    norm: str = "pre"
    positional: str = "sinusoidal"
    max_len: int = 64
    qk_norm: bool = False  # RMS-normalise each head's queries and keys (learned scale) before their dot product
    init: str = "xavier"  # one of INITS; only the weights a model is built with (a checkpoint keeps it as a record)

    def __post_init__(self) -> None:
        check_bounds(self, BOUNDS)
        if not isinstance(self.qk_norm, bool):
            raise ConfigError(f"qk_norm must be true or false, got {self.qk_norm!r}")
        if self.norm not in NORMS:
            raise ConfigError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.positional not in POSITIONALS:
            raise ConfigError(f"positional must be one of {POSITIONALS}, got {self.positional!r}")
        if self.init not in INITS:
            raise ConfigError(f"init must be one of {INITS}, got {self.init!r}")
        if self.d_model % self.n_heads:
            raise ConfigError(t("messages.divisible", d_model=self.d_model, n_heads=self.n_heads))
        if self.positional == "rope" and self.d_head % 2:
            raise ConfigError(t("messages.rope_even", d_head=self.d_head))

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        """Build from plain data, refusing unknown keys (checkpoints are untrusted input)."""
        if not isinstance(data, dict):
            raise ConfigError("model config must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown model config keys: {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:  # a required key is missing
            raise ConfigError(str(exc)) from None
