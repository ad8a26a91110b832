"""normalize and crop_mirror_normalize against DALI itself: each case runs the same program under
nvidia.dali and penstock.compat.dali and compares values, types, shapes and layouts, or that both
refuse it."""
import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

from dali_compare import same  # noqa: E402


def _same(build, samples, layout=None, tolerance=1e-5):
    same(build, [samples], layout, rtol=tolerance, atol=tolerance)


def _samples(dtype, shapes=((3, 4), (2, 4), (5, 4)), seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [(rng.random(shape) * 100 - 30).astype(dtype) for shape in shapes]
    if np.dtype(dtype).kind == "b":
        return [rng.random(shape) > 0.5 for shape in shapes]
    info = np.iinfo(dtype)
    return [rng.integers(max(info.min, -100), min(info.max, 200), shape).astype(dtype) for shape in shapes]


FLOATS, UINT8 = _samples(np.float32), _samples(np.uint8)
UNIFORM = _samples(np.float32, ((3, 4),) * 3, seed=1)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32", "uint32", "float32",
                                   "float16", "float64", "int64", "bool"])
def test_normalize_input_types(dtype):
    _same(lambda fn, types, x: fn.normalize(x), _samples(dtype), "HW")


@pytest.mark.parametrize("dtype", ["UINT8", "INT8", "INT16", "UINT16", "INT32", "UINT32", "FLOAT", "FLOAT16",
                                   "FLOAT64", "INT64", "BOOL"])
def test_normalize_output_types(dtype):
    _same(lambda fn, types, x: fn.normalize(x, dtype=getattr(types, dtype), scale=30, shift=50), FLOATS, "HW")


def test_normalize_rounds_halves_away_from_zero_and_saturates():
    values = [np.float32([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 254.6, -300, 1e10]])]
    for dtype in ("INT8", "UINT8", "INT32"):
        _same(lambda fn, types, x: fn.normalize(x, dtype=getattr(types, dtype), mean=0, stddev=1), values, "HW",
              tolerance=0)


ARGUMENTS = {
    "axes 0": {"axes": (0,)}, "axes 1": {"axes": (1,)}, "axes 1,0": {"axes": (1, 0)}, "no axes": {"axes": ()},
    "axis out of range": {"axes": (2,)}, "negative axis": {"axes": (-1,)},
    "axis_names W": {"axis_names": "W"}, "axis_names HW": {"axis_names": "HW"}, "axis_names X": {"axis_names": "X"},
    "axes and axis_names": {"axes": (1,), "axis_names": "W"},
    "batch": {"batch": True}, "batch axes 0": {"batch": True, "axes": (0,)},
    "batch, ragged axis kept": {"batch": True, "axes": (1,)},
    "ddof 1": {"ddof": 1}, "ddof 2 axes 0": {"ddof": 2, "axes": (0,)}, "ddof 3 axes 0": {"ddof": 3, "axes": (0,)},
    "ddof 3 epsilon": {"ddof": 3, "axes": (0,), "epsilon": 0.25},
    "batch ddof past the count": {"ddof": 20, "axes": (0,), "batch": True},
    "batch ddof past the count, epsilon": {"ddof": 20, "axes": (0,), "batch": True, "epsilon": 0.25},
    "negative ddof": {"ddof": -1}, "epsilon": {"epsilon": 1.0}, "negative epsilon": {"epsilon": -1.0},
    "scale and shift": {"scale": 3.0, "shift": -2.0}, "scale 0": {"scale": 0.0},
    "mean": {"mean": 1.0}, "stddev": {"stddev": 2.0}, "mean and stddev": {"mean": 1, "stddev": 2.0},
    "mean and stddev with axes": {"mean": 1.0, "stddev": 2.0, "axes": (0,)},
    "mean and stddev with axis_names": {"mean": 1.0, "stddev": 2.0, "axis_names": "H"},
    "mean with axes": {"mean": 1.0, "axes": (0,)}, "stddev with axes and epsilon": {"stddev": 2.0, "axes": (1,),
                                                                                  "epsilon": 0.5},
    "stddev 0": {"stddev": 0.0}, "negative stddev": {"stddev": -2.0}, "stddev 0 epsilon": {"stddev": 0.0,
                                                                                         "epsilon": 1.0},
    "mean and stddev epsilon": {"mean": 1.0, "stddev": 3.0, "epsilon": 7.0},
    "mean list": {"mean": [1.0, 2.0]},
}


