"""Shared helpers of the operator tests.

``run_operator`` runs one operator over a ragged batch fed by ``fn.external_source`` and returns the
per-sample outputs; ``check_operator`` compares them with an independent reference (OpenCV, Pillow,
numpy or torch) within a stated tolerance. ``image_files`` writes small encoded images to disk.
"""
from __future__ import annotations

import io
import os
import sys
from typing import Callable, Sequence

import numpy as np
import pytest
from PIL import Image

from penstock import fn, pipeline_def, registry

# the shared helpers (helpers_data, operator_cases, cases_*, ...) sit here, above the folders of tests
# that import them
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SEED = 1234

try:
    import torch
    CUDA = torch.cuda.is_available()
except ImportError:
    CUDA = False
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run on the CPU, in numpy


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")


def pytest_collection_modifyitems(config, items):
    """The examples tier (``-m examples`` alone, ``-m "not examples"`` without it): the tests under
    tests/examples/, which run the examples end to end and take about a third of the suite's time.
    They run first: in two processes (``-n 2``), the other one takes the rest of the suite meanwhile,
    rather than one process running them alone at the end."""
    for item in items:
        if str(item.path).startswith(EXAMPLES + os.sep):
            item.add_marker(pytest.mark.examples)
    items.sort(key=lambda item: item.get_closest_marker("examples") is None)


def gpu_or_emulated():
    """Where pipeline tests run their 'mixed' and 'gpu' operators: the GPU when there is one, else
    the emulated GPU path (CPU tensors, Triton's interpreter). Not the emulated path on a GPU
    machine: Triton's interpreter is chosen for the whole process when it starts."""
    import contextlib

    from penstock import devices
    return contextlib.nullcontext() if CUDA else devices.emulated_gpu()


# ---- test images ---------------------------------------------------------------------------------
def smooth_image(height: int, width: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    """HWC uint8: gradients plus low-frequency sinusoids, so resampling filters agree closely."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    planes = []
    for _ in range(channels):
        fy, fx, phase = rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5), rng.uniform(0, 2 * np.pi)
        gy, gx = rng.uniform(-0.5, 0.5, 2)
        plane = 128 + 50 * np.sin(2 * np.pi * (fy * y / height + fx * x / width) + phase) \
            + 60 * (gy * y / height + gx * x / width)
        planes.append(plane)
    return np.clip(np.rint(np.stack(planes, axis=2)), 0, 255).astype(np.uint8)


def noise_image(height: int, width: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    """HWC uint8 uniform noise: any misplaced pixel shows."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def ragged_images(count: int = 4, channels: int = 3, smooth: bool = True, seed: int = 0,
                  min_side: int = 20, max_side: int = 90) -> list[np.ndarray]:
    """A batch of images of different shapes (including portrait and landscape)."""
    rng = np.random.default_rng(seed)
    make = smooth_image if smooth else noise_image
    return [make(int(rng.integers(min_side, max_side)), int(rng.integers(min_side, max_side)), channels, seed + i)
            for i in range(count)]


def encode(image: np.ndarray, fmt: str, **save_args) -> bytes:
    """``image`` (HWC uint8, RGB or 1 channel) encoded by Pillow as ``fmt`` ('JPEG', 'PNG', ...)."""
    pil = Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image)
    buffer = io.BytesIO()
    pil.save(buffer, format=fmt, **save_args)
    return buffer.getvalue()


def pillow_decode(data: bytes, mode: str = "RGB") -> np.ndarray:
    """The reference decode: HWC uint8 from Pillow."""
    with Image.open(io.BytesIO(data)) as image:
        array = np.asarray(image.convert(mode))
    return array[:, :, None] if array.ndim == 2 else array


# Lossless formats: the decoded image must equal the array written. PNM is Pillow's PPM writer.
LOSSLESS_FORMATS = {"png": ("PNG", {}), "bmp": ("BMP", {}), "tiff": ("TIFF", {}), "pnm": ("PPM", {}),
                    "webp": ("WEBP", {"lossless": True})}


