"""Checkpoints page (AppTest): the model table, cards, activation, evaluation, removal, uploads good and
hostile; and the shared cached models staying read-only whatever a session does with them."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import struct
import tomllib
from pathlib import Path

import pytest
import safetensors
import safetensors.torch
import torch

from conftest import REVERSE, ROOT, Payload, needs_reverse
from ui import model_registry as registry
from ui import uploads
from transformer.bundle import ModelBundle
from transformer.checkpoints import bundle_metadata, list_checkpoints, load_bundle
from transformer.config import ModelConfig
from transformer.decoding import greedy_decode, teacher_forced
from transformer.evaluation import evaluate_bundle
from transformer.model import EncoderDecoder
from transformer.tasks import make_task

PAGE = "pages/models/checkpoints.py"
DEFAULT = "shipped:reverse"

pytestmark = needs_reverse


# --------------------------------------------------------------------------------------------- helpers


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def session_keys(at) -> list[str]:
    return list(at.session_state[registry.SESSION_MODELS]) if registry.SESSION_MODELS in at.session_state else []


def upload(at, name: str, data: bytes, key: str = "ckpt_upload"):
    at.file_uploader(key=key).upload(name, data).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at):
    return at.dataframe[0].value


@pytest.fixture(scope="module")
def reverse_bytes() -> bytes:
    return REVERSE.read_bytes()


@pytest.fixture(scope="module")
def reverse_parts(reverse_bytes) -> tuple[dict, dict]:
    """The real checkpoint's tensors and its raw string metadata."""
    state = safetensors.torch.load(reverse_bytes)
    with safetensors.safe_open(str(REVERSE), "pt") as f:
        return state, f.metadata()


@pytest.fixture(scope="module")
def tiny() -> ModelBundle:
    task = make_task("copy", min_len=1, max_len=5)
    tokenizer = task.make_tokenizer()
    torch.manual_seed(0)
    config = ModelConfig(tokenizer.vocab_size, tokenizer.vocab_size, 1, 1, d_model=16, n_heads=2, d_ff=32, max_len=8)
    return ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "tiny", "steps": 3})


def saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def with_metadata(state: dict, metadata: dict, **changes: str) -> bytes:
    return safetensors.torch.save(state, metadata=metadata | changes)


@pytest.fixture(scope="module")
def marker(tmp_path_factory) -> Path:
    """The file the pickle payloads would create if anything unpickled them unsafely."""
    return tmp_path_factory.mktemp("payload") / "marker"


