"""Where one of penstock's benchmark pipelines spends its time: images/s over a number of batches
in one process (``Pipeline.run()``, no iterator), then the seconds per batch of every operator and
stage (``Pipeline.stage_seconds()``: CPU operators summed over their threads or worker processes; GPU
operators as the GPU stage's one thread spends them, which is what sets a GPU pipeline's pace).

usage: python benchmarks/stage_profile.py PIPELINE --data DIR [--device gpu] [--batches 30]
       [--decoder cpu_decoder_load=0.1+hw_decoder_load=0.9]
PIPELINE: train, val or aug (benchmarks/side_by_side.py's, on a folder-per-class set), ssd
(examples/ssd_training.py's, on a COCO-format set made by benchmarks/make_coco.py) or ssd_example
(DALI's SSD300 example as side_by_side.py has it, on a COCO-format set) or maskrcnn (side_by_side.py's
Mask R-CNN-style pipeline, on a COCO-format set).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", choices=("train", "val", "aug", "ssd", "ssd_example", "maskrcnn"))
    parser.add_argument("--data", required=True)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--decoder", default="", help="arguments added to the decoder of train, val or aug, "
                                                      "as name=value+... (e.g. cpu_decoder_load=0.1)")
    args = parser.parse_args()

    import penstock.compat.dali as api
    gpu = args.device == "gpu"
    if args.pipeline == "ssd":
        from ssd_training import build_pipeline as ssd_pipeline
        pipe = ssd_pipeline(api, args.data, 300, args.batch_size, args.threads, gpu)
    elif args.pipeline == "maskrcnn":
        from side_by_side import maskrcnn_pipeline
        pipe = maskrcnn_pipeline(api, args.device, args.data, args.batch_size, args.threads, 0 if gpu else None)
    elif args.pipeline == "ssd_example":
        from side_by_side import ssd_example_pipeline
        pipe = ssd_example_pipeline(api, args.device, args.data, args.batch_size, args.threads,
                                    0 if gpu else None)
    else:
        from side_by_side import build_pipeline, decoder_arguments
        if args.pipeline == "aug":
            importlib.import_module("penstock.compat.dali.auto_aug.rand_augment")
        pipe = build_pipeline(api, args.pipeline, args.device, args.data, args.batch_size, args.threads,
                              decoder_arguments(args.decoder))
    pipe.build()
    synchronize = lambda: None  # noqa: E731
    if gpu:
        import torch
        synchronize = torch.cuda.synchronize
    from penstock.bench import _process_cpu_seconds, descendant_pids
    for _ in range(args.warmup):
        pipe.run()
    synchronize()
    before, began = pipe.stage_seconds(), time.perf_counter()
    cpu_before = _process_cpu_seconds(descendant_pids())
    for _ in range(args.batches):
        pipe.run()
    synchronize()
    elapsed, after = time.perf_counter() - began, pipe.stage_seconds()
    cores = (_process_cpu_seconds(descendant_pids()) - cpu_before) / elapsed
    print(f"{args.pipeline} on {args.device}{' ' + args.decoder if args.decoder else ''}: "
          f"{args.batches * args.batch_size / elapsed:,.0f} images/s, {elapsed / args.batches * 1000:.1f} ms per "
          f"batch of {args.batch_size}, {cores:.1f} CPU cores busy")
    spent = {stage: after[stage] - before.get(stage, 0.0) for stage in after}
    for stage in sorted(spent, key=spent.get, reverse=True):
        print(f"  {spent[stage] / args.batches * 1000:8.2f} ms/batch  {stage}")
    pipe.close()


if __name__ == "__main__":
    main()
