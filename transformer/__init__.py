"""Attention Playground's transformer library: model, attention trace, tasks, training, decoding,
checkpoints. No UI code lives here."""

from .config import ModelConfig
from .model import EncoderDecoder
from .trace import AttentionTrace

__all__ = ["AttentionTrace", "EncoderDecoder", "ModelConfig"]
