"""Geometry operators: resize (sizes as DALI computes them, pixels against Pillow and torch), crop,
flip and transpose against numpy slicing."""
from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import torch
from conftest import assert_close, check_operator, noise_image, ragged_images, run_batches, run_operator, smooth_image
from PIL import Image

import penstock
from penstock import fn, types

Resampling = Image.Resampling


def round_half_up(value: float) -> int:
    """DALI rounds sizes with roundf: to nearest, halves away from zero."""
    return int(math.floor(value + 0.5))


def pillow_resize(image: np.ndarray, height: int, width: int, pillow_filter) -> np.ndarray:
    """The reference resize: Pillow, one channel at a time ('L' for uint8, 'F' for float32); for
    nearest-neighbour, torch's 'nearest-exact' (Pillow's float arithmetic sends some exact ties,
    4.5 * 40/30 = 6, to the pixel before; numeric.nearest_indices and torch to the one after)."""
    if pillow_filter == Resampling.NEAREST:
        tensor = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].double()
        resized = torch.nn.functional.interpolate(tensor, size=(height, width), mode="nearest-exact")
        return resized[0].permute(1, 2, 0).numpy().astype(image.dtype)
    planes = [np.asarray(Image.fromarray(np.ascontiguousarray(image[:, :, c])).resize((width, height), pillow_filter))
              for c in range(image.shape[2])]
    return np.stack(planes, axis=2)


# ---- resize: output sizes ----------------------------------------------------------------------------
def resized_shapes(input_shapes, **kwargs) -> list[tuple[int, int]]:
    images = [np.zeros((*shape, 3), np.uint8) for shape in input_shapes]
    return [output.shape[:2] for output in run_operator(fn.resize, images, **kwargs)]


SHAPES = [(30, 45), (64, 48), (20, 20), (41, 97)]


@pytest.mark.parametrize("kwargs,expected", [
    # both sizes: exactly those
    ({"resize_x": 40, "resize_y": 30}, [(30, 40)] * 4),
    ({"size": (30, 40)}, [(30, 40)] * 4),
    # one size: the other keeps the aspect ratio (22.5 and 32.5 round up, as DALI's roundf)
    ({"resize_x": 15}, [(10, 15), (20, 15), (15, 15), (6, 15)]),
    ({"resize_y": 15}, [(15, 22.5), (15, 11.25), (15, 15), (15, 35.49)]),
    ({"size": (0, 15)}, [(10, 15), (20, 15), (15, 15), (6, 15)]),
    # shorter / longer side
    ({"resize_shorter": 15}, [(15, 22.5), (20, 15), (15, 15), (15, 35.49)]),
    ({"resize_longer": 65}, [(43.33, 65), (65, 48.75), (65, 65), (27.47, 65)]),
    # fit inside / cover a 40x40 box
    ({"size": (40, 40), "mode": "not_larger"}, [(26.67, 40), (40, 30), (40, 40), (16.91, 40)]),
    ({"size": (40, 40), "mode": "not_smaller"}, [(40, 60), (53.33, 40), (40, 40), (40, 94.63)]),
    ({"resize_x": 40, "resize_y": 30, "mode": "not_larger"}, [(26.67, 40), (30, 22.5), (30, 30), (16.91, 40)]),
    # stretch: a missing size keeps the input's
    ({"resize_x": 15, "mode": "stretch"}, [(30, 15), (64, 15), (20, 15), (41, 15)]),
    # max_size lowers the common scale of resize_shorter / not_smaller, keeping the aspect ratio ...
    ({"resize_shorter": 30, "max_size": 50}, [(30, 45), (40, 30), (30, 30), (21.13, 50)]),
    ({"size": (30, 30), "mode": "not_smaller", "max_size": (100, 50)},
     [(30, 45), (40, 30), (30, 30), (21.13, 50)]),
    # ... and caps each side on its own in the default mode
    ({"resize_x": 90, "max_size": (40, 100)}, [(40, 90), (40, 90), (40, 90), (38.04, 90)]),
])
def test_resize_output_sizes_follow_dali(kwargs, expected):
    assert resized_shapes(SHAPES, **kwargs) == [(round_half_up(h), round_half_up(w)) for h, w in expected]


