"""penstock beside NVIDIA DALI as a new user meets them: one program written against DALI's API,
run by DALI and by penstock (``penstock.compat.dali``, only the imports changed), each case in a
process of its own, the cases alternating, with defaults everywhere.

usage: python benchmarks/side_by_side.py --data DIR [--cases gpu-train,gpu-val,cpu-train,cpu-val]
       [--runners penstock,dali] [--rounds 2] [--seconds 10] [--threads 16] [--cores 4,8,16] [--json FILE]

``--cores 4,8,16`` runs every case once per count, its process held to that many of the machine's
cores (the first ones, by CPU affinity) and given as many threads: images/s against cores.

Cases gpu-ssd and cpu-ssd run examples/ssd_training.py's SSD300 pipeline (COCO reader, random_bbox_crop,
decoding the window, resize 300, flip with boxes, colour twist, normalize, box_encoder) on the
COCO-format set given by ``--coco`` (benchmarks/make_coco.py makes one); the runner ``torchvision`` runs
it as torchvision's detection references do (CocoDetection in a DataLoader with ``--threads`` workers,
the v2 transforms per image, the SSD matching and encoding per image as torchvision's SSD loss does).

Cases gpu-ssd_example and cpu-ssd_example run DALI's SSD300 example as DALI writes it (a Pipeline
subclass of ``ops``: the box crop, flip and encoding on the CPU, 8,732 anchors), and gpu-maskrcnn and
cpu-maskrcnn a Mask R-CNN-style pipeline (polygon masks, shorter side 800, flip of image, boxes and
vertices, padded to 32), both on the ``--coco`` set.

Cases gpu-speech and cpu-speech run examples/speech_features.py's QuartzNet-style feature pipeline
(readers.nemo_asr at 16 kHz, dither, pre-emphasis, spectrogram, 64 mel bands, log, per-feature
normalize, pad) on the NeMo manifest in ``--speech`` (benchmarks/make_speech.py makes a corpus);
samples/s is reported in the images/s column.

Cases gpu-video and cpu-video read 8-frame clips with readers.video (random_shuffle) from the
video files under ``--video`` (benchmarks/make_videos.py makes them), and gpu-clip and cpu-clip run
examples/action_recognition.py's clip pipeline on them (resize by the shorter side to 128, random crop
112, mirror, normalize, FCHW); frames/s (8 a clip) is reported in the images/s column.

Cases gpu-aug and cpu-aug are the augmentation-heavy training pipeline (random-resized crop 224,
flip, colour jitter of brightness, contrast and saturation 0.4 and hue 0.1, RandAugment with 2
operations at magnitude 9, normalize); the runner ``torchvision`` runs it with
torchvision.transforms.v2 (on GPU tensors after nvJPEG batch decode, or in a 16-worker DataLoader),
the runner ``kornia`` with Kornia's batched augmentations on the GPU after per-image crops.

For each case: images/s through DALIClassificationIterator (auto_reset, so epochs end and restart
inside the measurement), the time from the process's start to the first batch and from
``Pipeline(...)`` to the first batch, the process's whole life, CPU cores busy (the process and
its children) and peak GPU memory of the process tree as NVML sees it. Prints a table with the
ratio of each penstock figure to DALI's of the same round last.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import threading
import time

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


# ---- one case, in its own process -----------------------------------------------------------------
def _tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant (the worker processes of either library)."""
    ticks, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                pending.extend(int(child) for child in handle.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def build_pipeline(api, kind: str, device: str, data: str, batch_size: int, threads: int, decoder_args=None,
                   device_id=0):
    """The ResNet-50 training or validation pipeline as a DALI user writes it; ``device`` 'gpu' is
    mixed decode and GPU operators, 'cpu' every operator on the CPU (device_id=0 as DALI's docs do;
    None on a machine without a GPU, where DALI refuses a device_id).
    ``decoder_args``: arguments added to the decoder (a runner such as 'penstock:cpu_decoder_load=0')."""
    decoder_args = decoder_args or {}
    fn, types = api.fn, api.types
    decoder, rest = ("mixed", "gpu") if device == "gpu" else ("cpu", "cpu")

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=7)
    def train():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device=decoder, output_type=types.RGB,
                                               random_aspect_ratio=[0.75, 4 / 3], random_area=[0.08, 1.0],
                                               num_attempts=100, **decoder_args)
        images = fn.resize(images, device=rest, resize_x=224, resize_y=224, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, device=rest, dtype=types.FLOAT16, output_layout="CHW",
                                          crop=(224, 224), mean=MEAN, std=STD,
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=7)
    def val():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=False, name="Reader")
        images = fn.decoders.image(jpegs, device=decoder, output_type=types.RGB, **decoder_args)
        images = fn.resize(images, device=rest, resize_shorter=256, interp_type=types.INTERP_TRIANGULAR)
        images = fn.crop_mirror_normalize(images, device=rest, dtype=types.FLOAT16, output_layout="CHW",
                                          crop=(224, 224), mean=MEAN, std=STD)
        return images, labels

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=7,
                      enable_conditionals=True)
    def augmented():  # the augmentation-heavy training pipeline: colour jitter and RandAugment
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device=decoder, output_type=types.RGB,
                                               random_aspect_ratio=[0.75, 4 / 3], random_area=[0.08, 1.0],
                                               num_attempts=100, **decoder_args)
        images = fn.resize(images, device=rest, resize_x=224, resize_y=224)
        images = fn.flip(images, device=rest, horizontal=fn.random.coin_flip(probability=0.5))
        images = fn.color_twist(images, device=rest, brightness=fn.random.uniform(range=[0.6, 1.4]),
                                contrast=fn.random.uniform(range=[0.6, 1.4]),
                                saturation=fn.random.uniform(range=[0.6, 1.4]),
                                hue=fn.random.uniform(range=[-36.0, 36.0]))  # 0.1 of a turn, in degrees
        images = api.auto_aug.rand_augment.rand_augment(images, n=2, m=9)
        images = fn.crop_mirror_normalize(images, device=rest, dtype=types.FLOAT16, output_layout="CHW",
                                          mean=MEAN, std=STD)
        return images, labels

    return {"train": train, "val": val, "aug": augmented}[kind]()


