"""Attention Playground's transformer library: model, attention trace, tasks, training, decoding,
checkpoints. No UI code lives here."""

from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.network.trace import AttentionTrace

__all__ = ["AttentionTrace", "EncoderDecoder", "ModelConfig"]
