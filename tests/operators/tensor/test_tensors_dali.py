"""Tensor operators, reductions, normalize and the random generators' shapes and types against DALI
itself: each case runs the same program under nvidia.dali and penstock.compat.dali and compares values,
types, shapes and layouts, or that both refuse it."""
import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

from dali_compare import run, same  # noqa: E402


def _run(library: str, build, samples, layout):
    return run(library, build, [samples], layout)


def _same(build, samples, layout=None, rtol=1e-6, values=True):
    same(build, [samples], layout, rtol=rtol, atol=rtol, values=values)


IMAGES = [np.arange(24, dtype=np.uint8).reshape(4, 6, 1), np.arange(40, dtype=np.uint8).reshape(5, 8, 1)]
RGB = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3), (np.arange(60, dtype=np.uint8) * 3).reshape(4, 5, 3)]


def _per_sample(fn, values, dtype):
    return fn.external_source(source=lambda: [np.array(v, dtype) for v in values], batch=True)


SLICES = {
    "int32 anchor in elements": lambda fn, t, x: fn.slice(x, np.array([1, 2], np.int32), np.array([3, 2], np.int32)),
    "int64 anchor": lambda fn, t, x: fn.slice(x, np.array([1, 2], np.int64), np.array([3, 2], np.int64)),
    "list anchor (int32)": lambda fn, t, x: fn.slice(x, [1, 2], [3, 2]),
    "float anchor normalized": lambda fn, t, x: fn.slice(x, [0.1, 0.2], [0.5, 0.5]),
    "float anchor in elements": lambda fn, t, x: fn.slice(x, [1.0, 2.0], [3.0, 2.0], normalized_anchor=False,
                                                          normalized_shape=False),
    "float anchor, shape in elements": lambda fn, t, x: fn.slice(x, [0.25, 0.25], [2.0, 1.0], normalized_shape=False),
    "int anchor whatever normalized_* say": lambda fn, t, x: fn.slice(
        x, np.array([0, 0], np.int32), np.array([1, 1], np.int32), normalized_anchor=True, normalized_shape=True),
    "int anchor, float shape": lambda fn, t, x: fn.slice(x, np.array([1, 2], np.int32),
                                                         np.array([0.5, 0.5], np.float32)),
    "per-sample int32": lambda fn, t, x: fn.slice(x, _per_sample(fn, [[1, 1], [2, 2]], np.int32),
                                                  _per_sample(fn, [[2, 2], [3, 3]], np.int32)),
    "per-sample float32": lambda fn, t, x: fn.slice(x, _per_sample(fn, [[0.1, 0.1], [0.2, 0.2]], np.float32),
                                                    _per_sample(fn, [[0.5, 0.5], [0.5, 0.25]], np.float32)),
    "axis_names H": lambda fn, t, x: fn.slice(x, [1], [2], axis_names="H"),
    "axes (0, 1)": lambda fn, t, x: fn.slice(x, [1, 1], [2, 2], axes=(0, 1)),
    "one value for two axes": lambda fn, t, x: fn.slice(x, [1], [1]),
    "one value for two axes, per sample": lambda fn, t, x: fn.slice(x, _per_sample(fn, [[1], [1]], np.int32),
                                                                    _per_sample(fn, [[1], [1]], np.int32)),
    "out of bounds": lambda fn, t, x: fn.slice(x, [3, 0], [4, 1]),
    "pad": lambda fn, t, x: fn.slice(x, [-1, -1], [3, 3], out_of_bounds_policy="pad", fill_values=7),
    "trim": lambda fn, t, x: fn.slice(x, [-1, -1], [9, 3], out_of_bounds_policy="trim_to_shape"),
    "start/end": lambda fn, t, x: fn.slice(x, start=[1, 1], end=[3, 3]),
    "rel_start/rel_shape": lambda fn, t, x: fn.slice(x, rel_start=[0.5, 0.5], rel_shape=[0.5, 0.5]),
    "dtype float": lambda fn, t, x: fn.slice(x, [1, 2], [3, 2], dtype=t.FLOAT),
    "no axes: every axis": lambda fn, t, x: fn.slice(x, rel_start=[0.5, 0.4, 0.0], rel_shape=[0.5, 0.6, 1.0], axes=[]),
    "no axes per sample": lambda fn, t, x: fn.slice(x, rel_start=[0.5, 0.4, 0.0], rel_shape=[0.5, 0.6, 1.0],
                                                    axes=_per_sample(fn, [[], []], np.int32)),
    "scalar constants": lambda fn, t, x: fn.slice(x, start=t.ScalarConstant(1), shape=t.ScalarConstant(2), axes=[1]),
    "dtype float16": lambda fn, t, x: fn.slice(x, [0, 0], [1, 1], dtype=t.FLOAT16),
    "dtype int16 refused": lambda fn, t, x: fn.slice(x, [0, 0], [1, 1], dtype=t.INT16),
    "fill wraps": lambda fn, t, x: fn.slice(x, [-1, 0], [3, 2], out_of_bounds_policy="pad", fill_values=-1.7),
    "fill truncates": lambda fn, t, x: fn.slice(fn.cast(x, dtype=t.INT16), [-1, 0], [3, 2],
                                                out_of_bounds_policy="pad", fill_values=-2.7),
    "negative axes": lambda fn, t, x: fn.slice(x, start=[1], shape=[2], axes=[-3]),
    "axis past the end refused": lambda fn, t, x: fn.slice(x, start=[1], shape=[2], axes=[3]),
    "per-sample axes": lambda fn, t, x: fn.slice(x, start=[1], shape=[1], axes=_per_sample(fn, [[0], [-2]], np.int32)),
    "per-sample int64 axes refused": lambda fn, t, x: fn.slice(x, start=[1], shape=[1],
                                                               axes=_per_sample(fn, [[0], [1]], np.int64)),
    "per-sample start": lambda fn, t, x: fn.slice(x, start=_per_sample(fn, [[1, 0], [2, 1]], np.int32), shape=[1, 2]),
    "per-sample float start refused": lambda fn, t, x: fn.slice(x, start=_per_sample(fn, [[1, 0], [2, 1]], np.float32),
                                                                shape=[1, 2]),
    "per-sample float64 rel_shape refused": lambda fn, t, x: fn.slice(
        x, rel_shape=_per_sample(fn, [[0.5, 0.5], [0.5, 0.5]], np.float64)),
    "rel_start and rel_shape": lambda fn, t, x: fn.slice(x, rel_start=[0.3, 0.1], rel_shape=[0.3, 0.7]),
    "start alone": lambda fn, t, x: fn.slice(x, start=[1, 1]),
    "no window refused": lambda fn, t, x: fn.slice(x),
    "anchor input and start refused": lambda fn, t, x: fn.slice(x, [1, 2], [3, 2], start=[0, 0]),
    "start and rel_start refused": lambda fn, t, x: fn.slice(x, start=[1, 1], rel_start=[0.5, 0.5]),
    "end and shape refused": lambda fn, t, x: fn.slice(x, end=[2, 2], shape=[1, 1]),
    "axes and axis_names refused": lambda fn, t, x: fn.slice(x, start=[1], end=[2], axes=[0], axis_names="H"),
    "negative shape refused": lambda fn, t, x: fn.slice(x, start=[1, 1], shape=[-1, 1]),
    "uint8 anchor input refused": lambda fn, t, x: fn.slice(x, _per_sample(fn, [[1, 1], [1, 1]], np.uint8),
                                                            _per_sample(fn, [[1, 1], [1, 1]], np.uint8)),
}


