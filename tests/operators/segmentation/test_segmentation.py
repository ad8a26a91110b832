"""segmentation.random_mask_pixel draws uniformly from the foreground it is given (checked over many
draws against numpy's count of the pixels), segmentation.select_masks refuses ids it cannot serve, and
roi_random_crop places windows over every start DALI's rule allows."""
import numpy as np
import pytest

from penstock import fn, pipeline_def


def draw_pixels(masks, runs, **arguments):
    @pipeline_def(batch_size=len(masks), num_threads=2, device_id=None, seed=4)
    def pipe():
        return fn.segmentation.random_mask_pixel(fn.external_source(source=lambda: masks, batch=True), **arguments)
    built = pipe()
    built.build()
    pixels = [tuple(np.asarray(batch.at(i)).tolist()) for batch in (built.run()[0] for _ in range(runs))
              for i in range(len(masks))]
    built.close()
    return pixels


def test_foreground_pixels_are_drawn_uniformly():
    mask = np.zeros((6, 8), np.uint8)
    mask[1, 2] = mask[4, 7] = mask[5, 0] = 3
    mask[2, 2] = 9
    pixels = draw_pixels([mask] * 50, 40, foreground=1, value=3)
    counts = {pixel: pixels.count(pixel) for pixel in set(pixels)}
    assert set(counts) == {(1, 2), (4, 7), (5, 0)}  # only the pixels equal to value
    assert all(abs(count / len(pixels) - 1 / 3) < 0.04 for count in counts.values())


def test_without_foreground_every_pixel_can_be_drawn():
    pixels = draw_pixels([np.zeros((3, 4), np.int32)] * 40, 30, foreground=1)
    assert set(pixels) == {(y, x) for y in range(3) for x in range(4)}


@pytest.mark.parametrize("mask_ids, message", [([1, 1], "name a mask twice"), ([4], "mask id 4 has no polygon")])
def test_select_masks_refuses_ids_it_cannot_serve(mask_ids, message):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        ids = fn.external_source(source=lambda: [np.array(mask_ids, np.int32)], batch=True)
        polygons = fn.external_source(source=lambda: [np.array([[0, 0, 3], [1, 3, 6]], np.int32)], batch=True)
        vertices = fn.external_source(source=lambda: [np.zeros((6, 2), np.float32)], batch=True)
        return fn.segmentation.select_masks(ids, polygons, vertices)
    built = pipe()
    built.build()
    with pytest.raises(Exception, match=message):
        built.run()
    built.close()


def object_boxes(mask, runs=30, **arguments):
    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=6)
    def pipe():
        return fn.segmentation.random_object_bbox(fn.external_source(source=lambda: [mask] * 8, batch=True),
                                                  format="start_end", output_class=not arguments.get("ignore_class"),
                                                  **arguments)
    built = pipe()
    built.build()
    found = []
    for _ in range(runs):
        starts, ends, *labels = built.run()  # no labels with ignore_class: they are the background's
        found.extend((tuple(np.asarray(starts.at(i))), tuple(np.asarray(ends.at(i))),
                      int(np.asarray(labels[0].at(i))) if labels else 0) for i in range(8))
    built.close()
    return found


MASK = np.zeros((10, 12), np.int32)
MASK[1:3, 2:6] = 1   # 8 pixels
MASK[6:9, 8:11] = 1  # 9 pixels
MASK[5, 0] = 2       # 1 pixel
MASK[8, 2] = MASK[9, 3] = 2  # diagonal neighbours: one 8-connected blob


def test_every_blob_of_the_drawn_label_is_drawn_with_its_box():
    found = set(object_boxes(MASK))
    assert found == {((1, 2), (3, 6), 1), ((6, 8), (9, 11), 1), ((5, 0), (6, 1), 2), ((8, 2), (10, 4), 2)}


