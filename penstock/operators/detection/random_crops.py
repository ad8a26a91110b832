"""Random crops that keep boxes: ``random_bbox_crop`` (DALI's draws of a window for a sample's boxes,
BoxCropper) and ``ssd_random_crop`` (DALI's older, fixed form of it, cropping the image itself)."""
from __future__ import annotations

import sys

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.draws import SampleStreams
from penstock.operators.detection.box_arrays import AXES, EXTENT, HIGH, boxes_to_corners, check_boxes, corners_to_boxes
from penstock.runtime import native
from penstock.schema import Arg, ArgError, Arguments, OpSchema


# random_bbox_crop draws and scores several rounds at once, up to this many windows (and rounds)
WINDOWS_AT_ONCE = 256
MOST_ROUNDS_AT_ONCE = 8


def _layout(args: dict, columns: int) -> str:
    dimensions = columns // 2
    ltrb = args.ltrb is not False
    layout = args.bbox_layout or (("xyXY", "xyzXYZ") if ltrb else ("xyWH", "xyzWHD"))[dimensions - 2]
    expected = set(AXES[:dimensions]) | (set(HIGH[:dimensions]) if set(layout) & set(HIGH) else set(EXTENT[:dimensions]))
    if len(layout) != columns or set(layout) != expected:
        raise ValueError(f"random_bbox_crop: bbox_layout {layout!r} does not describe boxes of {columns} values "
                         f"(use e.g. 'xyXY' or 'xyWH', or 'xyzXYZ' / 'xyzWHD' in 3-D)")
    return layout


def _product(values: np.ndarray) -> np.ndarray:
    """The product over the first axis (of 2 or 3): written out, as numpy's reduction over so short
    an axis costs several times the arithmetic; the same order of multiplications as np.prod."""
    product = values[0] * values[1]
    return product * values[2] if len(values) == 3 else product


