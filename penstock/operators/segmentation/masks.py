"""Segmentation helpers: ``segmentation.select_masks`` (the polygons of chosen masks, in
readers.coco's polygons/vertices format), ``segmentation.random_mask_pixel`` (a random pixel of
a mask's foreground, to centre a crop on an object) and ``roi_random_crop`` (a window placed at
random around a region of interest, as segmentation pipelines crop volumes around an object)."""
from __future__ import annotations

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.draws import SampleStreams
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


def select_masks(mask_ids: np.ndarray, polygons: np.ndarray, vertices: np.ndarray, reindex: bool):
    """(polygons, vertices) of the masks named in ``mask_ids``, in the order of mask_ids (a mask's
    polygons in their own order), their vertices packed; with ``reindex`` each polygon's mask id
    becomes the position of its id in mask_ids."""
    mask_ids = np.asarray(mask_ids).reshape(-1)
    polygons = np.asarray(polygons).reshape(-1, 3)
    vertices = np.asarray(vertices)
    if len(set(mask_ids.tolist())) != len(mask_ids):
        raise ValueError(f"segmentation.select_masks: mask_ids {mask_ids.tolist()} name a mask twice")
    known = set(polygons[:, 0].tolist())
    unknown = [int(i) for i in mask_ids if int(i) not in known]
    if unknown:
        raise ValueError(f"segmentation.select_masks: mask id {unknown[0]} has no polygon (ids present: {sorted(known)})")
    position = {int(mask_id): index for index, mask_id in enumerate(mask_ids)}
    chosen = sorted((row for row in polygons if int(row[0]) in position), key=lambda row: position[int(row[0])])
    out_polygons, pieces, start = [], [], 0
    for mask_id, first, end in chosen:
        if not 0 <= first <= end <= len(vertices):
            raise ValueError(f"segmentation.select_masks: polygon [{mask_id}, {first}, {end}] reaches past the "
                             f"{len(vertices)} vertices")
        pieces.append(vertices[first:end])
        out_polygons.append((position[int(mask_id)] if reindex else int(mask_id), start, start + end - first))
        start += end - first
    out_vertices = np.concatenate(pieces) if pieces else np.zeros((0,) + vertices.shape[1:], vertices.dtype)
    return np.array(out_polygons, np.int32).reshape(-1, 3), np.ascontiguousarray(out_vertices)


registry.register_schema(OpSchema(
    name="segmentation.select_masks", class_name="segmentation.SelectMasks",
    doc="Keeps the polygons of the masks whose ids are in the first input (readers.coco's polygons [P, 3] "
        "and vertices [V, D] format): outputs polygons and vertices with only those, vertices packed.",
    args=(Arg("reindex_masks", "bool", False, "Replace each mask id by its position in mask_ids."),),
    num_inputs=(3, 3), num_outputs=2, input_names=("mask_ids", "polygons", "vertices")))


@registry.register("segmentation.select_masks", "cpu")
class SelectMasks(SampleOperator):
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.int32), 2, ""), inputs[2].but(layout="")

    def run(self, inputs, args, sample, out=None):
        return select_masks(*inputs, args.reindex_masks)


def random_mask_pixel(mask: np.ndarray, args: dict, rng: np.random.Generator) -> np.ndarray:
    """The coordinates (int64, one per axis of the mask) of a pixel drawn uniformly from the mask's
    foreground (value == ``value`` if given, else > ``threshold``) when ``foreground``, else from
    the whole mask; a mask without foreground gives a pixel drawn from the whole mask."""
    mask = np.asarray(mask)
    if args.foreground:
        selected = mask == args.value if args.value is not None else mask > args.threshold
        count = int(np.count_nonzero(selected))
        if count:
            flat = np.flatnonzero(selected)[rng.integers(count)]
            return np.array(np.unravel_index(flat, mask.shape), np.int64)
    return np.array([rng.integers(size) if size else 0 for size in mask.shape], np.int64)


registry.register_schema(OpSchema(
    name="segmentation.random_mask_pixel", class_name="segmentation.RandomMaskPixel",
    doc="A random pixel of a mask: its coordinates (int64, one per axis, in the mask's own order), drawn "
        "uniformly from the foreground (``foreground`` = 1) or from the whole mask.",
    args=(Arg("foreground", "int", 0, "Draw from the foreground (1) or from every pixel (0).", per_sample=True,
              min=0, max=1),
          Arg("value", "int", None, "The foreground is the pixels equal to this (default: above threshold).",
              nullable=True, per_sample=True),
          Arg("threshold", "float", 0.0, "The foreground is the pixels above this (when value is not given).",
              per_sample=True)),
    num_inputs=(1, 1), input_names=("mask",),
    checks=(lambda static, per_sample: _value_or_threshold(static, per_sample),)))


