"""Action recognition's input pipeline, as DALI users write it: 8-frame clips read from video files
(readers.video: NVDEC on the GPU, FFmpeg on the CPU), each clip resized by its shorter side, cut at
a random place to 112 x 112, mirrored on a coin flip (the same for every frame of a clip), normalized
and laid out FCHW, feeding a tiny 3-D convolutional model for a few steps.

The clips are made here: two classes of moving patterns (stripes that move right, stripes that move
down), encoded as H.264 by FFmpeg's encoder (PyAV).

usage: python examples/action_recognition.py [--clips 16] [--steps 30] [--device cpu|gpu]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

MEAN = [0.43 * 255, 0.39 * 255, 0.38 * 255]
STD = [0.23 * 255, 0.22 * 255, 0.22 * 255]


def moving_stripes(direction: int, frames: int, height: int, width: int, seed: int) -> np.ndarray:
    """[F, H, W, 3] uint8: stripes moving right (direction 0) or down (1), in a clip's own colours."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    colour = rng.uniform(60, 255, 3)
    period, speed = rng.uniform(10, 20), rng.uniform(2, 4)
    return np.stack([(0.5 + 0.5 * np.sin(2 * np.pi * ((x if direction == 0 else y) - speed * index) / period))[..., None]
                     * colour for index in range(frames)]).astype(np.uint8)


def make_clips(folder: str, clips: int, frames: int = 24, height: int = 128, width: int = 160) -> list[str]:
    """``clips`` H.264 files in folder/<class>/, alternating the two classes."""
    import av
    paths = []
    for number in range(clips):
        direction = number % 2
        os.makedirs(os.path.join(folder, f"class{direction}"), exist_ok=True)
        path = os.path.join(folder, f"class{direction}", f"clip{number:03d}.mp4")
        with av.open(path, "w") as output:
            stream = output.add_stream("libx264", rate=25, options={"crf": "18", "g": "8"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for frame in moving_stripes(direction, frames, height, width, number):
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    output.mux(packet)
            for packet in stream.encode():
                output.mux(packet)
        paths.append(path)
    return paths


def clip_pipeline(api, file_root: str, batch_size: int, threads: int, device: str, device_id=0, seed: int = 1,
                  sequence_length: int = 8, shorter_side: int = 128, crop: int = 112):
    """Clips (batch, frames, channels, crop, crop) as float, and their labels."""
    fn, types = api.fn, api.types

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id if device == "gpu" else None,
                      seed=seed)
    def clips():
        video, label = fn.readers.video(device=device, file_root=file_root, sequence_length=sequence_length,
                                        random_shuffle=True, initial_fill=16, name="Reader")
        video = fn.resize(video, resize_shorter=shorter_side)
        video = fn.crop_mirror_normalize(video, crop=(crop, crop), crop_pos_x=fn.random.uniform(range=(0, 1)),
                                         crop_pos_y=fn.random.uniform(range=(0, 1)), mirror=fn.random.coin_flip(),
                                         mean=MEAN, std=STD, dtype=types.FLOAT, output_layout="FCHW")
        return video, label

    return clips()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args()

    import torch

    import penstock.compat.dali as api
    from penstock.compat.dali.plugin.pytorch import DALIGenericIterator
    folder = os.path.join(args.work_dir or tempfile.mkdtemp(prefix="clips_"), "clips")
    make_clips(folder, args.clips)
    pipe = clip_pipeline(api, folder, args.batch_size, args.threads, args.device)
    loader = DALIGenericIterator(pipe, ["clips", "labels"], reader_name="Reader", auto_reset=True)
    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    model = torch.nn.Sequential(torch.nn.Conv3d(3, 8, 3, stride=(1, 2, 2), padding=1), torch.nn.ReLU(),
                                torch.nn.Conv3d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool3d(1), torch.nn.Flatten(), torch.nn.Linear(16, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses, seen, began, step = [], 0, time.perf_counter(), 0
    while step < args.steps:
        for batch in loader:
            clips = batch[0]["clips"].to(device)  # (batch, frames, channels, height, width)
            labels = batch[0]["labels"].to(device).reshape(-1).long()
            loss = torch.nn.functional.cross_entropy(model(clips.permute(0, 2, 1, 3, 4)), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            seen += len(labels)
            step += 1
            if step == 1:
                print(f"clips {tuple(clips.shape)} (batch, frames, channels, height, width), {clips.dtype}")
            if step >= args.steps:
                break
    pipe.close()
    elapsed = time.perf_counter() - began
    print(f"{seen / elapsed:.1f} clips/s; loss {np.mean(losses[:5]):.3f} -> {np.mean(losses[-5:]):.3f} over "
          f"{len(losses)} steps")


if __name__ == "__main__":
    main()
