"""Scaling over the GPUs of one host: one ResNet-50 training pipeline per GPU, one process per GPU
started by torchrun, each rank feeding a synchronous step of a small DistributedDataParallel model,
for penstock and NVIDIA DALI (when importable) in the same run.

    python benchmarks/scaling.py --data DIR [--gpus 1,2] [--runners penstock,dali] [--steps 300]
        [--threads default,16] [--json FILE]

A runner may carry decoder settings, as in side_by_side.py: ``penstock:cpu_decoder_load=0``.

The pipeline is written once, against DALI's API: penstock runs it through penstock.compat.dali
(its readers take their shard from the process group), DALI through nvidia.dali (shards given
explicitly). Each configuration (runner, GPUs, CPU threads per rank) runs in its own torchrun job;
rank 0 gathers every rank's figures. Reported: images/s per GPU and in total, scaling efficiency
(total at N / (N x total at 1)), CPU cores busy (all ranks and their worker processes), GPU memory
per rank (NVML's reading of the process), time from the pipeline's creation to the first step,
steps per epoch on each rank, and, for penstock, a check that the ranks together deliver the data
set exactly once per epoch (file names gathered from every rank). ``--threads default`` is the
pipeline's own choice (penstock: the host's cores divided among the ranks).

``--device cpu`` runs the same on CPU pipelines with gloo (the tests run it small).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from side_by_side import decoder_arguments  # this folder: the script's own

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

# NVLink multicast stays off (a program using it can put a shared host's GPUs out of service)
SAFE_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


# ---- one rank ----------------------------------------------------------------------------------
def training_pipeline(api, data, batch_size, threads, device_id, seed, crop, shard, prefetch=2, decoder_args=None):
    """The ResNet-50 training pipeline, written against DALI's API (``api``: nvidia.dali or
    penstock.compat.dali); ``decoder_args``: a runner's settings for the decoder."""
    fn, types = api.fn, api.types
    gpu = device_id is not None

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=seed,
                      prefetch_queue_depth=prefetch)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, pad_last_batch=True, name="Reader",
                                        **shard)
        images = fn.decoders.image_random_crop(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB,
                                               random_aspect_ratio=[0.75, 4 / 3], random_area=[0.08, 1.0],
                                               num_attempts=100, **(decoder_args or {}))
        images = fn.resize(images, resize_x=crop, resize_y=crop, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16 if gpu else types.FLOAT, output_layout="CHW",
                                          crop=(crop, crop), mean=MEAN, std=STD,
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels.gpu() if gpu else labels
    return pipe()


def names_pipeline(data, batch_size):
    """This rank's shard of the file names, one epoch (penstock: the exactly-once check)."""
    from penstock import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data, random_shuffle=True, pad_last_batch=True, name="Reader")
        return fn.get_property(jpegs, key="source_info")
    return pipe()