def _value_or_threshold(static: dict, per_sample: frozenset) -> None:
    gave_value = static.get("value") is not None or "value" in per_sample
    gave_threshold = static.get("threshold") not in (None, 0.0) or "threshold" in per_sample
    if gave_value and gave_threshold:
        raise ArgError("give either 'value' or 'threshold', not both")


@registry.register("segmentation.random_mask_pixel", "cpu")
class RandomMaskPixel(SampleStreams, SampleOperator):
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.int64), 1, "")


    def run(self, inputs, args, sample, out=None):
        return random_mask_pixel(inputs[0], args, self.stream(sample))


# ---- random_object_bbox -------------------------------------------------------------------------------
MASK_TYPES = tuple(np.dtype(name) for name in ("bool", "uint8", "int8", "uint16", "int16", "uint32", "int32"))
MASK_MAX_NDIM = 6


def object_boxes(selected: np.ndarray) -> np.ndarray:
    """(start..., end..., elements) of each connected blob of ``selected`` (neighbours along every axis
    and diagonal). Planes (at most two axes longer than 1) go through OpenCV, which loads fast;
    volumes through scipy."""
    planar = [axis for axis, size in enumerate(selected.shape) if size != 1]
    if len(planar) <= 2:
        import cv2
        plane = selected.reshape([selected.shape[axis] for axis in planar] + [1] * (2 - len(planar)))
        _, _, stats, _ = cv2.connectedComponentsWithStats(plane.astype(np.uint8), connectivity=8)
        stats = stats[1:]  # label 0 is what is not selected
        boxes = np.zeros((len(stats), 2 * selected.ndim + 1), np.int64)
        boxes[:, selected.ndim:2 * selected.ndim] = selected.shape
        for index, axis in enumerate(planar):  # cv2's stats: x, y, width, height, area
            boxes[:, axis] = stats[:, 1 - index]
            boxes[:, selected.ndim + axis] = stats[:, 1 - index] + stats[:, 3 - index]
        boxes[:, -1] = stats[:, 4]
        return boxes
    from scipy import ndimage
    labels, count = ndimage.label(selected, structure=np.ones((3,) * selected.ndim, bool))
    sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    return np.array([[part.start for part in box] + [part.stop for part in box] + [size]
                     for box, size in zip(ndimage.find_objects(labels), sizes)],
                    np.int64).reshape(-1, 2 * selected.ndim + 1)


def class_table(args: dict) -> tuple[list[int], list[float], int]:
    """(classes, weights, background) as DALI: class_weights alone name classes 0, 1, ... skipping the
    background; classes alone weigh 1 each; a background not given that is one of the classes becomes
    one less than the smallest."""
    given_background = args.background is not None
    background = int(args.background) if given_background else 0
    classes = [int(c) for c in np.ravel(args.classes)] if args.classes is not None else None
    weights = [float(w) for w in np.ravel(args.class_weights)] if args.class_weights is not None else None
    if classes is not None:
        if background in classes:
            if given_background:
                raise ValueError(f"segmentation.random_object_bbox: class label {background} is the background "
                                 "label; give another background or leave it out of 'classes'")
            background = min(classes) - 1
        if weights is not None and len(weights) != len(classes):
            raise ValueError(f"segmentation.random_object_bbox: arguments 'classes' and 'class_weights' must have "
                             f"one value per class, got {len(classes)} and {len(weights)}")
    elif weights is not None:
        classes, label = [], 0
        for _ in weights:
            label += label == background
            classes.append(label)
            label += 1
    return classes, weights if weights is not None or classes is None else [1.0] * len(classes), background