def test_resize_size_rounds_halves_up():
    # 45 * 15 / 30 = 22.5 -> 23; 35 * 15 / 30 = 17.5 -> 18 (Python's round() would give 22 and 18)
    assert resized_shapes([(30, 45), (30, 35)], resize_shorter=15) == [(15, 23), (15, 18)]


def test_resize_never_produces_an_empty_image():
    assert resized_shapes([(2, 200)], resize_x=10) == [(1, 10)]


def test_resize_without_a_size_is_an_error_where_it_is_called():
    with pytest.raises(ValueError, match="resize: give the output size: .*resize_shorter"):
        run_operator(fn.resize, [np.zeros((8, 8, 3), np.uint8)])


# ---- resize: pixels against DALI ----------------------------------------------------------------------
INTERPOLATIONS = [types.INTERP_NN, types.INTERP_LINEAR, types.INTERP_TRIANGULAR, types.INTERP_CUBIC,
                  types.INTERP_LANCZOS3, types.INTERP_GAUSSIAN]


def _constant(values):
    return lambda: values  # no parameter: a source that takes one is handed the iteration


def pipeline_outputs(module_name: str, op_name: str, samples, layout: str = "HWC", **kwargs) -> list:
    """What ``op_name`` of ``module_name`` (nvidia.dali or penstock.compat.dali) gives for
    ``samples`` (one batch of ``layout``) on the CPU; per-sample arguments as lists of arrays."""
    import importlib
    dali = importlib.import_module(module_name)
    dali_fn, dali_types = importlib.import_module(module_name + ".fn"), importlib.import_module(module_name + ".types")
    kwargs = {name: getattr(dali_types, value.name) if hasattr(value, "name") and hasattr(dali_types, value.name)
              else value for name, value in kwargs.items()}  # penstock's enums as the module's
    per_sample = {name: value for name, value in kwargs.items() if isinstance(value, list)}

    @dali.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None)
    def pipeline():
        data = dali_fn.external_source(source=lambda: list(samples), layout=layout, batch=True)
        extra = {name: dali_fn.external_source(source=_constant(values), batch=True)
                 for name, values in per_sample.items()}
        op = dali_fn
        for part in op_name.split("."):
            op = getattr(op, part)
        return op(data, **{**kwargs, **extra})

    pipe = pipeline()
    pipe.build()
    return [np.array(sample) for sample in pipe.run()[0]]


def dali_outputs(op_name: str, samples, layout: str = "HWC", **kwargs) -> list:
    pytest.importorskip("nvidia.dali")
    return pipeline_outputs("nvidia.dali", op_name, samples, layout, **kwargs)


def penstock_outputs(op_name: str, samples, layout: str = "HWC", **kwargs) -> list:
    return pipeline_outputs("penstock.compat.dali", op_name, samples, layout, **kwargs)


def assert_matches_dali(got: list, want: list, levels: float) -> None:
    """uint8 outputs agree to within ``levels`` (DALI and penstock may round a float sum that lands
    on a half the other way); float outputs to within 1e-3 of a level."""
    for index, (ours, theirs) in enumerate(zip(got, want)):
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (index, ours.shape, theirs.shape)
        assert_close(ours, theirs, max_abs=levels if ours.dtype == np.uint8 else 1e-3, where=f"sample {index}")


@pytest.mark.parametrize("interp", INTERPOLATIONS, ids=lambda interp: interp.name)
@pytest.mark.parametrize("size", [(7, 5), (29, 41), (17, 60)], ids=["down", "up", "mixed"])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_dali(interp, size, antialias):
    images = [noise_image(13, 19, seed=1), smooth_image(24, 30, seed=2), noise_image(9, 11, channels=1, seed=3)]
    kwargs = dict(size=size, interp_type=interp, antialias=antialias)
    assert_matches_dali(run_operator(fn.resize, images, **kwargs), dali_outputs("resize", images, **kwargs), 1)