@pytest.mark.parametrize("name", list(SLICES))
def test_slice(name):
    _same(SLICES[name], IMAGES, "HWC")


def test_slice_converts_floats_by_truncating():
    samples = [image.astype(np.float32) * 10.6 - 2.5 for image in IMAGES]
    _same(lambda fn, t, x: fn.slice(x, [-1, 0], [3, 2], out_of_bounds_policy="pad", fill_values=300, dtype=t.UINT8),
          samples, "HWC")


def test_slice_fill_per_channel_and_no_layout():
    _same(lambda fn, t, x: fn.slice(x, [-1, -1], [3, 3], out_of_bounds_policy="pad", fill_values=[7, 8, 9]),
          RGB, "HWC")
    _same(lambda fn, t, x: fn.slice(x, [1, 1], [1, 2]), RGB, None)
    _same(lambda fn, t, x: fn.slice(x, [1, 0], [1, 2]), RGB, None)


FLOATS = [np.arange(6, dtype=np.float32).reshape(2, 3, 1), np.arange(12, dtype=np.float32).reshape(4, 3, 1)]
LAYOUTS = {
    "copy": lambda fn, t, x: fn.copy(x),
    "squeeze axes": lambda fn, t, x: fn.squeeze(x, axes=[2]),
    "squeeze axis_names": lambda fn, t, x: fn.squeeze(x, axis_names="C"),
    "squeeze without axes": lambda fn, t, x: fn.squeeze(x),
    "squeeze an axis > 1": lambda fn, t, x: fn.squeeze(x, axes=[0]),
    "expand_dims": lambda fn, t, x: fn.expand_dims(x, axes=[0]),
    "expand_dims new_axis_names": lambda fn, t, x: fn.expand_dims(x, axes=[3, 0], new_axis_names="XF"),
    "expand_dims without axes": lambda fn, t, x: fn.expand_dims(x),
    "reshape shape": lambda fn, t, x: fn.reshape(x, shape=[-1]),
    "reshape shape and layout": lambda fn, t, x: fn.reshape(x, shape=[-1], layout="X"),
    "reshape two negative extents": lambda fn, t, x: fn.reshape(x, shape=[-1, -1]),
    "reshape layout that does not fit": lambda fn, t, x: fn.reshape(x, shape=[-1], layout="AB"),
    "reshape rel_shape keeps the layout": lambda fn, t, x: fn.reshape(x, rel_shape=[1, 1, 1]),
    "reshape rel_shape negative": lambda fn, t, x: fn.reshape(x, rel_shape=[1, -1]),
    "reshape rel_shape one more": lambda fn, t, x: fn.reshape(x, rel_shape=[1, 1, 1, -1]),
    "reshape rel_shape short": lambda fn, t, x: fn.reshape(x, rel_shape=[1, 3]),
    "reshape src_dims": lambda fn, t, x: fn.reshape(x, src_dims=[2, 0, 1]),
    "reshape src_dims and rel_shape": lambda fn, t, x: fn.reshape(x, src_dims=[1, 0, 2], rel_shape=[1, 1, 1],
                                                                  layout=""),
    "reshape layout only": lambda fn, t, x: fn.reshape(x, layout="ABC"),
    "reshape layout cleared": lambda fn, t, x: fn.reshape(x, rel_shape=[1, 1, 1], layout=""),
    "reshape nothing": lambda fn, t, x: fn.reshape(x),
    "reshape shape input list": lambda fn, t, x: fn.reshape(x, [3, -1], layout="AB"),
    "reshape shape input node": lambda fn, t, x: fn.reshape(x, _per_sample(fn, [[3, 2, 1], [1, 12, 1]], np.int32),
                                                           layout="ABC"),
    "reshape shape input and shape": lambda fn, t, x: fn.reshape(x, [3, -1], shape=[3, -1]),
    "reshape shape input and rel_shape": lambda fn, t, x: fn.reshape(x, [3, -1], rel_shape=[1, 1]),
    "reinterpret": lambda fn, t, x: fn.reinterpret(x, dtype=t.INT32),
    "reinterpret layout": lambda fn, t, x: fn.reinterpret(x, shape=[-1], layout="Q"),
    "reinterpret rel_shape in the new type": lambda fn, t, x: fn.reinterpret(x, rel_shape=[1, 1, 2], dtype=t.INT16),
    "reinterpret shape of other bytes refused": lambda fn, t, x: fn.reinterpret(x, rel_shape=[1, 1, 1], dtype=t.INT16),
    "reinterpret shape with a negative extent": lambda fn, t, x: fn.reinterpret(x, shape=[2, -1], dtype=t.INT8),
    "reinterpret src_dims, then the last axis": lambda fn, t, x: fn.reinterpret(x, src_dims=[2, 0, 1], dtype=t.INT16),
    "reinterpret src_dims, last axis too short": lambda fn, t, x: fn.reinterpret(x, src_dims=[2, 0, 1],
                                                                                 dtype=t.FLOAT64),
    "reshape shape and src_dims": lambda fn, t, x: fn.reshape(x, shape=[3, -1], src_dims=[1, 0, 2]),
    "reshape shape and src_dims out of range": lambda fn, t, x: fn.reshape(x, shape=[3, -1], src_dims=[3, 0]),
    "reshape per-sample uint8 shape": lambda fn, t, x: fn.reshape(x, shape=_per_sample(fn, [[3, 2, 1], [1, 12, 1]],
                                                                                            np.uint8)),
    "reshape per-sample float shape refused": lambda fn, t, x: fn.reshape(x, shape=_per_sample(fn, [[6], [12]],
                                                                                               np.float32)),
    "reshape per-sample float64 rel_shape refused": lambda fn, t, x: fn.reshape(
        x, rel_shape=_per_sample(fn, [[1, 1, 1], [1, 1, 1]], np.float64)),
    "squeeze a negative axis leaves all": lambda fn, t, x: fn.squeeze(x, axes=[2, -1]),
    "squeeze passes over axes past the end": lambda fn, t, x: fn.squeeze(x, axes=[2, 5]),
    "squeeze an axis twice refused": lambda fn, t, x: fn.squeeze(x, axes=[2, 2]),
    "cat": lambda fn, t, x: fn.cat(x, x, axis=0),
    "cat axis_name": lambda fn, t, x: fn.cat(x, x * 2, axis_name="W"),
    "cat negative axis": lambda fn, t, x: fn.cat(x, x, axis=-1),
    "cat axis and axis_name": lambda fn, t, x: fn.cat(x, x, axis=0, axis_name="W"),
    "cat layout refused": lambda fn, t, x: fn.cat(x, x, layout="ABC"),
    "stack": lambda fn, t, x: fn.stack(x, x * 3, axis=0),
    "stack axis_name": lambda fn, t, x: fn.stack(x, x, axis=1, axis_name="N"),
    "stack at the end": lambda fn, t, x: fn.stack(x, x, axis=3),
    "stack negative axis": lambda fn, t, x: fn.stack(x, x * 2, axis=-1),
    "stack past the end": lambda fn, t, x: fn.stack(x, x, axis=4),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_layouts(name):
    _same(LAYOUTS[name], FLOATS, "HWC")


@pytest.mark.parametrize("name", ["copy", "squeeze axes", "expand_dims", "stack", "cat"])
def test_layouts_without_one(name):
    _same(LAYOUTS[name], FLOATS, None)


def test_expand_dims_and_stack_names_need_a_layout():
    _same(LAYOUTS["expand_dims new_axis_names"], FLOATS, None)
    _same(LAYOUTS["stack axis_name"], FLOATS, None)


def test_joined_layouts_are_the_first_inputs():
    def build(fn, t, x):
        other = fn.external_source(source=lambda: FLOATS, batch=True, layout="ABC")
        plain = fn.external_source(source=lambda: FLOATS, batch=True)
        return fn.cat(x, other), fn.cat(plain, x), fn.stack(x, plain, axis_name="N")
    _same(build, FLOATS, "HWC")
    _same(lambda fn, t, x: fn.stack(fn.external_source(source=lambda: FLOATS, batch=True), x, axis_name="N"),
          FLOATS, "HWC")


def test_many_inputs():
    _same(lambda fn, t, x: fn.stack(*[x] * 999), FLOATS[:1], None, values=False)
    _same(lambda fn, t, x: fn.cat(*[x] * 1000), FLOATS[:1], None)


LABELS = [np.array([0, 2, 1], np.int32), np.array([3, 1, 0], np.int32)]
ONE_HOT = {
    "default": lambda fn, t, x: fn.one_hot(x, num_classes=4),
    "axis 0": lambda fn, t, x: fn.one_hot(x, num_classes=4, axis=0),
    "axis -1": lambda fn, t, x: fn.one_hot(x, num_classes=4, axis=-1),
    "axis_name": lambda fn, t, x: fn.one_hot(x, num_classes=4, axis=0, axis_name="C"),
    "axis_name last": lambda fn, t, x: fn.one_hot(x, num_classes=4, axis_name="C"),
    "axis out of range": lambda fn, t, x: fn.one_hot(x, num_classes=4, axis=2),
    "uint8 on/off values": lambda fn, t, x: fn.one_hot(x, num_classes=4, dtype=t.UINT8, on_value=200, off_value=3),
    "int8 wraps": lambda fn, t, x: fn.one_hot(x, num_classes=4, dtype=t.INT8, on_value=300, off_value=-5),
    "float64": lambda fn, t, x: fn.one_hot(x, num_classes=4, dtype=t.FLOAT64, on_value=0.5, off_value=-0.25),
    "float16 refused": lambda fn, t, x: fn.one_hot(x, num_classes=4, dtype=t.FLOAT16),
    "float input": lambda fn, t, x: fn.one_hot(fn.cast(x, dtype=t.FLOAT), num_classes=4),
    "uint8 input": lambda fn, t, x: fn.one_hot(fn.cast(x, dtype=t.UINT8), num_classes=4),
    "indices outside the classes": lambda fn, t, x: fn.one_hot(x - 1, num_classes=2),
    "no num_classes": lambda fn, t, x: fn.one_hot(x),
}


@pytest.mark.parametrize("name", list(ONE_HOT))
def test_one_hot(name):
    _same(ONE_HOT[name], LABELS, "X")


@pytest.mark.parametrize("samples, layout, axis", [
    ([np.array(2, np.int32), np.array(1, np.int32)], None, None),
    ([np.array([2], np.int32), np.array([1], np.int32)], None, None),
    ([np.array([2], np.int32), np.array([1], np.int32)], None, 0),
    ([np.array([[0, 1], [2, 0]], np.int32)], "HW", 1),
    ([np.array([[0, 1], [2, 0]], np.int32)], None, None),  # a new axis's name needs a layout
    ([np.array([[[1]]], np.int32)] * 2, None, None),  # but for scalars
])
def test_one_hot_scalars_and_axes(samples, layout, axis):
    extra = {} if axis is None else {"axis": axis}
    _same(lambda fn, t, x: fn.one_hot(x, num_classes=3, **extra), samples, layout)
    _same(lambda fn, t, x: fn.one_hot(x, num_classes=3, axis_name="C", **extra), samples, layout)


REDUCTION_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32]


