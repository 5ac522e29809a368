"""Checkpoints: round trip, atomic save, header-only listing, and refusal of every hostile file kind."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import struct
import zipfile

import pytest
import safetensors.torch
import torch
from helpers.repo import fresh_python
from helpers.hostile import Payload

from transformer.bundle import ModelBundle
from transformer.network.config import ModelConfig
from transformer.network.decoding import greedy_batch
from transformer.network.masks import padding_mask, target_mask
from transformer.network.model import EncoderDecoder
from transformer.store import checkpoints, headers
from transformer.store.checkpoints import (
    bundle_metadata,
    bundle_to_bytes,
    load_bundle,
    load_state_dict_file,
    save_bundle,
)
from transformer.store.headers import CheckpointError, list_checkpoints, read_info
from transformer.tasks import encode_pairs, make_task

CARD = {"name": "tiny", "created": "2025-01-01T00:00:00+00:00", "steps": 7, "exact_match": 0.5}


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    task = make_task("reverse", min_len=2, max_len=6)
    tokenizer = task.make_tokenizer()
    torch.manual_seed(0)
    config = ModelConfig(tokenizer.vocab_size, tokenizer.vocab_size, 1, 1, d_model=16, n_heads=2, d_ff=32, max_len=10)
    return ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, dict(CARD))


@pytest.fixture(scope="module")
def good_bytes(bundle) -> bytes:
    return bundle_to_bytes(bundle)


def outputs(b: ModelBundle) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced log-probs and greedy ids on a fixed batch."""
    src, tgt = encode_pairs(b.tokenizer, b.task.pairs(8, seed=3, split="heldout"))
    with torch.no_grad():
        log_probs = b.model(src, tgt, padding_mask(src), target_mask(tgt))
    return log_probs, greedy_batch(b.model, src, 8)


def craft(state: dict, meta: dict, raw: dict | None = None) -> bytes:
    """A safetensors file with `state` and metadata `meta` (JSON-encoded per key) plus `raw` strings."""
    metadata = {k: json.dumps(v) for k, v in meta.items()} | (raw or {})
    return safetensors.torch.save({k: v.contiguous() for k, v in state.items()}, metadata=metadata)