def ssd300_default_boxes() -> list:
    """SSD300's 8,732 default boxes (ltrb, relative) as DALI's SSD example computes them
    (``dboxes300_coco().as_ltrb_list()``: six feature maps, scales 21-315 over 300 pixels, each
    centre and size clamped to [0, 1] before the corners are taken), a list of numpy float32 scalars
    as that example hands to BoxEncoder."""
    import itertools
    import math

    import numpy as np
    size, features, steps = 300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, aspect_ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    boxes = []
    for index, cells in enumerate(features):
        small, large = scales[index] / size, scales[index + 1] / size
        shapes = [(small, small), (math.sqrt(small * large),) * 2]
        for alpha in aspect_ratios[index]:
            shapes += [(small * math.sqrt(alpha), small / math.sqrt(alpha)),
                       (small / math.sqrt(alpha), small * math.sqrt(alpha))]
        cell = size / steps[index]
        for width, height in shapes:
            for row, column in itertools.product(range(cells), repeat=2):
                boxes.append(((column + 0.5) / cell, (row + 0.5) / cell, width, height))
    centred = np.clip(np.array(boxes, np.float32), 0, 1)
    ltrb = np.concatenate([centred[:, :2] - 0.5 * centred[:, 2:], centred[:, :2] + 0.5 * centred[:, 2:]], axis=1)
    return [value for value in ltrb.reshape(-1)]


