"""Crafted hostile inputs shared by the hostile-input tests: a zip bomb in torch's format, a tiny model,
one that never stops, a checkpoint with a card of our choosing."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import safetensors.torch
import torch

from transformer.bundle import ModelBundle
from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import EOS
from transformer.store.checkpoints import bundle_metadata
from transformer.tasks import make_task

MB = 2**20


BOMB_MIB = 1024  # the .pt below inflates to 1 GiB from about 1 MB


def zip_archive(entries: list[tuple[str, int, int, bytes, int]]) -> bytes:
    """A zip archive of (name, method, crc32, stored bytes, uncompressed size) entries, written by hand so
    a deflated stream can be given as it is."""
    out, central = io.BytesIO(), []
    for name, method, crc, data, size in entries:
        offset, raw = out.tell(), name.encode()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0))
        out.write(raw + data)
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(data),
                                   size, len(raw), 0, 0, 0, 0, 0, offset) + raw)
    start = out.tell()
    out.write(b"".join(central))
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return out.getvalue()


def pt_zip_bomb(inflated_mib: int = BOMB_MIB) -> bytes:
    """torch.save's archive of {"state_dict": {"w": one float}} whose storage record, under the name torch
    uses (archive/data/0), is a deflated stream of `inflated_mib` MiB of zeros. torch.load(weights_only=True)
    allocates and inflates the whole record before it looks at its size (1 GiB peak, measured)."""
    buffer = io.BytesIO()
    torch.save({"state_dict": {"w": torch.zeros(1)}}, buffer)
    mib = bytes(MB)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(mib) + packer.flush(zlib.Z_FULL_FLUSH)  # byte-aligned, no back references
    stream = block * inflated_mib + zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # + an empty final block
    crc = 0
    for _ in range(inflated_mib):
        crc = zlib.crc32(mib, crc)
    entries = []
    with zipfile.ZipFile(buffer) as torch_zip:
        for info in torch_zip.infolist():
            data = torch_zip.read(info)
            if info.filename.endswith("/data/0"):
                entries.append((info.filename, zipfile.ZIP_DEFLATED, crc, stream, inflated_mib * MB))
            else:
                entries.append((info.filename, zipfile.ZIP_STORED, zlib.crc32(data), data, len(data)))
    return zip_archive(entries)


def tiny_bundle(**shape) -> ModelBundle:
    task = make_task("reverse", min_len=2, max_len=6)
    tokenizer = task.make_tokenizer()
    torch.manual_seed(0)
    dims = {"n_enc_layers": 1, "n_dec_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "max_len": 10} | shape
    config = ModelConfig(tokenizer.vocab_size, tokenizer.vocab_size, **dims)
    return ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "tiny"})


def endless(bundle: ModelBundle) -> ModelBundle:
    """The same model made never to emit </s> (finite weights): every decode runs to max_len."""
    with torch.no_grad():
        bundle.model.generator.proj.bias[EOS] = -1e4
    return bundle


def with_card(bundle: ModelBundle, card: dict) -> bytes:
    """A checkpoint whose card is exactly `card` (bundle_metadata would add a name and a date)."""
    metadata = {key: json.dumps(value) for key, value in (bundle_metadata(bundle) | {"card": card}).items()}
    state = {k: v.contiguous() for k, v in bundle.model.state_dict().items()}
    return safetensors.torch.save(state, metadata=metadata)


class Payload:
    """Unpickling this creates the file `marker`: the proof that a loader ran code from a hostile file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))