@pytest.mark.parametrize("kind", ["sum", "min", "max", "mean", "mean_square", "rms", "std_dev", "variance"])
def test_reduction_types(kind):
    for dtype in REDUCTION_TYPES:
        samples = [(np.arange(6).reshape(2, 3) * 7 % 5).astype(dtype), (np.arange(8).reshape(4, 2) + 1).astype(dtype)]

        def build(fn, t, x):
            reduce = getattr(fn.reductions, kind)
            return reduce(x, fn.reductions.mean(x)) if kind in ("std_dev", "variance") else reduce(x)
        _same(build, samples, "HW", rtol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "mean", "mean_square", "rms"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint64])
@pytest.mark.parametrize("output", ["FLOAT", "FLOAT64", "INT64"])
def test_reduction_output_types_of_float_and_64_bit_data(kind, dtype, output):
    samples = [np.arange(6).reshape(2, 3).astype(dtype)] * 2
    _same(lambda fn, t, x: getattr(fn.reductions, kind)(x, dtype=getattr(t, output)), samples, "HW", rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.bool_])
def test_reductions_refuse_data_of_other_types(dtype):
    samples = [np.ones((2, 3), dtype)] * 2
    _same(lambda fn, t, x: fn.reductions.max(x), samples, "HW")
    _same(lambda fn, t, x: fn.reductions.std_dev(x, 0.0), samples, "HW")


