"""Box and coordinate operators beyond their coverage cases: boxes follow the image through flip and
paste (boxes measured on the transformed image with numpy), per-sample flips, SSD encoding without
offsets against the written-out matching, and errors for boxes of the wrong shape."""
from __future__ import annotations

import numpy as np
import pytest
from cases_detection import ANCHORS, random_boxes, ssd_encode, xywh_to_ltrb
from conftest import gpu_or_emulated

from penstock import fn, pipeline_def, types



def _returning(value):
    """A source without parameters (one with a parameter gets the batch's index, as in DALI)."""
    return lambda: value

def run(build, feeds, batch_size=None, device_id=None):
    batch_size = batch_size or len(feeds[0])

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=device_id, seed=3)
    def pipe():
        nodes = [fn.external_source(source=_returning(feed), batch=True) for feed in feeds]
        return build(*nodes)
    built = pipe()
    built.build()
    outputs = built.run()
    built.close()
    if not isinstance(outputs, (list, tuple)):
        outputs = (outputs,)
    return [[np.asarray(batch.at(i).cpu() if hasattr(batch.at(i), "cpu") else batch.at(i)) for i in range(batch_size)]
            for batch in outputs]


def measured_box(mask: np.ndarray) -> np.ndarray:
    """The relative ltrb box of a mask's pixels (pixel edges, not centres)."""
    rows, columns = np.nonzero(mask)
    height, width = mask.shape
    return np.array([columns.min() / width, rows.min() / height, (columns.max() + 1) / width,
                     (rows.max() + 1) / height])


def test_flipped_boxes_are_where_the_flipped_image_has_its_objects():
    height, width = 40, 60
    mask = np.zeros((height, width), np.uint8)
    mask[5:17, 8:31] = 1
    box = measured_box(mask).astype(np.float32)
    def flipped(horizontal, vertical):
        [[result]] = run(lambda b: fn.bb_flip(b, ltrb=True, horizontal=horizontal, vertical=vertical), [[box[None]]])
        return result
    horizontal, vertical, both = flipped(1, 0), flipped(0, 1), flipped(1, 1)
    np.testing.assert_allclose(horizontal[0], measured_box(mask[:, ::-1]), atol=1e-6)
    np.testing.assert_allclose(vertical[0], measured_box(mask[::-1, :]), atol=1e-6)
    np.testing.assert_allclose(both[0], measured_box(mask[::-1, ::-1]), atol=1e-6)


def test_flip_is_per_sample():
    boxes = [random_boxes(3, seed) for seed in range(4)]
    flags = [np.array(i % 2, np.int32) for i in range(4)]
    [flipped] = run(lambda b, f: fn.bb_flip(b, horizontal=f), [boxes, flags])
    for box, flag, out in zip(boxes, flags, flipped):
        expected = box.copy()
        if flag:
            expected[:, 0] = 1 - box[:, 0] - box[:, 2]
        np.testing.assert_allclose(out, expected, atol=1e-7)


def test_pasted_boxes_are_where_paste_puts_the_objects():
    height, width, ratio = 30, 40, 2.0  # the pasted image lands on whole pixels
    mask = np.zeros((height, width), np.uint8)
    mask[3:21, 12:29] = 1
    box = measured_box(mask).astype(np.float32)
    canvas = np.zeros((int(height * ratio), int(width * ratio)), np.uint8)
    top, left = round(0.3 * (canvas.shape[0] - height)), round(0.8 * (canvas.shape[1] - width))
    canvas[top:top + height, left:left + width] = mask
    [[pasted]] = run(lambda b: fn.bbox_paste(b, ratio=ratio, paste_x=0.8, paste_y=0.3, ltrb=True), [[box[None]]])
    np.testing.assert_allclose(pasted[0], measured_box(canvas), atol=1e-6)


def test_box_encoder_without_offsets_gives_centres_and_sizes():
    boxes = [xywh_to_ltrb(random_boxes(count, seed)) for seed, count in enumerate([4, 0, 2])]
    labels = [np.arange(1, len(b) + 1, dtype=np.int32) for b in boxes]
    encoded, encoded_labels = run(lambda b, l: fn.box_encoder(b, l, anchors=ANCHORS.tolist(), criteria=0.3),
                                  [boxes, labels])
    for box, label, got, got_labels in zip(boxes, labels, encoded, encoded_labels):
        want, want_labels = ssd_encode(box, label, ANCHORS, criteria=0.3)
        np.testing.assert_allclose(got, want, atol=1e-6)
        np.testing.assert_array_equal(got_labels, want_labels)
    assert (encoded_labels[1] == 0).all()  # no boxes: every anchor is background


