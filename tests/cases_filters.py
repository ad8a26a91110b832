"""Cases of the filters and noise (penstock.operators.filters.convolution, .rules and .noise) for the coverage test.

References: gaussian_blur against OpenCV's GaussianBlur with the window sizes DALI derives from
sigma (OpenCV rounds 8-bit results through fixed point: within 1 grey level), laplacian against
OpenCV's Laplacian (float32 output: within float32 rounding), the median and the morphology with
a 'wrap' border against a numpy reduction over sliding windows written here (exact), erode and
dilate against OpenCV's (exact), filter against a correlation written here in numpy (float32
output). Noise against its distribution: the mean and the spread of what it adds (within five
standard errors of the estimates), the share of salt and of pepper; the GPU's noise against the
CPU's the same way, since the two devices draw different numbers.
"""
from __future__ import annotations

import math

import cv2
import numpy as np
from conftest import noise_image, smooth_image
from operator_cases import Case, image_op, on_device, ragged_images

from penstock import fn, types

FILTER = np.array([[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.75, 1.0], [0.125, 1.0, 0.5, -2.0]], np.float32)


def window_size(sigma: float) -> int:
    return 2 * math.ceil(3 * sigma) + 1


def reduce_windows(image, size, anchor, pad_mode, reduce):
    """``reduce`` over the (height, width) window ``size`` placed by ``anchor`` on each pixel, the
    image padded by numpy's ``pad_mode``."""
    (rows, columns), (top, left) = size, anchor
    padded = np.pad(image, ((top, rows - 1 - top), (left, columns - 1 - left), (0, 0)), mode=pad_mode)
    height, width = image.shape[:2]
    stacked = np.stack([padded[i:i + height, j:j + width] for i in range(rows) for j in range(columns)])
    return reduce(stacked, axis=0).astype(image.dtype)


def correlate(image, weights, anchor, fill):
    """sum over (i, j) of weights[i, j] * image[y - anchor_y + i, x - anchor_x + j], ``fill`` outside."""
    height, width = image.shape[:2]
    result = np.zeros(image.shape, np.float64)
    for i in range(weights.shape[0]):
        for j in range(weights.shape[1]):
            rows = np.arange(height) - anchor[0] + i
            columns = np.arange(width) - anchor[1] + j
            inside = ((rows >= 0) & (rows < height))[:, None] & ((columns >= 0) & (columns < width))[None, :]
            taken = image[np.clip(rows, 0, height - 1)][:, np.clip(columns, 0, width - 1)].astype(np.float64)
            result += weights[i, j] * np.where(inside[:, :, None], taken, fill)
    return result.astype(np.float32)


def _gaussian_reference(samples, _):
    size = (window_size(1.5), window_size(1.0))  # OpenCV's (width, height)
    return [cv2.GaussianBlur(s, size, sigmaX=1.5, sigmaY=1.0, borderType=cv2.BORDER_REFLECT_101) for s in samples]


# ---- noise: distributions --------------------------------------------------------------------------
def float_images():
    return [smooth_image(23, 31, 3, seed=1).astype(np.float32) / 4, smooth_image(40, 27, 3, seed=2).astype(np.float32) / 4,
            smooth_image(17, 17, 3, seed=3).astype(np.float32) / 4]


def within_standard_errors(estimate, expected, spread, count, where):
    bound = 5 * spread / math.sqrt(count)
    assert abs(estimate - expected) <= bound, f"{where}: {estimate} differs from {expected} by more than {bound}"


def added(samples, outputs):
    return np.concatenate([(o.astype(np.float64) - s).ravel() for s, o in zip(samples, outputs)])


def check_gaussian(samples, outputs):
    assert all(o.dtype == s.dtype and o.shape == s.shape for s, o in zip(samples, outputs))
    noise = added(samples, outputs)
    within_standard_errors(noise.mean(), 5.0, 10.0, noise.size, "mean of the noise")
    within_standard_errors(noise.std(), 10.0, 10.0 / math.sqrt(2), noise.size, "stddev of the noise")