@pytest.fixture
def image_files(tmp_path):
    """Writes one file per format and returns {format: (path, array written)}; 'jpeg' holds the
    smooth source image (the decoded JPEG differs from it), 'gif' the first frame of two."""
    files = {}
    image = smooth_image(37, 53, seed=3)
    for name, (fmt, save_args) in LOSSLESS_FORMATS.items():
        path = tmp_path / f"image.{name}"
        path.write_bytes(encode(image, fmt, **save_args))
        files[name] = (str(path), image)
    path = tmp_path / "image.jpg"
    path.write_bytes(encode(image, "JPEG", quality=90))
    files["jpeg"] = (str(path), image)
    # a GIF holds at most 256 colours: a palette image is lossless; the second frame differs
    frames = [noise_image(29, 41, seed=5) // 64 * 85, noise_image(29, 41, seed=6) // 64 * 85]
    pil_frames = [Image.fromarray(frame).quantize(colors=64, dither=Image.Dither.NONE) for frame in frames]
    path = tmp_path / "image.gif"
    pil_frames[0].save(path, save_all=True, append_images=pil_frames[1:], duration=50, loop=0)
    files["gif"] = (str(path), np.asarray(pil_frames[0].convert("RGB")))
    return files


def read_bytes(path) -> np.ndarray:
    with open(path, "rb") as handle:
        return np.frombuffer(handle.read(), dtype=np.uint8)


# ---- running one operator ------------------------------------------------------------------------
def run_batches(op: Callable, samples: Sequence[np.ndarray], *, num_threads: int = 2, seed: int = SEED,
                iterations: int = 1, prefetch_queue_depth: int = 2, layout: str | None = None, device_id: int | None = None,
                **op_kwargs) -> list:
    """Runs ``op(node, **op_kwargs)`` on a batch of ``samples`` fed by fn.external_source (the same
    batch every iteration); returns one tuple of Batch per iteration. ``op`` may call other
    operators (fn.random.* for per-sample arguments) and return several DataNodes. ``layout``:
    the fed batch's (default: HWC for 3-D samples, none for others, such as encoded files).
    ``device_id``: the pipeline's GPU, for GPU operators (inside ``gpu_or_emulated()``)."""
    samples = list(samples)
    if layout is None:
        layout = "HWC" if samples and all(np.ndim(sample) == 3 for sample in samples) else ""

    @pipeline_def(batch_size=len(samples), num_threads=num_threads, device_id=device_id, seed=seed,
                  prefetch_queue_depth=prefetch_queue_depth)
    def pipeline():
        node = fn.external_source(source=lambda: samples, batch=True, layout=layout)
        return op(node, **op_kwargs)

    pipe = pipeline()
    try:
        return [pipe.run() for _ in range(iterations)]
    finally:
        pipe.close()


def run_operator(op: Callable, samples: Sequence[np.ndarray], *, num_threads: int = 2, **kwargs):
    """Per-sample numpy outputs of ``op`` (see run_batches), over all iterations: a list, or a tuple
    of lists when ``op`` returns several DataNodes."""
    results = run_batches(op, samples, num_threads=num_threads, **kwargs)
    outputs = tuple([np.array(sample) for batches in results for sample in batches[k]]
                    for k in range(len(results[0])))
    return outputs[0] if len(outputs) == 1 else outputs


def assert_close(actual: np.ndarray, expected: np.ndarray, max_abs: float = 0.0, mean_abs: float | None = None,
                 rtol: float = 0.0, where: str = "") -> None:
    """Same shape; |actual - expected| <= max_abs + rtol * |expected| everywhere; mean |diff| <= mean_abs."""
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != expected {expected.shape}"
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    bound = max_abs + rtol * np.abs(expected.astype(np.float64))
    worst = float(diff.max()) if diff.size else 0.0
    assert np.all(diff <= bound), f"{where}: max abs diff {worst} exceeds the tolerance (max_abs={max_abs}, rtol={rtol})"
    if mean_abs is not None and diff.size:
        assert diff.mean() <= mean_abs, f"{where}: mean abs diff {diff.mean():.4f} > {mean_abs}"


def check_operator(op: Callable, samples: Sequence[np.ndarray], reference: Callable, *, max_abs: float = 0.0,
                   mean_abs: float | None = None, rtol: float = 0.0, out_dtype=None, num_threads: int = 2,
                   **op_kwargs) -> list[np.ndarray]:
    """Runs ``op(node, **op_kwargs)`` on the ragged batch and compares every sample with
    ``reference(sample)`` within the tolerance (see assert_close); checks the output dtype when
    ``out_dtype`` is given, and that the inputs were not modified. Returns the outputs."""
    originals = [sample.copy() for sample in samples]
    outputs = run_operator(op, samples, num_threads=num_threads, **op_kwargs)
    assert len(outputs) == len(samples)
    for index, (sample, output) in enumerate(zip(samples, outputs)):
        expected = np.asarray(reference(sample))
        if out_dtype is not None:
            assert output.dtype == np.dtype(out_dtype), f"sample {index}: dtype {output.dtype} != {np.dtype(out_dtype)}"
        assert_close(output, expected, max_abs, mean_abs, rtol, where=f"sample {index} of shape {sample.shape}")
        np.testing.assert_array_equal(sample, originals[index], err_msg=f"sample {index}: input was modified")
    return outputs


# ---- operators registered by a test ------------------------------------------------------------------
@pytest.fixture
def scratch_registry():
    """The registry as it was, after the test registered its operator."""
    schemas, implementations, requirements = (dict(registry._SCHEMAS), dict(registry._IMPLEMENTATIONS),
                                              dict(registry._REQUIREMENTS))
    yield
    for table, saved in ((registry._SCHEMAS, schemas), (registry._IMPLEMENTATIONS, implementations),
                         (registry._REQUIREMENTS, requirements)):
        table.clear()
        table.update(saved)