@pytest.fixture(scope="module")
def hostile(reverse_bytes, reverse_parts, marker) -> dict[str, tuple[str, bytes, str]]:
    """kind -> (file name, bytes, a phrase the refusal must contain)."""
    state, metadata = reverse_parts
    first = next(iter(state))
    config = json.loads(metadata["config"])
    return {
        "pickle payload (.pt)": ("evil.pt", saved(Payload(marker)), "refused to load this .pt file safely"),
        "pickle payload (raw pickle as .pt)": ("evil2.pt", pickle.dumps(Payload(marker)), "safely"),
        "pickle payload (as .safetensors)": ("evil.safetensors", pickle.dumps(Payload(marker)), "pickle"),
        "truncated": ("cut.safetensors", reverse_bytes[: len(reverse_bytes) // 2], "truncated"),
        "wrong shape": ("shape.safetensors",
                        with_metadata(dict(state, **{first: torch.zeros(3, 5)}), metadata), "[3, 5]"),
        "huge header": ("huge.safetensors", struct.pack("<Q", 100 * 2**20) + b'{"a": 1}' * 16, "header claims"),
        "absurd config": ("absurd.safetensors",
                          with_metadata(state, metadata, config=json.dumps(config | {"d_model": 10**9})), "d_model"),
        "non-JSON metadata": ("nojson.safetensors", with_metadata(state, metadata, config="{not json"),
                              "not valid JSON"),
        "random bytes": ("noise.safetensors", random.Random(0).randbytes(4096), "header"),
        "oversized": ("big.safetensors", reverse_bytes + bytes(uploads.UPLOAD_LIMIT), "limited to 20 MB"),
        "bare .pt without its metadata": ("bare.pt", saved(state), "bare state dict"),
    }


# ------------------------------------------------------------------------------------------------ table


def test_table_lists_every_shipped_checkpoint_with_the_active_one_marked(app):
    at = app(PAGE)
    shown = table(at)
    infos = [i for i in list_checkpoints(registry.ASSETS) if i.error is None]
    assert list(shown.index) == [f"shipped:{i.path.stem}" for i in infos]
    for info in infos:
        r = shown.loc[f"shipped:{info.path.stem}"]
        assert r["Model"] == info.name and r["Origin"] == "pretrained"
        assert r["Parameters"] == info.parameters == load_bundle(info.path).model.num_parameters()
        assert r["Heads"] == info.config["n_heads"] and r["d_model"] == info.config["d_model"]
        assert r["Size (MB)"] == pytest.approx(info.path.stat().st_size / 2**20)
        assert r["Exact match"] == pytest.approx(100 * info.card["exact_match"])  # shown as a percentage
    assert shown.loc[DEFAULT, "Active"] and not shown.drop(DEFAULT)["Active"].any()
    assert at.selectbox(key="ckpt_inspect").value == DEFAULT
    card = "\n".join(m.value for m in at.markdown)
    reverse = load_bundle(REVERSE)
    assert f"**Tokenizer:** char, {reverse.tokenizer.vocab_size} tokens" in card
    assert f"**Parameters:** {reverse.model.num_parameters():,}" in card


def test_upload_limit_matches_the_server_cap():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == uploads.UPLOAD_LIMIT_MB


# ----------------------------------------------------------------------------------------------- upload


def test_good_upload_is_added_once_and_becomes_active(app, reverse_bytes):
    at = upload(app(PAGE), "my_reverse.safetensors", reverse_bytes)
    assert not errors(at)
    assert "loaded as “my_reverse”" in at.success[0].value
    (key,) = session_keys(at)
    assert key.startswith("uploaded:")
    assert at.session_state[registry.ACTIVE] == key and at.sidebar.selectbox[0].value == key
    shown = table(at)
    assert list(shown.index)[-1] == key and shown.loc[key, "Model"] == "my_reverse"
    assert shown.loc[key, "Active"] and not shown.loc[DEFAULT, "Active"]
    assert at.selectbox(key="ckpt_inspect").value == key  # its card is shown
    uploaded = at.session_state[registry.SESSION_MODELS][key][1]
    reference = load_bundle(REVERSE)
    assert all(torch.equal(a, b) for a, b in zip(uploaded.model.state_dict().values(),
                                                  reference.model.state_dict().values()))
    at.run()
    at.run()  # reruns, and a metadata file added beside a .safetensors, do not add it again
    upload(at, "meta.json", b"{}", key="ckpt_upload_config")
    assert session_keys(at) == [key] and at.session_state[registry.ACTIVE] == key and not errors(at)


HOSTILE = ["pickle payload (.pt)", "pickle payload (raw pickle as .pt)", "pickle payload (as .safetensors)",
           "truncated", "wrong shape", "huge header", "absurd config", "non-JSON metadata", "random bytes",
           "oversized", "bare .pt without its metadata"]


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_upload_is_refused_and_changes_nothing(app, hostile, marker, kind):
    assert sorted(hostile) == sorted(HOSTILE)
    name, data, phrase = hostile[kind]
    at = app(PAGE)
    rows = len(table(at))
    at = upload(at, name, data)
    (message,) = errors(at)
    assert phrase in message and name in message and "Nothing was changed" in message
    assert at.session_state[registry.ACTIVE] == DEFAULT and at.sidebar.selectbox[0].value == DEFAULT
    assert session_keys(at) == [] and len(table(at)) == rows
    assert not marker.exists()
    at.run()
    assert errors(at) == [message]  # still shown after a rerun


def test_payload_would_run_if_unpickled_unsafely(tmp_path):
    """The control for the payload tests: the same object does create its marker under plain pickle."""
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(Payload(control)))
    assert control.exists()


def test_loader_refuses_other_file_types_and_config_that_is_not_json(tiny):
    with pytest.raises(uploads.CheckpointError, match="only .safetensors and .pt"):
        uploads.load_upload("notes.txt", b"hello")
    with pytest.raises(uploads.CheckpointError, match="config file is not valid JSON"):
        uploads.load_upload("bare.pt", saved(tiny.model.state_dict()), b"{oops")


def test_uploads_per_session_are_capped(app, reverse_bytes, monkeypatch):
    monkeypatch.setattr(uploads, "MAX_UPLOADED_MODELS", 1)
    at = upload(app(PAGE), "one.safetensors", reverse_bytes)
    (key,) = session_keys(at)
    at = upload(at, "two.safetensors", reverse_bytes)
    assert "already holds 1 uploaded models" in errors(at)[0]
    assert session_keys(at) == [key] and at.session_state[registry.ACTIVE] == key


def test_pt_uploads_with_metadata_inside_or_beside(app, tiny):
    meta = bundle_metadata(tiny)
    at = upload(app(PAGE), "whole.pt", saved(meta | {"state_dict": tiny.model.state_dict()}))
    assert not errors(at) and len(session_keys(at)) == 1
    at = upload(at, "bare.pt", saved(tiny.model.state_dict()))
    assert "bare state dict" in errors(at)[0] and len(session_keys(at)) == 1
    sidecar = {k: meta[k] for k in ("config", "tokenizer", "task")}
    at = upload(at, "bare.json", json.dumps(sidecar).encode(), key="ckpt_upload_config")
    assert not errors(at) and len(session_keys(at)) == 2
    key = at.session_state[registry.ACTIVE]
    assert table(at).loc[key, "Model"] == "bare" and table(at).loc[key, "Task"] == tiny.task.title
    loaded = at.session_state[registry.SESSION_MODELS][key][1]
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(),
                                                  tiny.model.state_dict().values()))


