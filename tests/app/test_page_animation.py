"""The decode page's animation export (AppTest): Render makes a GIF with one frame per step, each frame the page's
own charts of that step rendered, and a download of it; another frame rate gives an MP4 of the same frames."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from helpers.media import read_gif, read_mp4
from helpers.plotly_specs import component, player_step, step_spec
from helpers.repo import REVERSE, needs_reverse, require_image_export

from transformer.charts import animation

PAGE = "pages/explore/decode.py"
KEY = "decode_animation"
pytestmark = needs_reverse


def page_frame(at, caption: str) -> np.ndarray:
    """The frame made from the charts the page shows now (its cross- and decoder self-attention specs)."""
    figures = [pio.from_json(json.dumps(step_spec(at, f"decode_chart_{kind}"))) for kind in animation.STEP_KINDS]
    return animation.compose([animation.figure_pixels(fig) for fig in figures], caption)


def own_caption(at, t: int) -> str:
    """Frame t's caption, from a decode of the page's input recomputed here."""
    from transformer.network.decoding import greedy_decode
    from transformer.store.checkpoints import load_bundle

    bundle = load_bundle(REVERSE)
    result = greedy_decode(bundle.model, bundle.tokenizer, at.text_input(key="shared_input_widget").value, k=5)
    return f"Step {t + 1} of {len(result.steps)} · output so far: {animation.written(result, t)}"


def test_render_button_makes_a_gif_of_the_page_charts(app):
    require_image_export()
    at = app(PAGE)
    steps = len(component(at, "decode_player")["steps"])
    t = player_step(at)
    assert at.button_group(key=f"{KEY}_format").value == "gif"
    assert at.select_slider(key=f"{KEY}_fps").value == 2
    assert not at.get("download_button") or all(
        KEY not in (b.proto.id or "") for b in at.get("download_button"))
    at.button(key=f"{KEY}_render").click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    _, fmt, fps, name, data = at.session_state[f"{KEY}_rendered"]
    assert (fmt, fps) == ("gif", 2) and name.endswith("_decode_steps.gif")
    assert any(b.proto.id.endswith(f"-{KEY}_download") for b in at.get("download_button"))
    frames, duration = read_gif(data)
    assert len(frames) == steps and duration == pytest.approx(500, abs=10)
    caption = next(c for c in at.caption if c.value.startswith("One frame per step")).value
    assert f"({steps})" in caption
    mine = page_frame(at, own_caption(at, t))
    h, w = mine.shape[:2]
    shown = frames[t][:h, :w].astype(int)
    assert np.abs(shown - mine).mean() < 3  # the GIF's palette changes a few colours slightly
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).mean() > 1  # the frames do change

    at.select_slider(key=f"{KEY}_fps").set_value(8).run()
    at.button_group(key=f"{KEY}_format").set_value("mp4").run()
    at.button(key=f"{KEY}_render").click().run(timeout=120)
    _, fmt, fps, name, data = at.session_state[f"{KEY}_rendered"]
    video, rate = read_mp4(data)
    assert (fmt, fps, rate) == ("mp4", 8, 8) and len(video) == steps
    assert video.shape[1:3] == frames.shape[1:3]


def test_unavailable_image_export_says_why(app, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    at = app(PAGE)
    assert any("Unavailable here" in c.value and "BROWSER_PATH" in c.value for c in at.caption)
    assert not any(b.proto.id.endswith(f"-{KEY}_render") for b in at.get("button"))


def test_training_frames_are_the_train_page_figures(bundle):
    """One frame per probe snapshot: the Train page's probe figure of that snapshot and the curves marked there."""
    from types import SimpleNamespace

    from transformer.charts.training import curves_figure
    from transformer.runs.probe import run_probe
    from ui import animations, runs

    results = [(step, run_probe(bundle, text)) for step, text in ((0, "abc"), (50, "abcd"), (100, "abcde"))]
    history = [{"step": s, "loss": 2 / (1 + s), "token_accuracy": s / 100, "exact_match": s / 120}
               for s in (0, 50, 100)]
    snapshot = SimpleNamespace(history=history, max_steps=120, step=100, ended=True)
    run = SimpleNamespace(task=bundle.task, timeline=lambda _: results)
    specs = animations.training_specs(run, snapshot, 0, None)
    assert len(specs) == 3
    curves = curves_figure(snapshot, bundle.task.name)
    for (step, result), frame in zip(results, specs):
        probe, marked = frame.figures
        assert probe.to_json() == runs.probe_figure(result, step, 0, None).to_json()
        assert marked.data == curves.data and [line.x0 for line in marked.layout.shapes[-2:]] == [step, step]
        assert list(marked.layout.xaxis2.range) == [-2, 102]  # the same steps axis in every frame, padded
        assert f"step {step:,}" in frame.caption and result.output_text in frame.caption
