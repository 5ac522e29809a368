"""One convention for decoder query rows on every page and export (issue 12, item 3): rows are labelled by the
token the decoder read (<s> first), the hover names the token it wrote there, and one caption says so."""

from __future__ import annotations

import numpy as np
from helpers.plotly_specs import spec, specs
from helpers.repo import needs_reverse

from transformer.charts import attention_heatmap, head_grid, read_labels, token_labels
from transformer.charts.common import display_piece
from transformer.network.decoding import greedy_decode
from ui.display import decoder_rows

pytestmark = needs_reverse


def written_of(trace: dict) -> list[str]:
    """The token each row wrote, as the hover of a heatmap trace holds it (one per row)."""
    return [row[0] for row in trace["customdata"]]


def test_read_labels_start_with_bos_and_drop_the_last_token_written():
    assert read_labels(["c", "b", "a", "</s>"]) == token_labels(["<s>", "c", "b", "a"])


def test_charts_put_the_written_token_in_every_cells_hover():
    weights = np.full((3, 2), 0.5)
    fig = attention_heatmap(weights, read_labels(["x", "y", "</s>"]), token_labels(["a", "b"]), "t",
                            written=["x", "y", "</s>"])
    assert [row[0] for row in fig.data[0].customdata] == ["x", "y", display_piece("</s>")]
    assert "wrote %{customdata}" in fig.data[0].hovertemplate
    clickable = attention_heatmap(weights, read_labels(["x", "y", "</s>"]), token_labels(["a", "b"]), "t",
                                  clickable=True, written=["x", "y", "</s>"])
    assert list(clickable.data[-1].text) == ["x", "x", "y", "y", display_piece("</s>"), display_piece("</s>")]
    grid = head_grid(np.full((2, 2, 3, 2), 0.5), read_labels(["x", "y", "</s>"]), token_labels(["a", "b"]),
                     "cross", written=["x", "y", "</s>"])
    hover = [row[0] for row in grid.data[0].customdata]
    assert hover == ["wrote x", "wrote y", f"wrote {display_piece('</s>')}", "", "wrote x", "wrote y",
                     f"wrote {display_piece('</s>')}"]  # layer 1, the gutter, layer 2


def test_home_attention_and_train_label_decoder_rows_alike(app, bundle):
    home = app("pages/learn/home.py")
    text = home.text_input(key="shared_input_widget").value
    result = greedy_decode(bundle.model, bundle.tokenizer, text)
    chart = spec(home, "fig-home-cross")["data"][0]
    assert chart["y"] == read_labels(result.output_pieces)
    assert written_of(chart) == [display_piece(p) for p in result.output_pieces]
    assert any(decoder_rows() in c.value for c in home.caption)

    attention = app("pages/explore/attention.py")
    big = next(s for s in specs(attention) if " · layer " in s["layout"]["title"]["text"])
    assert big["data"][0]["y"] == chart["y"]  # the same rows as the home page, for the same input
    assert any(decoder_rows() in c.value for c in attention.caption)
