"""Cases of the warps (penstock.operators.geometry.warps) for the coverage test.

References: warp_affine against a bilinear sampler written here in numpy from the definition
(output pixel (x, y) samples the input at matrix @ (x + 0.5, y + 0.5, 1) - 0.5, edges repeated);
warp_perspective with pixel_origin='center' against OpenCV's warpPerspective, whose coordinates
are pixel centres; random_resized_crop (with a window forced to the whole image) and
resize_crop_mirror against Pillow's antialiased resize. Tolerances in grey levels: bilinear
sampling within 1 (rounding; OpenCV's warps use 1/32-pixel fixed point, so 2 against it), resizing
as resize's case (mean 1, max 5). tensor_resize enlarging float tensors against torch's bilinear
interpolation (pixel centres, edges repeated: DALI's linear filter when it enlarges), within 1e-4.
"""
from __future__ import annotations

import cv2
import numpy as np
from conftest import smooth_image
from operator_cases import Case, image_op, ragged_images
from PIL import Image

AFFINE = (0.9, 0.2, -2.0, -0.15, 1.1, 3.0)  # output -> input, shrinks a little, turns and shears
PERSPECTIVE = (1.05, 0.08, -1.5, 0.03, 0.95, 2.0, 0.002, -0.001, 1.0)


def bilinear_reference(image: np.ndarray, matrix: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear sampling with the edge pixels repeated, in float64, rounded as uint8."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    source_x = matrix[0, 0] * (x + 0.5) + matrix[0, 1] * (y + 0.5) + matrix[0, 2] - 0.5
    source_y = matrix[1, 0] * (x + 0.5) + matrix[1, 1] * (y + 0.5) + matrix[1, 2] - 0.5
    x0, y0 = np.floor(source_x).astype(int), np.floor(source_y).astype(int)
    fx, fy = (source_x - x0)[..., None], (source_y - y0)[..., None]
    in_h, in_w = image.shape[:2]

    def at(yy, xx):
        return image[np.clip(yy, 0, in_h - 1), np.clip(xx, 0, in_w - 1)].astype(np.float64)
    value = (at(y0, x0) * (1 - fx) * (1 - fy) + at(y0, x0 + 1) * fx * (1 - fy) + at(y0 + 1, x0) * (1 - fx) * fy
             + at(y0 + 1, x0 + 1) * fx * fy)
    return np.clip(np.rint(value), 0, 255).astype(np.uint8)


def pillow_resize(image, size):
    planes = [np.asarray(Image.fromarray(image[:, :, c]).resize(size[::-1], Image.BILINEAR))
              for c in range(image.shape[2])]
    return np.stack(planes, axis=2)


def same_shape_images():
    return [smooth_image(24, 32, 3, seed=seed) for seed in (4, 5, 6)]


def _resize_crop_mirror_reference(samples, _):
    results = []
    for sample in samples:
        resized = pillow_resize(sample, (20, 26))
        top, left = int(np.floor(0.5 * (20 - 14) + 0.5)), int(np.floor(0.25 * (26 - 16) + 0.5))
        results.append(resized[top:top + 14, left:left + 16][:, ::-1])
    return results


def _float_tensors():
    rng = np.random.default_rng(12)
    return [rng.random(shape, dtype=np.float32) * 100 for shape in ((7, 9), (10, 12), (13, 22))]


def _bilinear_enlarged(samples, _):
    """torch's bilinear interpolation (pixel centres, edges repeated): DALI's linear enlargement."""
    import torch
    return [torch.nn.functional.interpolate(torch.from_numpy(sample)[None, None], size=(13, 22), mode="bilinear",
                                            align_corners=False)[0, 0].numpy() for sample in samples]


CASES = {
    "warp_affine": Case(ragged_images, image_op("warp_affine", matrix=AFFINE, size=(21, 25)),
                        lambda samples, _: [bilinear_reference(s, np.reshape(AFFINE, (2, 3)), 21, 25) for s in samples],
                        max_abs=1),
    "experimental.warp_perspective": Case(
        ragged_images, image_op("experimental.warp_perspective", matrix=PERSPECTIVE, pixel_origin="center",
                                border_mode="reflect_101", size=(22, 24)),
        lambda samples, _: [cv2.warpPerspective(s, np.reshape(PERSPECTIVE, (3, 3)), (24, 22),
                                                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                                borderMode=cv2.BORDER_REFLECT_101) for s in samples],
        max_abs=2, mean_abs=0.5),
    # the window forced to the whole image: area 1, the images' own aspect ratio
    "random_resized_crop": Case(same_shape_images,
                                image_op("random_resized_crop", size=(12, 14), random_area=(1.0, 1.0),
                                         random_aspect_ratio=(32 / 24, 32 / 24)),
                                lambda samples, _: [pillow_resize(s, (12, 14)) for s in samples],
                                max_abs=5, mean_abs=1.0),
    "resize_crop_mirror": Case(ragged_images, image_op("resize_crop_mirror", size=(20, 26), crop=(14, 16),
                                                       crop_pos_x=0.25, mirror=1),
                               _resize_crop_mirror_reference, max_abs=5, mean_abs=1.0),
    "tensor_resize": Case(_float_tensors, image_op("tensor_resize", sizes=(13, 22)), _bilinear_enlarged, max_abs=1e-4),
}

__all__ = ["CASES", "bilinear_reference"]
