"""Filters and noise beyond the coverage cases: per-sample arguments, every border rule of
fn.filter and its 'valid' mode, noise that depends on the seed alone, and bad arguments refused
where the user calls, naming the operator and the argument."""
from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
from cases_filters import FILTER, correlate, window_size
from conftest import CUDA, SEED, gpu_or_emulated, noise_image, smooth_image

from penstock import fn, pipeline_def, types
from penstock.batch import PackedBatch
from penstock.pipeline import Pipeline

IMAGES = [smooth_image(20, 30, 3, seed=1), smooth_image(24, 18, 3, seed=2), smooth_image(17, 21, 3, seed=3)]
NUMPY_PADS = {"reflect_101": "reflect", "reflect_1001": "symmetric", "wrap": "wrap", "clamp": "edge"}


def run(device: str, build, samples=IMAGES, num_threads: int = 2, seed: int = SEED, iterations: int = 1,
        layout: str = "HWC") -> list:
    """The outputs of ``build(node)`` over ``samples`` on ``device`` (the GPU, or the emulated GPU
    without one), as lists of numpy arrays per output, over the iterations."""
    @pipeline_def(batch_size=len(samples), num_threads=num_threads, device_id=None if device == "cpu" else 0,
                  seed=seed)
    def pipeline():
        node = fn.external_source(source=lambda: samples, batch=True, layout=layout)
        outputs = build(node.gpu() if device == "gpu" else node)
        return outputs if isinstance(outputs, tuple) else (outputs,)

    def outputs_of():
        pipe = pipeline()
        try:
            runs = [pipe.run() for _ in range(iterations)]
        finally:
            pipe.close()
        return [[np.asarray(sample) for batches in runs for sample in batches[k].as_cpu()]
                for k in range(len(runs[0]))]
    if device == "cpu":
        return outputs_of()
    with gpu_or_emulated():
        return outputs_of()