# ---------------------------------------------------------------------------------- card and actions


def test_make_active_and_remove(app, reverse_bytes):
    at = upload(app(PAGE), "second.safetensors", reverse_bytes)
    (key,) = session_keys(at)
    at.selectbox(key="ckpt_inspect").set_value(DEFAULT).run()
    assert at.button(key="ckpt_remove").disabled  # pretrained models stay
    at.button(key="ckpt_activate").click().run()
    assert at.session_state[registry.ACTIVE] == DEFAULT and at.sidebar.selectbox[0].value == DEFAULT
    assert at.button(key="ckpt_activate").disabled
    at.selectbox(key="ckpt_inspect").set_value(key).run()
    at.button(key="ckpt_activate").click().run()
    assert at.sidebar.selectbox[0].value == key and table(at).loc[key, "Active"]
    at.button(key="ckpt_remove").click().run()
    assert not at.exception
    assert session_keys(at) == [] and key not in table(at).index
    assert at.sidebar.selectbox[0].value == DEFAULT and at.selectbox(key="ckpt_inspect").value == DEFAULT


def test_evaluation_matches_the_library_and_shows_worked_examples(app):
    at = app(PAGE)
    at.number_input(key="ckpt_eval_samples").set_value(60)
    at.number_input(key="ckpt_eval_seed").set_value(11)
    at.button(key="ckpt_evaluate").click().run()
    assert not at.exception
    bundle = load_bundle(REVERSE)
    expected = evaluate_bundle(bundle, 60, 11)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Exact match"] == f"{expected['exact_match']:.1%}"
    assert metrics["Token accuracy"] == f"{expected['token_accuracy']:.1%}"
    assert metrics["Loss"] == f"{expected['loss']:.3f}"
    shown = at.table[0].value
    # Recomputed one input at a time: the first 4 wrong answers of this draw, then the first 4 right ones.
    answers = [(source, target, greedy_decode(bundle.model, bundle.tokenizer, source).output_text)
               for source, target in bundle.task.pairs(60, 11, "heldout")]
    wrong = [a for a in answers if a[2] != a[1]][:4]
    right = [a for a in answers if a[2] == a[1]][:4]
    assert list(shown.iloc[:, 0]) == ["✗"] * len(wrong) + ["✓"] * len(right)
    assert list(shown["Input"]) == [source for source, _, _ in wrong + right]
    assert list(shown["Expected"]) == [target for _, target, _ in wrong + right]
    assert list(shown["Model wrote"]) == [wrote or "(nothing)" for _, _, wrote in wrong + right]
    assert any(c.value.startswith("60 held-out inputs drawn with seed 11") for c in at.caption)


