"""Cases of the affine-matrix builders (penstock.operators.geometry.transforms), erase / paste / multi_paste /
grid_mask (erase_paste), jitter / water / sphere (distortions) and mixup / cutmix (mixing) for the
coverage test.

References: the transforms against matrices written here from DALI's definitions (rotation also
against OpenCV's getRotationMatrix2D, whose positive angle turns the other way in image
coordinates); erase, paste and multi_paste against numpy slicing; water (INTERP_LINEAR) and
sphere (INTERP_NN) against OpenCV's remap of maps written here from DALI's formulas (OpenCV's
bilinear weights are 5-bit fixed point: within 2 grey levels); grid_mask against the grid in
float64 (pixels on a square's edge, within 1e-4 of it, may fall either side); jitter by checking
each output pixel is an input pixel of its neighbourhood; mixup and cutmix by recovering lambda
from the soft labels and checking the images against torchvision's definitions with it.
"""
from __future__ import annotations

import math

import cv2
import numpy as np
from conftest import noise_image, smooth_image
from operator_cases import Case, image_op, on_device, ragged_images

from penstock import fn

WATER = dict(ampl_x=3.0, ampl_y=2.0, freq_x=0.4, freq_y=0.3, phase_x=0.5, phase_y=0.2)
GRID = dict(tile=7, ratio=0.4, angle=0.35, shift_x=1.3, shift_y=2.1)


def _feed():
    """Identity matrices: the transforms are combined with them (a pipeline also needs a source)."""
    return [np.eye(2, 3, dtype=np.float32)] * 5


def _rows(matrix) -> list:
    return [np.asarray(matrix, np.float32)[:2]] * 5


def _rotation_reference(samples, outputs):
    radians = math.radians(30.0)
    c, s = math.cos(radians), math.sin(radians)
    by_hand = np.array([[c, -s, 4 - (c * 4 - s * 3)], [s, c, 3 - (s * 4 + c * 3)]])
    np.testing.assert_allclose(cv2.getRotationMatrix2D((4.0, 3.0), -30.0, 1.0), by_hand, atol=1e-12)
    return _rows(by_hand)


def _shear_reference(samples, outputs):
    sx, sy = math.tan(math.radians(20.0)), math.tan(math.radians(-10.0))
    return _rows([[1, sx, -sx * 2], [sy, 1, -sy * 1]])  # about the centre (1, 2)


def _erase_reference(samples, _):
    results = []
    for sample in samples:
        out = sample.copy()
        out[2:7, 3:5] = (10, 20, 30)  # anchor (2, 3), shape (5, 2)
        out[:, 10:12] = (10, 20, 30)  # axis W only: x from 10, width 2, every row
        results.append(out)
    return results


def _paste_reference(samples, _):
    results = []
    for sample in samples:
        height, width = sample.shape[:2]
        canvas = np.empty((int(1.7 * height), int(1.7 * width), 3), np.uint8)
        canvas[...] = (5, 6, 7)
        top, left = int(0.8 * (canvas.shape[0] - height)), int(0.25 * (canvas.shape[1] - width))
        canvas[top:top + height, left:left + width] = sample
        results.append(canvas)
    return results


def _multi_paste_reference(samples, _):
    results = []
    for index, sample in enumerate(samples):
        canvas = np.zeros((20, 24, 3), np.uint8)
        canvas[0:10, 0:12] = samples[(index + 1) % len(samples)][0:10, 0:12]
        canvas[5:13, 8:17] = samples[0][2:10, 1:10]  # later pastes go on top
        results.append(canvas)
    return results


def _multi_paste_build(node, device):
    in_ids = fn.external_source(source=lambda: [np.array([(i + 1) % 3, 0], np.int32) for i in range(3)], batch=True)
    return fn.multi_paste(on_device(node, device), in_ids=in_ids,
        shapes=[[10, 12], [8, 9]], in_anchors=[[0, 0], [2, 1]], out_anchors=[[0, 0], [5, 8]], output_size=(20, 24),
        device=device)


def _water_reference(samples, _):
    results = []
    for sample in samples:
        height, width = sample.shape[:2]
        y, x = np.mgrid[0:height, 0:width].astype(np.float64)
        source_x = x + WATER["ampl_x"] * np.sin(WATER["freq_x"] * y + WATER["phase_x"])
        source_y = y + WATER["ampl_y"] * np.cos(WATER["freq_y"] * x + WATER["phase_y"])
        # DALI's point is in coordinates where pixel i covers [i, i + 1); OpenCV's centres are at i
        results.append(cv2.remap(sample, (source_x - 0.5).astype(np.float32), (source_y - 0.5).astype(np.float32),
                                 cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(9, 9, 9)))
    return results


