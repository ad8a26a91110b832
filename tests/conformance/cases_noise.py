"""Random operators, compared by their statistics: noise.*, random.*, batch_permutation."""
import numpy as np

from conformance.harness import Data, PerSample, Spec, Stats
from conformance.samples import constant_images, f32, images

GRAY = constant_images(128)
_RNG, _N = np.random.default_rng(0), 200_000  # samples of the distributions the cases draw from


def _within_standard_errors(population, count: int, sigmas: float = 5.0) -> Stats:
    """Stats for two libraries' ``count`` draws each from the distribution ``population`` (a large
    sample of it): means and standard deviations within ``sigmas`` standard errors of the difference
    of two independent estimates (the std's from the distribution's fourth moment), the smallest and
    largest values as near each other as draws that fall within the distribution's outer
    20 / count quantiles almost surely are (far nearer than another range would put them)."""
    population = np.asarray(population, np.float64)
    std = population.std()
    fourth = np.mean((population - population.mean()) ** 4)
    std_error_of_std = np.sqrt(max(fourth - std ** 4, 0.0) / (4 * count)) / std if std else 0.0
    tail = min(20 / count, 0.5)
    range_tol = max(np.quantile(population, tail) - population.min(),
                    population.max() - np.quantile(population, 1 - tail))
    return Stats(mean_tol=sigmas * std * np.sqrt(2 / count),
                 std_tol=sigmas * np.sqrt(2) * std_error_of_std, range_tol=range_tol)

