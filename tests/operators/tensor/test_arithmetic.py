"""Arithmetic on data nodes against numpy: every operator, DALI's type promotion table, Python and
typed constants, broadcasting of per-sample scalars and channels, the GPU against the CPU, and errors
naming the operation and the shapes."""
import numpy as np
import pytest
from conftest import gpu_or_emulated

from penstock import fn, pipeline_def, types
from penstock.numeric import promoted

LEFT = [np.array([[3, 8, 250], [0, 7, 1]], np.uint8), np.array([[9, 4, 2], [5, 6, 3]], np.uint8)]
RIGHT = [np.array([[2, -3, 5], [1, 4, -2]], np.int8), np.array([[7, 1, 3], [-5, 2, 9]], np.int8)]


def _run(build, device="cpu", left=LEFT, right=RIGHT):
    @pipeline_def(batch_size=2, num_threads=1, device_id=0 if device == "gpu" else None, seed=1)
    def pipe():
        a = fn.external_source(source=lambda: left, batch=True)
        b = fn.external_source(source=lambda: right, batch=True)
        if device == "gpu":
            a, b = a.gpu(), b.gpu()
        return build(a, b)
    pipeline = pipe()
    outputs = pipeline.run()
    pipeline.close()
    return [[np.asarray(sample) for sample in (batch.as_cpu() if device == "gpu" else batch)] for batch in outputs]


def test_dalis_promotion_table():
    assert promoted(np.uint8, np.uint8) == np.uint8
    assert promoted(np.float16, np.int64) == np.float16  # a float with any non-float: the float
    assert promoted(np.float16, np.float32) == np.float32
    assert promoted(np.int8, np.int32) == np.int32 and promoted(np.uint16, np.uint8) == np.uint16
    assert promoted(np.int8, np.uint8) == np.int16 and promoted(np.int16, np.uint32) == np.int64
    assert promoted(np.int32, np.uint8) == np.int32  # intX with uintY, X > Y: intX
    assert promoted(np.bool_, np.uint8) == np.uint8


