"""Segmentation helpers: ``segmentation.select_masks`` (the polygons of chosen masks, in
readers.coco's polygons/vertices format) and ``segmentation.random_mask_pixel`` (a random pixel of
a mask's foreground, to centre a crop on an object)."""
from __future__ import annotations

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.schema import Arg, OpSchema


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
        return select_masks(*inputs, args["reindex_masks"])


def random_mask_pixel(mask: np.ndarray, args: dict, rng: np.random.Generator) -> np.ndarray:
    """The coordinates (int64, one per axis of the mask) of a pixel drawn uniformly from the mask's
    foreground (value == ``value`` if given, else > ``threshold``) when ``foreground``, else from
    the whole mask; a mask without foreground gives a pixel drawn from the whole mask."""
    mask = np.asarray(mask)
    if args["foreground"]:
        selected = mask == args["value"] if args["value"] is not None else mask > args["threshold"]
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
              nullable=True),
          Arg("threshold", "float", 0.0, "The foreground is the pixels above this (when value is not given).")),
    num_inputs=(1, 1), input_names=("mask",)))


@registry.register("segmentation.random_mask_pixel", "cpu")
class RandomMaskPixel(SampleOperator):
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.int64), 1, "")

    def draw(self, rng, count):
        return rng.integers(0, 2**63, count)

    def run(self, inputs, args, sample, out=None):
        return random_mask_pixel(inputs[0], args, np.random.Generator(np.random.Philox(key=int(sample.params))))