@pytest.mark.parametrize("kwargs", [
    dict(resize_x=7, resize_y=-5), dict(resize_shorter=7.4), dict(resize_longer=9, max_size=(6, 8)),
    dict(size=(6, 0), subpixel_scale=False), dict(size=(8, 9), roi_start=(1, 7), roi_end=(10, 2)),
    dict(size=(8, 9), roi_start=(0.1, 0.2), roi_end=(0.7, 0.9), roi_relative=True),
    dict(size=(5, 12), min_filter=types.INTERP_NN, mag_filter=types.INTERP_CUBIC),
    dict(resize_x=10, mode="stretch"), dict(size=(10, 10), mode="not_larger", dtype=types.FLOAT),
], ids=lambda kwargs: ",".join(kwargs))
def test_resize_sizes_windows_and_filters_match_dali(kwargs):
    images = [noise_image(13, 19, seed=4), noise_image(20, 11, seed=5)]
    assert_matches_dali(run_operator(fn.resize, images, **kwargs), dali_outputs("resize", images, **kwargs), 1)


@pytest.mark.parametrize("layout,shape,kwargs", [
    ("CHW", (3, 9, 12), dict(size=(5, 7))), ("FHWC", (2, 9, 12, 3), dict(resize_x=5)),
    ("FCHW", (2, 3, 9, 12), dict(resize_y=14, interp_type=types.INTERP_CUBIC)),
    ("DHWC", (6, 9, 12, 2), dict(resize_x=5, resize_y=4, resize_z=3)),
    ("DHWC", (6, 9, 12, 1), dict(size=(4, 11, 5), interp_type=types.INTERP_NN)),
])
def test_resize_sequences_volumes_and_planar_images_match_dali(layout, shape, kwargs):
    samples = [np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8) for seed in range(2)]
    got = penstock_outputs("resize", samples, layout=layout, **kwargs)
    assert_matches_dali(got, dali_outputs("resize", samples, layout=layout, **kwargs), 1)


def test_resize_refuses_images_without_channels():
    with pytest.raises(Exception, match='resize: the layout "HW" does not match any of the allowed layouts'):
        penstock_outputs("resize", [np.zeros((4, 4), np.uint8)], layout="HW", resize_x=3)


def test_resize_per_sample_sizes_from_a_random_generator():
    images = ragged_images(6, seed=8, min_side=40, max_side=90)

    def resize_random(node):
        shorter = fn.random.uniform(range=(20.0, 60.0))
        return fn.resize(node, resize_shorter=shorter), shorter

    outputs, shorters = run_operator(resize_random, images, iterations=2)
    assert len(set(float(s) for s in shorters)) == len(shorters), "each sample draws its own size"
    want = dali_outputs("resize", images * 2, resize_shorter=[np.array(s, np.float32) for s in shorters])
    assert_matches_dali(outputs, want, 1)


def test_large_shrinks_match_dali():
    image = [smooth_image(600, 750, seed=3)]
    for size in [(50, 62), (17, 25)]:
        assert_matches_dali(run_operator(fn.resize, image, size=size), dali_outputs("resize", image, size=size), 1)


# ---- crop ---------------------------------------------------------------------------------------------
def crop_anchor(size: int, crop: int, position: float) -> int:
    """DALI's anchor: position (a float32) * (size - crop), rounded to nearest with halves away from
    zero; negative when the crop is larger."""
    start = float(np.float32(position)) * (size - crop)
    return int(math.copysign(math.floor(abs(start) + 0.5), start))


def reference_crop(image: np.ndarray, height: int, width: int, pos_y: float, pos_x: float, fill=0) -> np.ndarray:
    """The window, padded with ``fill`` where it leaves the image."""
    top, left = crop_anchor(image.shape[0], height, pos_y), crop_anchor(image.shape[1], width, pos_x)
    result = np.empty((height, width, image.shape[2]), image.dtype)
    result[...] = np.asarray(fill, image.dtype)
    for y in range(height):  # a plain loop, independent of the operator's slicing
        if 0 <= top + y < image.shape[0]:
            for x in range(width):
                if 0 <= left + x < image.shape[1]:
                    result[y, x] = image[top + y, left + x]
    return result


@pytest.mark.parametrize("pos_x,pos_y", [(0.5, 0.5), (0.0, 0.0), (1.0, 1.0), (0.25, 0.9)])
def test_crop_positions(pos_x, pos_y):
    images = ragged_images(4, smooth=False, seed=9, min_side=25, max_side=60)
    check_operator(fn.crop, images, lambda image: reference_crop(image, 20, 24, pos_y, pos_x),
                   crop=(20, 24), crop_pos_x=pos_x, crop_pos_y=pos_y)


