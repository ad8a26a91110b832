"""The CPU time the thread that feeds the worker processes spends per sample, for a GPU training
pipeline's CPU stage, on a machine without a GPU: that thread shares the pipeline process's
interpreter lock with the GPU stage, so each microsecond here is one the GPU stage may wait.

usage: python benchmarks/dispatcher_cost.py --data DIR [--pipeline train|train-full|ssd|ssd_example] [--processes 1]
       [--batches 60] [--batch-size 256]

``--pipeline train`` (the default) is the training pipeline's front (file reader -> mixed random-crop
decoder; DIR a folder-per-class JPEG set), ``train-full`` the whole ResNet-50 training recipe of
benchmarks/side_by_side.py (resize and crop_mirror_normalize too), ``ssd`` the whole SSD pipeline of
examples/ssd_training.py (DIR a COCO set from make_coco.py: boxes, labels and per-sample colour
arguments cross too), ``ssd_example`` DALI's SSD300 example of side_by_side.py (its box crop, flip and
encoder at 8,732 anchors on the CPU, their outputs copied to the GPU), on the emulated GPU. The mixed decoder's worker-side work runs as on a GPU
(read the file, parse the JPEG header, choose the window: an EncodedImage back through the shared
ring); its decode, the image
kernel and the box encoder are replaced by empty results, so that the CPU stage, its messages and
the GPU stage's own Python are what runs. Prints images/s, the dispatcher thread's CPU time per
sample and the GPU stage thread's per batch (time.thread_time, over the whole run): the interpreter
lock both hold in the pipeline's process, which a training loop in that process shares.
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
    parser.add_argument("--data", required=True, help="a folder-per-class JPEG set (train) or a COCO set (ssd)")
    parser.add_argument("--pipeline", choices=("train", "train-full", "ssd", "ssd_example"), default="train")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--stages", type=int, default=0, help="also print the most costly stages (stage_seconds)")
    args = parser.parse_args()

    import torch

    from penstock import devices, fn, pipeline_def, types
    from penstock.executor import gpu_stage, processes
    from penstock.operators.decoders import mixed as decoders
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
    run_gpu_stage = gpu_stage.GpuStage.run

    def timed_gpu_stage(self, *positional, **named):
        try:
            return run_gpu_stage(self, *positional, **named)
        finally:
            spent["gpu stage"] = time.thread_time()
    gpu_stage.GpuStage.run = timed_gpu_stage

    if args.pipeline == "ssd":
        pipe = _ssd_front(args)
    elif args.pipeline == "ssd_example":
        from penstock.compat import dali
        sys.path.insert(0, HERE)
        from side_by_side import ssd_example_pipeline
        _stub_gpu_work()
        pipe = ssd_example_pipeline(dali, "gpu", args.data, args.batch_size, args.processes)
    elif args.pipeline == "train-full":
        pipe = _training_recipe(args)
    else:
        @pipeline_def(batch_size=args.batch_size, num_threads=args.processes, device_id=0, seed=1,
                      worker_processes=True)
        def front():
            jpegs, labels = fn.readers.file(file_root=args.data, random_shuffle=True, name="Reader")
            images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                                   random_area=[0.08, 1.0], num_attempts=100)
            return images, labels.gpu()
        pipe = front()
    pipe.build()
    before = pipe.stage_seconds()
    begun = time.perf_counter()
    for _ in range(args.batches):
        pipe.run()
    seconds = time.perf_counter() - begun
    stages = {stage: spent - before.get(stage, 0.0) for stage, spent in pipe.stage_seconds().items()}
    pipe.close()
    # the batches prefetched past the last one were dispatched too (the GPU stage holds two more)
    batches = args.batches + pipe.prefetch_queue_depth + 2
    samples = batches * args.batch_size
    print(f"{args.batches * args.batch_size / seconds:,.0f} images/s with {args.processes} worker process(es); "
          f"dispatcher CPU {spent['seconds'] / samples * 1e6:.2f} us per sample; "
          f"GPU stage CPU {spent['gpu stage'] / batches * 1e3:.2f} ms per batch")
    for stage in sorted(stages, key=stages.get, reverse=True)[:args.stages]:
        print(f"  {stages[stage] / args.batches * 1e3:8.2f} ms/batch  {stage}")


def _stub_gpu_work():
    """The mixed decoder's decode and the image kernel replaced by empty results: the GPU stage's
    own Python (plans, tables, arguments) is what runs."""
    import torch

    from penstock.batch import PackedBatch
    from penstock.kernels.image_plan import ImagePlan
    from penstock.runtime.pinned import to_device
    from penstock.operators.decoders import mixed as decoders

    def decoded(self, inputs, args, batch):  # packed, as the GPU's decoders leave a batch
        count, pixels = len(inputs[0]), 8 * 8 * 3
        return ImagePlan.of(PackedBatch(torch.empty(count * pixels, dtype=torch.uint8),
                                        [index * pixels for index in range(count)], [(8, 8, 3)] * count),
                            upload=to_device)
    decoders.MixedDecoder.run_batch = decoded
    ImagePlan.materialize = lambda self, block=256, per_sample=True: (
        [] if per_sample else None, torch.empty((len(self.sources), 3, 8, 8)))


def _training_recipe(args):
    """benchmarks/side_by_side.py's ResNet-50 training pipeline with the GPU work stubbed."""
    from penstock.compat import dali
    sys.path.insert(0, HERE)
    from side_by_side import build_pipeline
    _stub_gpu_work()
    return build_pipeline(dali, "train", "gpu", args.data, args.batch_size, args.processes)


def _ssd_front(args):
    """examples/ssd_training.py's pipeline with the GPU work that is not Python replaced: the
    decoded images, the image kernel's result and the box encoder's are empty tensors."""
    import torch

    from penstock import registry
    from penstock.compat import dali
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from ssd_training import build_pipeline
    _stub_gpu_work()
    from penstock.batch import PackedBatch
    # packed dense batches, as the box encoder returns them
    registry.implementations()[("box_encoder", "gpu")].run_batch = lambda self, inputs, args, batch: (
        PackedBatch.of_dense(torch.empty((len(args), 1, 4))),
        PackedBatch.of_dense(torch.empty((len(args), 1), dtype=torch.int32)))
    return build_pipeline(dali, args.data, 300, args.batch_size, args.processes, True)


if __name__ == "__main__":
    main()
