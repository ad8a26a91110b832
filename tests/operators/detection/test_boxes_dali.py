"""erase, paste, the box operators, segmentation and the random generators against DALI itself: each
case runs the same program under nvidia.dali and penstock.compat.dali and compares values, types,
shapes and layouts, or that both refuse it."""
import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

from dali_compare import run, same  # noqa: E402


_run = run


def _same(build, *inputs, layout=None, rtol=0.0, values=True):
    same(build, list(inputs), layout, rtol=rtol, atol=rtol, values=values)


CHW = [np.arange(1, 41, dtype=np.uint8).reshape(2, 4, 5), np.arange(60, dtype=np.uint8).reshape(3, 4, 5)]
HWC = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3), (np.arange(60, dtype=np.uint8) * 3).reshape(4, 5, 3)]


# ---- erase ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"anchor": (1, 2), "shape": (2, 3), "axis_names": "HW"},
    {"anchor": (1, 2), "shape": (2, 3)},
    {"anchor": (1,), "shape": (2,), "axes": (1,)},
    {"anchor": (1.5, 2.5), "shape": (1.4, 1.5), "centered_anchor": True},
    {"anchor": (-1.5, 0.7), "shape": (2.9, 1.5), "fill_value": 9.7},
    {"anchor": (0.25, 0.5), "shape": (0.5, 0.3), "normalized": True},
    {"anchor": (0.25, 0.5), "shape": (2, 1), "normalized_anchor": True},
    {"anchor": (1, 1, 0, 0), "shape": (-2, 2, 1, 1), "axis_names": "HH"},
    {"anchor": (0,), "shape": (1,), "axis_names": "C", "fill_value": 300.0},
])
def test_erase_chw(kwargs):
    _same(lambda fn, types, x: fn.erase(x, **kwargs), CHW, layout="CHW")


@pytest.mark.parametrize("kwargs", [
    {"anchor": (1, 1), "shape": (1, 2), "fill_value": (1.5, 2.5, -3.5)},
    {"anchor": (1,), "shape": (2,), "axis_names": "C", "fill_value": (7, 8, 9)},
    {"anchor": (1, 1), "shape": (1, 2), "fill_value": (1, 2)},  # refused: 2 fills for 3 channels
    {"anchor": (1, 1), "shape": (1, 2), "axis_names": "HX"},  # refused: no X in the layout
    {"anchor": (1, 1), "shape": (2, 2), "normalized": True, "normalized_anchor": False},  # refused
])
def test_erase_hwc(kwargs):
    _same(lambda fn, types, x: fn.erase(x, **kwargs), HWC, layout="HWC")


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64", "float16", "float32", "float64"])
def test_erase_types(dtype):
    samples = [np.arange(12).reshape(3, 4).astype(dtype), np.arange(20).reshape(4, 5).astype(dtype)]
    _same(lambda fn, types, x: fn.erase(x, anchor=(1, 1), shape=(2, 2), fill_value=-5.5), samples, layout="HW")


def test_erase_per_sample_arguments():
    anchors = [np.float32([1.5, 0.5]), np.float32([0, 2])]
    shapes = [np.float32([1, 2, 1, 1]), np.float32([2.5, 2])]
    fills = [np.float32([4]), np.float32([5])]
    _same(lambda fn, types, x, a, s, f: fn.erase(x, anchor=a, shape=s, fill_value=f, axis_names="HW"), HWC, anchors,
          shapes, fills, layout="HWC")  # refused: 2 anchors for 4 values of shape
    _same(lambda fn, types, x, a, s, f: fn.erase(x, anchor=a, shape=s, fill_value=f), HWC, anchors,
          [np.float32([1, 2]), np.float32([2.5, 2])], fills, layout="HWC", values=True)


# ---- paste ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"ratio": 2, "fill_value": (7.6, 8, 9)},
    {"ratio": 2, "fill_value": 300},
    {"ratio": 2, "fill_value": -1},
    {"ratio": 1.5, "fill_value": 3, "paste_x": 0.3, "paste_y": 0.7, "min_canvas_size": 5.7},
    {"ratio": 2},  # refused: fill_value is required
    {"ratio": 2, "fill_value": (1, 2)},  # refused: neither one value nor n_channels
])
def test_paste(kwargs):
    _same(lambda fn, types, x: fn.paste(x, **kwargs), HWC, layout="HWC")


@pytest.mark.parametrize("dtype,layout", [("uint8", None), ("int16", "HWC"), ("float32", "HWC"), ("uint8", "CHW")])
def test_paste_types_and_layouts(dtype, layout):
    _same(lambda fn, types, x: fn.paste(x, ratio=2, fill_value=3), [sample.astype(dtype) for sample in HWC],
          layout=layout)


# ---- coord_flip, bb_flip -------------------------------------------------------------------------------
POINTS = {"1-D": [np.float32([[0.1], [0.7]])] * 2, "2-D": [np.float32([[0.1, 0.2], [0.7, 0.9]])] * 2,
          "3-D": [np.float32([[0.1, 0.2, 0.3], [0.7, 0.9, 0.4]])] * 2, "flat": [np.float32([0.1, 0.2])] * 2,
          "float64": [np.float64([[0.1, 0.2]])] * 2, "4 coordinates": [np.float32([[1, 2, 3, 4]])] * 2}


@pytest.mark.parametrize("layout", ["", "x", "yx", "xyz", "zyx", "yzx", "zy", "abx"])
@pytest.mark.parametrize("points", list(POINTS))
def test_coord_flip_layouts(points, layout):
    _same(lambda fn, t, p: fn.coord_flip(p, layout=layout, flip_y=1, flip_z=1, center_x=0.1, center_y=0.2,
                                         center_z=0.3), POINTS[points])