@pytest.mark.parametrize("counts, labels_shape", [([4, 0, 1, 3], (-1, 1)), ([2, 2, 2], (-1,)), ([0, 0], (-1, 1)),
                                                  ([1, 1], (-1,))])
def test_the_gpu_encodes_ragged_boxes_moved_with_gpu_as_the_cpu_does(counts, labels_shape):
    """.gpu() keeps ragged boxes and labels packed in one buffer: the GPU form pads them from it
    (labels [N, 1] as readers.coco gives them, or [N]; single boxes as [4])."""
    boxes = [xywh_to_ltrb(random_boxes(count, seed)) for seed, count in enumerate(counts)]
    labels = [np.arange(1, len(b) + 1, dtype=np.int32).reshape(labels_shape) for b in boxes]
    if counts == [1, 1]:
        boxes = [box.reshape(4) for box in boxes]

    def encode(b, l, device):
        if device == "gpu":
            b, l = b.gpu(), l.gpu()
        return fn.box_encoder(b, l, anchors=ANCHORS.tolist(), criteria=0.4, offset=True, stds=[0.1, 0.1, 0.2, 0.2])
    with gpu_or_emulated():
        gpu = run(lambda b, l: encode(b, l, "gpu"), [boxes, labels], device_id=0)
    cpu = run(lambda b, l: encode(b, l, "cpu"), [boxes, labels])
    for gpu_output, cpu_output in zip(gpu, cpu):
        for gpu_sample, cpu_sample in zip(gpu_output, cpu_output):
            np.testing.assert_allclose(gpu_sample, cpu_sample, atol=1e-5)