def _sphere_reference(samples, _):
    results = []
    for sample in samples:
        height, width = sample.shape[:2]
        y, x = np.mgrid[0:height, 0:width].astype(np.float64)
        mid_x, mid_y = width / 2, height / 2
        d = int(max(mid_x, mid_y))
        offset_x, offset_y = x + 0.5 - mid_x, y + 0.5 - mid_y
        stretch = np.hypot(offset_x, offset_y) / d
        # nearest: the pixel containing the point, as whole-pixel maps for OpenCV
        map_x = np.floor(mid_x + stretch * offset_x).astype(np.float32)
        map_y = np.floor(mid_y + stretch * offset_y).astype(np.float32)
        results.append(cv2.remap(sample, map_x, map_y, cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT,
                                 borderValue=(0, 0, 0)))
    return results


def _check_jitter(samples, outputs):
    for sample, output in zip(samples, outputs):
        height, width = sample.shape[:2]
        padded = np.pad(sample.astype(np.int32), ((1, 1), (1, 1), (0, 0)), mode="edge")
        found = np.zeros((height, width), bool)
        moved = np.zeros((height, width), bool)
        for dy in (-1, 0, 1):  # nDegree=2: offsets in [-1, 1]
            for dx in (-1, 0, 1):
                window = padded[1 + dy:1 + dy + height, 1 + dx:1 + dx + width]
                same = np.all(window == output, axis=2)
                found |= same
                moved |= same & ((dy, dx) != (0, 0))
        assert found.all(), "a pixel came from outside its 3x3 neighbourhood"
        assert moved.mean() > 0.5, "jitter moved too few pixels"


def _check_grid_mask(samples, outputs):
    tile, ratio, angle = GRID["tile"], GRID["ratio"], GRID["angle"]
    for sample, output in zip(samples, outputs):
        height, width = sample.shape[:2]
        y, x = np.mgrid[0:height, 0:width].astype(np.float64)
        u = (x * math.cos(angle) - y * math.sin(angle) - GRID["shift_x"]) / tile
        v = (x * math.sin(angle) + y * math.cos(angle) - GRID["shift_y"]) / tile
        fu, fv = u - np.floor(u), v - np.floor(v)
        dark = (fu < ratio) & (fv < ratio)
        edge = (np.minimum(abs(fu - ratio), np.minimum(fu, 1 - fu)) < 1e-4) | \
            (np.minimum(abs(fv - ratio), np.minimum(fv, 1 - fv)) < 1e-4)
        expected = np.where(dark[..., None], 0, sample)
        differs = np.any(output != expected, axis=2)
        assert not np.any(differs & ~edge), f"{int((differs & ~edge).sum())} pixels off the grid's edges differ"
        assert 0.05 < dark.mean() < 0.4


def same_size_images():
    return [noise_image(12, 10, 3, seed=seed) for seed in range(4)]


LABELS = [np.array([index], np.int32) for index in range(4)]  # every sample its own class


def _mixing_build(kind):
    def build(node, device):
        labels = fn.external_source(source=lambda: LABELS, batch=True)
        return getattr(fn, kind)(on_device(node, device), labels, num_classes=4, alpha=0.7, device=device)
    return build


def _mixing_lambda(labels) -> float:
    """lambda recovered from sample 0's soft label (its own class has weight lambda, the last's 1 - lambda)."""
    label = np.asarray(labels[0])
    assert abs(label.sum() - 1.0) < 1e-6 and label[0] + label[3] > 1 - 1e-6
    return float(label[0])


def _check_mixup(samples, outputs):
    images, labels = outputs
    lam = _mixing_lambda(labels)
    batch = np.stack(samples).astype(np.float32)
    # torchvision v2 MixUp: inpt.roll(1, 0).mul_(1.0 - lam).add_(inpt.mul(lam))
    expected = np.roll(batch, 1, 0) * (1.0 - lam) + batch * lam
    np.testing.assert_allclose(np.stack(images).astype(np.float32), np.clip(np.rint(expected), 0, 255), atol=1)
    one_hot = np.eye(4, dtype=np.float32)[[0, 1, 2, 3]]
    np.testing.assert_allclose(np.stack(labels), np.roll(one_hot, 1, 0) * (1 - lam) + one_hot * lam, atol=1e-6)