def compare_gaussian(samples, on_gpu, on_cpu):
    gpu, cpu = added(samples, on_gpu), added(samples, on_cpu)
    assert not np.array_equal(gpu, cpu)  # different generators
    within_standard_errors(gpu.mean() - cpu.mean(), 0.0, 10.0 * math.sqrt(2), gpu.size, "gpu - cpu noise mean")
    within_standard_errors(gpu.std() - cpu.std(), 0.0, 10.0, gpu.size, "gpu - cpu noise stddev")


SHOT_FACTOR = 0.5  # means (input / factor) from 0 to 128: both of the GPU's ways of drawing


def shot_statistics(samples, outputs):
    """(what the noise adds, its variance over the variance of the Poisson model)."""
    for sample, output in zip(samples, outputs):
        events = output / SHOT_FACTOR
        np.testing.assert_allclose(events, np.round(events), atol=1e-3)  # whole events
    noise = added(samples, outputs)
    model_variance = np.concatenate([s.ravel() * SHOT_FACTOR for s in samples])
    return noise, float((noise ** 2).sum() / model_variance.sum())


def check_shot(samples, outputs):
    noise, variance_ratio = shot_statistics(samples, outputs)
    spread = math.sqrt(float(np.mean(np.concatenate([s.ravel() for s in samples]))) * SHOT_FACTOR)
    within_standard_errors(noise.mean(), 0.0, spread, noise.size, "mean of the shot noise")
    assert abs(variance_ratio - 1) < 0.1, variance_ratio


def compare_shot(samples, on_gpu, on_cpu):
    (gpu, gpu_ratio), (cpu, cpu_ratio) = shot_statistics(samples, on_gpu), shot_statistics(samples, on_cpu)
    assert not np.array_equal(gpu, cpu)
    spread = math.sqrt(2 * float(np.mean(np.concatenate([s.ravel() for s in samples]))) * SHOT_FACTOR)
    within_standard_errors(gpu.mean() - cpu.mean(), 0.0, spread, gpu.size, "gpu - cpu shot noise mean")
    assert abs(gpu_ratio - cpu_ratio) < 0.15, (gpu_ratio, cpu_ratio)


def salt_and_pepper_images():
    return [np.clip(s, 1, 254) for s in ragged_images()]  # no pixel is salt or pepper before


def salt_and_pepper_shares(samples, outputs):
    """(share of salt pixels, share of pepper pixels, pixels): every pixel is kept, or all salt, or all pepper."""
    salt = pepper = pixels = 0
    for sample, output in zip(samples, outputs):
        is_salt, is_pepper = (output == 255).all(axis=2), (output == 0).all(axis=2)
        kept = (output == sample).all(axis=2)
        assert np.all(is_salt | is_pepper | kept), "a pixel changed otherwise than to salt or pepper on every channel"
        salt, pepper, pixels = salt + is_salt.sum(), pepper + is_pepper.sum(), pixels + kept.size
    return salt / pixels, pepper / pixels, pixels


def check_salt_and_pepper(samples, outputs):
    salt, pepper, pixels = salt_and_pepper_shares(samples, outputs)
    within_standard_errors(salt, 0.2 * 0.25, math.sqrt(0.05 * 0.95), pixels, "share of salt")
    within_standard_errors(pepper, 0.2 * 0.75, math.sqrt(0.15 * 0.85), pixels, "share of pepper")


