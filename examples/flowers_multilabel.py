"""Multi-label classification data from a space-separated file list, fed through an external source
in the object API, decoded (on the GPU where there is one) and resized to 224x224.

Shows: Pipeline subclass + iter_setup/feed_input with a Python iterator, two labels per image,
GenericIterator. Prints the batches' shapes and images/s.
usage: python examples/flowers_multilabel.py [--images 64] [--batch-size 16] [--work-dir DIR]
"""
import argparse
import os
import random
import tempfile
import time

import numpy as np

from penstock import Pipeline, ops, types
from penstock.demo import make_sample_dataset
from penstock.plugin.pytorch import GenericIterator


class ExternalInputIterator:
    """Batches of (encoded image bytes, labels) read from a 'name label_1 label_2' file list."""

    def __init__(self, batch_size, data_file, image_dir):
        self.batch_size, self.image_dir = batch_size, image_dir
        with open(data_file) as handle:
            self.lines = [line.rstrip() for line in handle if line.strip()]
        random.Random(0).shuffle(self.lines)
        self.position = 0

    def __next__(self):
        images, labels = [], []
        for _ in range(self.batch_size):
            name, *label = self.lines[self.position].split(" ")
            images.append(np.fromfile(os.path.join(self.image_dir, name), dtype=np.uint8))
            labels.append(np.array(label, dtype=np.uint8))
            self.position = (self.position + 1) % len(self.lines)
        return images, labels


class FlowerPipeline(Pipeline):
    def __init__(self, source, batch_size, num_threads, device_id):
        super().__init__(batch_size, num_threads, device_id, seed=12)
        self.source = source
        self.images = ops.ExternalSource()
        self.labels = ops.ExternalSource()
        self.decode = ops.decoders.Image(device="mixed", output_type=types.RGB)
        self.resize = ops.Resize(device="gpu", resize_x=224, resize_y=224, interp_type=types.INTERP_TRIANGULAR)

    def define_graph(self):
        self.jpegs, self.label_batch = self.images(), self.labels()
        return self.resize(self.decode(self.jpegs)), self.label_batch

    def iter_setup(self):
        images, labels = next(self.source)
        self.feed_input(self.jpegs, images)
        self.feed_input(self.label_batch, labels)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "penstock-examples"))
    args = parser.parse_args(argv)
    root = make_sample_dataset(os.path.join(args.work_dir, f"flowers-{args.images}"), count=args.images)
    flat = [os.path.relpath(os.path.join(folder, name), root) for folder, _, names in os.walk(root)
            for name in sorted(names) if name.endswith(".jpg")]
    data_file = os.path.join(args.work_dir, "flower_dummy_data.ssv")
    with open(data_file, "w") as handle:
        handle.writelines(f"{name} {i % 5} {i % 3}\n" for i, name in enumerate(sorted(flat)))
    # without a GPU, the 'mixed' and 'gpu' operators run on the CPU (after one warning)
    pipe = FlowerPipeline(ExternalInputIterator(args.batch_size, data_file, root), args.batch_size, 4, 0)
    loader = GenericIterator(pipe, ["images", "labels"], size=len(flat))
    started, seen = time.perf_counter(), 0
    for step in loader:
        images, labels = step[0]["images"], step[0]["labels"]
        seen += len(images)
    elapsed = time.perf_counter() - started
    print(f"images {tuple(images.shape)} {images.dtype} on {images.device}, labels {tuple(labels.shape)}")
    print(f"{seen} images in {elapsed:.2f} s: {seen / elapsed:,.0f} images/s", flush=True)
    pipe.close()
    return seen


if __name__ == "__main__":
    main()