@pytest.mark.parametrize("offset", [False, True])
def test_the_gpu_encoder_walks_many_boxes_and_anchors_and_breaks_ties_as_the_cpu(offset):
    """More boxes than one GPU program holds (triton_boxes.BOXES) and more anchors than one block,
    duplicated boxes and anchors (ties go to the later one) and an anchor of zero area."""
    from penstock.kernels import triton_boxes
    anchors = np.concatenate([random_boxes(3 * triton_boxes.ANCHORS // 2, 7, ltrb=True),
                              np.array([[0.2, 0.2, 0.2, 0.6]], np.float32)])
    anchors = np.concatenate([anchors, anchors[:5]])  # repeated anchors tie
    many = xywh_to_ltrb(random_boxes(triton_boxes.BOXES + 9, 11))
    many[-3:] = many[:3]  # repeated boxes tie
    boxes = [many, xywh_to_ltrb(random_boxes(2, 12)), np.zeros((0, 4), np.float32)]
    labels = [np.arange(1, len(b) + 1, dtype=np.int64) for b in boxes]

    def encode(b, l, device):
        if device == "gpu":
            b, l = b.gpu(), l.gpu()
        return fn.box_encoder(b, l, anchors=anchors.reshape(-1).tolist(), criteria=0.2, offset=offset,
                              stds=[0.1, 0.1, 0.2, 0.2], scale=2.0)
    with gpu_or_emulated():
        gpu = run(lambda b, l: encode(b, l, "gpu"), [boxes, labels], device_id=0)
    cpu = run(lambda b, l: encode(b, l, "cpu"), [boxes, labels])
    for sample in range(len(boxes)):
        np.testing.assert_allclose(gpu[0][sample], cpu[0][sample], atol=1e-5, rtol=1e-6)
        np.testing.assert_array_equal(gpu[1][sample], cpu[1][sample])
    assert (gpu[1][0] > 0).sum() > triton_boxes.BOXES  # every box claimed an anchor
    want, want_labels = ssd_encode(many, labels[0], anchors, criteria=0.2)
    if not offset:
        np.testing.assert_allclose(gpu[0][0], want, atol=1e-6)
    np.testing.assert_array_equal(gpu[1][0], want_labels)


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("degenerate", [False, True])
def test_the_c_encoder_matches_the_numpy_encoder_to_the_bit(offset, degenerate):
    """The CPU form's C path (runtime.native.box_encode) and its numpy path: the same float32
    operations, so the same IoUs, ties (repeated boxes and anchors go to the later one) and
    threshold; the offsets' logarithm may differ by a unit in the last place."""
    from penstock import registry
    from penstock.operators.detection import box_encoder
    from penstock.runtime import native
    encode = native.box_encode()
    if encode is None:
        pytest.skip(f"the C helper cannot be built here: {native.problem('box_encoder')}")
    anchors = random_boxes(700, 7, ltrb=True)
    anchors = np.concatenate([anchors, anchors[:5]])  # repeated anchors tie
    if degenerate:  # anchors of zero area: a box without area then has a union of 0 with them
        anchors = np.concatenate([anchors, np.array([[0.2, 0.2, 0.2, 0.6], [0.5, 0.5, 0.5, 0.5]], np.float32)])
    table = box_encoder.AnchorTable(anchors)
    assert table.all_positive is not degenerate
    arguments = registry.get_schema("box_encoder").validate(
        {"anchors": anchors.reshape(-1).tolist(), "criteria": 0.3, "offset": offset, "scale": 2.0,
         "means": [0.01, -0.02, 0.0, 0.1], "stds": [0.1, 0.1, 0.2, 0.2]})[0]
    for seed, count in enumerate([1, 3, 40, 0]):
        boxes = xywh_to_ltrb(random_boxes(count, 30 + seed))
        if count > 3:
            boxes[-3:] = boxes[:3]  # repeated boxes tie
            boxes[5] = [0.5, 0.5, 0.5, 0.5]  # a box without area
        labels = np.arange(1, count + 1, dtype=np.int64)
        want, want_labels = box_encoder.encode_sample(boxes, labels, table, arguments)
        got, got_labels = box_encoder.encode_sample_native(encode, boxes, labels, table, arguments)
        np.testing.assert_array_equal(got_labels, want_labels)
        assert got_labels.dtype == want_labels.dtype
        if offset:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(got[:, :2], want[:, :2])
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("arguments, dimensions", [
    ({}, 2), ({"threshold_type": "overlap"}, 2), ({"all_boxes_above_threshold": False}, 2),
    ({"bbox_prune_threshold": 0.4}, 2), ({"bbox_layout": "xyzXYZ"}, 3),
    ({"bbox_layout": "xyzXYZ", "threshold_type": "overlap", "bbox_prune_threshold": 0.0}, 3)])
def test_the_c_window_scores_match_the_numpy_scores(arguments, dimensions):
    """random_bbox_crop's windows scored in C (runtime.native.score_windows) and in numpy: the same
    float64 operations, so the same scores and kept boxes, boxes without volume and windows that
    miss every box included."""
    from penstock import registry
    from penstock.operators.detection import random_crops
    checked = registry.get_schema("random_bbox_crop").validate(dict(arguments, num_attempts=50))[0]
    cropper = random_crops.BoxCropper(checked, dimensions)
    if cropper.native is None:
        pytest.skip("the C helper cannot be built here")
    rng = np.random.default_rng(5)
    for count in (1, 4, 23):
        low = rng.uniform(0, 0.7, (count, dimensions))
        high = np.minimum(low + rng.uniform(0, 0.5, (count, dimensions)), 1.0)
        high[0] = low[0]  # a box without volume
        boxes = random_crops._CropBoxes(low, high)
        anchors, extents, _ = cropper.windows(rng, 250)
        want = random_crops.BoxCropper.evaluate(_numpy_only(cropper), boxes, anchors, extents)
        got = cropper.evaluate(boxes, anchors, extents)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def _numpy_only(cropper):
    import copy
    numpy_cropper = copy.copy(cropper)
    numpy_cropper.native = None
    return numpy_cropper


def test_the_gpu_names_the_sample_whose_boxes_and_labels_differ_in_number():
    boxes = [random_boxes(3, 0), random_boxes(2, 1)]
    labels = [np.ones(3, np.int32), np.ones(1, np.int32)]
    with gpu_or_emulated(), pytest.raises(Exception, match=r"box_encoder: 2 boxes with 1 labels \(sample 1\)"):
        run(lambda b, l: fn.box_encoder(b.gpu(), l.gpu(), anchors=ANCHORS.tolist()), [boxes, labels], device_id=0)


@pytest.mark.parametrize("build, message", [
    (lambda b: fn.bb_flip(fn.cast(b, dtype=types.FLOAT64)), "bb_flip: expected float32 boxes, got float64"),
    (lambda b: fn.coord_transform(b, M=[1, 2, 3]), "coord_transform: M of 3 values"),
])
def test_boxes_of_the_wrong_shape_say_so(build, message):
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace("]", r"\]")):
        run(build, [[random_boxes(2, 0)]])