@pytest.mark.parametrize("samples", ["float32", "uint8", "uniform"])
@pytest.mark.parametrize("case", ARGUMENTS)
def test_normalize_arguments(case, samples):
    _same(lambda fn, types, x: fn.normalize(x, **ARGUMENTS[case]),
          {"float32": FLOATS, "uint8": UINT8, "uniform": UNIFORM}[samples], "HW")


def _arrays(shapes, base, dtype=np.float32):
    return [(np.arange(int(np.prod(shape))).reshape(shape) + base + index).astype(dtype)
            for index, shape in enumerate(shapes)]


REDUCED_0, REDUCED_1 = [(1, 4)] * 3, [(3, 1), (2, 1), (5, 1)]
# name: (arguments, mean's per-sample shapes or None, stddev's or None)
PER_SAMPLE = {
    "mean (1, 1)": ({}, [(1, 1)] * 3, None), "mean 0-d": ({}, [()] * 3, None), "mean (1,)": ({}, [(1,)] * 3, None),
    "mean (1, 1, 1)": ({}, [(1, 1, 1)] * 3, None),
    "mean reduced over axis 0": ({}, REDUCED_0, None), "mean reduced over axis 1": ({}, REDUCED_1, None),
    "mean with axes 0": ({"axes": (0,)}, REDUCED_0, None), "mean with other axes": ({"axes": (1,)}, REDUCED_0, None),
    "mean (1, 1) with axes 0": ({"axes": (0,)}, [(1, 1)] * 3, None),
    "mean (1, 1) with axes 0, 1": ({"axes": (0, 1)}, [(1, 1)] * 3, None),
    "mean with axis_names": ({"axis_names": "W"}, REDUCED_1, None),
    "stddev 0-d": ({}, None, [()] * 3), "stddev (1, 1)": ({}, None, [(1, 1)] * 3),
    "stddev reduced over axis 0": ({}, None, REDUCED_0), "stddev with axes": ({"axes": (1,)}, None, REDUCED_1),
    "stddev with epsilon": ({"epsilon": 0.5}, None, REDUCED_0),
    "both (1, 1)": ({}, [(1, 1)] * 3, [(1, 1)] * 3), "both reduced": ({}, REDUCED_0, REDUCED_0),
    "shapes that differ": ({}, REDUCED_0, [(1, 1)] * 3),
    "mean with stddev a number": ({"stddev": 2.0}, REDUCED_0, None),
    "stddev with mean a number": ({"mean": 1.0}, None, REDUCED_0),
    "mean, ddof and epsilon": ({"ddof": 1, "epsilon": 0.5}, REDUCED_0, None),
    "mean with batch=True": ({"batch": True}, [(1, 1)] * 3, None),
}


@pytest.mark.parametrize("case", PER_SAMPLE)
def test_normalize_per_sample_mean_and_stddev(case):
    arguments, mean, stddev = PER_SAMPLE[case]

    def build(fn, types, x):
        given = dict(arguments)
        for name, shapes, base in (("mean", mean, 1.0), ("stddev", stddev, 2.0)):
            if shapes is not None:
                values = _arrays(shapes, base)
                given[name] = fn.external_source(source=lambda values=values: values, batch=True)
        return fn.normalize(x, **given)
    _same(build, FLOATS, "HW")


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_normalize_per_sample_mean_is_float32(dtype):
    _same(lambda fn, types, x: fn.normalize(x, mean=fn.external_source(
        source=lambda: _arrays(REDUCED_0, 1.0, dtype), batch=True)), FLOATS, "HW")


