"""GPU pipelines against their peers, in one run: penstock (mixed decode + fused GPU kernel),
NVIDIA DALI (when importable), torchvision's nvJPEG decode with per-image GPU transforms, and
torchvision's DataLoader with PIL transforms.

usage: python benchmarks/bench_gpu.py --data DIR [--batch-size 256] [--threads 16] [--batches 32]
Prints a table (images/s, ratio to DALI, peak GPU memory, CPU cores busy, JPEG engine utilization)
and writes the figures as JSON with --json.
"""
import argparse
import contextlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from penstock.bench import (LOADER_PREFETCH, _process_cpu_seconds, dali_batches, descendant_pids,  # noqa: E402
                            loader_warmup, torchvision_loader)
from penstock.recipes import IMAGENET_MEAN, IMAGENET_STD, imagenet_train, imagenet_val  # noqa: E402


MONITOR = True


class NoMonitor:
    peak_memory = 0
    jpeg_utilization = float("nan")


_MONITOR_SCRIPT = r"""
import json, select, sys
import pynvml
pid, device_index, period = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
peak, samples = 0, []
print("ready", flush=True)
while not select.select([sys.stdin], [], [], period)[0]:  # until the parent closes stdin
    try:
        used = sum(p.usedGpuMemory or 0 for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == pid)
        peak = max(peak, used)
        samples.append(pynvml.nvmlDeviceGetJpgUtilization(handle)[0])
    except pynvml.NVMLError:
        pass
print(json.dumps([peak, samples]))
"""