REDUCTIONS = {
    "axis_names": lambda fn, t, x: fn.reductions.sum(x, axis_names="H"),
    "axis_names keep_dims": lambda fn, t, x: fn.reductions.max(x, axis_names="W", keep_dims=True),
    "negative axis": lambda fn, t, x: fn.reductions.mean(x, axes=[-1]),
    "axes and axis_names": lambda fn, t, x: fn.reductions.sum(x, axes=[0], axis_names="H"),
    "sum dtype float": lambda fn, t, x: fn.reductions.sum(x, axes=[0], dtype=t.FLOAT),
    "mean dtype float64": lambda fn, t, x: fn.reductions.mean(x, dtype=t.FLOAT64),
    "std_dev axis_names ddof": lambda fn, t, x: fn.reductions.std_dev(
        x, fn.reductions.mean(x, axis_names="W", keep_dims=True), axis_names="W", ddof=1),
    "rms keep_dims": lambda fn, t, x: fn.reductions.rms(x, keep_dims=True),
    "sum in uint8": lambda fn, t, x: fn.reductions.sum(fn.cast(x * 40, dtype=t.UINT8), dtype=t.UINT8),
    "sum in int64 refused": lambda fn, t, x: fn.reductions.sum(x, dtype=t.INT64),
    "mean in the input's type": lambda fn, t, x: fn.reductions.mean(x, axes=[1], dtype=t.UINT8),
    "mean in int32, truncated": lambda fn, t, x: fn.reductions.mean(fn.cast(x, dtype=t.INT32) * 5 + 3, dtype=t.INT32),
    "mean_square in uint64": lambda fn, t, x: fn.reductions.mean_square(x, dtype=t.UINT64),
    "rms in the input's type": lambda fn, t, x: fn.reductions.rms(x, axes=[1], dtype=t.UINT8),
    "mean_square in the input's type refused": lambda fn, t, x: fn.reductions.mean_square(x, dtype=t.UINT8),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name):
    _same(REDUCTIONS[name], [np.arange(6, dtype=np.uint8).reshape(2, 3), np.arange(8, dtype=np.uint8).reshape(4, 2)],
          "HW", rtol=1e-5)