def random_object_bbox(mask: np.ndarray, args: dict, rng: np.random.Generator) -> tuple:
    mask = np.asarray(mask)
    if mask.dtype not in MASK_TYPES:
        raise TypeError(f"segmentation.random_object_bbox: takes masks of {', '.join(t.name for t in MASK_TYPES)}, "
                        f"got {mask.dtype}")
    if not 1 <= mask.ndim <= MASK_MAX_NDIM:
        raise ValueError(f"segmentation.random_object_bbox: takes masks of 1 to {MASK_MAX_NDIM} dimensions, got "
                         f"shape {mask.shape}")
    classes, weights, background = class_table(args)
    start, end, label = np.zeros(mask.ndim, np.int64), np.array(mask.shape, np.int64), background
    ndim = mask.ndim

    def pick(selected):
        blobs = object_boxes(selected)
        if args.threshold is not None:
            least = np.broadcast_to(np.asarray(args.threshold, np.float64), (ndim,))
            blobs = blobs[np.all(blobs[:, ndim:2 * ndim] - blobs[:, :ndim] >= least, axis=1)]
        if args.k_largest is not None:
            blobs = blobs[np.argsort(-blobs[:, -1], kind="stable")[:args.k_largest]]
        return blobs[rng.integers(len(blobs))] if len(blobs) else None

    if rng.random() < args.foreground_prob:
        blob = None
        if args.ignore_class:
            blob = pick(mask != background)
        else:
            present = set(np.unique(mask).tolist()) - {background}
            if classes is None:
                classes, weights = sorted(present), [1.0] * len(present)
            weights = np.array([w if c in present else 0.0 for c, w in zip(classes, weights)])
            while blob is None and weights.sum() > 0:  # a class without a blob that fits drops out
                index = rng.choice(len(classes), p=weights / weights.sum())
                blob = pick(mask == classes[index])
                label = classes[index] if blob is not None else background
                weights[index] = 0.0
        if blob is not None:
            start, end = blob[:ndim], blob[ndim:2 * ndim]
    if args.format == "anchor_shape":
        outputs = [start.astype(np.int32), (end - start).astype(np.int32)]
    elif args.format == "start_end":
        outputs = [start.astype(np.int32), end.astype(np.int32)]
    else:
        outputs = [np.concatenate([start, end]).astype(np.int32)]
    if args.output_class:
        outputs.append(np.array(label, np.int32))
    return tuple(outputs)


registry.register_schema(OpSchema(
    name="segmentation.random_object_bbox", class_name="segmentation.RandomObjectBBox",
    doc="The box of a random object of a label mask: with probability foreground_prob a label is drawn "
        "(uniformly, or by class_weights) among those present, its connected blobs found (neighbours along "
        "axes and diagonals; masks of 1 to 6 dimensions of bool or integers up to 32 bits), filtered by "
        "threshold and k_largest, and one drawn (a label with none that fits drops out and another is "
        "drawn); else, or when there is none, the whole mask. Outputs, by "
        "format: anchor and shape, start and end, or one box [start..., end...] (int32, the mask's axis "
        "order), and the label with output_class.",
    args=(Arg("background", "int", None, "The label of no object (default 0, or one less than the smallest of "
              "classes when 0 is one of them).", per_sample=True),
          Arg("classes", "ints", None, "The labels to draw from (default: every label present but background).",
              per_sample=True),
          Arg("class_weights", "floats", None, "The weight of each of classes (without classes: of the labels 0, "
              "1, ... but the background).", per_sample=True),
          Arg("foreground_prob", "float", 1.0, "How often an object is drawn (else the whole mask).",
              per_sample=True, min=0.0, max=1.0),
          Arg("format", "str", "anchor_shape", "'anchor_shape', 'start_end' or 'box'.",
              choices=("anchor_shape", "start_end", "box")),
          Arg("ignore_class", "bool", False, "Blobs of any foreground label, regardless of label."),
          Arg("k_largest", "int", None, "Draw among the k largest blobs only.", min=1, nullable=True),
          Arg("threshold", "ints", None, "The least extent of a blob per axis (one value or one per axis).",
              per_sample=True),
          Arg("output_class", "bool", False, "Also output the drawn label."),
          Arg("cache_objects", "bool", False, "Accepted for DALI compatibility; blobs are found each time.")),
    num_inputs=(1, 1), input_names=("mask",), checks=(lambda static, per_sample: _ignore_class_alone(static, per_sample),),
    num_outputs=lambda static: (2 if static.format != "box" else 1) + bool(static.output_class)))


def _ignore_class_alone(static: dict, per_sample: frozenset) -> None:
    clashing = [name for name in ("classes", "class_weights") if name in per_sample or static[name] is not None]
    clashing += ["output_class"] if static.output_class else []
    if static.ignore_class and clashing:
        raise ArgError(f"argument 'ignore_class' cannot be given with '{clashing[0]}'")


@registry.register("segmentation.random_object_bbox", "cpu")
class RandomObjectBBox(SampleStreams, SampleOperator):
    def declare_outputs(self, inputs):
        count = self.schema.outputs_for(self.args)
        return tuple(OutputSpec(np.dtype(np.int32), 1 if i < count - bool(self.args.output_class) else 0, "")
                     for i in range(count))


    def run(self, inputs, args, sample, out=None):
        result = random_object_bbox(inputs[0], args, self.stream(sample))
        return result if len(result) > 1 else result[0]