def framed(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + body


# ------------------------------------------------------------------------------------------ round trip


def test_round_trip_gives_identical_outputs(bundle, tmp_path):
    path = save_bundle(bundle, tmp_path / "sub" / "tiny.safetensors")
    loaded = load_bundle(path)
    assert not loaded.model.training
    assert loaded.config == bundle.config
    assert loaded.tokenizer.to_dict() == bundle.tokenizer.to_dict()
    assert (loaded.task.name, loaded.task.params) == ("reverse", {"min_len": 2, "max_len": 6})
    assert loaded.card == CARD
    for mine, theirs in zip(outputs(bundle), outputs(loaded)):
        assert torch.equal(mine, theirs)


def test_bytes_and_file_are_the_same_checkpoint(bundle, good_bytes, tmp_path):
    path = save_bundle(bundle, tmp_path / "tiny.safetensors")
    saved = path.read_bytes()
    assert len(saved) == len(good_bytes)  # the same, up to the order of metadata keys
    mine, theirs = safetensors.torch.load(saved), safetensors.torch.load(good_bytes)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert load_bundle(io.BytesIO(good_bytes)).card == load_bundle(saved).card == CARD


def test_sentencepiece_tokenizer_travels_inside_the_file():
    task = make_task("numbers")
    tokenizer = task.make_tokenizer(0)
    config = ModelConfig(tokenizer.vocab_size, tokenizer.vocab_size, 1, 1, d_model=16, n_heads=2, d_ff=32)
    loaded = load_bundle(bundle_to_bytes(ModelBundle(EncoderDecoder(config), tokenizer, task, {})))
    assert loaded.tokenizer.kind == "sentencepiece" and loaded.tokenizer.to_dict() == tokenizer.to_dict()
    source, target = task.pairs(1, seed=0, split="heldout")[0]
    assert loaded.tokenizer.encode(target) == tokenizer.encode(target)


def test_header_length_starting_like_a_pickle_still_loads(bundle):
    """A header of 128 + 256k bytes starts the file with 0x80, pickle's first byte: it is still valid."""
    for pad in range(256):
        data = bundle_to_bytes(ModelBundle(bundle.model, bundle.tokenizer, bundle.task, CARD | {"pad": "x" * pad}))
        if data[0] == 0x80:
            assert load_bundle(data).card["pad"] == "x" * pad
            return
    pytest.fail("no padding gave a header length of 128 mod 256")


def test_card_gets_name_and_creation_time_when_missing(bundle):
    plain = ModelBundle(bundle.model, bundle.tokenizer, bundle.task, {})
    card = load_bundle(bundle_to_bytes(plain)).card
    assert card["name"] == "reverse" and card["created"][:2] == "20"


# -------------------------------------------------------------------------------------------- atomic save


@pytest.mark.parametrize("broken", ["fsync", "replace"])
def test_failed_save_keeps_old_file_and_leaves_no_temp(bundle, tmp_path, monkeypatch, broken):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old contents")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints.os, broken, fail)
    with pytest.raises(OSError, match="disk full"):
        save_bundle(bundle, path)
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_successful_save_replaces_and_leaves_no_temp(bundle, tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old contents")
    save_bundle(bundle, path)
    assert os.listdir(tmp_path) == ["model.safetensors"]
    assert load_bundle(path).card == CARD


def test_save_refuses_non_finite_weights(bundle, tmp_path):
    broken = EncoderDecoder(bundle.config)
    with torch.no_grad():
        broken.generator.proj.bias[0] = float("nan")
    with pytest.raises(CheckpointError, match="NaN"):
        save_bundle(ModelBundle(broken, bundle.tokenizer, bundle.task, {}), tmp_path / "x.safetensors")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------ hostile files


@pytest.fixture(scope="module")
def marker_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("payload")


@pytest.fixture(scope="module")
def hostile_files(bundle, good_bytes, marker_dir) -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, a phrase the error message must contain)."""
    good = good_bytes
    state = bundle.model.state_dict()
    meta = bundle_metadata(bundle)
    first = next(iter(state))
    wrong_shape = dict(state, **{first: torch.zeros(3, 3)})
    nan = dict(state, **{first: torch.full_like(state[first], float("nan"))})
    inf = dict(state, **{first: torch.full_like(state[first], float("inf"))})
    half = {k: v.half() for k, v in state.items()}
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("weights.bin", b"\0" * 64)
    torch_saved = io.BytesIO()
    torch.save(state, torch_saved)
    huge_config = dict(meta["config"], n_enc_layers=12, n_dec_layers=12, d_model=1024, n_heads=16, d_ff=4096)
    length_of_good = struct.unpack("<Q", good[:8])[0]
    rng = random.Random(0)
    return {
        "empty": (b"", "too short"),
        "random bytes": (rng.randbytes(4096), "header"),
        "truncated inside the header": (good[: 8 + length_of_good // 2], "header"),
        "truncated inside the data": (good[: len(good) - 100], "truncated"),
        "only the length": (good[:8], "header"),
        "pickle with payload": (pickle.dumps(Payload(marker_dir / "marker")), "pickle"),
        "torch.save zip": (torch_saved.getvalue(), "pickle/zip"),
        "zip archive": (zipped.getvalue(), "pickle/zip"),
        "huge header length": (struct.pack("<Q", 2**62) + b"{}", "header claims"),
        "header above the limit": (framed(b" " * (headers.MAX_HEADER_BYTES + 1) + b"{}"), "limit"),
        "header not JSON": (framed(b"\xff\xfe not json"), "not valid JSON"),
        "header a list": (framed(b"[1, 2]"), "not a JSON object"),
        "no metadata": (safetensors.torch.save(state), "no string metadata"),
        "bad tensor entry": (framed(json.dumps({"__metadata__": {}, "w": {"dtype": "F32", "shape": [2],
                                                                      "data_offsets": [0, 10**9]}}).encode()), "'w'"),
        "metadata not JSON": (craft(state, {k: v for k, v in meta.items() if k != "config"}, {"config": "{oops"}),
                              "not valid JSON"),
        "config not an object": (craft(state, meta | {"config": [1, 2]}), "JSON object"),
        "task not an object": (craft(state, meta | {"task": "reverse"}), "task"),
        "card not an object": (craft(state, meta | {"card": 3}), "card"),
        "unknown metadata key": (craft(state, meta | {"code": "print(1)"}), "unknown code"),
        "missing metadata key": (craft(state, {k: meta[k] for k in meta if k != "tokenizer"}), "missing tokenizer"),
        "unsupported version": (craft(state, meta | {"format_version": 2}), "version"),
        "version as text": (craft(state, meta | {"format_version": "1"}), "version"),
        "absurd config": (craft(state, meta | {"config": dict(meta["config"], d_model=10**6)}), "d_model"),
        "negative layers": (craft(state, meta | {"config": dict(meta["config"], n_enc_layers=-1)}), "n_enc_layers"),
        "unknown config key": (craft(state, meta | {"config": dict(meta["config"], evil=1)}), "evil"),
        "huge config, tiny file": (craft(state, meta | {"config": huge_config}), "do not fit"),
        "wrong shape": (craft(wrong_shape, meta), first),
        "wrong dtype": (craft(half, meta), "F16"),
        "missing tensor": (craft({k: v for k, v in state.items() if k != first}, meta), "missing"),
        "extra tensor": (craft(dict(state, extra=torch.zeros(2)), meta), "unexpected"),
        "NaN weights": (craft(nan, meta), "NaN"),
        "infinite weights": (craft(inf, meta), "infinite"),
        "unknown task": (craft(state, meta | {"task": {"name": "rm -rf", "params": {}}}), "unknown task"),
        "bad task params": (craft(state, meta | {"task": {"name": "reverse", "params": {"max_len": 10**9}}}),
                            "max_len"),
        "bad tokenizer": (craft(state, meta | {"tokenizer": {"kind": "pickle"}}), "tokenizer"),
        "tokenizer does not fit": (craft(state, meta | {"tokenizer": {"kind": "char", "alphabet": "ab"}}), "tokens"),
    }


HOSTILE = [
    "empty", "random bytes", "truncated inside the header", "truncated inside the data", "only the length",
    "pickle with payload", "torch.save zip", "zip archive", "huge header length", "header above the limit",
    "header not JSON", "header a list", "no metadata", "bad tensor entry", "metadata not JSON",
    "config not an object", "task not an object", "card not an object", "unknown metadata key",
    "missing metadata key", "unsupported version", "version as text", "absurd config", "negative layers",
    "unknown config key", "huge config, tiny file", "wrong shape", "wrong dtype", "missing tensor",
    "extra tensor", "NaN weights", "infinite weights", "unknown task", "bad task params", "bad tokenizer",
    "tokenizer does not fit",
]


@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_file_is_refused_with_a_clear_message(hostile_files, marker_dir, tmp_path, kind):
    assert sorted(hostile_files) == sorted(HOSTILE)
    data, phrase = hostile_files[kind]
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    for source in (data, path):
        with pytest.raises(CheckpointError) as caught:
            load_bundle(source)
        message = str(caught.value)
        assert phrase.lower() in message.lower() and "\n" not in message
    assert not (marker_dir / "marker").exists()


def test_header_corruption_never_escapes_as_another_error(good_bytes):
    rng = random.Random(1)
    outcomes = set()
    for _ in range(60):
        data = bytearray(good_bytes)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(0, 300)] = rng.randrange(256)
        try:
            load_bundle(bytes(data))
            outcomes.add("loaded")
        except CheckpointError:
            outcomes.add("refused")
    assert "refused" in outcomes


def test_missing_file_and_size_cap(good_bytes, tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match="no such file"):
        load_bundle(tmp_path / "nope.safetensors")
    path = tmp_path / "big.safetensors"
    path.write_bytes(good_bytes)
    monkeypatch.setattr(type(path), "read_bytes", lambda self: pytest.fail("read a file over the cap"))
    with pytest.raises(CheckpointError, match="limit"):
        load_bundle(path, max_bytes=len(good_bytes) - 1)
    with pytest.raises(CheckpointError, match="limit"):
        load_bundle(io.BytesIO(good_bytes), max_bytes=1000)


# ------------------------------------------------------------------------------------------------- .pt


def test_pt_with_embedded_metadata_round_trips(bundle, tmp_path):
    path = tmp_path / "model.pt"
    torch.save(bundle_metadata(bundle) | {"state_dict": bundle.model.state_dict()}, path)
    loaded = load_state_dict_file(path)
    assert loaded.card == CARD
    for mine, theirs in zip(outputs(bundle), outputs(loaded)):
        assert torch.equal(mine, theirs)


def test_bare_pt_state_dict_with_separate_config(bundle, tmp_path):
    path = tmp_path / "weights.pt"
    torch.save(bundle.model.state_dict(), path)
    meta = json.loads(json.dumps(bundle_metadata(bundle)))  # as read from a JSON file next to the weights
    sidecar = {key: meta[key] for key in ("config", "tokenizer", "task")}
    loaded = load_state_dict_file(path, sidecar)
    assert torch.equal(outputs(bundle)[0], outputs(loaded)[0])
    with pytest.raises(CheckpointError, match="bare state dict"):
        load_state_dict_file(path)


@pytest.mark.parametrize("how", ["torch.save", "raw pickle"])
def test_pt_payload_is_refused_and_never_runs(bundle, tmp_path, how):
    marker = tmp_path / "marker"
    buffer = io.BytesIO()
    evil = {"state_dict": bundle.model.state_dict(), "x": Payload(marker)}
    torch.save(evil, buffer) if how == "torch.save" else pickle.dump(evil, buffer, protocol=2)
    with pytest.raises(CheckpointError, match="safely"):
        load_state_dict_file(buffer.getvalue(), bundle_metadata(bundle))
    assert not marker.exists()


def test_pt_refuses_bad_contents(bundle, tmp_path):
    meta = bundle_metadata(bundle)
    state = bundle.model.state_dict()
    cases = {
        "must hold a dict": torch.zeros(3),
        "map parameter names to tensors": meta | {"state_dict": {"w": [1, 2]}},
        "do not fit": meta | {"state_dict": {"w": torch.zeros(2)}},
        "unknown evil": meta | {"state_dict": state, "evil": 1},
        "n_heads": meta | {"state_dict": state, "config": dict(meta["config"], n_heads=0)},
    }
    for phrase, obj in cases.items():
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        with pytest.raises(CheckpointError, match=phrase):
            load_state_dict_file(buffer.getvalue())
    with pytest.raises(CheckpointError, match="safely"):
        load_state_dict_file(b"not a pickle at all")


# ---------------------------------------------------------------------------------------------- listing


def test_listing_reads_headers_only_and_reports_broken_files(bundle, good_bytes, tmp_path, monkeypatch):
    save_bundle(bundle, tmp_path / "b-good.safetensors")
    (tmp_path / "a-broken.safetensors").write_bytes(b"\x80\x04garbage")
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    monkeypatch.setattr(checkpoints.safetensors.torch, "load", lambda *a: pytest.fail("loaded tensors"))
    monkeypatch.setattr(checkpoints, "EncoderDecoder", lambda *a: pytest.fail("built a model"))
    broken, good = list_checkpoints(tmp_path)
    assert broken.path.name == "a-broken.safetensors" and "pickle" in broken.error
    assert good.error is None
    assert (good.name, good.task, good.created) == ("tiny", "reverse", CARD["created"])
    assert good.task_params == {"min_len": 2, "max_len": 6}
    assert good.parameters == bundle.model.num_parameters()
    assert good.size == len(good_bytes) and good.card == CARD and good.config == bundle.config.to_dict()
    assert list_checkpoints(tmp_path / "missing") == []
    assert "no such file" in read_info(tmp_path / "gone.safetensors").error.lower()


def test_saved_file_has_ordinary_permissions(bundle, tmp_path):
    """mkstemp creates 0600 files; a saved checkpoint must be readable like any file the user writes."""
    import os
    import stat

    path = save_bundle(bundle, tmp_path / "m.safetensors")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_pt_refusal_message_is_plain_and_never_advises_unsafe_loading(tmp_path):
    path, marker = tmp_path / "evil.pt", tmp_path / "marker"
    torch.save({"state_dict": Payload(marker)}, path)
    for source in (path, b"not a pytorch file" * 4):
        with pytest.raises(CheckpointError) as info:
            load_state_dict_file(source)
        message = str(info.value)
        assert message.startswith("refused to load this .pt file safely")
        assert "weights_only" not in message and "\x1b" not in message
    assert not marker.exists()  # the payload never ran


def test_loading_a_checkpoint_does_not_import_torch_dynamo():
    """Building the model on the meta device to check a file imported torch._dynamo (2.4 s of a first load,
    which the first page to show a model paid); a fresh process loads the shipped model without it."""
    assert fresh_python("import sys\nfrom transformer.store.checkpoints import load_bundle\n"
                        "load_bundle('assets/checkpoints/reverse.safetensors')\n"
                        "print('torch._dynamo' in sys.modules)\n").strip() == "False"


def test_reading_headers_and_opening_the_store_import_no_torch(tmp_path):
    """The sidebar lists the shipped models and shows the active one's card from their headers on a fresh server's
    first page: reading them, and opening the model store, must not pay torch's import (about 1 s)."""
    assert fresh_python("import sys\nfrom transformer.store.headers import list_checkpoints, read_info\n"
                        "from transformer.store.model_store import ModelStore\n"
                        "infos = list_checkpoints('assets/checkpoints')\n"
                        "info = read_info('assets/checkpoints/reverse.safetensors')\n"
                        f"ModelStore({str(tmp_path)!r})\n"
                        "print(bool(infos) and info.error is None and info.parameters > 0, 'torch' in sys.modules)\n"
                        ).split() == ["True", "False"]
