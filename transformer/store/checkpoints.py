"""Checkpoints: one `.safetensors` file per model, with everything needed to rebuild it in its metadata.

File layout (format version 1). A standard safetensors file whose tensors are the model's `state_dict`
(float32, no shared storage) and whose `__metadata__` maps these keys to JSON text, and nothing else:

    format_version  1
    config          ModelConfig.to_dict()
    tokenizer       tokenizer.to_dict() (sentencepiece model bytes base64-encoded inside it)
    task            {"name": ..., "params": {...}}
    card            the model card: name, created, steps, seconds, metrics, training config, ...

Every file is treated as untrusted: the size is capped before reading, the header is parsed and bounded
here before the safetensors library sees it, keys and config values are checked, every tensor's name,
shape and dtype is compared with the model built from the config before anything is loaded, the memory
that loading needs is checked against the model budget (`budget.load_estimate`, AP_MODEL_BUDGET_MB) before
any tensor is read, and non-finite weights are refused. Only regular files are opened (a FIFO, a device or a
symlink to one is refused from `os.stat`, never opened). The card is validated field by field
(`cards.clean_card`): a wrong field is dropped with a note in `ModelBundle.notes` / `CheckpointInfo.notes`.
Any failure raises one `CheckpointError` with a readable message.

PyTorch `.pt` files are accepted only through `torch.load(weights_only=True)` (no code can run) by
`load_state_dict_file`, and only as the zip archive `torch.save` writes: its central directory's
uncompressed sizes are summed before `torch.load` and an archive unpacking to more than `max_bytes` (or a
pickle above MAX_HEADER_BYTES) is refused, so a small file of deflated zeros cannot inflate to gigabytes.
Such a file holds either
  * a dict {"state_dict": {name: tensor}, "format_version": 1, "config": ..., "tokenizer": ...,
    "task": ..., "card": ...} with the same meanings as above (what `torch.save(bundle_metadata(b) |
    {"state_dict": b.model.state_dict()}, path)` writes), or
  * a bare state dict {name: tensor}, with the metadata dict passed separately (for instance read from a
    JSON file next to it holding the same keys; "format_version" and "card" may be left out there).
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import struct
import tempfile
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from math import prod
from pathlib import Path
from typing import BinaryIO, Union

import safetensors.torch
import torch

try:
    import fcntl
except ImportError:  # not on Windows: see _lock
    fcntl = None

from transformer.network.budget import BudgetError, load_estimate, parameter_count
from transformer.bundle import ModelBundle
from .cards import clean_card
from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.tasks import make_task
from transformer.network.tokenizers import tokenizer_from_dict

FORMAT_VERSION = 1
METADATA_KEYS = ("format_version", "config", "tokenizer", "task", "card")
DEFAULT_MAX_BYTES = 64 * 2**20  # the zoo's models are < 5 MB
MAX_HEADER_BYTES = 4 * 2**20  # room for a base64 sentencepiece model; bounded all the same
SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}

Source = Union[str, os.PathLike, bytes, bytearray, memoryview, BinaryIO]


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


# ----------------------------------------------------------------------------------------------- saving


def bundle_metadata(bundle: ModelBundle) -> dict:
    """The plain-data description stored beside the weights (see the module docstring)."""
    card = {"name": bundle.name, "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    return {
        "format_version": FORMAT_VERSION,
        "config": bundle.config.to_dict(),
        "tokenizer": bundle.tokenizer.to_dict(),
        "task": {"name": bundle.task.name, "params": dict(bundle.task.params)},
        "card": card | bundle.card,
    }


def bundle_to_bytes(bundle: ModelBundle) -> bytes:
    """The whole checkpoint file as bytes (for downloads); `save_bundle` writes exactly these."""
    state = {name: t.detach().contiguous() for name, t in bundle.model.state_dict().items()}
    _check_finite(state)
    metadata = {key: json.dumps(value) for key, value in bundle_metadata(bundle).items()}
    return safetensors.torch.save(state, metadata=metadata)


def save_bundle(bundle: ModelBundle, path: str | os.PathLike) -> Path:
    """Write `bundle` to `path` atomically (`write_atomic`): if anything fails, a file already at `path` is
    untouched and no temp file is left behind."""
    return write_atomic(bundle_to_bytes(bundle), path)


def write_atomic(data: bytes, path: str | os.PathLike) -> Path:
    """Write `data` to `path` atomically: a temp file in the same folder, fsync, then os.replace.

    The temp file is locked (flock) while it is written, so a process killed mid-write leaves an unlocked
    `.NAME.XXXXXXXX.tmp`; the next write to the same path removes such leftovers, and the model store removes
    any name's at start-up (`remove_leftover_temps`; never a temp file that another write still holds)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftover_temps(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            _lock(f.fileno(), blocking=True)  # held until the file is closed, after os.replace
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file ordinary permissions
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