def test_ops_class_names():
    from nvidia.dali import ops as dali_ops

    from penstock.compat.dali import ops
    names = [name for name in dir(dali_ops.reductions) if not name.startswith("_")]
    assert names and all(hasattr(ops.reductions, name) for name in names)


GRAYS = [np.arange(6, dtype=np.uint8).reshape(2, 3), (np.arange(12, dtype=np.uint8) * 3).reshape(4, 3)]
NORMALIZE = {
    "per sample": lambda fn, t, x: fn.normalize(x),
    "batch": lambda fn, t, x: fn.normalize(x, batch=True),
    "batch axes": lambda fn, t, x: fn.normalize(x, batch=True, axes=[0]),
    "batch axis_names": lambda fn, t, x: fn.normalize(x, batch=True, axis_names="H"),
    "batch, extents that differ": lambda fn, t, x: fn.normalize(x, batch=True, axis_names="W"),
    "batch, mean given": lambda fn, t, x: fn.normalize(x, batch=True, mean=2.0),
    "batch, mean per sample": lambda fn, t, x: fn.normalize(x, batch=True, mean=fn.reductions.mean(x)),
    "axis_names": lambda fn, t, x: fn.normalize(x, axis_names="W"),
    "axes and axis_names": lambda fn, t, x: fn.normalize(x, axes=[0], axis_names="H"),
    "mean per sample": lambda fn, t, x: fn.normalize(x, mean=fn.reductions.mean(x, axes=[0], keep_dims=True), axes=[0]),
    "stddev per sample": lambda fn, t, x: fn.normalize(x, axes=[1], stddev=fn.reductions.std_dev(
        x, fn.reductions.mean(x, axes=[1], keep_dims=True), axes=[1], keep_dims=True)),
    "mean given": lambda fn, t, x: fn.normalize(x, mean=2.0),
    "mean as a list": lambda fn, t, x: fn.normalize(x, mean=[1.0, 2.0, 3.0], axes=[0]),
    "stddev and epsilon": lambda fn, t, x: fn.normalize(x, stddev=2.0, epsilon=5.0),
    "epsilon and ddof": lambda fn, t, x: fn.normalize(x, epsilon=1, ddof=1),
    "scale, shift, uint8": lambda fn, t, x: fn.normalize(x, scale=64, shift=128, dtype=t.UINT8),
    "int16": lambda fn, t, x: fn.normalize(x, scale=1000, dtype=t.INT16),
    "float16 refused": lambda fn, t, x: fn.normalize(x, dtype=t.FLOAT16),
    "constant samples": lambda fn, t, x: fn.normalize(fn.reshape(fn.reductions.min(x, keep_dims=True), shape=[1, 1]),
                                                      shift=3),
}


