"""Checkpoints page (AppTest): the model table, cards, activation, evaluation, removal, uploads good and
hostile (file names shown literally); links that restore the view or cannot be followed; and the shared
cached models staying read-only whatever a session does with them."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import re
import struct
import tomllib
from pathlib import Path

import pytest
import safetensors
import safetensors.torch
import torch
from helpers.hostile import Payload
from helpers.repo import REVERSE, ROOT, link_id, needs_reverse, open_link, reverse_variant

from transformer.analysis.evaluation import evaluate_bundle
from transformer.bundle import ModelBundle
from transformer.network.config import ModelConfig
from transformer.network.decoding import greedy_decode, teacher_forced
from transformer.network.model import EncoderDecoder
from transformer.store.checkpoints import bundle_metadata, bundle_to_bytes, load_bundle
from transformer.store.headers import list_checkpoints
from transformer.tasks import make_task
from ui import model_registry as registry
from ui import uploads
from ui.markdown import WORD_JOINER, literal, plain
from ui.tables.checkpoints import CHECKPOINTS
from ui.tables.decode import DECODE

PAGE = "pages/models/checkpoints.py"
DEFAULT = "shipped:reverse"
VIEW = CHECKPOINTS.view()
INSPECT, SAMPLES, SEED = (VIEW.widget_key(name) for name in ("inspect", "samples", "seed"))
INJECTION = "**bold**![x](http://example.invalid/x.png)"  # a file name that must not render (issue 11)
MARKUP = "**bold** ![x](x.png) <img src=x> :red[r] `c` $x$"  # the same without a "/" (a model takes the last part)

pytestmark = needs_reverse


# --------------------------------------------------------------------------------------------- helpers


def errors(at) -> list[str]:
    """The error messages as the reader sees them (they are literal markdown: see shown_literally)."""
    return [plain(e.value) for e in at.error]


def shown_literally(markdown: str) -> bool:
    """Whether `markdown` shows its text exactly as written: every ASCII punctuation mark escaped, no bare URL
    or e-mail address left for the autolinker."""
    unescaped = re.sub(r"\\[!-/:-@\[-`{-~]", "", markdown)
    return (not re.search(r"[!-/:-@\[-`{-~]", unescaped)
            and not re.search(r"(?i)://|www\.|@(?!" + WORD_JOINER + ")", markdown.replace("\\", "")))


def session_keys(at) -> list[str]:
    return list(at.session_state[registry.SESSION_MODELS]) if registry.SESSION_MODELS in at.session_state else []


def upload(at, name: str, data: bytes, key: str = uploads.FILE):
    at.file_uploader(key=key).upload(name, data).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at):
    return at.dataframe[0].value


def linked(page: str = PAGE, **query: str):
    """An AppTest of `page` opened by a link with `query` (as a fresh session would open it)."""
    return open_link(page, query)


@pytest.fixture(scope="module")
def reverse_bytes() -> bytes:
    return REVERSE.read_bytes()


@pytest.fixture(scope="module")
def other_bytes() -> bytes:
    """A checkpoint of a model the list does not hold yet (`reverse_variant(1e-3)`)."""
    return bundle_to_bytes(reverse_variant(1e-3))


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


def test_a_shipped_model_has_one_name_in_the_readers_language_in_the_picker_and_the_table(clean_caches):
    at = open_link(PAGE, {"lang": "zh"})
    assert not at.exception
    assert table(at).loc["shipped:reverse-early", "Model"] == "reverse（训练不足）"  # not its card's English name
    picker = at.selectbox(key="active_model_widget")
    assert "reverse（训练不足）（预训练）" in picker.options


def test_table_lists_every_shipped_checkpoint_with_the_active_one_marked(app):
    at = app(PAGE)
    shown = table(at)
    infos = [i for i in list_checkpoints(registry.ASSETS) if i.error is None]
    assert list(shown.index) == [f"shipped:{i.path.stem}" for i in infos]
    # the columns that fit a 1024-pixel window beside the sidebar (the card below gives shape and parameters)
    assert list(shown.columns) == ["Active", "Model", "Origin", "Task", "Exact match"]  # the file size: on the card
    for info in infos:
        r = shown.loc[f"shipped:{info.path.stem}"]
        assert r["Model"] == registry.shipped_name(info.path.stem) and r["Origin"] == "pretrained"
        assert r["Exact match"] == pytest.approx(100 * info.card["exact_match"])  # shown as a percentage
    assert shown.loc[DEFAULT, "Active"] and not shown.drop(DEFAULT)["Active"].any()
    assert at.selectbox(key=INSPECT).value == DEFAULT
    assert not at.query_params  # the default view has a bare URL
    card = "\n".join(m.value for m in at.markdown)
    reverse = load_bundle(REVERSE)
    assert f"**Tokenizer:** char, {reverse.tokenizer.vocab_size} tokens" in card
    assert f"**Parameters:** {reverse.model.num_parameters():,}" in card
    assert f"**File size:** {REVERSE.stat().st_size / 1e6:.2f} MB" in card  # MB = 10^6 bytes, as `models`
    # the card names the held-out set its accuracy comes from: the training run's own, not Evaluate's
    assert ("**Accuracies measured on:** the training run's own held-out split (1,000 inputs, greedy, at step "
            f"{reverse.card['evaluated_step']:,}), not the fresh inputs of Evaluate") in card
    sidebar = "\n".join(m.value for m in at.sidebar.markdown)
    assert f"**Held-out exact match:** {reverse.card['exact_match']:.1%} :small[on the training run's own" in sidebar


def test_upload_limit_matches_the_server_cap():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == uploads.UPLOAD_LIMIT_MB


# ----------------------------------------------------------------------------------------------- upload


def test_good_upload_is_added_once_and_becomes_active(app, other_bytes):
    at = upload(app(PAGE), "my_reverse.safetensors", other_bytes)
    assert not errors(at)
    assert "loaded as “my_reverse”" in plain(at.success[0].value)
    assert "It is now the active model on every page." in plain(at.success[0].value)
    (key,) = session_keys(at)
    assert key.startswith("uploaded:")
    assert at.session_state[registry.ACTIVE] == key and at.sidebar.selectbox[0].value == key
    shown = table(at)
    assert list(shown.index)[-1] == key and shown.loc[key, "Model"] == "my_reverse"
    assert shown.loc[key, "Active"] and not shown.loc[DEFAULT, "Active"]
    assert at.selectbox(key=INSPECT).value == key  # its card is shown
    uploaded = at.session_state[registry.SESSION_MODELS][key][1]
    reference = reverse_variant(1e-3)
    assert all(torch.equal(a, b) for a, b in zip(uploaded.model.state_dict().values(),
                                                  reference.model.state_dict().values()))
    at.run()
    at.run()  # reruns, and a metadata file added beside a .safetensors, do not add it again
    upload(at, "meta.json", b"{}", key=uploads.METADATA)
    assert session_keys(at) == [key] and at.session_state[registry.ACTIVE] == key and not errors(at)


def test_an_upload_of_a_listed_model_is_named_as_it_and_not_added(app, reverse_bytes, other_bytes):
    """Issue 27: the shipped reverse.safetensors uploaded back added a second `reverse` and made it active."""
    at = app(PAGE)
    rows = len(table(at))
    at = upload(at, "reverse.safetensors", reverse_bytes)
    message = plain(at.success[0].value)
    assert "“reverse.safetensors” holds the same model as “reverse (pretrained)”, already in the list" in message
    assert "nothing was added" in message and session_keys(at) == [] and len(table(at)) == rows
    assert at.session_state[registry.ACTIVE] == DEFAULT and at.selectbox(key=INSPECT).value == DEFAULT
    at = upload(at, "mine.safetensors", other_bytes)  # a model not listed yet is added ...
    (key,) = session_keys(at)
    at = upload(at, "mine again.safetensors", other_bytes)  # ... once: under another name it is the same model
    assert "holds the same model as “mine (uploaded)”" in plain(at.success[0].value) and session_keys(at) == [key]


def test_with_the_switch_off_an_upload_joins_the_list_and_the_active_model_stays(app, other_bytes):
    at = app(PAGE)
    at.toggle(key=VIEW.widget_key("activate")).set_value(False).run()
    assert at.query_params["activate"] == "0"
    at = upload(at, "mine.safetensors", other_bytes)
    (key,) = session_keys(at)
    assert "the active model is still the one in the sidebar" in plain(at.success[0].value)
    assert at.session_state[registry.ACTIVE] == DEFAULT and key in table(at).index
    assert at.selectbox(key=INSPECT).value == key  # its card, with its Make active button
    at.button(key="ckpt_activate").click().run()
    assert at.session_state[registry.ACTIVE] == key and at.sidebar.selectbox[0].value == key


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


def test_uploads_per_session_are_capped(app, other_bytes, monkeypatch):
    monkeypatch.setattr(uploads, "MAX_UPLOADED_MODELS", 1)
    at = upload(app(PAGE), "one.safetensors", other_bytes)
    (key,) = session_keys(at)
    at = upload(at, "two.safetensors", bundle_to_bytes(reverse_variant(2e-3)))
    assert "already holds 1 uploaded models" in errors(at)[0]
    assert session_keys(at) == [key] and at.session_state[registry.ACTIVE] == key


def test_pt_uploads_with_metadata_inside_or_beside(app, tiny):
    meta = bundle_metadata(tiny)
    at = upload(app(PAGE), "whole.pt", saved(meta | {"state_dict": tiny.model.state_dict()}))
    assert not errors(at) and len(session_keys(at)) == 1
    weights = {name: tensor + 1e-3 for name, tensor in tiny.model.state_dict().items()}  # another model
    at = upload(at, "bare.pt", saved(weights))
    assert "bare state dict" in errors(at)[0] and len(session_keys(at)) == 1
    sidecar = {k: meta[k] for k in ("config", "tokenizer", "task")}
    at = upload(at, "bare.json", json.dumps(sidecar).encode(), key=uploads.METADATA)
    assert not errors(at) and len(session_keys(at)) == 2
    key = at.session_state[registry.ACTIVE]
    assert table(at).loc[key, "Model"] == "bare" and table(at).loc[key, "Task"] == tiny.task.title
    loaded = at.session_state[registry.SESSION_MODELS][key][1]
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), weights.values()))


def test_a_hostile_file_name_is_shown_literally_never_as_markdown(app):
    """Issue 11: a file named like markdown (bold, an image that would fetch its URL) shows as written, in
    the outcome, the model picker, the sidebar and the table; refused or accepted."""
    at = upload(app(PAGE), f"{INJECTION}.pt", b"not a checkpoint")
    (message,) = [e.value for e in at.error]
    assert shown_literally(message) and f"“{INJECTION}.pt” was refused" in plain(message)
    for nudge, name in ((1e-3, f"{INJECTION}.safetensors"), (2e-3, f"{MARKUP}.safetensors")):
        at = upload(at, name, bundle_to_bytes(reverse_variant(nudge)))
        (message,) = [s.value for s in at.success]
        model = Path(name).stem  # "x.png)" for INJECTION: its "folders" are not part of the model's name
        assert shown_literally(message) and f"“{name}” loaded as “{model}”" in plain(message)
    key = session_keys(at)[-1]
    label = f"{MARKUP} (uploaded)"  # selectbox options and dataframe cells are plain text, not markdown
    assert at.sidebar.selectbox[0].value == key and label in at.sidebar.selectbox[0].options
    assert at.selectbox(key=INSPECT).value == key and label in at.selectbox(key=INSPECT).options
    assert table(at).loc[key, "Model"] == MARKUP
    shown = [e.value for kind in (at.markdown, at.caption, at.success, at.error, at.warning) for e in kind]
    assert not any(text in value for value in shown for text in (INJECTION, MARKUP))  # never raw


@pytest.mark.parametrize("text", [INJECTION, "a`b`` :smile: :red[x] $x$ <img src=x> www.x.org a@b.co \\ #1\n- li",
                                  "tensor 'x' is float32 [3, 5]", "", "ordinary words"])
def test_literal_markdown_round_trips_and_escapes_everything(text):
    shown = literal(text)
    assert shown_literally(shown) and plain(shown) == " ".join(text.splitlines())
    assert literal("ordinary words") == "ordinary words"


# ------------------------------------------------------------------------------------------------- links


def test_a_link_restores_the_active_and_inspected_models_and_the_evaluation_settings(clean_caches):
    query = {"v": "1", "model": "copy", "inspect": "reverse", "samples": "60", "seed": "11"}
    at = linked(**query)
    assert not at.exception and not at.warning
    assert at.sidebar.selectbox[0].value == "shipped:copy" and at.selectbox(key=INSPECT).value == DEFAULT
    assert at.number_input(key=SAMPLES).value == 60 and at.number_input(key=SEED).value == 11
    assert table(at).loc["shipped:copy", "Active"]
    assert not at.metric  # a link never starts an evaluation (2,000 inputs take seconds): Evaluate is ready
    assert any(c.value.startswith("Press Evaluate to measure this model on 60 held-out inputs drawn with seed 11")
               for c in at.caption)
    assert dict(at.query_params) == query
    at.button(key="ckpt_evaluate").click().run()
    expected = evaluate_bundle(load_bundle(REVERSE), 60, 11)  # the inspected model, not the active one
    assert {m.label: m.value for m in at.metric}["Exact match"] == f"{expected['exact_match']:.1%}"
    assert dict(at.query_params) == query


HOSTILE_LINKS = [
    {"model": "nope"}, {"model": "../../etc/passwd"}, {"model": "trained:12345678"},
    {"inspect": "nope"}, {"inspect": "uploaded:deadbeef"}, {"inspect": "x" * 5000}, {"inspect": "a\x00b"},
    {"inspect": INJECTION}, {"samples": "nan"}, {"samples": "-3"}, {"samples": "5"}, {"samples": "2001"},
    {"samples": "99999999999999999999"}, {"samples": "1e3"}, {"seed": "-1"}, {"seed": str(2**31)},
    {"seed": "abc"}, {"seed": "inf"}, {"v": "2", "samples": "60"}, {"unknown": "1"}, {INJECTION: "1"},
    {"evaluations": "1"}, {"table_version": "3"},
]


@pytest.mark.parametrize("query", HOSTILE_LINKS, ids=link_id)
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, query):
    at = linked(**query)
    assert not at.exception, [e.value for e in at.exception]
    (note,) = [w.value for w in at.warning]
    assert "could not be followed" in note and shown_literally(note), note  # a link's text never renders
    assert at.session_state[registry.ACTIVE] == DEFAULT and at.sidebar.selectbox[0].value == DEFAULT
    assert at.selectbox(key=INSPECT).value == DEFAULT
    assert at.number_input(key=SAMPLES).value == 500 and at.number_input(key=SEED).value == 7
    assert not at.metric and session_keys(at) == []
    assert set(at.query_params) <= {"v"}, dict(at.query_params)  # the URL shows the default view


# ---------------------------------------------------------------------------------- card and actions


def test_make_active_and_remove(app, other_bytes):
    at = upload(app(PAGE), "second.safetensors", other_bytes)
    (key,) = session_keys(at)
    at.selectbox(key=INSPECT).set_value(DEFAULT).run()
    assert at.button(key="ckpt_remove").disabled  # pretrained models stay
    at.button(key="ckpt_activate").click().run()
    assert at.session_state[registry.ACTIVE] == DEFAULT and at.sidebar.selectbox[0].value == DEFAULT
    assert at.button(key="ckpt_activate").disabled
    at.selectbox(key=INSPECT).set_value(key).run()
    at.button(key="ckpt_activate").click().run()
    assert at.sidebar.selectbox[0].value == key and table(at).loc[key, "Active"]
    at.button(key="ckpt_remove").click().run()
    assert not at.exception
    assert session_keys(at) == [] and key not in table(at).index
    assert at.sidebar.selectbox[0].value == DEFAULT and at.selectbox(key=INSPECT).value == DEFAULT


def test_evaluation_matches_the_library_and_shows_worked_examples(app):
    at = app(PAGE)
    at.number_input(key=SAMPLES).set_value(60)
    at.number_input(key=SEED).set_value(11)
    at.button(key="ckpt_evaluate").click().run()
    assert not at.exception
    assert dict(at.query_params) == {"v": "1", "samples": "60", "seed": "11"}
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
    assert list(shown["Input"]) == [literal(source) for source, _, _ in wrong + right]  # st.table reads markdown
    assert list(shown["Expected"]) == [literal(target) for _, target, _ in wrong + right]
    assert list(shown["Model wrote"]) == [literal(wrote) if wrote else "(nothing)" for _, _, wrote in wrong + right]
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

    shared = registry.bundle_for(DEFAULT)
    before = snapshot(shared)
    text, tok = shared.task.examples()[0], shared.tokenizer
    decoding = linked("pages/explore/decode.py", force=f"1:{tok.encode('z')[0]}")  # one session forces a token
    assert not decoding.exception and decoding.session_state[DECODE.key("force")]
    probes = [AppTest.from_function(probe_session, default_timeout=60).run() for _ in range(2)]
    assert [p.session_state["bundle_id"] for p in probes] == [id(shared)] * 2
    evaluating = app(PAGE)  # another session evaluates the same model
    evaluating.button(key="ckpt_evaluate").click().run()
    assert not evaluating.exception
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