def ssd_example_pipeline(api, device: str, data: str, batch_size: int, threads: int, device_id=0):
    """DALI's SSD300 training example as DALI writes it: a Pipeline subclass of ``ops`` objects,
    random_bbox_crop and the box flip and encoder on the CPU, the mixed slice decoder, and flip,
    resize, colour twist and normalize on the GPU (``device`` 'cpu': every operator on the CPU);
    images FP16 CHW, offsets and labels moved to the GPU at the end."""
    ops, types = api.ops, api.types
    decoder, rest = ("mixed", "gpu") if device == "gpu" else ("cpu", "cpu")

    class COCOPipeline(api.Pipeline):
        def __init__(self):
            super().__init__(batch_size=batch_size, device_id=device_id, num_threads=threads, seed=15)
            self.input = ops.readers.COCO(file_root=os.path.join(data, "images"),
                                          annotations_file=os.path.join(data, "annotations", "instances.json"),
                                          ratio=True, ltrb=True, skip_empty=True, random_shuffle=True)
            self.crop = ops.RandomBBoxCrop(device="cpu", aspect_ratio=[0.5, 2.0],
                                           thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
                                           bbox_layout="xyXY", allow_no_crop=True, num_attempts=50)
            self.decode_slice = ops.decoders.ImageSlice(device=decoder, output_type=types.RGB)
            self.flip = ops.Flip(device=rest)
            self.bbflip = ops.BbFlip(device="cpu", ltrb=True)
            self.resize = ops.Resize(device=rest, resize_x=300, resize_y=300,
                                     min_filter=types.DALIInterpType.INTERP_TRIANGULAR)
            self.twist = ops.ColorTwist(device=rest)
            self.normalize = ops.CropMirrorNormalize(device=rest, crop=(300, 300), mean=[0.0, 0.0, 0.0],
                                                     std=[255.0, 255.0, 255.0], mirror=0, dtype=types.FLOAT16,
                                                     output_layout=types.NCHW, pad_output=False)
            self.saturation_contrast = ops.random.Uniform(range=[0.5, 1.5])
            self.brightness = ops.random.Uniform(range=[0.875, 1.125])
            self.hue = ops.random.Uniform(range=[-0.5, 0.5])
            self.flip_coin = ops.random.CoinFlip(probability=0.5)
            self.box_encoder = ops.BoxEncoder(device="cpu", criteria=0.5, anchors=ssd300_default_boxes())

        def define_graph(self):
            saturation, contrast = self.saturation_contrast(), self.saturation_contrast()
            brightness, hue, coin = self.brightness(), self.hue(), self.flip_coin()
            inputs, bboxes, labels = self.input(name="Reader")
            crop_begin, crop_size, bboxes, labels = self.crop(bboxes, labels)
            images = self.decode_slice(inputs, crop_begin, crop_size)
            images = self.flip(images, horizontal=coin)
            bboxes = self.bbflip(bboxes, horizontal=coin)
            images = self.resize(images)
            images = self.twist(images, saturation=saturation, contrast=contrast, brightness=brightness, hue=hue)
            images = self.normalize(images)
            bboxes, labels = self.box_encoder(bboxes, labels)
            if device == "gpu":
                return images, bboxes.gpu(), labels.gpu()
            return images, bboxes, labels

    return COCOPipeline()


def maskrcnn_pipeline(api, device: str, data: str, batch_size: int, threads: int, device_id=0, shuffle=True):
    """A Mask R-CNN-style training input pipeline as DALI users write it (NVIDIA's Mask R-CNN and
    DALI's detection pipeline tutorial): the COCO reader with polygon masks (relative, ltrb),
    the whole image decoded, resized to a shorter side of 800 (the longer at most 1333), a flip of
    the image, its boxes and its polygons' vertices on one coin, normalized FP16 CHW and padded to
    a multiple of 32; boxes, labels, polygons and vertices moved to the GPU (``device`` 'cpu':
    every operator on the CPU; ``shuffle`` False: in file order). Its images differ in size: the case reads batches with
    ``Pipeline.run()``, not an iterator."""
    fn, types = api.fn, api.types
    decoder, rest = ("mixed", "gpu") if device == "gpu" else ("cpu", "cpu")

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=9)
    def maskrcnn():
        jpegs, boxes, labels, polygons, vertices = fn.readers.coco(
            file_root=os.path.join(data, "images"), annotations_file=os.path.join(data, "annotations", "instances.json"),
            polygon_masks=True, ratio=True, ltrb=True, skip_empty=True, random_shuffle=shuffle, name="Reader")
        images = fn.decoders.image(jpegs, device=decoder, output_type=types.RGB)
        flip = fn.random.coin_flip(probability=0.5)
        boxes = fn.bb_flip(boxes, ltrb=True, horizontal=flip)
        vertices = fn.coord_flip(vertices, layout="xy", flip_x=flip)
        images = fn.resize(images, device=rest, resize_shorter=800, max_size=1333)
        images = fn.crop_mirror_normalize(images, device=rest, mean=MEAN, std=STD, mirror=flip, dtype=types.FLOAT16,
                                          output_layout="CHW")
        images = fn.pad(images, device=rest, axes=(1, 2), align=32)
        if device == "gpu":
            return images, boxes.gpu(), labels.gpu(), polygons.gpu(), vertices.gpu()
        return images, boxes, labels, polygons, vertices

    return maskrcnn()


