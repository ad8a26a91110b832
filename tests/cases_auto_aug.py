"""The case of augment_step (one step of an automatic augmentation policy) for the coverage test:
every sample equalized (kind 'equalize'), against OpenCV's equalizeHist, exactly. The other kinds
are tested against the augmentations they stand for in tests/test_auto_aug.py."""
from __future__ import annotations

import cv2
import numpy as np
from operator_cases import Case, on_device, ragged_images

from penstock import registry
from penstock.graph import invoke


def _equalize_step(node, device):
    arguments = {"kinds": ["equalize", "invert"], "parameters": [[[0.0] * 9], [[0.0] * 9]], "op_index": 0, "row": 0}
    return invoke(registry.get_schema("_augment_step"), (on_device(node, device),), arguments)


def _equalized(samples, _):
    return [np.stack([cv2.equalizeHist(np.ascontiguousarray(s[:, :, c])) for c in range(s.shape[2])], axis=2)
            for s in samples]


CASES = {"_augment_step": Case(ragged_images, _equalize_step, _equalized)}
