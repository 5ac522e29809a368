"""Animation export for slides: a popover with the format (GIF / MP4), the frame rate, a Render button with a
progress bar, and the download of the file rendered. Frames come from the figures the page shows
(transformer/animation.py renders them through kaleido, as the PNG export does)."""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from transformer.charts.animation import (
    FORMATS, FPS_CHOICES, MIME_TYPES, FrameSpec, animation_bytes, decode_specs, thin,
)
from transformer.charts.training import curves_figure, mark_step
from transformer.charts.export import ExportError, chart_filename, image_export_available
from transformer.i18n import t

from . import runs
from .display import export_note, for_export
from .tables.train import ALL_HEADS

DEFAULT_FPS = 2


def _rendered_key(key: str) -> str:
    return f"{key}_rendered"


def render(key: str, specs: Callable[[], list[FrameSpec]], signature, filename: str) -> None:
    """Render the animation with the chosen format and rate under a progress bar (its frames in the language the
    server draws images in: display.for_export); keep the bytes in the session with `signature` (what the frames
    were made from) so a download never offers stale frames."""
    fmt, fps = st.session_state[f"{key}_format"], st.session_state[f"{key}_fps"]
    frames = for_export(specs)
    bar = st.progress(0.0, text=t("app.animation.rendering", n=len(frames)))
    try:
        data = animation_bytes(frames, fmt, fps, on_frame=lambda done, total: bar.progress(
            done / total, text=t("app.animation.frame", done=done, total=total) if done < total
            else t("app.animation.writing")))
    except ExportError as exc:
        st.session_state.pop(_rendered_key(key), None)
        st.warning(t("app.animation.cannot", error=exc), icon=":material/warning:")
        return
    finally:
        bar.empty()
    st.session_state[_rendered_key(key)] = (signature, fmt, fps, f"{filename}.{fmt}", data)


def animation_export(key: str, specs: Callable[[], list[FrameSpec]], signature, filename: str, what: str) -> None:
    """The popover: format, frame rate, Render (`specs()` builds the frames' figures only then) and, once
    rendered for this `signature`, the download. `what` says what the frames show."""
    ok, why = image_export_available()
    with st.popover(t("app.animation.popover"), icon=":material/movie:"):
        st.caption(what)
        if not ok:
            st.caption(":material/warning: " + t("app.animation.unavailable", why=why))
            return
        if (note := export_note()) is not None:
            st.caption(note)
        fmt_col, fps_col = st.columns(2)
        fmt_col.segmented_control(t("app.animation.format"), FORMATS, default=FORMATS[0], required=True,
                                  key=f"{key}_format", format_func=str.upper)
        fps_col.select_slider(t("app.animation.fps"), FPS_CHOICES, value=DEFAULT_FPS, key=f"{key}_fps")
        if st.button(t("app.animation.render"), key=f"{key}_render", icon=":material/movie_edit:", type="primary"):
            render(key, specs, signature, filename)
        done = st.session_state.get(_rendered_key(key))
        if done is not None and done[0] == signature:
            _, fmt, fps, name, data = done
            st.download_button(t("app.animation.download", name=name), data, file_name=name, mime=MIME_TYPES[fmt],
                               key=f"{key}_download", icon=":material/download:", on_click="ignore")
            st.caption(t("app.animation.size", mb=len(data) / 1e6, n=fps))


def decode_animation(bundle, result) -> None:
    """The decode page's animation: every step's cross- and decoder self-attention, the output growing."""
    signature = (bundle.name, result.source_pieces, tuple(s.token for s in result.steps))
    animation_export("decode_animation", lambda: decode_specs(result), signature,
                     chart_filename(bundle.task.name, "decode_steps"),
                     t("app.animation.decode_what", n=len(result.steps)))


def step_marked(fig: go.Figure, step: int, steps: tuple[int, int]) -> go.Figure:
    """A copy of the training curves with a vertical line at `step` across both panels, the step axis fixed to
    `steps` (lo, hi) so it holds still from frame to frame (and a line before the first point fits)."""
    marked = mark_step(fig, step)
    pad = max(1, (steps[1] - steps[0]) // 50)
    # kaleido dropped the axes' automatic margins once the range was set (tick labels cut): fixed margins instead
    return marked.update_layout(xaxis2_range=[steps[0] - pad, steps[1] + pad], margin_l=76, margin_b=60)


def training_specs(run: runs.Run, snapshot, layer: int, head: int | None) -> list[FrameSpec]:
    """One frame per probe snapshot (thinned): the probe's cross-attention as the Train page draws it, beside
    the held-out curves marked at that step."""
    timeline = [(step, result) for step, result in run.timeline(snapshot) if result.error is None]
    curves = curves_figure(snapshot, run.task.name)
    every = [step for step, _ in timeline] + [row["step"] for row in snapshot.history]
    steps = (min(every), max(every))
    return [FrameSpec(t("app.animation.train_caption", step=step, probe=repr(result.source),
                        output=repr(result.output_text) if result.output_text else t("app.animation.nothing")),
                      [runs.probe_figure(result, step, layer, head), step_marked(curves, step, steps)])
            for step, result in (timeline[i] for i in thin(len(timeline)))]


def training_animation(view, run: runs.Run, snapshot) -> None:
    """The Train page's animation of the probe timeline at the layer/head chosen in `view`."""
    layer, head = view.get("layer") - 1, view.get("head")
    head = None if head == ALL_HEADS else head - 1
    signature = (id(run.job), layer, head)  # a file rendered mid-run stays offered; its name says its last step
    animation_export("train_animation", lambda: training_specs(run, snapshot, layer, head), signature,
                     f"{chart_filename(run.task.name, 'cross', layer, head)}_train-to{snapshot.step:04d}",
                     t("app.animation.train_what"))
