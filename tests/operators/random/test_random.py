"""Random generators: their distributions (checked statistically over a few thousand values with
stated bounds), ranges, shapes, and reproducibility for a seed whatever the threads and prefetching."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import run_operator

from penstock import fn, types

BATCH, ITERATIONS = 100, 40  # 4000 values per statistic


def draw(generator, batch_size: int = BATCH, iterations: int = ITERATIONS, **run_kwargs):
    """Values of ``generator()`` (random operator calls) over ``iterations`` batches: an [N, ...]
    array, or a tuple of them when it returns several outputs."""
    placeholders = [np.zeros(1, np.uint8)] * batch_size  # the operators under test are the only sources used
    outputs = run_operator(lambda _: generator(), placeholders, iterations=iterations, layout="", **run_kwargs)
    if isinstance(outputs, tuple):
        return tuple(np.stack(values) for values in outputs)
    return np.stack(outputs)


def standard_errors(values: np.ndarray, expected_mean: float, expected_std: float) -> float:
    """How many standard errors the sample mean lies from the expected mean."""
    return abs(values.mean() - expected_mean) / (expected_std / np.sqrt(values.size))


# Statistical bounds: 4.5 standard errors (a false alarm about once in 150,000 runs; the seed is
# fixed anyway, so a run either passes or fails every time).
Z = 4.5


@pytest.mark.parametrize("probability", [0.5, 0.2, 0.0, 1.0])
def test_coin_flip_frequency(probability):
    values = draw(lambda: fn.random.coin_flip(probability=probability))
    assert values.shape == (BATCH * ITERATIONS,) and values.dtype == np.int32
    assert set(np.unique(values)) <= {0, 1}
    if probability in (0.0, 1.0):
        assert np.all(values == probability)
    else:
        assert standard_errors(values, probability, np.sqrt(probability * (1 - probability))) < Z


def test_uniform_range_and_moments():
    low, high = 2.0, 5.0
    values = draw(lambda: fn.random.uniform(range=(low, high)))
    assert values.dtype == np.float32
    assert values.min() >= low and values.max() < high
    assert standard_errors(values, (low + high) / 2, (high - low) / np.sqrt(12)) < Z
    # the deciles of a uniform distribution are evenly spaced: each holds 10% +- 4.5 standard errors
    counts = np.histogram(values, bins=10, range=(low, high))[0] / values.size
    assert np.all(np.abs(counts - 0.1) < Z * np.sqrt(0.1 * 0.9 / values.size))


def test_uniform_discrete_values():
    choices = (1.0, 2.5, 7.0)
    values = draw(lambda: fn.random.uniform(values=choices))
    assert set(np.unique(values)) == set(choices)
    for choice in choices:
        frequency = np.mean(values == choice)
        assert abs(frequency - 1 / 3) < Z * np.sqrt(2 / 9 / values.size)


def test_normal_moments():
    mean, stddev = 3.0, 2.0
    values = draw(lambda: fn.random.normal(mean=mean, stddev=stddev)).astype(np.float64)
    assert standard_errors(values, mean, stddev) < Z
    # the standard error of the sample variance is about sigma^2 * sqrt(2 / n)
    assert abs(values.var() - stddev ** 2) < Z * stddev ** 2 * np.sqrt(2 / values.size)
    within_one_sigma = np.mean(np.abs(values - mean) < stddev)
    assert abs(within_one_sigma - 0.6827) < Z * np.sqrt(0.6827 * 0.3173 / values.size)


@pytest.mark.parametrize("generator", [
    lambda shape: fn.random.uniform(range=(0.0, 1.0), shape=shape),
    lambda shape: fn.random.normal(shape=shape),
    lambda shape: fn.random.coin_flip(shape=shape),
], ids=["uniform", "normal", "coin_flip"])
def test_shape_argument_gives_arrays_of_independent_values(generator):
    values = draw(lambda: generator((2, 3)), batch_size=50, iterations=2)
    assert values.shape == (100, 2, 3)
    flat = values.reshape(100, 6).astype(np.float64)
    # no two elements of the array repeat one stream: over 100 samples their correlations stay small
    # (0.35 is 3.5 standard errors of a correlation of independent values)
    correlation = np.corrcoef(flat.T)
    assert np.all(np.abs(correlation[np.triu_indices(6, 1)]) < 0.35)


def test_dtype_argument():
    values = draw(lambda: fn.random.uniform(range=(0.0, 10.0), dtype=types.FLOAT64), iterations=1)
    assert values.dtype == np.float64
    flips = draw(lambda: fn.random.coin_flip(dtype=types.UINT8), iterations=1)
    assert flips.dtype == np.uint8


def three_generators():
    return (fn.random.uniform(range=(-1.0, 1.0)), fn.random.normal(), fn.random.coin_flip())


def test_values_are_reproducible_for_a_seed_and_differ_for_another():
    first = draw(three_generators, batch_size=16, iterations=3, seed=11)
    again = draw(three_generators, batch_size=16, iterations=3, seed=11)
    other = draw(three_generators, batch_size=16, iterations=3, seed=12)
    for a, b, c in zip(first, again, other):
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)


@pytest.mark.parametrize("num_threads,prefetch_queue_depth", [(1, 1), (2, 3), (4, 2)])
def test_values_do_not_depend_on_threads_or_prefetching(num_threads, prefetch_queue_depth):
    reference = draw(three_generators, batch_size=16, iterations=4, seed=5, num_threads=1, prefetch_queue_depth=1)
    values = draw(three_generators, batch_size=16, iterations=4, seed=5, num_threads=num_threads,
                  prefetch_queue_depth=prefetch_queue_depth)
    for expected, actual in zip(reference, values):
        np.testing.assert_array_equal(actual, expected)


def test_each_batch_and_each_operator_draws_new_values():
    uniform, normal, _ = draw(three_generators, batch_size=16, iterations=2, seed=5)
    assert not np.array_equal(uniform[:16], uniform[16:]), "two batches should differ"
    a, b = draw(lambda: (fn.random.uniform(range=(0.0, 1.0)), fn.random.uniform(range=(0.0, 1.0))),
                batch_size=16, iterations=1)
    assert not np.array_equal(a, b), "two operators should draw from different streams"


def test_operator_seed_overrides_the_pipeline_seed():
    first = draw(lambda: fn.random.uniform(range=(0.0, 1.0), seed=99), batch_size=8, iterations=2, seed=1)
    second = draw(lambda: fn.random.uniform(range=(0.0, 1.0), seed=99), batch_size=8, iterations=2, seed=2)
    np.testing.assert_array_equal(first, second)


def test_uniform_blocks_are_the_numbers_of_one_batch_draw():
    """A random crop's attempts are drawn per sample where the sample is computed; they are exactly
    the numbers of rng.random((count, blocks, 4)), sent to worker processes as a few bytes."""
    import pickle

    from penstock.draws import SampleBlocks, UniformBlocks
    expected_rng = np.random.Generator(np.random.Philox(key=[5, 9]))
    expected = expected_rng.random((64, 10, 4))
    rng = np.random.Generator(np.random.Philox(key=[5, 9]))
    blocks = UniformBlocks.draw(rng, 64, 10)
    assert isinstance(blocks, UniformBlocks) and len(blocks) == 64
    np.testing.assert_array_equal(np.asarray(blocks), expected)
    np.testing.assert_array_equal(rng.random(8), expected_rng.random(8))  # moved past them, as a draw does
    chosen = pickle.loads(pickle.dumps(blocks[[40, 3, 63]]))
    assert len(pickle.dumps(blocks[list(range(32))])) < 400
    assert isinstance(chosen[1], SampleBlocks)
    np.testing.assert_array_equal(np.asarray(chosen[0]), expected[40])
    assert next(iter(chosen[2])) == tuple(expected[63, 0])
    np.testing.assert_array_equal(np.asarray(blocks[7]), expected[7])


def test_uniform_blocks_fall_back_to_the_array_where_the_generator_cannot_be_replayed():
    from penstock.draws import UniformBlocks
    for make in (lambda: np.random.default_rng(3),  # PCG64
                 lambda: np.random.Generator(np.random.Philox(key=3))):
        rng, reference = make(), make()
        if isinstance(rng.bit_generator, np.random.Philox):
            rng.random(1), reference.random(1)  # in the middle of a block of four
        drawn = UniformBlocks.draw(rng, 5, 3)
        assert isinstance(drawn, np.ndarray)
        np.testing.assert_array_equal(drawn, reference.random((5, 3, 4)))


def test_random_streams_are_philoxs_keyed_by_seed_and_iteration():
    """random_stream(seed, iteration) draws Philox(key=[seed mod 2**64, iteration])'s numbers, for
    every seed: also those whose key word numpy converts through a float (2**63 and above)."""
    import random

    from penstock.draws import random_stream
    draw = random.Random(5)
    cases = [(0, 0), (5, 7), (-3, 9), (2**63 - 1, 3), (2**63, 0), (2**63 + 5, 3), (2**64 - 1, 2**64 - 1)]
    cases += [(draw.getrandbits(64), draw.getrandbits(24)) for _ in range(300)]
    with np.errstate(invalid="ignore"):  # numpy's own conversion warns for some of these keys
        for seed, iteration in cases:
            expected = np.random.Generator(np.random.Philox(key=[seed & (2**64 - 1), iteration]))
            np.testing.assert_array_equal(random_stream(seed, iteration).random(3), expected.random(3))
            assert isinstance(random_stream(seed, iteration).bit_generator, np.random.Philox)


def _generated(build, samples, device="cpu", seed=3):
    """The outputs of ``build(data)`` (random generators on ``device``) over one batch of ``samples``."""
    from conftest import gpu_or_emulated

    from penstock import pipeline_def

    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=0 if device == "gpu" else None, seed=seed)
    def pipe():
        data = fn.external_source(source=lambda: samples, batch=True)
        return build(data.gpu() if device == "gpu" else data, device)
    import contextlib
    with gpu_or_emulated() if device == "gpu" else contextlib.nullcontext():
        pipeline = pipe()
        outputs = pipeline.run()
        pipeline.close()
    return [[np.asarray(s) for s in (batch.as_cpu() if device == "gpu" else batch)] for batch in outputs]


SHAPED = [np.zeros((30, 20), np.uint8), np.zeros((7, 50), np.uint8), np.zeros((0, 2), np.uint8)]  # one ndim a batch


def test_shape_like_input_and_per_sample_parameters():
    ranges = [np.array([0.0, 1.0], np.float32), np.array([5.0, 6.0], np.float32), np.array([-2.0, 2.0], np.float32)]

    def build(data, device):
        low_high = fn.external_source(source=lambda: ranges, batch=True)
        return (fn.random.uniform(data, range=low_high), fn.random.normal(data, mean=fn.random.uniform(range=(50, 60)),
                                                                           stddev=0.5, dtype=types.INT16),
                fn.random.coin_flip(data, probability=0.25, dtype=types.BOOL), fn.random.beta(data, alpha=2.0),
                fn.random.choice([3, 8], data), fn.random.uniform(shape=fn.shapes(data, dtype=types.INT32)))
    uniform, normal, flips, beta, choice, shaped = _generated(build, SHAPED)
    for index, sample in enumerate(SHAPED):
        for output in (uniform, normal, flips, beta, choice, shaped):
            assert output[index].shape == sample.shape
        low, high = ranges[index]
        assert np.all((uniform[index] >= low) & (uniform[index] < high)) and uniform[index].dtype == np.float32
        assert normal[index].dtype == np.int16 and np.all((normal[index] >= 47) & (normal[index] <= 63))
        assert flips[index].dtype == np.bool_ and set(np.unique(choice[index])) <= {3, 8}
        assert np.all((beta[index] >= 0) & (beta[index] <= 1))
    flat = np.concatenate([flips[0].ravel(), flips[1].ravel()])
    assert standard_errors(flat.astype(np.float64), 0.25, np.sqrt(0.25 * 0.75)) < Z
    assert standard_errors(beta[0].ravel(), 2 / 3, np.sqrt(2 / 36)) < Z  # Beta(2, 1): mean 2/3, variance 1/18
    assert len(np.unique(uniform[0])) == uniform[0].size  # independent values, not one repeated


def test_integer_types_round_the_values():
    values = draw(lambda: fn.random.uniform(range=(0.0, 3.0), dtype=types.INT32), iterations=2)
    assert set(np.unique(values)) == {0, 1, 2, 3}  # 2.5 and above rounds to 3, as DALI converts


@pytest.mark.parametrize("name, check", [
    ("uniform", lambda: fn.random.uniform(dtype=types.FLOAT16)),
    ("coin_flip", lambda: fn.random.coin_flip(dtype=types.FLOAT)),
    ("beta", lambda: fn.random.beta(dtype=types.INT32))])
def test_output_types_are_dalis(name, check):
    with pytest.raises(ValueError, match=f"random.{name}: dtype .* is not an output type"):
        draw(check, batch_size=1, iterations=1)


def test_gpu_forms_give_the_cpu_values_for_fixed_shapes():
    probabilities = [np.float32(p) for p in (0.1, 0.5, 0.9)]

    def build(data, device):
        probability = fn.external_source(source=lambda: probabilities, batch=True)
        return (fn.random.coin_flip(probability=probability, shape=(50,), device=device, seed=5),
                fn.random.uniform(range=(-3.0, 7.0), shape=(4, 5), device=device, seed=6),
                fn.random.uniform(values=(1.0, 4.0, 9.0), device=device, seed=7),
                fn.random.normal(mean=2.0, stddev=3.0, dtype=types.INT32, device=device, seed=8))
    cpu, gpu = _generated(build, SHAPED), _generated(build, SHAPED, device="gpu")
    for cpu_output, gpu_output in zip(cpu, gpu):
        for cpu_sample, gpu_sample in zip(cpu_output, gpu_output):
            assert cpu_sample.dtype == gpu_sample.dtype
            np.testing.assert_array_equal(cpu_sample, gpu_sample)


def test_gpu_forms_with_shapes_that_follow_the_data():
    def build(data, device):
        return (fn.random.uniform(data, range=(2.0, 3.0), device=device), fn.random.normal(data, device=device),
                fn.random.coin_flip(data, probability=0.5, device=device))
    uniform, normal, flips = _generated(build, SHAPED, device="gpu")
    for index, sample in enumerate(SHAPED):
        assert uniform[index].shape == normal[index].shape == flips[index].shape == sample.shape
    values = np.concatenate([u.ravel() for u in uniform])
    assert np.all((values >= 2.0) & (values < 3.0)) and standard_errors(values, 2.5, np.sqrt(1 / 12)) < Z
    gauss = np.concatenate([n.ravel() for n in normal])
    assert standard_errors(gauss, 0.0, 1.0) < Z and abs(gauss.std() - 1.0) < 0.1
    assert flips[0].dtype == np.int32 and set(np.unique(flips[1])) == {0, 1}


def test_per_sample_parameters_give_the_numbers_of_fixed_ones():
    """The per-sample form (on the workers) maps the batch's variates that the whole-batch form draws."""
    def build(data, device):
        probability = fn.external_source(source=lambda: [np.float32(0.3)] * 3, batch=True)
        return (fn.random.coin_flip(probability=0.3, shape=(40,), seed=9),
                fn.random.coin_flip(probability=probability, shape=(40,), seed=9),
                fn.random.normal(mean=1.0, seed=10), fn.random.normal(mean=fn.random.uniform(values=(1.0,)), seed=10))
    fixed_flips, flips, fixed_normal, normal = _generated(build, SHAPED)
    for fixed, per_sample in ((fixed_flips, flips), (fixed_normal, normal)):
        for a, b in zip(fixed, per_sample):
            np.testing.assert_array_equal(a, b)


