"""Cases of the colour operators (penstock.operators.color.adjust, color_nonlinear) for the coverage test.

References: brightness and saturation against torchvision's adjust_brightness / adjust_saturation,
written here in numpy (torchvision is not a test dependency): the same definitions, but
torchvision truncates where penstock rounds, and DALI's YIQ matrices are inverses of each other to
three decimals only (1 and 2 grey levels); contrast, brightness_contrast,
hue, hsv and color_twist against numpy written here from DALI's formulas (brightness_contrast.h,
color_twist.h: torchvision's contrast centres on the image's mean and its hue works in HSV, so
they differ by design), within 1 grey level of rounding; color_space_conversion (RGB -> GRAY)
against OpenCV's cvtColor (its fixed point: 1 level); equalize against OpenCV's equalizeHist
(exact); lookup_table against a dict; jpeg_compression_distortion against Pillow's JPEG at the
same quality (the same libjpeg-turbo: within 2 levels, mean 0.5).
"""
from __future__ import annotations

import io

import cv2
import numpy as np
from operator_cases import Case, image_op, ragged_images
from PIL import Image

from penstock import types

# DALI's matrices (dali/operators/image/color/color_twist.h), written out for the references
RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
YIQ_TO_RGB = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])


def round_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def twist_matrix(hue=0.0, saturation=1.0, value=1.0) -> np.ndarray:
    """DALI: Yiq2Rgb * hue_mat * sat_mat * val_mat * Rgb2Yiq."""
    c, s = np.cos(np.radians(hue)), np.sin(np.radians(hue))
    rotation = np.array([[1.0, 0, 0], [0, c, s], [0, -s, c]])
    return YIQ_TO_RGB @ rotation @ np.diag([1.0, saturation, saturation]) @ np.diag([value] * 3) @ RGB_TO_YIQ


def twist_reference(hue=0.0, saturation=1.0, value=1.0, brightness=1.0, contrast=1.0):
    def reference(samples, _):
        matrix = brightness * contrast * twist_matrix(hue, saturation, value)
        offset = (128 - 128 * contrast) * brightness
        return [round_uint8(s.astype(np.float64) @ matrix.T + offset) for s in samples]
    return reference


def torchvision_brightness(factor):
    """torchvision's adjust_brightness of uint8: image * factor, clamped, truncated."""
    return lambda samples, _: [np.clip(s * np.float32(factor), 0, 255).astype(np.uint8) for s in samples]


def torchvision_saturation(factor):
    """torchvision's adjust_saturation of uint8: a blend with the grey (0.2989, 0.587, 0.114),
    clamped, truncated."""
    def reference(samples, _):
        results = []
        for s in samples:
            grey = s.astype(np.float32) @ np.float32([0.2989, 0.587, 0.114])
            blend = factor * s.astype(np.float32) + (1 - factor) * grey[:, :, None]
            results.append(np.clip(blend, 0, 255).astype(np.uint8))
        return results
    return reference


def pillow_jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))


LOOKUP_KEYS, LOOKUP_VALUES = (0, 10, 100, 200, 255, 10), (-1.0, 0.5, 2.0, 3.5, 7.0, 0.25)


def lookup_reference(samples, _):
    table = dict(zip(LOOKUP_KEYS, LOOKUP_VALUES))  # a repeated key keeps its last value
    return [np.vectorize(lambda v: table.get(int(v), 9.0))(s).astype(np.float32) for s in samples]


def noisy_images():
    return ragged_images(smooth=False)


CASES = {
    "brightness": Case(ragged_images, image_op("brightness", brightness=1.3),
                       torchvision_brightness(1.3), max_abs=1),
    "contrast": Case(ragged_images, image_op("contrast", contrast=1.4),
                     lambda samples, _: [round_uint8(128 + 1.4 * (s.astype(np.float64) - 128)) for s in samples],
                     max_abs=1),
    "brightness_contrast": Case(
        ragged_images, image_op("brightness_contrast", brightness=0.8, brightness_shift=0.1, contrast=0.7,
                                contrast_center=100, dtype=types.FLOAT),
        lambda samples, _: [(0.1 + 0.8 * (100 + 0.7 * (s.astype(np.float64) - 100))).astype(np.float32)
                            for s in samples], max_abs=1e-4),
    "saturation": Case(ragged_images, image_op("saturation", saturation=0.4),
                       torchvision_saturation(0.4), max_abs=2),
    "hue": Case(ragged_images, image_op("hue", hue=40.0), twist_reference(hue=40.0), max_abs=1),
    "hsv": Case(ragged_images, image_op("hsv", hue=-25.0, saturation=1.3, value=0.9),
                twist_reference(hue=-25.0, saturation=1.3, value=0.9), max_abs=1),
    "color_twist": Case(ragged_images, image_op("color_twist", hue=15.0, saturation=0.8, brightness=1.1, contrast=0.9),
                        twist_reference(hue=15.0, saturation=0.8, brightness=1.1, contrast=0.9), max_abs=1),
    "color_space_conversion": Case(
        ragged_images, image_op("color_space_conversion", image_type=types.RGB, output_type=types.GRAY),
        lambda samples, _: [cv2.cvtColor(s, cv2.COLOR_RGB2GRAY)[:, :, None] for s in samples], max_abs=1),
    "equalize": Case(ragged_images, image_op("equalize"),
                     lambda samples, _: [np.stack([cv2.equalizeHist(np.ascontiguousarray(s[:, :, c])) for c in range(3)],
                                                  axis=2) for s in samples]),
    "lookup_table": Case(noisy_images, image_op("lookup_table", keys=LOOKUP_KEYS, values=LOOKUP_VALUES,
                                                default_value=9.0),
                         lookup_reference),
    "jpeg_compression_distortion": Case(ragged_images, image_op("jpeg_compression_distortion", quality=40),
                                        lambda samples, _: [pillow_jpeg(s, 40) for s in samples],
                                        max_abs=2, mean_abs=0.5),
}

__all__ = ["CASES", "round_uint8", "twist_matrix", "twist_reference"]
