"""How fast does the all-heads grid paint in a real browser? Prints JSON.

1. figure: a 3-layer x 8-head model (d_model 128, random weights) traces a 16-letter input; for each kind
   of attention `charts.head_grid` builds the grid (median build ms, JSON bytes) and headless Chromium
   paints it from a minimal page holding the plotly.js bundled with the plotly package: the time from
   `Plotly.newPlot` to its 'plotly_afterplot' event (and one animation frame), first paint and median.
   Peer: the same heads as a make_subplots figure (one heatmap per head), painted in the same page.
2. live app, twice: with the shipped reverse checkpoint, and with that 3x8-head model (saved as the only
   checkpoint of a temporary copy of the app). A fresh Streamlit server, /attention opened first: time until
   the grid's heatmap image is in the page; a reload (warm server); then two rounds of clicks on the three
   attention kinds, each timed in the page from the click until the new grid is painted (fragment rerun +
   transfer + paint). The first visit to encoder/decoder self-attention builds their figures; cross-attention
   (shown at load) and every second-round switch reuse the cached figures.

    python benchmarks/grid_paint.py [--repeats 9] [--skip-app]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from plotly.subplots import make_subplots  # noqa: E402

from transformer.bundle import ModelBundle  # noqa: E402
from transformer.charts import head_grid, token_labels  # noqa: E402
from transformer.store.checkpoints import save_bundle  # noqa: E402
from transformer.network.config import ModelConfig  # noqa: E402
from transformer.network.decoding import greedy_decode, teacher_forced  # noqa: E402
from transformer.charts.export import browser_path  # noqa: E402
from transformer.network.model import EncoderDecoder  # noqa: E402
from transformer.tasks import make_task  # noqa: E402
from launch import end_process, free_port, run_args, wait_healthy  # noqa: E402
from timing import CHROMIUM_ARGS, median_ms, plot_page  # noqa: E402

LAYERS, HEADS, D_MODEL = 3, 8, 128
SOURCE = "thequickbrownfox"  # 16 letters: 17x17 tiles with </s> and <s>
PAINT_JS = """async ([spec, repeats]) => {
    const fig = JSON.parse(spec); const out = [];
    for (let i = 0; i < repeats; i++) {
        Plotly.purge('plot');
        const div = document.getElementById('plot');
        const t0 = performance.now();
        Plotly.newPlot(div, fig.data, fig.layout);  // sets up div.once; the event fires after a microtask
        await new Promise(r => div.once('plotly_afterplot', r));
        await new Promise(r => requestAnimationFrame(() => r()));
        out.push(performance.now() - t0);
    }
    return out;
}"""
SWITCH_JS = """async ([name, selector]) => {
    const button = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === name);
    const t0 = performance.now();
    button.click();
    await new Promise(r => { const poll = () => document.querySelector(selector) ? r()
                                          : requestAnimationFrame(poll); poll(); });
    return performance.now() - t0;
}"""
GRID_IMAGE = ".st-key-attention_grid_{kind} .heatmaplayer image"
SWITCHES = (("encoder_self", "Encoder self-attention"), ("decoder_self", "Decoder self-attention"),
            ("cross", "Cross-attention"))


def grid_model() -> ModelBundle:
    """The 3-layer x 8-head reverse model with random weights (max_len 18 keeps its decodes <= 17 tokens)."""
    torch.manual_seed(0)
    task = make_task("reverse")
    tokenizer = task.make_tokenizer()
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, n_enc_layers=LAYERS,
                         n_dec_layers=LAYERS, d_model=D_MODEL, n_heads=HEADS, d_ff=4 * D_MODEL, max_len=18)
    return ModelBundle(EncoderDecoder(config).eval(), tokenizer, task, {"name": "reverse-3x8-random"})


def traced_weights(bundle: ModelBundle) -> dict[str, tuple]:
    """(weights (layers, heads, Q, K), query labels, key labels) per kind from one traced pass over SOURCE."""
    result = teacher_forced(bundle.model, bundle.tokenizer, SOURCE, bundle.task.target(SOURCE))
    labels = {"src": token_labels(result.source_pieces), "tgt": token_labels(result.target_pieces)}
    axes = {"encoder_self": ("src", "src"), "decoder_self": ("tgt", "tgt"), "cross": ("tgt", "src")}
    return {kind: (result.trace.weights(kind)[:, 0].numpy(), labels[q], labels[k]) for kind, (q, k) in axes.items()}


def subplots_peer(weights: np.ndarray):
    """The same heads as a make_subplots grid, one heatmap trace per head."""
    layers, heads = weights.shape[:2]
    fig = make_subplots(rows=layers, cols=heads, horizontal_spacing=0.01, vertical_spacing=0.02)
    for i in range(layers):
        for h in range(heads):
            fig.add_heatmap(z=weights[i, h], coloraxis="coloraxis", row=i + 1, col=h + 1)
    fig.update_yaxes(autorange="reversed")
    return fig.update_layout(coloraxis=dict(colorscale="Viridis", cmin=0, cmax=1), width=1100, height=520)


def figure_benchmark(browser, bundle: ModelBundle, repeats: int) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_content(plot_page())
    report = {}
    for kind, (weights, rows, cols) in traced_weights(bundle).items():
        build = functools.partial(head_grid, weights, rows, cols, kind)
        build()  # warm plotly's validators
        fig = build()
        entry = {"tiles": f"{LAYERS}x{HEADS} of {weights.shape[2]}x{weights.shape[3]}",
                 "build_ms": median_ms(build, repeats, digits=1), "json_bytes": len(fig.to_json())}
        times = page.evaluate(PAINT_JS, [fig.to_json(), repeats + 1])
        entry["first_paint_ms"], entry["paint_ms"] = round(times[0], 1), round(statistics.median(times[1:]), 1)
        if kind == "cross":
            peer = page.evaluate(PAINT_JS, [subplots_peer(weights).to_json(), repeats + 1])
            entry["peer_make_subplots_paint_ms"] = round(statistics.median(peer[1:]), 1)
        report[kind] = entry
    page.close()
    return report


@contextlib.contextmanager
def streamlit_server(app_root: Path):
    """`streamlit run app.py` in `app_root` on a free loopback port; yields its URL, stops it by its pid."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", *run_args("app.py", port)],
                            cwd=app_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(url, proc, 120, 0.3):
            raise RuntimeError("streamlit did not start")
        yield url
    finally:
        end_process(proc, 10)


