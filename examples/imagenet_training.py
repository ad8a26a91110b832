"""ImageNet-style training and validation from a folder tree, feeding a small ResNet whose loss
falls, then an inference pipeline for single images.

Shows: penstock.recipes' training / validation pipelines (the ResNet-50 recipe at a small size),
ClassificationIterator with PARTIAL last batches, an ops-style inference pipeline with feed_input.
Prints the loss every few steps, validation accuracy, and images/s.
usage: python examples/imagenet_training.py [--steps 300] [--size 64] [--images 256]
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch
from torch import nn

from penstock import Pipeline, ops, types
from penstock.demo import make_sample_dataset
from penstock.plugin.pytorch import ClassificationIterator, LastBatchPolicy
from penstock.recipes import IMAGENET_MEAN, IMAGENET_STD, imagenet_train, imagenet_val


class Block(nn.Module):
    def __init__(self, channels_in, channels_out, stride):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False),
                                  nn.BatchNorm2d(channels_out), nn.ReLU(inplace=True),
                                  nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False), nn.BatchNorm2d(channels_out))
        self.skip = nn.Sequential(nn.Conv2d(channels_in, channels_out, 1, stride, bias=False), nn.BatchNorm2d(channels_out))

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def small_resnet(classes):
    return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                         Block(16, 32, 2), Block(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(64, classes))


class InferencePipeline(Pipeline):
    """One image at a time: decode, resize the shorter side, centre crop, normalize."""

    def __init__(self, size, device_id):
        super().__init__(batch_size=1, num_threads=1, device_id=device_id)
        self.input = ops.ExternalSource()
        self.decode = ops.decoders.Image(device="mixed", output_type=types.RGB)
        self.resize = ops.Resize(device="gpu", resize_shorter=size, interp_type=types.INTERP_TRIANGULAR)
        self.normalize = ops.CropMirrorNormalize(device="gpu", dtype=types.FLOAT, output_layout=types.NCHW,
                                                 crop=(size, size), mean=IMAGENET_MEAN, std=IMAGENET_STD)
        self.path = None

    def define_graph(self):
        self.jpegs = self.input()
        return self.normalize(self.resize(self.decode(self.jpegs)))

    def iter_setup(self):
        self.feed_input(self.jpegs, [np.fromfile(self.path, dtype=np.uint8)], layout="")


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "penstock-examples"))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    root = make_sample_dataset(os.path.join(args.work_dir, f"imagenet-{args.images}"), count=args.images)
    cuda = torch.cuda.is_available()
    device = "gpu" if cuda else "cpu"
    target = torch.device("cuda" if cuda else "cpu")
    train = imagenet_train(root, device=device, crop=args.size, batch_size=args.batch_size, num_threads=4,
                           device_id=0 if cuda else None, seed=1, dtype=types.FLOAT)
    loader = ClassificationIterator(train, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                    auto_reset=True)
    model = small_resnet(8).to(target)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, step, started, images_seen = [], 0, time.perf_counter(), 0
    while step < args.steps:
        for batch in loader:
            images, labels = batch[0]["data"].to(target), batch[0]["label"].squeeze(1).long().to(target)
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            images_seen += len(images)
            step += 1
            if step % max(1, args.steps // 6) == 0:
                print(f"step {step:4d}  loss {np.mean(losses[-10:]):.3f}", flush=True)
            if step >= args.steps:
                break
    elapsed = time.perf_counter() - started
    train.close()
    model.eval()
    val = imagenet_val(root, device=device, crop=args.size, size=int(args.size * 1.15), batch_size=args.batch_size,
                       num_threads=4, device_id=0 if cuda else None, dtype=types.FLOAT)
    correct = total = 0
    with torch.no_grad():
        for batch in ClassificationIterator(val, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL):
            predictions = model(batch[0]["data"].to(target)).argmax(1).cpu()
            correct += int((predictions == batch[0]["label"].squeeze(1).long().cpu()).sum())
            total += len(predictions)
    val.close()
    inference = InferencePipeline(args.size, 0)  # without a GPU its mixed / gpu operators run on the CPU
    inference.path = next(os.path.join(folder, name) for folder, _, names in sorted(os.walk(root))
                          for name in sorted(names) if name.endswith(".jpg"))
    image = inference.run()[0]
    with torch.no_grad():
        tensor = image.as_tensor() if cuda else torch.from_numpy(image.as_array())
        predicted = int(model(tensor.to(target)).argmax(1))
    inference.close()
    first, last = float(np.mean(losses[:10])), float(np.mean(losses[-10:]))
    print(f"loss {first:.3f} -> {last:.3f} over {step} steps; {images_seen / elapsed:,.0f} training images/s "
          f"(model included); validation accuracy {correct}/{total}; "
          f"inference on {os.path.basename(inference.path)}: class {predicted}")
    return first, last


if __name__ == "__main__":
    main()