@pytest.mark.parametrize("name", list(NORMALIZE))
def test_normalize(name):
    _same(NORMALIZE[name], GRAYS, "HW", rtol=1e-5)


def test_python_function_without_outputs_returns_an_empty_list():
    returned = {}
    for library in ("dali", "penstock"):
        def build(fn, t, x, library=library):
            returned[library] = fn.python_function(x, function=lambda sample: None, num_outputs=0)
            return x
        assert not isinstance(_run(library, build, GRAYS, "HW"), Exception)
    assert returned["penstock"] == returned["dali"] == []


SHAPES = [np.zeros((2, 3), np.uint8), np.zeros((4, 1), np.uint8)]
RANDOM = {
    "uniform like an input": lambda fn, t, x: fn.random.uniform(x),
    "uniform like an input, and shape": lambda fn, t, x: fn.random.uniform(x, shape=[2]),
    "uniform shape": lambda fn, t, x: fn.random.uniform(shape=[2, 3]),
    "uniform shape per sample": lambda fn, t, x: fn.random.uniform(shape=_per_sample(fn, [[2], [3]], np.int32)),
    "uniform range per sample": lambda fn, t, x: fn.random.uniform(range=_per_sample(fn, [[0, 1], [5, 6]], np.float32)),
    "uniform values": lambda fn, t, x: fn.random.uniform(values=[1, 2, 3], shape=[4]),
    "uniform values per sample": lambda fn, t, x: fn.random.uniform(
        values=_per_sample(fn, [[1, 2], [7, 8, 9]], np.float32), shape=[4]),
    "uniform int32": lambda fn, t, x: fn.random.uniform(range=[0, 10], dtype=t.INT32, shape=[5]),
    "uniform uint8": lambda fn, t, x: fn.random.uniform(range=[0, 10], dtype=t.UINT8, shape=[5]),
    "uniform float64": lambda fn, t, x: fn.random.uniform(range=[0, 10], dtype=t.FLOAT64, shape=[5]),
    "uniform float16": lambda fn, t, x: fn.random.uniform(dtype=t.FLOAT16),
    "coin_flip like an input": lambda fn, t, x: fn.random.coin_flip(x),
    "coin_flip probability per sample": lambda fn, t, x: fn.random.coin_flip(
        probability=_per_sample(fn, [0.0, 1.0], np.float32)),
    "coin_flip uint8": lambda fn, t, x: fn.random.coin_flip(dtype=t.UINT8, shape=3),
    "coin_flip bool": lambda fn, t, x: fn.random.coin_flip(dtype=t.BOOL, shape=3),
    "coin_flip float": lambda fn, t, x: fn.random.coin_flip(dtype=t.FLOAT, shape=3),
    "normal like an input": lambda fn, t, x: fn.random.normal(x, mean=10, stddev=0.1),
    "normal per sample": lambda fn, t, x: fn.random.normal(mean=_per_sample(fn, [100, 200], np.float32),
                                                           stddev=_per_sample(fn, [0.0, 0.0], np.float32)),
    "normal int32": lambda fn, t, x: fn.random.normal(mean=100, dtype=t.INT32, shape=4),
    "beta like an input": lambda fn, t, x: fn.random.beta(x),
    "beta per sample": lambda fn, t, x: fn.random.beta(alpha=_per_sample(fn, [1, 2], np.float32),
                                                       beta=_per_sample(fn, [1, 3], np.float32)),
    "beta float64": lambda fn, t, x: fn.random.beta(dtype=t.FLOAT64),
    "beta int32": lambda fn, t, x: fn.random.beta(dtype=t.INT32),
    "choice of n": lambda fn, t, x: fn.random.choice(5, shape=[4]),
    "choice of a list": lambda fn, t, x: fn.random.choice([1, 5, 9], shape=[4]),
    "choice like an input": lambda fn, t, x: fn.random.choice([1, 5, 9], x),
    "choice p per sample": lambda fn, t, x: fn.random.choice(3, p=_per_sample(fn, [[0, 0, 1], [1, 0, 0]], np.float32)),
}


@pytest.mark.parametrize("name", list(RANDOM))
def test_random_shapes_and_types(name):
    _same(RANDOM[name], SHAPES, "HW", values=False)


@pytest.mark.parametrize("name, low, high", [
    ("uniform range per sample", [0, 5], [1, 6]), ("uniform uint8", 0, 10), ("uniform int32", 0, 10),
    ("uniform values per sample", [1, 7], [2, 9]), ("coin_flip probability per sample", [0, 1], [0, 1]),
    ("normal per sample", [100, 200], [100, 200]), ("choice p per sample", [2, 0], [2, 0])])
