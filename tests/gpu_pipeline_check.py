"""Runs the ImageNet training and validation pipelines on the CPU and on the GPU path over the same
small JPEG folder with the same seed, and prints how far apart the outputs are, as JSON.

Run as a script so that the GPU path can be emulated on the CPU (PENSTOCK_GPU_ON_CPU=1 with
TRITON_INTERPRET=1 must be set before penstock is imported); test_gpu_pipeline.py runs it.
usage: python gpu_pipeline_check.py DATA_DIR
"""
import dataclasses
import json
import sys

import numpy as np

from penstock import fn, pipeline_def, tuning
from penstock.plugin.pytorch import ClassificationIterator, LastBatchPolicy
from penstock.recipes import imagenet_train, imagenet_val


@pipeline_def
def moved_to_gpu(data_dir, device):
    jpegs, labels = fn.readers.file(file_root=data_dir, name="Reader")
    images = fn.decoders.image(jpegs)
    images = images.gpu() if device == "gpu" else images
    images = fn.resize(images, device=device, resize_shorter=20)
    images = fn.crop(images, device=device, crop=(16, 16))
    # the labels too: a batch's array from the reader, copied to the GPU at once
    return fn.flip(images, device=device, horizontal=fn.random.coin_flip()), labels.gpu() if device == "gpu" else labels


def outputs(factory, data_dir, device, **kwargs):
    pipe = factory(data_dir, device=device, batch_size=4, num_threads=2, device_id=0, seed=3, **kwargs)
    loader = ClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    result = [(step[0]["data"].cpu().float().numpy(), step[0]["label"].cpu().numpy(), step[0]["data"].device.type)
              for step in loader]
    pipe.close()
    return result


def main():
    data_dir = sys.argv[1]
    report = {}
    # the test images are small: let every one travel through the rings
    tuning.DEFAULT = dataclasses.replace(tuning.DEFAULT, ring_smallest=0)
    for name, factory, kwargs in (("train", imagenet_train, {"crop": 24}), ("val", imagenet_val, {"crop": 24, "size": 28}),
                                  ("moved", moved_to_gpu, {}),
                                  ("train_processes", imagenet_train, {"crop": 24, "worker_processes": True}),
                                  ("val_processes", imagenet_val, {"crop": 24, "size": 28, "worker_processes": True}),
                                  # half of each batch decoded by the CPU workers, half by the GPU's decoders
                                  ("train_cpu_share", imagenet_train, {"crop": 24, "cpu_decoder_load": 0.5}),
                                  ("val_cpu_share", imagenet_val, {"crop": 24, "size": 28, "cpu_decoder_load": 0.5})):
        cpu_kwargs = {key: value for key, value in kwargs.items() if key not in ("worker_processes", "cpu_decoder_load")}
        cpu, gpu = outputs(factory, data_dir, "cpu", **cpu_kwargs), outputs(factory, data_dir, "gpu", **kwargs)
        differences = np.concatenate([np.abs(a[0] - b[0]).ravel() for a, b in zip(cpu, gpu)])
        report[name] = {"batches": [len(cpu), len(gpu)], "shapes_equal": all(a[0].shape == b[0].shape for a, b in zip(cpu, gpu)),
                        "labels_equal": all(np.array_equal(a[1], b[1]) for a, b in zip(cpu, gpu)),
                        "mean": float(differences.mean()), "max": float(differences.max()),
                        "gpu_device": gpu[0][2]}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