def test_crop_square_and_separate_sizes():
    images = ragged_images(3, smooth=False, seed=10, min_side=25, max_side=60)
    check_operator(fn.crop, images, lambda image: reference_crop(image, 16, 16, 0.5, 0.5), crop=(16, 16))
    check_operator(fn.crop, images, lambda image: reference_crop(image, 12, 21, 0.3, 0.6),
                   crop_h=12, crop_w=21, crop_pos_x=0.6, crop_pos_y=0.3)


def test_crop_pads_outside_the_image_with_fill_values():
    images = [noise_image(20, 30, seed=11), noise_image(50, 10, seed=12)]
    fill = (7, 100, 250)
    check_operator(fn.crop, images, lambda image: reference_crop(image, 40, 36, 0.3, 0.5, fill),
                   crop=(40, 36), crop_pos_y=0.3, out_of_bounds_policy="pad", fill_values=fill)
    check_operator(fn.crop, images, lambda image: reference_crop(image, 40, 36, 0.0, 1.0, 9),
                   crop=(40, 36), crop_pos_x=1.0, crop_pos_y=0.0, out_of_bounds_policy="pad", fill_values=9)


def test_crop_trim_to_shape_keeps_the_part_inside_the_image():
    image = noise_image(20, 30, seed=13)
    # a 40x24 window centred on 20 rows starts at row -10: rows 0..19 remain; columns 3..26
    [cropped] = run_operator(fn.crop, [image], crop=(40, 24), out_of_bounds_policy="trim_to_shape")
    np.testing.assert_array_equal(cropped, image[:, 3:27])


def test_crop_outside_the_image_is_an_error_by_default():
    with pytest.raises(penstock.PipelineError, match=r"crop.*outside.*out_of_bounds_policy"):
        run_operator(fn.crop, [noise_image(20, 30)], crop=(40, 24))


def reference_window(sample: np.ndarray, layout: str, sizes: dict, positions: dict, fill=0) -> np.ndarray:
    """The window of ``sizes`` (axis letter -> size) placed at ``positions`` (axis letter -> 0..1) by
    DALI's anchor, the outside ``fill``: element by element over the output, independent of the
    operator's slicing."""
    shape = tuple(sizes.get(name, extent) for name, extent in zip(layout, sample.shape))
    starts = [crop_anchor(extent, sizes[name], positions.get(name, 0.5)) if name in sizes else 0
              for name, extent in zip(layout, sample.shape)]
    result = np.full(shape, fill, sample.dtype)
    for index in np.ndindex(*shape):
        source = tuple(start + i for start, i in zip(starts, index))
        if all(0 <= at < extent for at, extent in zip(source, sample.shape)):
            result[index] = sample[source]
    return result


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("layout, shape, kwargs, sizes, positions", [
    ("DHWC", (7, 9, 8, 2), dict(crop=(3, 4, 5), crop_pos_z=1.0), dict(D=3, H=4, W=5), dict(D=1.0)),
    ("CDHW", (2, 7, 9, 8), dict(crop_d=5, crop_h=4, crop_w=3, crop_pos_z=0.0, crop_pos_x=0.2),
     dict(D=5, H=4, W=3), dict(D=0.0, W=0.2)),
    ("FHWC", (6, 9, 8, 3), dict(crop=(4, 5), crop_pos_y=0.0), dict(H=4, W=5), dict(H=0.0)),  # each frame alike
    ("FHWC", (6, 9, 8, 3), dict(crop=(2, 4, 5)), dict(F=2, H=4, W=5), {}),  # the frames' axis as the depth
    ("FCHW", (5, 3, 9, 8), dict(crop_h=3, crop_w=6, crop_pos_x=1.0), dict(H=3, W=6), dict(W=1.0)),
    ("DHWC", (4, 6, 5, 3), dict(crop=(6, 8, 3), out_of_bounds_policy="pad", fill_values=9),
     dict(D=6, H=8, W=3), {}),
])
def test_crop_of_volumes_and_sequences(device, layout, shape, kwargs, sizes, positions):
    """crop over volumes and sequences, on both devices, against the element-by-element window; as
    DALI, a sequence without a D axis takes the depth along its frames."""
    from test_geometry_of_sequences import outputs
    samples = [np.random.default_rng(seed).integers(0, 255, shape, dtype=np.uint8) for seed in (1, 2)]
    got = outputs(lambda node, device: fn.crop(node, device=device, **kwargs), samples, layout, device)
    fill = kwargs.get("fill_values", 0)
    for cropped, sample in zip(got, samples):
        np.testing.assert_array_equal(cropped, reference_window(sample, layout, sizes, positions, fill))


