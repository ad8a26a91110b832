"""The CPU time the thread that feeds the worker processes spends per sample, for a GPU training
pipeline's CPU stage, on a machine without a GPU: that thread shares the pipeline process's
interpreter lock with the GPU stage, so each microsecond here is one the GPU stage may wait.

usage: python benchmarks/dispatcher_cost.py --data DIR [--processes 1] [--batches 60] [--batch-size 256]

The pipeline is the training pipeline's front (file reader -> mixed random-crop decoder) on the
emulated GPU, with the mixed decoder's worker-side work as on a GPU (read the file, parse the JPEG
header, choose the window: an EncodedImage back through the shared ring) and its decode replaced by
an empty image, so that only the CPU stage and its messages are measured. Prints images/s and the
dispatcher thread's CPU time per sample (time.thread_time, over the whole run).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a folder-per-class JPEG set")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    import torch

    from penstock import devices, fn, pipeline_def, types
    from penstock.executor import processes
    from penstock.operators import decoders
    devices.emulate_gpu(True)
    # the worker side as on a GPU; the GPU stage's decode replaced by an empty image per sample
    decoders.MixedDecoder.prepare = lambda self, inputs, args, sample: self.encoded(inputs, args, sample)
    decoders.MixedDecoder.run_batch = lambda self, inputs, args, batch: [
        torch.empty((1, 1, 3), dtype=torch.uint8) for _ in inputs[0]]
    spent = {}
    dispatch = processes.WorkerProcesses.dispatch

    def timed_dispatch(self):
        try:
            dispatch(self)
        finally:
            spent["seconds"] = time.thread_time()
    processes.WorkerProcesses.dispatch = timed_dispatch

    @pipeline_def(batch_size=args.batch_size, num_threads=args.processes, device_id=0, seed=1, worker_processes=True)
    def front():
        jpegs, labels = fn.readers.file(file_root=args.data, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                               random_area=[0.08, 1.0], num_attempts=100)
        return images, labels.gpu()
    pipe = front()
    pipe.build()
    begun = time.perf_counter()
    for _ in range(args.batches):
        pipe.run()
    seconds = time.perf_counter() - begun
    pipe.close()
    # the batches prefetched past the last one were dispatched too (the GPU stage holds two more)
    samples = (args.batches + pipe.prefetch_queue_depth + 2) * args.batch_size
    print(f"{args.batches * args.batch_size / seconds:,.0f} images/s with {args.processes} worker process(es); "
          f"dispatcher CPU {spent['seconds'] / samples * 1e6:.2f} us per sample")


if __name__ == "__main__":
    main()