# ------------------------------------------------------------------------------- shared, read-only models


def snapshot(bundle: ModelBundle) -> tuple[dict, list, list]:
    model = bundle.model
    return ({k: v.clone() for k, v in model.state_dict().items()},
            [(n, p.requires_grad) for n, p in model.named_parameters()],
            [(n, m.training) for n, m in model.named_modules()])


def same(a, b) -> bool:
    return a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0]) and a[1:] == b[1:]


def probe_session():
    """A session that records which bundle object the registry hands it."""
    import streamlit as st

    from ui import model_registry as registry

    st.session_state["bundle_id"] = id(registry.bundle_for(registry.DEFAULT_MODEL))


def test_a_sessions_work_never_changes_the_shared_cached_model(app):
    """Sessions get the very same cached bundle; forcing tokens, dropping positions, opening the causal mask
    and evaluating, in one session or directly, leave its weights and flags exactly as they were."""
    from streamlit.testing.v1 import AppTest

    decoding = app("pages/explore/decode.py")
    shared = registry.bundle_for(DEFAULT)
    before = snapshot(shared)
    decoding.button(key="decode_force").click().run()  # one session forces a token
    assert not decoding.exception and decoding.session_state["decode_forced"]
    probes = [AppTest.from_function(probe_session, default_timeout=60).run() for _ in range(2)]
    assert [p.session_state["bundle_id"] for p in probes] == [id(shared)] * 2
    evaluating = app(PAGE)  # another session evaluates the same model
    evaluating.button(key="ckpt_evaluate").click().run()
    assert not evaluating.exception
    text, tok = decoding.session_state["decode_text"], shared.tokenizer
    greedy_decode(shared.model, tok, text, force={0: tok.encode("z")[0]}, positions=False)
    teacher_forced(shared.model, tok, text, shared.task.target(text), causal=False)
    evaluate_bundle(shared, 20, 3)
    assert same(snapshot(shared), before)
    assert registry.bundle_for(DEFAULT) is shared


def test_replacing_a_shipped_file_changes_its_version_and_its_bundle(monkeypatch, tmp_path):
    """Page caches key on (model key, registry.version): a replaced checkpoint file must change the version
    (and load afresh), so no page serves results of the old weights."""
    monkeypatch.setattr(registry, "ASSETS", tmp_path)
    path = tmp_path / "reverse.safetensors"
    path.write_bytes(REVERSE.read_bytes())
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    key = registry.shipped_key(path)
    before, bundle = registry.version(key), registry.bundle_for(key)
    assert before == 1_000_000_000 and registry.version(key) == before
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))  # the same name, a new file
    assert registry.version(key) == 2_000_000_000 and registry.bundle_for(key) is not bundle
    assert registry.version("trained:gone") == 0  # a key that is not (or no longer) there