def test_crop_of_a_volume_outside_is_an_error_naming_the_window():
    volume = np.zeros((4, 6, 5, 3), np.uint8)
    with pytest.raises(penstock.PipelineError, match=r"crop: the window of shape \(6, 4, 5, 3\) at \(-1, 1, 0, 0\) "
                                                      r"falls outside the sample of shape \(4, 6, 5, 3\) \(DHWC\)"):
        run_operator(fn.crop, [volume], layout="DHWC", crop=(6, 4, 5))


def test_crop_refuses_a_depth_beside_a_window_of_two_sizes():
    with pytest.raises(Exception, match="crop_d beside crop"):
        run_operator(fn.crop, [np.zeros((4, 6, 5, 3), np.uint8)], layout="DHWC", crop=(4, 5), crop_d=2)


# ---- flip -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("horizontal,vertical", [(1, 0), (0, 1), (1, 1), (0, 0)])
def test_flip(horizontal, vertical):
    def reference(image):
        result = image[:, ::-1] if horizontal else image
        return result[::-1] if vertical else result

    check_operator(fn.flip, ragged_images(3, smooth=False, seed=14), reference, horizontal=horizontal,
                   vertical=vertical)


def test_flip_per_sample_from_coin_flips():
    images = ragged_images(8, smooth=False, seed=15, min_side=5, max_side=20)

    def flip_random(node):
        horizontal, vertical = fn.random.coin_flip(), fn.random.coin_flip(probability=0.5)
        return fn.flip(node, horizontal=horizontal, vertical=vertical), horizontal, vertical

    flipped, horizontals, verticals = run_operator(flip_random, images, iterations=2)
    assert {int(h) for h in horizontals} == {0, 1} and {int(v) for v in verticals} == {0, 1}
    for image, output, horizontal, vertical in zip(images * 2, flipped, horizontals, verticals):
        expected = image[:, ::-1] if horizontal else image
        np.testing.assert_array_equal(output, expected[::-1] if vertical else expected)


# ---- transpose ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,perm,layout", [
    ({"perm": (2, 0, 1)}, (2, 0, 1), "CHW"),
    ({"perm": (1, 0, 2)}, (1, 0, 2), "WHC"),
    ({}, (2, 1, 0), "CWH"),
    ({"perm": (2, 0, 1), "output_layout": "XYZ"}, (2, 0, 1), "XYZ"),
    ({"perm": (2, 0, 1), "transpose_layout": False}, (2, 0, 1), "HWC"),  # DALI keeps the input's layout
])
def test_transpose_permutes_axes_and_layout(kwargs, perm, layout):
    images = ragged_images(3, smooth=False, seed=16, min_side=3, max_side=12)
    [batch] = run_batches(fn.transpose, images, **kwargs)[0]
    assert batch.layout() == layout
    for index, image in enumerate(images):
        output = batch.at(index)
        np.testing.assert_array_equal(output, np.transpose(image, perm))
        assert output.flags.c_contiguous


def test_transpose_rejects_a_perm_of_the_wrong_length():
    with pytest.raises(penstock.PipelineError, match=r"perm \(1, 0\) does not permute the 3 axes"):
        run_operator(fn.transpose, [noise_image(4, 5)], perm=(1, 0))
    with pytest.raises(ValueError, match=r"transpose: argument 'perm': \(0, 2\) is not a permutation"):
        run_operator(fn.transpose, [noise_image(4, 5)], perm=(0, 2))


# ---- rotate ------------------------------------------------------------------------------------------
def _pil_rotate(image, angle, expand, fill=0):
    from PIL import Image as PILImage
    return np.asarray(PILImage.fromarray(image).rotate(angle, resample=PILImage.BILINEAR, expand=expand,
                                                       fillcolor=(fill,) * image.shape[2]))


