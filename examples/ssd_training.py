"""Trains a small SSD-style detector on a COCO-format data set, fed by a penstock pipeline that
does what SSD300 training does to every sample: a random crop that keeps boxes (random_bbox_crop),
decoding only that window, resize, a flip of image and boxes together, colour jitter, normalize,
and the SSD encoding of the boxes against the model's anchors (box_encoder).

    python examples/ssd_training.py [--data DIR | --images N] [--steps 200] [--size 300]

DIR holds images/ and annotations/instances.json (COCO's layout); without it, N images of drawn
shapes are generated (benchmarks/make_coco.py). Runs on the GPU (mixed decode, GPU operators) when
there is one, else on the CPU. Prints the loss as it falls, and images/s.

``--model torchvision`` trains torchvision's SSDlite instead (torchvision installed): the same
pipeline without box_encoder, its images and boxes handed over as torchvision.tv_tensors by the
iterator (``TvTensors``), and the model matches the boxes to its own anchors.

The pipeline is written once against DALI's API (``build_pipeline(api, ...)`` takes
``penstock.compat.dali`` or ``nvidia.dali``), so benchmarks/side_by_side.py runs it on both.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time

import numpy as np

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
STDS = [0.1, 0.1, 0.2, 0.2]  # SSD's variances of the offsets


def feature_sizes(size: int) -> list[int]:
    """The sides of the detector's feature maps (strides 8, 16, 32 and 64 of the input): each
    stride-2 convolution of ssd_model makes a side n into ceil(n / 2)."""
    sides = []
    for halvings in (3, 1, 1, 1):
        for _ in range(halvings):
            size = -(-size // 2)
        sides.append(size)
    return sides


def ssd_anchors(size: int) -> np.ndarray:
    """SSD's default boxes (ltrb, relative): per feature map cell, a square of the map's scale, a
    square between it and the next scale, and boxes of aspect 2 and 1/2."""
    maps = feature_sizes(size)
    scales = np.linspace(0.1, 0.9, len(maps) + 1)
    anchors = []
    for k, cells in enumerate(maps):
        shapes = [(scales[k], scales[k]), (np.sqrt(scales[k] * scales[k + 1]),) * 2,
                  (scales[k] * np.sqrt(2), scales[k] / np.sqrt(2)), (scales[k] / np.sqrt(2), scales[k] * np.sqrt(2))]
        for row, column in itertools.product(range(cells), repeat=2):
            cy, cx = (row + 0.5) / cells, (column + 0.5) / cells
            anchors.extend([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2] for w, h in shapes)
    return np.clip(np.array(anchors, np.float32), 0.0, 1.0)


def build_pipeline(api, data: str, size: int, batch_size: int, threads: int, gpu: bool, seed: int = 5,
                   encode: bool = True):
    """The SSD training pipeline, against DALI's API (``api``: penstock.compat.dali or nvidia.dali);
    with ``encode=False`` its boxes (relative, ltrb) and labels stay per sample, not encoded."""
    fn, types = api.fn, api.types
    device = "gpu" if gpu else "cpu"
    anchors = ssd_anchors(size).reshape(-1).tolist()

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0 if gpu else None, seed=seed)
    def ssd():
        jpegs, boxes, labels = fn.readers.coco(file_root=os.path.join(data, "images"), ltrb=True, ratio=True,
                                               annotations_file=os.path.join(data, "annotations", "instances.json"),
                                               skip_empty=True, random_shuffle=True, name="Reader")
        anchor, shape, boxes, labels = fn.random_bbox_crop(
            boxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0.0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
            bbox_layout="xyXY", allow_no_crop=True, num_attempts=50)
        images = fn.decoders.image_slice(jpegs, anchor, shape, device="mixed" if gpu else "cpu",
                                         output_type=types.RGB)
        flip = fn.random.coin_flip(probability=0.5)
        boxes = fn.bb_flip(boxes, ltrb=True, horizontal=flip)
        images = fn.resize(images, device=device, resize_x=size, resize_y=size)
        images = fn.color_twist(images, device=device, brightness=fn.random.uniform(range=[0.875, 1.125]),
                                contrast=fn.random.uniform(range=[0.5, 1.5]),
                                saturation=fn.random.uniform(range=[0.5, 1.5]),
                                hue=fn.random.uniform(range=[-18.0, 18.0]))
        images = fn.crop_mirror_normalize(images, device=device, mean=MEAN, std=STD, mirror=flip,
                                          dtype=types.FLOAT, output_layout="CHW")
        if not encode:
            return images, boxes, labels
        boxes, labels = fn.box_encoder(boxes.gpu() if gpu else boxes, labels.gpu() if gpu else labels,
                                       anchors=anchors, criteria=0.5, offset=True, stds=STDS)
        return images, boxes, labels

    return ssd()


def ssd_model(torch, size: int, classes: int):
    """A small SSD: a convolutional backbone and, on each of its four feature maps, a 3x3 head that
    predicts 4 offsets and the class scores of each of the cell's 4 anchors."""
    nn = torch.nn

    def block(inputs, outputs):
        return nn.Sequential(nn.Conv2d(inputs, outputs, 3, stride=2, padding=1), nn.BatchNorm2d(outputs), nn.ReLU())

    class SSD(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(block(3, 32), block(32, 48), block(48, 64))  # stride 8
            self.stages = nn.ModuleList([nn.Identity(), block(64, 96), block(96, 128), block(128, 128)])
            widths = [64, 96, 128, 128]
            self.heads = nn.ModuleList([nn.Conv2d(w, 4 * (4 + classes), 3, padding=1) for w in widths])
            self.classes = classes

        def forward(self, images):
            features, locations, scores = self.stem(images), [], []
            for stage, head in zip(self.stages, self.heads):
                features = stage(features)
                out = head(features).permute(0, 2, 3, 1).reshape(images.shape[0], -1, 4 + self.classes)
                locations.append(out[..., :4])
                scores.append(out[..., 4:])
            return torch.cat(locations, 1), torch.cat(scores, 1)

    return SSD()


def ssd_loss(torch, locations, scores, target_boxes, target_labels):
    """SSD's loss: smooth L1 on the matched anchors' offsets, cross-entropy on their classes and on
    the hardest unmatched anchors (three for each matched one)."""
    functional = torch.nn.functional
    positive = target_labels > 0
    matched = positive.sum(1).clamp(min=1)
    location_loss = (functional.smooth_l1_loss(locations, target_boxes, reduction="none").sum(-1) * positive).sum(1)
    confidence = functional.cross_entropy(scores.transpose(1, 2), target_labels, reduction="none")
    negatives = confidence.masked_fill(positive, 0.0)
    rank = negatives.argsort(1, descending=True).argsort(1)
    hard = rank < (3 * positive.sum(1, keepdim=True))
    confidence_loss = (confidence * (positive | hard)).sum(1)
    return ((location_loss + confidence_loss) / matched).mean()


def torchvision_step(torch, model, batch, device):
    """One training step's loss of torchvision's SSDlite on a batch whose images and boxes came as
    tv_tensors (labels made int64, as its loss indexes with them)."""
    images = list(batch["images"].to(device))
    targets = [{"boxes": boxes.to(device), "labels": labels.to(device).long().reshape(-1)}
               for boxes, labels in zip(batch["boxes"], batch["labels"])]
    return sum(model(images, targets).values()), len(images)


def main() -> None:
    import torch

    import penstock.compat.dali as api
    from penstock.compat.dali.plugin.pytorch import DALIGenericIterator, TvTensors
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="a COCO-format folder (images/, annotations/instances.json)")
    parser.add_argument("--images", type=int, default=64, help="without --data: how many images to generate")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--model", choices=("small", "torchvision"), default="small",
                        help="'small': this file's SSD on box_encoder's targets; 'torchvision': torchvision's SSDlite "
                             "on tv_tensors boxes")
    args = parser.parse_args()

    data = args.data
    if data is None:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
        from make_coco import CATEGORIES, make_coco
        data = os.path.join(args.work_dir or tempfile.mkdtemp(prefix="penstock-ssd-"), "coco")
        make_coco(data, args.images, seed=2)
        classes = len(CATEGORIES) + 1
    else:
        import json
        with open(os.path.join(data, "annotations", "instances.json")) as handle:
            classes = len(json.load(handle)["categories"]) + 1  # labels 1..K, 0 the background
    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    small = args.model == "small"
    pipe = build_pipeline(api, data, args.size, args.batch_size, args.threads, gpu, encode=small)
    if small:
        loader = DALIGenericIterator(pipe, ["images", "boxes", "labels"], reader_name="Reader", auto_reset=True)
        model = ssd_model(torch, args.size, classes).to(device)
    else:
        from torchvision.models.detection import ssdlite320_mobilenet_v3_large
        loader = DALIGenericIterator(pipe, ["images", "boxes", "labels"], reader_name="Reader", auto_reset=True,
                                     tv_tensors=TvTensors(image="images", boxes="boxes", relative_boxes=True))
        # the pipeline normalizes and sizes the images: the model's own transform only batches them
        model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=classes,
                                              image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0]).to(device)
        model.transform.min_size, model.transform.max_size = (args.size,), args.size
        model.transform.fixed_size = (args.size, args.size)
        model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    batches = (batch for _ in itertools.count() for batch in loader)
    losses, started, images = [], time.perf_counter(), 0
    for step in range(1, args.steps + 1):
        batch = next(batches)[0]
        if small:
            inputs = batch["images"].to(device)
            locations, scores = model(inputs)
            loss = ssd_loss(torch, locations, scores, batch["boxes"].to(device), batch["labels"].to(device).long())
            count = inputs.shape[0]
        else:
            loss, count = torchvision_step(torch, model, batch, device)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        images += count
        if step % 20 == 0 or step == args.steps:
            print(f"step {step}: loss {np.mean(losses[-20:]):.3f}", flush=True)
    elapsed = time.perf_counter() - started
    window = max(1, min(20, len(losses) // 4))
    first, last = np.mean(losses[:window]), np.mean(losses[-window:])
    anchors = f"{len(ssd_anchors(args.size))} anchors" if small else "torchvision's SSDlite"
    print(f"{'GPU' if gpu else 'CPU'}: {anchors}, {images} images in {elapsed:.1f} s "
          f"({images / elapsed:,.0f} images/s); loss {first:.3f} -> {last:.3f} over {args.steps} steps", flush=True)
    pipe.close()


if __name__ == "__main__":
    main()
