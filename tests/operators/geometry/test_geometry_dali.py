"""Geometric operators (rotate, warp_affine, warp_perspective, crop and its window arguments,
resize_crop_mirror, random_resized_crop) against DALI itself: each case runs the same program under
nvidia.dali and penstock.compat.dali and compares values, types, shapes and layouts, or that both
refuse it."""
import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

from dali_compare import run, same  # noqa: E402


def _run(library: str, build, samples, layout):
    return run(library, build, [samples], layout)


def _same(build, samples, layout="HWC", atol=0.0):
    same(build, [samples], layout, atol=atol)


def _images(dtype="uint8", channels=3, sizes=((6, 8), (9, 7), (5, 5), (13, 10)), seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return [rng.uniform(-40, 300, (h, w, channels)).astype(dtype) for h, w in sizes]
    info = np.iinfo(dtype)
    return [rng.integers(max(info.min, -3000), min(info.max, 3000), (h, w, channels), dtype=dtype) for h, w in sizes]


def _float_tolerance(dtype) -> float:
    """Float outputs may differ in the last bits (sin and cos of float32 angles); integers not at all."""
    return 1e-3 if np.dtype(dtype).kind == "f" else 0.0


# ---- rotate ----------------------------------------------------------------------------------------
ROTATIONS = {
    "default border": dict(angle=30.0),
    "nearest": dict(angle=-17.3, interp_type="INTERP_NN"),
    "quarter turn": dict(angle=90.0),
    "past a quarter turn": dict(angle=135.0),
    "fill rounded and saturated": dict(angle=200.0, fill_value=255.7),
    "negative fill": dict(angle=12.0, fill_value=-3.4),
    "keep size": dict(angle=33.0, keep_size=True),
    "size": dict(angle=30.0, size=(10, 12)),
}


def _with_types(types, kwargs):
    return {k: getattr(types, v) if k in ("interp_type", "dtype") else v for k, v in kwargs.items()}


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "float32"])
@pytest.mark.parametrize("case", list(ROTATIONS))
def test_rotate_matches_dali(case, dtype):
    _same(lambda fn, types, x: fn.rotate(x, **_with_types(types, ROTATIONS[case])), _images(dtype),
          atol=_float_tolerance(dtype))


@pytest.mark.parametrize("in_dtype,out_dtype", [("uint8", "FLOAT"), ("float32", "UINT8"), ("float32", "INT16"),
                                                ("uint8", "INT16"), ("int16", "UINT8"), ("uint16", "UINT16")])
def test_rotate_output_types_as_dali(in_dtype, out_dtype):
    _same(lambda fn, types, x: fn.rotate(x, angle=25.0, dtype=getattr(types, out_dtype)), _images(in_dtype),
          atol=_float_tolerance(in_dtype))


@pytest.mark.parametrize("channels", [1, 5])
def test_rotate_any_number_of_channels(channels):
    _same(lambda fn, types, x: fn.rotate(x, angle=25.0), _images(channels=channels))


def test_rotate_per_sample_angle_and_size():
    angles = [np.float32(a) for a in (10.0, -100.0, 270.0, 45.0)]
    sizes = [np.float32(s) for s in ((4.7, 5.2), (9, 3), (3, 3.9), (6, 6))]  # per sample: truncated
    _same(lambda fn, types, x: fn.rotate(x, angle=fn.external_source(source=lambda: angles, batch=True),
                                         size=fn.external_source(source=lambda: sizes, batch=True)), _images())


@pytest.mark.parametrize("interp", ["INTERP_CUBIC", "INTERP_LANCZOS3"])
def test_rotate_refuses_other_filters(interp):
    _same(lambda fn, types, x: fn.rotate(x, angle=25.0, interp_type=getattr(types, interp)), _images())


@pytest.mark.parametrize("layout", ["CHW", None])
def test_rotate_layouts_as_dali(layout):
    _same(lambda fn, types, x: fn.rotate(x, angle=25.0), _images(), layout=layout)


# ---- warp_affine ---------------------------------------------------------------------------------------
MATRIX = (1.0, 0.1, 0.5, 0.2, 0.9, -1.0)
AFFINES = {
    "default border": dict(matrix=MATRIX),
    "nearest": dict(matrix=MATRIX, interp_type="INTERP_NN"),
    "inverted": dict(matrix=MATRIX, inverse_map=False),
    "fill": dict(matrix=MATRIX, fill_value=200.6),
    "size": dict(matrix=(0.5, 0, 0, 0, 2, 0), size=(10, 12)),
    "nearest fill": dict(matrix=(1.3, -0.4, 2, 0.3, 0.7, -3), fill_value=-7, interp_type="INTERP_NN"),
    "float output": dict(matrix=MATRIX, dtype="FLOAT"),
}


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "float32"])
@pytest.mark.parametrize("case", list(AFFINES))
def test_warp_affine_matches_dali(case, dtype):
    _same(lambda fn, types, x: fn.warp_affine(x, **_with_types(types, AFFINES[case])), _images(dtype),
          atol=_float_tolerance(dtype))


