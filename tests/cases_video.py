"""Cases of the video decoder (penstock.operators.decoders.video) for the coverage test; its own
tests are in tests/operators/decoders/test_video_decoder.py.

Reference: the frames written into the clips (VP9 in WebM, MJPEG in AVI, H.264 in MP4, made here
with FFmpeg's encoders), within the codecs' loss: 3 levels on average, 40 at most (4:2:0 chroma at
the pattern's sharpest colour edges)."""
from __future__ import annotations

from operator_cases import Case, image_op
from video_clips import clip_frames, encoded_clip


def _clips():
    return [encoded_clip("libvpx-vp9", "webm", options={"crf": "10", "b": "0"}),
            encoded_clip("mjpeg", "avi", "yuvj420p", seed=1, options={"q:v": "2"}),
            encoded_clip("libx264", "mp4", seed=2, options={"crf": "10"})]


def _written(samples, _):
    return [clip_frames(8, 48, 64, seed)[1:5] for seed in range(len(samples))]


CASES = {
    "decoders.video": Case(_clips, image_op("decoders.video", start_frame=1, sequence_length=4), _written,
                           max_abs=40, mean_abs=3.0),
}
