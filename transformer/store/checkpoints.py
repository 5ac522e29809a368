"""Checkpoints: one `.safetensors` file per model, with everything needed to rebuild it in its metadata: saving a
bundle, and loading one from an untrusted file. The file format and the header reading (no torch) are
`headers.py`'s; atomic writes `atomic.py`'s.

Loading treats every file as untrusted. After the header checks of `headers.py` (size capped before reading,
header parsed and bounded, keys, config values and card checked), every tensor's name, shape and dtype is
compared with the model built from the config before anything is loaded, the memory that loading needs is
checked against the model budget (`budget.load_estimate`, AP_MODEL_BUDGET_MB) before any tensor is read, and
non-finite weights are refused. Any failure raises one `CheckpointError` with a readable message.

PyTorch `.pt` files are accepted only through `torch.load(weights_only=True)` (no code can run) by
`load_state_dict_file`, and only as the zip archive `torch.save` writes: its central directory's
uncompressed sizes are summed before `torch.load` and an archive unpacking to more than `max_bytes` (or a
pickle above MAX_HEADER_BYTES) is refused, so a small file of deflated zeros cannot inflate to gigabytes.
Such a file holds either
  * a dict {"state_dict": {name: tensor}, "format_version": 1, "config": ..., "tokenizer": ...,
    "task": ..., "card": ...} with the same meanings as in `headers.py` (what `torch.save(bundle_metadata(b) |
    {"state_dict": b.model.state_dict()}, path)` writes), or
  * a bare state dict {name: tensor}, with the metadata dict passed separately (for instance read from a
    JSON file next to it holding the same keys; "format_version" and "card" may be left out there).
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Union

import safetensors.torch
import torch

from transformer.bundle import ModelBundle
from transformer.network.budget import BudgetError, load_estimate, parameter_count
from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.network.tokenizers import tokenizer_from_dict
from transformer.tasks import make_task
from .atomic import write_atomic
from .headers import (DEFAULT_MAX_BYTES, FORMAT_VERSION, MAX_HEADER_BYTES, CheckpointError, as_checkpoint_error,
                      check_metadata, decode_metadata, open_regular, parse_header, too_big)

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}

Source = Union[str, os.PathLike, bytes, bytearray, memoryview, BinaryIO]


# ----------------------------------------------------------------------------------------------- saving


def bundle_metadata(bundle: ModelBundle) -> dict:
    """The plain-data description stored beside the weights (the file layout in `headers.py`)."""
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


# ---------------------------------------------------------------------------------------------- loading


def load_bundle(source: Source, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ModelBundle:
    """Load an untrusted `.safetensors` checkpoint (a path, bytes or a binary file object)."""
    with as_checkpoint_error():
        data = _read_capped(source, max_bytes)
        tensors, metadata = parse_header(io.BytesIO(data), len(data))
        meta = decode_metadata(metadata)
        model = _build_model(meta, tensors)
        _load_weights(model, safetensors.torch.load(data))
        return _assemble(model, meta)


def load_state_dict_file(
    source: Source, metadata: dict | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> ModelBundle:
    """Load an untrusted PyTorch `.pt` file through `torch.load(weights_only=True)` only.

    Either the file is a dict holding "state_dict" and the metadata keys, or it is a bare state dict and
    `metadata` supplies "config", "tokenizer", "task" (and optionally "format_version", "card")."""
    with as_checkpoint_error():
        data = _read_capped(source, max_bytes)
        _check_pt_archive(data, max_bytes)
        if metadata is not None:  # a bare state dict: its config is known before torch.load
            load_estimate(ModelConfig.from_dict(check_metadata(
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
        meta = check_metadata({"format_version": FORMAT_VERSION, "card": {}} | dict(metadata))
        if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
            raise CheckpointError("the state dict must map parameter names to tensors")
        model = _build_model(meta, _signature(state))
        _load_weights(model, state)
        return _assemble(model, meta)


# ------------------------------------------------------------------------------------------- internals


def _read_capped(source: Source, max_bytes: int) -> bytes:
    """All bytes of `source`, refusing (before reading a path) anything larger than `max_bytes`."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif hasattr(source, "read"):
        data = source.read(max_bytes + 1)
    else:
        with open_regular(source, max_bytes) as (f, _):
            data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CheckpointError(too_big(len(data), max_bytes))
    return data


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
