"""The home page's decode of its default input, kept across server starts, so a fresh server draws its first page
without importing torch (~1 s of its first run, on the path to the first chart: docs/MEASUREMENTS.md).

A `Glance` holds what the home page shows of one decode: the input, the output and its tokens, the cross-attention
(float32, written exactly), the task's answer and the head in focus. The page always draws from a Glance: made
from the model's forward pass (`ui.decodes`), or read back from the file an earlier server wrote after making it.
One JSON file per shipped checkpoint, named by the digest of its bytes, and valid only for the code, torch and
CPU that computed it (`code_digest`): a file that is missing, stale or not a glance is computed afresh and
rewritten. Only the default input of a shipped model is kept (links, typed inputs and session models compute)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import platform
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from transformer import settings
from transformer.analysis.heads import focus_head
from transformer.store.atomic import write_atomic

from . import model_registry as registry
from . import widgets

ROOT = Path(__file__).resolve().parents[1]
# the code a glance depends on: the library, this module, the decode's cache and the default input's rule
CODE = [ROOT / "transformer", Path(__file__), ROOT / "ui" / "decodes.py", ROOT / "ui" / "widgets.py"]
MAX_BYTES = 4 * 2**20  # a kept glance is ~40 kB (the shipped reverse model); a larger file is not read

_kept: dict[tuple, Glance] = {}  # (model key, version) -> the default input's glance, in this process
_lock = threading.Lock()


@dataclass(frozen=True)
class Glance:
    """One decode as the home page shows it. `cross` is (layers, heads, output tokens, source tokens); `focus` is
    (layer, head or None for the layer's mean); `answer` is the task's, None where the input has none."""

    input: str
    output_text: str
    output_pieces: list[str]
    source_pieces: list[str]
    cross: np.ndarray
    answer: str | None
    focus: tuple[int, int | None]

    @classmethod
    def of(cls, task, text: str, result) -> Glance:
        """The glance of `result`, the model's decode of `text` (a DecodeResult)."""
        cross = result.cross.numpy()
        return cls(text, result.output_text, list(result.output_pieces), list(result.source_pieces), cross,
                   task.answer(text), focus_head(cross, task, text))

    def to_json(self, stamp: str) -> str:
        return json.dumps({**asdict(self), "cross": self.cross.tolist(), "code": stamp})

    @classmethod
    def from_json(cls, text: str, stamp: str) -> Glance | None:
        """The glance a file holds, or None when it is another code's or not a glance at all."""
        try:
            data = json.loads(text)
            if data.pop("code") != stamp:
                return None
            cross = np.asarray(data.pop("cross"), dtype=np.float32)
            layer, head = data.pop("focus")
            glance = cls(cross=cross, focus=(int(layer), None if head is None else int(head)), **data)
        except (ValueError, TypeError, KeyError, RecursionError):
            return None
        texts = [glance.input, glance.output_text, *glance.output_pieces, *glance.source_pieces]
        sound = (all(isinstance(text, str) for text in texts) and isinstance(glance.answer, str | None)
                 and cross.ndim == 4 and cross.shape[2:] == (len(glance.output_pieces), len(glance.source_pieces))
                 and 0 <= glance.focus[0] < cross.shape[0]
                 and (glance.focus[1] is None or 0 <= glance.focus[1] < cross.shape[1]))
        return glance if sound else None


def folder() -> Path:
    """Where glances are kept (AP_FIRST_PAGE_CACHE)."""
    return settings.get("AP_FIRST_PAGE_CACHE") or ROOT / ".first_page"


def clear() -> None:
    """Forget the glances kept in this process (the files stay)."""
    with _lock:
        _kept.clear()


@functools.cache
def code_digest() -> str:
    """What a kept glance is valid for: the digest of the code that computes it, torch's version file and the
    CPU (kernels differ by CPU in the last bits of a float). Read once per process, without importing torch."""
    digest = hashlib.sha256(platform.machine().encode())
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        digest.update(next((line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")),
                           "").encode())
    torch_spec = importlib.util.find_spec("torch")  # finds the package without importing it
    files = [Path(torch_spec.origin).with_name("version.py")] if torch_spec and torch_spec.origin else []
    for place in CODE:
        files += sorted(place.rglob("*.py")) if place.is_dir() else [place]
    for file in files:
        digest.update(str(file.relative_to(file.parents[1])).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=16)
def _file_digest(path: str, version: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _record(key: str) -> Path | None:
    """The file a shipped model's glance is kept in, or None for a model that is not a shipped file."""
    if not key.startswith("shipped:"):
        return None
    path = registry.shipped_path(key)
    stat = path.stat()
    return folder() / f"{_file_digest(str(path), stat.st_mtime_ns, stat.st_size)}.json"


def _read(record: Path) -> Glance | None:
    try:
        if record.stat().st_size > MAX_BYTES:
            return None
        return Glance.from_json(record.read_text(encoding="utf-8"), code_digest())
    except (OSError, UnicodeDecodeError):
        return None


def default(key: str) -> Glance:
    """The glance of model `key`'s default input: kept in this process, else read from the file an earlier server
    wrote, else computed (and then written). ValueError (the library's) when the model cannot decode it."""
    version = registry.version(key)
    with _lock:
        hit = _kept.get((key, version))
    if hit is None:
        record = _record(key)
        hit = None if record is None else _read(record)
        if hit is None:
            hit = _decoded(key, version, default_input(key))
            if record is not None:
                _write(record, hit)
        with _lock:
            _kept[(key, version)] = hit
    return hit


def default_input(key: str) -> str:
    """Model `key`'s default input (widgets.default_input)."""
    return widgets.default_input(registry.bundle_for(key).examples())


def of(key: str, text: str) -> Glance:
    """The glance of model `key`'s decode of `text`, from the model (a decode shared with the other pages)."""
    return _decoded(key, registry.version(key), text)


def _decoded(key: str, version: int, text: str) -> Glance:
    from . import decodes  # function-local: it imports torch, which a kept glance spares the first page

    return Glance.of(registry.bundle_for(key).task, text, decodes.greedy(key, version, text))


def _write(record: Path, glance: Glance) -> None:
    """Keep `glance` for the next server; a folder that cannot be written (a read-only install) keeps nothing."""
    try:
        write_atomic(glance.to_json(code_digest()).encode("utf-8"), record)
    except OSError:
        pass