def test_warp_affine_wide_images_step_like_dali():
    # rows wider than 256 pixels: DALI restarts its stepped positions every 256 pixels
    image = np.random.default_rng(3).integers(0, 256, (20, 600, 3), dtype=np.uint8)
    _same(lambda fn, types, x: fn.warp_affine(x, matrix=(1.01, 0.02, -3, -0.03, 0.99, 4)), [image])


def test_warp_affine_matrix_from_transforms():
    _same(lambda fn, types, x: fn.warp_affine(x, fn.transforms.rotation(angle=30.0, center=(3, 3))), _images())
    _same(lambda fn, types, x: fn.warp_affine(x, matrix=fn.transforms.rotation(angle=30.0, center=(3, 3)),
                                              inverse_map=False), _images())


@pytest.mark.parametrize("case", ["cubic", "lanczos", "chw", "uint16", "to int16"])
def test_warp_affine_refuses_as_dali(case):
    kwargs = {"cubic": dict(interp_type="INTERP_CUBIC"), "lanczos": dict(interp_type="INTERP_LANCZOS3"),
              "to int16": dict(dtype="INT16")}.get(case, {})
    _same(lambda fn, types, x: fn.warp_affine(x, matrix=MATRIX, **_with_types(types, kwargs)),
          _images("uint16" if case == "uint16" else "uint8"), layout="CHW" if case == "chw" else "HWC")


# ---- warp_perspective ---------------------------------------------------------------------------------
HOMOGRAPHY = (1.0, 0.1, 0.5, 0.2, 0.9, -1.0, 0.01, 0.02, 1.0)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint16", "float32", "int32"])
@pytest.mark.parametrize("kwargs", [dict(interp_type="INTERP_NN"), dict(fill_value=200.6),
                                    dict(border_mode="reflect", fill_value=3.0), dict(fill_value=(1, 2, 3)),
                                    dict(pixel_origin="center", size=(10, 12))], ids=str)
def test_warp_perspective_matches_dali(kwargs, dtype):
    # OpenCV's warpPerspective on both sides (DALI's build and this one may round a level apart)
    _same(lambda fn, types, x: fn.experimental.warp_perspective(x, matrix=HOMOGRAPHY, **_with_types(types, kwargs)),
          _images(dtype), atol=1e-3 if dtype == "float32" else 1.0)


@pytest.mark.parametrize("layout", ["HW", "CHW"])
def test_warp_perspective_layouts_as_dali(layout):
    images = [np.ascontiguousarray(image[:, :, 0]) for image in _images()] if layout == "HW" else \
        [np.ascontiguousarray(image.transpose(2, 0, 1)) for image in _images()]
    _same(lambda fn, types, x: fn.experimental.warp_perspective(x, matrix=HOMOGRAPHY, interp_type=types.INTERP_NN),
          images, layout=layout)


@pytest.mark.parametrize("case", ["five channels", "lanczos", "dtype"])
def test_warp_perspective_refuses_as_dali(case):
    kwargs = {"lanczos": dict(interp_type="INTERP_LANCZOS3"), "dtype": dict(dtype="FLOAT")}.get(case, {})
    _same(lambda fn, types, x: fn.experimental.warp_perspective(x, matrix=HOMOGRAPHY, **_with_types(types, kwargs)),
          _images(channels=5 if case == "five channels" else 3))


# ---- crop and its window arguments ------------------------------------------------------------------
WINDOWS = {
    "fractional sizes truncated": dict(crop=(4.7, 5.2)),
    "separate sizes truncated": dict(crop_w=3.7, crop_h=2.2),
    "rounded start (float32 position)": dict(crop=(4, 4), crop_pos_x=0.3, crop_pos_y=0.9),
    "truncated start": dict(crop=(4, 4), crop_pos_x=0.3, crop_pos_y=0.9, rounding="truncate"),
    "padded, negative start rounded away from zero": dict(crop=(10, 10), out_of_bounds_policy="pad"),
    "padded, negative start truncated": dict(crop=(11, 11), crop_pos_x=0.25, crop_pos_y=0.75,
                                             out_of_bounds_policy="pad", rounding="truncate"),
    "fills per channel": dict(crop=(8, 9), crop_pos_x=0.0, out_of_bounds_policy="pad", fill_values=(1, 2, 3)),
    "trimmed": dict(crop=(20, 3), crop_pos_y=0.3, out_of_bounds_policy="trim_to_shape"),
    "a size of 0 or less keeps the image's": dict(crop=(0, 3)),
    "negative height": dict(crop_w=3, crop_h=-1),
    "no window": dict(),
}


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
@pytest.mark.parametrize("case", list(WINDOWS))
def test_crop_windows_match_dali(case, layout):
    images = _images() if layout == "HWC" else [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in _images()]
    _same(lambda fn, types, x: fn.crop(x, **WINDOWS[case]), images, layout=layout)