SPECS = [
    # one scalar a sample: a large batch, so that the batch's statistics mean something
    Spec("random.uniform", (), {}, name="random.uniform_scalar", batch_size=300,
         compare=Stats(-1, 1, mean_tol=0.1, std_tol=0.1)),
    Spec("random.normal", (), {}, name="random.normal_scalar", batch_size=300, compare=Stats(mean_tol=0.2, std_tol=0.2)),
    Spec("random.coin_flip", (), {}, name="random.coin_flip_scalar", batch_size=300, compare=Stats(0, 1, mean_tol=0.1)),
    Spec("random.beta", (), {}, name="random.beta_scalar", batch_size=300, compare=Stats(0, 1, mean_tol=0.1, std_tol=0.1)),
    Spec("random.choice", (Data([np.int32(5)] * 300),), {}, name="random.choice_scalar",
         compare=Stats(0, 4, mean_tol=0.4, range_tol=0)),
    Spec("noise.gaussian", (GRAY,), {"stddev": 10.0}, compare=Stats(0, 255, mean_tol=1.5, std_tol=1.5), grid={
        "@input": {"f32": (constant_images(128, "float32"),), "i16": (constant_images(128, "int16"),),
                   "gray_hw": (Data([np.full((32, 32), 128, np.uint8)] * 3, "HW"),),
                   "u16": (constant_images(128, "uint16"),), "f64": (constant_images(128, "float64"),)},
        "mean": [5.0, PerSample(f32(0), f32(-5), f32(5))],
        "stddev": [0.0, 30.0, PerSample(f32(1), f32(10), f32(20))],
    }, refused=("f64",)),
    Spec("noise.shot", (constant_images(100),), {"factor": 2.0}, compare=Stats(0, 255, mean_tol=1.5, std_tol=1.5),
         grid={
             "@input": {"f32": (constant_images(100, "float32"),)},
             "factor": [0.0, 20.0, PerSample(f32(1), f32(5), f32(10))],
         }),
    Spec("noise.salt_and_pepper", (GRAY,), {"prob": 0.2}, compare=Stats(mean_tol=8, std_tol=8, range_tol=0), grid={
        "@input": {"f32": (constant_images(128, "float32"),), "u8_hw": (Data([np.full((32, 32), 128, np.uint8)] * 3, "HW"),)},
        "prob": [0.0, 1.0, PerSample(f32(0.1), f32(0.3), f32(0.6))],
        "salt_vs_pepper": [0.0, 1.0, PerSample(f32(0.1), f32(0.5), f32(0.9))],
        "salt_val": [200.0, PerSample(f32(200), f32(250), f32(150))],
        "pepper_val": [50.0, PerSample(f32(10), f32(50), f32(100))],
        "per_channel": [True],
    }),
    # per-sample values as DALI's noise takes them: 0-d (it refuses the shape (1,) of the grids above)
    Spec("noise.gaussian", (GRAY,), {"mean": PerSample(np.float32(0), np.float32(-5), np.float32(5)),
                                     "stddev": PerSample(np.float32(1), np.float32(10), np.float32(20))},
         name="noise.gaussian_scalars", compare=Stats(0, 255, mean_tol=1.5, std_tol=1.5)),
    Spec("noise.shot", (constant_images(100),), {"factor": PerSample(np.float32(1), np.float32(0), np.float32(10))},
         name="noise.shot_scalars", compare=Stats(0, 255, mean_tol=1.5, std_tol=1.5), grid={"factor": [-2.0]}),
    Spec("noise.salt_and_pepper", (GRAY,), {"prob": PerSample(np.float32(0.1), np.float32(0.3), np.float32(0.6)),
                                            "salt_vs_pepper": PerSample(np.float32(0.1), np.float32(0.5),
                                                                        np.float32(0.9)),
                                            "salt_val": PerSample(np.float32(200), np.float32(250), np.float32(150)),
                                            "pepper_val": PerSample(np.float32(10), np.float32(50), np.float32(100))},
         name="noise.salt_and_pepper_scalars", compare=Stats(mean_tol=8, std_tol=8, range_tol=0), grid={
             # without a layout the last axis holds the channels: each row draws once (many rows: stable statistics)
             "@input": {"chw": (Data([np.full((3, 32, 32), 128, np.uint8)] * 3, "CHW"),),
                        "no_layout_hw": (Data([np.full((512, 4), 128, np.uint8)] * 3),)},
             "per_channel": [True]}),
    *[Spec("random.uniform", (), {"shape": shape}, batch_size=batch_size, base=grid is None, grid=grid or {},
           compare=_within_standard_errors(population, count))
      for shape, batch_size, grid, population, count in [
          ((400,), None, None, _RNG.uniform(-1, 1, _N), 1200),
          ((400,), None, {"range": [(2.0, 5.0)]}, _RNG.uniform(2, 5, _N), 1200),
          ((400,), None, {"range": [PerSample(f32(0, 1), f32(-1, 0), f32(0.2, 0.3))]},
           np.concatenate([_RNG.uniform(low, high, _N) for low, high in ((0, 1), (-1, 0), (0.2, 0.3))]), 1200),
          ((400,), None, {"values": [(1.0, 2.0, 7.0)]}, _RNG.choice([1.0, 2.0, 7.0], _N), 1200),
          ((400,), None, {"values": [PerSample(f32(1, 2), f32(-1), f32(0.25, 0.5))]},
           np.concatenate([_RNG.choice(values, _N) for values in ([1, 2], [-1], [0.25, 0.5])]), 1200),
          ((400,), 300, {"shape": [7]}, _RNG.uniform(-1, 1, _N), 2100),
          ((400,), None, {"shape": [(20, 20), PerSample(np.int32([400]), np.int32([4, 100]), np.int32([0]))]},
           _RNG.uniform(-1, 1, _N), 1200),
          ((400,), None, {"dtype": ["types.FLOAT64"]}, _RNG.uniform(-1, 1, _N), 1200),
          ((400,), None, {"dtype": ["types.INT32"]}, _RNG.integers(-1, 2, _N), 1200),  # [-1, 1] as integers
          # uint8's [-1, 1) is [255, 1) once cast: 1 to 255
          ((4000,), None, {"dtype": ["types.UINT8"]}, _RNG.integers(1, 256, _N), 12000)]],
    Spec("random.uniform", (images(),), {}, name="random.uniform_like", compare=Stats(-1, 1), grid={}),
    Spec("random.normal", (), {"shape": (2000,)}, compare=Stats(mean_tol=0.2, std_tol=0.15), grid={
        "mean": [10.0, PerSample(f32(1), f32(2), f32(3))],
        "stddev": [0.0, 5.0, PerSample(f32(1), f32(2), f32(3))],
        "shape": [(20, 20)],
        "dtype": ["types.FLOAT64", "types.INT32", "types.FLOAT16"],
    }),
    Spec("random.normal", (images(),), {}, name="random.normal_like", compare=Stats(mean_tol=0.3, std_tol=0.3)),
    Spec("random.coin_flip", (), {"shape": (400,)}, compare=Stats(0, 1, mean_tol=0.1), grid={
        "probability": [0.0, 1.0, 0.2, PerSample(f32(0.1), f32(0.9), f32(0.5))],
        "shape": [(10, 10)],
        "dtype": ["types.BOOL", "types.FLOAT", "types.UINT8"],
    }),
    Spec("random.coin_flip", (images(),), {}, name="random.coin_flip_like", compare=Stats(0, 1, mean_tol=0.15)),
    Spec("random.beta", (), {"shape": (400,)}, compare=Stats(0, 1, mean_tol=0.08, std_tol=0.05), grid={
        "alpha": [0.5, 5.0, PerSample(f32(1), f32(2), f32(3))],
        "beta": [0.5, 5.0, PerSample(f32(1), f32(2), f32(3))],
        "shape": [(20, 20)],
        "dtype": ["types.FLOAT64"],
    }),
    Spec("random.choice", (Data([np.int32(5)] * 3),), {"shape": (400,)}, compare=Stats(mean_tol=0.3, range_tol=0), grid={
        "@input": {"list": (Data([np.array([1, 4, 9], np.int32)] * 3),),
                   "f32": (Data([np.array([0.5, 1.5], np.float32)] * 3),)},
        "p": [(0.1, 0.1, 0.1, 0.1, 0.6), PerSample(f32(1, 0, 0, 0, 0), f32(0.5, 0.5, 0, 0, 0), f32(0.2, 0.2, 0.2, 0.2, 0.2))],
        "shape": [(20, 20)],
    }),
    Spec("batch_permutation", (), {}, batch_size=8, compare=Stats(0, 7, mean_tol=2, independent=False), grid={
        "allow_repetitions": [True],
        "no_fixed_points": [True],
    }),
]