BINARY = {
    "+": (lambda a, b: a + b, np.add), "-": (lambda a, b: a - b, np.subtract), "*": (lambda a, b: a * b, np.multiply),
    # C's integer division and remainder, as DALI's: toward zero, the sign of the dividend
    "//": (lambda a, b: a // b, lambda a, b: np.trunc(a / b).astype(a.dtype)), "%": (lambda a, b: a % b, np.fmod),
    "==": (lambda a, b: a == b, np.equal), "<": (lambda a, b: a < b, np.less), ">=": (lambda a, b: a >= b, np.greater_equal),
    "&": (lambda a, b: a & b, np.bitwise_and), "^": (lambda a, b: a ^ b, np.bitwise_xor),
}


@pytest.mark.parametrize("symbol", list(BINARY))
def test_tensor_with_tensor_as_numpy_in_the_promoted_type(symbol):
    build, reference = BINARY[symbol]
    right = [np.where(sample == 0, 1, sample).astype(np.int8) for sample in RIGHT]  # no division by zero
    (got,) = _run(lambda a, b: build(a, b), right=right)
    for sample, a, b in zip(got, LEFT, right):
        expected = reference(a.astype(np.int16), b.astype(np.int16))  # uint8 with int8: int16
        assert sample.dtype == expected.dtype
        np.testing.assert_array_equal(sample, expected)


def test_constants_are_int32_and_float32_operands_as_in_dali():
    uint8_plus_int, times_float, reflected, divided, typed = _run(
        lambda a, b: (a + 1, a * 0.5, 300 - a, a / 4, a * types.Constant(2, types.UINT8)))
    for index, a in enumerate(LEFT):
        np.testing.assert_array_equal(uint8_plus_int[index], a.astype(np.int32) + 1)
        assert times_float[index].dtype == np.float32 and np.allclose(times_float[index], a * 0.5)
        np.testing.assert_array_equal(reflected[index], 300 - a.astype(np.int32))
        assert divided[index].dtype == np.float32 and np.allclose(divided[index], a / 4)
        assert typed[index].dtype == np.uint8
        np.testing.assert_array_equal(typed[index], (a * 2).astype(np.uint8))  # wraps, as uint8 arithmetic


def test_per_sample_scalars_and_channel_constants_broadcast():
    images = [np.full((2, 3, 3), 10, np.float32), np.full((1, 2, 3), 4, np.float32)]
    scalars = [np.array(2.0, np.float32), np.array(0.5, np.float32)]
    scaled, tinted = _run(lambda a, b: (a * b, a * types.Constant(np.float32([1.0, 0.5, 2.0]))),
                          left=images, right=scalars)
    np.testing.assert_array_equal(scaled[0], np.full((2, 3, 3), 20.0))
    np.testing.assert_array_equal(scaled[1], np.full((1, 2, 3), 2.0))
    np.testing.assert_array_equal(tinted[1][0, 0], [4.0, 2.0, 8.0])


def test_the_gpu_gives_the_cpus_results():
    def build(a, b):
        return a + b, (a * 0.25 - b) // 2, -(a % 3), a != b, abs(b)
    with gpu_or_emulated():
        gpu = _run(build, device="gpu")
    cpu = _run(build)
    for gpu_output, cpu_output in zip(gpu, cpu):
        for gpu_sample, cpu_sample in zip(gpu_output, cpu_output):
            assert gpu_sample.dtype == cpu_sample.dtype
            np.testing.assert_array_equal(gpu_sample, cpu_sample)


def test_shapes_that_do_not_broadcast_are_named():
    import penstock
    with pytest.raises(penstock.PipelineError, match=r"_arithmetic failed.*'\+' of samples of shapes \(2, 3\) "
                                                      r"and \(4,\), which do not broadcast, in _arithmetic#2 \(of "
                                                      r"external_source#0\[0\], external_source#1\[0\]\)"):
        _run(lambda a, b: a + b, right=[np.zeros(4, np.int8)] * 2)


def test_bitwise_operations_take_integers_only():
    import penstock
    with pytest.raises(penstock.PipelineError, match="'&' takes integers or bools, not floats"):
        _run(lambda a, b: (a * 0.5) & b)


MATH = {
    "sqrt": (lambda m, a: m.sqrt(a), lambda a: np.sqrt(a.astype(np.float32))),
    "rsqrt": (lambda m, a: m.rsqrt(a + 1), lambda a: 1 / np.sqrt(a.astype(np.float32) + 1)),
    "cbrt": (lambda m, a: m.cbrt(a - 100), lambda a: np.cbrt(a.astype(np.int32) - 100).astype(np.float32)),
    "exp": (lambda m, a: m.exp(a * 0.01), lambda a: np.exp(a * np.float32(0.01))),
    "log": (lambda m, a: m.log(a + 1), lambda a: np.log(a.astype(np.float32) + 1)),
    "log2": (lambda m, a: m.log2(a + 1), lambda a: np.log2(a.astype(np.float32) + 1)),
    "log10": (lambda m, a: m.log10(a + 1), lambda a: np.log10(a.astype(np.float32) + 1)),
    "sin": (lambda m, a: m.sin(a), lambda a: np.sin(a.astype(np.float32))),
    "cos": (lambda m, a: m.cos(a), lambda a: np.cos(a.astype(np.float32))),
    "tan": (lambda m, a: m.tan(a * 0.001), lambda a: np.tan(a * np.float32(0.001))),
    "asin": (lambda m, a: m.asin(a * 0.003), lambda a: np.arcsin(a * np.float32(0.003))),
    "acos": (lambda m, a: m.acos(a * 0.003), lambda a: np.arccos(a * np.float32(0.003))),
    "atan": (lambda m, a: m.atan(a), lambda a: np.arctan(a.astype(np.float32))),
    "sinh": (lambda m, a: m.sinh(a * 0.01), lambda a: np.sinh(a * np.float32(0.01))),
    "cosh": (lambda m, a: m.cosh(a * 0.01), lambda a: np.cosh(a * np.float32(0.01))),
    "tanh": (lambda m, a: m.tanh(a * 0.01), lambda a: np.tanh(a * np.float32(0.01))),
    "floor": (lambda m, a: m.floor(a * 0.3), lambda a: np.floor(a * np.float32(0.3))),
    "ceil": (lambda m, a: m.ceil(a * 0.3), lambda a: np.ceil(a * np.float32(0.3))),
    "abs": (lambda m, a: m.abs(a - 100), lambda a: np.abs(a.astype(np.int32) - 100)),
    "clamp": (lambda m, a: m.clamp(a, 5, 200), lambda a: np.clip(a.astype(np.int32), 5, 200)),
    "min": (lambda m, a: m.min(a, 6), lambda a: np.minimum(a.astype(np.int32), 6)),
    "max": (lambda m, a: m.max(7, a), lambda a: np.maximum(a.astype(np.int32), 7)),
    "pow": (lambda m, a: m.pow(a * 0.1, 2), lambda a: (a * np.float32(0.1)) ** np.float32(2)),
    "atan2": (lambda m, a: m.atan2(a, 9.0), lambda a: np.arctan2(a.astype(np.float32), np.float32(9))),
    "fabs": (lambda m, a: m.fabs(a - 100), lambda a: np.abs(a.astype(np.int32) - 100).astype(np.float32)),
    "floor of ints": (lambda m, a: m.floor(a), lambda a: a.astype(np.float32)),
    "ceil of ints": (lambda m, a: m.ceil(a - 100), lambda a: (a.astype(np.int32) - 100).astype(np.float32)),
    "asinh": (lambda m, a: m.asinh(a * 0.1), lambda a: np.arcsinh(a * np.float32(0.1))),
    "acosh": (lambda m, a: m.acosh(a + 1), lambda a: np.arccosh(a.astype(np.float32) + 1)),
    "atanh": (lambda m, a: m.atanh(a * 0.003), lambda a: np.arctanh(a * np.float32(0.003))),
    "fpow": (lambda m, a: m.fpow(a, 2), lambda a: a.astype(np.float32) ** 2),
    "pow of ints, negative exponents": (lambda m, a: m.pow(a - 5, m.min(a - 7, 3)),
                                        lambda a: np.where(a.astype(np.int32) - 7 < 0, 0, (a.astype(np.int32) - 5)
                                                           ** np.clip(a.astype(np.int32) - 7, 0, 3))),
    "clamp, lo > hi": (lambda m, a: m.clamp(a, 9, 2), lambda a: np.full(a.shape, 2, np.int32)),
}


@pytest.mark.parametrize("name", list(MATH))
def test_math_functions_as_numpy_on_both_devices(name):
    from penstock import math
    build, reference = MATH[name]
    (cpu,) = _run(lambda a, b: build(math, a))
    with gpu_or_emulated():
        (gpu,) = _run(lambda a, b: build(math, a), device="gpu")
    for cpu_sample, gpu_sample, a in zip(cpu, gpu, LEFT):
        expected = reference(a)
        assert cpu_sample.dtype == expected.dtype == gpu_sample.dtype
        np.testing.assert_allclose(cpu_sample, expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(gpu_sample, expected, rtol=1e-5, atol=1e-5)  # torch's float32 functions
    assert fn.math.sqrt is math.sqrt


def _chain_on_both(build, feeds):
    """Outputs of ``build(*nodes)`` on the CPU and on the GPU (or its emulation), and how many
    element-wise kernel launches the GPU batch took."""
    from penstock.kernels import triton_elementwise
    launches = []
    original = triton_elementwise.run_elementwise

    def counted(*args, **kwargs):
        launches.append(1)
        return original(*args, **kwargs)
    results = []
    for device in ("cpu", "gpu"):
        @pipeline_def(batch_size=len(feeds[0]), num_threads=1, device_id=0 if device == "gpu" else None, seed=2)
        def pipe():
            nodes = [fn.external_source(source=[feed], batch=True) for feed in feeds]  # one batch, then the end
            return build(*[node.gpu() if device == "gpu" else node for node in nodes])
        with gpu_or_emulated() if device == "gpu" else _nothing():
            triton_elementwise.run_elementwise = counted
            try:
                pipeline = pipe()
                outputs = pipeline.run()
                pipeline.close()
            finally:
                triton_elementwise.run_elementwise = original
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        results.append([[np.asarray(s) for s in (b.as_cpu() if device == "gpu" else b)] for b in outputs])
    return results[0], results[1], len(launches)


def _nothing():
    import contextlib
    return contextlib.nullcontext()


# ragged: samples of one number of dimensions (as a batch must have, in DALI) and different shapes
RAGGED_INTS = [np.array([[-7, 5, 0], [3, -2, 9]], np.int32), np.array([[-9, 8, 1, -1]], np.int32)]
RAGGED_FLOATS = [np.array([[0.5, -1.25, 3.0], [2.0, 7.5, -0.75]], np.float32), np.array([[1.5, -2.0, 0.25, 9.0]],
                                                                                          np.float32)]


@pytest.mark.parametrize("name, build", [
    ("affine then compare", lambda x, y: ((x * 0.5 + 1) / 2 - y) > 0.1),
    ("mixed types", lambda x, y: fn.math.clamp(x * y + 1, -3, 3.5)),
    ("functions", lambda x, y: fn.math.sqrt(fn.math.abs(y)) + fn.math.exp(y * 0.1) - fn.math.floor(y) * 2),
    ("per-sample scalars", lambda x, y: (y - fn.reductions.mean(y)) * fn.reductions.max(x)),
    ("bools", lambda x, y: ((x > 0) & (y < 1)) | (x == 5)),
])
def test_an_element_wise_chain_is_one_launch_with_the_cpus_results(name, build):
    cpu, gpu, launches = _chain_on_both(build, [RAGGED_INTS, RAGGED_FLOATS])
    assert launches == 1, name
    for cpu_sample, gpu_sample in zip(cpu[0], gpu[0]):
        assert cpu_sample.dtype == gpu_sample.dtype and cpu_sample.shape == gpu_sample.shape
        np.testing.assert_allclose(gpu_sample, cpu_sample, rtol=1e-6, atol=1e-6)


def test_what_the_kernel_does_not_compute_runs_beside_it():
    cpu, gpu, launches = _chain_on_both(lambda x, y: fn.math.tan(y * 0.5) + 1 - y, [RAGGED_INTS, RAGGED_FLOATS])
    assert launches == 2  # y * 0.5, then (tan) + 1 - y
    for cpu_sample, gpu_sample in zip(cpu[0], gpu[0]):
        np.testing.assert_allclose(gpu_sample, cpu_sample, rtol=1e-6, atol=1e-6)


def test_integer_division_and_remainder_run_beside_the_kernel_with_the_cpus_results():
    # the kernel does not check for division by zero: // and % are steps of their own
    cpu, gpu, _ = _chain_on_both(lambda x, y: (x // 3) * 10 + x % 4 - (-x) // 2 + y // 0.5 + y % 0.75,
                                        [RAGGED_INTS, RAGGED_FLOATS])
    for cpu_sample, gpu_sample, x, y in zip(cpu[0], gpu[0], RAGGED_INTS, RAGGED_FLOATS):
        expected = (np.trunc(x / 3) * 10 + np.fmod(x, 4) - np.trunc(-x / 2) + y / np.float32(0.5)
                    + np.fmod(y, np.float32(0.75)))
        np.testing.assert_allclose(cpu_sample, expected, rtol=1e-6)
        np.testing.assert_allclose(gpu_sample, cpu_sample, rtol=1e-6, atol=1e-6)


INTS = [np.array([-7, 7, -7, 7, 5, -2147483647], np.int32)]
DIVISORS = [np.array([2, 2, -2, -2, 7, 3], np.int32)]


def test_integer_division_and_remainder_are_cs():
    quotient, remainder, reflected = _run(lambda a, b: (a // b, a % b, 20 // b), left=INTS, right=DIVISORS)
    np.testing.assert_array_equal(quotient[0], np.trunc(INTS[0] / DIVISORS[0]).astype(np.int32))
    np.testing.assert_array_equal(remainder[0], np.fmod(INTS[0], DIVISORS[0]))
    np.testing.assert_array_equal(reflected[0], [10, 10, -10, -10, 2, 6])
    assert quotient[0].dtype == remainder[0].dtype == np.int32


def test_float_floor_division_divides_and_remainder_is_fmod():
    floats = [np.array([-7.5, 7.5, 3.0, -0.5], np.float32)]
    quotient, remainder, of_int = _run(lambda a, b: (a // b, a % b, b % 2.5), left=floats,
                                       right=[np.array([2, 4294967294, 4294967289, 3], np.uint32)])
    np.testing.assert_array_equal(quotient[0], floats[0] / np.float32([2, 4294967294, 4294967289, 3]))
    np.testing.assert_array_equal(remainder[0], np.fmod(floats[0], [2, 4294967294, 4294967289, 3]).astype(np.float32))
    assert of_int[0].dtype == np.float32
    np.testing.assert_array_equal(of_int[0], np.fmod([2, 4294967294, 4294967289, 3], 2.5).astype(np.float32))


@pytest.mark.parametrize("build", [lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a // 0])
def test_integer_division_by_zero_is_an_error(build):
    import penstock
    with pytest.raises(penstock.PipelineError, match="integer division by zero, in _arithmetic"):
        _run(build, left=INTS, right=[np.array([1, 0, 1, 1, 1, 1], np.int32)])


def test_min_max_and_clamp_compare_as_dali_with_nan():
    from penstock import math
    x = [np.array([np.nan, 1.0, 5.0, -3.0], np.float32)] * 2
    bound = [np.array([0.0, np.nan, 2.0, 2.0], np.float32)] * 2
    low, high, clamped, swapped = _run(lambda a, b: (math.min(a, b), math.max(b, a), math.clamp(a, -1, 2),
                                                    math.clamp(a, 3.0, b)), left=x, right=bound)
    np.testing.assert_array_equal(low[0], np.where(x[0] < bound[0], x[0], bound[0]))  # NaN on the left: right
    np.testing.assert_array_equal(high[0], np.where(bound[0] > x[0], bound[0], x[0]))
    np.testing.assert_array_equal(clamped[0], [np.nan, 1.0, 2.0, -1.0])
    np.testing.assert_array_equal(swapped[0], [np.nan, 3.0, 2.0, 2.0])  # lo > hi: hi; NaN bounds are not limits


def test_signed_and_uint64_compare_by_value():
    signed = [np.array([-1, 5, -9223372036854775807, 3], np.int64)]
    unsigned = [np.array([18446744073709551615, 5, 1, 2], np.uint64)]
    less, equal, greater = _run(lambda a, b: (a < b, a == b, b > a), left=signed, right=unsigned)
    expected = [int(a) < int(b) for a, b in zip(signed[0], unsigned[0])]
    np.testing.assert_array_equal(less[0], expected)
    np.testing.assert_array_equal(equal[0], [int(a) == int(b) for a, b in zip(signed[0], unsigned[0])])
    np.testing.assert_array_equal(greater[0], expected)


BOOLS = [np.array([True, False, True])] * 2


@pytest.mark.parametrize("build, name", [
    (lambda a, b: a + b, "'\\+'"), (lambda a, b: a - b, "'-'"), (lambda a, b: -a, "'unary -'"),
    (lambda a, b: a / b, "'/'"), (lambda a, b: a ** True, "'\\*\\*'"),
    (lambda a, b: fn.math.sqrt(a), "math.sqrt"), (lambda a, b: fn.math.clamp(a, False, True), "math.clamp"),
])
def test_arithmetic_of_bools_alone_is_refused_naming_the_operation(build, name):
    import penstock
    with pytest.raises(penstock.PipelineError, match=f"{name} does not take"):
        _run(build, left=BOOLS, right=BOOLS)


def test_bools_multiply_compare_and_combine_bitwise_and_promote_with_numbers():
    product, less, either, counted = _run(lambda a, b: (a * b, a < b, a | b, a + 1), left=BOOLS,
                                          right=[np.array([True, True, False])] * 2)
    np.testing.assert_array_equal(product[0], [True, False, False])
    np.testing.assert_array_equal(less[0], [False, True, False])
    np.testing.assert_array_equal(either[0], [True, True, True])
    assert counted[0].dtype == np.int32 and counted[0].tolist() == [2, 1, 2]


def test_float16_operands_are_refused_as_in_dali():
    import penstock
    with pytest.raises(penstock.PipelineError, match="'\\+' does not take float16 operands"):
        _run(lambda a, b: a + b, left=[np.ones(2, np.float16)], right=[np.ones(2, np.float32)])
    with pytest.raises(TypeError, match="'\\*' does not take float16"):  # a constant: where it is written
        _run(lambda a, b: a * types.Constant(0.5, types.FLOAT16))


def test_constants_are_typed_as_dalis_and_refused_where_written():
    listed, array, scalar = _run(lambda a, b: (a + [1, 2, 3], a + np.array([1.5, 2, 3]), a + np.int64(1)))
    assert (listed[0].dtype, array[0].dtype, scalar[0].dtype) == (np.int32, np.float32, np.int64)
    np.testing.assert_array_equal(listed[0], LEFT[0].astype(np.int32) + [1, 2, 3])
    with pytest.raises(OverflowError, match="'\\+': the constant 3000000000 does not fit int32"):
        _run(lambda a, b: a + 3000000000)
    with pytest.raises(TypeError, match="numpy float64 constant"):
        _run(lambda a, b: a * np.float64(0.5))


def test_saturating_an_integer_tensor_to_a_wider_or_narrower_integer_type():
    """numeric.saturate_tensor between integer types: a wider target keeps every value (the
    target's bounds are not representable in the source type, so none is clamped to them), a
    narrower one saturates, as numpy's reference of clipping and converting gives."""
    import torch

    from penstock.numeric import saturate_tensor
    values = np.array([-32768, -129, -1, 0, 5, 128, 255, 32767], np.int16)
    for target in (np.int32, np.int64, np.int8, np.uint8, np.int16):
        info = np.iinfo(target)
        got = saturate_tensor(torch.from_numpy(values), getattr(torch, np.dtype(target).name)).numpy()
        np.testing.assert_array_equal(got, np.clip(values.astype(np.int64), info.min, info.max).astype(target))
    np.testing.assert_array_equal(saturate_tensor(torch.tensor([True, False]), torch.int32).numpy(), [1, 0])