@pytest.mark.parametrize("angle", [0.0, 30.0, -45.0, 90.0, 200.0])
def test_rotate_keep_size_matches_pillow(angle):
    # reference: Pillow's bilinear rotation about the centre; tolerance: mean 1.5 grey levels away
    # from the borders, where the two libraries blend the fill differently
    samples = [smooth_image(40, 60, seed=1), smooth_image(33, 33, seed=2)]
    got = run_operator(lambda x: fn.rotate(x, angle=angle, keep_size=True, fill_value=0), samples)
    for image, result in zip(samples, got):
        want = _pil_rotate(image, angle, expand=False)
        assert result.shape == image.shape
        inner = (slice(4, -4), slice(4, -4))
        assert np.abs(result[inner].astype(float) - want[inner]).mean() <= 1.5


@pytest.mark.parametrize("angle", [30.0, -45.0, 200.0])
def test_rotate_keep_size_matches_opencv_warp_affine(angle):
    # reference: cv2.warpAffine with getRotationMatrix2D about the centre of the pixel grid,
    # bilinear, fill 0; tolerance: mean 1.5 grey levels away from the borders
    import cv2
    samples = [smooth_image(40, 60, seed=3), smooth_image(33, 47, seed=4)]
    got = run_operator(lambda x: fn.rotate(x, angle=angle, keep_size=True, fill_value=0), samples)
    for image, result in zip(samples, got):
        height, width = image.shape[:2]
        matrix = cv2.getRotationMatrix2D(((width - 1) / 2, (height - 1) / 2), angle, 1.0)
        want = cv2.warpAffine(image, matrix, (width, height), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
        inner = (slice(4, -4), slice(4, -4))
        assert np.abs(result[inner].astype(float) - want[inner]).mean() <= 1.5


def test_rotate_output_is_the_bounding_box_with_the_input_parity():
    image = smooth_image(40, 60)
    result = run_operator(lambda x: fn.rotate(x, angle=30.0, fill_value=255), [image])[0]
    assert result.shape == (66, 72, 3)  # ceil(60 sin 30 + 40 cos 30) = 65 -> 66 (even like 40), 72
    assert (result[0, 0] == 255).all()  # a corner outside the rotated picture takes the fill value
    assert run_operator(lambda x: fn.rotate(x, angle=90.0), [image])[0].shape == (60, 40, 3)


def test_rotate_per_sample_angles_and_size():
    samples = [smooth_image(20, 30, seed=i) for i in range(3)]
    got = run_operator(lambda x: fn.rotate(x, angle=fn.random.uniform(range=(-30.0, 30.0)), size=(25, 25)), samples)
    assert [g.shape for g in got] == [(25, 25, 3)] * 3


# ---- window and size arguments given per sample, by other operators -------------------------------------
def test_crop_takes_its_window_per_sample():
    """crop (or crop_h) from another operator: each sample's own window, where it is placed by crop_pos_x/y."""
    images = ragged_images(3, smooth=False, seed=21)
    sizes = [np.array([5.0 + i, 4.0 + 2 * i], np.float32) for i in range(3)]

    def crops(node):
        crop = fn.external_source(source=lambda: sizes, batch=True)
        return fn.crop(node, crop=crop), fn.crop(node, crop_h=fn.slice(crop, 0, 1, axes=(0,), normalized_anchor=False,
                                                                        normalized_shape=False), crop_w=3.0)

    by_crop, by_height = run_operator(crops, images)
    for image, size, cut, cut_h in zip(images, sizes, by_crop, by_height):
        height, width = int(size[0]), int(size[1])
        top, left = round_half_up((image.shape[0] - height) / 2), round_half_up((image.shape[1] - width) / 2)
        np.testing.assert_array_equal(cut, image[top:top + height, left:left + width])
        left = round_half_up((image.shape[1] - 3) / 2)
        np.testing.assert_array_equal(cut_h, image[top:top + height, left:left + 3])


def test_a_scalar_made_by_cast_is_a_per_sample_argument():
    """cast writes scalar samples into its batch buffer; grid_mask reads them as tile (DALI's own test of it)."""
    images = ragged_images(2, smooth=False, seed=22)
    tiles = [np.float32(7.6), np.float32(12.2)]

    def masked(node):
        tile = fn.cast(fn.external_source(source=lambda: tiles, batch=True), dtype=types.INT32)
        return fn.grid_mask(node, tile=tile, ratio=0.5), tile

    outputs, cast_tiles = run_operator(masked, images)
    for image, output, tile in zip(images, outputs, cast_tiles):
        assert tile.shape == () and tile.dtype == np.int32
        y, x = np.mgrid[0:image.shape[0], 0:image.shape[1]]
        dark = ((x % int(tile)) < 0.5 * int(tile)) & ((y % int(tile)) < 0.5 * int(tile))
        np.testing.assert_array_equal(output, np.where(dark[..., None], 0, image))


# ---- flip in DALI's layouts ------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["HWC", "CHW", "FHWC", "DHWC", "FCHW", "CDHW", "FDHWC", "FCDHW"])
@pytest.mark.parametrize("flags", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)])
def test_flip_mirrors_the_axes_its_layout_names(layout, flags):
    """horizontal mirrors W, vertical H, depthwise D (nothing where the layout has no D); F and C stay."""
    rng = np.random.default_rng(len(layout))
    samples = [rng.integers(0, 255, tuple(2 + (i + k) % 3 for k in range(len(layout))), dtype=np.uint8)
               for i in range(2)]
    horizontal, vertical, depthwise = flags
    [batch] = run_batches(fn.flip, samples, layout=layout, horizontal=horizontal, vertical=vertical,
                          depthwise=depthwise)[0]
    assert batch.layout() == layout
    axes = tuple(layout.index(name) for name, flag in zip("WHD", flags) if flag and name in layout)
    for index, sample in enumerate(samples):
        np.testing.assert_array_equal(batch.at(index), np.flip(sample, axes))