def test_random_values_per_sample_lie_in_their_ranges(name, low, high):
    """Both libraries' values within each sample's bounds (integers: range's rounded ends included)."""
    for library in ("dali", "penstock"):
        (samples, _), = _run(library, RANDOM[name], SHAPES, "HW")
        lows, highs = np.broadcast_to(low, len(samples)), np.broadcast_to(high, len(samples))
        for sample, lo, hi in zip(samples, lows, highs):
            assert lo <= sample.min() and sample.max() <= hi, (library, sample, lo, hi)


CONSTANTS = {
    "fdata": lambda fn, t, x: fn.constant(fdata=[1.0, 2.5], device="cpu"),
    "idata in uint8": lambda fn, t, x: fn.constant(idata=[1, 300, -1], dtype=t.UINT8, device="cpu"),
    "fdata and idata refused": lambda fn, t, x: fn.constant(fdata=[1.0], idata=[1], device="cpu"),
    "layout of the shape": lambda fn, t, x: fn.constant(fdata=[1.0, 2.0, 3.0, 4.0], shape=[2, 2], layout="HW",
                                                        device="cpu"),
    "layout of other axes refused": lambda fn, t, x: fn.constant(fdata=[1.0, 2.0], layout="HW", device="cpu"),
    "float64 refused": lambda fn, t, x: fn.constant(fdata=[1.0, 2.0], dtype=t.FLOAT64, device="cpu"),
    "float16": lambda fn, t, x: fn.constant(fdata=[1.0, 2.0], dtype=t.FLOAT16, device="cpu"),
}


@pytest.mark.parametrize("name", list(CONSTANTS))
def test_constant(name):
    _same(lambda fn, t, x: (x, CONSTANTS[name](fn, t, x)), IMAGES, "HWC")


def _counting(shape):
    return np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)


# (fill value's shape, output shape): numpy's broadcasting, a fill larger than an output extent of 1,
# a 1-D fill tiled in order against a last extent of 1, scalars, and shapes that do not broadcast
FULL_SHAPES = [((1,), ()), ((2, 3), ()), ((2, 1), (2, 3)), ((2, 3), (4, 2, 3)), ((2,), (3, 1)), ((3,), (4, 1)),
               ((1, 1, 3), (3, 2, 1)), ((3, 3), (3, 1)), ((3, 3), (3, 3, 1)), ((2, 1, 3), (3, 1)),
               ((3, 1, 3), (1, 3, 1)), ((3, 2, 2), (2, 1)), ((2, 3), (2, 1, 1)), ((2,), (3,)), ((2,), (1, 3))]


@pytest.mark.parametrize("fill_shape, shape", FULL_SHAPES)
def test_full_spreads_the_fill_value_as_dali(fill_shape, shape):
    fill = _counting(fill_shape)
    _same(lambda fn, t, x: fn.full(fn.external_source(source=lambda: [fill, fill + 10], batch=True), shape=shape),
          IMAGES)


@pytest.mark.parametrize("build", [
    lambda fn, t, x: fn.full(fn.external_source(source=lambda: [np.int16([[5], [7]])] * 2, batch=True)),
    lambda fn, t, x: fn.full(fn.external_source(source=lambda: [np.int16([[5], [7]])] * 2, batch=True),
                             shape=_per_sample(fn, [[2, 1], [2, 3]], np.int32)),
    lambda fn, t, x: fn.full(fn.external_source(source=lambda: [np.int16([5, 7])] * 2, batch=True), shape=(1,),
                             layout="X"),
    lambda fn, t, x: fn.full(fn.external_source(source=lambda: [np.int16([5, 7])] * 2, batch=True), shape=(2,),
                             layout="XY"),
    lambda fn, t, x: fn.full(fn.external_source(source=lambda: [np.int16([5, 7])] * 2, batch=True), layout="X"),
    lambda fn, t, x: fn.full_like(x, fn.external_source(source=lambda: [np.float32([[1.7], [300]])] * 2,
                                                        batch=True)),
], ids=["no shape: a scalar", "shape per sample", "layout", "layout of other axes refused",
        "layout for a scalar refused", "full_like"])
def test_full_shapes_and_layouts(build):
    _same(build, [np.zeros((2, 3), np.uint8)] * 2, "HW")


