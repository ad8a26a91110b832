"""The pad kernel against numpy's np.pad (exact: it only copies and fills), on ragged batches of
several types, layouts and strides; without a GPU in Triton's interpreter over CPU tensors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import CUDA
from penstock.kernels.triton_pad import DIMS, merged_axes, run_pad
from penstock.runtime.pinned import to_device

DEVICE = torch.device("cuda") if CUDA else torch.device("cpu")


def _expected(sample: np.ndarray, shape: tuple, fill) -> np.ndarray:
    return np.pad(sample, [(0, extent - size) for size, extent in zip(sample.shape, shape)], constant_values=fill)


def _check(samples: list, shapes: list, fills: list, tensors=None) -> None:
    tensors = tensors if tensors is not None else [torch.from_numpy(np.ascontiguousarray(s)).to(DEVICE) for s in samples]
    padded = run_pad(tensors, shapes, fills, upload=to_device)
    assert padded is not None
    assert [tuple(sample.shape) for sample in padded] == [tuple(shape) for shape in shapes]
    for index, (got, sample, shape, fill) in enumerate(zip(padded, samples, shapes, fills)):
        np.testing.assert_array_equal(got.cpu().numpy(), _expected(sample, shape, fill), err_msg=f"sample {index}")


def test_hwc_images_padded_in_height_and_width_with_a_fill_per_sample():
    rng = np.random.default_rng(1)
    samples = [rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for h, w in ((5, 7), (9, 4), (1, 1))]
    _check(samples, [(9, 8, 3)] * 3, [7, 0, 255])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int16, np.int32])
def test_chw_planes_padded_as_mask_rcnn_does_with_align(dtype):
    rng = np.random.default_rng(2)
    samples = [rng.normal(0, 50, (3, h, w)).astype(dtype) for h, w in ((6, 11), (13, 4), (8, 8))]
    _check(samples, [(3, 16, 16)] * 3, [0, -1, 2])


def test_ragged_shapes_padded_to_their_own_extents_and_one_dimensional_samples():
    rng = np.random.default_rng(3)
    samples = [rng.normal(size=n).astype(np.float32) for n in (3, 2500, 1)]
    _check(samples, [(4,), (2500,), (9,)], [1.5, 0.0, -2.0])


def test_inner_axes_padded_and_a_transposed_view_read_through_its_strides():
    rng = np.random.default_rng(4)
    base = [rng.integers(0, 100, (w, h, 2), dtype=np.uint8) for h, w in ((4, 6), (3, 5))]
    views = [torch.from_numpy(b).to(DEVICE).permute(1, 0, 2) for b in base]  # HWC views of WHC buffers
    samples = [b.transpose(1, 0, 2) for b in base]
    _check(samples, [(4, 6, 4), (5, 5, 2)], [9, 3], tensors=views)


def test_an_empty_sample_is_all_fill():
    samples = [np.zeros((0, 3), np.float32), np.ones((2, 3), np.float32)]
    _check(samples, [(2, 3), (2, 3)], [4.0, 0.0])


def test_axes_merge_only_where_unpadded_and_contiguous():
    # HWC padded in H and W: W and C become one row
    assert merged_axes((5, 7, 3), (21, 3, 1), (9, 8, 3)) == ([5, 21], [21, 1], [9, 24])
    # nothing padded: one row
    assert merged_axes((2, 3, 4), (12, 4, 1), (2, 3, 4)) == ([24], [1], [24])
    # a strided (transposed) view keeps its axes
    assert merged_axes((4, 6, 2), (2, 8, 1), (4, 6, 2)) == ([4, 6, 2], [2, 8, 1], [4, 6, 2])


def test_more_axes_than_the_kernel_takes_and_other_types_are_left_to_the_caller():
    wide = torch.zeros((2,) * (DIMS + 1) * 2, device=DEVICE)[(slice(None, None, 2),) * (DIMS + 1)]
    assert run_pad([wide], [(3,) * (DIMS + 1)], [0.0], upload=to_device) is None
    assert run_pad([torch.zeros(3, dtype=torch.float64, device=DEVICE)], [(4,)], [0.0], upload=to_device) is None