def _pipeline_runs(pipe):
    """Batches of ``pipe`` through Pipeline.run(), without end (for pipelines whose outputs an
    iterator cannot stack)."""
    while True:
        yield pipe.run()


def torchvision_transform(v2, torch):
    """The augmentation-heavy pipeline in torchvision.transforms.v2, from a decoded uint8 CHW image."""
    return v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                       v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.RandAugment(num_ops=2, magnitude=9)])


def _image_files(data: str) -> list:
    classes = sorted(entry.name for entry in os.scandir(data) if entry.is_dir())
    return [(os.path.join(data, name, file), label) for label, name in enumerate(classes)
            for file in sorted(os.listdir(os.path.join(data, name)))]


def torchvision_batches(device: str, data: str, batch_size: int, threads: int):
    """Batches of the augmentation-heavy pipeline in torchvision: on the GPU ('gpu'), nvJPEG batch
    decode (torchvision.io.decode_jpeg on CUDA) and the v2 transforms per image on GPU tensors; with
    Kornia ('kornia'), the crops per image and the rest batched; on the CPU ('cpu'), a DataLoader
    with ``threads`` workers (decode_jpeg and the v2 transforms in each)."""
    import random

    import torch
    import torchvision
    from torchvision.transforms import v2
    files = _image_files(data)
    transform = torchvision_transform(v2, torch)
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)
    if device == "gpu":
        mean, std = mean.cuda(), std.cuda()
        while True:
            order = list(range(len(files)))
            random.shuffle(order)
            for start in range(0, len(order) - batch_size + 1, batch_size):
                chunk = [files[index] for index in order[start:start + batch_size]]
                encoded = [torchvision.io.read_file(path) for path, _ in chunk]
                decoded = torchvision.io.decode_jpeg(encoded, device="cuda")
                images = torch.stack([transform(image) for image in decoded])
                yield ((images.float() - mean) / std).half(), torch.tensor([label for _, label in chunk])

    if device == "kornia":  # per-image crops to one size, then Kornia's batched augmentations
        import kornia.augmentation as augment
        from kornia.augmentation.auto import RandAugment
        crop = v2.RandomResizedCrop(224, antialias=True)
        batched = torch.nn.Sequential(augment.RandomHorizontalFlip(), augment.ColorJitter(0.4, 0.4, 0.4, 0.1),
                                      RandAugment(n=2, m=9)).cuda()
        mean, std = mean.cuda(), std.cuda()
        while True:
            order = list(range(len(files)))
            random.shuffle(order)
            for start in range(0, len(order) - batch_size + 1, batch_size):
                chunk = [files[index] for index in order[start:start + batch_size]]
                decoded = torchvision.io.decode_jpeg([torchvision.io.read_file(path) for path, _ in chunk],
                                                     device="cuda")
                images = torch.stack([crop(image) for image in decoded]).float() / 255
                images = batched(images) * 255
                yield ((images - mean) / std).half(), torch.tensor([label for _, label in chunk])

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, index):
            path, label = files[index]
            image = transform(torchvision.io.decode_jpeg(torchvision.io.read_file(path)))
            return ((image.float() - mean) / std).half(), label

    loader = torch.utils.data.DataLoader(Files(), batch_size=batch_size, shuffle=True, num_workers=threads,
                                         drop_last=True, persistent_workers=True, prefetch_factor=2)
    while True:
        yield from loader