def compare_salt_and_pepper(samples, on_gpu, on_cpu):
    (gpu_salt, gpu_pepper, pixels), (cpu_salt, cpu_pepper, _) = (salt_and_pepper_shares(samples, on_gpu),
                                                                 salt_and_pepper_shares(samples, on_cpu))
    assert not all(np.array_equal(g, c) for g, c in zip(on_gpu, on_cpu))
    within_standard_errors(gpu_salt - cpu_salt, 0.0, math.sqrt(2 * 0.05 * 0.95), pixels, "gpu - cpu salt")
    within_standard_errors(gpu_pepper - cpu_pepper, 0.0, math.sqrt(2 * 0.15 * 0.85), pixels, "gpu - cpu pepper")


def noisy_images():
    return ragged_images(smooth=False)


CASES = {
    "gaussian_blur": Case(ragged_images, image_op("gaussian_blur", sigma=(1.0, 1.5)), _gaussian_reference, max_abs=1),
    "laplacian": Case(ragged_images, image_op("laplacian", window_size=5, dtype=types.FLOAT),
                      lambda samples, _: [cv2.Laplacian(s, cv2.CV_32F, ksize=5, borderType=cv2.BORDER_REFLECT_101)
                                          for s in samples], max_abs=1e-2, rtol=1e-5),
    # the filter and the fill value as the second and third inputs, as DALI takes them
    "filter": Case(ragged_images, lambda node, device: fn.filter(on_device(node, device), FILTER, 7.0, anchor=(0, 2),
                                                                  border="constant", dtype=types.FLOAT),
                   lambda samples, _: [correlate(s, FILTER, (0, 2), 7.0) for s in samples], max_abs=1e-3, rtol=1e-5),
    "median_blur": Case(noisy_images, image_op("median_blur", window_size=5),
                        lambda samples, _: [reduce_windows(s, (5, 5), (2, 2), "edge", np.median) for s in samples]),
    "experimental.median_blur": Case(
        lambda: [noise_image(20, 30, 3, seed=7).astype(np.float32), noise_image(17, 25, 3, seed=8).astype(np.float32)],
        image_op("experimental.median_blur", window_size=(3, 5)),
        lambda samples, _: [reduce_windows(s, (3, 5), (1, 2), "edge", np.median) for s in samples]),
    # mask_size and anchor are (x, y), as OpenCV's ksize and anchor
    "erode": Case(noisy_images, image_op("erode", mask_size=(3, 5)),
                  lambda samples, _: [cv2.erode(s, cv2.getStructuringElement(cv2.MORPH_RECT, (3, 5)))
                                      for s in samples]),
    "dilate": Case(noisy_images, image_op("dilate", iterations=2, border_mode="replicate"),
                   lambda samples, _: [cv2.dilate(s, np.ones((3, 3), np.uint8), iterations=2,
                                                  borderType=cv2.BORDER_REPLICATE) for s in samples]),
    "experimental.erode": Case(noisy_images, image_op("experimental.erode", mask_size=(5, 3), anchor=(1, 0),
                                                      border_mode="reflect_101"),
                               lambda samples, _: [cv2.erode(s, np.ones((3, 5), np.uint8), anchor=(1, 0),
                                                             borderType=cv2.BORDER_REFLECT_101) for s in samples]),
    "experimental.dilate": Case(noisy_images, image_op("experimental.dilate", mask_size=3, border_mode="wrap"),
                                lambda samples, _: [reduce_windows(s, (3, 3), (1, 1), "wrap", np.max) for s in samples]),
    "noise.gaussian": Case(float_images, image_op("noise.gaussian", mean=5.0, stddev=10.0), check_gaussian,
                           compare_gpu_to_cpu=compare_gaussian),
    "noise.shot": Case(float_images, image_op("noise.shot", factor=SHOT_FACTOR), check_shot,
                       compare_gpu_to_cpu=compare_shot),
    "noise.salt_and_pepper": Case(salt_and_pepper_images, image_op("noise.salt_and_pepper", prob=0.2, salt_vs_pepper=0.25),
                                  check_salt_and_pepper, compare_gpu_to_cpu=compare_salt_and_pepper),
}

__all__ = ["CASES", "correlate", "reduce_windows", "window_size"]
