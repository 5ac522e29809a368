"""The step-by-step decoding page (AppTest): default state, stepping, the attention it shows against the model
recomputed here, forcing a token, greedy vs beam, and messages for bad input."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch
from helpers.plotly_specs import alone, array, component, player_choice, player_step, specs, step_spec
from helpers.repo import REVERSE, link_id, needs_reverse, open_link

from transformer.bundle import ModelBundle
from transformer.charts import token_labels
from transformer.charts.common import display_piece
from transformer.charts.export import chart_filename
from transformer.network.config import ModelConfig
from transformer.network.decoding import beam_search, greedy_decode
from transformer.network.masks import padding_mask
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import BOS
from transformer.network.tokenizers import CharTokenizer
from transformer.network.trace import AttentionTrace
from transformer.store.checkpoints import load_bundle
from transformer.tasks import make_task
from ui.decodes import TOPK
from ui.markdown import code, plain

PAGE = "pages/explore/decode.py"
pytestmark = needs_reverse


@pytest.fixture
def bundle(page) -> ModelBundle:
    """The shipped model, loaded here from the file the page has just read."""
    return load_bundle(REVERSE)


@pytest.fixture
def page(app):
    return app(PAGE)


INPUT_BOX, EXAMPLES, PLAYER = "shared_input_widget", "shared_input_examples", "decode_player"
STEP_CHARTS = ("decode_chart_topk", "decode_chart_cross", "decode_chart_decoder_self")


def shown_input(at) -> str:
    return at.text_input(key=INPUT_BOX).value


def shown_step(at) -> int:
    """The 0-based step the step player shows."""
    return player_step(at)


def move_to(at, step: int) -> None:
    """What the step player's callback does when the learner moves to `step` (0-based): the page's step prop,
    then a run. (The click itself happens in the browser: test_browser_decode.py.)"""
    at.session_state["decode_step"] = step + 1
    at.run()


def charts(at) -> dict[str, dict]:
    """Figure specs by the start of their title: "Next-token probabilities", "Cross-attention",
    "Decoder self-attention" (the step player's charts, at its step), "Sampling distributions"."""
    shown = [step_spec(at, key) for key in STEP_CHARTS] + specs(at)
    return {re.split(r" ·|\(", s["layout"]["title"]["text"])[0].strip(): s for s in shown}


def sentence(at) -> str:
    """The step player's sentence for the step it shows, as text."""
    return plain_html(component(at, PLAYER)["steps"][shown_step(at)]["sentence"])


def plain_html(line: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", line))


def traced_step_rows(bundle, source_ids: list[int], prefix: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross- and self-attention of the last prefix position, from one traced pass over the whole prefix
    (no cache, no decoding code): (layers, heads, src_len), (layers, heads, len(prefix))."""
    model, trace = bundle.model, AttentionTrace()
    src, tgt = torch.tensor([source_ids]), torch.tensor([prefix])
    with torch.no_grad():
        memory = model.encode(src, padding_mask(src))
        model.decode(memory, padding_mask(src), tgt, trace=trace)
    return trace.weights("cross")[:, 0, :, -1], trace.weights("decoder_self")[:, 0, :, -1]


def test_default_state_shows_the_first_step_of_an_example_with_charts_shaped_by_the_model(page, bundle):
    text = shown_input(page)
    assert text == bundle.task.examples()[0] and "shared_input" not in page.session_state
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    t = shown_step(page)
    assert t == 0 and "decode_step" not in page.session_state
    assert not page.query_params
    assert not page.error and not page.warning

    cfg, found = bundle.config, charts(page)
    rows = [f"L{i + 1} H{h + 1}" for i in range(cfg.n_dec_layers) for h in range(cfg.n_heads)]
    cross, own = found["Cross-attention"], found["Decoder self-attention"]
    assert array(cross["data"][0]["z"]).shape == (cfg.n_dec_layers * cfg.n_heads, len(text) + 1)
    assert cross["data"][0]["x"] == token_labels(list(text) + ["</s>"])
    assert cross["data"][0]["y"] == own["data"][0]["y"] == rows
    assert array(own["data"][0]["z"]).shape == (len(rows), t + 1)
    assert own["data"][0]["x"] == token_labels(result.prefix_pieces[: t + 1])
    bars = found["Next-token probabilities"]["data"][0]
    assert list(bars["y"])[0] == result.steps[t].piece and len(array(bars["x"])) == TOPK
    decode = component(page, PLAYER)["version"]
    for key, kind in zip(STEP_CHARTS, ("topk", "cross", "decoder_self")):  # one figure and file name per step
        data = component(page, key)
        assert data["version"] == decode and len(data["figures"]) == len(result.steps)
        assert data["filenames"] == [chart_filename("reverse", kind, step=s) for s in range(len(result.steps))]
    names = {data["filenames"][0] for data in alone(page).values()}
    assert names == {chart_filename("reverse", "sampling", step=0)}
    csv_keys = {b.key for b in page.get("download_button")}
    assert {"decode_csv_cross", "decode_csv_decoder_self"} <= csv_keys


def test_chart_values_equal_the_step_attention_recomputed_here(page, bundle):
    text, t = shown_input(page), shown_step(page)
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    cross, own = traced_step_rows(bundle, result.source_ids, [BOS] + result.output_ids[:t])
    found = charts(page)
    shown_cross = array(found["Cross-attention"]["data"][0]["z"])
    shown_self = array(found["Decoder self-attention"]["data"][0]["z"])
    np.testing.assert_allclose(shown_cross, cross.reshape(len(shown_cross), -1).numpy(), atol=1e-5)
    np.testing.assert_allclose(shown_self, own.reshape(len(shown_self), -1).numpy(), atol=1e-5)
    np.testing.assert_allclose(shown_cross, result.steps[t].cross_attention.flatten(0, 1).numpy(), atol=1e-6)
    np.testing.assert_allclose(shown_cross.sum(1), 1, atol=1e-5)


def test_the_player_holds_every_step_and_a_move_updates_what_the_server_draws(page, bundle):
    text, t = shown_input(page), shown_step(page)
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    output = result.output_pieces
    assert output[t] != output[t + 1], "pick an example whose neighbouring outputs differ"
    player = component(page, PLAYER)
    assert [s["chip"]["text"] for s in player["steps"]] == output  # the decoder strip: one chip per step
    assert [c["text"] for c in player["source"]] == result.source_pieces and player["start_chip"]["text"] == "<s>"
    cross, own, bars = (component(page, key)["figures"] for key in
                        ("decode_chart_cross", "decode_chart_decoder_self", "decode_chart_topk"))
    for s, piece in enumerate(output):  # every step's sentence and charts, as the browser will show them
        assert f"the model chooses {piece} with probability" in plain_html(player["steps"][s]["sentence"])
        assert cross[s]["layout"]["title"]["text"].endswith(f"step {s + 1}")
        assert array(own[s]["data"][0]["z"]).shape[1] == s + 1  # the prefix read so far
        np.testing.assert_allclose(array(cross[s]["data"][0]["z"]),
                                   result.steps[s].cross_attention.flatten(0, 1).numpy(), atol=1e-6)
        assert list(bars[s]["data"][0]["y"])[0] == display_piece(piece)
    assert player_choice(page) == output[t]

    move_to(page, t + 1)  # what the player tells the server after a move
    assert shown_step(page) == t + 1 and dict(page.query_params) == {"v": "1", "step": str(t + 2)}
    assert player_choice(page) == output[t + 1]
    assert component(page, PLAYER)["version"] == player["version"]  # the same decode: the browser keeps its charts
    assert component(page, "decode_chart_cross")["figures"] == cross
    assert page.selectbox(key=f"decode_force_pick_{t + 1}").label.startswith("Token")  # the force panel follows
    assert any(m.value == f"**Force a different token at step {t + 2}**" for m in page.markdown)
    labels = {b.key: b.proto.label for b in page.get("download_button")}
    assert labels["decode_csv_cross"] == f"Numbers of step {t + 2} (CSV)"
    move_to(page, len(output) - 1)
    assert player_choice(page) == "</s>"
    assert not page.exception


def test_a_new_input_opens_at_its_first_step(page):
    move_to(page, 4)
    assert shown_step(page) == 4
    page.text_input(key=INPUT_BOX).set_value("abcdef").run()
    assert shown_step(page) == 0 and "step" not in page.query_params


def test_forcing_a_token_changes_the_continuation_and_reset_returns_to_greedy(page, bundle):
    text, t = shown_input(page), shown_step(page)
    greedy = greedy_decode(bundle.model, bundle.tokenizer, text)
    other = next(c.id for c in greedy.steps[t].topk if c.id != greedy.output_ids[t])
    page.selectbox(key=f"decode_force_pick_{t}").set_value(other).run()
    page.button(key="decode_force_it").click().run()

    forced = greedy_decode(bundle.model, bundle.tokenizer, text, force={t: other})
    assert page.session_state["decode_force"] == ((t + 1, other),) and shown_step(page) == t
    assert page.query_params["force"] == f"{t + 1}:{other}" and page.query_params["step"] == str(t + 1)
    assert forced.output_ids[: t] == greedy.output_ids[: t] and forced.output_ids != greedy.output_ids
    assert player_choice(page) == bundle.tokenizer.piece(other)
    text_lines = [m.value for m in page.markdown]
    assert any(line.startswith("**With forcing:**") and f"`{forced.output_text}`" in line for line in text_lines)
    assert any(line.startswith("**Greedy:**") and f"`{greedy.output_text}`" in line for line in text_lines)
    assert "you forced" in sentence(page)
    if forced.output_text != bundle.task.target(text):
        assert any(line.startswith("**With forcing:**") and "wrong" in line for line in text_lines)
    move_to(page, t + 1)  # the continuation after the forced step is the forced run's
    assert player_choice(page) == forced.output_pieces[t + 1]

    page.button(key="decode_reset").click().run()
    assert page.session_state["decode_force"] == () and "force" not in page.query_params
    assert not any(m.value.startswith("**With forcing:**") for m in page.markdown)
    assert not page.exception


def test_expected_answer_and_beam_comparison_match_the_library(page, bundle):
    text = shown_input(page)
    answer = bundle.task.target(text)
    greedy = greedy_decode(bundle.model, bundle.tokenizer, text)
    lines = [m.value for m in page.markdown]
    assert f"**Expected** (the task's rule): `{answer}`" in lines
    mark = "right" if greedy.output_text == answer else "wrong"
    assert any(line.startswith("**Output:**") and mark in line for line in lines)

    page.segmented_control(key="decode_beam_widget").set_value(2).run()
    beam = beam_search(bundle.model, bundle.tokenizer, text, beam=2)
    lines = [m.value for m in page.markdown]
    assert "**Beam search, width 2**" in lines
    shown = [float(x) for x in re.findall(r"total log-probability \*\*(\S+)\*\*", " ".join(lines))]
    np.testing.assert_allclose(shown, [greedy.score, beam.score], rtol=1e-3, atol=1e-6)


def test_bad_input_shows_a_message_and_the_page_recovers(page):
    for bad, message in (("ABC!", "does not know these characters: '!', 'A', 'B', 'C'"), ("", "empty"),
                         ("abc" * 30, "reads at most")):
        page.text_input(key=INPUT_BOX).input(bad).run()
        assert not page.exception
        assert any(message in plain(e.value) for e in page.error), (bad, [e.value for e in page.error])
        assert not page.get("bidi_component")
        assert page.title[0].value == "Step-by-step decoding"
    example = page.button_group(key=EXAMPLES).options[1]
    page.button_group(key=EXAMPLES).set_value(example).run()
    assert not page.error and shown_input(page) == example and page.query_params["input"] == example
    assert page.text_input(key=INPUT_BOX).value == example
    assert len(page.get("bidi_component")) == 5  # the step player, its top-k, cross, decoder self charts, sampling's
    assert len(alone(page)) == 1  # sampling


def test_a_session_model_of_another_task_brings_its_own_examples(page):
    task = make_task("addition", max_digits=2)
    torch.manual_seed(0)
    tokenizer = task.make_tokenizer()
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, max_len=12, d_model=16,
                         n_heads=2, d_ff=32, n_enc_layers=1, n_dec_layers=1)
    other = ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "tiny-addition"})
    page.session_state["session_models"] = {"trained:tiny": ("trained", other)}
    page.run()
    picker = page.selectbox(key="active_model_widget")
    picker.select_index(picker.options.index("tiny-addition (trained)")).run()
    assert not page.exception
    assert shown_input(page) == task.examples()[0] and page.query_params["model"] == "trained:tiny"
    cross = charts(page)["Cross-attention"]["data"][0]
    assert array(cross["z"]).shape == (2, len(task.examples()[0]) + 1)
    assert any("Expected" in m.value for m in page.markdown)


def linked(query: dict[str, str]):
    """An AppTest of this page opened by a link with `query` as its parameters."""
    return open_link(PAGE, query)


def test_a_link_restores_model_input_step_forcing_and_beam(clean_caches):
    from transformer.store.checkpoints import load_bundle as load

    copy = load(REVERSE.with_name("copy.safetensors"))
    greedy = greedy_decode(copy.model, copy.tokenizer, "hello")
    other = next(c.id for c in greedy.steps[1].topk if c.id != greedy.output_ids[1])
    at = linked({"v": "1", "model": "copy", "input": "hello", "step": "2", "force": f"2:{other}", "beam": "2"})
    assert not at.exception and not at.warning
    assert at.selectbox(key="active_model_widget").value == "shipped:copy"
    assert shown_input(at) == "hello" and shown_step(at) == 1
    assert player_choice(at) == copy.tokenizer.piece(other)
    assert at.segmented_control(key="decode_beam_widget").value == 2
    assert dict(at.query_params) == {"v": "1", "model": "copy", "input": "hello", "step": "2",
                                     "force": f"2:{other}", "beam": "2"}


HOSTILE = [
    {"model": "nope"}, {"model": "../../etc/passwd"}, {"model": "trained:12345678"},
    {"input": "x" * 5000}, {"input": "ABC!"}, {"input": "a\x00b"},
    {"step": "nan"}, {"step": "-3"}, {"step": "99999999999999999999"}, {"step": "1e3"}, {"step": "999"},
    {"force": "abc"}, {"force": "1:99999"}, {"force": "1:0"}, {"force": "500:5"}, {"force": ",".join(["1:5"] * 99)},
    {"beam": "5"}, {"beam": "-1"}, {"v": "2", "step": "1"}, {"unknown": "1"}, {"step": "1" * 3000},
]


@needs_reverse
@pytest.mark.parametrize("query", HOSTILE, ids=link_id)
def test_a_hostile_link_gives_a_note_and_the_default_view(clean_caches, query):
    at = linked(query)
    assert not at.exception, [e.value for e in at.exception]
    assert any("could not be followed" in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.selectbox(key="active_model_widget").value == "shipped:reverse"
    bundle = load_bundle(REVERSE)
    example = bundle.task.examples()[0]
    assert shown_input(at) == example and shown_step(at) == 0
    assert not any(m.value.startswith("**With forcing:**") for m in at.markdown)
    assert at.segmented_control(key="decode_beam_widget").value == 4
    assert set(at.query_params) <= {"v"}, dict(at.query_params)  # the URL shows the default view


def test_a_link_to_a_kept_model_brings_it_back_in_a_new_session_and_a_lost_one_says_so(clean_caches, tmp_path):
    from ui import model_registry as registry

    task = make_task("addition", max_digits=2)
    torch.manual_seed(0)
    tokenizer = task.make_tokenizer()
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, max_len=12, d_model=16,
                         n_heads=2, d_ff=32, n_enc_layers=1, n_dec_layers=1)
    model_id = registry.STORE.put(ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "kept"}), "test")
    at = linked({"v": "1", "model": f"trained:{model_id}", "input": "12+34"})  # a new session, as after a restart
    assert not at.exception and not at.warning
    assert at.selectbox(key="active_model_widget").value == f"trained:{model_id}"
    assert shown_input(at) == "12+34" and array(charts(at)["Cross-attention"]["data"][0]["z"]).shape[0] == 2
    assert any("Kept on this server" in c.value for c in at.sidebar.caption)

    (registry.STORE.folder / f"{model_id}.safetensors").unlink()  # evicted meanwhile
    lost = linked({"v": "1", "model": f"trained:{model_id}"})
    assert not lost.exception
    assert any("no longer kept" in w.value for w in lost.warning)
    assert lost.selectbox(key="active_model_widget").value == "shipped:reverse"


def test_tokens_that_read_as_markdown_are_shown_as_code_never_rendered(page):
    """A vocabulary of markdown and HTML characters: whatever the (untrained) model writes lands in code spans
    fenced longer than any run of backticks in it, so nothing it writes can close the span and render."""
    task = make_task("reverse")
    tokenizer = CharTokenizer("ab`<>![]()*_$:/")
    torch.manual_seed(14)  # a seed whose untrained model writes backticks and angle brackets
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, max_len=16, d_model=16,
                         n_heads=2, d_ff=32, n_enc_layers=1, n_dec_layers=1)
    hostile = ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "markdown"})
    page.session_state["session_models"] = {"trained:markdown": ("trained", hostile)}
    page.run()
    page.selectbox(key="active_model_widget").set_value("trained:markdown").run()
    page.text_input(key=INPUT_BOX).input("a`<b>![a](b)**").run()
    assert not page.exception and not page.error
    result = greedy_decode(hostile.model, hostile.tokenizer, "a`<b>![a](b)**")
    assert "`" in result.output_text and "<" in result.output_text, "the model should write markdown characters"
    line = next(m.value for m in page.markdown if m.value.startswith("**Output:**"))
    assert line.startswith(f"**Output:** {code(result.output_text)} ")


def test_the_beam_section_points_a_well_trained_model_to_the_under_trained_one(page):
    assert any("under-trained reverse model" in c.value for c in page.caption)
    page.button(key="decode_beam_demo").click().run()
    assert not page.exception
    assert page.selectbox(key="active_model_widget").value == "shipped:reverse-early"
    bundle = load_bundle(REVERSE.parent / "reverse-early.safetensors")
    assert shown_input(page) == bundle.card["examples"][0]  # its own example, where beam search wins
    beam_box = " ".join(m.value for m in page.markdown)
    assert "different outputs" in beam_box
    assert not page.get("button") or all(b.key != "decode_beam_demo" for b in page.button)
