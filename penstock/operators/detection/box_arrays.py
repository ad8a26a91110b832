"""Boxes as arrays, as the family's operators take them: float32 [N, 4] (one box [4] taken as [1, 4]),
and their corners in any DALI layout ('xyXY', 'xyWH', 'xyzXYZ', ...) and back."""
from __future__ import annotations

import numpy as np


def as_float32(xp, array):
    return array.astype(np.float32) if xp is np else array.float()


def check_boxes(xp, boxes, op_name: str, columns: int = 4):
    """``boxes`` as float32 [N, columns]; a single box [columns] is taken as [1, columns]."""
    if boxes.ndim == 1 and boxes.shape[0] == columns:
        boxes = boxes.reshape(1, columns)
    if boxes.ndim != 2 or boxes.shape[1] != columns:
        raise ValueError(f"{op_name}: takes boxes as a [N, {columns}] array, got shape {tuple(boxes.shape)}")
    return as_float32(xp, boxes)


AXES = "xyz"
HIGH = "XYZ"
EXTENT = "WHD"


def boxes_to_corners(boxes: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(low [N, D], high [N, D]) corners of boxes in ``layout`` (x, y, z order)."""
    dimensions = len(layout) // 2
    if HIGH[0] not in layout:
        low = boxes[:, [layout.index(AXES[d]) for d in range(dimensions)]].astype(np.float64)
        return low, low + boxes[:, [layout.index(EXTENT[d]) for d in range(dimensions)]]
    if layout == AXES[:dimensions] + HIGH[:dimensions]:
        corners = boxes.astype(np.float64)
    else:
        corners = boxes[:, [layout.index(axis) for axis in AXES[:dimensions] + HIGH[:dimensions]]].astype(np.float64)
    return corners[:, :dimensions], corners[:, dimensions:]


def corners_to_boxes(low: np.ndarray, high: np.ndarray, layout: str) -> np.ndarray:
    dimensions = low.shape[1]
    if layout == AXES[:dimensions] + HIGH[:dimensions]:
        return np.concatenate([low, high], 1).astype(np.float32)
    names = AXES[:dimensions] + HIGH[:dimensions] + EXTENT[:dimensions]  # the columns stacked below
    return np.concatenate([low, high, high - low], 1)[:, [names.index(name) for name in layout]].astype(np.float32)