@pytest.mark.parametrize("arguments, message", [
    ({"anchors": [0.0, 0.0, 1.0]}, "argument 'anchors': 3 values"),
    ({"anchors": [0.0, 0.0, 1.0, 1.0], "criteria": 1.5}, "criteria"),
    ({"anchors": [0.0, 0.0, 1.0, 1.0], "stds": [1.0, 0.0, 1.0, 1.0]}, "standard deviation of 0"),
])
def test_box_encoder_arguments_are_checked_at_the_call(arguments, message):
    with pytest.raises(ValueError, match=message):
        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            boxes = fn.external_source(source=lambda: [random_boxes(1, 0)], batch=True)
            labels = fn.external_source(source=lambda: [np.ones(1, np.int32)], batch=True)
            return fn.box_encoder(boxes, labels, **arguments)
        pipe()


def crop_draws(boxes, labels=None, runs=1, num_threads=1, **arguments):
    """Every sample's outputs over ``runs`` batches of the same boxes."""
    feeds = [boxes] + ([labels] if labels is not None else [])

    @pipeline_def(batch_size=len(boxes), num_threads=num_threads, device_id=None, seed=21)
    def pipe():
        nodes = [fn.external_source(source=_returning(feed), batch=True) for feed in feeds]
        return fn.random_bbox_crop(*nodes, **arguments)
    built = pipe()
    built.build()
    draws = []
    for _ in range(runs):
        outputs = built.run()
        draws.extend(zip(*[[np.asarray(batch.at(i)) for i in range(len(boxes))] for batch in outputs]))
    built.close()
    return draws


def _iou(low, high, anchor, extent):
    inter = np.prod(np.clip(np.minimum(high, anchor + extent) - np.maximum(low, anchor), 0, None), axis=1)
    return inter / (np.prod(extent) + np.prod(high - low, axis=1) - inter), inter


def sizable_boxes(count: int, seed: int) -> np.ndarray:
    """ltrb boxes with sides of 0.3 to 0.7: a window of the tests' scaling can reach their thresholds
    (for boxes too small to, random_bbox_crop draws forever unless total_num_attempts, as DALI's)."""
    rng = np.random.default_rng(seed)
    sides = rng.uniform(0.3, 0.7, (count, 2))
    low = rng.uniform(0, 1 - sides)
    return np.concatenate([low, low + sides], 1).astype(np.float32)


def test_every_crop_keeps_its_promises_over_thousands_of_draws():
    boxes = [sizable_boxes(count, seed) for seed, count in enumerate([1, 2, 3, 4, 6] * 40)]
    labels = [np.arange(10, 10 + len(b), dtype=np.int32) for b in boxes]
    draws = crop_draws(boxes, labels, runs=10, thresholds=[0.3], allow_no_crop=False, aspect_ratio=[0.5, 2.0],
                       scaling=[0.3, 1.0], num_attempts=20, output_bbox_indices=True, all_boxes_above_threshold=False)
    assert len(draws) == 2000
    for (anchor, extent, cropped, kept_labels, indices), original, sample_labels in zip(draws, boxes * 10, labels * 10):
        low, high = original[:, :2], original[:, 2:]
        assert (0.3 - 1e-6 <= extent).all() and (extent <= 1 + 1e-6).all() and 0.5 - 1e-5 <= extent[0] / extent[1] <= 2 + 1e-5
        assert (anchor >= -1e-6).all() and (anchor + extent <= 1 + 1e-6).all()
        iou, _ = _iou(low, high, anchor, extent)
        assert iou.max() >= 0.3 - 1e-6  # some box reaches the threshold
        centres = (low + high) / 2
        inside = np.flatnonzero(np.all((centres >= anchor) & (centres < anchor + extent), axis=1))
        assert indices.tolist() == inside.tolist() and len(inside) > 0
        np.testing.assert_array_equal(kept_labels, sample_labels[inside])
        expected = np.concatenate([np.clip((np.maximum(low[inside], anchor) - anchor) / extent, 0, 1),
                                   np.clip((np.minimum(high[inside], anchor + extent) - anchor) / extent, 0, 1)], 1)
        np.testing.assert_allclose(cropped, expected, atol=1e-5)