def torchvision_ssd_batches(device: str, coco: str, batch_size: int, threads: int):
    """Batches of examples/ssd_training.py's pipeline as torchvision's detection references make
    them: CocoDetection wrapped for transforms v2 (images without annotations left out, as
    skip_empty does), the v2 transforms per image in a DataLoader with ``threads`` workers
    (RandomIoUCrop, resize 300, flip, colour jitter of the example's ranges, normalize,
    SanitizeBoundingBoxes), then each image's boxes matched to the example's anchors and encoded
    as torchvision's SSD does in its loss (SSDMatcher, BoxCoder with SSD's variances), per image, on
    the GPU for 'gpu'. Yields (images [N, 3, 300, 300] float, offsets [N, A, 4], classes [N, A])."""
    import torch
    from torchvision import datasets
    from torchvision.models.detection import _utils as detection_utils
    from torchvision.ops import box_iou
    from torchvision.transforms import v2
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from ssd_training import MEAN as SSD_MEAN, STD as SSD_STD, STDS, ssd_anchors
    size = 300
    base = datasets.CocoDetection(os.path.join(coco, "images"), os.path.join(coco, "annotations", "instances.json"))
    base.ids = [image_id for image_id in base.ids if base.coco.getAnnIds(imgIds=image_id, iscrowd=False)]
    samples = datasets.wrap_dataset_for_transforms_v2(base, target_keys=("boxes", "labels"))
    transform = v2.Compose([v2.PILToTensor(), v2.RandomIoUCrop(), v2.Resize((size, size), antialias=True),
                            v2.RandomHorizontalFlip(),
                            v2.ColorJitter(brightness=0.125, contrast=0.5, saturation=0.5, hue=0.05),
                            v2.ToDtype(torch.float32), v2.Normalize(SSD_MEAN, SSD_STD), v2.SanitizeBoundingBoxes()])

    class Transformed(torch.utils.data.Dataset):
        def __len__(self):
            return len(samples)

        def __getitem__(self, index):
            image, target = transform(*samples[index])
            return image.as_subclass(torch.Tensor), target["boxes"].as_subclass(torch.Tensor), target["labels"]

    def collate(batch):
        images, boxes, labels = zip(*batch)
        return torch.stack(images), list(boxes), list(labels)

    loader = torch.utils.data.DataLoader(Transformed(), batch_size=batch_size, shuffle=True, num_workers=threads,
                                         drop_last=True, persistent_workers=True, prefetch_factor=2,
                                         collate_fn=collate)
    epoch = iter(loader)  # forks the workers before this process uses the GPU
    target = torch.device("cuda" if device == "gpu" else "cpu")
    anchors = torch.from_numpy(ssd_anchors(size) * size).to(target)
    matcher = detection_utils.SSDMatcher(0.5)
    coder = detection_utils.BoxCoder(weights=tuple(1.0 / std for std in STDS))
    while True:
        for images, boxes, labels in epoch:
            offsets, classes = [], []
            for image_boxes, image_labels in zip(boxes, labels):
                image_boxes, image_labels = image_boxes.to(target), image_labels.to(target)
                if len(image_boxes) == 0:  # every box left the crop: all background
                    offsets.append(torch.zeros_like(anchors))
                    classes.append(torch.zeros(len(anchors), dtype=torch.int64, device=target))
                    continue
                matched = matcher(box_iou(image_boxes, anchors))
                kept = matched.clamp(min=0)
                offsets.append(coder.encode_single(image_boxes[kept], anchors))
                classes.append(torch.where(matched >= 0, image_labels[kept], 0))
            yield images.to(target), torch.stack(offsets), torch.stack(classes)
        epoch = iter(loader)


