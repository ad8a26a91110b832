"""How the operator tests describe and run one operator: ``Case`` and ``run_case``.

``tests/operators/test_operator_coverage.py`` holds the cases of the first operators; each operator family
added later keeps its cases in ``tests/cases_<family>.py`` (a ``CASES`` dict of its own), which
the coverage test gathers, so that every family's cases live beside each other and the coverage
check still sees every registered operator.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from conftest import CUDA, SEED, assert_close, noise_image, smooth_image

from penstock import devices, fn, pipeline_def


@dataclass
class Case:
    """How to test one operator. ``samples()`` gives the batch fed to it (numpy arrays; empty for
    sources); ``build(node, device)`` calls the operator in a pipeline definition (``node`` is the
    fed batch on the CPU, or None for sources); ``reference(samples, outputs)`` returns the
    expected outputs (a list of arrays, compared within ``max_abs`` / ``mean_abs`` / ``rtol``) or
    checks the outputs itself and returns None (random generators: their distribution).
    ``compare_gpu_to_cpu(samples, on_gpu, on_cpu)``, when given, replaces the comparison of the
    GPU form with the CPU form sample by sample (random operators: the two devices draw different
    numbers, so it compares their distributions)."""

    samples: Callable[[], list]
    build: Callable
    reference: Callable
    max_abs: float = 0.0
    mean_abs: float | None = None
    rtol: float = 0.0
    gpu_needs_cupy: bool = False
    compare_gpu_to_cpu: Callable | None = None


def on_device(node, device):
    """The fed batch where an operator on ``device`` takes it."""
    return node.gpu() if device == "gpu" else node


def image_op(name, **kwargs):
    """build() of an image operator that takes one image batch."""
    def build(node, device):
        operator = fn
        for part in name.split("."):
            operator = getattr(operator, part)
        return operator(on_device(node, device), device=device, **kwargs)
    return build


def ragged_images(channels=3, smooth=True):
    make = smooth_image if smooth else noise_image
    return [make(23, 31, channels, seed=1), make(40, 27, channels, seed=2), make(17, 17, channels, seed=3)]


def run_case(case: Case, device: str) -> tuple[list, list]:
    """(samples fed, outputs as numpy arrays: a list, or a list per output) of one case."""
    if case.gpu_needs_cupy and device != "cpu":
        pytest.importorskip("cupy", reason="the operator hands the function CuPy arrays on the GPU")
    samples = case.samples()
    batch_size = len(samples) or 5
    # images are fed as HWC; other arrays without a layout (a layout names every dimension)
    layout = "HWC" if samples and all(np.ndim(sample) == 3 for sample in samples) else None

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None if device == "cpu" else 0, seed=SEED)
    def pipeline():
        node = fn.external_source(source=lambda: samples, batch=True, layout=layout) if samples else None
        return case.build(node, device)

    emulated = device != "cpu" and not CUDA
    with devices.emulated_gpu(emulated):
        pipe = pipeline()
        try:
            outputs = pipe.run()
        finally:
            pipe.close()
    arrays = [[np.asarray(sample) for sample in batch.as_cpu()] for batch in outputs]
    return samples, arrays[0] if len(arrays) == 1 else arrays


def compare_outputs(case: Case, outputs, expected, where: str) -> None:
    assert len(outputs) == len(expected), where
    for index, (output, want) in enumerate(zip(outputs, expected)):
        assert_close(output, np.asarray(want), case.max_abs, case.mean_abs, case.rtol, where=f"{where}, sample {index}")


