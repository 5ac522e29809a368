"""Animations for slides: each frame is plotly figures rendered on the server (export.figures_to_images, the
same figures a page shows, all frames' figures handed to kaleido at once) laid side by side under a one-line
caption; Pillow writes the frames as a GIF (each frame's palette by its fast octree quantizer), imageio as an
MP4 (H.264 through the ffmpeg binary that imageio-ffmpeg ships).

Frames may differ in size (a decoder's prefix grows with the step): every frame is padded with white to the
largest, rounded up to even sides (H.264's yuv420p needs them), anchored top left.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont
import plotly.graph_objects as go

from transformer.charts import attention_title, step_attention_spec, token_labels
from transformer.i18n import t
from .export import figure_to_image, figures_to_images
from .fonts import cjk_font, wide

FORMATS = ("gif", "mp4")
MIME_TYPES = {"gif": "image/gif", "mp4": "video/mp4"}
FPS_CHOICES = (1, 2, 4, 8)
MAX_FRAMES = 60  # longer sequences are thinned evenly (first and last kept)
CAPTION_PX, CAPTION_FONT_PX, GAP_PX = 44, 22, 8
WHITE = 255


class FrameSpec(NamedTuple):
    """One frame: a caption line above `figures`, drawn left to right."""

    caption: str
    figures: Sequence[go.Figure]


STEP_KINDS = ("cross", "decoder_self")


def decode_step_spec(result, t: int, kind: str) -> dict:
    """The decode page's chart of step `t` (0-based) as a spec of plain dicts: `kind` ("cross" or
    "decoder_self") attention of every layer and head as rows, the source or the prefix read so far as columns.
    `result` is a DecodeResult."""
    step = result.steps[t]
    keys = result.source_pieces if kind == "cross" else result.prefix_pieces[: t + 1]
    weights = step.cross_attention if kind == "cross" else step.self_attention
    return step_attention_spec(np.asarray(weights), token_labels(keys), attention_title(kind, step=t))


def decode_step_figure(result, t: int, kind: str) -> go.Figure:
    """`decode_step_spec` as a figure."""
    return go.Figure(decode_step_spec(result, t, kind))


def written(result, t: int) -> str:
    """The tokens a decode has written up to step `t`, as plain text (sentencepiece's ▁ as a space)."""
    return "".join(step.piece for step in result.steps[: t + 1]).replace("\u2581", " ")


def decode_specs(result, most: int = MAX_FRAMES) -> list[FrameSpec]:
    """One frame per decoding step (thinned to `most`): the output written so far, then the step's cross- and
    decoder self-attention as the decode page shows them."""
    n = len(result.steps)
    return [FrameSpec(t("charts.animation.step", step=i + 1, steps=n, written=written(result, i)),
                      [decode_step_figure(result, i, kind) for kind in STEP_KINDS]) for i in thin(n, most)]


def thin(count: int, most: int = MAX_FRAMES) -> list[int]:
    """At most `most` indices spread evenly over range(count), the first and the last always kept."""
    if count <= most:
        return list(range(count))
    return sorted({round(i * (count - 1) / (most - 1)) for i in range(most)})


def png_pixels(png: bytes) -> np.ndarray:
    """PNG bytes as an (height, width, 3) uint8 array."""
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"))


def figure_pixels(fig: go.Figure, scale: float = 1) -> np.ndarray:
    """The figure as an (height, width, 3) uint8 array, rendered by kaleido as the PNG export is."""
    return png_pixels(figure_to_image(fig, "png", scale=scale))


def caption_strip(text: str, width: int) -> np.ndarray:
    """A white (CAPTION_PX, width, 3) strip with `text` in dark grey, left-aligned (Pillow's own font; Chinese in
    the machine's CJK font, fonts.cjk_font)."""
    strip = Image.new("RGB", (width, CAPTION_PX), (WHITE,) * 3)
    cjk = cjk_font() if wide(text) else None
    font = ImageFont.load_default(size=CAPTION_FONT_PX) if cjk is None else ImageFont.truetype(
        cjk.path, CAPTION_FONT_PX, index=cjk.index)
    ImageDraw.Draw(strip).text((12, (CAPTION_PX - CAPTION_FONT_PX) // 2), text, fill=(34, 34, 34), font=font)
    return np.asarray(strip)


def compose(images: Sequence[np.ndarray], caption: str = "") -> np.ndarray:
    """`images` side by side (top-aligned, GAP_PX apart, white behind), under a caption strip if one is given."""
    height = max(image.shape[0] for image in images)
    width = sum(image.shape[1] for image in images) + GAP_PX * (len(images) - 1)
    canvas = np.full((height, width, 3), WHITE, np.uint8)
    x = 0
    for image in images:
        canvas[: image.shape[0], x: x + image.shape[1]] = image[..., :3]
        x += image.shape[1] + GAP_PX
    return np.concatenate([caption_strip(caption, width), canvas]) if caption else canvas


def render_frames(specs: Iterable[FrameSpec], scale: float = 1,
                  on_frame: Callable[[int, int], None] | None = None) -> list[np.ndarray]:
    """Render every spec's figures (kaleido gets them all at once) and compose each frame in order as its
    images arrive; `on_frame(done, total)` after each one. Raises export.ExportError when the server cannot
    render images."""
    specs = list(specs)
    images = figures_to_images([fig for spec in specs for fig in spec.figures], "png", scale)
    frames = []
    for done, spec in enumerate(specs, 1):
        frames.append(compose([png_pixels(next(images)) for _ in spec.figures], spec.caption))
        if on_frame is not None:
            on_frame(done, len(specs))
    return frames


def pad_frames(frames: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every frame padded with white to the largest height and width, each rounded up to an even number."""
    height, width = (max(frame.shape[axis] for frame in frames) for axis in (0, 1))
    height, width = height + height % 2, width + width % 2
    out = []
    for frame in frames:
        canvas = np.full((height, width, 3), WHITE, np.uint8)
        canvas[: frame.shape[0], : frame.shape[1]] = frame[..., :3]
        out.append(canvas)
    return out


def encode(frames: Sequence[np.ndarray], fmt: str, fps: float) -> bytes:
    """The frames as GIF or MP4 bytes at `fps` frames per second (a GIF loops forever)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if not frames:
        raise ValueError("an animation needs at least one frame")
    if not 0.1 <= fps <= 60:
        raise ValueError(f"fps must lie in 0.1..60, got {fps}")
    frames = pad_frames(frames)
    if fmt == "gif":
        # a palette per frame by the fast octree (several times quicker than the default median cut; a frame of
        # few colours keeps them exactly); each frame's duration in milliseconds; loop=0 repeats forever
        pictures = [Image.fromarray(frame).quantize(255, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
                    for frame in frames]
        out = io.BytesIO()
        pictures[0].save(out, "GIF", save_all=True, append_images=pictures[1:], duration=1000 / fps, loop=0)
        return out.getvalue()
    import imageio.v2 as imageio  # function-local: 0.12 s to import, needed only when an MP4 is written

    handle, path = tempfile.mkstemp(suffix=".mp4")  # ffmpeg writes to a file: it seeks back to finish the MP4
    os.close(handle)
    try:
        # x264's veryfast preset: about half the encoding time of its default (medium) for a ~20% larger file
        imageio.mimwrite(path, frames, format="FFMPEG", fps=fps, codec="libx264", pixelformat="yuv420p",
                         macro_block_size=2, quality=8, ffmpeg_log_level="error",
                         output_params=["-preset", "veryfast"])
        with open(path, "rb") as file:
            return file.read()
    finally:
        os.unlink(path)


def animation_bytes(specs: Iterable[FrameSpec], fmt: str, fps: float, scale: float = 1,
                    on_frame: Callable[[int, int], None] | None = None) -> bytes:
    """render_frames then encode: the whole animation as file bytes."""
    return encode(render_frames(specs, scale, on_frame), fmt, fps)
