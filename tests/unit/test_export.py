"""Export helpers: file names, toolbar config, CSV, standalone HTML and server-side images."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from helpers.repo import require_image_export

from transformer.charts import attention_heatmap, export, token_labels


def small_figure() -> go.Figure:
    w = np.array([[0.9, 0.1], [0.2, 0.8]], dtype=np.float32)
    return attention_heatmap(w, token_labels(["<s>", "a"]), token_labels(["a", "</s>"]), "Cross-attention · L1 H1")


def test_chart_filename_names_task_kind_layer_head_and_step():
    assert export.chart_filename("reverse", "cross", 0, 2, 4, "svg") == "reverse_cross_L1H3_step05.svg"
    assert export.chart_filename("reverse", "cross", 0, 2, 4, ".png") == "reverse_cross_L1H3_step05.png"
    assert export.chart_filename("sort", "encoder_self", layer=1) == "sort_encoder_self_L2"
    assert export.chart_filename("my task!", "heads grid", ext="png") == "my-task_heads-grid.png"
    assert export.chart_filename("copy", "masks", step=11) == "copy_masks_step12"


def test_chart_config_sets_the_toolbar_download():
    config = export.chart_config("reverse_cross_L1H3", "svg", scale=3)
    assert config["toImageButtonOptions"] == {"format": "svg", "filename": "reverse_cross_L1H3", "scale": 3}
    assert config["displaylogo"] is False
    assert set(config["modeBarButtonsToRemove"]) == {"select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d"}
    with pytest.raises(ValueError):
        export.chart_config("x", "gif")


def test_matrix_csv_round_trips_with_plain_labels():
    matrix = np.random.default_rng(1).random((3, 2)).astype(np.float32)
    rows, cols = token_labels(["<s>", "a", "a"]), token_labels(["b", "</s>"])
    text = export.matrix_to_csv(matrix, rows, cols)
    back = pd.read_csv(io.StringIO(text), index_col=0)
    assert list(back.index) == ["00 <s>", "01 a", "02 a"] and list(back.columns) == ["00 b", "01 </s>"]
    np.testing.assert_allclose(back.to_numpy(), matrix, rtol=1e-6)
    with pytest.raises(ValueError):
        export.matrix_to_csv(matrix, rows[:2], cols)


def test_masked_scores_leave_their_csv_cells_empty():
    scores = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]])
    causal = np.array([[True, False, False], [True, True, False]])
    text = export.matrix_to_csv(export.without_masked(scores, causal), ["q0", "q1"], ["k0", "k1", "k2"])
    lines = text.strip().splitlines()
    assert lines[1] == "q0,1.5,," and lines[2] == "q1,0.5,4.0,"  # the raw scores under the mask are gone
    back = pd.read_csv(io.StringIO(text), index_col=0)
    assert back.isna().to_numpy().tolist() == (~causal).tolist()


@pytest.mark.parametrize("text", ["=1+1", "+SUM(A1)", "-2+3+cmd|' /C calc'!A0", "@x", "\tx", "\rx", "-", "=", "+-1"])
def test_text_that_starts_like_a_formula_is_neutralised_in_every_csv(text):
    frame = pd.DataFrame({text: [text, -0.5, "-0.5", "1e-3", "plain"]})
    cells = [cell for row in csv.reader(io.StringIO(export.table_to_csv(frame), newline="")) for cell in row]
    assert cells == ["'" + text, "'" + text, "-0.5", "-0.5", "1e-3", "plain"]  # numbers, and their text, stay
    rows = list(csv.reader(io.StringIO(export.matrix_to_csv([[-1.5]], [text], [text]), newline="")))
    assert rows == [["query \\ key", "'" + text], ["'" + text, "-1.5"]]


def test_html_fallback_is_standalone_and_holds_the_plot():
    page = export.figure_to_html(small_figure(), "reverse_cross_all-heads", "svg").decode()
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert "Cross-attention · L1 H1" in page and "Plotly.newPlot" in page
    assert re.findall(r"<script[^>]*>", page) == ["<script>"] * page.count("<script")  # nothing fetched
    assert len(page) > 1_000_000  # plotly.js is inlined: opens offline
    config = json.loads(re.findall(r'(\{"displaylogo".*?\})\s*\)', page)[-1])  # newPlot's last argument
    assert config["toImageButtonOptions"] == {"format": "svg", "filename": "reverse_cross_all-heads", "scale": 2}
    assert config["displaylogo"] is False and set(config["modeBarButtonsToRemove"]) == set(export.TOOLS_LEFT_OUT)


def test_unavailable_browser_is_reported_not_hung(monkeypatch):
    export.shutdown()
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    ok, reason = export.image_export_available()
    assert not ok and "BROWSER_PATH" in reason
    with pytest.raises(export.ExportError, match="BROWSER_PATH"):
        export.figure_to_image(small_figure(), "png")


def test_figure_to_image_renders_png_and_svg():
    require_image_export()
    fig = small_figure()
    png = export.figure_to_image(fig, "png", scale=1)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width = int.from_bytes(png[16:20], "big")
    assert width == fig.layout.width
    svg = export.figure_to_image(fig, "svg")
    assert svg.lstrip().startswith(b"<svg") and b"Cross-attention" in svg
    with pytest.raises(ValueError):
        export.figure_to_image(fig, "gif")


def test_a_batch_of_figures_comes_back_in_order():
    """figures_to_images hands every figure to kaleido's tabs at once; the images still come in the given order."""
    require_image_export()
    figs = [go.Figure(small_figure()).update_layout(width=width, height=200 + width // 10)
            for width in (300, 420, 360, 480, 330)]
    images = list(export.figures_to_images(figs, "png", scale=1))
    assert [(int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) for png in images] == [
        (fig.layout.width, fig.layout.height) for fig in figs]
    assert images[1] == export.figure_to_image(figs[1], "png", scale=1)


def test_a_grid_exported_on_the_server_keeps_its_layer_and_head_labels():
    require_image_export()
    from transformer.charts import head_grid

    labels = token_labels(list("abcdef"))
    svg = export.figure_to_image(head_grid(np.full((3, 4, 6, 6), 1 / 6), labels, labels, "cross"), "svg").decode()
    shown = set(re.findall(r">([LH]\d)</text>", svg))
    assert shown == {"L1", "L2", "L3", "H1", "H2", "H3", "H4"}, shown