class BoxCropper:
    """random_bbox_crop's draws for one set of arguments (DALI's rules: an option per round,
    num_attempts candidate windows per round, the last valid one kept; docs/operators.md). Its
    cost is numpy's per-call overhead on small arrays, so each step is as few calls as it can be."""

    def __init__(self, args: dict, dimensions: int):
        self.args, self.dimensions = args, dimensions
        self.pairs = [(0, 1), (0, 2), (1, 2)][:1 if dimensions == 2 else 3]
        ratios = list(args.aspect_ratio or (1.0, 1.0))
        self.ratios = [ratios[2 * k:2 * k + 2] if len(ratios) >= 2 * k + 2 else ratios[:2] for k in range(3)]
        self.input_shape = self._xyz(args.input_shape)
        self.crop_shape = self._xyz(args.crop_shape)
        self.pixels = self.input_shape if self.input_shape is not None else np.ones(dimensions)
        self.fixed = [(i, j, r[0]) for (i, j), r in zip(self.pairs, self.ratios) if r[0] == r[1]]
        self.thresholds = np.array(args.thresholds, np.float64)
        # the last option, when allowed, is no crop at all
        # without allow_no_crop, a fixed crop_shape takes a crop every time (as DALI)
        allow_no_crop = args.allow_no_crop if args.allow_no_crop is not None else self.crop_shape is None
        self.options = len(self.thresholds) + allow_no_crop
        self.no_crop = len(self.thresholds) if allow_no_crop else -1
        self.per_round, self.total = args.num_attempts, args.total_num_attempts
        self.rounds = max(1, min(MOST_ROUNDS_AT_ONCE, WINDOWS_AT_ONCE // self.per_round))
        self.iou = args.threshold_type == "iou"
        self.all_boxes = args.all_boxes_above_threshold
        self.prune = args.bbox_prune_threshold
        self.native = native.score_windows()

    def _xyz(self, values):
        """A shape given in shape_layout order ('WH' by default) in x, y, z order."""
        if values is None or not len(values):
            return None
        if len(values) != self.dimensions or min(values) < 0:
            raise ValueError(f"random_bbox_crop: a shape of {self.dimensions} non-negative values for "
                             f"{self.dimensions}-D boxes, got {list(values)}")
        layout = self.args.shape_layout or "WHD"[:self.dimensions]
        return np.array([values[layout.index(EXTENT[d])] for d in range(self.dimensions)], np.float64)

    def windows(self, rng, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` candidate windows at once: (anchors [A, D], extents [A, D], allowed [A]),
        relative to the image; a window the aspect ratios reject is not allowed."""
        dimensions = self.dimensions
        if self.crop_shape is not None:
            span = self.input_shape - self.crop_shape
            anchors = rng.integers(np.minimum(0, span), np.maximum(0, span) + 1, (count, dimensions))
            return anchors / self.input_shape, np.tile(self.crop_shape / self.input_shape, (count, 1)), \
                np.ones(count, bool)
        low, high = self.args.scaling or (1.0, 1.0)
        draws = rng.uniform(low, high, (count, dimensions))
        extents, pixels = draws, self.pixels
        if self.fixed:  # one side follows another at the fixed ratio, in random order; the longest is the largest draw
            extents = draws.copy()
            for i, j, ratio in self.fixed:
                first = rng.integers(2, size=count).astype(bool)
                extents[:, j] = np.where(first, extents[:, i] * pixels[i] / (ratio * pixels[j]), extents[:, j])
                extents[:, i] = np.where(first, extents[:, i], extents[:, j] * ratio * pixels[j] / pixels[i])
            extents *= (draws.max(1) / extents.max(1))[:, None]
        sizes = extents * pixels if self.input_shape is not None else extents
        allowed = None
        for (i, j), (least, most) in zip(self.pairs, self.ratios):
            ratio = sizes[:, i] / sizes[:, j]
            fits = (least <= ratio) & (ratio <= most)
            allowed = fits if allowed is None else allowed & fits
        # uniform between 0 and 1 - extent, on whichever side of 0 that is
        anchors = (1.0 - extents) * rng.random((count, dimensions))
        return anchors, extents, allowed

    def evaluate(self, boxes: "_CropBoxes", anchors, extents) -> tuple[np.ndarray, np.ndarray]:
        """(each window's score against the boxes [A], which windows keep each box [N, A]). The
        tables put the windows on the last axis: numpy's loops run along it, and are slow on a
        last axis of 2 or 3."""
        # [D, A], contiguous: numpy's broadcasting loops are several times slower on strided rows
        anchors, extents = np.ascontiguousarray(anchors.T), np.ascontiguousarray(extents.T)
        if self.native is not None:  # one C call: the numpy path's dozen calls are most of a sample's time
            count, windows = boxes.count, anchors.shape[1]
            scores, kept = np.empty(windows), np.empty((count, windows), np.uint8)
            self.native(boxes.low.ctypes.data, boxes.high.ctypes.data, boxes.volumes.ctypes.data,
                        boxes.centres.ctypes.data, count, self.dimensions, anchors.ctypes.data, extents.ctypes.data,
                        windows, int(self.iou), int(self.all_boxes), int(self.prune is not None),
                        float(self.prune or 0.0), scores.ctypes.data, kept.ctypes.data)
            return scores, kept.view(bool)
        far = anchors + extents
        overlap = np.minimum(boxes.high, far[:, None])  # [D, N, A]
        overlap -= np.maximum(boxes.low, anchors[:, None])
        np.maximum(overlap, 0.0, out=overlap)
        inter = _product(overlap)  # [N, A]
        if self.iou:
            union = _product(extents) + boxes.volumes - inter
        else:
            union = np.broadcast_to(boxes.volumes, inter.shape)
        # 0 / 0 (a box of no area) never passes
        table = np.divide(inter, union, out=np.full(inter.shape, -np.inf), where=union > 0)
        scores = table.min(0) if self.all_boxes else table.max(0)
        if self.prune is None:  # the box's centre inside the window (the far side open)
            inside = (boxes.centres >= anchors[:, None]) & (boxes.centres < far[:, None])
            kept = _product(inside)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                kept = (inter > 0) & (inter / boxes.volumes >= self.prune)
        return scores, kept

    def crop(self, boxes: "_CropBoxes", rng):
        """(anchor, extent, indices of the kept boxes). Rounds are drawn and scored several at a
        time (their windows as one array), then taken in order: the first round that ends the
        search decides, exactly as one round after another would, for a fraction of the calls."""
        per_round, total, attempts, rounds = self.per_round, self.total, 0, self.rounds
        any_boxes = boxes.count > 0
        best, best_score = None, -np.inf
        while True:
            if total > 0:  # the rounds the attempt limit leaves
                rounds = min(rounds, -(-(total - attempts) // per_round))
            options = rng.integers(self.options, size=rounds).tolist()
            scored = options.index(self.no_crop) if self.no_crop in options else rounds  # the rounds before a no-crop one
            if scored:
                anchors, extents, allowed = self.windows(rng, scored * per_round)
                if any_boxes:
                    scores, kept = self.evaluate(boxes, anchors, extents)
                    passing = scores.reshape(scored, per_round) >= self.thresholds[options[:scored]][:, None]
                    valid = allowed & passing.reshape(-1) & kept.any(0)
                else:  # nothing to keep in view: the first window the ratios allow
                    valid = allowed
                found = np.flatnonzero(valid)
                if len(found):
                    if not any_boxes:
                        chosen = int(found[0])
                        return anchors[chosen], extents[chosen], np.arange(0)
                    # the last valid window of the first round with one
                    round_end = (int(found[0]) // per_round + 1) * per_round
                    chosen = int(found[int(np.searchsorted(found, round_end)) - 1])
                    return anchors[chosen], extents[chosen], np.flatnonzero(kept[:, chosen])
                if any_boxes:
                    scores = np.where(allowed, scores, -np.inf)
                    top = int(np.argmax(scores))  # the first window of the best score
                    if scores[top] > best_score:
                        best, best_score = (anchors[top], extents[top], np.flatnonzero(kept[:, top])), scores[top]
            if scored < rounds:  # a no-crop round: the whole image
                return np.zeros(self.dimensions), np.ones(self.dimensions), np.arange(boxes.count)
            attempts += rounds * per_round
            if total > 0 and attempts >= total:
                # on stderr as DALI's warning (a Python warning would stop programs that make warnings errors)
                print(f"[random_bbox_crop] Could not find a valid cropping window to satisfy the specified "
                      f"requirements (attempted {min(attempts, total)} times). Using the best cropping window so far "
                      f"(best_metric={best_score:g})", file=sys.stderr, flush=True)
                return best if best is not None else (np.zeros(self.dimensions), np.zeros(self.dimensions),
                                                      np.arange(0))


class _CropBoxes:
    """One sample's boxes as random_bbox_crop scores them: corners, volumes and centres, shaped
    [D, N, 1] ([N, 1]) to meet windows [D, A]."""

    __slots__ = ("count", "low", "high", "volumes", "centres")

    def __init__(self, low: np.ndarray, high: np.ndarray):
        self.count = len(low)
        self.low, self.high = np.ascontiguousarray(low.T)[:, :, None], np.ascontiguousarray(high.T)[:, :, None]
        self.volumes = _product(self.high - self.low)
        self.centres = (self.low + self.high) / 2


def _random_bbox_crop(args: dict, boxes: np.ndarray, labels, rng, cropper_of=BoxCropper) -> tuple:
    boxes = np.asarray(boxes, np.float32)
    if boxes.ndim == 1 and boxes.size in (0, 4, 6):
        boxes = boxes.reshape(-1, 4 if boxes.size != 6 else 6)
    if boxes.ndim != 2 or boxes.shape[1] not in (4, 6):
        raise ValueError(f"random_bbox_crop: takes boxes as a [N, 4] (or 3-D [N, 6]) array, got shape {boxes.shape}")
    layout = _layout(args, boxes.shape[1])
    low, high = boxes_to_corners(boxes, layout)
    cropper = cropper_of(args, boxes.shape[1] // 2)
    # as DALI: each start at least 0 and each end at most 1 (in float32: x + w as DALI adds them), the
    # corners in any order; NaN fails every comparison, so it is refused
    inside = ((low >= 0) & (high.astype(np.float32) <= 1)).all(1)
    if not inside.all():
        bad = int(np.flatnonzero(~inside)[0])
        raise ValueError(f"random_bbox_crop: box {bad} {boxes[bad].tolist()} is out of bounds [0, 1] ({layout}); it "
                         "takes boxes relative to the image")
    anchor, extent, kept = cropper.crop(_CropBoxes(low, high), rng)
    far = anchor + extent
    safe = np.where(extent > 0, extent, 1.0)
    # clipped to [0, 1] by ufuncs: np.clip's Python wrapper costs twice the work here
    new_low = np.minimum(np.maximum((np.maximum(low[kept], anchor) - anchor) / safe, 0.0), 1.0)
    new_high = np.minimum(np.maximum((np.minimum(high[kept], far) - anchor) / safe, 0.0), 1.0)
    scale = cropper.input_shape if cropper.crop_shape is not None else None
    outputs = [(anchor * scale if scale is not None else anchor).astype(np.float32),
               (extent * scale if scale is not None else extent).astype(np.float32),
               corners_to_boxes(new_low, new_high, layout)]
    if labels is not None:
        outputs.append(np.asarray(labels)[kept])
    if args.output_bbox_indices:
        outputs.append(kept.astype(np.int32))
    return tuple(outputs)


def _check_crop(static: dict, per_sample: frozenset) -> None:
    if not static.thresholds or any(not 0 <= t <= 1 for t in static.thresholds):
        raise ArgError(f"argument 'thresholds': {list(static.thresholds)}; give values in [0, 1]")
    for name, lengths in (("aspect_ratio", (2, 6)), ("scaling", (2,))):
        values = list(static[name] or (1.0, 1.0))
        if len(values) not in lengths:
            raise ArgError(f"argument '{name}': {values}; give {' or '.join(map(str, lengths))} values ((min, max) "
                           "pairs; 6 for the xy, xz and yz aspect ratios of 3-D boxes)")
        if any(v < 0 for v in values) or \
                any(values[k] > values[k + 1] for k in range(0, len(values), 2)):
            raise ArgError(f"argument '{name}': {values}; give (min, max) pairs with 0 <= min <= max")
    def given(name):  # per sample, or a non-empty list
        return name in per_sample or bool(static.get(name))
    if given("crop_shape") and not given("input_shape"):
        raise ArgError("argument 'crop_shape' needs 'input_shape'")
    if given("crop_shape") and static.allow_no_crop:
        raise ArgError("argument 'crop_shape' takes a crop every time: leave allow_no_crop out, or False")
    for name in ("aspect_ratio", "scaling"):
        if given("crop_shape") and static[name] is not None:
            raise ArgError(f"argument '{name}' is incompatible with providing the crop shape explicitly (crop_shape)")
    if static.ltrb is not None and static.bbox_layout is not None:
        raise ArgError("arguments 'ltrb' and 'bbox_layout' exclude each other; give bbox_layout")
    if static.total_num_attempts == 0 or static.total_num_attempts < -1:
        raise ArgError("argument 'total_num_attempts': give a positive number, or -1 for no limit")
    if static.bbox_prune_threshold is not None and not 0 <= static.bbox_prune_threshold <= 1:
        raise ArgError("argument 'bbox_prune_threshold': give a value in [0, 1]")


class RandomBBoxCropDeclaration:
    def declare_outputs(self, inputs):
        specs = [OutputSpec(np.dtype(np.float32), 1, ""), OutputSpec(np.dtype(np.float32), 1, ""),
                 OutputSpec(np.dtype(np.float32), 2, "")]
        if len(inputs) > 1:
            specs.append(inputs[1].but(layout=""))
        if self.args.output_bbox_indices:
            specs.append(OutputSpec(np.dtype(np.int32), 1, ""))
        return tuple(specs)


registry.register_schema(OpSchema(
    name="random_bbox_crop", class_name="RandomBBoxCrop",
    doc="Chooses a random crop window that keeps the boxes (relative coordinates) as asked, and gives the "
        "window and the boxes in it. Each round draws one of ``thresholds`` (or no crop at all, with "
        "``allow_no_crop``) and ``num_attempts`` windows of a size from ``scaling`` and ``aspect_ratio``; "
        "the last window whose IoU (or overlap) with every box (or any box) reaches the threshold, keeping "
        "a box, wins; else the next round. Boxes whose centre (or overlap, with ``bbox_prune_threshold``) "
        "leaves the window are dropped; the others are clipped and made relative to the window. Outputs: "
        "anchor and shape of the window (relative, x y [z] order; in pixels with ``crop_shape``), the boxes, "
        "the labels of the kept boxes (when given) and their indices (``output_bbox_indices``).",
    args=(Arg("thresholds", "floats", (0.0,), "The minimum IoU or overlap an option asks of the window."),
          Arg("threshold_type", "str", "iou", "'iou' or 'overlap' (the part of the box inside the window).",
              choices=("iou", "overlap")),
          Arg("aspect_ratio", "floats", None, "(min, max) of the window's width / height (3-D: xy, xz, yz; "
              "default (1, 1); not with crop_shape)."),
          Arg("scaling", "floats", None, "(min, max) of the window's sides relative to the image's (default "
              "(1, 1); not with crop_shape)."),
          Arg("num_attempts", "int", 1, "Windows drawn per round.", min=1),
          Arg("total_num_attempts", "int", -1, "Stop after this many windows (-1: no limit) and take the best.",
              min=-1),
          Arg("all_boxes_above_threshold", "bool", True, "Every box must reach the threshold; else one box."),
          Arg("allow_no_crop", "bool", None, "Taking the whole image is one of the options (default: True, "
              "False with crop_shape, which it must not be given True with)."),
          Arg("bbox_layout", "str", None, "The boxes' layout, e.g. 'xyXY' or 'xyWH' (default from ltrb).",
              nullable=True),
          Arg("ltrb", "bool", None, "Boxes as [left, top, right, bottom] (default True; not with bbox_layout)."),
          Arg("bbox_prune_threshold", "float", None, "Keep a box when this part of it is inside the window "
              "(default: when its centre is).", nullable=True),
          Arg("output_bbox_indices", "bool", False, "Also output the indices of the kept boxes."),
          Arg("input_shape", "ints", None, "The image's size (shape_layout order), for aspect ratios in pixels "
              "and for crop_shape.", per_sample=True, input_types=(np.dtype(np.int32),)),
          Arg("crop_shape", "ints", None, "A fixed window size in pixels (shape_layout order).", per_sample=True,
              input_types=(np.dtype(np.int32),)),
          Arg("shape_layout", "str", None, "Order of input_shape and crop_shape (default 'WH' / 'WHD').",
              nullable=True),
          Arg("quiet", "bool", False, "Accepted for DALI compatibility: as DALI 2.4, the line on stderr when no "
              "window meets the thresholds within total_num_attempts (and the best one drawn is taken) is written "
              "whatever it says.")),
    num_inputs=(1, 2), num_outputs=lambda static, inputs: 3 + (inputs > 1) + bool(static.output_bbox_indices),
    outputs_follow_inputs=True, input_names=("boxes", "labels"), checks=(_check_crop,)))


@registry.register("random_bbox_crop", "cpu")
class RandomBBoxCrop(SampleStreams, RandomBBoxCropDeclaration, SampleOperator):
    _last_cropper = (None, 0, None)  # (arguments, dimensions, their BoxCropper): made once, not per sample

    def run(self, inputs, args, sample, out=None):
        rng = self.stream(sample)
        return _random_bbox_crop(args, inputs[0], inputs[1] if len(inputs) > 1 else None, rng, self._cropper_of)

    def _cropper_of(self, args: dict, dimensions: int) -> BoxCropper:
        made_for, made_dimensions, cropper = self._last_cropper
        if made_for is not args or made_dimensions != dimensions:
            cropper = BoxCropper(args, dimensions)
            self._last_cropper = (args, dimensions, cropper)
        return cropper


# ---- ssd_random_crop (DALI's older, fixed form of random_bbox_crop, cropping the image itself) ---------
SSD_CROP = {"thresholds": (0.1, 0.3, 0.5, 0.7, 0.9, 0.0), "threshold_type": "iou", "aspect_ratio": (0.5, 2.0),
            "scaling": (0.3, 1.0), "total_num_attempts": -1, "all_boxes_above_threshold": True,
            "allow_no_crop": True, "bbox_prune_threshold": None, "input_shape": None, "crop_shape": None,
            "shape_layout": None}


def _ssd_random_crop(image: np.ndarray, boxes: np.ndarray, labels: np.ndarray, num_attempts: int, rng) -> tuple:
    boxes = check_boxes(np, np.asarray(boxes), "ssd_random_crop")
    if image.ndim != 3:
        raise ValueError(f"ssd_random_crop: takes HWC images, got shape {image.shape}")
    low, high = boxes[:, :2].astype(np.float64), boxes[:, 2:].astype(np.float64)
    anchor, extent, kept = BoxCropper(Arguments({**SSD_CROP, "num_attempts": num_attempts}), 2).crop(_CropBoxes(low, high), rng)
    height, width = image.shape[:2]
    x0, y0 = int(round(anchor[0] * width)), int(round(anchor[1] * height))
    x1, y1 = int(round((anchor[0] + extent[0]) * width)), int(round((anchor[1] + extent[1]) * height))
    new_low = np.clip((np.maximum(low[kept], anchor) - anchor) / extent, 0.0, 1.0)
    new_high = np.clip((np.minimum(high[kept], anchor + extent) - anchor) / extent, 0.0, 1.0)
    return (np.ascontiguousarray(image[y0:max(y1, y0 + 1), x0:max(x1, x0 + 1)]),
            np.concatenate([new_low, new_high], 1).astype(np.float32).reshape(-1, 4), np.asarray(labels)[kept])


registry.register_schema(OpSchema(
    name="ssd_random_crop", class_name="SSDRandomCrop",
    doc="SSD's random crop (DALI's older operator; random_bbox_crop is its general form): each round draws "
        "no crop or a minimum IoU of 0.1, 0.3, 0.5, 0.7, 0.9 or 0, and num_attempts windows of sides 0.3-1 "
        "of the image's with an aspect ratio of 0.5-2, until one reaches the IoU with every box and keeps "
        "a box whose centre it holds; outputs the cropped image, its boxes (ltrb, relative to the crop) "
        "and their labels.",
    args=(Arg("num_attempts", "int", 1, "Windows drawn per round.", min=1),),
    num_inputs=(3, 3), num_outputs=3, input_names=("images", "boxes", "labels")))


@registry.register("ssd_random_crop", "cpu")
class SSDRandomCrop(SampleStreams, SampleOperator):
    def declare_outputs(self, inputs):
        return inputs[0].but(shape=None), OutputSpec(np.dtype(np.float32), 2, ""), inputs[2].but(layout="")


    def run(self, inputs, args, sample, out=None):
        rng = self.stream(sample)
        return _ssd_random_crop(inputs[0], inputs[1], inputs[2], args.num_attempts, rng)
