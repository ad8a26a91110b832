"""``penstock bench``: images/s of the ImageNet training and validation pipelines against peers run
in the same process (torchvision's DataLoader with PIL transforms), printed as a table with ratios."""
from __future__ import annotations

import json
import multiprocessing
import os
import resource
import time
from dataclasses import asdict, dataclass


from penstock.recipes import IMAGENET_MEAN, IMAGENET_STD, imagenet_train, imagenet_val


@dataclass
class Measurement:
    name: str
    pipeline: str
    images_per_second: float
    images: int
    seconds: float
    cpu_cores: float


def descendant_pids() -> list[int]:
    """This process's children, their children, and so on (worker processes of any library)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [os.getpid()]
    while pending:
        for child in children.get(pending.pop(), ()):
            found.append(child)
            pending.append(child)
    return found


def _process_cpu_seconds(pids=()) -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            pass
    return total


def time_batches(batches, count: int, warmup: int = 2, pids=lambda: ()) -> tuple[int, float, float]:
    """(images, seconds, cpu seconds) over ``count`` batches after ``warmup`` batches."""
    iterator = iter(batches)
    for _ in range(warmup):
        next(iterator)
    images = 0
    cpu_before, started = _process_cpu_seconds(pids()), time.perf_counter()
    for _ in range(count):
        batch = next(iterator)
        images += len(batch)
    seconds = time.perf_counter() - started
    return images, seconds, _process_cpu_seconds(pids()) - cpu_before


def penstock_batches(kind: str, data: str, batch_size: int, threads: int, device: str = "cpu",
                     worker_processes: bool = False):
    factory = imagenet_train if kind == "train" else imagenet_val
    pipe = factory(data, device=device, batch_size=batch_size, num_threads=threads,
                   device_id=None if device == "cpu" else 0, seed=7, prefetch_queue_depth=2,
                   worker_processes=worker_processes)
    pipe.build()
    try:
        while True:
            images, _ = pipe.run()
            yield images
    finally:
        pipe.close()


def torchvision_loader(kind: str, data: str, batch_size: int, workers: int):
    import torch
    from torchvision import datasets, transforms

    normalize = transforms.Normalize(mean=[m / 255 for m in IMAGENET_MEAN], std=[s / 255 for s in IMAGENET_STD])
    to_half = transforms.Lambda(lambda tensor: tensor.half())
    if kind == "train":
        transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                        transforms.ToTensor(), normalize, to_half])
    else:
        transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                        transforms.ToTensor(), normalize, to_half])
    dataset = datasets.ImageFolder(data, transform)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=(kind == "train"),
                                       num_workers=workers, persistent_workers=True, prefetch_factor=2,
                                       drop_last=True)


def _loop_forever(loader):
    while True:
        for images, _ in loader:
            yield images


def measure_torchvision(kind, data, batch_size, workers, count) -> Measurement:
    loader = torchvision_loader(kind, data, batch_size, workers)
    batches = _loop_forever(loader)
    worker_pids = lambda: [w.pid for w in getattr(getattr(loader, "_iterator", None), "_workers", [])]
    images, seconds, cpu = time_batches(batches, count, pids=worker_pids)
    batches.close()
    return Measurement("torchvision DataLoader (PIL)", kind, images / seconds, images, seconds, cpu / seconds)


def measure_penstock(kind, data, batch_size, threads, count, device="cpu", worker_processes=False) -> Measurement:
    batches = penstock_batches(kind, data, batch_size, threads, device, worker_processes)
    child_pids = lambda: [p.pid for p in multiprocessing.active_children() if p.name == "penstock-worker-process"]
    images, seconds, cpu = time_batches(batches, count, pids=child_pids)
    batches.close()
    runner = f"penstock ({device}{', worker processes' if worker_processes else ''})"
    return Measurement(runner, kind, images / seconds, images, seconds, cpu / seconds)


def format_table(results: list[Measurement], baseline_name: str = "torchvision DataLoader (PIL)") -> str:
    lines = ["| pipeline | runner | images/s | vs torchvision | CPU cores |", "|---|---|---|---|---|"]
    baselines = {m.pipeline: m.images_per_second for m in results if m.name == baseline_name}
    for m in results:
        base = baselines.get(m.pipeline)
        ratio = f"{m.images_per_second / base:.2f}x" if base else "-"
        lines.append(f"| {m.pipeline} | {m.name} | {m.images_per_second:,.0f} | {ratio} | {m.cpu_cores:.1f} |")
    return "\n".join(lines)


def run_bench(args) -> list[Measurement]:
    from penstock.demo import make_sample_dataset

    data = args.data or make_sample_dataset(os.path.join(args.work_dir, f"bench-data-{args.images}"), count=args.images)
    count_images = sum(len(files) for _, _, files in os.walk(data))
    batches = args.batches or max(1, count_images // args.batch_size)
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    results = []
    for kind in args.pipelines.split(","):
        for processes in (False, True):
            results.append(measure_penstock(kind, data, args.batch_size, args.threads, batches,
                                            worker_processes=processes))
            print(f"  {results[-1].name:32s} {kind:5s} {results[-1].images_per_second:9,.0f} images/s", flush=True)
        if "torchvision" in peers:
            try:
                results.append(measure_torchvision(kind, data, args.batch_size, args.threads, batches))
            except ImportError as error:
                print(f"  torchvision peer skipped: {error}")
                continue
            print(f"  {results[-1].name:32s} {kind:5s} {results[-1].images_per_second:9,.0f} images/s", flush=True)
    print(f"\n{count_images} images in {data}; batch {args.batch_size}; {args.threads} threads/workers; "
          f"{batches} timed batches after 2 warm-up batches\n")
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([asdict(m) for m in results], handle, indent=2)
    return results


__all__ = ["Measurement", "format_table", "measure_penstock", "measure_torchvision", "run_bench"]
