"""The Python API of DALI programs: what pipe.run() returns (TensorList / Tensor), DataNode's
methods and indexing, None arguments, constants as outputs, operators called outside a pipeline."""
from collections.abc import Iterable

import numpy as np
import pytest
import torch

from penstock.compat.dali import fn, newaxis, pipeline_def, types
from penstock.compat.dali.pipeline import Pipeline
from penstock.compat.dali.tensors import TensorCPU, TensorListCPU

RAGGED = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 3), np.float32)]
CUBE = np.arange(24, dtype=np.int16).reshape(2, 3, 4)


def run_one(define, batch_size=2):
    pipe = pipeline_def(define, batch_size=batch_size, num_threads=1, device_id=None, seed=7)()
    return pipe.run()


def fed(samples, layout=""):
    return fn.external_source(source=lambda: samples, batch=True, layout=layout)


def test_run_gives_tensor_lists_of_tensors():
    (out,) = run_one(lambda: fed(RAGGED, "AB"))
    assert isinstance(out, TensorListCPU) and len(out) == 2
    assert out.layout() == "AB" and out.dtype == types.FLOAT and not out.is_dense_tensor()
    assert out.shape() == [(2, 3), (1, 3)]
    assert isinstance(out.at(0), np.ndarray) and np.array_equal(out.at(0), RAGGED[0])
    tensor = out[1]
    assert isinstance(tensor, TensorCPU)
    assert tensor.shape() == [1, 3] and tensor.layout() == "AB" and tensor.dtype == types.FLOAT
    assert np.array_equal(np.array(tensor), RAGGED[1])
    assert np.shares_memory(np.asarray(tensor), out.at(1))  # no copy
    assert [t.shape() for t in out] == [[2, 3], [1, 3]]
    with pytest.raises(ValueError, match="not dense"):
        out.as_array()
    assert out.as_cpu() is out


def test_dense_tensor_list_converts_to_numpy_and_torch():
    (out,) = run_one(lambda: fed([CUBE, CUBE + 1]))
    assert out.is_dense_tensor()
    assert np.array_equal(np.array(out), np.stack([CUBE, CUBE + 1]))
    assert out.as_tensor().shape() == [2, 2, 3, 4]
    assert torch.equal(torch.from_dlpack(out), torch.from_numpy(np.stack([CUBE, CUBE + 1])))
    assert torch.equal(torch.from_dlpack(out[1]), torch.from_numpy(CUBE + 1))


def test_tensor_squeeze_drops_unit_axes_and_their_layout_names():
    (out,) = run_one(lambda: fed([np.zeros((1, 3, 1), np.uint8)] * 2, "ABC"))
    tensor = out[0]
    assert tensor.squeeze() and tensor.shape() == [3] and tensor.layout() == "B"


def test_data_node_is_not_iterable_and_has_shape():
    def define():
        data = fed(RAGGED)
        assert not isinstance(data, Iterable)
        with pytest.raises(TypeError):
            iter(data)
        return data.shape(), data.shape(dtype=types.INT32), +data
    shapes, shapes32, same = run_one(define)
    assert [list(s) for s in (shapes.at(0), shapes.at(1))] == [[2, 3], [1, 3]]
    assert shapes.at(0).dtype == np.int64 and shapes32.at(0).dtype == np.int32
    assert np.array_equal(same.at(0), RAGGED[0])


@pytest.mark.parametrize("expression, expected, layout", [
    (lambda x, i: x[1], CUBE[1], "BC"),
    (lambda x, i: x[-1, 1:], CUBE[-1, 1:], "BC"),
    (lambda x, i: x[:, 1:10], CUBE[:, 1:10], "ABC"),
    (lambda x, i: x[:, ::-1], CUBE[:, ::-1], "ABC"),
    (lambda x, i: x[0, 0, 0], CUBE[0, 0, 0], ""),
    (lambda x, i: x[:, :, i], CUBE[:, :, 1], "AB"),
    (lambda x, i: x[:, newaxis("Z"), 1], CUBE[:, np.newaxis, 1], "AZC"),
    (lambda x, i: x[np.int64(1), newaxis], CUBE[1, np.newaxis], ""),
])
def test_subscripts_index_each_sample_as_numpy(expression, expected, layout):
    def define():
        index = fed([np.array(1, np.int32)], "")
        return expression(fed([CUBE], "ABC"), index)
    (out,) = run_one(define, batch_size=1)
    assert np.array_equal(out.at(0), expected) and out.at(0).dtype == CUBE.dtype
    assert out.layout() == layout