class DeviceMonitor:
    """Samples this process's GPU memory and the JPEG engines' utilization through NVML, from a
    separate process: a sampling thread here would take turns for the interpreter lock with the
    runners' own threads, and slow the ones that use Python threads."""

    def __init__(self, device_index=0, period=0.05):
        self._arguments = [str(os.getpid()), str(device_index), str(period)]
        self.peak_memory = 0
        self.jpeg_samples = []

    def __enter__(self):
        import subprocess
        self._process = subprocess.Popen([sys.executable, "-c", _MONITOR_SCRIPT, *self._arguments],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self._process.pid
        self._process.stdout.readline()  # sampling has started (NVML is loaded): the run may begin
        return self

    def __exit__(self, *exc):
        self._process.stdin.close()
        output = self._process.stdout.read()
        self._process.wait()
        if output.strip():
            self.peak_memory, self.jpeg_samples = json.loads(output)

    @property
    def jpeg_utilization(self):
        return sum(self.jpeg_samples) / len(self.jpeg_samples) if self.jpeg_samples else float("nan")


def measure(name, kind, make_batches, count, warmup=3):
    """images/s over ``count`` batches after ``warmup``; each batch is a CUDA tensor."""
    batches = make_batches()
    for _ in range(warmup):
        next(batches)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    images = 0
    with (DeviceMonitor() if MONITOR else contextlib.nullcontext(NoMonitor())) as monitor:
        # worker processes count as CPU used (DataLoader's, penstock's); the monitor does not
        workers = [pid for pid in descendant_pids() if pid != getattr(monitor, "pid", None)]
        cpu_before, started = _process_cpu_seconds(workers), time.perf_counter()
        for _ in range(count):
            tensor = next(batches)
            images += tensor.shape[0]
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        cpu = _process_cpu_seconds(workers) - cpu_before
    batches.close()
    result = {"name": name, "pipeline": kind, "images_per_second": images / seconds, "images": images,
              "seconds": seconds, "cpu_cores": cpu / seconds, "peak_gpu_memory_gib": monitor.peak_memory / 2**30,
              "jpeg_engine_utilization": monitor.jpeg_utilization}
    print(f"  {name:34s} {kind:5s} {result['images_per_second']:9,.0f} images/s  "
          f"{result['peak_gpu_memory_gib']:5.2f} GiB  {result['cpu_cores']:4.1f} cores  "
          f"JPEG engines {result['jpeg_engine_utilization']:4.0f}%", flush=True)
    return result


STAGES = {}


HW_DECODER_LOAD = None  # the decoders' default
CPU_DECODER_LOAD = None


def penstock_batches(kind, data, batch_size, threads, worker_processes=None, warmup=3):
    factory = imagenet_train if kind == "train" else imagenet_val
    pipe = factory(data, device="gpu", batch_size=batch_size, num_threads=threads, device_id=0, seed=7,
                   worker_processes=worker_processes, hw_decoder_load=HW_DECODER_LOAD,
                   cpu_decoder_load=CPU_DECODER_LOAD)
    pipe.build()

    def stage_seconds():  # the executor's stages and the decoder's own split of its time
        seconds = dict(pipe.stage_seconds())
        for impl in pipe._impls.values():
            for part, value in (getattr(getattr(impl, "_engine", None), "seconds", None) or {}).items():
                seconds[f"  of which {part}"] = value
        return seconds

    batches, before = 0, {}
    try:
        while True:
            images, _ = pipe.run()
            batches += 1
            if batches == warmup:  # stage times leave out the warm-up (decoder creation, kernel compiles)
                before = stage_seconds()
            yield images.as_tensor()
    finally:
        timed = max(batches - warmup, 1)
        STAGES[kind] = {stage: (seconds - before.get(stage, 0.0)) / timed * 1000
                        for stage, seconds in stage_seconds().items()}
        for impl in pipe._impls.values():  # batches nvJPEG's hardware backend refused would go slower
            engine = getattr(impl, "_engine", None)
            if engine is not None:
                print(f"  penstock {kind}: {engine.decoded_on_gpu:,} images decoded on the GPU, "
                      f"{engine.decoded_on_cpu:,} on the CPU ({engine.copied_in_place:,} copied from pinned rings), "
                      f"{engine.refused_by_hardware:,} refused by "
                      f"the hardware backend (decoded again through nvImageCodec)")
        pipe.close()


def profile_gpu_stage(path):
    """Profiles the executor's GPU stage (one thread) with cProfile, for --profile."""
    import cProfile
    import pstats

    from penstock.executor.gpu_stage import GpuStage
    profiler = cProfile.Profile()
    originals = {name: getattr(GpuStage, name) for name in ("_start_batch", "_finish_batch")}

    def profiled(original):
        return lambda self, *args: profiler.runcall(original, self, *args)

    for name, original in originals.items():
        setattr(GpuStage, name, profiled(original))

    def report():
        for name, original in originals.items():
            setattr(GpuStage, name, original)
        with open(path, "w") as handle:
            pstats.Stats(profiler, stream=handle).sort_stats("cumulative").print_stats(40)
    return report


def torchvision_nvjpeg_batches(kind, data, batch_size, threads):
    """File bytes from DataLoader workers, batched nvJPEG decode, then per-image GPU transforms."""
    import numpy as np
    import torchvision
    from torchvision.io import decode_jpeg
    from torchvision.transforms import v2

    class Files(torch.utils.data.Dataset):
        def __init__(self):
            self.items = torchvision.datasets.ImageFolder(data).samples

        def __len__(self):
            return len(self.items)

        def __getitem__(self, index):
            path, label = self.items[index]
            return np.fromfile(path, dtype=np.uint8), label  # numpy: no file descriptors between processes

    loader = torch.utils.data.DataLoader(Files(), batch_size=batch_size, shuffle=kind == "train", num_workers=threads,
                                         collate_fn=lambda batch: batch, persistent_workers=True, drop_last=True,
                                         prefetch_factor=LOADER_PREFETCH)
    if kind == "train":
        transform = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
    else:
        transform = v2.Compose([v2.Resize(256, antialias=True), v2.CenterCrop(224)])
    mean = torch.tensor(IMAGENET_MEAN, device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device="cuda").view(1, 3, 1, 1)
    while True:
        for batch in loader:
            decoded = decode_jpeg([torch.from_numpy(data) for data, _ in batch], device="cuda")
            images = torch.stack([transform(image) for image in decoded]).float()
            yield ((images - mean) / std).half()


def dataloader_batches(kind, data, batch_size, threads):
    loader = torchvision_loader(kind, data, batch_size, threads)
    while True:
        for images, _ in loader:
            yield images.cuda(non_blocking=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--batches", type=int, default=32)
    parser.add_argument("--runners", default="penstock,dali,torchvision-nvjpeg,dataloader")
    parser.add_argument("--pipelines", default="train,val")
    parser.add_argument("--json")
    parser.add_argument("--profile", help="write a cProfile report of penstock's GPU stage here")
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval for this run (seconds)")
    parser.add_argument("--hw-decoder-load", type=float,
                        help="penstock's hw_decoder_load: the share of each batch for the hardware JPEG engines")
    parser.add_argument("--cpu-decoder-load", type=float,
                        help="penstock's cpu_decoder_load: the share of each batch decoded by the CPU workers")
    parser.add_argument("--no-monitor", action="store_true", help="no NVML sampling (it slows nvImageCodec's decode)")
    args = parser.parse_args()
    global MONITOR, HW_DECODER_LOAD, CPU_DECODER_LOAD
    MONITOR = not args.no_monitor
    HW_DECODER_LOAD, CPU_DECODER_LOAD = args.hw_decoder_load, args.cpu_decoder_load
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    report_profile = profile_gpu_stage(args.profile) if args.profile else None
    runners = {"penstock": ("penstock (mixed + GPU)", penstock_batches),
               "penstock-threads": ("penstock (mixed + GPU), worker threads",
                                    lambda *a: penstock_batches(*a, worker_processes=False)),
               "dali": ("NVIDIA DALI", dali_batches),
               "torchvision-nvjpeg": ("torchvision nvJPEG + GPU transforms", torchvision_nvjpeg_batches),
               "dataloader": ("torchvision DataLoader (PIL)", dataloader_batches)}
    results = []
    for kind in args.pipelines.split(","):
        for key in args.runners.split(","):
            name, make = runners[key]
            warmup = loader_warmup(args.threads) if key in ("torchvision-nvjpeg", "dataloader") else 3
            try:
                results.append(measure(name, kind, lambda: make(kind, args.data, args.batch_size, args.threads),
                                       args.batches, warmup))
            except ImportError as error:
                print(f"  {name}: skipped ({error})")
    print(f"\n{args.data}; batch {args.batch_size}; {args.threads} threads/workers; {args.batches} timed batches "
          f"after 3 warm-up batches ({loader_warmup(args.threads)} for the DataLoader-fed peers); FP16 CHW output; "
          f"{torch.cuda.get_device_name()}\n")
    print("| pipeline | runner | images/s | vs DALI | peak GPU memory | CPU cores | JPEG engines busy |")
    print("|---|---|---|---|---|---|---|")
    dali = {r["pipeline"]: r["images_per_second"] for r in results if r["name"] == "NVIDIA DALI"}
    for r in results:
        ratio = f"{r['images_per_second'] / dali[r['pipeline']]:.2f}x" if r["pipeline"] in dali else "-"
        print(f"| {r['pipeline']} | {r['name']} | {r['images_per_second']:,.0f} | {ratio} | "
              f"{r['peak_gpu_memory_gib']:.2f} GiB | {r['cpu_cores']:.1f} | {r['jpeg_engine_utilization']:.0f}% |")
    for kind, stages in STAGES.items():
        print(f"\npenstock {kind}: milliseconds per batch in each stage (CPU stages summed over threads)")
        for stage, milliseconds in sorted(stages.items(), key=lambda item: -item[1]):
            print(f"  {milliseconds:8.2f}  {stage}")
    if report_profile:
        report_profile()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"results": results, "stages_ms_per_batch": STAGES}, handle, indent=2)


if __name__ == "__main__":
    main()
