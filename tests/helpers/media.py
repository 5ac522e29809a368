"""Reading animations back: GIF and MP4 frames and their rate."""

from __future__ import annotations

import io
import os
import tempfile

import imageio.v2 as imageio
import numpy as np


def read_gif(data: bytes) -> tuple[np.ndarray, float]:
    """(frames as (n, h, w, 3), the first frame's duration in ms)."""
    reader = imageio.get_reader(io.BytesIO(data), format="GIF")
    duration = reader.get_meta_data(0)["duration"]
    return np.stack([np.asarray(f)[..., :3] for f in reader]), duration


def read_mp4(data: bytes) -> tuple[np.ndarray, float]:
    """(frames as (n, h, w, 3), frames per second) through imageio's ffmpeg reader."""
    handle, path = tempfile.mkstemp(suffix=".mp4")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    try:
        with imageio.get_reader(path, format="FFMPEG") as reader:
            return np.stack(list(reader.iter_data())), reader.get_meta_data()["fps"]
    finally:
        os.unlink(path)
