"""Animations (transformer/animation.py): GIF and MP4 files read back with imageio (frame count, size, rate,
colours), padding of frames that differ in size, thinning, and frames rendered from the decode page's figures."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.media import read_gif, read_mp4
from helpers.repo import needs_reverse, require_image_export

from transformer.charts import animation

COLOURS = [(230, 159, 0), (0, 114, 178), (0, 158, 115), (213, 94, 0), (204, 121, 167)]


def solid_frames(sizes):
    """One frame per (height, width), each a solid colour from COLOURS."""
    return [np.full((h, w, 3), COLOURS[i % len(COLOURS)], np.uint8) for i, (h, w) in enumerate(sizes)]


SIZES = [(40, 60), (41, 75), (30, 50), (44, 64), (40, 60), (40, 60), (40, 60)]  # odd and uneven sizes on purpose


def test_gif_has_every_frame_padded_to_the_largest_even_size():
    data = animation.encode(solid_frames(SIZES), "gif", fps=4)
    assert data.startswith(b"GIF89a")
    frames, duration = read_gif(data)
    assert frames.shape == (len(SIZES), 44, 76, 3)  # 44 x 75 rounded up to even sides
    assert duration == pytest.approx(250, abs=10)
    for frame, (h, w), colour in zip(frames, SIZES, COLOURS * 2):
        assert (frame[:h, :w] == colour).all()  # solid colours survive the palette exactly
        assert (frame[h:] == 255).all() and (frame[:, w:] == 255).all()  # white padding, anchored top left


def test_mp4_has_every_frame_at_the_chosen_rate():
    data = animation.encode(solid_frames(SIZES), "mp4", fps=2)
    assert data[4:8] == b"ftyp"
    frames, fps = read_mp4(data)
    assert frames.shape == (len(SIZES), 44, 76, 3)
    assert fps == pytest.approx(2)
    for frame, (h, w), colour in zip(frames, SIZES, COLOURS * 2):  # H.264 is lossy: close, not equal
        inner = frame[4: h - 4, 4: w - 4].astype(int)
        assert np.abs(inner - colour).mean() < 6


def test_encode_refuses_bad_arguments():
    frames = solid_frames(SIZES[:2])
    for fmt, fps, pictures in (("avi", 2, frames), ("gif", 0, frames), ("gif", 2, [])):
        with pytest.raises(ValueError):
            animation.encode(pictures, fmt, fps)


def test_thin_keeps_first_and_last_and_bounds_the_count():
    assert animation.thin(5, 10) == [0, 1, 2, 3, 4]
    kept = animation.thin(200, 20)
    assert len(kept) == 20 and kept[0] == 0 and kept[-1] == 199 and kept == sorted(set(kept))


def test_compose_lays_images_side_by_side_under_a_caption():
    left, right = solid_frames([(30, 40), (50, 20)])
    frame = animation.compose([left, right], "Step 1")
    top = animation.CAPTION_PX
    assert frame.shape == (top + 50, 40 + animation.GAP_PX + 20, 3)
    assert (frame[top: top + 30, :40] == COLOURS[0]).all()
    assert (frame[top:, 40 + animation.GAP_PX:] == COLOURS[1]).all()
    assert (frame[:top] < 128).any()  # the caption's text is drawn


@needs_reverse
def test_decode_frames_are_the_figures_rendered(bundle):
    """Each frame holds the step's two charts exactly as figure_to_image renders them, and one frame per step."""
    require_image_export()
    from transformer.network.decoding import greedy_decode

    result = greedy_decode(bundle.model, bundle.tokenizer, "abcde", k=5)
    specs = animation.decode_specs(result)
    assert len(specs) == len(result.steps)
    assert "output so far: " + animation.written(result, 2) in specs[2].caption
    frames = animation.render_frames(specs[1:3])
    for frame, spec in zip(frames, specs[1:3]):
        cross, own = (animation.figure_pixels(fig) for fig in spec.figures)
        top = animation.CAPTION_PX
        assert np.array_equal(frame[top: top + cross.shape[0], : cross.shape[1]], cross)
        x = cross.shape[1] + animation.GAP_PX
        assert np.array_equal(frame[top: top + own.shape[0], x: x + own.shape[1]], own)
    assert frames[0].shape != frames[1].shape or not np.array_equal(frames[0], frames[1])