TEMP_SUFFIX = ".tmp"
_TEMP_RANDOM = 8  # mkstemp's random part


def is_temp_name(name: str, target: str | None = None) -> bool:
    """Whether `name` is a temp file of `write_atomic` (for the file named `target`, or any file)."""
    if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return False
    stem = name[1:-len(TEMP_SUFFIX)]
    target_part, dot, random_part = stem.rpartition(".")
    return bool(dot) and len(random_part) == _TEMP_RANDOM and (target is None or target_part == target)


def remove_leftover_temps(folder: str | os.PathLike, target: str | None = None) -> list[Path]:
    """Remove the temp files that killed writes left in `folder` (regular files named like write_atomic's temps,
    for the file named `target` or any, and not locked by a write under way); returns those removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not is_temp_name(entry.name, target):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):  # never touch links, FIFOs or devices
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and _lock(fd, blocking=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _lock(fd: int, blocking: bool) -> bool:
    """An exclusive flock on `fd` (True), or False when another open file holds one. Where flock does not
    exist, no lock is taken and leftovers are recognised by age instead (older than an hour)."""
    if fcntl is None:
        return blocking or time.time() - os.fstat(fd).st_mtime > 3600
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------------------------- loading


def load_bundle(source: Source, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ModelBundle:
    """Load an untrusted `.safetensors` checkpoint (a path, bytes or a binary file object)."""
    with _as_checkpoint_error():
        data = _read_capped(source, max_bytes)
        tensors, metadata = _parse_header(io.BytesIO(data), len(data))
        meta = _decode_metadata(metadata)
        model = _build_model(meta, tensors)
        _load_weights(model, safetensors.torch.load(data))
        return _assemble(model, meta)


def load_state_dict_file(
    source: Source, metadata: dict | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> ModelBundle:
    """Load an untrusted PyTorch `.pt` file through `torch.load(weights_only=True)` only.

    Either the file is a dict holding "state_dict" and the metadata keys, or it is a bare state dict and
    `metadata` supplies "config", "tokenizer", "task" (and optionally "format_version", "card")."""
    with _as_checkpoint_error():
        data = _read_capped(source, max_bytes)
        _check_pt_archive(data, max_bytes)
        if metadata is not None:  # a bare state dict: its config is known before torch.load
            load_estimate(ModelConfig.from_dict(_check_metadata(
                {"format_version": FORMAT_VERSION, "card": {}} | dict(metadata))["config"])).check()
        try:
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - torch's own text advises loading unsafely: never pass that on
            raise CheckpointError("refused to load this .pt file safely: it holds something other than tensors "
                                  "and plain data, or is not a PyTorch file (nothing in it was run)") from None
        if not isinstance(obj, dict):
            raise CheckpointError(f"a .pt checkpoint must hold a dict, found {type(obj).__name__}")
        if "state_dict" in obj:
            if metadata is not None:
                raise CheckpointError("this .pt file carries its own metadata; do not pass another")
            metadata = {key: value for key, value in obj.items() if key != "state_dict"}
            state = obj["state_dict"]
        elif metadata is None:
            raise CheckpointError("this .pt file is a bare state dict: give its config, tokenizer and task too")
        else:
            state = obj
        meta = _check_metadata({"format_version": FORMAT_VERSION, "card": {}} | dict(metadata))
        if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
            raise CheckpointError("the state dict must map parameter names to tensors")
        model = _build_model(meta, _signature(state))
        _load_weights(model, state)
        return _assemble(model, meta)


# ---------------------------------------------------------------------------------------------- listing


def read_info(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> CheckpointInfo:
    """A checkpoint's description from its header alone; `error` holds the reason if it is broken.
    Never raises for anything a file (or a FIFO, device or dangling link in its place) can hold."""
    path = Path(path)
    info = CheckpointInfo(path=path, size=0)
    try:
        with _as_checkpoint_error():
            with _open_regular(path, max_bytes) as (f, info.size):
                tensors, metadata = _parse_header(f, info.size)
            meta = _decode_metadata(metadata)
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
def _as_checkpoint_error():
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


def _too_big(size: int, max_bytes: int) -> str:
    return f"the file is {size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.1f} MB"


def _read_capped(source: Source, max_bytes: int) -> bytes:
    """All bytes of `source`, refusing (before reading a path) anything larger than `max_bytes`."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif hasattr(source, "read"):
        data = source.read(max_bytes + 1)
    else:
        with _open_regular(source, max_bytes) as (f, _):
            data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CheckpointError(_too_big(len(data), max_bytes))
    return data


