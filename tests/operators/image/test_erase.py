"""erase on samples of any layout and dimension, against numpy slicing: the erased axes (axis_names,
axes, or every axis but C), regions truncated towards zero and cut to the sample, per-channel fills,
the types and dimensions it takes."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import run_operator

from penstock import fn


def erase(samples, layout, **kwargs):
    return run_operator(lambda node: fn.erase(node, **kwargs), samples, layout=layout, num_threads=1)


def test_chw_named_axes():
    chw = np.arange(1, 41, dtype=np.uint8).reshape(2, 4, 5)
    expected = chw.copy()
    expected[:, 1:3, 2:5] = 0
    np.testing.assert_array_equal(erase([chw], "CHW", anchor=(1, 2), shape=(2, 3), axis_names="HW")[0], expected)
    # without axis_names or axes: every axis but C, in layout order
    np.testing.assert_array_equal(erase([chw], "CHW", anchor=(1, 2), shape=(2, 3))[0], expected)


def test_axes_by_index_and_repeated():
    hwc = np.arange(24, dtype=np.int32).reshape(3, 4, 2)
    expected = hwc.copy()
    expected[1:3] = 0
    np.testing.assert_array_equal(erase([hwc], "HWC", anchor=(1,), shape=(2,), axes=(0,))[0], expected)
    # an axis named twice: its later value wins (rows 1..2, then row 1)
    np.testing.assert_array_equal(erase([hwc], "HWC", anchor=(1, 1, 1, 1), shape=(2, 2, 1, 1), axis_names="HH")[0],
                                  expected)


def test_truncation_towards_zero_and_cut():
    image = np.arange(1, 41, dtype=np.uint8).reshape(2, 4, 5)
    out = erase([image], "CHW", anchor=(1.5, 2.5), shape=(1.4, 1.5), axis_names="HW", centered_anchor=True)[0]
    expected = image.copy()
    expected[:, 0:2, 1:3] = 0  # start 0.8 -> 0, end 2.2 -> 2; start 1.75 -> 1, end 3.25 -> 3
    np.testing.assert_array_equal(out, expected)
    out = erase([image], "CHW", anchor=(-1.5, 0.7), shape=(2.9, 1.5), axis_names="HW")[0]
    expected = image.copy()
    expected[:, 0:1, 0:2] = 0  # start -1.5 -> -1 (cut to 0), end 1.4 -> 1
    np.testing.assert_array_equal(out, expected)
    # a negative extent erases nothing
    np.testing.assert_array_equal(erase([image], "CHW", anchor=(1, 1), shape=(-2, 2))[0], image)


def test_normalized_forms():
    image = np.ones((10, 20, 1), np.float32)
    out = erase([image], "HWC", anchor=(0.2, 0.5), shape=(3, 4), normalized_anchor=True)[0]
    expected = image.copy()
    expected[2:5, 10:14] = 0
    np.testing.assert_array_equal(out, expected)
    out = erase([image], "HWC", anchor=(0.2, 0.5), shape=(0.3, 0.25), normalized=True, fill_value=-1)[0]
    expected = image.copy()
    expected[2:5, 10:15] = -1
    np.testing.assert_array_equal(out, expected)


def test_fill_per_channel_and_truncated():
    image = np.full((3, 4, 2), 50, np.uint8)
    out = erase([image], "HWC", anchor=(1, 1), shape=(1, 2), fill_value=(1.5, 2.5))[0]
    expected = image.copy()
    expected[1, 1:3] = (1, 2)
    np.testing.assert_array_equal(out, expected)
    # erasing along C takes the fill of each erased channel
    out = erase([image], "HWC", anchor=(1,), shape=(2,), axis_names="C", fill_value=(8, 9))[0]
    expected = image.copy()
    expected[..., 1] = 9
    np.testing.assert_array_equal(out, expected)
    # out of range: truncated, then wrapped as a C++ cast does
    assert erase([image], "HWC", anchor=(0, 0), shape=(1, 1), fill_value=-3.7)[0][0, 0, 0] == 253
    assert erase([image.astype(np.int16)], "HWC", anchor=(0, 0), shape=(1, 1), fill_value=-7.6)[0][0, 0, 0] == -7


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
                                   "float32", "float16"])
def test_types(dtype):
    data = np.arange(12).reshape(3, 4).astype(dtype)
    out = erase([data], "HW", anchor=(1,), shape=(1,), axes=(0,))[0]
    expected = data.copy()
    expected[1:2] = 0
    assert out.dtype == data.dtype
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("layout,shape", [("W", (6,)), ("DHW", (2, 3, 4)), ("DHWCF", (2, 2, 2, 2, 2))])
def test_dimensions(layout, shape):
    data = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    out = erase([data], layout, anchor=(1,), shape=(1,), axes=(0,))[0]
    expected = data.copy()
    expected[1:2] = 0
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("data,layout,kwargs", [
    (np.zeros(6, np.float64), "W", {"anchor": (1,), "shape": (2,)}),
    (np.zeros((2,) * 6, np.uint8), "", {"anchor": (1,), "shape": (2,), "axes": (0,)}),
    (np.zeros((3, 4), np.int32), "HW", {"anchor": (1, 1), "shape": (2, 2), "fill_value": (1, 2)}),
    (np.zeros((3, 4, 2), np.int32), "HWC", {"anchor": (1, 1), "shape": (2, 2), "fill_value": (1, 2, 3)}),
    (np.zeros((3, 4, 2), np.int32), "HWC", {"anchor": (1, 1), "shape": (2, 2), "axes": (0, 3)}),
    (np.zeros((3, 4, 2), np.int32), "HWC", {"anchor": (1, 1), "shape": (2, 2), "axis_names": "HX"}),
    (np.zeros((3, 4, 2), np.int32), "HWC", {"anchor": (1, 1, 1), "shape": (2, 2, 2)}),
])
def test_refusals(data, layout, kwargs):
    with pytest.raises((ValueError, TypeError, RuntimeError), match="erase"):  # RuntimeError: when it runs
        erase([data], layout, **kwargs)


def test_normalized_excludes_the_separate_forms():
    with pytest.raises(ValueError, match="erase.*'normalized'"):
        fn.erase(np.zeros((2, 2, 1), np.uint8), shape=(1, 1), normalized=True, normalized_anchor=False)
