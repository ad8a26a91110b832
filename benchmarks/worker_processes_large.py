"""Worker processes against worker threads on full-size decodes of 12-megapixel JPEGs: seconds per
batch and memory (PSS summed over the pipeline's process and its worker processes).

usage: python benchmarks/worker_processes_large.py [--images 8] [--batch-size 8] [--threads 2]
       [--batches 6] [--warm-up 2] [--shapes same,mixed] [--data DIR]

Makes the JPEGs (4000x3000, quality 90, sensor-like noise over one of penstock's photographs) in a
temporary folder unless --data names one, then runs readers.file -> decoders.image (no resize) in
a fresh subprocess for each of threads and processes, one after the other, so that neither sees the
other's memory or cores. ``same``: every image 4000x3000 (the batch is one dense array); ``mixed``:
half of them 3000x4000 (portrait), so the batch is ragged. PSS is read from
/proc/<pid>/smaps_rollup every 50 ms on a thread while the pipeline runs (the largest sum is shown):
it counts the memory the processes share (the batch buffers, the rings) once. Prints a table with
the ratios of processes to threads.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from penstock.bench import descendant_pids, memory_kib  # noqa: E402


def make_jpegs(folder: str, count: int, mixed: bool) -> None:
    import cv2
    import numpy as np
    sources = sorted(glob.glob(os.path.join(HERE, "..", "penstock", "data", "*.jpg")))
    os.makedirs(os.path.join(folder, "photos"), exist_ok=True)
    for index in range(count):
        rng = np.random.default_rng(index)
        image = cv2.resize(cv2.imread(sources[index % len(sources)], cv2.IMREAD_COLOR), (4000, 3000),
                           interpolation=cv2.INTER_CUBIC)
        image = np.clip(image + rng.normal(0.0, 5.0, image.shape), 0, 255).astype(np.uint8)
        if mixed and index % 2:
            image = np.ascontiguousarray(np.rot90(image))
        cv2.imwrite(os.path.join(folder, "photos", f"{index:03d}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 90])


def tree_pss_mib() -> float:
    return sum(memory_kib(pid) for pid in (os.getpid(), *descendant_pids())) / 1024


class PeakPss:
    """The largest PSS of this process tree, read every ``every`` seconds on a thread while in use."""

    def __init__(self, every: float = 0.05):
        self.peak, self._every = 0.0, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pss-sampler", daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(self._every):
            self.peak = max(self.peak, tree_pss_mib())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_pss_mib())


def run_one(data: str, worker_processes: bool, batch_size: int, threads: int, batches: int, warm_up: int) -> dict:
    """In this process: the pipeline's seconds per batch after ``warm_up`` batches, and the largest
    PSS of its process tree while it ran (read every 50 ms)."""
    from penstock import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=1,
                  worker_processes=worker_processes)
    def decode_full_size():
        jpegs, labels = fn.readers.file(file_root=data)
        return fn.decoders.image(jpegs), labels

    pipe = decode_full_size()
    pipe.build()
    try:
        with PeakPss() as pss:
            outputs = None
            for _ in range(warm_up):
                outputs = pipe.run()
            started = time.perf_counter()
            for _ in range(batches):
                outputs = pipe.run()  # the last batch is held while the next is made, as a training step would
            seconds = (time.perf_counter() - started) / batches
            del outputs
        described = pipe.describe()
    finally:
        pipe.close()
    return {"seconds_per_batch": seconds, "pss_mib": pss.peak, "processes": "worker processes" in described}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--warm-up", type=int, default=2)
    parser.add_argument("--shapes", default="same,mixed", help="comma-separated: same, mixed")
    parser.add_argument("--data", help="a folder of JPEGs to use instead of making them (one case: 'given')")
    parser.add_argument("--run", choices=("threads", "processes"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.run:  # a measured subprocess
        result = run_one(args.data, args.run == "processes", args.batch_size, args.threads, args.batches,
                         args.warm_up)
        print(json.dumps(result), flush=True)
        return

    rows = []
    with tempfile.TemporaryDirectory(prefix="penstock-12mp-") as temporary:
        cases = [("given", args.data)] if args.data else []
        for shapes in ([] if args.data else args.shapes.split(",")):
            folder = os.path.join(temporary, shapes)
            make_jpegs(folder, args.images, mixed=shapes == "mixed")
            cases.append((shapes, folder))
        for case, folder in cases:
            measured = {}
            for kind in ("threads", "processes"):
                command = [sys.executable, os.path.abspath(__file__), "--run", kind, "--data", folder,
                           "--batch-size", str(args.batch_size), "--threads", str(args.threads),
                           "--batches", str(args.batches), "--warm-up", str(args.warm_up)]
                output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
                measured[kind] = json.loads(output.strip().splitlines()[-1])
                if measured[kind]["processes"] != (kind == "processes"):
                    raise SystemExit(f"the {kind} run did not use {kind}")
            rows.append((case, measured["threads"], measured["processes"]))

    print(f"batch {args.batch_size} of 4000x3000 JPEGs, decoders.image at full size, {args.threads} workers, "
          f"{args.batches} batches after {args.warm_up}")
    print("| shapes | threads s/batch | processes s/batch | time ratio | threads PSS MiB | processes PSS MiB "
          "| memory ratio |")
    print("|---|---|---|---|---|---|---|")
    for case, threads, processes in rows:
        print(f"| {case} | {threads['seconds_per_batch']:.3f} | {processes['seconds_per_batch']:.3f} | "
              f"{processes['seconds_per_batch'] / threads['seconds_per_batch']:.2f} | {threads['pss_mib']:.0f} | "
              f"{processes['pss_mib']:.0f} | {processes['pss_mib'] / threads['pss_mib']:.2f} |")


if __name__ == "__main__":
    main()
