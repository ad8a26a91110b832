"""Soak test: the ResNet-50 training pipeline for a long time, watching for leaks.

usage: python benchmarks/soak.py [--data DIR] [--minutes 60] [--every 60] [--device cpu|gpu]
                                 [--worker-processes] [--threads N] [--batch-size N] [--json FILE]

Every ``--every`` seconds it prints (and writes as a JSON line) the memory of the process and its
worker processes (RSS and PSS from /proc: PSS counts the memory they share, the rings, once), its
open file descriptors, its threads and, on the GPU, the memory PyTorch has allocated and reserved;
at the end, the largest figure of the first and of the last quarter of the samples and whether it
stayed flat within 5% (the first sample is taken after a minute of warm-up at most, once the
buffers and worker processes exist). Every epoch
is checked to deliver each file exactly once (the samples' source_info, the last batch partial).
Without --data it makes a small folder-per-class data set.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from penstock import fn, pipeline_def  # noqa: E402
from penstock.bench import descendant_pids, memory_kib  # noqa: E402
from penstock.plugin.pytorch import GenericIterator, LastBatchPolicy  # noqa: E402
from penstock.recipes import imagenet_train  # noqa: E402


@pipeline_def
def soak_pipeline(data_dir: str, device: str):
    """The training recipe, plus where each sample came from."""
    images, labels = imagenet_train.__wrapped__(data_dir, device=device)
    return images, labels, fn.get_property(images, key="source_info")


def figures(gpu: bool) -> dict:
    pid = os.getpid()
    children = descendant_pids()  # whichever thread started them
    sample = {"rss_mib": memory_kib(pid, "Rss") / 1024,
              "workers_rss_mib": sum(memory_kib(c, "Rss") for c in children) / 1024,
              "pss_mib": sum(memory_kib(p) for p in (pid, *children)) / 1024,
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
    pipe = soak_pipeline(data, args.device, batch_size=args.batch_size, num_threads=args.threads,
                         device_id=0 if gpu else None, seed=1,
                         worker_processes=True if args.worker_processes else None)  # None: penstock's default
    loader = GenericIterator(pipe, ["data", "label", "source"], reader_name="Reader", auto_reset=True,
                                 last_batch_policy=LastBatchPolicy.PARTIAL)
    expected = sorted(os.path.join(folder, name) for folder, _, names in os.walk(data) for name in names
                      if not name.startswith("."))
    wrong_epochs = 0
    out = open(args.json, "w") if args.json else None
    started = time.monotonic()
    end = started + args.minutes * 60
    next_sample = started + min(args.every, 60)
    samples, images, epochs = [], 0, 0
    print(f"soak: {args.device}, {'worker processes' if args.worker_processes else 'default workers'} x {args.threads}, "
          f"batch {args.batch_size}, {args.minutes:g} min, a sample every {args.every:g} s", flush=True)
    print("| minute | images | images/s | RSS MiB | workers' RSS MiB | PSS MiB | fds | threads |"
          + (" GPU alloc MiB | GPU reserved MiB |" if gpu else ""), flush=True)
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if gpu else ""), flush=True)
    last_images, last_time = 0, started
    while time.monotonic() < end:
        delivered = []
        for batch in loader:
            images += len(batch[0]["label"])
            delivered += [bytes(row[row != 0].tolist()).decode() for row in batch[0]["source"].cpu().numpy()]
            now = time.monotonic()
            if now >= next_sample:
                sample = {"minute": (now - started) / 60, "images": images,
                          "images_per_second": (images - last_images) / (now - last_time), **figures(gpu)}
                last_images, last_time = images, now
                samples.append(sample)
                print(f"| {sample['minute']:.1f} | {images} | {sample['images_per_second']:,.0f} | "
                      f"{sample['rss_mib']:.0f} | {sample['workers_rss_mib']:.0f} | {sample['pss_mib']:.0f} | "
                      f"{sample['open_fds']} | "
                      f"{sample['threads']} |" + (f" {sample['gpu_allocated_mib']:.0f} | {sample['gpu_reserved_mib']:.0f} |"
                                                  if gpu else ""), flush=True)
                if out:
                    out.write(json.dumps(sample) + "\n")
                    out.flush()
                next_sample = now + args.every
            if now >= end:
                break
        else:  # a whole epoch: every file exactly once
            epochs += 1
            if sorted(delivered) != expected:
                wrong_epochs += 1
                print(f"soak: epoch {epochs} delivered {len(delivered)} samples, {len(set(delivered))} files, "
                      f"of {len(expected)}", flush=True)
    pipe.close()
    if len(samples) < 2:
        print("soak: too short for two samples; give more --minutes or a smaller --every")
        return
    # the largest figure of the first quarter against that of the last: PSS moves with what the
    # workers and the process share at the moment of the sample, up and down, all along
    quarter = max(1, len(samples) // 4)
    early, late = samples[:quarter], samples[-quarter:]
    print(f"\nsoak: {images} images over {epochs} whole epochs in {(time.monotonic() - started) / 60:.1f} min; "
          f"{epochs - wrong_epochs} of them delivered every file exactly once")
    flat = wrong_epochs == 0
    for key in ("rss_mib", "workers_rss_mib", "pss_mib", "open_fds", "threads", "gpu_allocated_mib", "gpu_reserved_mib"):
        if key not in samples[0]:
            continue
        first, last = max(s[key] for s in early), max(s[key] for s in late)
        growth = (last - first) / first if first else 0.0
        ok = growth <= 0.05
        flat &= ok
        print(f"  {key}: {first:.0f} -> {last:.0f} ({growth:+.1%}; lowest {min(s[key] for s in samples):.0f}, "
              f"highest {max(s[key] for s in samples):.0f}) {'flat' if ok else 'GREW'}")
    print("soak: flat within 5%, every epoch exactly once" if flat else "soak: something grew by more than 5%, "
          "or an epoch did not deliver every file exactly once")


if __name__ == "__main__":
    main()