def test_with_all_boxes_above_threshold_every_box_reaches_it():
    boxes = [sizable_boxes(count, seed) for seed, count in enumerate([1, 2] * 50)]
    draws = crop_draws(boxes, runs=4, thresholds=[0.2], allow_no_crop=False, aspect_ratio=[0.5, 2.0],
                       scaling=[0.3, 1.0], num_attempts=20, total_num_attempts=2000)
    reached = 0
    for (anchor, extent, _), original in zip(draws, boxes * 4):
        iou, _ = _iou(original[:, :2], original[:, 2:], anchor, extent)
        reached += iou.min() >= 0.2 - 1e-6
    assert reached >= 0.95 * len(draws)  # the rest: no window within total_num_attempts, the best one instead


def test_overlap_threshold_and_overlap_pruning():
    boxes = [sizable_boxes(count, seed) for seed, count in enumerate([2, 3, 5] * 30)]
    draws = crop_draws(boxes, runs=5, thresholds=[0.5], threshold_type="overlap", all_boxes_above_threshold=False,
                       allow_no_crop=False, scaling=[0.3, 0.8], aspect_ratio=[0.5, 2.0], num_attempts=10,
                       bbox_prune_threshold=0.4, output_bbox_indices=True)
    for (anchor, extent, _, indices), original in zip(draws, boxes * 5):
        low, high = original[:, :2], original[:, 2:]
        _, inter = _iou(low, high, anchor, extent)
        overlap = inter / np.prod(high - low, axis=1)
        assert overlap.max() >= 0.5 - 1e-6  # some box is at least half inside
        assert indices.tolist() == np.flatnonzero((inter > 0) & (overlap >= 0.4 - 1e-7)).tolist()


def test_an_impossible_threshold_stops_at_total_num_attempts_with_the_best_window():
    boxes = [np.array([[0.1, 0.1, 0.2, 0.2], [0.7, 0.7, 0.9, 0.9]], np.float32)] * 8
    draws = crop_draws(boxes, thresholds=[0.99], allow_no_crop=False, scaling=[0.2, 1.0], aspect_ratio=[0.5, 2.0],
                       num_attempts=4, total_num_attempts=12)
    assert all(extent.min() > 0 for _, extent, _ in draws)  # a window, not the whole image


def test_draws_are_the_same_whatever_the_thread_count():
    boxes = [xywh_to_ltrb(random_boxes(count, seed)) for seed, count in enumerate([2, 3, 1, 4] * 4)]
    arguments = dict(thresholds=[0.1, 0.5, 0.9], scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], num_attempts=5, runs=3)
    one, three = crop_draws(boxes, **arguments), crop_draws(boxes, num_threads=3, **arguments)
    for a, b in zip(one, three):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("arguments, message", [
    ({"thresholds": [1.5]}, "argument 'thresholds'"),
    ({"scaling": [0.8, 0.3]}, "argument 'scaling'"),
    ({"crop_shape": [100, 100]}, "needs 'input_shape'"),
    ({"bbox_layout": "xyAB"}, "bbox_layout 'xyAB'"),
])
def test_random_bbox_crop_arguments_say_what_is_wrong(arguments, message):
    with pytest.raises(Exception, match=message):
        crop_draws([random_boxes(2, 0)], **arguments)


def test_boxes_outside_the_image_are_refused():
    with pytest.raises(Exception, match=r"box 1 .* is out of bounds \[0, 1\]"):
        crop_draws([np.array([[0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 1.4, 0.9]], np.float32)])


@pytest.mark.parametrize("angle", [30.0, -45.0, 90.0, 135.0, 180.0])
def test_rotated_boxes_hold_what_rotate_turns(angle):
    height, width = 60, 90
    mask = np.zeros((height, width, 1), np.uint8)
    mask[10:30, 20:50] = 255
    box = np.array([[20 / width, 10 / height, 50 / width, 30 / height]], np.float32)
    turned, [boxes] = run(lambda m, b: (fn.rotate(m, angle=angle, interp_type=types.INTERP_NN),
                                        fn.bbox_rotate(b, angle=angle, input_shape=fn.shapes(m), shape_layout="HWC")),
                          [[mask], [box]])
    image = turned[0][:, :, 0]
    rows, columns = np.nonzero(image)
    out_height, out_width = image.shape
    pixels = boxes[0] * [out_width, out_height, out_width, out_height]
    # the turned rectangle's pixels (nearest sampling) lie within a pixel of the turned box's edges
    np.testing.assert_allclose(pixels, [columns.min(), rows.min(), columns.max() + 1, rows.max() + 1], atol=1.0)