def decoder_arguments(settings: str) -> dict:
    """'name=value+...' (a runner's settings, such as cpu_decoder_load=0.1+hw_decoder_load=0.8: the
    runners are separated by commas) as the decoder's arguments."""
    return {name: float(value) for name, value in (item.split("=") for item in settings.split("+") if item)}


def run_case(args) -> None:
    started = float(os.environ["SIDE_BY_SIDE_STARTED"])
    device, kind = args.case.split("-")
    import torch
    library, _, settings = args.runner.partition(":")
    decoder_args = decoder_arguments(settings)
    synchronize = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    if library == "torchvision" and kind == "ssd":
        imported = time.time()
        batches = torchvision_ssd_batches(device, args.data, args.batch_size, args.threads)
        return _time_steps(args, started, imported, synchronize, batches, lambda step: step[0])
    if library in ("torchvision", "kornia"):
        if kind != "aug" or (library == "kornia" and device != "gpu"):
            raise SystemExit(f"the {library} runner has the augmentation-heavy and SSD pipelines only (cases "
                             f"gpu-aug{', cpu-aug, gpu-ssd, cpu-ssd' if library == 'torchvision' else ''})")
        imported = time.time()
        batches = torchvision_batches(library if library == "kornia" else device, args.data, args.batch_size,
                                      args.threads)
        return _time_steps(args, started, imported, synchronize, batches, lambda step: step[0])
    if library == "dali":
        import nvidia.dali as api
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator
    else:
        import penstock.compat.dali as api
        from penstock.compat.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator
    if kind == "ssd":  # examples/ssd_training.py's pipeline on a COCO-format set
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        from ssd_training import build_pipeline as ssd_pipeline
        imported = time.time()
        pipe = ssd_pipeline(api, args.data, 300, args.batch_size, args.threads, device == "gpu")
        iterator = DALIGenericIterator([pipe], ["images", "boxes", "labels"], reader_name="Reader", auto_reset=True)

        return _time_steps(args, started, imported, synchronize, _epochs(iterator), lambda step: step[0]["images"])
    if kind == "ssd_example":  # DALI's SSD300 example, as DALI writes it
        imported = time.time()
        device_id = None if device == "cpu" and not torch.cuda.is_available() else 0
        pipe = ssd_example_pipeline(api, device, args.data, args.batch_size, args.threads, device_id)
        iterator = DALIGenericIterator([pipe], ["images", "boxes", "labels"], reader_name="Reader", auto_reset=True)
        return _time_steps(args, started, imported, synchronize, _epochs(iterator), lambda step: step[0]["images"])
    if kind == "speech":  # examples/speech_features.py's feature pipeline on a NeMo manifest
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        from speech_features import speech_pipeline
        imported = time.time()
        device_id = None if device == "cpu" and not torch.cuda.is_available() else 0
        pipe = speech_pipeline(api, os.path.join(args.data, "manifest.json"), args.batch_size, args.threads, device,
                               device_id)
        pipe.build()
        return _time_steps(args, started, imported, synchronize, _pipeline_runs(pipe), lambda step: _Counted(step[0]))
    if kind in ("video", "clip"):  # readers.video alone, or examples/action_recognition.py's clip pipeline
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        from action_recognition import clip_pipeline
        imported = time.time()
        device_id = None if device == "cpu" and not torch.cuda.is_available() else 0
        if kind == "clip":
            pipe = clip_pipeline(api, args.data, args.batch_size, args.threads, device, device_id)
        else:
            @api.pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=device_id)
            def video_pipeline():
                return api.fn.readers.video(device=device, file_root=args.data, sequence_length=8,
                                            random_shuffle=True, initial_fill=16, name="Reader")[0]
            pipe = video_pipeline()
        pipe.build()
        return _time_steps(args, started, imported, synchronize, _pipeline_runs(pipe),
                           lambda step: _Counted(step[0], frames=8))
    if kind == "maskrcnn":
        imported = time.time()
        device_id = None if device == "cpu" and not torch.cuda.is_available() else 0
        pipe = maskrcnn_pipeline(api, device, args.data, args.batch_size, args.threads, device_id)
        pipe.build()
        return _time_steps(args, started, imported, synchronize, _pipeline_runs(pipe), lambda step: _Counted(step[0]))
    if kind == "aug":  # makes api.auto_aug.rand_augment importable as an attribute, as in a DALI program
        importlib.import_module(api.__name__ + ".auto_aug.rand_augment")
    imported = time.time()
    device_id = None if device == "cpu" and not torch.cuda.is_available() else 0
    pipe = build_pipeline(api, kind, device, args.data, args.batch_size, args.threads, decoder_args, device_id)
    iterator = DALIClassificationIterator([pipe], reader_name="Reader", auto_reset=True)

    _time_steps(args, started, imported, synchronize, _epochs(iterator), lambda step: step[0]["data"])


