"""``penstock bench``: images/s of the ImageNet training and validation pipelines against peers run
in the same process (torchvision's DataLoader with PIL transforms; on a GPU also NVIDIA DALI when it
is installed), printed as a table with ratios."""
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


def memory_kib(pid: int, field: str = "Pss") -> int:
    """A process's memory in KiB, 0 once it is gone: "Pss" (its share of what it shares with other
    processes: the worker processes' rings counted once) or "Rss" (every page it maps)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


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


def time_batches(batches, count: int, warmup: int = 2, pids=lambda: (), finish=lambda: None) -> tuple[int, float, float]:
    """(images, seconds, cpu seconds) over ``count`` batches after ``warmup`` batches; ``finish``
    waits for work still queued (the GPU's) before the clock stops."""
    iterator = iter(batches)
    for _ in range(warmup):
        next(iterator)
    finish()
    images = 0
    cpu_before, started = _process_cpu_seconds(pids()), time.perf_counter()
    for _ in range(count):
        batch = next(iterator)
        images += len(batch)
    finish()
    seconds = time.perf_counter() - started
    return images, seconds, _process_cpu_seconds(pids()) - cpu_before


def penstock_batches(kind: str, data: str, batch_size: int, threads: int, device: str = "cpu",
                     worker_processes: bool | None = False):
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


LOADER_PREFETCH = 2  # batches each DataLoader worker prepares ahead (its prefetch_factor)


def loader_warmup(workers: int) -> int:
    """Warm-up batches for a DataLoader peer: its workers start together and hand over their first
    ``workers * LOADER_PREFETCH`` batches in a burst; timed from there they would flatter it."""
    return 2 + workers * LOADER_PREFETCH


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
                                       num_workers=workers, persistent_workers=True, prefetch_factor=LOADER_PREFETCH,
                                       drop_last=True)


def _loop_forever(loader, to_gpu: bool = False):
    while True:
        for images, _ in loader:
            yield images.cuda() if to_gpu else images