# ---- per-sample arguments ------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_gaussian_blur_takes_a_sigma_per_sample(device):
    blurred, sigmas = run(device, lambda images: (lambda sigma: (fn.gaussian_blur(images, sigma=sigma), sigma))(
        fn.random.uniform(range=(0.5, 2.5))))
    assert len(set(float(s) for s in sigmas)) == len(IMAGES)  # each sample its own
    for image, output, sigma in zip(IMAGES, blurred, sigmas):
        sigma = float(sigma)
        size = window_size(sigma)
        expected = cv2.GaussianBlur(image, (size, size), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REFLECT_101)
        assert np.abs(output.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_gaussian_blur_from_window_size_alone_uses_dalis_sigma(device):
    (blurred,) = run(device, lambda images: fn.gaussian_blur(images, window_size=(5, 7), dtype=types.FLOAT))
    for image, output in zip(IMAGES, blurred):
        sigma_y, sigma_x = (2 - 1) * 0.3 + 0.8, (3 - 1) * 0.3 + 0.8  # radius 2 and 3
        expected = cv2.GaussianBlur(image.astype(np.float32), (7, 5), sigmaX=sigma_x, sigmaY=sigma_y,
                                    borderType=cv2.BORDER_REFLECT_101)
        np.testing.assert_allclose(output, expected, atol=1e-3)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_filter_takes_a_filter_per_sample(device):
    filters = [FILTER, FILTER[:, ::-1] * 2, np.ones((1, 3), np.float32) / 3]

    def build(images):
        kernel = fn.external_source(source=lambda: filters, batch=True)
        return fn.filter(images, kernel, border="clamp", dtype=types.FLOAT)
    (filtered,) = run(device, build)
    for image, output, weights in zip(IMAGES, filtered, filters):
        padded = np.pad(image, ((5, 5), (5, 5), (0, 0)), mode="edge")
        anchor = (weights.shape[0] // 2, weights.shape[1] // 2)
        expected = correlate(padded, weights, anchor, 0.0)[5:-5, 5:-5]
        np.testing.assert_allclose(output, expected, atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("border", sorted(NUMPY_PADS))
def test_filter_border_rules(device, border):
    anchor = (2, 1)
    (filtered,) = run(device, lambda images: fn.filter(images, FILTER, anchor=anchor, border=border,
                                                       dtype=types.FLOAT), samples=IMAGES[:2])
    for image, output in zip(IMAGES, filtered):
        # the image padded by the rule, then correlated inside the padding
        padded = np.pad(image, ((8, 8), (8, 8), (0, 0)), mode=NUMPY_PADS[border])
        expected = correlate(padded, FILTER, anchor, 0.0)[8:-8, 8:-8]
        np.testing.assert_allclose(output, expected, atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_filter_valid_mode_keeps_the_pixels_whose_window_fits(device):
    (filtered,) = run(device, lambda images: fn.filter(images, FILTER, mode="valid", dtype=types.FLOAT))
    for image, output in zip(IMAGES, filtered):
        height, width = image.shape[0] - 2, image.shape[1] - 3
        expected = correlate(image, FILTER, (0, 0), 0.0)[:height, :width]
        np.testing.assert_allclose(output, expected, atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_laplacian_normalized_kernel_and_smoothing_size(device):
    (normalized, unsmoothed) = run(device, lambda images: (
        fn.laplacian(images, window_size=3, normalized_kernel=True, dtype=types.FLOAT),
        fn.laplacian(images, window_size=3, smoothing_size=1, dtype=types.FLOAT)))
    for image, scaled, plain in zip(IMAGES, normalized, unsmoothed):
        expected = cv2.Laplacian(image, cv2.CV_32F, ksize=3, borderType=cv2.BORDER_REFLECT_101) / 4  # 2 ** -(6 - 4)
        np.testing.assert_allclose(scaled, expected, atol=1e-3)
        expected = cv2.Laplacian(image, cv2.CV_32F, ksize=1, borderType=cv2.BORDER_REFLECT_101)  # [1, -2, 1] per axis
        np.testing.assert_allclose(plain, expected, atol=1e-3)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_filters_take_one_channel_images_and_keep_their_shape(device):
    gray = [noise_image(12, 15, 1, seed=4), noise_image(9, 11, 1, seed=5)]
    (eroded, blurred) = run(device, lambda images: (fn.erode(images), fn.median_blur(images)), samples=gray)
    for image, low, median in zip(gray, eroded, blurred):
        assert low.shape == median.shape == image.shape and low.dtype == np.uint8
        np.testing.assert_array_equal(low[:, :, 0], cv2.erode(image[:, :, 0], np.ones((3, 3), np.uint8)))
        np.testing.assert_array_equal(median[:, :, 0], cv2.medianBlur(image[:, :, 0], 3))


# ---- noise: the seed decides -----------------------------------------------------------------------
NOISES = [lambda x: fn.noise.gaussian(x, stddev=fn.random.uniform(range=(5.0, 20.0))),
          lambda x: fn.noise.shot(x, factor=4.0),
          lambda x: fn.noise.salt_and_pepper(x, prob=0.3, per_channel=True)]


@pytest.mark.parametrize("noise", NOISES, ids=["gaussian", "shot", "salt_and_pepper"])
def test_noise_depends_on_the_seed_not_the_threads(noise):
    one_thread = run("cpu", noise, num_threads=1, iterations=2)[0]
    two_threads = run("cpu", noise, num_threads=2, iterations=2)[0]
    for first, second in zip(one_thread, two_threads):
        np.testing.assert_array_equal(first, second)
    assert not np.array_equal(one_thread[0], one_thread[len(IMAGES)])  # the next batch: other noise
    other_seed = run("cpu", noise, seed=SEED + 1)[0]
    assert not np.array_equal(one_thread[0], other_seed[0])


@pytest.mark.parametrize("noise", NOISES, ids=["gaussian", "shot", "salt_and_pepper"])
def test_gpu_noise_depends_on_the_seed(noise):
    first, second = run("gpu", noise)[0], run("gpu", noise)[0]
    for a, b, image in zip(first, second, IMAGES):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == image.dtype and not np.array_equal(a, image)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_shot_noise_of_factor_zero_gives_zeros(device):
    """As DALI 2.4's kernels (poisson(x / factor) * factor with factor 0), whatever its documentation says."""
    (noisy,) = run(device, lambda x: fn.noise.shot(x, factor=0.0))
    for output, image in zip(noisy, IMAGES):
        assert output.dtype == image.dtype
        np.testing.assert_array_equal(output, 0)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_salt_and_pepper_treats_the_channels_of_a_pixel_alike_first_or_last(device):
    """The channels are the layout's 'C' axis (first or last), as DALI."""
    planes = [np.full((3, 16, 16), 100, np.uint8)]
    (noisy,) = run(device, lambda x: fn.noise.salt_and_pepper(x, prob=0.5), samples=planes, layout="CHW")
    output = noisy[0]
    assert (output != 100).any() and (output == 100).any()
    assert (output == output[:1]).all()  # every channel of a pixel the same


@pytest.mark.parametrize("layout", ["HW", "HCW"])
def test_salt_and_pepper_refuses_channels_it_cannot_find(layout):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipeline():
        return fn.noise.salt_and_pepper(fn.external_source(source=lambda: [np.zeros((4,) * len(layout), np.uint8)],
                                                           batch=True, layout=layout))

    with pytest.raises(ValueError, match="noise.salt_and_pepper: without per_channel, the channels"):
        pipeline().build()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_gaussian_noise_saturates_to_the_type(device):
    bright = [np.full((6, 7, 3), 250, np.uint8)]
    (noisy,) = run(device, lambda x: fn.noise.gaussian(x, mean=20.0, stddev=1.0), samples=bright)
    np.testing.assert_array_equal(noisy[0], 255)


# ---- bad arguments, refused at the call ---------------------------------------------------------
@pytest.fixture
def images():
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, seed=1)
    with pipe:
        yield fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, layout="HWC")


def raises(error_type, *fragments):
    return pytest.raises(error_type, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


@pytest.mark.parametrize("call,operator,argument,expected", [
    (lambda x: fn.gaussian_blur(x, sigma=-1.0), "gaussian_blur", "sigma", "[0.0, inf]"),
    (lambda x: fn.gaussian_blur(x, window_size=4), "gaussian_blur", "window_size", "odd"),
    (lambda x: fn.gaussian_blur(x, sigma=(1.0, 2.0, 3.0, 4.0)), "gaussian_blur", "sigma", "expected 1 or 2 or 3 values"),
    (lambda x: fn.laplacian(x, window_size=4), "laplacian", "window_size", "odd"),
    (lambda x: fn.laplacian(x, window_size=33), "laplacian", "window_size", "[3, 31]"),
    (lambda x: fn.laplacian(x, smoothing_size=2), "laplacian", "smoothing_size", "odd"),
    (lambda x: fn.laplacian(x, normalized_kernel=True, scale=2.0), "laplacian", "scale", "normalized_kernel"),
    (lambda x: fn.median_blur(x, window_size=0), "median_blur", "window_size", "[1, inf]"),
    (lambda x: fn.median_blur(x, window_size=(3, 4)), "median_blur", "window_size", "odd"),
    (lambda x: fn.experimental.median_blur(x, window_size=2), "median_blur", "window_size", "odd"),
    (lambda x: fn.filter(x, np.ones((3, 3, 3))), "filter", "filter", "2-D"),
    (lambda x: fn.filter(x, [1.0, 2.0]), "filter", "filter", "2-D"),
    (lambda x: fn.filter(x, np.ones((3, 3)), border="mirror"), "filter", "border", "reflect_101"),
    (lambda x: fn.filter(x, np.ones((3, 3)), anchor=(3, 0)), "filter", "anchor", "outside"),
    (lambda x: fn.erode(x, border_mode="clampp"), "erode", "border_mode", "expected one of"),
    (lambda x: fn.dilate(x, iterations=0), "dilate", "iterations", "[1, inf]"),
    (lambda x: fn.erode(x, mask_size=(3, 3), anchor=(5, 1)), "erode", "anchor", "outside"),
    (lambda x: fn.noise.salt_and_pepper(x, prob=1.5), "noise.salt_and_pepper", "prob", "[0.0, 1.0]"),
    (lambda x: fn.noise.salt_and_pepper(x, salt_vs_pepper=-0.1), "noise.salt_and_pepper", "salt_vs_pepper",
     "[0.0, 1.0]"),
])
def test_bad_argument_is_refused_at_the_call(images, call, operator, argument, expected):
    with raises(ValueError, f"{operator}: ", f"'{argument}'", expected):
        call(images)


def test_gaussian_blur_needs_sigma_or_window_size(images):
    with raises(ValueError, "gaussian_blur: ", "give sigma or window_size"):
        fn.gaussian_blur(images)
    with raises(ValueError, "gaussian_blur: ", "give sigma or window_size"):
        fn.gaussian_blur(images, sigma=(1.0, 0.0), window_size=(0, 0))


def test_bad_per_sample_sigma_names_the_operator_and_argument():
    with pytest.raises(Exception, match=r"gaussian_blur.*sigma"):
        run("cpu", lambda x: fn.gaussian_blur(x, sigma=fn.random.uniform(range=(-2.0, -1.0))))


@pytest.mark.parametrize("call, message", [
    (lambda x: fn.median_blur(x), "median_blur: takes the layouts HW, HWC, FHWC, CHW, FCHW; got 'DHWC'"),
    (lambda x: fn.filter(x, np.ones((3, 3), np.float32)), "filter: takes layouts of frames or channels first"),
])
def test_volumes_are_refused_where_dali_refuses_them(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        run("cpu", call, samples=[np.zeros((2, 4, 4, 3), np.uint8)], layout="DHWC")


@pytest.mark.parametrize("layout, accepted", [("W", True), ("CW", True), ("FWC", True), ("WC", False)])
def test_one_spatial_axis_as_dali(layout, accepted):
    """A row is blurred along its one axis; DALI refuses the one form 'WC' (and so does penstock)."""
    rng = np.random.default_rng(5)
    extents = {"F": 2, "C": 3, "W": 20}
    samples = [rng.integers(0, 255, [extents[name] for name in layout], np.uint8)]

    def call(x):
        return fn.gaussian_blur(x, sigma=1.5)

    if not accepted:
        with pytest.raises(ValueError, match="gaussian_blur: takes no samples of one spatial axis followed by channels"):
            run("cpu", call, samples=samples, layout=layout)
        return
    (blurred,) = run("cpu", call, samples=samples, layout=layout)
    expected = _blurred_along(samples[0].astype(np.float64), layout.index("W"), _gaussian(1.5))
    assert np.abs(blurred[0] - np.clip(np.rint(expected), 0, 255)).max() <= 1


@pytest.mark.parametrize("call, dtype, message", [
    (lambda x: fn.gaussian_blur(x, sigma=1.0, dtype=types.UINT8), np.int16,
     "gaussian_blur: argument 'dtype': the output type is the input's (int16) or float, got uint8"),
    (lambda x: fn.laplacian(x, dtype=types.INT32), np.int16, "laplacian: argument 'dtype'"),
    (lambda x: fn.laplacian(x), np.float64, "laplacian: takes uint8"),
    (lambda x: fn.filter(x, np.ones((3, 3), np.float32)), np.int32,
     "filter: takes uint8, uint16, int16, float32 data, got int32"),
])
def test_types_dali_refuses(call, dtype, message):
    samples = [np.zeros((4, 4, 3), dtype)]
    with pytest.raises(Exception, match=re.escape(message)):
        run("cpu", call, samples=samples)


# ---- layouts: planes, sequences, volumes -------------------------------------------------------------
def _gaussian(sigma: float) -> np.ndarray:
    taps = np.arange(window_size(sigma)) - window_size(sigma) // 2
    window = np.exp(-taps ** 2 / (2 * sigma ** 2))
    return window / window.sum()


def _blurred_along(values: np.ndarray, axis: int, window: np.ndarray) -> np.ndarray:
    """Correlation with ``window`` along ``axis``, the data reflected at its edges (reflect_101)."""
    radius = len(window) // 2
    pad = [(0, 0)] * values.ndim
    pad[axis] = (radius, radius)
    padded = np.pad(values, pad, mode="reflect")
    return sum(w * np.take(padded, np.arange(values.shape[axis]) + k, axis=axis) for k, w in enumerate(window))


@pytest.mark.parametrize("device, layout", [("cpu", "CHW"), ("cpu", "FHWC"), ("cpu", "FCHW"), ("cpu", "DHWC"),
                                            ("cpu", "HW"), ("gpu", "FCHW"), ("gpu", "DHWC")])
def test_gaussian_blur_filters_each_plane_or_the_volume(device, layout):
    """As DALI: frames and channel-first channels are planes of their own; DHWC volumes blur along D too."""
    rng = np.random.default_rng(3)
    extents = {"F": 2, "C": 2, "D": 4, "H": 7, "W": 6} if device == "cpu" else {"F": 2, "C": 1, "D": 3, "H": 5, "W": 5}
    samples = [rng.integers(0, 255, [extents[name] for name in layout], np.uint8) for _ in range(2)]
    sigmas = (0.8, 1.0, 1.5)[-(3 if layout == "DHWC" else 2):]
    (blurred,) = run(device, lambda x: fn.gaussian_blur(x, sigma=sigmas), samples=samples, layout=layout)
    spatial = [index for index, name in enumerate(layout) if name in "DHW"]
    for sample, output in zip(samples, blurred):
        expected = sample.astype(np.float64)
        for axis, sigma in zip(spatial, sigmas):
            expected = _blurred_along(expected, axis, _gaussian(sigma))
        assert output.shape == sample.shape and output.dtype == np.uint8
        assert np.abs(output - np.clip(np.rint(expected), 0, 255)).max() <= 1


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_laplacian_of_a_volume_sums_three_derivatives(device):
    rng = np.random.default_rng(4)
    samples = [rng.uniform(0, 1, (5, 6, 7)).astype(np.float32)]
    (result,) = run(device, lambda x: fn.laplacian(x, window_size=3), samples=samples, layout="DHW")
    expected = sum(_blurred_along(_blurred_along(_blurred_along(samples[0].astype(np.float64), axis,
                                                                 np.array([1.0, -2.0, 1.0])),
                                                  (axis + 1) % 3, np.array([1.0, 2.0, 1.0])),
                                  (axis + 2) % 3, np.array([1.0, 2.0, 1.0])) for axis in range(3))
    np.testing.assert_allclose(result[0], expected, atol=1e-4)


def test_valid_mode_needs_the_filter_to_fit():
    with pytest.raises(Exception, match=r"filter.*'valid'"):
        run("cpu", lambda x: fn.filter(x, np.ones((40, 3), np.float32), mode="valid"))


def test_experimental_names_are_the_same_operators():
    for name in ("median_blur", "erode", "dilate"):
        assert callable(getattr(fn.experimental, name))
    (plain, experimental) = run("cpu", lambda x: (fn.dilate(x, mask_size=5), fn.experimental.dilate(x, mask_size=5)))
    for a, b in zip(plain, experimental):
        np.testing.assert_array_equal(a, b)


def test_histograms_of_a_ragged_batch_in_one_launch_match_numpy():
    """The histogram kernel (equalize, auto_contrast, contrast) against numpy's bincount, exact:
    samples of different sizes, one of a single pixel, a view that is not contiguous, gray."""
    import torch

    from penstock.kernels.triton_filters import run_histograms
    from penstock.runtime.pinned import to_device
    rng = np.random.default_rng(SEED)
    images = [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for height, width in ((5, 7), (40, 33), (1, 1))]
    images.append(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)[:, 5:17])
    device = "cuda" if CUDA else "cpu"  # Triton's interpreter on the CPU, the compiled kernel on a GPU
    counts = run_histograms([torch.from_numpy(image).to(device) for image in images], upload=to_device)
    assert counts.shape == (4, 3, 256) and counts.dtype == torch.int32
    for image, found in zip(images, counts.cpu().numpy()):
        expected = np.stack([np.bincount(image[:, :, c].ravel(), minlength=256) for c in range(3)])
        np.testing.assert_array_equal(found, expected)
    gray = rng.integers(0, 256, (9, 11, 1), dtype=np.uint8)
    np.testing.assert_array_equal(run_histograms([torch.from_numpy(gray).to(device)], upload=to_device)[0, 0].cpu().numpy(),
                                  np.bincount(gray.ravel(), minlength=256))
    assert run_histograms([], upload=to_device).shape == (0, 1, 256)
    packed = PackedBatch.of_dense(torch.from_numpy(np.stack([images[0]] * 2 + [images[0][::-1].copy()])).to(device))
    np.testing.assert_array_equal(run_histograms(packed, np.array([2, 0]), upload=to_device).cpu().numpy(), counts[[0, 0]].cpu().numpy())


def test_statistic_tables_in_one_launch_match_the_torch_tables():
    """The kernel that makes equalize's, auto_contrast's and contrast's tables from histograms
    against augment_step.value_tables (torch), exact: random histograms, one level only, two
    levels, contrast below and above 1; written to the rows asked."""
    import torch

    from penstock.kernels.triton_filters import run_statistic_tables
    from penstock.runtime.pinned import to_device
    from penstock.operators.image.augment_step import PARAMETERS, value_tables
    rng = np.random.default_rng(SEED)
    counts = rng.integers(0, 50, (9, 3, 256)).astype(np.int32)
    counts[1] = 0
    counts[1, :, 77] = 123  # one level only
    counts[2] = 0
    counts[2, :, 3], counts[2, :, 250] = 5, 9  # two levels
    counts[4, :, :128] = 0
    kinds = ["equalize", "auto_contrast", "contrast"] * 3
    parameters = np.zeros((9, PARAMETERS))
    parameters[:, 0] = rng.uniform(0.1, 1.9, 9)
    expected = value_tables(kinds, parameters, torch.from_numpy(counts).long()).numpy()
    device = "cuda" if CUDA else "cpu"
    tables = torch.zeros((12, 3, 256), dtype=torch.uint8, device=device)
    destinations = np.array([11, 0, 5, 1, 2, 3, 4, 6, 7])
    run_statistic_tables(torch.from_numpy(counts).to(device), kinds, parameters[:, 0], destinations, tables,
                         upload=to_device)
    found = tables.cpu().numpy()
    np.testing.assert_array_equal(found[destinations], expected)
    assert not found[[8, 9, 10]].any()


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.bool_])
@pytest.mark.parametrize("noise", ["gaussian", "shot", "salt_and_pepper"])
def test_noise_refuses_the_types_dali_refuses(noise, dtype):
    with pytest.raises(Exception, match=f"noise.{noise}: takes uint8, .*float32 data, got {np.dtype(dtype).name}"):
        run("cpu", lambda x: getattr(fn.noise, noise)(x), samples=[np.zeros((4, 4, 3), dtype)])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_noise_takes_one_number_a_sample_as_dali(device):
    """DALI's noise reads its per-sample arguments as 0-d tensors: one-element arrays are refused."""
    def noisy(values):
        return lambda x: fn.noise.gaussian(x, stddev=fn.external_source(source=lambda: values, batch=True))

    zero_d = [np.float32(0.0)] * len(IMAGES)
    (outputs,) = run(device, noisy(zero_d))
    for output, image in zip(outputs, IMAGES):
        np.testing.assert_array_equal(output, image)  # stddev 0: no noise
    refused = r"noise.gaussian.*'stddev': expected one number \(0-d\) a sample, got shape \(1,\)"
    with pytest.raises(Exception, match=refused):
        run(device, noisy([np.zeros(1, np.float32)] * len(IMAGES)))


# (OpenCV's morphology has no 'wrap')
CV_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
              "reflect_101": cv2.BORDER_REFLECT_101}


@pytest.mark.parametrize("border", sorted(CV_BORDERS))
@pytest.mark.parametrize("operation", ["erode", "dilate"])
def test_morphology_sizes_and_anchors_are_x_y_as_dalis_test_against_opencv(border, operation):
    """DALI's mask_size and anchor are (width, height) and (x, y): OpenCV's ksize and anchor."""
    sizes = [np.array([3, 5], np.int32), np.array([4, 2], np.int32), np.array([6, 3], np.int32)]
    anchors = [np.array([-1, -1], np.int32), np.array([3, 0], np.int32), np.array([1, 2], np.int32)]
    samples = [noise_image(9, 12, 3, seed=4), noise_image(10, 7, 3, seed=5), noise_image(8, 8, 3, seed=6)]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipeline():
        images = fn.external_source(source=lambda: samples, batch=True, layout="HWC")
        size = fn.external_source(source=lambda: sizes, batch=True)
        anchor = fn.external_source(source=lambda: anchors, batch=True)
        return getattr(fn.experimental, operation)(images, mask_size=size, anchor=anchor, border_mode=border)

    pipe = pipeline()
    (outputs,) = pipe.run()
    morph = cv2.erode if operation == "erode" else cv2.dilate
    for image, size, anchor, output in zip(samples, sizes, anchors, outputs):
        element = cv2.getStructuringElement(cv2.MORPH_RECT, tuple(int(v) for v in size))
        expected = morph(image, element, anchor=tuple(int(v) for v in anchor), borderType=CV_BORDERS[border])
        np.testing.assert_array_equal(np.asarray(output), expected)