def test_flip_reads_a_sample_without_layout_as_dali_does():
    """No layout: the first of DALI's layouts with the sample's dimensions (HWC, FHWC, FDHWC)."""
    sample = np.arange(2 * 3 * 4 * 2, dtype=np.uint8).reshape(2, 3, 4, 2)
    [flipped] = run_operator(fn.flip, [sample], layout="", vertical=1, horizontal=0)
    np.testing.assert_array_equal(flipped, sample[:, ::-1])  # FHWC: H is axis 1


@pytest.mark.parametrize("layout", ["HW", "NHWC", "WHC"])
def test_flip_refuses_other_layouts(layout):
    with pytest.raises(ValueError, match=f'flip: the layout "{layout}" does not match any of the allowed layouts'):
        run_operator(fn.flip, [np.zeros((2,) * len(layout), np.uint8)], layout=layout)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_the_c_warp_computes_what_the_numpy_warp_does(dtype):
    """runtime/csrc/affine_warp.c (when it builds) repeats the numpy path's float32 operations:
    equal to the bit, tiles of 256 columns, borders and edges included."""
    from penstock.kernels import cpu_image
    from penstock.runtime import native
    if native.affine_warp() is None:
        pytest.skip("no C compiler here: the numpy path is the only one")
    rng = np.random.default_rng(7)
    image = (rng.normal(0, 100, (23, 300, 3)) if dtype == np.float32 else rng.integers(0, 200, (23, 300, 3))).astype(dtype)
    angle = 0.4
    matrix = np.array([[np.cos(angle), -np.sin(angle), 5.0], [np.sin(angle), np.cos(angle), -7.0]], np.float32)
    for border in (None, np.asarray(9, dtype)):
        fast = cpu_image.affine_sample(image, matrix, 31, 290, False, border, dtype, native.affine_warp)
        slow = cpu_image.affine_sample(image, matrix, 31, 290, False, border, dtype)
        np.testing.assert_array_equal(fast, slow)


RESAMPLE_CASES = [  # (shape, axes, out_sizes, roi_lo, roi_hi)
    ((37, 53, 3), (0, 1), (61, 29), (0.0, 0.0), (37.0, 53.0)),  # enlarged along H, shrunk along W
    ((37, 53, 3), (0, 1), (17, 90), (30.25, 2.5), (3.75, 49.0)),  # H flipped, sub-pixel ROIs
    ((40, 31), (0, 1), (23, 47), (1.5, 0.0), (38.0, 31.0)),  # HW
    ((29, 41, 1), (0, 1), (50, 13), (0.0, 40.5), (29.0, 0.25)),  # one channel, W flipped
    ((120, 7, 3), (0, 1), (35, 19), (0.0, 0.0), (120.0, 7.0)),  # tall and thin
    ((6, 150, 4), (0, 1), (21, 44), (-2.0, 3.0), (8.0, 140.0)),  # wide and flat, a ROI past the edges
]


