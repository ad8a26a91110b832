"""Trains a small classifier with DistributedDataParallel, fed by a penstock pipeline on each process.

    torchrun --nproc_per_node=2 examples/ddp_training.py --data DIR [--steps N] [--epochs E]

DIR holds one sub-folder of JPEGs per class. On GPUs (one per process, by local rank) the pipeline
decodes on the GPU and the processes talk through NCCL; on a machine without GPUs everything runs
on the CPU and they talk through gloo. Each process's reader takes its shard from the process
group (its rank among the world size, penstock.distributed): nothing to pass by hand, and every
process takes the same number of steps per epoch, so the gradient all-reduce never waits for a
process that has run out of data.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn

from penstock import fn, pipeline_def, types
from penstock.plugin.pytorch import ClassificationIterator, LastBatchPolicy


@pipeline_def
def training_pipeline(data, device, size):
    jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")  # this rank's shard
    images = fn.decoders.image_random_crop(jpegs, device="mixed" if device == "gpu" else "cpu")
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                      std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=fn.random.coin_flip())
    return images, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--size", type=int, default=64)
    args = parser.parse_args()

    # GPUs when there is one for each process of this machine (every process decides the same)
    gpu = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    dist.init_process_group("nccl" if gpu else "gloo")
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    if gpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    classes = len([entry for entry in os.scandir(args.data) if entry.is_dir()])

    pipe = training_pipeline(args.data, "gpu" if gpu else "cpu", args.size, batch_size=args.batch_size,
                             num_threads=4, device_id=local_rank if gpu else None, seed=12 + rank)
    loader = ClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP,
                                    auto_reset=True)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes)).to(device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if gpu else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        steps, total_loss = 0, 0.0
        for batch in loader:
            images, labels = batch[0]["data"].to(device), batch[0]["label"].to(device).long().view(-1)
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()  # all-reduces the gradients across the processes
            optimizer.step()
            steps, total_loss = steps + 1, total_loss + loss.item()
            if args.steps and steps == args.steps:
                loader.reset()
                break
        if rank == 0:
            print(f"epoch {epoch}: {steps} steps on each of {dist.get_world_size()} processes, "
                  f"mean loss {total_loss / max(steps, 1):.3f}", flush=True)
    pipe.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