def live_app(browser, app_root: Path) -> dict:
    report = {}
    with streamlit_server(app_root) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for label in ("fresh_server_first_open_ms", "reload_ms"):
            start = time.perf_counter()
            page.goto(f"{url}/attention") if label.startswith("fresh") else page.reload()
            page.wait_for_selector(GRID_IMAGE.format(kind="cross"), state="attached", timeout=180_000)
            report[label] = round((time.perf_counter() - start) * 1000)
        page.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]")
        times = {"first_round": [], "second_round": []}
        for rounds in times:
            for kind, name in SWITCHES:
                times[rounds].append(page.evaluate(SWITCH_JS, [name, GRID_IMAGE.format(kind=kind)]))
                page.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]")
        for rounds, values in times.items():
            report[f"kind_switch_to_grid_painted_ms_{rounds}"] = {
                kind: round(ms, 1) for (kind, _), ms in zip(SWITCHES, values)}
        page.close()
    return report


def app_copy_with(bundle: ModelBundle, folder: Path) -> Path:
    """A copy of the app whose only checkpoint is `bundle`, saved as reverse (the default model)."""
    root = folder / "app"
    shutil.copytree(ROOT, root, ignore=shutil.ignore_patterns(".git", "test-artifacts", "__pycache__",
                                                              "*.safetensors", ".venv"))
    save_bundle(bundle, root / "assets" / "checkpoints" / "reverse.safetensors")
    return root


def app_benchmark(browser, bundle: ModelBundle) -> dict:
    report = {}
    if (ROOT / "assets" / "checkpoints" / "reverse.safetensors").exists():
        report["shipped_reverse"] = live_app(browser, ROOT)
    else:
        report["shipped_reverse"] = "skipped: assets/checkpoints/reverse.safetensors is missing"
    with tempfile.TemporaryDirectory() as folder:
        decoded = greedy_decode(bundle.model, bundle.tokenizer, bundle.task.examples()[0])
        report["random_3x8"] = {"cross_tiles": f"{len(decoded.steps)}x{len(decoded.source_pieces)}",
                                **live_app(browser, app_copy_with(bundle, Path(folder)))}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--skip-app", action="store_true")
    add_cpu_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    path = browser_path()
    if path is None:
        print(json.dumps({"skipped": "no Chromium found"}))
        return
    from playwright.sync_api import sync_playwright

    bundle = grid_model()
    report = {"model": f"{LAYERS} layers x {HEADS} heads, d_model {D_MODEL}, random weights",
              "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        report["figure"] = figure_benchmark(browser, bundle, args.repeats)
        report["live_app"] = "skipped" if args.skip_app else app_benchmark(browser, bundle)
        browser.close()
    report |= {"machine": machine(), "budget_ms": 1500, "note": "headless Chromium; medians"}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