@contextmanager
def _open_regular(source: str | os.PathLike, max_bytes: int):
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
        raise CheckpointError(_too_big(info.st_size, max_bytes))
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)  # never blocks, even if a FIFO was swapped in meanwhile
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise CheckpointError(f"{name} is not a regular file; refused without reading it")
        if opened.st_size > max_bytes:
            raise CheckpointError(_too_big(opened.st_size, max_bytes))
        yield f, opened.st_size


def _check_pt_archive(data: bytes, max_bytes: int) -> None:
    """Refuse, before torch.load unpacks anything, a .pt file that is not torch.save's zip archive or whose
    entries unpack to more than `max_bytes` in all (the sizes torch's reader allocates are these)."""
    refused = "refused to load this .pt file safely: "
    if not data.startswith(b"PK\x03\x04"):
        raise CheckpointError(refused + "it is not the zip archive torch.save writes (legacy pickle files are not "
                                        "accepted; nothing in it was run)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except Exception:  # noqa: BLE001 - BadZipFile, struct errors, bad sizes: all mean a broken directory
        raise CheckpointError(refused + "its zip directory is broken (nothing in it was run)") from None
    total = sum(entry.file_size for entry in entries)
    if total > max_bytes:
        raise CheckpointError(f"the .pt archive would unpack to {total / 2**20:,.1f} MB; the limit is "
                              f"{max_bytes / 2**20:.1f} MB (refused before unpacking)")
    pickles = [entry for entry in entries if entry.filename.endswith(".pkl")]
    if any(entry.file_size > MAX_HEADER_BYTES for entry in pickles):
        raise CheckpointError(f"the .pt archive's pickle would unpack to more than {MAX_HEADER_BYTES / 2**20:.0f} MB "
                              f"(refused before unpacking)")


def _parse_header(stream: BinaryIO, file_size: int) -> tuple[dict, dict]:
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


def _decode_metadata(metadata: dict[str, str]) -> dict:
    """JSON-decode each metadata value, then validate the whole."""
    decoded = {}
    for key, text in metadata.items():
        try:
            decoded[key] = json.loads(text)
        except (ValueError, RecursionError):
            raise CheckpointError(f"metadata {key!r} is not valid JSON") from None
    return _check_metadata(decoded)


def _check_metadata(meta: dict) -> dict:
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


def _signature(state: dict[str, torch.Tensor]) -> dict[str, tuple[list[int], str]]:
    """{name: (shape, safetensors dtype name)}, comparable with what a file's header declares."""
    return {name: (list(t.shape), SAFETENSORS_DTYPES.get(t.dtype, str(t.dtype))) for name, t in state.items()}


def _build_model(meta: dict, found: dict[str, tuple[list[int], str]]) -> EncoderDecoder:
    """The model the config describes, kept only if the `found` tensors match its own exactly. It is built
    only within the model budget (BudgetError, a ValueError: an absurd config allocates nothing), and a file
    too small for a config over the budget is refused as not fitting it. (Not built on the meta device to
    check first: initialising parameters there imports torch._dynamo, 1.5-2.5 s the first time in a
    process, which the first page to load a model paid.)"""
    config = ModelConfig.from_dict(meta["config"])
    try:
        load_estimate(config).check()
    except BudgetError:
        held, needed = sum(math.prod(shape) for shape, _ in found.values()), parameter_count(config)
        if held < needed:
            raise CheckpointError(f"the tensors do not fit the model config: the file holds {held:,} numbers, "
                                  f"the config has {needed:,} parameters") from None
        raise
    model = EncoderDecoder(config)
    expected = _signature(model.state_dict())
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {extra[:3]}"
        counts = f"{len(missing)} missing, {len(extra)} unexpected"
        raise CheckpointError(f"the tensors do not fit the model config: {detail} ({counts})")
    for name, (shape, dtype) in expected.items():
        if found[name] != (shape, dtype):
            got_shape, got_dtype = found[name]
            raise CheckpointError(f"tensor {name!r} is {got_dtype} {got_shape}; the config needs {dtype} {shape}")
    return model


def _check_finite(state: dict[str, torch.Tensor]) -> None:
    for name, t in state.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"tensor {name!r} contains NaN or infinite values (training diverged?)")


def _load_weights(model: EncoderDecoder, state: dict[str, torch.Tensor]) -> None:
    _check_finite(state)
    model.load_state_dict(state, strict=True)
    model.eval()


def _assemble(model: EncoderDecoder, meta: dict) -> ModelBundle:
    tokenizer = tokenizer_from_dict(meta["tokenizer"])
    config = model.config
    if not tokenizer.vocab_size == config.src_vocab == config.tgt_vocab:
        raise CheckpointError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model expects {config.src_vocab} (source) "
            f"and {config.tgt_vocab} (target)"
        )
    task = make_task(meta["task"]["name"], **meta["task"]["params"])
    return ModelBundle(model=model, tokenizer=tokenizer, task=task, card=meta["card"], notes=list(meta["notes"]))
