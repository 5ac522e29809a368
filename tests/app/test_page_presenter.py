"""The presenter switch: larger text (CSS) and larger charts on every page, the figures themselves unchanged;
part of every page's link (`presenter=1`), so a presenter-mode link opens in presenter mode."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from helpers.plotly_specs import step_spec
from helpers.repo import needs_reverse, open_link

from transformer.charts import head_grid, step_attention_rows, token_labels, topk_bar
from transformer.charts.stats import training_curves
from ui.chart_look import SMALL_PX, TITLE_PX
from ui.display import PRESENTER_SCALE, presenter_sized
from ui.sidebar import PRESENTER_CSS
from ui.tables import TABLES
from ui.tables.shared import PRESENTER, SHARED

PAGE = "pages/explore/decode.py"
SWITCH = SHARED.view().widget_key(PRESENTER.name)


def css_shown(at) -> bool:
    return any(PRESENTER_CSS in h.proto.body for h in at.get("html"))


def test_a_matrix_chart_keeps_its_cells_and_labels_every_token():
    labels = token_labels(list("abcdefghijklmnop"))
    fig = step_attention_rows(np.full((2, 4, len(labels)), 1 / len(labels)), labels, "Cross-attention · step 1")
    before = fig.to_json()
    big = presenter_sized(fig)
    assert fig.to_json() == before  # the (possibly cached, shared) figure is untouched
    assert big.layout.width == fig.layout.width  # it must still fit its column
    assert big.layout.font.size == round(fig.layout.font.size * PRESENTER_SCALE, 1)
    grown = big.layout.margin.t - fig.layout.margin.t
    assert grown > 0 and big.layout.height == fig.layout.height + grown  # the cells keep their height
    for axis in (big.layout.xaxis, big.layout.yaxis):
        assert (axis.tickmode, axis.dtick) == ("linear", 1)  # every token labelled, none skipped
        assert axis.tickfont.size == fig.layout.xaxis.tickfont.size


def test_every_heads_grid_keeps_its_own_layer_and_head_ticks():
    labels = token_labels(list("abcd"))
    fig = head_grid(np.full((2, 3, len(labels), len(labels)), 1 / len(labels)), labels, labels, "cross")
    big = presenter_sized(fig)
    for axis, ticks in ((big.layout.xaxis, ["H1", "H2", "H3"]), (big.layout.yaxis, ["L1", "L2"])):
        assert list(axis.ticktext) == ticks and axis.tickmode != "linear"  # not every tile's row and column
        assert axis.tickfont.size == round(fig.layout.xaxis.tickfont.size * PRESENTER_SCALE, 1)


def test_a_chart_of_free_width_grows_taller_and_every_text_on_it_larger():
    rows = [{"step": s, "loss": 1 / (1 + s), "token_accuracy": 0.5, "exact_match": 0.4} for s in range(0, 100, 10)]
    fig = training_curves(rows, "curves")
    big = presenter_sized(fig)
    assert fig.layout.width is None and big.layout.height == round(fig.layout.height * PRESENTER_SCALE)
    assert big.layout.xaxis2.dtick is None  # a numeric axis keeps plotly's own ticks
    # the chart look (ui/chart_look.py) sizes what the figure leaves unset: in presenter mode those grow too
    grown = round(SMALL_PX * PRESENTER_SCALE, 1)
    axes = [big.layout[name] for name in big.layout if name.startswith(("xaxis", "yaxis"))]
    assert len(axes) >= 4 and all(axis.tickfont.size == grown for axis in axes)
    assert all(axis.title.font.size == round(TITLE_PX * PRESENTER_SCALE, 1) for axis in axes)
    for part in ("legend", "hoverlabel"):  # the figure's own size where it sets one
        assert big.layout[part].font.size == round((fig.layout[part].font.size or SMALL_PX) * PRESENTER_SCALE, 1)


def test_a_bar_chart_of_tokens_grows_its_labels_and_a_size_it_sets_itself():
    fig = topk_bar(["a", "b", "c"], np.array([0.7, 0.2, 0.1]), "a")
    big = presenter_sized(fig)
    assert fig.layout.yaxis.type == "category" and fig.layout.yaxis.tickfont.size
    assert big.layout.yaxis.tickfont.size == round(fig.layout.yaxis.tickfont.size * PRESENTER_SCALE, 1)
    assert big.layout.yaxis.dtick is None  # not a matrix chart: plotly's own ticks


@needs_reverse
def test_the_switch_enlarges_the_page_text_and_charts(app):
    at = app(PAGE)
    plain = step_spec(at, "decode_chart_cross")["layout"]
    assert not css_shown(at) and "presenter" not in at.query_params
    at.toggle(key=SWITCH).set_value(True).run()
    assert not at.exception
    big = step_spec(at, "decode_chart_cross")["layout"]
    assert big["font"]["size"] == round(plain["font"]["size"] * PRESENTER_SCALE, 1)
    assert big["xaxis"]["dtick"] == 1 and big["width"] == plain["width"]
    assert css_shown(at) and at.query_params["presenter"] == "1"  # the page's link keeps it
    at.switch_page("pages/models/train.py").run()  # it stays on from page to page, in each page's link
    assert at.toggle(key=SWITCH).value and css_shown(at) and dict(at.query_params) == {"v": "1", "presenter": "1"}
    at.toggle(key=SWITCH).set_value(False).run()
    assert not css_shown(at) and not at.query_params  # off: gone from the link (here the default view's bare URL)


@needs_reverse
def test_a_presenter_link_opens_in_presenter_mode(clean_caches):
    at = open_link(PAGE, {"v": "1", "presenter": "1"})
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    assert at.toggle(key=SWITCH).value and css_shown(at)
    assert step_spec(at, "decode_chart_cross")["layout"]["xaxis"]["dtick"] == 1  # the charts are the enlarged ones
    assert dict(at.query_params) == {"v": "1", "presenter": "1"}
    plain = open_link(PAGE, {"v": "1", "input": "abc"})  # a link without it: off
    assert not plain.toggle(key=SWITCH).value and not css_shown(plain)


def test_every_page_link_can_hold_the_presenter_switch():
    for page, table in TABLES.items():
        assert table.by_name.get(PRESENTER.name) is PRESENTER, page  # one prop, one session key for all


def test_go_figure_copy_is_deep():
    """presenter_sized relies on go.Figure(fig) copying the layout (not sharing it)."""
    fig = go.Figure(layout=dict(height=100))
    go.Figure(fig).update_layout(height=200)
    assert fig.layout.height == 100
