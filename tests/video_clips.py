"""Clips made here with FFmpeg's encoders (PyAV) for the video tests: smooth moving colour
patterns (so that lossy codecs keep each frame within a few levels), and the frames written."""
from __future__ import annotations

import io

import numpy as np


def clip_frames(frames: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    """The frames written, [F, H, W, 3] uint8."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    return np.stack([np.stack([128 + 80 * np.sin(x / 9 + i / 3 + seed), 128 + 80 * np.cos(y / 7 - i / 4),
                               128 + 60 * np.sin((x + y) / 11 + seed)], -1) for i in range(frames)]).astype(np.uint8)


def encoded_clip(codec: str, container: str, pixel_format: str = "yuv420p", frames: int = 8, height: int = 48,
                 width: int = 64, seed: int = 0, options=None) -> np.ndarray:
    """The clip of ``clip_frames`` encoded by ``codec`` in ``container``, as the 1-D uint8 sample the
    decoder takes."""
    import av
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as output:
        stream = output.add_stream(codec, rate=25, options=options or {})
        stream.width, stream.height, stream.pix_fmt = width, height, pixel_format
        for frame in clip_frames(frames, height, width, seed):
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    return np.frombuffer(buffer.getvalue(), np.uint8).copy()