def test_subscript_out_of_range_fails_naming_the_axis():
    with pytest.raises(Exception, match="out of range for axis 0"):
        run_one(lambda: fed([CUBE], "ABC")[5], batch_size=1)


def test_none_means_not_given():
    (out,) = run_one(lambda: fn.resize(fed([np.zeros((10, 20, 3), np.uint8)] * 2, "HWC"), resize_x=5, resize_y=None))
    assert out.at(0).shape[1] == 5
    with pytest.raises(TypeError, match="missing required argument"):
        run_one(lambda: fn.cast(fed(RAGGED), dtype=None))


def test_constants_are_outputs():
    outputs = run_one(lambda: (types.Constant(np.array([1, 2, 3], np.int32)), types.Constant(5, device="cpu"),
                               2.5, [1, 2]))
    assert [np.array(out.at(1)).tolist() for out in outputs] == [[1, 2, 3], 5, 2.5, [1, 2]]
    assert [out.at(0).dtype for out in outputs] == [np.int32, np.int32, np.float32, np.int32]


def test_scalar_constant_stays_an_arithmetic_operand():
    constant = types.Constant(0.5, types.FLOAT64)
    assert isinstance(constant, types.Constant)
    (out,) = run_one(lambda: fed(RAGGED) * constant)
    assert out.at(0).dtype == np.float64


def test_operators_called_outside_a_pipeline_join_the_one_given_their_outputs():
    outside = fn.random.uniform(range=(0, 1), shape=(2,))
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, seed=3)
    with pipe:
        doubled = outside * 2
    pipe.set_outputs(doubled, outside)
    doubled_out, outside_out = pipe.run()
    assert np.allclose(doubled_out.at(0), 2 * outside_out.at(0))
    other = Pipeline(batch_size=2, num_threads=1, device_id=None)
    other.set_outputs(doubled)
    with pytest.raises(ValueError, match="another pipeline"):
        other.build()  # as in DALI, the outputs are checked when the pipeline is built


def test_a_pipeline_without_a_reader():
    (out,) = run_one(lambda: fn.random.coin_flip(probability=1.0))
    assert [int(out.at(i)) for i in range(2)] == [1, 1]


def test_a_pipeline_of_operators_without_inputs():
    (out,) = run_one(lambda: fn.transforms.translation(offset=(1, 2)))
    assert len(out) == 2 and np.array_equal(out.at(1), [[1, 0, 1], [0, 1, 2]])


def test_constants_follow_the_batches_an_external_source_gives():
    batches = [[np.array(1), np.array(2)], [np.array(1)], [np.array(i) for i in range(6)]]
    pipe = Pipeline(batch_size=6, num_threads=1, device_id=None)
    pipe.set_outputs(types.Constant(np.float32([[1, 2], [3, 4]]), device="cpu"),
                     fn.external_source(batches, cycle=True))
    for batch in batches:
        constant, fed_batch = pipe.run()
        assert len(constant) == len(fed_batch) == len(batch)


def test_constant_data_is_converted_as_dali_converts_it():
    outputs = run_one(lambda: (fn.constant(idata=(-1, 1, 300), dtype=types.UINT8), fn.constant(fdata=5.5, shape=(2, 3)),
                               fn.constant(fdata=(0.5, 1.5, -2.5), dtype=types.INT32)))
    assert [out.at(0).tolist() for out in outputs] == [[0, 1, 255], [[5.5] * 3] * 2, [1, 2, -3]]


def test_external_source_with_num_outputs_gives_a_list_even_of_one():
    def define():
        listed = fn.external_source(lambda: ([np.zeros(2, np.float32)] * 2,), num_outputs=1)
        assert isinstance(listed, list) and len(listed) == 1
        return listed[0], fn.cast(listed[0], dtype=types.INT32)
    data, cast = run_one(define)
    assert data.at(0).dtype == np.float32 and cast.at(0).dtype == np.int32


def test_no_type_means_no_type_given():
    (out,) = run_one(lambda: fn.constant(fdata=(1.0, 2.0), dtype=types.NO_TYPE))
    assert out.at(0).dtype == np.float32