def test_crop_reads_an_image_without_layout_as_hwc():
    _same(lambda fn, types, x: fn.crop(x, crop=(3, 3)), _images(), layout=None)


def test_crop_per_sample_window_truncated():
    sizes = [np.float32([2.7, 3.9]), np.float32([4.2, 1.5]), np.float32([5, 5]), np.float32([1, 6.6])]
    _same(lambda fn, types, x: fn.crop(x, crop=fn.external_source(source=lambda: sizes, batch=True)), _images())


@pytest.mark.parametrize("kwargs", [dict(crop=(4,)), dict(crop=16), dict(crop_w=3.0), dict(crop_h=3.0),
                                    dict(crop=(3, 3), crop_w=2.0, crop_h=2.0), dict(crop=(3, 3), rounding="floor"),
                                    dict(crop=(3, 3), crop_pos_x=1.2)], ids=str)
def test_crop_refuses_as_dali(kwargs):
    _same(lambda fn, types, x: fn.crop(x, **kwargs), _images())


def test_crop_refuses_images_without_channels():
    _same(lambda fn, types, x: fn.crop(x, crop=(3, 3)), [np.ascontiguousarray(i[:, :, 0]) for i in _images()],
          layout="HW")


@pytest.mark.parametrize("case", ["truncated start", "fractional sizes truncated", "padded, negative start truncated"])
def test_crop_mirror_normalize_windows_match_dali(case):
    _same(lambda fn, types, x: fn.crop_mirror_normalize(x, **WINDOWS[case]), _images(), atol=1e-4)


@pytest.mark.parametrize("kwargs", [dict(crop=(4, 4), crop_pos_y=0.9, crop_pos_x=0.3, rounding="truncate"),
                                    dict(crop=(4.7, 3.2)), dict()], ids=str)
def test_decoded_windows_match_dali(kwargs):
    import cv2
    image = np.random.default_rng(4).integers(0, 255, (9, 7, 3)).astype(np.uint8)
    encoded = np.frombuffer(cv2.imencode(".png", image)[1].tobytes(), np.uint8)
    _same(lambda fn, types, x: fn.decoders.image_crop(x, **kwargs), [encoded, encoded], layout=None)


# ---- resize_crop_mirror -----------------------------------------------------------------------------
RESIZED_WINDOWS = {
    "centre": dict(),
    "mirror horizontally": dict(mirror=1),
    "mirror vertically": dict(mirror=2),
    "mirror both": dict(mirror=3),
    "window past the edges repeats them": dict(crop=(14, 14)),
    "window past the edges, mirrored": dict(crop=(14, 14), mirror=3, crop_pos_x=0.2),
    "truncated start": dict(crop_pos_x=0.3, crop_pos_y=0.9, rounding="truncate"),
    "rounded start": dict(crop_pos_x=0.3, crop_pos_y=0.9),
    "flipped by a negative size": dict(resize_x=-10),
    "a window size of 0 keeps the resized one": dict(crop=(0, 4)),
    "nearest": dict(interp_type="INTERP_NN"),
    "cubic, mirrored": dict(interp_type="INTERP_CUBIC", mirror=1),
    "not_smaller": dict(mode="not_smaller", size=(8, 9), resize_x=None, resize_y=None),
}


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
@pytest.mark.parametrize("case", list(RESIZED_WINDOWS))
def test_resize_crop_mirror_matches_dali(case, layout):
    kwargs = {k: v for k, v in {"resize_x": 10, "resize_y": 12, "crop": (6, 5), **RESIZED_WINDOWS[case]}.items()
              if v is not None}
    images = _images() if layout == "HWC" else [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in _images()]
    # the resampling of a window that starts between source pixels may round a level apart (as resize's
    # of such a region); the window's place, size and flips are exact
    _same(lambda fn, types, x: fn.resize_crop_mirror(x, **_with_types(types, kwargs)), images, layout=layout, atol=1.0)


def test_resize_crop_mirror_per_sample_mirror():
    mirrors = [np.int32(m) for m in (0, 1, 2, 3)]
    _same(lambda fn, types, x: fn.resize_crop_mirror(
        x, resize_x=10, resize_y=12, crop=(6, 5), mirror=fn.external_source(source=lambda: mirrors, batch=True)),
        _images())