@pytest.mark.parametrize("stddev", [0.0, 3.0])
@pytest.mark.parametrize("epsilon", [0.0, 1.0])
def test_normalize_per_sample_stddev_of_zero(stddev, epsilon):
    _same(lambda fn, types, x: fn.normalize(x, epsilon=epsilon, stddev=fn.external_source(
        source=lambda: [np.full((1, 4), stddev, np.float32)] * 3, batch=True)), FLOATS, "HW")


def test_normalize_takes_statistics_from_a_whole_batch_function():
    """As DALI's own test: mean and stddev made by a python_function over the whole batch."""
    def build(fn, types, x):
        mean = fn.python_function(x, function=lambda batch: [s.mean(0, keepdims=True) + 0.3 for s in batch],
                                  batch_processing=True)
        stddev = fn.python_function(x, function=lambda batch: [s.std(0, keepdims=True) * 1.3 for s in batch],
                                    batch_processing=True)
        return fn.normalize(x, mean=mean), fn.normalize(x, mean=mean, stddev=stddev, scale=2.0, dtype=types.INT16)
    _same(build, FLOATS, "HW")


def test_normalize_of_empty_samples():
    empty = [np.zeros((0, 4), np.float32), np.ones((2, 4), np.float32)]
    _same(lambda fn, types, x: fn.normalize(x), empty, "HW")
    _same(lambda fn, types, x: fn.normalize(x, axes=(0,)), empty, "HW")
    _same(lambda fn, types, x: fn.normalize(x, axes=(0,), batch=True), empty, "HW")
    _same(lambda fn, types, x: fn.normalize(x, mean=5, stddev=1), empty, "HW")


@pytest.mark.parametrize("dims", [1, 3, 4])
def test_normalize_of_other_dimensions(dims):
    samples = _samples(np.float32, [(2, 3, 4, 2)[:dims], (3, 3, 1, 2)[:dims]])
    for axes in [(0,), tuple(range(dims)), (dims - 1,)]:
        _same(lambda fn, types, x: fn.normalize(x, axes=axes, ddof=1), samples)
        _same(lambda fn, types, x: fn.normalize(x, axes=axes, batch=True), [samples[0], samples[0] * 2])


# ---- crop_mirror_normalize ------------------------------------------------------------------------------
def _images(channels=3, dtype=np.uint8, layout="HWC", seed=0):
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 255, (height, width, channels)).astype(dtype) for height, width in ((6, 8), (5, 7))]
    return [np.ascontiguousarray(image.transpose(2, 0, 1)) for image in images] if layout == "CHW" else images


WINDOW = {"crop": (4, 5), "crop_pos_x": 0.3, "crop_pos_y": 0.7}
NORMALIZED = {"mean": (10.0, 20.0, 30.0), "std": (2.0, 3.0, 4.0)}
OUTSIDE = {"crop": (8, 10), "out_of_bounds_policy": "pad"}


@pytest.mark.parametrize("input_layout", ["HWC", "CHW"])
@pytest.mark.parametrize("output_layout", ["HWC", "CHW", "WHC", "HCW", "CWH", "WCH", "", "HW", "NHWC", "FHWC"])
def test_cmn_layouts(input_layout, output_layout):
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, output_layout=output_layout, mirror=1, **WINDOW,
                                                        **NORMALIZED), _images(layout=input_layout), input_layout)


def test_cmn_of_images_without_layout():
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, **WINDOW), _images())


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "float32",
                                   "float16", "float64", "bool"])
def test_cmn_input_types(dtype):
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, **WINDOW, **NORMALIZED), _images(dtype=dtype), "HWC")


@pytest.mark.parametrize("dtype", ["UINT8", "INT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "FLOAT",
                                   "FLOAT16", "FLOAT64", "BOOL"])
@pytest.mark.parametrize("input_dtype", ["uint8", "float32"])
def test_cmn_output_types(dtype, input_dtype):
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, dtype=getattr(types, dtype), scale=20.0, shift=100.0,
                                                        **WINDOW, **NORMALIZED),
          _images(dtype=input_dtype), "HWC", tolerance=1e-3)