def dali_batches(kind: str, data: str, batch_size: int, threads: int):
    """NVIDIA DALI's ResNet-50 training or validation pipeline (the same steps as penstock's
    recipes), as CUDA tensors; ImportError where DALI is not installed."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0, seed=7)
    def train():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                               random_aspect_ratio=(3 / 4, 4 / 3), random_area=(0.08, 1.0),
                                               num_attempts=100)
        images = fn.resize(images, device="gpu", resize_x=224, resize_y=224, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, device="gpu", dtype=types.FLOAT16, output_layout="CHW",
                                          crop=(224, 224), mean=IMAGENET_MEAN, std=IMAGENET_STD,
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0, seed=7)
    def val():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=False, name="Reader")
        images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
        images = fn.resize(images, device="gpu", resize_shorter=256, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, device="gpu", dtype=types.FLOAT16, output_layout="CHW",
                                          crop=(224, 224), mean=IMAGENET_MEAN, std=IMAGENET_STD)
        return images, labels

    pipe = (train if kind == "train" else val)()
    pipe.build()
    iterator = DALIGenericIterator([pipe], ["data", "label"], reader_name="Reader", auto_reset=True)
    while True:
        for step in iterator:
            yield step[0]["data"]


def _wait_for(device: str):
    """What time_batches calls to wait for work still queued on ``device``."""
    if device != "gpu":
        return lambda: None
    import torch
    return torch.cuda.synchronize


TORCHVISION = "torchvision DataLoader (PIL)"
TORCHVISION_TO_GPU = "torchvision DataLoader (PIL), copied to the GPU"


def measure_torchvision(kind, data, batch_size, workers, count, device="cpu") -> Measurement:
    loader = torchvision_loader(kind, data, batch_size, workers)
    batches = _loop_forever(loader, to_gpu=device == "gpu")
    worker_pids = lambda: [w.pid for w in getattr(getattr(loader, "_iterator", None), "_workers", [])]
    images, seconds, cpu = time_batches(batches, count, warmup=loader_warmup(workers), pids=worker_pids,
                                        finish=_wait_for(device))
    batches.close()
    return Measurement(TORCHVISION_TO_GPU if device == "gpu" else TORCHVISION, kind, images / seconds, images,
                       seconds, cpu / seconds)


def measure_dali(kind, data, batch_size, threads, count) -> Measurement:
    batches = dali_batches(kind, data, batch_size, threads)
    images, seconds, cpu = time_batches(batches, count, finish=_wait_for("gpu"))
    batches.close()
    return Measurement("NVIDIA DALI", kind, images / seconds, images, seconds, cpu / seconds)


def measure_penstock(kind, data, batch_size, threads, count, device="cpu", worker_processes=False) -> Measurement:
    batches = penstock_batches(kind, data, batch_size, threads, device, worker_processes)
    child_pids = lambda: [p.pid for p in multiprocessing.active_children() if p.name == "penstock-worker-process"]
    images, seconds, cpu = time_batches(batches, count, pids=child_pids,
                                        finish=_wait_for(device))
    batches.close()
    runner = f"penstock ({device}{', worker processes' if worker_processes else ''})"
    return Measurement(runner, kind, images / seconds, images, seconds, cpu / seconds)


def format_table(results: list[Measurement], baseline_name: str = TORCHVISION) -> str:
    lines = ["| pipeline | runner | images/s | vs torchvision | CPU cores |", "|---|---|---|---|---|"]
    baselines = {m.pipeline: m.images_per_second for m in results if m.name == baseline_name}
    for m in results:
        base = baselines.get(m.pipeline)
        ratio = f"{m.images_per_second / base:.2f}x" if base else "-"
        lines.append(f"| {m.pipeline} | {m.name} | {m.images_per_second:,.0f} | {ratio} | {m.cpu_cores:.1f} |")
    return "\n".join(lines)


def run_bench(args) -> list[Measurement]:
    from penstock.demo import default_device, make_sample_dataset

    device = args.device or default_device()
    data = args.data or make_sample_dataset(os.path.join(args.work_dir, f"bench-data-{args.images}"), count=args.images)
    count_images = sum(len(files) for _, _, files in os.walk(data))
    batches = args.batches or max(1, count_images // args.batch_size)
    peers = args.peers  # names checked by the command line
    # on the CPU, worker threads and worker processes; on the GPU, the pipeline's default (processes)
    penstock_runs = (False, True) if device == "cpu" else (None,)
    peer_runs = {"torchvision": lambda kind: measure_torchvision(kind, data, args.batch_size, args.threads,
                                                                 batches, device),
                 "dali": lambda kind: measure_dali(kind, data, args.batch_size, args.threads, batches)}
    results = []
    for kind in args.pipelines:
        for processes in penstock_runs:
            results.append(measure_penstock(kind, data, args.batch_size, args.threads, batches, device,
                                            worker_processes=processes))
            print(f"  {results[-1].name:32s} {kind:5s} {results[-1].images_per_second:9,.0f} images/s", flush=True)
        for peer in peers:
            try:
                results.append(peer_runs[peer](kind))
            except ImportError as error:
                print(f"  {peer} peer skipped: {error}")
                continue
            print(f"  {results[-1].name:32s} {kind:5s} {results[-1].images_per_second:9,.0f} images/s", flush=True)
    print(f"\n{count_images} images in {data}; batch {args.batch_size}; {args.threads} threads/workers; "
          f"{batches} timed batches after 2 warm-up batches ({loader_warmup(args.threads)} for the DataLoader, "
          f"whose workers deliver their first batches in a burst); penstock on the {device.upper()}\n")
    print(format_table(results, TORCHVISION_TO_GPU if device == "gpu" else TORCHVISION))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([asdict(m) for m in results], handle, indent=2)
    return results


__all__ = ["Measurement", "dali_batches", "descendant_pids", "format_table", "measure_dali", "measure_penstock",
           "measure_torchvision", "memory_kib", "run_bench"]
