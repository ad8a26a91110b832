"""Makes a folder of video clips for the video benchmarks: moving colour patterns with some noise
(so that the encoder has work to do), encoded by FFmpeg's encoders through PyAV, in class folders.

usage: python benchmarks/make_videos.py DIR [--codec h264|hevc] [--height 1080] [--width 1920]
       [--clips 8] [--frames 64] [--classes 2]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

ENCODERS = {"h264": ("libx264", {"preset": "veryfast", "g": "32"}),
            "hevc": ("libx265", {"preset": "veryfast", "x265-params": "log-level=error:keyint=32"})}


def clip(frames: int, height: int, width: int, seed: int):
    """Frames of a smooth moving pattern with a little noise, [H, W, 3] uint8 each."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    for index in range(frames):
        base = np.stack([128 + 80 * np.sin(x / 37 + index / 5 + seed), 128 + 80 * np.cos(y / 29 - index / 7),
                         128 + 60 * np.sin((x + y) / 53 + index / 11)], -1)
        yield np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)


def write(path: str, codec: str, frames: int, height: int, width: int, seed: int) -> None:
    import av
    encoder, options = ENCODERS[codec]
    with av.open(path, "w") as output:
        stream = output.add_stream(encoder, rate=30, options=dict(options))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for frame in clip(frames, height, width, seed):
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--codec", choices=sorted(ENCODERS), default="h264")
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--classes", type=int, default=2)
    args = parser.parse_args()
    for number in range(args.clips):
        folder = os.path.join(args.folder, f"class{number % args.classes}")
        os.makedirs(folder, exist_ok=True)
        write(os.path.join(folder, f"clip{number:03d}.mp4"), args.codec, args.frames, args.height, args.width, number)
    print(f"{args.clips} {args.codec} clips of {args.frames} frames at {args.width} x {args.height} in {args.folder}")


if __name__ == "__main__":
    main()
