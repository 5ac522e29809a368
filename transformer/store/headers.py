"""Checkpoint headers: the file format, and what a checkpoint says about itself, read without its weights.

No torch here: the sidebar lists the shipped models and shows the active one's card from their headers before
anything imports torch. Loading and saving (which need torch and the network) are `checkpoints.py`'s.

File layout (format version 1). A standard safetensors file whose tensors are the model's `state_dict`
(float32, no shared storage) and whose `__metadata__` maps these keys to JSON text, and nothing else:

    format_version  1
    config          ModelConfig.to_dict()
    tokenizer       tokenizer.to_dict() (sentencepiece model bytes base64-encoded inside it)
    task            {"name": ..., "params": {...}}
    card            the model card: name, created, steps, seconds, metrics, training config, ...

Every file is treated as untrusted. Only regular files are opened (a FIFO, a device or a symlink to one is
refused from `os.stat`, never opened), the size is capped before reading, and the header is parsed and bounded
here (`parse_header`, MAX_HEADER_BYTES) before the safetensors library sees it; the metadata's keys and kinds
are checked and the card is validated field by field (`cards.clean_card`): a wrong field is dropped with a note
in `CheckpointInfo.notes` / `ModelBundle.notes`. Any failure raises one `CheckpointError` with a readable
message; `read_info` returns it in `CheckpointInfo.error` instead.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import BinaryIO

from transformer.bundle import ModelFacts
from transformer.network.config import ModelConfig
from transformer.tasks import make_task
from .cards import clean_card

FORMAT_VERSION = 1
METADATA_KEYS = ("format_version", "config", "tokenizer", "task", "card")
DEFAULT_MAX_BYTES = 64 * 2**20  # the zoo's models are < 5 MB
MAX_HEADER_BYTES = 4 * 2**20  # room for a base64 sentencepiece model; bounded all the same


class CheckpointError(ValueError):
    """A checkpoint cannot be saved or loaded; the message says why, in plain words."""


@dataclass
class CheckpointInfo:
    """What a checkpoint's header says, read without loading its weights. `error` is set (and the
    other fields may be empty) when the file is broken."""

    path: Path
    size: int
    name: str = ""
    created: str = ""
    task: str = ""
    task_params: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    parameters: int = 0
    card: dict = field(default_factory=dict)
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # card fields dropped as invalid (see cards.clean_card)

    def facts(self) -> ModelFacts:
        """The model's facts from its header (those of the bundle `load_bundle` would make); TaskError for a task
        this app cannot make."""
        return ModelFacts(make_task(self.task, **self.task_params), ModelConfig.from_dict(self.config),
                          self.parameters, self.card, self.notes)


# ---------------------------------------------------------------------------------------------- listing


def read_info(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> CheckpointInfo:
    """A checkpoint's description from its header alone; `error` holds the reason if it is broken.
    Never raises for anything a file (or a FIFO, device or dangling link in its place) can hold."""
    path = Path(path)
    info = CheckpointInfo(path=path, size=0)
    try:
        with as_checkpoint_error():
            with open_regular(path, max_bytes) as (f, info.size):
                tensors, metadata = parse_header(f, info.size)
            meta = decode_metadata(metadata)
            config = ModelConfig.from_dict(meta["config"])
            card = meta["card"]
            info.name = str(card.get("name") or path.stem)
            info.created = str(card.get("created", ""))
            info.task, info.task_params = meta["task"]["name"], meta["task"]["params"]
            info.config, info.card, info.notes = config.to_dict(), card, meta["notes"]
            info.parameters = sum(prod(shape) for shape, _ in tensors.values())
    except CheckpointError as exc:
        info.error = str(exc)
    return info


def list_checkpoints(folder: str | os.PathLike) -> list[CheckpointInfo]:
    """Every `*.safetensors` in `folder` (sorted by name), broken ones included with their `error`:
    one bad file (broken, hostile, a FIFO, unreadable) never hides the others."""
    folder = Path(folder)
    try:
        paths = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    except OSError:
        return []
    return [read_info(p) for p in paths]


# ------------------------------------------------------------------------------------------- internals


@contextmanager
def as_checkpoint_error():
    """Let CheckpointError through; turn anything else that goes wrong into one CheckpointError."""
    try:
        yield
    except CheckpointError:
        raise
    except (ValueError, OSError) as exc:  # ConfigError, TokenizerError, TaskError, a missing file, ...
        raise CheckpointError(_first_line(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a hostile file may break a parser in any way: one message
        raise CheckpointError(f"unreadable checkpoint ({type(exc).__name__}: {_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def too_big(size: int, max_bytes: int) -> str:
    return f"the file is {size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.1f} MB"


@contextmanager
def open_regular(source: str | os.PathLike, max_bytes: int):
    """(binary file, size) of a regular file of at most `max_bytes`. Decided from os.stat before opening
    (a FIFO, a device or a symlink to one is never opened), and checked again on the open descriptor."""
    name = os.fspath(source)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise CheckpointError(f"no such file: {name}") from None
    if stat.S_ISDIR(info.st_mode):
        raise CheckpointError(f"{name} is a folder; give the path of a checkpoint file in it")
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"{name} is not a regular file (a FIFO, device or socket); refused without reading it")
    if info.st_size > max_bytes:
        raise CheckpointError(too_big(info.st_size, max_bytes))
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)  # never blocks, even if a FIFO was swapped in meanwhile
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise CheckpointError(f"{name} is not a regular file; refused without reading it")
        if opened.st_size > max_bytes:
            raise CheckpointError(too_big(opened.st_size, max_bytes))
        yield f, opened.st_size


def parse_header(stream: BinaryIO, file_size: int) -> tuple[dict, dict]:
    """Check the safetensors framing of a file of `file_size` bytes, reading only its header from
    `stream`. Returns ({tensor name: (shape, dtype)}, raw string metadata)."""
    prefix = stream.read(8)
    if file_size < 8 or len(prefix) < 8:
        raise CheckpointError("the file is too short to be a .safetensors checkpoint")
    (length,) = struct.unpack("<Q", prefix)
    if length > min(MAX_HEADER_BYTES, file_size - 8):
        raise _not_safetensors(prefix, f"the header claims {length} bytes: more than the file holds or the "
                                       f"{MAX_HEADER_BYTES} limit")
    text = stream.read(length)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _not_safetensors(prefix, "the header is not valid JSON: not a .safetensors checkpoint") from None
    if not isinstance(header, dict):
        raise _not_safetensors(prefix, "the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError("the file has no string metadata: not an Attention Playground checkpoint")
    data_size = file_size - 8 - length
    tensors = {name: _tensor_entry(name, entry, data_size) for name, entry in header.items()}
    return tensors, metadata


def _not_safetensors(prefix: bytes, detail: str) -> CheckpointError:
    """The error for a file whose framing is wrong, naming PyTorch's formats when it starts like one."""
    if prefix.startswith((b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")):  # zip, pickle 2-5
        return CheckpointError("this is a PyTorch pickle/zip file, not a .safetensors checkpoint")
    return CheckpointError(detail)


def _tensor_entry(name: str, entry, data_size: int) -> tuple[list[int], str]:
    ok = (
        isinstance(entry, dict)
        and isinstance(entry.get("dtype"), str)
        and isinstance(entry.get("shape"), list)
        and all(isinstance(n, int) and n >= 0 for n in entry["shape"])
        and isinstance(entry.get("data_offsets"), list)
        and len(entry["data_offsets"]) == 2
        and all(isinstance(n, int) for n in entry["data_offsets"])
        and 0 <= entry["data_offsets"][0] <= entry["data_offsets"][1] <= data_size
    )
    if not ok:
        raise CheckpointError(f"tensor {name!r} has a malformed header entry (or the file is truncated)")
    return entry["shape"], entry["dtype"]


def decode_metadata(metadata: dict[str, str]) -> dict:
    """JSON-decode each metadata value, then validate the whole."""
    decoded = {}
    for key, text in metadata.items():
        try:
            decoded[key] = json.loads(text)
        except (ValueError, RecursionError):
            raise CheckpointError(f"metadata {key!r} is not valid JSON") from None
    return check_metadata(decoded)


def check_metadata(meta: dict) -> dict:
    """Exactly the known keys, a supported format version, and objects of the right kinds."""
    missing = [k for k in METADATA_KEYS if k not in meta]
    unknown = sorted(k for k in meta if k not in METADATA_KEYS)
    if missing or unknown:
        parts = [f"missing {', '.join(missing)}" if missing else "", f"unknown {', '.join(unknown)}" if unknown else ""]
        detail = "; ".join(p for p in parts if p)
        raise CheckpointError(f"not an Attention Playground checkpoint: metadata keys {detail}")
    if type(meta["format_version"]) is not int or meta["format_version"] != FORMAT_VERSION:
        raise CheckpointError(
            f"unsupported checkpoint format version {meta['format_version']!r} (this app reads {FORMAT_VERSION})"
        )
    task = meta["task"]
    if not (isinstance(task, dict) and set(task) == {"name", "params"} and isinstance(task["name"], str)
            and isinstance(task["params"], dict)):
        raise CheckpointError('metadata "task" must be {"name": text, "params": object}')
    if not isinstance(meta["card"], dict):
        raise CheckpointError('metadata "card" must be a JSON object')
    meta["card"], meta["notes"] = clean_card(meta["card"])
    return meta