def test_eager_calls_take_the_shape_like_input():
    from penstock import eager
    samples = [np.zeros((2, 3)), np.zeros((4, 1))]
    values = eager.random.uniform(samples, range=(5.0, 6.0))
    assert [np.asarray(value).shape for value in values] == [(2, 3), (4, 1)]
    assert all(np.all((np.asarray(value) >= 5.0) & (np.asarray(value) < 6.0)) for value in values)


@pytest.mark.parametrize("range_,dtype,low,high", [
    ((0.2, 3.7), types.UINT16, 0, 3),  # ends truncated: [0, 3)
    ((-200.0, 100.0), types.INT8, 56, 100),  # -200 wraps to 56
    ((-1.0, 1.0), types.UINT8, 1, 255),  # -1 wraps to 255: [255, 1) draws 1..255
])
def test_uniform_integer_range_ends_cast_first(range_, dtype, low, high):
    # as DALI: the range's ends are cast to the integer type (C++: truncated, wrapped), then the
    # drawn values are rounded, so the two ends come half as often as the values between
    values = draw(lambda: fn.random.uniform(range=range_, dtype=dtype, shape=(100,)), iterations=4).ravel()
    assert values.min() == low and values.max() == high
    counts = np.bincount(values.astype(np.int64) - low)
    inner = counts[1:-1].mean()
    assert abs(counts[0] / inner - 0.5) < 0.2 and abs(counts[-1] / inner - 0.5) < 0.2


def test_uniform_empty_range_refused():
    with pytest.raises(ValueError, match="random.uniform.*'range'"):
        fn.random.uniform(range=(1.0, 1.0))
