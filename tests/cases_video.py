"""Cases of the video decoder (penstock.operators.decoders.video) and of the video readers' GPU step
(penstock.operators.readers.video_reader's _video_frames: NVDEC where the machine has it, else
FFmpeg) for the coverage test; their own tests are in tests/operators/decoders/test_video_decoder.py
and tests/operators/readers/test_video_reader.py (the readers' cases, which make files, are in the
coverage test's SOURCE_CASES).

Reference: the frames written into the clips (VP9 in WebM, MJPEG in AVI, H.264 in MP4, made here
with FFmpeg's encoders), within the codecs' loss: 3 levels on average, 40 at most (4:2:0 chroma at
the pattern's sharpest colour edges)."""
from __future__ import annotations

import os
import tempfile

import numpy as np
from operator_cases import Case, image_op
from video_clips import clip_frames, encoded_clip

from penstock import registry
from penstock.graph import invoke


def _clips():
    return [encoded_clip("libvpx-vp9", "webm", options={"crf": "10", "b": "0"}),
            encoded_clip("mjpeg", "avi", "yuvj420p", seed=1, options={"q:v": "2"}),
            encoded_clip("libx264", "mp4", seed=2, options={"crf": "10"})]


def _written(samples, _):
    return [clip_frames(8, 48, 64, seed)[1:5] for seed in range(len(samples))]


def _clip_file() -> str:
    """A VP9 clip of 8 frames (clip_frames' seed 0) on disk, made once."""
    path = os.path.join(tempfile.gettempdir(), f"penstock_case_clip_{os.getpid()}.webm")
    if not os.path.exists(path):
        encoded_clip("libvpx-vp9", "webm", options={"crf": "10", "b": "0"}).tofile(path)
    return path


def _windows():
    """The GPU step's input: [file, key frame to decode from if a seek fails, frames...], -1 padding."""
    return [np.array([0, 0, 1, 2, 3, 4], np.int64), np.array([0, 0, 6, 7, -1], np.int64)]


def _frames_of_windows(samples, _):
    written = clip_frames(8, 48, 64, 0)
    return [np.stack([written[i] if i >= 0 else np.zeros_like(written[0]) for i in sample[2:]]) for sample in samples]


def _video_frames(node, device):
    return invoke(registry.get_schema("_video_frames"), (node,), {"device": "mixed", "files": (_clip_file(),)})


CASES = {
    "decoders.video": Case(_clips, image_op("decoders.video", start_frame=1, sequence_length=4), _written,
                           max_abs=40, mean_abs=3.0),
    "_video_frames": Case(_windows, _video_frames, _frames_of_windows, max_abs=40, mean_abs=3.0),
}