def test_k_largest_threshold_foreground_prob_and_ignore_class():
    assert set(object_boxes(MASK, k_largest=1, classes=[1])) == {((6, 8), (9, 11), 1)}
    assert set(object_boxes(MASK, threshold=[2, 2])) == {((1, 2), (3, 6), 1), ((6, 8), (9, 11), 1),
                                                         ((8, 2), (10, 4), 2)}
    assert set(object_boxes(MASK, foreground_prob=0.0)) == {((0, 0), (10, 12), 0)}
    merged = np.zeros((4, 4), np.int32)
    merged[1, 1], merged[1, 2] = 1, 2  # two labels side by side: one blob when labels are ignored
    assert set(object_boxes(merged, ignore_class=True)) == {((1, 1), (2, 3), 0)}


def roi_starts(runs: int, batch: int = 8, **arguments) -> list[tuple]:
    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, seed=6)
    def pipe():  # a pipeline needs a source of samples: a fed one, not used
        return fn.roi_random_crop(**arguments), fn.external_source(source=lambda: [np.zeros(1)] * batch, batch=True)
    built = pipe()
    built.build()
    starts = [tuple(np.asarray(sample).tolist()) for _ in range(runs) for sample in built.run()[0]]
    built.close()
    return starts


def test_roi_random_crop_reaches_every_allowed_start_and_only_those():
    """Axis 0: a region of 3 in a window of 5, within 10: starts 2..4 (the window holds the region).
    Axis 1: a region of 8 in a window of 3: starts 4..9 (the window inside the region). Axis 2: region
    and window of equal extent: the region's start."""
    starts = roi_starts(20, crop_shape=(5, 3, 4), roi_start=(4, 4, 2), roi_end=(7, 12, 6), in_shape=(10, 12, 8))
    assert {start[0] for start in starts} == {2, 3, 4}
    assert {start[1] for start in starts} == set(range(4, 10))
    assert {start[2] for start in starts} == {2}
    unbounded = roi_starts(20, crop_shape=(6,), roi_start=(1,), roi_shape=(2,))
    assert {start[0] for start in unbounded} == set(range(-3, 2))  # no shape: the window may leave the data


@pytest.mark.parametrize("arguments, message", [
    (dict(crop_shape=(4,), roi_start=(0,)), "either 'roi_end' or 'roi_shape'"),
    (dict(crop_shape=(4,), roi_start=(0,), roi_end=(2,), roi_shape=(2,)), "not both"),
    (dict(crop_shape=(12,), roi_start=(0,), roi_end=(2,), in_shape=(10,)), "must lie within the data's extent 10"),
    (dict(crop_shape=(4, 4), roi_start=(0,), roi_end=(2,)), "different numbers of axes"),
])
def test_roi_random_crop_errors_name_the_problem(arguments, message):
    import penstock
    with pytest.raises((ValueError, penstock.PipelineError), match=message):
        roi_starts(1, **arguments)


def test_random_object_bbox_class_rules():
    # class_weights alone weigh the labels 0, 1, ... skipping the background (here 0): label 2
    mask = np.zeros((6, 8), np.uint8)
    mask[0:2, 0:3], mask[3:6, 4:8] = 1, 2
    assert set(object_boxes(mask, runs=2, class_weights=(0.0, 1.0))) == {((3, 4), (6, 8), 2)}
    # classes given without a background: 0 is one of them, so the background is -1 and 0 an object
    assert set(object_boxes(mask, runs=2, classes=(0,))) == {((0, 0), (6, 8), 0)}
    # a class with no blob that passes the threshold drops out: the other is drawn
    assert set(object_boxes(mask, runs=2, threshold=(3, 3))) == {((3, 4), (6, 8), 2)}


def test_random_object_bbox_volumes_and_types():
    volume = np.zeros((3, 5, 6), np.int16)
    volume[1:3, 1:2, 2:5] = 4
    assert set(object_boxes(volume, runs=1)) == {((1, 1, 2), (3, 2, 5), 4)}
    with pytest.raises(RuntimeError, match="random_object_bbox"):
        object_boxes(volume.astype(np.float32), runs=1)
