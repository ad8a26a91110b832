"""The tensor resampler (kernels.tensor_resampling) against the CPU resampler (cpu_image.resample,
its numpy path and its C path): the same passes, operations and order, so the same values, to the
bit, over several filters, axes, windows and types."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from penstock.kernels import cpu_image
from penstock.kernels.tensor_resampling import resample_tensor
from penstock.runtime import native
from penstock.runtime.pinned import to_device

CASES = [  # shape, axes, output sizes, region start, region end, filter (cpu_image.RESAMPLING_FILTERS' names)
    ((9, 11, 2), (0, 2), (4, 5), (0.0, 0.0), (9.0, 2.0), "linear"),  # shrink (triangular) and enlarge
    ((5, 6, 7), (0, 1, 2), (11, 3, 7), (0.0, 0.5, 0.0), (5.0, 6.0, 7.0), "cubic"),
    ((12, 13), (1,), (29,), (13.0,), (0.0,), "lanczos3"),  # flipped window
    ((6, 8, 3), (0, 1), (3, 17), (1.25, 0.0), (5.5, 8.0), "nearest"),
    ((4, 10), (0, 1), (7, 4), (0.0, 0.0), (4.0, 10.0), "gaussian"),
]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("shape, axes, sizes, lo, hi, kind", CASES)
def test_tensor_passes_give_the_cpu_values(dtype, shape, axes, sizes, lo, hi, kind):
    data = (np.random.default_rng(1).random(shape) * 255).astype(dtype)
    passes, _, _ = cpu_image.resampling_passes(shape, axes, sizes, lo, hi, kind, kind, True)
    got = resample_tensor(torch.from_numpy(data), passes, torch.from_numpy(data[:0]).dtype, upload=to_device)
    for native_axis in (None, native.resample_axis):
        want = cpu_image.resample(data, axes, sizes, lo, hi, kind, kind, True, dtype, native_axis)
        assert got.dtype == torch.from_numpy(want[:0]).dtype
        np.testing.assert_array_equal(got.numpy(), want)