def run_rank(args) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    started = time.perf_counter()
    gpu = args.device == "gpu"
    dist.init_process_group("nccl" if gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.pin:
        os.sched_setaffinity(0, _rank_cores(local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    if gpu:
        torch.cuda.set_device(local_rank)
        if args.loop == "side-stream":  # the training step on a stream of its own, not CUDA's legacy default one
            torch.cuda.set_stream(torch.cuda.Stream())
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    library, _, settings = args.runner.partition(":")  # penstock:cpu_decoder_load=0: the decoder's settings
    if library == "dali":
        import nvidia.dali as api
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
        shard = {"shard_id": rank, "num_shards": world}
    else:
        import penstock.compat.dali as api
        from penstock.compat.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
        shard = {}  # from the process group
    threads = None if args.threads == "default" else int(args.threads)
    if threads is None and library == "dali":
        threads = max(1, (os.cpu_count() or 1) // world)  # DALI needs a number: its examples' even split
    created = time.perf_counter()
    pipe = training_pipeline(api, args.data, args.batch_size, threads, local_rank if gpu else None, 12 + rank,
                             args.crop, shard, args.prefetch, decoder_arguments(settings))
    pipe.build()
    iterator = DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                          auto_reset=True)
    classes = len([entry for entry in os.scandir(args.data) if entry.is_dir()])
    model = nn.Sequential(nn.Conv2d(3, 32, 7, stride=4, padding=3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, classes)).to(device)
    if args.loop != "local-step":  # local-step: each rank's own model, no gradient all-reduce between the ranks
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if gpu else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(batch):
        if args.loop == "iterate":  # the pipeline alone: the batch's images are used once, on its device
            return batch[0]["data"].view(-1)[:1].float()
        if args.loop in ("hold-lock", "sleep"):  # a step of --step-ms that holds the interpreter lock, or not
            until = time.perf_counter() + args.step_ms / 1e3
            if args.loop == "sleep":
                time.sleep(args.step_ms / 1e3)
            while time.perf_counter() < until:
                pass
            return batch[0]["data"].view(-1)[:1].float()
        images = batch[0]["data"].float()
        labels = batch[0]["label"].to(device).long().view(-1)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # the gradients' all-reduce: every rank waits for the slowest
        optimizer.step()
        return loss

    def batches():
        while True:
            yield from iterator

    source = batches()
    step(next(source))
    if gpu:
        torch.cuda.synchronize()
    first_step = time.perf_counter() - created
    for _ in range(args.warmup):
        step(next(source))
    if gpu:
        torch.cuda.synchronize()
    dist.barrier()
    from penstock.bench import _process_cpu_seconds, descendant_pids
    stages_before = pipe.stage_seconds() if library == "penstock" else {}
    cpu_before, begun = _process_cpu_seconds(descendant_pids()), time.perf_counter()
    waited = 0.0  # in next(): the step waiting for its batch
    for _ in range(args.steps):
        asked = time.perf_counter()
        batch = next(source)
        waited += time.perf_counter() - asked
        step(batch)
    if gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - begun
    cpu_seconds = _process_cpu_seconds(descendant_pids()) - cpu_before
    memory = _gpu_memory(local_rank) if gpu else 0
    steps_per_epoch = len(iterator)
    figures = {"rank": rank, "images": args.steps * args.batch_size, "seconds": seconds, "cpu_seconds": cpu_seconds,
               "gpu_memory_gib": memory / 2**30, "first_step_s": first_step, "setup_s": created - started,
               "steps_per_epoch": steps_per_epoch, "threads": getattr(pipe, "num_threads", threads),
               "batch_wait_ms": waited / args.steps * 1e3}
    if stages_before:  # penstock's stage times per step, for the JSON's details
        stages = pipe.stage_seconds()
        figures["stage_ms"] = {name: round((spent - stages_before.get(name, 0.0)) / args.steps * 1e3, 3)
                               for name, spent in stages.items() if spent > stages_before.get(name, 0.0)}
    del iterator
    pipe = None
    if library == "penstock" and args.check:
        figures["epoch_names"] = _epoch_names(args)
    gathered = [None] * world
    dist.all_gather_object(gathered, figures)
    if rank == 0:
        with open(args.result, "w") as handle:
            json.dump(gathered, handle)
    dist.destroy_process_group()


def _rank_cores(local_rank: int, local_ranks: int) -> set[int]:
    """This rank's even share of the cores the process may use, as a contiguous block: its threads and
    worker processes then stay off the other ranks' cores."""
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // local_ranks)
    return set(cores[local_rank * share:(local_rank + 1) * share]) or set(cores)


def _epoch_names(args) -> list[str]:
    from penstock.plugin.pytorch import GenericIterator, LastBatchPolicy
    pipe = names_pipeline(args.data, args.batch_size)
    names = []
    for batch in GenericIterator(pipe, ["name"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL):
        names.extend(bytes(sample.cpu().numpy()).decode() for sample in batch[0]["name"])
    pipe.close()
    return names


def _gpu_memory(index: int) -> int:
    """This process's GPU memory as NVML sees it (every allocator), else PyTorch's reserved memory."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return sum(p.usedGpuMemory or 0 for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                   if p.pid == os.getpid())
    except Exception:
        import torch
        return torch.cuda.max_memory_reserved(index)


# ---- the driver ------------------------------------------------------------------------------------
def run_configuration(args, runner: str, gpus: int, threads: str, result: str) -> dict:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}",
               os.path.abspath(__file__), "--rank-worker", "--runner", runner, "--data", args.data,
               "--device", args.device, "--batch-size", str(args.batch_size), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--threads", threads, "--crop", str(args.crop), "--result", result,
               "--loop", args.loop, "--prefetch", str(args.prefetch),
               "--step-ms", str(args.step_ms)]
    if args.check:
        command.append("--check")
    if args.pin:
        command.append("--pin")
    environment = {**os.environ, **SAFE_ENVIRONMENT, "OMP_NUM_THREADS": "1"}
    begun = time.perf_counter()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - begun
    if completed.returncode != 0 or not os.path.exists(result):
        return {"runner": runner, "gpus": gpus, "threads": threads, "status": "failed", "wall_s": wall,
                "log": (completed.stdout + completed.stderr)[-3000:]}
    with open(result) as handle:
        ranks = json.load(handle)
    os.remove(result)
    total_seconds = max(rank["seconds"] for rank in ranks)  # the ranks step together
    total = sum(rank["images"] for rank in ranks) / total_seconds
    summary = {"runner": runner, "gpus": gpus, "threads": threads, "status": "ok", "wall_s": wall,
               "images_per_second": total, "per_gpu": total / gpus,
               "cpu_cores": sum(rank["cpu_seconds"] for rank in ranks) / total_seconds,
               "gpu_memory_gib": [round(rank["gpu_memory_gib"], 2) for rank in ranks],
               "first_step_s": max(rank["first_step_s"] for rank in ranks),
               "steps_per_epoch": [rank["steps_per_epoch"] for rank in ranks],
               "batch_wait_ms": [round(rank["batch_wait_ms"], 2) for rank in ranks],
               "stage_ms": [rank.get("stage_ms", {}) for rank in ranks],
               "threads_per_rank": [rank["threads"] for rank in ranks]}
    if "epoch_names" in ranks[0]:
        summary["exactly_once"] = _exactly_once(args.data, [rank["epoch_names"] for rank in ranks])
    return summary


def _exactly_once(data: str, per_rank: list[list[str]]) -> str:
    """'yes', or what is wrong: every file of the data set delivered by exactly one rank, once."""
    files = sorted(os.path.relpath(os.path.join(folder, name), data) for folder, _, names in os.walk(data)
                   for name in names if name.lower().endswith((".jpg", ".jpeg")))
    delivered = sorted(os.path.relpath(name, data) if os.path.isabs(name) else name
                       for names in per_rank for name in names)
    if delivered == files:
        return "yes"
    seen, duplicated = set(), set()
    for name in delivered:
        (duplicated if name in seen else seen).add(name)
    missing = set(files) - seen
    return f"no: {len(missing)} missing, {len(duplicated)} delivered twice (e.g. {sorted(missing | duplicated)[:2]})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--gpus", default="1,2", help="processes per configuration (one GPU each)")
    parser.add_argument("--runners", default="penstock,dali")
    parser.add_argument("--threads", default="default", help="CPU threads per rank: comma-separated, 'default' "
                                                             "for the pipeline's own choice")
    parser.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--crop", type=int, default=224)
    parser.add_argument("--check", action="store_true", help="check the exactly-once delivery (penstock)")
    parser.add_argument("--loop", default="step", choices=("step", "iterate", "side-stream", "local-step", "hold-lock", "sleep"),
                        help="'step': each batch feeds a DistributedDataParallel step; 'iterate': the pipeline alone; "
                             "'side-stream': the step on a CUDA stream of its own; 'local-step': the same step on "
                             "each rank's own model, without the all-reduce that makes the ranks wait for each other; "
                             "'hold-lock' / 'sleep': no model, the step's Python holds the interpreter lock for "
                             "--step-ms, or sleeps that long")
    parser.add_argument("--step-ms", type=float, default=4.0, help="the length of a 'hold-lock' or 'sleep' step")
    parser.add_argument("--prefetch", type=int, default=2, help="prefetch_queue_depth of every pipeline")
    parser.add_argument("--pin", action="store_true",
                        help="each rank (with its threads and worker processes) keeps to its share of the cores")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json")
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runner", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.data = os.path.abspath(args.data)  # the delivered names are checked against the files under it
    if args.rank_worker:
        run_rank(args)
        return
    results = []
    for runner in args.runners.split(","):
        if runner.partition(":")[0] == "dali":
            try:
                import nvidia.dali  # noqa: F401
            except ImportError:
                print("NVIDIA DALI is not installed: its rows are left out", flush=True)
                continue
        for gpus in [int(count) for count in args.gpus.split(",")]:
            for threads in args.threads.split(","):
                result = os.path.abspath(f".scaling-{os.getpid()}-{runner}-{gpus}-{threads}.json")
                summary = run_configuration(args, runner, gpus, threads, result)
                results.append(summary)
                print(json.dumps({k: v for k, v in summary.items() if k not in ("log", "stage_ms")}), flush=True)
                if summary["status"] != "ok":
                    print(summary["log"], flush=True)
    single = {(r["runner"], r["threads"]): r["images_per_second"] for r in results
              if r["status"] == "ok" and r["gpus"] == 1}
    for r in results:
        base = single.get((r["runner"], r["threads"])) or single.get((r["runner"], "default"))
        if r["status"] == "ok" and base:
            r["efficiency"] = r["images_per_second"] / (r["gpus"] * base)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    print(f"\n{args.device.upper()} training pipeline, batch {args.batch_size} per rank, {args.steps} timed steps, "
          f"one process per GPU under torchrun, loop: {args.loop}{', ranks pinned to cores' if args.pin else ''}\n")
    print("| runner | GPUs | threads per rank | images/s | per GPU | efficiency | CPU cores busy | GPU memory "
          "per rank (GiB) | first step (s) | steps per epoch | exactly once |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if r["status"] != "ok":
            print(f"| {r['runner']} | {r['gpus']} | {r['threads']} | failed | | | | | | | |")
            continue
        efficiency = f"{r['efficiency']:.2f}" if "efficiency" in r else "-"
        print(f"| {r['runner']} | {r['gpus']} | {'/'.join(map(str, r['threads_per_rank']))} | "
              f"{r['images_per_second']:,.0f} | {r['per_gpu']:,.0f} | {efficiency} | {r['cpu_cores']:.1f} | "
              f"{', '.join(map(str, r['gpu_memory_gib']))} | {r['first_step_s']:.1f} | "
              f"{', '.join(map(str, r['steps_per_epoch']))} | {r.get('exactly_once', '-')} |")


if __name__ == "__main__":
    main()