BOXES = {"[N, 4]": [np.float32([[0.1, 0.2, 0.3, 0.4], [-0.5, 0.2, 1.5, 0.4]])] * 2,
         # whole boxes only: DALI leaves the values past the last whole box unwritten
         "[N, 6]": [np.float32(np.arange(12).reshape(2, 6) / 20), np.float32(np.arange(24).reshape(4, 6) / 30)],
         "flat": [np.float32(np.arange(8) / 10)] * 2, "[1, 2, 4]": [np.float32(np.arange(8).reshape(1, 2, 4) / 10)] * 2,
         "float64": [np.float64([[0.1, 0.2, 0.3, 0.4]])] * 2}


@pytest.mark.parametrize("ltrb", [False, True])
@pytest.mark.parametrize("boxes", list(BOXES))
def test_bb_flip_takes_boxes_one_after_another(boxes, ltrb):
    _same(lambda fn, t, b: fn.bb_flip(b, ltrb=ltrb, vertical=1), BOXES[boxes])


@pytest.mark.parametrize("kwargs, message", [
    (dict(crop_shape=(10,), roi_start=(1,), roi_end=(2,), in_shape=(4,)), "Cropping shape can't be bigger than the "
                                                                         "input shape"),
    (dict(crop_shape=(2,), roi_start=(1,), roi_end=(5,), in_shape=(4,)), "ROI can't be out of bounds"),
    (dict(crop_shape=(2,), roi_start=(-1,), roi_shape=(1,), in_shape=(4,)), "ROI can't be out of bounds"),
])
def test_roi_random_crop_refuses_windows_outside_in_dalis_words(kwargs, message):
    build = lambda fn, t, x: (x, fn.roi_random_crop(**kwargs))  # noqa: E731
    _same(build, CHW)
    with pytest.raises(RuntimeError, match=message):
        raise _run("penstock", build, [CHW], None)


@pytest.mark.parametrize("layout", ["xyXY", "xyWH"])
@pytest.mark.parametrize("boxes", [
    [[0.6, 0.2, 0.3, 0.8], [0.1, 0.1, 0.5, 0.5]],  # corners in any order are taken
    [[0.1, 0.2, 0.3, 0.8]],  # y + h = 1 in float32
    [[-0.1, 0.2, 0.3, 0.8]], [[0.1, 0.1, 0.5, 1.2]], [[np.nan, 0.2, 0.3, 0.8]]])  # refused
def test_random_bbox_crop_takes_boxes_as_dali_bounds_them(boxes, layout):
    def build(fn, t, b, labels):
        return tuple(fn.random_bbox_crop(b, labels, aspect_ratio=[0.5, 2.0], thresholds=[0.0], scaling=[0.8, 1.0],
                                         bbox_layout=layout, allow_no_crop=False)[2:])
    samples = [np.float32(boxes)] * 2
    _same(build, samples, [np.arange(len(boxes), dtype=np.int32).reshape(-1, 1)] * 2, values=False)


@pytest.mark.parametrize("kwargs", [dict(ratio=2.0, paste_x=1.5), dict(ratio=2.0, paste_x=-0.5, paste_y=1.2),
                                    dict(ratio=3.0, paste_x=0.0, paste_y=1.0, ltrb=True), dict(ratio=0.5)])
def test_bbox_paste_places_over_dalis_ranges(kwargs):
    _same(lambda fn, t, b: fn.bbox_paste(b, **kwargs), [np.float32([[0.1, 0.2, 0.5, 0.6], [0, 0, 1, 1]])] * 2,
          rtol=1e-7)


@pytest.mark.parametrize("shapes", [dict(input_shape=[[100, 50], [60, 60]]),
                                    dict(input_shape=[[100, 50], [60, 60]], crop_shape=[[30, 20], [10, 10]]),
                                    dict(input_shape=[[100, 50], [60, 60]], crop_shape=[[-3, 20], [10, 10]]),
                                    dict(input_shape=[[100, 50], [60, 60]], crop_shape=[[3], [10]])])
def test_random_bbox_crop_takes_shapes_per_sample(shapes):
    def build(fn, t, b):
        given = {name: fn.external_source(source=(lambda v: lambda: [np.int32(s) for s in v])(values), batch=True)
                 for name, values in shapes.items()}
        extra = {} if "crop_shape" in shapes else {"aspect_ratio": [0.5, 2.0]}  # not with a crop shape
        return tuple(fn.random_bbox_crop(b, **given, **extra)[1:])
    _same(build, [np.float32([[0.1, 0.2, 0.5, 0.6]])] * 2, values=False)


@pytest.mark.parametrize("kwargs", [
    dict(input_shape=[100, 50], crop_shape=[30, 20]),  # no allow_no_crop: a crop every time
    dict(input_shape=[100, 50], crop_shape=[30, 20], aspect_ratio=[1.0, 1.0]),  # refused from here on
    dict(input_shape=[100, 50], crop_shape=[30, 20], scaling=[1.0, 1.0]),
    dict(input_shape=[100, 50], crop_shape=[30, 20], allow_no_crop=True), dict(ltrb=True, bbox_layout="xyXY"),
    dict(ltrb=False), dict()])
def test_random_bbox_crop_argument_combinations(kwargs):
    _same(lambda fn, t, b: tuple(fn.random_bbox_crop(b, **kwargs)[1:]), [np.float32([[0.1, 0.2, 0.5, 0.6]])] * 2,
          values=False)
