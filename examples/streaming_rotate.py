"""A streaming source (a plain Python iterable of (image, label) samples, standing in for a dataset library)
-> centre crop 200 -> rotate 30 degrees, on the GPU where there is one; throughput against
torchvision's functional transforms on the CPU and on the GPU, printed as a table and drawn as a
bar chart PNG.

Shows: external_source(source=iterable, num_outputs=2, batch=False, device="gpu", dtype=FLOAT) fed
float32 HWC samples; the iterable's end is the epoch's end.
usage: python examples/streaming_rotate.py [--samples 512] [--batch-size 64] [--out chart.png]
"""
import argparse
import time
import warnings

import cv2
import numpy as np
import torch

from penstock import GpuFallbackWarning, fn, pipeline_def, types
from penstock.data import sample_photo_paths
from penstock.plugin.pytorch import GenericIterator


def stream(count: int, size: int = 256):
    """Samples as a dataset library yields them: (a float32 HWC image in [0, 1], a label)."""
    photos = [cv2.resize(cv2.imread(path)[:, :, ::-1], (size, size)).astype(np.float32) / 255
              for path in sample_photo_paths()]
    for index in range(count):
        yield photos[index % len(photos)], np.array([index % len(photos)], np.int64)


def penstock_run(samples, batch_size, device):
    @pipeline_def(batch_size=batch_size, num_threads=4, device_id=0, seed=0)
    def pipe():
        images, labels = fn.external_source(source=stream(samples), num_outputs=2, batch=False, device=device)
        images = fn.crop(images, device=device, crop=(200, 200))
        return fn.rotate(images, device=device, angle=30.0, fill_value=0, interp_type=types.INTERP_LINEAR,
                         keep_size=True), labels

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpuFallbackWarning)  # without a GPU this runs on the CPU
        built = pipe()
    count, started = 0, None
    for step in GenericIterator(built, ["images", "labels"]):
        images = step[0]["images"]
        if started is None:  # the first batch pays for start-up (threads, kernel compilation): not timed
            started = time.perf_counter()
            continue
        count += len(images)
    if images.is_cuda:
        torch.cuda.synchronize()
    built.close()
    return count / (time.perf_counter() - started), tuple(images.shape)


def torchvision_run(samples, batch_size, device):
    from torchvision.transforms import functional
    count, started = 0, None
    batch = []
    for image, _ in stream(samples):
        batch.append(torch.from_numpy(image).permute(2, 0, 1).to(device))
        if len(batch) == batch_size:
            images = torch.stack([functional.rotate(functional.center_crop(image, 200), 30.0) for image in batch])
            batch = []
            if started is None:  # as for penstock, the first batch is not timed
                started = time.perf_counter()
                continue
            count += len(images)
    if device == "cuda":
        torch.cuda.synchronize()
    return count / (time.perf_counter() - started), tuple(images.shape)


def bar_chart(results, path):
    width, bar, height = 640, 44, 60 + 56 * len(results)
    chart = np.full((height, width, 3), 255, np.uint8)
    best = max(rate for _, rate in results) or 1
    for row, (name, rate) in enumerate(results):
        top = 40 + row * 56
        cv2.rectangle(chart, (230, top), (230 + int(360 * rate / best), top + bar - 10), (60, 120, 200), -1)
        cv2.putText(chart, name, (8, top + 24), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1)
        cv2.putText(chart, f"{rate:,.0f}/s", (236 + int(360 * rate / best), top + 24), cv2.FONT_HERSHEY_SIMPLEX,
                    0.45, (0, 0, 0), 1)
    cv2.putText(chart, "crop 200 + rotate 30, images/s", (8, 24), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1)
    cv2.imwrite(path, chart)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default="streaming_rotate.png")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    runs = [("penstock, CPU", lambda: penstock_run(args.samples, args.batch_size, "cpu"))]
    if cuda:
        runs.append(("penstock, GPU", lambda: penstock_run(args.samples, args.batch_size, "gpu")))
    try:
        import torchvision  # noqa: F401
        runs.append(("torchvision, CPU", lambda: torchvision_run(args.samples, args.batch_size, "cpu")))
        if cuda:
            runs.append(("torchvision, GPU", lambda: torchvision_run(args.samples, args.batch_size, "cuda")))
    except ImportError:
        print("torchvision is not installed: its rows are left out")
    results = []
    print("| runner | images/s | output batch |\n|---|---|---|")
    for name, run in runs:
        rate, shape = run()
        results.append((name, rate))
        print(f"| {name} | {rate:,.0f} | {shape} |", flush=True)
    bar_chart(results, args.out)
    print(f"bar chart: {args.out}")
    return results


if __name__ == "__main__":
    main()
