"""Train page, your own data (AppTest): upload a TSV or paste pairs, see every problem the checks find (Start
blocked until the data is fixed), choose the tokenisation, then train in a worker like any built-in task; the
model it makes decodes without the data; uploaded without its data, such a model opens on every page."""

from __future__ import annotations


import numpy as np
from helpers.repo import ROOT
from helpers.train_page import job_of, key, probe_chart, shown_step, state, wait_for

from transformer.network.decoding import greedy_decode
from transformer.store.checkpoints import bundle_to_bytes, load_bundle
from transformer.tasks.custom import MAX_DATA_BYTES, digest, parse_pairs
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer
from ui import model_registry as registry
from ui import runs, uploads
from ui.markdown import plain

EXAMPLE = ROOT / "assets" / "data" / "roman_numerals.tsv"


def custom_page(train_page):  # noqa: F811 - the fixture imported above
    at = train_page()
    at.selectbox(key=key("task")).set_value("custom").run()
    assert not at.exception
    return at


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def test_pasted_data_with_problems_lists_each_and_blocks_start(train_page):  # noqa: F811
    at = custom_page(train_page)
    assert any("Upload a file or paste" in i.value for i in at.info)
    assert at.button(key="train_start").disabled and at.button(key="train_step").disabled
    pasted = "".join(f"{n}\t{'I' * n}\n" for n in range(1, 8)) + "8\n9\tIX\tX\n3\tIV\n\n"
    at.text_area(key=key("custom_data")).input(pasted).run()
    assert not at.exception
    shown = errors(at)
    for message in ("Line 8: one column only", "Line 9: more than two columns",
                    "Conflicting targets for one source: '3' has the target 'III' on line 3 and 'IV' on line 10",
                    "Only 7 usable pairs; at least 30 are needed", "Fix this setting before starting: your data"):
        assert sum(message in e for e in shown) == 1, shown
    assert any("Line 11: empty, skipped" in c.value for c in at.caption)
    assert at.button(key="train_start").disabled
    assert runs.RUN not in at.session_state


def test_a_file_that_is_not_utf8_or_too_large_is_refused_by_name(train_page):  # noqa: F811
    at = custom_page(train_page)
    at.file_uploader(key="train_custom_upload").upload("latin1.tsv", "caf\xe9\tCAFE\n".encode("latin-1")).run()
    assert any("latin1.tsv: the data is not UTF-8 text" in e for e in errors(at)), errors(at)
    assert not at.text_area(key=key("custom_data")).value
    big = b"1\tI\n" * (MAX_DATA_BYTES // 4 + 1)
    at.file_uploader(key="train_custom_upload").upload("big.tsv", big).run()
    assert any(f"big.tsv: the data is {len(big):,} bytes; the limit is 1 MB" in e for e in errors(at))


def test_an_uploaded_file_trains_live_and_its_model_decodes_without_the_data(train_page):  # noqa: F811
    at = custom_page(train_page)
    at.radio(key=key("tokenization")).set_value("sentencepiece").run()
    at.file_uploader(key="train_custom_upload").upload("roman_numerals.tsv", EXAMPLE.read_bytes()).run()
    assert not at.exception and not errors(at), errors(at)
    assert at.text_input(key=key("custom_title")).value == "roman_numerals"
    notes = [c.value for c in at.caption]
    assert "line 1 looks like a header row (number, roman) and was skipped" in notes
    assert "999 pairs: 899 to train on, 100 held out for evaluation (never trained on)" in notes
    probe = at.text_input(key=key("probe")).value
    assert probe.isdigit()  # the first held-out example
    assert not at.button(key="train_start").disabled
    at.number_input(key=key("step_count")).set_value(2)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 2)
    assert not at.exception and not errors(at)
    title, z = probe_chart(at)
    assert "training step 2" in title
    weights = z[np.isfinite(z)]
    assert weights.size and weights.min() >= 0 and weights.max() <= 1
    bundle = job_of(at).bundle()
    task = bundle.task
    assert task.name == "custom" and task.tokenization == "sentencepiece" and bundle.tokenizer.kind == "sentencepiece"
    assert task.params["digest"] == digest(parse_pairs(EXAMPLE.read_bytes()).pairs)
    assert "data" not in bundle.card["train"]["task_params"]
    loaded = load_bundle(bundle_to_bytes(bundle))  # no data file anywhere: the checkpoint alone
    assert not loaded.task.has_data and loaded.notes == []
    assert greedy_decode(loaded.model, loaded.tokenizer, probe).output_text == \
        greedy_decode(bundle.model, bundle.tokenizer, probe).output_text


PAGES = {"pages/learn/home.py": "bidi_component", "pages/explore/decode.py": "bidi_component",
         "pages/explore/attention.py": "bidi_component", "pages/concepts/masks.py": "bidi_component",
         "pages/concepts/positions.py": "bidi_component", "pages/models/checkpoints.py": "dataframe"}


def test_an_uploaded_custom_checkpoint_opens_on_every_page(app):
    """A model of your own data, uploaded without its data file, is the active model of every page: no
    exception, no error, its charts drawn (the examples and answers come from its stored held-out pairs)."""
    trainer = Trainer(TrainConfig(task="custom", task_params={"data": EXAMPLE.read_text(encoding="utf-8")},
                                  steps=2))
    trainer.step()
    trainer.evaluate()
    at = app("pages/models/checkpoints.py")
    at.file_uploader(key=uploads.FILE).upload("roman.safetensors", bundle_to_bytes(trainer.bundle("roman"))).run()
    assert not at.exception and not errors(at), errors(at)
    assert at.session_state[registry.ACTIVE].startswith("uploaded:")
    for page, element in PAGES.items():
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not errors(at), (page, errors(at))
        assert at.get(element), f"{page} shows no {element}"
    at.switch_page("pages/explore/decode.py").run()
    box = next(t for t in at.text_input if "shared_input" in t.key)
    box.input("12a").run()  # a character the model never saw: refused by name, nothing raised
    assert not at.exception
    shown = [plain(m) for m in errors(at) + [w.value for w in at.warning]]
    assert any("does not know these characters: 'a'" in m for m in shown), shown
