"""random_crop_generator: windows inside the image whose area share and aspect ratio are drawn as
asked (checked against numpy statistics of what was asked), the cases DALI decides without a draw
(images too wide or too tall, no attempts) against sizes worked out here from DALI's rule, and the
distribution of the windows against DALI's own."""
import numpy as np
import pytest

from penstock.compat import dali as penstock_dali


def windows(library, shape, count=64, runs=3, **arguments):
    """(anchors [n, 2], shapes [n, 2]) of ``runs`` batches of ``count`` windows of ``shape``."""
    fn = library.fn
    data = [np.array(shape, np.int32)] * count

    @library.pipeline_def(batch_size=count, num_threads=1, device_id=None, seed=3)
    def pipe():
        return tuple(fn.random_crop_generator(fn.external_source(source=[data], cycle=True), **arguments))
    built = pipe()
    built.build()
    anchors, shapes = [], []
    for _ in range(runs):
        anchor, size = built.run()
        anchors += [np.array(anchor[i]) for i in range(count)]
        shapes += [np.array(size[i]) for i in range(count)]
    return np.array(anchors), np.array(shapes)


def test_windows_lie_inside_and_follow_the_ranges():
    anchors, shapes = windows(penstock_dali, (300, 400, 3), random_area=(0.2, 0.6), random_aspect_ratio=(0.5, 2.0))
    assert anchors.dtype == shapes.dtype == np.int32
    assert (anchors >= 0).all() and (anchors + shapes <= (300, 400)).all()
    areas = shapes.prod(1) / (300 * 400)
    ratios = np.log(shapes[:, 1] / shapes[:, 0])
    assert 0.19 <= areas.min() and areas.max() <= 0.61  # rounding to whole pixels
    assert abs(areas.mean() - 0.4) < 0.03 and abs(ratios.mean()) < 0.1  # uniform area, log-uniform ratio
    assert ratios.min() >= np.log(0.5) - 0.02 and ratios.max() <= np.log(2.0) + 0.02


def test_every_place_of_the_window_is_drawn():
    anchors, shapes = windows(penstock_dali, (4, 5), random_area=(0.2, 0.2), random_aspect_ratio=(1.0, 1.0))
    assert (shapes == (2, 2)).all()
    assert {tuple(a) for a in anchors.tolist()} == {(y, x) for y in range(3) for x in range(4)}


@pytest.mark.parametrize("shape, arguments, expected", [
    # no attempt: the whole image, clamped to width / height <= 4/3 (133 wide), shrunk to half the area:
    # each side times sqrt(10000 / (100 * 133))
    ((100, 200), {"random_area": (0.2, 0.5), "num_attempts": 0}, (86, 115)),
    # too wide for a window of 90% of the area at width / height <= 4: 10 x 40
    ((10, 200), {"random_area": (0.9, 1.0), "random_aspect_ratio": (3.0, 4.0)}, (10, 40)),
    ((200, 10), {"random_area": (0.9, 1.0), "random_aspect_ratio": (0.25, 1 / 3)}, (40, 10)),
    ((100, 200), {"random_area": 0.5, "random_aspect_ratio": 1.0}, (100, 100)),
    ((0, 200), {}, (0, 0)),
])
def test_windows_decided_without_a_draw(shape, arguments, expected):
    anchors, shapes = windows(penstock_dali, shape, count=8, runs=1, **arguments)
    assert (shapes == expected).all()
    assert (anchors >= 0).all() and (anchors + shapes <= shape[:2]).all()


@pytest.mark.parametrize("data, message", [
    (np.array([10.0, 20.0], np.float32), "integer type"),
    (np.array([10, 20], np.uint64), "integer type"),
    (np.array([10, 20, 3, 1], np.int32), "2 or 3 values"),
])
def test_refuses_what_dali_refuses(data, message):
    fn = penstock_dali.fn

    @penstock_dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return tuple(fn.random_crop_generator(fn.external_source(source=[[data]], cycle=True)))
    built = pipe()
    built.build()
    with pytest.raises(Exception, match=message):
        built.run()


def test_refuses_an_empty_range():
    with pytest.raises(ValueError, match="random_crop_generator: argument 'random_area': the range"):
        windows(penstock_dali, (10, 10), random_area=(0.9, 0.1))


# ---- against DALI ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, arguments", [
    ((300, 400, 3), {}),
    ((100, 200), {"random_area": (0.1, 2.0)}),
    ((120, 90), {"random_area": 0.3, "random_aspect_ratio": (0.5, 3.0), "num_attempts": 2}),
])
def test_distribution_as_dali(shape, arguments):
    dali = pytest.importorskip("nvidia.dali")
    expected = windows(dali, shape, **arguments)
    got = windows(penstock_dali, shape, **arguments)
    for (anchors, shapes), label in ((expected, "dali"), (got, "penstock")):
        assert (anchors >= 0).all() and (anchors + shapes <= shape[:2]).all(), label

    def summary(anchors, shapes):
        areas = shapes.prod(1) / (shape[0] * shape[1])
        return np.array([areas.mean(), areas.std(), np.log(shapes[:, 1] / shapes[:, 0]).mean()])
    # 192 windows each: the means' standard errors are about 0.015
    assert np.abs(summary(*got) - summary(*expected)).max() < 0.06


@pytest.mark.parametrize("shape, arguments", [
    ((100, 200), {"random_area": (0.2, 0.5), "num_attempts": 0}),
    ((10, 200), {"random_area": (0.9, 1.0), "random_aspect_ratio": (3.0, 4.0)}),
    ((7, 9), {"random_area": (0.05, 0.1)}),
])
def test_windows_decided_without_a_draw_as_dali(shape, arguments):
    dali = pytest.importorskip("nvidia.dali")
    assert np.array_equal(np.unique(windows(dali, shape, 8, 1, **arguments)[1], axis=0),
                          np.unique(windows(penstock_dali, shape, 8, 1, **arguments)[1], axis=0))
