"""The code page (AppTest): the network's running source in the paper's order, each section's tensors equal to the
greedy decode the other pages trace (read back from the page's charts and compared with the decodes' cache), its
view in the link (section, input, kind, layer, head), a bad input from a link refused with a note, and a "code
behind this chart" link under every attention, mask and positional chart."""

from __future__ import annotations

import inspect
import textwrap
from urllib.parse import parse_qs

import numpy as np
import pytest
from helpers.plotly_specs import alone, z
from helpers.repo import needs_reverse, open_link

from transformer.analysis.code_tour import SECTIONS
from transformer.analysis.tour_order import KEYS
from ui import decodes
from ui import model_registry as registry
from ui.markdown import plain
from ui.panels.code_sections import TITLES
from ui.tables.code import CODE

pytestmark = needs_reverse
PAGE = "pages/learn/code.py"
TEXT = "hgffjercqwa"


@pytest.fixture
def linked(clean_caches):
    return open_link(PAGE, {"section": "attention", "input": TEXT, "kind": "cross", "layer": "2", "head": "3"})


def test_sections_show_the_running_source_in_the_papers_order(linked):
    assert not linked.exception, [e.value for e in linked.exception]
    assert [h.value for h in linked.header] == [TITLES[key] for key in KEYS]
    shown = [block.value for block in linked.code]
    expected = [textwrap.dedent(inspect.getsource(obj)).rstrip("\n") for section in SECTIONS for obj in section.code]
    assert shown == expected  # every block is the running module's source, in order, none left out
    attention = shown[[s.key for s in SECTIONS for _ in s.code].index("attention")]
    assert "def attention(" in attention and "trace.keep" in attention


def test_the_pages_numbers_are_the_decode_the_other_pages_trace(linked):
    key = "shipped:reverse"
    greedy = decodes.greedy(key, registry.version(key), TEXT)  # the cache the decode and attention pages read
    cross = greedy.attention()["cross"][1, 2].numpy()
    np.testing.assert_allclose(z(linked, "code-attention-weights"), cross, atol=1e-5)
    np.testing.assert_allclose(z(linked, "code-decoder_layer-cross"), cross, atol=1e-5)
    mask = np.isnan(z(linked, "code-decoder_layer-self"))
    self_attention = greedy.attention()["decoder_self"][1, 2].numpy()
    np.testing.assert_allclose(np.where(mask, 0, z(linked, "code-decoder_layer-self")), self_attention, atol=1e-5)
    assert (mask == np.triu(np.ones_like(mask), 1).astype(bool)).all()  # the causal mask, blank above the diagonal
    encoder = greedy.attention()["encoder_self"][1, 2].numpy()  # layer 2 exists in the encoder too
    np.testing.assert_allclose(z(linked, "code-encoder_layer-self"), encoder, atol=1e-6)
    tables = [t.value for t in linked.dataframe]
    steps = tables[-1]
    assert steps["writes"].tolist() == [p if p != "</s>" else "</s>" for p in greedy.output_pieces]


def test_the_view_is_in_the_link_and_opens_at_its_section(linked):
    assert linked.query_params == {"v": "1", "section": "attention", "input": TEXT, "layer": "2", "head": "3"}
    scripts = [el.proto.body for el in linked.get("html") if "ap-code-scroll" in el.proto.body]
    assert len(scripts) == 1 and '"attention"' in scripts[0]
    view = CODE.view()
    assert linked.selectbox(key=view.widget_key("layer")).value == 1
    assert linked.selectbox(key=view.widget_key("head")).value == 2
    linked.selectbox(key=view.widget_key("kind")).select("encoder_self").run()
    assert linked.query_params["kind"] == "encoder_self" and "layer" not in linked.query_params


def test_a_link_the_model_cannot_follow_says_so(clean_caches, bundle):
    at = open_link(PAGE, {"input": "ZZ!", "layer": "9", "section": "nope"})
    assert not at.exception and not at.error
    notes = " ".join(plain(w.value) for w in at.warning)
    assert "cannot decode it" in notes and "“nope” is not one of" in notes and "has 2 layers" in notes
    assert at.text_input(key=CODE.view().widget_key("input")).value == bundle.task.examples()[0]


CHARTS = {  # page -> what its first "code behind this chart" link must name
    "pages/learn/home.py": {"section": "attention"},
    "pages/explore/decode.py": {"section": "generator"},
    "pages/explore/attention.py": {"section": "attention", "input": TEXT},
    "pages/concepts/masks.py": {"section": "masks"},
    "pages/concepts/positions.py": {"section": "embeddings"},
    "pages/explore/compare.py": {"section": "attention"},
}


@pytest.mark.parametrize("page", CHARTS, ids=lambda p: p.rsplit("/", 1)[-1][:-3])
def test_every_chart_page_links_to_its_code(clean_caches, page):
    at = open_link(page, {"input": TEXT}) if "input" in CHARTS[page] else open_link(page, {})
    links = [el.proto for el in at.get("page_link") if el.proto.label == "The code behind this chart"]
    assert links and all(link.page == "code" for link in links), f"{page} has no link to the code page"
    first = {"section": KEYS[0]} | {name: values[0] for name, values in parse_qs(links[0].query_string).items()}
    assert first.items() >= CHARTS[page].items(), first  # a link leaves out what is the default (section 1)
    for link in links:  # each names the whole view (the version at least), so it opens as named
        query = parse_qs(link.query_string)
        assert query["v"] == ["1"] and query.get("section", [KEYS[0]])[0] in KEYS


def test_the_attention_pages_link_names_the_head_shown(clean_caches):
    at = open_link("pages/explore/attention.py", {"input": TEXT, "kind": "cross", "layer": "1", "head": "4"})
    links = [parse_qs(el.proto.query_string) for el in at.get("page_link") if el.proto.page == "code"]
    assert {"section": ["attention"], "input": [TEXT], "layer": ["1"], "head": ["4"], "v": ["1"]} in links
    followed = open_link(PAGE, {k: v[0] for k, v in links[0].items()})
    np.testing.assert_allclose(z(followed, "code-attention-weights"), z(at, next(
        key for key in alone(at) if key.startswith("attention_big_"))),
        atol=1e-6)
