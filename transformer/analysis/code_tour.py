"""The network read in the paper's order, beside what it computed: the sections of the code page, the running
source behind each (`inspect.getsource` of the objects the model is built from, never a copy), and one detailed
traced pass over an input whose tensors each section shows.

The pass is teacher-forced over the model's own greedy output: the decoder reads `<s>` and every output token but
the last, so row t is what the step-by-step decode computed at step t (the causal mask gives row t the same keys),
equal to float rounding; tests/unit/test_code_tour.py holds it to the greedy decode every other page traces.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass

import numpy as np

from transformer.network import decoding
from transformer.network.attention import MultiHeadAttention, attention
from transformer.network.decoding import TeacherForcedResult, teacher_forced
from transformer.network.embeddings import Embedding
from transformer.network.layers import DecoderLayer, EncoderLayer, FeedForward, Residual
from transformer.network.masks import padding_mask, subsequent_mask
from transformer.network.model import EncoderDecoder, Generator
from transformer.network.positional import PositionalEncoding, frequencies, sinusoidal_table
from .tour_order import KEYS


@dataclass(frozen=True)
class Section:
    """One section of the tour: its key (the page's anchor and link value) and the code it shows, in order."""

    key: str
    code: tuple


CODE = {  # each section's code; tour_order.KEYS gives their order
    "embeddings": (Embedding, PositionalEncoding.forward, sinusoidal_table, frequencies),
    "attention": (attention,),
    "multi_head": (MultiHeadAttention.forward, MultiHeadAttention.queries, MultiHeadAttention.keys_values,
                   MultiHeadAttention.project, MultiHeadAttention._project, MultiHeadAttention.split_heads,
                   MultiHeadAttention.attend),
    "masks": (padding_mask, subsequent_mask),
    "feed_forward": (FeedForward,),
    "residual": (Residual,),
    "encoder_layer": (EncoderLayer, EncoderDecoder.encode),
    "decoder_layer": (DecoderLayer, EncoderDecoder.decode),
    "generator": (Generator,),
    "greedy": (decoding.greedy_decode, decoding._next_log_probs),
}
SECTIONS = tuple(Section(key, CODE[key]) for key in KEYS)
BY_KEY = {section.key: section for section in SECTIONS}
SIDES = {"encoder_self": "encoder", "decoder_self": "decoder", "cross": "decoder"}  # an attention kind's stack
SUBLAYERS = {"encoder_self": "self_attn", "decoder_self": "self_attn", "cross": "cross_attn"}


def source(obj) -> str:
    """The running source of a function, method or class, its indentation removed (a method's too)."""
    return textwrap.dedent(inspect.getsource(obj))


def where(obj) -> str:
    """Where `obj` lives, as a reader finds it: "transformer/network/layers.py · Residual"."""
    module = inspect.getmodule(obj).__name__.replace(".", "/")
    return f"{module}.py · {obj.__qualname__}"


@dataclass(frozen=True)
class Tour:
    """A detailed traced pass (batch size 1): `result` holds the log-probabilities and the trace, whose tensors
    come out as numpy arrays with the batch dimension dropped."""

    result: TeacherForcedResult

    @property
    def source_pieces(self) -> list[str]:
        return self.result.source_pieces

    @property
    def target_pieces(self) -> list[str]:
        """What the decoder read: `<s>` and the greedy output but its last token."""
        return self.result.target_pieces

    def tensor(self, *name) -> np.ndarray:
        """A kept intermediate, e.g. tensor("encoder", 0, "feed_forward", "hidden")."""
        return self.result.trace.tensors[name][0].numpy()

    def embedding(self, side: str) -> tuple[np.ndarray, np.ndarray]:
        """("src" or "tgt") the scaled token embeddings and the positional term, (len, d_model) each."""
        record = self.result.trace.embeddings[side]
        return record.tokens[0].numpy(), np.broadcast_to(record.positions[0].numpy(), record.tokens[0].shape)

    def attention(self, kind: str, layer: int):
        """The attention record of one kind and layer (scores, mask, weights: (heads, queries, keys))."""
        record = self.result.trace.attention[kind][layer]
        return record.scores[0].numpy(), record.mask[0].numpy(), record.weights[0].numpy()

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query pieces, key pieces) of an attention kind."""
        src, tgt = self.source_pieces, self.target_pieces
        return {"encoder_self": (src, src), "decoder_self": (tgt, tgt), "cross": (tgt, src)}[kind]

    @property
    def log_probs(self) -> np.ndarray:
        """(decoder positions, tgt_vocab): the generator's output."""
        return self.result.log_probs.numpy()


def tour(model: EncoderDecoder, tokenizer, text: str, output_ids: list[int]) -> Tour:
    """The detailed traced pass over `text` and the greedy output `output_ids` (without `<s>`; its last token, `</s>`
    or the one cut at the length limit, is predicted, never read). The library's errors pass through (ValueError)."""
    return Tour(teacher_forced(model, tokenizer, text, list(output_ids[:-1]), detail=True))