CMN_CASES = {
    "fill, normalized inside": {**OUTSIDE, "fill_values": 7.0, "mean": 10.0, "std": 2.0},
    "fill per channel": {**OUTSIDE, "fill_values": (1.0, 2.0, 3.0), **NORMALIZED},
    "two fill values for three channels": {**OUTSIDE, "fill_values": (1.0, 2.0)},
    "two fill values with three means": {**OUTSIDE, "fill_values": (1.0, 2.0), **NORMALIZED},
    "fill to uint8": {**OUTSIDE, "fill_values": 7.5, "mean": 10.0, "dtype": "UINT8"},
    "fill to int8": {**OUTSIDE, "fill_values": -3.7, "mean": 10.0, "dtype": "INT8"},
    "fill mirrored": {**OUTSIDE, "fill_values": (1.0, 2.0, 3.0), "crop_pos_x": 0.0, "mirror": 1},
    "trim": {"crop": (8, 10), "out_of_bounds_policy": "trim_to_shape", **NORMALIZED},
    "outside, refused": {"crop": (8, 10)},
    "pad_output": {"pad_output": True, **NORMALIZED}, "pad_output, one mean": {"pad_output": True, "mean": 10.0},
    "pad_output, one fill": {**OUTSIDE, "pad_output": True, "fill_values": 5.0},
    "pad_output, three fills": {**OUTSIDE, "pad_output": True, "fill_values": (5.0, 6.0, 7.0)},
    "pad_output, four fills": {**OUTSIDE, "pad_output": True, "fill_values": (5.0, 6.0, 7.0, 8.0)},
    "two means": {"mean": (1.0, 2.0)}, "means and stds of other counts": {"mean": (1.0, 2.0), "std": (1.0, 2.0, 3.0)},
    "std 0": {"std": 0.0, "dtype": "UINT8"}, "a std of 0": {"std": (1.0, 0.0, 2.0)},
    "scale and shift": {"scale": 64.0, "shift": 128.0, **NORMALIZED, "dtype": "UINT8"},
    "mirror 2": {"mirror": 2}, "crop_w alone": {"crop_w": 3.0}, "crop_h alone": {"crop_h": 3.0},
    "crop_h and crop_w": {"crop_h": 3.0, "crop_w": 2.0},
}


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
@pytest.mark.parametrize("case", CMN_CASES)
def test_cmn_arguments(case, layout):
    arguments = dict(CMN_CASES[case])
    dtype = arguments.pop("dtype", "FLOAT")
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, dtype=getattr(types, dtype), output_layout="HWC",
                                                        **{**({} if "crop_w" in arguments or "crop_h" in arguments
                                                              else {"crop": (4, 5)}), **arguments}),
          _images(layout=layout), layout)


@pytest.mark.parametrize("channels", [1, 2, 4, 5])
@pytest.mark.parametrize("pad_output", [False, True])
def test_cmn_channel_counts(channels, pad_output):
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, pad_output=pad_output, mean=3.0, std=2.0, **WINDOW),
          _images(channels), "HWC")
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, pad_output=pad_output, mean=[float(c) for c in
                                                                                         range(channels)], **WINDOW),
          _images(channels), "HWC")


def test_cmn_per_sample_mean_std_and_mirror():
    def build(fn, types, x):
        mean = fn.external_source(source=lambda: [np.float32([1, 2, 3]), np.float32([4, 5, 6])], batch=True)
        std = fn.external_source(source=lambda: [np.float32([2]), np.float32([0.5])], batch=True)
        mirror = fn.external_source(source=lambda: [np.int32(0), np.int32(3)], batch=True)
        return fn.crop_mirror_normalize(x, mean=mean, std=std, mirror=mirror, **WINDOW)
    _same(build, _images(), "HWC")


@pytest.mark.parametrize("layout", ["ABC", "HWD", "WHC"])
def test_cmn_refuses_other_input_layouts(layout):
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, **WINDOW), _images(), layout)