def test_source_info_only_on_what_came_from_a_readers_data():
    """A reader's files carry their source_info through the operators that take them; its labels,
    external_source's data and what is made only of those carry none (as in DALI)."""
    import os
    root = os.path.join(os.environ.get("DALI_EXTRA_PATH", "/work/dali_extra"), "db", "single", "jpeg")
    if not os.path.isdir(root):
        pytest.skip("DALI_extra's images are not here")

    def infos(library):
        if library == "dali":
            from nvidia.dali import fn, pipeline_def, types
        else:
            from penstock.compat.dali import fn, pipeline_def, types

        @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=7)
        def pipe():
            files, labels = fn.readers.file(file_root=root)
            fed = fn.external_source(source=lambda: [np.zeros(2, np.uint8)] * 2)
            images = fn.decoders.image(files)
            made = [files, fed, images, labels, fn.cat(fed, fn.cast(labels, dtype=types.UINT8)),
                    fn.reductions.sum(images)]
            return tuple(fn.get_property(node, key="source_info") for node in made)
        pipeline = pipe()
        pipeline.build()
        return [[bytes(np.array(batch.at(i))).decode() for i in range(len(batch))] for batch in pipeline.run()]
    expected, got = infos("dali"), infos("penstock")
    assert [[bool(info) for info in output] for output in got] == [[bool(info) for info in output]
                                                                    for output in expected]
    assert all(output == got[0] for output in got if any(output))


@pytest.mark.parametrize("axes, names, layout, shape", [
    ([0, 2], "AB", "XYZ", (2, 3, 4)), ([], "", "HW", (2, 3)), ([], None, "HW", (2, 3)), ([0], "", "HW", (2, 3)),
    ([0, 1], "", None, ()), ([0], "X", None, ()), ([4, 3], "AB", "XYZ", (2, 3, 4)), ([4], None, None, (2, 3, 4)),
    ([2, 0, 2], "AB", "XYZ", (2, 3, 4)), ([2], "C", None, (2, 3, 4)), ([2], "", None, (2, 3, 4)),
    ([1, 1], None, "XYZ", (2, 3, 4)), ([1], None, None, (2, 3))])
def test_expand_dims_layouts_and_refusals(axes, names, layout, shape):
    extra = {} if names is None else {"new_axis_names": names}
    _same(lambda fn, t, x: fn.expand_dims(x, axes=axes, **extra), [np.zeros(shape, np.uint8)] * 2, layout)


@pytest.mark.parametrize("shape, layout, element_map", [
    ((4,), "F", [1, 3]), ((4,), None, [1]), ((6, 1), "XF", [1, 3]), ((8, 10, 3), "HWC", [1]), ((6, 1), "FX", [10]),
    ((6, 2), None, [1, 3]), ((6, 2, 2), "FHW", [0, 5]), ((3, 2), "FX", [2, 2])])
def test_element_extract_takes_sequences(shape, layout, element_map):
    _same(lambda fn, t, x: tuple(fn.element_extract(x, element_map=element_map)) if len(element_map) > 1 else
          fn.element_extract(x, element_map=element_map), [np.arange(np.prod(shape), dtype=np.int16).reshape(shape)] * 2, layout)


@pytest.mark.parametrize("shape, layout, kwargs", [
    ((6, 2), None, {}), ((6, 2), None, {"shape": (3,)}), ((6, 2), "AB", {"shape": (2, 2)}), ((6, 2), "AB", {}),
    ((6, 2, 2), "ABC", {"shape": (1,)}), ((6, 2), None, {"p": [0, 0, 0, 0, 0, 1.0]})])
def test_random_choice_draws_elements_along_the_outer_axis(shape, layout, kwargs):
    """Shapes, types and layouts as DALI's; each draw one of the input's elements."""
    data = [np.arange(np.prod(shape), dtype=np.int16).reshape(shape)] * 2
    _same(lambda fn, t, x: fn.random.choice(x, **kwargs), data, layout, values=False)
    (samples, _), = _run("penstock", lambda fn, t, x: fn.random.choice(x, **kwargs), data, layout)
    rows = {row.tobytes() for row in data[0]}
    for sample in samples:
        assert all(draw.tobytes() in rows for draw in sample.reshape(-1, *shape[1:]))


@pytest.mark.parametrize("alpha, beta", [(1e-44, 1e-43), (3e-37, 5e-37), (0.003, 0.002), (1e35, 0.8), (0.0, 1.0),
                                         (1.0, -0.1), (1e100, 5.0)])
def test_random_beta_takes_any_positive_float32(alpha, beta):
    _same(lambda fn, t, x: fn.random.beta(alpha=alpha, beta=beta, shape=(50,)), IMAGES, values=False)


def test_generators_follow_the_size_of_the_batches_other_sources_give():
    def sizes(library):
        dali_, fn = (__import__("nvidia.dali", fromlist=["fn"]), __import__("nvidia.dali.fn", fromlist=["fn"])) \
            if library == "dali" else (__import__("penstock.compat.dali", fromlist=["fn"]),
                                       __import__("penstock.compat.dali.fn", fromlist=["fn"]))

        @dali_.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=7)
        def pipe():
            fed = fn.external_source(lambda i: [np.zeros(1)] * (4 if i == 0 else 2), batch=True)
            alpha = fn.random.uniform(range=[1, 2])
            return alpha, fn.random.beta(alpha=alpha, shape=(2,)), fn.random.normal(shape=(3,)), fed
        pipeline = pipe()
        pipeline.build()
        return [[len(output) for output in pipeline.run()] for _ in range(2)]
    assert sizes("penstock") == sizes("dali") == [[4] * 4, [2] * 4]
