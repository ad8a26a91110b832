"""Soak test: the ResNet-50 training pipeline for a long time, watching for leaks.

usage: python benchmarks/soak.py [--data DIR] [--minutes 60] [--every 60] [--device cpu|gpu]
                                 [--worker-processes] [--threads N] [--batch-size N] [--json FILE]

Every ``--every`` seconds it prints (and writes as a JSON line) the memory of the process and its
worker processes (RSS from /proc), its open file descriptors, its threads and, on the GPU, the
memory PyTorch has allocated and reserved; at the end, the first and last figures and whether each
stayed flat within 5% (the first sample is taken after a minute of warm-up at most, once the
buffers and worker processes exist). Without --data it makes a small folder-per-class data set.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from penstock.plugin.pytorch import ClassificationIterator  # noqa: E402
from penstock.recipes import imagenet_train  # noqa: E402


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def figures(gpu: bool) -> dict:
    pid = os.getpid()
    children = _children(pid)
    sample = {"rss_mib": _rss_kib(pid) / 1024, "workers_rss_mib": sum(_rss_kib(c) for c in children) / 1024,
              "worker_processes": len(children), "open_fds": len(os.listdir("/proc/self/fd")),
              "threads": len(os.listdir("/proc/self/task"))}
    if gpu:
        import torch
        sample["gpu_allocated_mib"] = torch.cuda.memory_allocated() / 2**20
        sample["gpu_reserved_mib"] = torch.cuda.memory_reserved() / 2**20
    return sample


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data")
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--every", type=float, default=60, help="seconds between samples")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--worker-processes", action="store_true")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--images", type=int, default=512, help="size of the data set made without --data")
    parser.add_argument("--json", help="also write every sample here, one JSON object per line")
    args = parser.parse_args()

    data = args.data
    if data is None:
        from penstock.demo import make_sample_dataset
        data = make_sample_dataset(os.path.join(tempfile.gettempdir(), f"penstock-soak-{args.images}"),
                                   count=args.images)
    gpu = args.device == "gpu"
    pipe = imagenet_train(data, device=args.device, batch_size=args.batch_size, num_threads=args.threads,
                          device_id=0 if gpu else None, seed=1,
                          worker_processes=True if args.worker_processes else None)  # None: penstock's default
    loader = ClassificationIterator(pipe, reader_name="Reader", auto_reset=True)
    out = open(args.json, "w") if args.json else None
    started = time.monotonic()
    end = started + args.minutes * 60
    next_sample = started + min(args.every, 60)
    samples, images, epochs = [], 0, 0
    print(f"soak: {args.device}, {'worker processes' if args.worker_processes else 'default workers'} x {args.threads}, "
          f"batch {args.batch_size}, {args.minutes:g} min, a sample every {args.every:g} s", flush=True)
    print("| minute | images | images/s | RSS MiB | workers' RSS MiB | fds | threads |"
          + (" GPU alloc MiB | GPU reserved MiB |" if gpu else ""), flush=True)
    print("|---|---|---|---|---|---|---|" + ("---|---|" if gpu else ""), flush=True)
    last_images, last_time = 0, started
    while time.monotonic() < end:
        for batch in loader:
            images += len(batch[0]["label"])
            now = time.monotonic()
            if now >= next_sample:
                sample = {"minute": (now - started) / 60, "images": images,
                          "images_per_second": (images - last_images) / (now - last_time), **figures(gpu)}
                last_images, last_time = images, now
                samples.append(sample)
                print(f"| {sample['minute']:.1f} | {images} | {sample['images_per_second']:,.0f} | "
                      f"{sample['rss_mib']:.0f} | {sample['workers_rss_mib']:.0f} | {sample['open_fds']} | "
                      f"{sample['threads']} |" + (f" {sample['gpu_allocated_mib']:.0f} | {sample['gpu_reserved_mib']:.0f} |"
                                                  if gpu else ""), flush=True)
                if out:
                    out.write(json.dumps(sample) + "\n")
                    out.flush()
                next_sample = now + args.every
            if now >= end:
                break
        epochs += 1
    pipe.close()
    if len(samples) < 2:
        print("soak: too short for two samples; give more --minutes or a smaller --every")
        return
    first, last = samples[0], samples[-1]
    print(f"\nsoak: {images} images over {epochs} epochs in {(time.monotonic() - started) / 60:.1f} min")
    flat = True
    for key in ("rss_mib", "workers_rss_mib", "open_fds", "threads", "gpu_allocated_mib", "gpu_reserved_mib"):
        if key not in first:
            continue
        growth = (last[key] - first[key]) / first[key] if first[key] else 0.0
        ok = growth <= 0.05
        flat &= ok
        print(f"  {key}: {first[key]:.0f} -> {last[key]:.0f} ({growth:+.1%}) {'flat' if ok else 'GREW'}")
    print("soak: flat within 5%" if flat else "soak: something grew by more than 5%")


if __name__ == "__main__":
    main()