# ---- roi_random_crop ----------------------------------------------------------------------------------
def roi_crop_start(crop, roi_start, roi_end, in_shape, rng: np.random.Generator) -> np.ndarray:
    """The start (int64, one per axis) of a window of ``crop`` extents placed at random so that it
    holds the region [roi_start, roi_end) where the region is smaller, or lies inside it where the
    region is larger (DALI's roi_random_crop); within [0, in_shape) where in_shape is given."""
    starts = []
    for axis, (extent, first, end) in enumerate(zip(crop, roi_start, roi_end)):
        if end - first == extent:
            starts.append(first)
            continue
        low, high = sorted((first, end - extent))
        if in_shape is not None:
            low, high = max(0, low), min(in_shape[axis] - extent, high)
        if low > high:
            raise ValueError(f"no window of extent {extent} on axis {axis} holds the region [{first}, {end}) inside "
                             f"the input's extent {in_shape[axis]}")
        starts.append(int(rng.integers(low, high + 1)))
    return np.array(starts, np.int64)


registry.register_schema(OpSchema(
    name="roi_random_crop", class_name="ROIRandomCrop",
    doc="The start (int64, one value per axis) of a cropping window of ``crop_shape``, placed at random so that "
        "it holds as much of a region of interest as it can: the whole region where the region is smaller, a "
        "part of it where the region is larger. Within the input's shape (``in_shape``, or the shape of the data "
        "given as the input) where either is known, else unbounded. Feed the start to slice as its anchor.",
    args=(Arg("crop_shape", "ints", REQUIRED, "The window's extents.", per_sample=True, min=0),
          Arg("roi_start", "ints", REQUIRED, "Where the region starts.", per_sample=True),
          Arg("roi_end", "ints", None, "Where the region ends (exclusive); or give roi_shape.", per_sample=True),
          Arg("roi_shape", "ints", None, "The region's extents; or give roi_end.", per_sample=True),
          Arg("in_shape", "ints", None, "The shape of the data the window crops (or give the data as the input).",
              per_sample=True, min=0)),
    num_inputs=(0, 1), input_names=("data",),
    checks=(lambda static, per_sample: _one_roi_end(static, per_sample),)))


def _one_roi_end(static: dict, per_sample: frozenset) -> None:
    named = [name for name in ("roi_end", "roi_shape") if static.get(name) is not None or name in per_sample]
    if len(named) != 1:
        raise ArgError("give either 'roi_end' or 'roi_shape'" + (", not both" if named else ""))


@registry.register("roi_random_crop", "cpu")
class ROIRandomCrop(SampleStreams, SampleOperator):
    def declare_outputs(self, inputs):
        given = "in_shape" not in self.args or self.args.in_shape is not None  # absent: given per sample
        if inputs and given:
            raise ValueError(f"{self.name}: give the data's shape either as 'in_shape' or as the input, not both")
        return OutputSpec(np.dtype(np.int64), 1, "")

    def run(self, inputs, args, sample, out=None):
        crop, roi_start = _axes(args.crop_shape), _axes(args.roi_start)
        roi_end = _axes(args.roi_end) if args.roi_end is not None else roi_start + _axes(args.roi_shape)
        in_shape = np.asarray(inputs[0]).shape if inputs else _axes(args.in_shape) if args.in_shape is not None \
            else None
        if not len(crop) == len(roi_start) == len(roi_end) or (in_shape is not None and len(in_shape) != len(crop)):
            raise ValueError(f"crop_shape {crop.tolist()}, the region [{roi_start.tolist()}, {roi_end.tolist()}) "
                             f"and the data's shape {None if in_shape is None else list(in_shape)} have different "
                             "numbers of axes")
        if in_shape is not None:
            for axis, extent in enumerate(in_shape):
                if crop[axis] > extent:
                    raise ValueError(f"Cropping shape can't be bigger than the input shape. Axis {axis}: the window "
                                     f"({crop[axis]}) must lie within the data's extent {extent}")
                if roi_start[axis] < 0 or roi_end[axis] > extent:
                    raise ValueError(f"ROI can't be out of bounds. Axis {axis}: the region [{roi_start[axis]}, "
                                     f"{roi_end[axis]}) must lie within the data's extent {extent}")
        return roi_crop_start(crop.tolist(), roi_start.tolist(), roi_end.tolist(),
                              None if in_shape is None else list(in_shape), self.stream(sample))


def _axes(values) -> np.ndarray:
    return np.asarray(values, np.int64).reshape(-1)
