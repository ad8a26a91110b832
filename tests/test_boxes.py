"""Box and coordinate operators beyond their coverage cases: boxes follow the image through flip and
paste (boxes measured on the transformed image with numpy), per-sample flips, SSD encoding without
offsets against the written-out matching, and errors for boxes of the wrong shape."""
from __future__ import annotations

import numpy as np
import pytest
from cases_detection import ANCHORS, random_boxes, ssd_encode, xywh_to_ltrb

from penstock import fn, pipeline_def


def run(build, feeds, batch_size=None):
    batch_size = batch_size or len(feeds[0])

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        nodes = [fn.external_source(source=lambda feed=feed: feed, batch=True) for feed in feeds]
        return build(*nodes)
    built = pipe()
    built.build()
    outputs = built.run()
    built.close()
    if not isinstance(outputs, (list, tuple)):
        outputs = (outputs,)
    return [[np.asarray(batch.at(i)) for i in range(batch_size)] for batch in outputs]


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


@pytest.mark.parametrize("build, message", [
    (lambda b: fn.bb_flip(fn.reshape(b, shape=[-1, 2])), "bb_flip: takes boxes as a [N, 4] array"),
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