@pytest.mark.parametrize("case", range(len(RESAMPLE_CASES)))
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_the_c_resampling_computes_what_the_numpy_resampling_does(case, dtype):
    """runtime/csrc/resample.c (when it builds) repeats the numpy taps' float32 operations, and
    rounds uint8 outputs the same: equal to the bit for every filter, with and without antialias."""
    from penstock.kernels import cpu_image
    from penstock.runtime import native
    if native.resample_axis() is None:
        pytest.skip(f"the C resampling cannot be built here: {native.problem('resample')}")
    shape, axes, sizes, lo, hi = RESAMPLE_CASES[case]
    rng = np.random.default_rng(case)
    image = rng.integers(0, 256, shape) if dtype == np.uint8 else rng.normal(0, 100, shape)
    image = image.astype(dtype)
    filters = [cpu_image.LINEAR, cpu_image.TRIANGULAR, cpu_image.CUBIC, cpu_image.LANCZOS3, cpu_image.GAUSSIAN]
    for min_filter in filters:
        for mag_filter in (min_filter, cpu_image.NEAREST):
            for antialias in (True, False):
                for out_dtype in {dtype, np.dtype(np.float32)}:
                    call = (image, axes, sizes, lo, hi, min_filter, mag_filter, antialias, out_dtype)
                    np.testing.assert_array_equal(cpu_image.resample(*call, native.resample_axis),
                                                  cpu_image.resample(*call), strict=True)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.int32, np.uint32, np.int64, np.float64])
def test_the_c_resampling_converts_other_types_as_the_numpy_resampling_does(dtype):
    """Other input types reach the C resampling converted to float32 once, as each numpy term
    converts them (values past float32's 24 bits of integers round the same)."""
    from penstock.kernels import cpu_image
    from penstock.runtime import native
    if native.resample_axis() is None:
        pytest.skip(f"the C resampling cannot be built here: {native.problem('resample')}")
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    low, high = max(float(info.min), -3e9), min(float(info.max), 5e9)
    image = np.random.default_rng(3).uniform(low, high, (19, 23, 3)).astype(dtype)
    call = (image, (0, 1), (31, 11), (0.0, 0.5), (19.0, 22.0), cpu_image.LANCZOS3, cpu_image.CUBIC, True, dtype)
    np.testing.assert_array_equal(cpu_image.resample(*call, native.resample_axis), cpu_image.resample(*call),
                                  strict=True)


@pytest.mark.parametrize("arguments", [
    dict(resize_shorter=800, max_size=1333), dict(resize_shorter=256), dict(resize_longer=300),
    dict(resize_longer=300, max_size=(200, 250)), dict(resize_x=224), dict(resize_y=117.5),
    dict(resize_x=224, resize_y=180, mode="not_smaller"), dict(resize_x=224, resize_y=180, mode="not_larger"),
    dict(resize_x=224, resize_y=180, mode="not_larger", max_size=(150, 0)), dict(resize_x=300, max_size=400),
    dict(resize_y=-90), dict(size=(0, 333), mode="stretch"), dict(size=(411.3, 0), max_size=500),
    dict(resize_x=-200, resize_y=120, mode="not_smaller")])
def test_the_batch_windows_of_resize_are_its_per_sample_windows(arguments):
    """batch_resize_windows (a batch sharing its arguments, worked out at once) gives each sample
    the size and source window resize_window's per-sample rules give, for every mode, max_size and
    sign, with and without the sub-pixel scale."""
    from penstock import registry
    from penstock.operators.geometry.resize import batch_resize_windows, resize_window
    rng = np.random.default_rng(11)
    sizes = np.concatenate([rng.integers(1, 4000, (400, 2)), [[1, 1], [3, 7919], [480, 640], [640, 480]]])
    for subpixel in (True, False):
        args, _ = registry.get_schema("resize").validate({**arguments, "subpixel_scale": subpixel})
        out, starts, ends = batch_resize_windows(sizes, args)
        expected = [resize_window(list(size), args) for size in sizes.tolist()]
        assert out.tolist() == [size for size, _, _ in expected]
        assert starts.tolist() == [lo for _, lo, _ in expected]
        assert ends.tolist() == [hi for _, _, hi in expected]
