"""pad against DALI itself: the same program under nvidia.dali and penstock.compat.dali gives the same
values, types, shapes and layouts, or both refuse it."""
import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from test_tensors_dali import _per_sample, _same  # noqa: E402

SAMPLES = [np.ones((2, 3, 1), np.uint8), np.full((3, 1, 2), 5, np.uint8)]
PADS = {
    "axes per sample": lambda fn, t, x: fn.pad(x, axes=_per_sample(fn, [[0], [1, -1]], np.int32)),
    "no axes per sample: all": lambda fn, t, x: fn.pad(x, axes=_per_sample(fn, [[], []], np.int32)),
    "axes per sample with a shape": lambda fn, t, x: fn.pad(x, axes=_per_sample(fn, [[0], [1]], np.int32),
                                                            shape=(4,)),
    "negative axis": lambda fn, t, x: fn.pad(x, axes=(-1,)),
    "no axes: all": lambda fn, t, x: fn.pad(x, axes=()),
    "axis past the last refused": lambda fn, t, x: fn.pad(x, axes=(3,)),
    "axis before the first refused": lambda fn, t, x: fn.pad(x, axes=(-4,)),
    "align 0 refused": lambda fn, t, x: fn.pad(x, align=0),
}


@pytest.mark.parametrize("name", list(PADS))
def test_pad(name):
    _same(PADS[name], SAMPLES)
