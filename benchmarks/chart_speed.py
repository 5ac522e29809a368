"""How fast is the all-heads grid? Prints JSON.

Builds a 3-layer x 8-head grid of 17x17 attention matrices two ways, in the same run:
  tiled        transformer.charts.head_grid: one heatmap trace, NaN gutters between tiles
  subplots     the peer: plotly make_subplots, one heatmap per head (measured at 70-230 ms when the project started)
and reports build time (median ms), JSON size, and, when Chromium and Playwright are here, the time
Plotly.newPlot takes to paint each in a real headless browser. Then the cost of server-side export through
kaleido: its first call (browser start included) and each image after.

And how a chart is built: the decode page's per-step chart (transformer.charts.step_attention_rows, figure
and layout in one call) against the same figure built the common way, with update_xaxes / update_yaxes /
add_shape / update_layout calls on a made figure (checked to give the same JSON). Pages rebuild their charts
on every click, so this is server time per click.

    python benchmarks/chart_speed.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from transformer.charts import head_grid, step_attention_rows, token_labels  # noqa: E402
from transformer.charts.attention import weight_bar  # noqa: E402
from transformer.charts.common import FONT, WEIGHT_SCALE  # noqa: E402
from transformer.charts.export import browser_path, figure_to_image, image_export_available, shutdown  # noqa: E402
from timing import CHROMIUM_ARGS, median_ms, plot_page  # noqa: E402

LAYERS, HEADS, SIZE = 3, 8, 17


def sample_weights(seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(LAYERS, HEADS, SIZE, SIZE)) * 2
    weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    return weights.astype(np.float32)


def subplots_grid(weights: np.ndarray, labels: list[str]) -> go.Figure:
    """The peer: one heatmap per head in a make_subplots grid sharing one colour axis."""
    layers, heads = weights.shape[:2]
    fig = make_subplots(rows=layers, cols=heads, shared_xaxes=True, shared_yaxes=True,
                        horizontal_spacing=0.01, vertical_spacing=0.02,
                        subplot_titles=[f"L{i + 1} H{h + 1}" for i in range(layers) for h in range(heads)])
    for i in range(layers):
        for h in range(heads):
            fig.add_trace(go.Heatmap(z=weights[i, h], x=labels, y=labels, coloraxis="coloraxis",
                                     hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"),
                          row=i + 1, col=h + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(coloraxis=dict(colorscale="Viridis", cmin=0, cmax=1), height=520, width=1100,
                      title="Cross-attention · all heads (make_subplots)")
    return fig


def step_rows_by_updates(weights: np.ndarray, labels: list[str], title: str, reference: go.Layout) -> go.Figure:
    """The peer of step_attention_rows: the same figure, styled through update calls after it is made
    (sizes and margins copied from `reference`, the real chart's layout)."""
    layers, heads, k = weights.shape
    y = [f"L{i + 1} H{h + 1}" for i in range(layers) for h in range(heads)]
    fig = go.Figure(go.Heatmap(
        z=weights.reshape(layers * heads, k), x=labels, y=y, colorscale=WEIGHT_SCALE, zmin=0, zmax=1,
        colorbar=weight_bar(), xgap=1, ygap=1, hovertemplate="head %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
    ))
    for i in range(1, layers):
        fig.add_shape(type="line", x0=-0.5, x1=k - 0.5, y0=i * heads - 0.5, y1=i * heads - 0.5,
                      line=dict(color="#222", width=2))
    fig.update_xaxes(type="category", side="top", tickangle=reference.xaxis.tickangle, range=[-0.5, k - 0.5],
                     showgrid=False, zeroline=False, tickfont_size=13)
    fig.update_yaxes(type="category", range=[len(y) - 0.5, -0.5], showgrid=False, zeroline=False, tickfont_size=13)
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", yref="container", y=1, yanchor="top", pad=dict(t=14),
                   font=dict(size=17)),
        font=FONT, height=reference.height, width=reference.width, plot_bgcolor="white", paper_bgcolor="white",
        margin=dict(l=reference.margin.l, r=10, t=reference.margin.t, b=12), hoverlabel=dict(font_size=14),
    )
    return fig


def build_styles(repeats: int) -> dict:
    """Median build ms of the decode page's step chart, both ways."""
    weights = sample_weights()[:2, :4, 0, :]  # one decoding step of a 2-layer x 4-head model
    labels = token_labels(list("abcdefghijklmnop") + ["</s>"])
    reference = step_attention_rows(weights, labels, "step").layout
    one_call = step_attention_rows(weights, labels, "step")
    assert one_call.to_plotly_json() == step_rows_by_updates(weights, labels, "step", reference).to_plotly_json()
    return {
        "step_rows_one_call_ms": median_ms(lambda: step_attention_rows(weights, labels, "step"), repeats),
        "step_rows_update_calls_ms": median_ms(lambda: step_rows_by_updates(weights, labels, "step", reference),
                                               repeats),
    }


def browser_paint_ms(figures: dict[str, go.Figure], repeats: int) -> dict | str:
    """Median ms for Plotly.newPlot to resolve (drawn) per figure, in headless Chromium via Playwright."""
    path = browser_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: playwright is not installed"
    if path is None:
        return "skipped: no Chromium"
    page_html = plot_page()
    results = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_content(page_html)
        for name, fig in figures.items():
            spec = fig.to_json()
            times = page.evaluate(
                """async ([spec, repeats]) => {
                    const fig = JSON.parse(spec); const out = [];
                    for (let i = 0; i < repeats; i++) {
                        Plotly.purge('plot');
                        const t0 = performance.now();
                        await Plotly.newPlot('plot', fig.data, fig.layout);
                        await new Promise(r => requestAnimationFrame(() => r()));
                        out.push(performance.now() - t0);
                    }
                    return out;
                }""", [spec, repeats])
            results[name] = round(statistics.median(times), 1)
        browser.close()
    return results


def kaleido_cost(fig: go.Figure, repeats: int) -> dict | str:
    ok, reason = image_export_available()
    if not ok:
        return f"skipped: {reason}"
    start = time.perf_counter()
    figure_to_image(fig, "png")
    first = (time.perf_counter() - start) * 1000
    result = {"first_call_ms": round(first, 1)}
    for fmt in ("png", "svg"):
        result[f"{fmt}_per_image_ms"] = median_ms(lambda fmt=fmt: figure_to_image(fig, fmt), repeats)
    result["png_bytes"] = len(figure_to_image(fig, "png"))
    shutdown()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    add_cpu_argument(parser)
    args = parser.parse_args()
    weights = sample_weights()
    labels = token_labels(list("abcdefghijklmnop") + ["</s>"])
    builders = {
        "tiled": lambda: head_grid(weights, labels, labels, "cross"),
        "subplots": lambda: subplots_grid(weights, labels),
    }
    for build in builders.values():  # warm imports and plotly's validators
        build()
    figures = {name: build() for name, build in builders.items()}
    report = {
        "grid": f"{LAYERS} layers x {HEADS} heads, {SIZE}x{SIZE} each",
        "build_ms": {name: median_ms(build, args.repeats) for name, build in builders.items()},
        "json_bytes": {name: len(fig.to_json()) for name, fig in figures.items()},
        "browser_paint_ms": browser_paint_ms(figures, max(3, args.repeats // 3)),
        "kaleido": kaleido_cost(figures["tiled"], max(3, args.repeats // 3)),
        "chart_build": build_styles(args.repeats),
        "note": "medians", "machine": machine(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
