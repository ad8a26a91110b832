"""CPU pipelines against torchvision's DataLoader, in one run, plus thread scaling of penstock.

usage: python benchmarks/bench_cpu.py --data DIR [--batch-size 256] [--threads 16] [--scaling 1,2,4,8,16]
Prints a table with ratios (the same as `penstock bench`), then images/s per thread count.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from penstock.bench import format_table, measure_penstock, run_bench  # noqa: E402
from penstock.cli import _default_threads  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=_default_threads())
    parser.add_argument("--batches", type=int, default=0)
    parser.add_argument("--peers", default="torchvision")
    parser.add_argument("--pipelines", default="train,val")
    parser.add_argument("--scaling", default="", help="thread counts for a scaling run of the training pipeline")
    parser.add_argument("--scaling-batches", type=int, default=8)
    parser.add_argument("--scaling-processes", action="store_true", help="scale worker processes, not threads")
    parser.add_argument("--json")
    args = parser.parse_args()
    args.images, args.work_dir, args.device = 0, None, "cpu"
    args.peers = [peer for peer in args.peers.split(",") if peer and peer != "none"]
    args.pipelines = args.pipelines.split(",")
    results = run_bench(args)
    scaling = []
    for threads in [int(t) for t in args.scaling.split(",") if t]:
        m = measure_penstock("train", args.data, args.batch_size, threads, args.scaling_batches,
                             worker_processes=args.scaling_processes)
        m.name = f"penstock (cpu), {threads} threads"
        scaling.append(m)
        print(f"  scaling: {threads:3d} threads {m.images_per_second:9,.0f} images/s  "
              f"{m.images_per_second / threads:7,.0f} per thread  {m.cpu_cores:.1f} cores busy", flush=True)
    if scaling:
        print("\n" + format_table(scaling))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([vars(m) for m in results + scaling], handle, indent=2)


if __name__ == "__main__":
    main()