def test_boxes_turned_off_the_canvas_are_dropped_with_their_labels():
    boxes = [np.array([[0.0, 0.0, 0.1, 0.1], [0.4, 0.4, 0.6, 0.6]], np.float32)]
    labels = [np.array([5, 6], np.int32)]
    kept, kept_labels = run(lambda b, l: fn.bbox_rotate(b, l, angle=45.0, input_shape=[100, 100], keep_size=True,
                                                        remove_threshold=0.5), [boxes, labels])
    assert kept_labels[0].tolist() == [6] and kept[0].shape == (1, 4)  # the corner box leaves the canvas


def test_fixed_mode_keeps_the_boxes_size_on_a_quarter_turn():
    box = [np.array([[0.1, 0.2, 0.5, 0.4]], np.float32)]
    [fixed] = run(lambda b: fn.bbox_rotate(b, angle=90.0, input_shape=[50, 80], mode="fixed"), [box])
    [expanded] = run(lambda b: fn.bbox_rotate(b, angle=90.0, input_shape=[50, 80]), [box])
    np.testing.assert_allclose(fixed[0], expanded[0], atol=1e-6)  # a quarter turn needs no shrinking


def test_ssd_random_crop_crops_the_image_to_the_window_its_boxes_are_in():
    height, width = 90, 120
    ys, xs = np.mgrid[0:height, 0:width]
    image = np.stack([xs, ys, np.zeros_like(xs)], axis=2).astype(np.uint8)  # each pixel holds its coordinates
    boxes = [sizable_boxes(count, seed) for seed, count in enumerate([1, 2, 3] * 10)]
    labels = [np.arange(len(b), dtype=np.int32) + 1 for b in boxes]
    crops, cropped, kept = run(lambda i, b, l: fn.ssd_random_crop(i, b, l, num_attempts=10),
                               [[image] * len(boxes), boxes, labels])
    for crop, original, new_boxes, new_labels in zip(crops, boxes, cropped, kept):
        x0, y0 = int(crop[0, 0, 0]), int(crop[0, 0, 1])
        h, w = crop.shape[:2]
        np.testing.assert_array_equal(crop, image[y0:y0 + h, x0:x0 + w])  # a window of the image
        anchor, extent = np.array([x0 / width, y0 / height]), np.array([w / width, h / height])
        centres = (original[:, :2] + original[:, 2:]) / 2
        inside = np.all((centres >= anchor - 0.01) & (centres < anchor + extent + 0.01), axis=1)
        assert len(new_labels) >= 1 and set(new_labels.tolist()) <= set((np.flatnonzero(inside) + 1).tolist())
        expected = np.concatenate([np.clip((np.maximum(original[new_labels - 1, :2], anchor) - anchor) / extent, 0, 1),
                                   np.clip((np.minimum(original[new_labels - 1, 2:], anchor + extent) - anchor) / extent,
                                           0, 1)], 1)
        np.testing.assert_allclose(new_boxes, expected, atol=0.02)  # the window rounded to whole pixels


def test_bbox_paste_has_dalis_ops_name():
    from penstock import ops
    assert ops.BBoxPaste.__name__ == "BBoxPaste" and not hasattr(ops, "BboxPaste")


def test_a_crop_search_that_runs_out_of_attempts_says_so_on_stderr(capfd):
    """As DALI: one line per sample with boxes whose search ends without a window meeting the
    thresholds, naming the attempts and the best metric found (min IoU over the boxes: 0 here)."""
    rng = np.random.default_rng(0)
    boxes = [rng.uniform(0, 1, size=(n, 4)).astype(np.float32) for n in (10, 12, 0)]
    run(lambda b: tuple(fn.random_bbox_crop(b, thresholds=[1.0], bbox_layout="xyXY", allow_no_crop=False,
                                            total_num_attempts=10)), [boxes])
    lines = [line for line in capfd.readouterr().err.splitlines() if "random_bbox_crop" in line]
    assert lines and all(line.endswith("Could not find a valid cropping window to satisfy the specified requirements "
                                       "(attempted 10 times). Using the best cropping window so far (best_metric=0)")
                         for line in lines)