class _Counted:
    """What _time_steps reads of a batch of Pipeline.run(): its number of samples, and where it is."""

    def __init__(self, batch, frames: int = 1):
        self.shape = (len(batch) * frames,)
        self.device = "gpu" if type(batch).__name__.endswith("GPU") or getattr(batch, "is_cuda", False) else "cpu"


def _epochs(iterator):
    """Batches without end: with auto_reset each epoch ends with StopIteration and the next starts at once."""
    while True:
        yield from iterator


def _time_steps(args, started: float, imported: float, synchronize, steps, images_of) -> None:
    """Times ``steps`` (an endless generator of batches) after a warm-up; prints the RESULT line."""
    step = next(steps)
    first_batch = time.time()
    for _ in range(args.warmup):
        step = next(steps)
    synchronize()
    cpu_before, timed_from = _tree_cpu_seconds(os.getpid()), time.perf_counter()
    images = 0
    while time.perf_counter() - timed_from < args.seconds:
        step = next(steps)
        images += images_of(step).shape[0]
    synchronize()
    seconds = time.perf_counter() - timed_from
    cpu = _tree_cpu_seconds(os.getpid()) - cpu_before
    print("RESULT " + json.dumps({
        "images_per_second": images / seconds, "images": images, "seconds": seconds, "cpu_cores": cpu / seconds,
        "import_s": imported - started, "pipeline_to_first_batch_s": first_batch - imported,
        "start_to_first_batch_s": first_batch - started, "output_device": str(images_of(step).device)}), flush=True)
    steps.close()


