"""Compose (DALI's ops.Compose): operator objects chained, each on the outputs of the one before,
against the same operators called one by one, and against DALI."""
import numpy as np
import pytest
from conftest import gpu_or_emulated, noise_image

from penstock.compat import dali as penstock_dali
from penstock.compose import Compose

IMAGES = [noise_image(6, 8, 3, seed=1), noise_image(5, 4, 3, seed=2)]


def composed(library, compose, chained=True, device="cpu"):
    fn, ops, types = library.fn, library.ops, library.types
    steps = [ops.Flip(horizontal=1), ops.Cast(dtype=types.FLOAT, device=device), ops.Transpose(perm=[2, 0, 1])]

    @library.pipeline_def(batch_size=2, num_threads=1, device_id=None if device == "cpu" else 0)
    def pipe():
        images = fn.external_source(source=[IMAGES], cycle=True, layout="HWC")
        if chained:
            return compose([compose(steps[:2]), steps[2]])(images)
        return steps[2](steps[1](steps[0](images)))
    built = pipe()
    built.build()
    (out,) = built.run()
    return out.layout(), [np.array(out.as_cpu()[index]) for index in range(2)]


def test_compose_is_the_operators_called_in_turn():
    layout, arrays = composed(penstock_dali, Compose)
    assert (layout, arrays[0].dtype) == ("CHW", np.float32)
    for array, image in zip(arrays, IMAGES):
        assert np.array_equal(array, image[:, ::-1].astype(np.float32).transpose(2, 0, 1))
    assert layout == composed(penstock_dali, Compose, chained=False)[0]


def test_a_gpu_operator_gets_its_inputs_copied_to_the_gpu():
    with gpu_or_emulated():
        layout, arrays = composed(penstock_dali, Compose, device="gpu")
    for array, image in zip(arrays, IMAGES):
        assert np.array_equal(array, image[:, ::-1].astype(np.float32).transpose(2, 0, 1))


def test_one_operator_is_itself_and_none_is_refused():
    operator = penstock_dali.ops.Flip()
    assert Compose([operator]) is operator
    with pytest.raises(ValueError, match="Compose: give at least one operator"):
        Compose([])


def test_same_as_dali():
    dali = pytest.importorskip("nvidia.dali")
    expected_layout, expected = composed(dali, dali.ops.Compose)
    layout, got = composed(penstock_dali, Compose)
    assert layout == expected_layout
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, expected))