def _check_cutmix(samples, outputs):
    images, labels = outputs
    lam = _mixing_lambda(labels)
    batch = np.stack(samples)
    rolled = np.roll(batch, 1, 0)
    out = np.stack(images)
    from_rolled = np.all(out == rolled, axis=3) & np.any(batch != rolled, axis=3)
    assert np.all((out == batch) | (out == rolled))
    rows, columns = np.nonzero(from_rolled.any(axis=0))
    area = 0 if not len(rows) else (rows.max() - rows.min() + 1) * (columns.max() - columns.min() + 1)
    # lambda corrected to the box's real area (torchvision's lam_adjusted)
    assert abs((1 - area / (12 * 10)) - lam) < 1e-6
    if area:  # the pasted pixels fill a rectangle
        box = from_rolled[:, rows.min():rows.max() + 1, columns.min():columns.max() + 1]
        assert box.mean() > 0.95


def _same_outputs(samples, on_gpu, on_cpu):
    """Both devices draw the batch's lambda and box from the same stream: the same images and labels."""
    for gpu_output, cpu_output in zip(on_gpu, on_cpu):
        for gpu_sample, cpu_sample in zip(gpu_output, cpu_output):
            assert gpu_sample.dtype == cpu_sample.dtype
            np.testing.assert_allclose(gpu_sample.astype(np.float64), cpu_sample.astype(np.float64), atol=1e-6)


CASES = {
    "transforms.translation": Case(_feed, lambda node, device: fn.transforms.translation(node, offset=(3.0, -2.0)),
                                   lambda samples, _: _rows([[1, 0, 3], [0, 1, -2]])),
    "transforms.scale": Case(_feed, lambda node, device: fn.transforms.scale(node, scale=(2.0, 0.5), center=(1.0, 4.0)),
                             lambda samples, _: _rows([[2, 0, 1 * (1 - 2)], [0, 0.5, 4 * (1 - 0.5)]])),
    "transforms.rotation": Case(_feed, lambda node, device: fn.transforms.rotation(node, angle=30.0, center=(4.0, 3.0)),
                                _rotation_reference, max_abs=1e-6),
    "transforms.shear": Case(_feed, lambda node, device: fn.transforms.shear(node, angles=(20.0, -10.0), center=(1.0, 2.0)),
                             _shear_reference, max_abs=1e-6),
    "transforms.crop": Case(_feed, lambda node, device: fn.transforms.crop(node, from_start=(10.0, 20.0), from_end=(30.0, 60.0),
                                                                          to_start=(0.0,), to_end=(1.0,)),
                            lambda samples, _: _rows([[1 / 20, 0, -10 / 20], [0, 1 / 40, -20 / 40]]), max_abs=1e-7),
    # combine([T, S]): T first, then S -> S @ T
    "transforms.combine": Case(_feed, lambda node, device: fn.transforms.combine(
        fn.transforms.translation(node, offset=(1.0, 2.0)), fn.transforms.scale(scale=(3.0, 4.0))),
        lambda samples, _: _rows([[3, 0, 3], [0, 4, 8]])),
    "erase": Case(lambda: ragged_images(smooth=False), lambda node, device: fn.erase(
        fn.erase(on_device(node, device), anchor=(2, 3), shape=(5, 2), fill_value=(10, 20, 30), device=device),
        anchor=(10,), shape=(2,), axis_names="W", fill_value=(10, 20, 30), device=device), _erase_reference),
    "paste": Case(lambda: ragged_images(smooth=False), image_op("paste", ratio=1.7, paste_x=0.25, paste_y=0.8,
                                                                fill_value=(5, 6, 7)), _paste_reference),
    "multi_paste": Case(lambda: ragged_images(smooth=False), _multi_paste_build, _multi_paste_reference),
    "water": Case(ragged_images, image_op("water", interp_type="INTERP_LINEAR", fill_value=9.0, **WATER),
                  _water_reference, max_abs=2, mean_abs=0.5),
    "sphere": Case(lambda: ragged_images(smooth=False), image_op("sphere"), _sphere_reference),
    "jitter": Case(lambda: [smooth_image(15, 19, 3, seed=1), noise_image(11, 13, 3, seed=2)],
                   image_op("jitter", nDegree=2), _check_jitter),
    "grid_mask": Case(lambda: ragged_images(smooth=False), image_op("grid_mask", **GRID), _check_grid_mask),
    "mixup": Case(same_size_images, _mixing_build("mixup"), _check_mixup, compare_gpu_to_cpu=_same_outputs),
    "cutmix": Case(same_size_images, _mixing_build("cutmix"), _check_cutmix, compare_gpu_to_cpu=_same_outputs),
}

__all__ = ["CASES"]