# ---- the driver -------------------------------------------------------------------------------------
class GpuMemoryMonitor(threading.Thread):
    """Peak GPU memory of a process tree through NVML (every allocator, DALI's and PyTorch's alike)."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.peak, self._finished = root, 0, threading.Event()

    def run(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            return
        while not self._finished.wait(0.2):
            try:
                pids = {self.root} | set(_descendants(self.root))
                used = sum(p.usedGpuMemory or 0 for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                           if p.pid in pids)
                self.peak = max(self.peak, used)
            except Exception:
                pass

    def stop(self):
        self._finished.set()
        self.join()


def _descendants(root: int) -> list[int]:
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                children = [int(child) for child in handle.read().split()]
        except FileNotFoundError:
            continue
        found.extend(children)
        pending.extend(children)
    return found


def measure(args, case: str, runner: str, cores: list | None = None) -> dict:
    """One case in a process of its own; ``cores``: the CPUs it is held to (and its thread count), or
    None for the machine's and ``--threads``."""
    data = args.coco if "-ssd" in case or "-maskrcnn" in case else args.speech if "-speech" in case else \
        args.video if "-video" in case or "-clip" in case else args.data
    if data is None:
        raise SystemExit(f"case {case} reads a COCO-format set (--coco DIR, benchmarks/make_coco.py makes one) or a "
                         "speech corpus (--speech DIR, benchmarks/make_speech.py)")
    threads = len(cores) if cores else args.threads
    command = [sys.executable, os.path.abspath(__file__), "--one", "--case", case, "--runner", runner,
               "--data", data, "--batch-size", str(args.batch_size), "--threads", str(threads),
               "--seconds", str(args.seconds), "--warmup", str(args.warmup)]
    started = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, SIDE_BY_SIDE_STARTED=repr(started)),
                               preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
    monitor = GpuMemoryMonitor(process.pid)
    monitor.start()
    output = process.stdout.read()
    process.wait()
    monitor.stop()
    lifetime = time.time() - started
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    if process.returncode != 0 or not lines:
        print(f"  {case} {runner}: failed (exit {process.returncode})\n{output[-3000:]}", flush=True)
        return {"case": case, "runner": runner, "failed": True, "output": output[-3000:],
                "cores": len(cores) if cores else None}
    result = dict(json.loads(lines[-1][7:]), case=case, runner=runner, process_s=lifetime,
                  peak_gpu_memory_gib=monitor.peak / 2**30, cores=len(cores) if cores else None)
    print(f"  {case:9s} {runner:12s} {result['images_per_second']:9,.0f} images/s  "
          f"{result['cpu_cores']:5.1f} cores  {result['peak_gpu_memory_gib']:5.2f} GiB  first batch "
          f"{result['pipeline_to_first_batch_s']:5.1f} s after Pipeline(), {result['start_to_first_batch_s']:5.1f} s "
          f"after start; process {lifetime:5.1f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--coco", help="a COCO-format folder for the ssd cases (images/, annotations/instances.json)")
    parser.add_argument("--speech", help="a folder with a NeMo manifest.json for the speech cases")
    parser.add_argument("--video", help="a folder of class folders of video files for the video and clip cases")
    parser.add_argument("--cases", default="gpu-train,gpu-val,cpu-train,cpu-val")
    parser.add_argument("--runners", default="penstock,dali")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--cores", help="comma-separated core counts: each case once per count, held to that many "
                                        "cores with as many threads")
    parser.add_argument("--json")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--runner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return run_case(args)
    available = sorted(os.sched_getaffinity(0))
    counts = [int(count) for count in args.cores.split(",")] if args.cores else [None]
    if any(count is not None and not 0 < count <= len(available) for count in counts):
        raise SystemExit(f"--cores: this machine has {len(available)} cores to give")
    results = []
    runners = args.runners.split(",")
    for round_index in range(args.rounds):
        order = runners if round_index % 2 == 0 else runners[::-1]
        for count in counts:
            for case in args.cases.split(","):
                for runner in order:
                    cores = available[:count] if count else None
                    results.append(dict(measure(args, case, runner, cores), round=round_index + 1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    threads = f"cores {args.cores}, as many threads" if args.cores else f"{args.threads} threads"
    print(f"\n{args.data}; batch {args.batch_size}; {threads}; {args.seconds:g} s timed after "
          f"{args.warmup} warm-up batches per case; FP16 CHW; one process per case\n")
    print("| case | round | cores | runner | images/s | vs DALI | CPU cores busy | GPU memory (GiB) | Pipeline() to "
          "first batch (s) | start to first batch (s) | process (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    dali = {(r["case"], r["round"], r["cores"]): r["images_per_second"] for r in results
            if r["runner"] == "dali" and not r.get("failed")}
    for r in results:
        cores = r["cores"] or "all"
        if r.get("failed"):
            print(f"| {r['case']} | {r['round']} | {cores} | {r['runner']} | failed | | | | | | |")
            continue
        peer = dali.get((r["case"], r["round"], r["cores"]))
        ratio = f"{r['images_per_second'] / peer:.2f}x" if peer and r["runner"] != "dali" else "-"
        print(f"| {r['case']} | {r['round']} | {cores} | {r['runner']} | {r['images_per_second']:,.0f} | {ratio} | "
              f"{r['cpu_cores']:.1f} | {r['peak_gpu_memory_gib']:.2f} | {r['pipeline_to_first_batch_s']:.1f} | "
              f"{r['start_to_first_batch_s']:.1f} | {r['process_s']:.1f} |")


if __name__ == "__main__":
    main()