@pytest.mark.parametrize("kwargs", [dict(crop_w=4), dict(crop_h=3), dict(resize_x=None, resize_y=None)], ids=str)
def test_resize_crop_mirror_refuses_as_dali(kwargs):
    kwargs = {k: v for k, v in {"resize_x": 10, "resize_y": 12, **kwargs}.items() if v is not None}
    _same(lambda fn, types, x: fn.resize_crop_mirror(x, **kwargs), _images())


# ---- random_resized_crop --------------------------------------------------------------------------------
SQUARES = [np.random.default_rng(5).integers(0, 256, (12, 12, 3), dtype=np.uint8),
           np.random.default_rng(6).integers(0, 256, (7, 7, 3), dtype=np.uint8)]
WHOLE = dict(random_area=1.0, random_aspect_ratio=1.0)  # one window only: the whole square image


@pytest.mark.parametrize("kwargs", [dict(size=(5, 6)), dict(size=(7.6, 8.4)), dict(size=9, interp_type="INTERP_CUBIC"),
                                    dict(size=(5, 6), dtype="FLOAT")], ids=str)
def test_random_resized_crop_of_a_whole_image_matches_dali(kwargs):
    _same(lambda fn, types, x: fn.random_resized_crop(x, **WHOLE, **_with_types(types, kwargs)), SQUARES)


@pytest.mark.parametrize("layout", ["CHW", None])
def test_random_resized_crop_layouts_as_dali(layout):
    images = [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in SQUARES] if layout == "CHW" else SQUARES
    _same(lambda fn, types, x: fn.random_resized_crop(x, size=(5, 6), **WHOLE), images, layout=layout)


@pytest.mark.parametrize("kwargs", [dict(random_area=(0.9, 0.1)), dict(random_aspect_ratio=(2.0, 0.5))], ids=str)
def test_random_resized_crop_refuses_empty_ranges(kwargs):
    _same(lambda fn, types, x: fn.random_resized_crop(x, size=(5, 6), **kwargs), SQUARES)


def _window_statistics(library, kwargs):
    """The mean of the outputs' standard deviations over many noise images: it falls as the windows grow
    (the filter averages more pixels), so it measures the windows' size distribution."""
    rng = np.random.default_rng(8)
    noise = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((40, 50, 3), (30, 30, 3), (50, 35, 3))] * 40
    outputs = _run(library, lambda fn, types, x: fn.random_resized_crop(x, size=(8, 8), **_with_types(types, kwargs)),
                   noise, "HWC")
    return np.mean([sample.astype(np.float64).std() for sample in outputs[0][0]])


@pytest.mark.parametrize("kwargs", [dict(), dict(interp_type="INTERP_CUBIC"), dict(random_area=(0.05, 1.0)),
                                    dict(random_aspect_ratio=(0.5, 2.0), antialias=False)], ids=str)
def test_random_resized_crop_windows_as_dali_draws_them(kwargs):
    # different random numbers, the same distribution: 120 windows agree within a few percent
    want, got = _window_statistics("dali", kwargs), _window_statistics("penstock", kwargs)
    assert abs(got - want) <= 0.06 * want, f"mean std {got} (DALI {want})"


# ---- what both refuse, and how penstock words it ------------------------------------------------------
@pytest.mark.parametrize("op", ["warp_affine", "experimental.warp_perspective"])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_warp_matrices_given_per_sample_are_float32(op, dtype):
    matrix = np.eye(3, dtype=dtype)[:2 if op == "warp_affine" else 3]

    def build(fn, types, x):
        operator = fn.warp_affine if op == "warp_affine" else fn.experimental.warp_perspective
        return operator(x, matrix=fn.external_source(source=lambda: [matrix] * 4, batch=True))
    _same(build, _images())


def test_a_window_outside_the_image_is_refused_in_dalis_words():
    from penstock.compat.dali import fn, pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.crop(fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)], batch=True, layout="HWC"),
                       crop=(8, 8))
    with pytest.raises(RuntimeError, match="Slice can't be placed out of bounds with current policy."):
        pipe().run()


@pytest.mark.parametrize("op", ["crop", "flip", "resize_crop_mirror", "rotate"])
def test_layouts_refused_in_dalis_words(op):
    from penstock.compat.dali import fn, pipeline_def
    kwargs = {"crop": dict(crop=(2, 2)), "flip": {}, "resize_crop_mirror": dict(resize_x=3), "rotate": dict(angle=3)}

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)], batch=True, layout="ABC")
        return getattr(fn, op)(data, **kwargs[op])
    with pytest.raises(ValueError, match='the layout "ABC" does not match any of the allowed layouts'):
        pipe().run()
