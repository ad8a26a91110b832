"""Cases of the detection operators for test_operator_coverage: readers.coco against pycocotools'
COCO API on a small generated set (benchmarks/make_coco.py), made once per test session."""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile

import numpy as np
from operator_cases import Case, on_device

from penstock import fn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))


@functools.lru_cache(maxsize=1)
def coco_set() -> tuple[str, str]:
    from make_coco import make_coco
    root = tempfile.mkdtemp(prefix="penstock-coco-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # the test run's, not left in the temp folder
    return os.path.join(root, "images"), make_coco(root, 8, seed=11, sizes=(48, 96))


def _coco_reference(samples, outputs):
    import warnings

    import pytest
    COCO = pytest.importorskip("pycocotools.coco").COCO  # the test extra installs it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coco = COCO(coco_set()[1])
    labels_of = {c["id"]: position for position, c in enumerate(coco.dataset["categories"], 1)}
    _, boxes, labels, ids = outputs
    assert [int(i[0]) for i in ids] == sorted(coco.getImgIds())[:len(ids)]
    for image_id, got_boxes, got_labels in zip(ids, boxes, labels):
        expected = [a for a in coco.loadAnns(coco.getAnnIds(imgIds=int(image_id[0]))) if min(a["bbox"][2:]) >= 0.1]
        np.testing.assert_allclose(got_boxes, np.array([a["bbox"] for a in expected]).reshape(-1, 4), rtol=1e-6)
        assert got_labels.tolist() == [labels_of[a["category_id"]] for a in expected]


def random_boxes(count: int, seed: int, ltrb: bool = False) -> np.ndarray:
    """``count`` boxes inside the unit square, float32 [count, 4]."""
    rng = np.random.default_rng(seed)
    corners = np.sort(rng.uniform(0, 1, (count, 2, 2)), axis=1)  # [box, (min, max), (x, y)]
    lt, rb = corners[:, 0], corners[:, 1]
    return np.concatenate([lt, rb if ltrb else rb - lt], axis=1).astype(np.float32)


BOX_FEED = [random_boxes(count, seed) for seed, count in enumerate([3, 0, 5, 1, 4])]
ANCHORS = np.concatenate([random_boxes(12, 99, ltrb=True),
                          np.array([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], np.float32)]).reshape(-1)


def xywh_to_ltrb(boxes):
    return np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)


def ssd_encode(boxes, labels, anchors, criteria=0.5, offset=False, means=(0, 0, 0, 0), stds=(1, 1, 1, 1)):
    """SSD's matching written out box by box and anchor by anchor (MLPerf's reference rule: each box
    claims its best anchor, each anchor then takes the box it overlaps most when above criteria;
    ties to the later one)."""
    anchors = np.asarray(anchors, np.float64).reshape(-1, 4)

    def iou(a, b):
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
        return w * h / union if union > 0 else 0.0
    table = [[iou(box, anchor) for anchor in anchors] for box in boxes]
    for row in table:
        best = max(range(len(row)), key=lambda k: (row[k], k))
        row[best] = 2.0
    out_boxes, out_labels = [], []
    for k, anchor in enumerate(anchors):
        a_centre, a_size = (anchor[:2] + anchor[2:]) / 2, anchor[2:] - anchor[:2]
        best = max(range(len(boxes)), key=lambda b: (table[b][k], b)) if len(boxes) else None
        if best is not None and table[best][k] > criteria:
            box = np.asarray(boxes[best], np.float64)
            centre, size = (box[:2] + box[2:]) / 2, box[2:] - box[:2]
            if offset:
                encoded = np.concatenate([(centre - a_centre) / a_size, np.log(size / a_size)])
                out_boxes.append((encoded - np.asarray(means)) / np.asarray(stds))
            else:
                out_boxes.append(np.concatenate([centre, size]))
            out_labels.append(labels[best])
        else:
            out_boxes.append(np.zeros(4) if offset else np.concatenate([a_centre, a_size]))
            out_labels.append(0)
    return np.array(out_boxes, np.float32), np.array(out_labels, np.int32)


MASKS = [np.pad(np.eye(6, dtype=np.int32) * (k + 1), ((0, 1), (1, 0)))[:, :, None] for k in range(4)] + \
    [np.zeros((5, 4, 1), np.int32)]


def _check_roi_windows(samples, outputs):
    """Windows of 3 x 3 x 1 that hold the region [1, 3) x [2, 3) x [0, 1), inside each mask."""
    for mask, start in zip(samples, outputs):
        assert start.dtype == np.int64 and start.shape == (3,)
        end = start + (3, 3, 1)
        assert (start <= (1, 2, 0)).all() and (end >= (3, 3, 1)).all() and (start >= 0).all()
        assert (end <= mask.shape).all()


def _check_mask_pixels(samples, outputs):
    """A foreground pixel where there is one, else a pixel of the mask."""
    for mask, pixel in zip(samples, outputs):
        assert pixel.dtype == np.int64 and pixel.shape == (3,) and (pixel < mask.shape).all()
        if mask.any():
            assert mask[tuple(pixel)] > 0


def _check_object_boxes(samples, outputs):
    """The box of the label's pixels (each mask's diagonal is one 8-connected blob), or the whole mask."""
    for mask, box in zip(samples, outputs):
        if mask.any():
            rows, columns, _ = np.nonzero(mask)
            expected = [rows.min(), columns.min(), 0, rows.max() + 1, columns.max() + 1, 1]
        else:
            expected = [0, 0, 0, *mask.shape]
        np.testing.assert_array_equal(box, expected)


SSD_IMAGES = [np.full((30 + 5 * k, 40, 3), k, np.uint8) for k in range(5)]


def _ssd_crop_build(node, device):
    images = fn.external_source(source=lambda: SSD_IMAGES, batch=True, layout="HWC")
    boxes = fn.external_source(source=lambda: [xywh_to_ltrb(b) if len(b) else np.array([[0.2, 0.2, 0.8, 0.8]],
                                                                                     np.float32)
                                               for b in BOX_FEED], batch=True)
    labels = fn.external_source(source=lambda: [np.arange(max(len(b), 1), dtype=np.int32) for b in BOX_FEED],
                                batch=True)
    return fn.ssd_random_crop(images, boxes, labels, num_attempts=10)


def _check_ssd_crops(outputs):
    """Each crop a window of its image (every pixel the image's value), its boxes inside [0, 1]
    and as many as its labels."""
    for k, (crop, boxes, labels) in enumerate(zip(*outputs)):
        assert crop.ndim == 3 and (crop == k).all() and crop.shape[0] <= SSD_IMAGES[k].shape[0]
        assert len(boxes) == len(labels) >= 1 and ((boxes >= 0) & (boxes <= 1)).all()


def _select_case():
    polygons = [np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10], [1, 10, 13]], np.int32)] * 3
    vertices = [np.arange(26, dtype=np.float32).reshape(13, 2) + k for k in range(3)]
    chosen = [np.array([1], np.int32), np.array([2, 0], np.int32), np.array([0, 1, 2], np.int32)]

    def build(node, device):
        from penstock import fn as f
        # a source with a parameter gets the batch's index (as in DALI): each one here takes none
        ids, poly, vert = (f.external_source(source=(lambda v: lambda: v)(v), batch=True)
                           for v in (chosen, polygons, vertices))
        return f.segmentation.select_masks(ids, poly, vert, reindex_masks=True)

    def reference(samples, outputs):  # written out: each chosen mask's polygons, in the order asked
        for ids, poly, vert, got_polygons, got_vertices in zip(chosen, polygons, vertices, *outputs):
            rows, pieces, start = [], [], 0
            for new_id, mask_id in enumerate(ids):
                for owner, first, end in poly:
                    if owner == mask_id:
                        rows.append([new_id, start, start + end - first])
                        pieces.append(vert[first:end])
                        start += end - first
            np.testing.assert_array_equal(got_polygons, np.array(rows).reshape(-1, 3))
            np.testing.assert_array_equal(got_vertices, np.concatenate(pieces))
    return Case(lambda: [], build, reference)


def _check_crops(samples, outputs):
    """The boxes whose centres are in the window, clipped to it and made relative to it (numpy)."""
    for boxes, anchor, extent, cropped in zip(samples, *outputs):
        centres = (boxes[:, :2] + boxes[:, 2:]) / 2
        inside = np.all((centres >= anchor) & (centres < anchor + extent), axis=1)
        low = np.clip((np.maximum(boxes[inside, :2], anchor) - anchor) / extent, 0, 1)
        high = np.clip((np.minimum(boxes[inside, 2:], anchor + extent) - anchor) / extent, 0, 1)
        np.testing.assert_allclose(cropped, np.concatenate([low, high], 1).reshape(-1, 4), atol=1e-5)


def _flip_reference(samples):
    out = []
    for boxes in samples:
        flipped = boxes.copy()
        flipped[:, 0] = 1 - boxes[:, 0] - boxes[:, 2]
        out.append(flipped)
    return out


def _encode_case(offset):
    labels = [np.arange(1, len(b) + 1, dtype=np.int32) for b in BOX_FEED]

    def build(node, device):
        from penstock import fn as f
        boxes = f.coord_transform(node, MT=[1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0])
        label_node = f.external_source(source=lambda: labels, batch=True)
        encoded = f.box_encoder(boxes.gpu() if device == "gpu" else boxes, label_node.gpu() if device == "gpu" else
                                label_node, anchors=ANCHORS.tolist(), offset=offset, criteria=0.4,
                                means=[0.1, 0.0, 0.2, 0.0] if offset else [0, 0, 0, 0],
                                stds=[0.1, 0.1, 0.2, 0.2] if offset else [1, 1, 1, 1])
        return encoded

    def reference(samples, outputs):
        for boxes, sample_labels, got_boxes, got_labels in zip(samples, labels, *outputs):
            want_boxes, want_labels = ssd_encode(xywh_to_ltrb(boxes), sample_labels, ANCHORS, 0.4, offset,
                                                 (0.1, 0.0, 0.2, 0.0) if offset else (0, 0, 0, 0),
                                                 (0.1, 0.1, 0.2, 0.2) if offset else (1, 1, 1, 1))
            np.testing.assert_allclose(got_boxes, want_boxes, atol=1e-5)
            np.testing.assert_array_equal(got_labels, want_labels)
    return Case(lambda: BOX_FEED, build, reference, max_abs=1e-5)


CASES = {
    "bb_flip": Case(lambda: BOX_FEED, lambda node, device: fn.bb_flip(on_device(node, device)),
                    lambda samples, outputs: _flip_reference(samples), max_abs=1e-6),
    "bbox_paste": Case(lambda: BOX_FEED, lambda node, device: fn.bbox_paste(on_device(node, device), ratio=4.0,
                                                                            paste_x=0.25, paste_y=1.0),
                       lambda samples, outputs: [np.concatenate([b[:, :2] / 4 + [0.25 * 0.75, 0.75], b[:, 2:] / 4], 1)
                                                 for b in samples], max_abs=1e-6),
    "coord_flip": Case(lambda: BOX_FEED, lambda node, device: fn.coord_flip(
        fn.reshape(on_device(node, device), shape=[-1, 2]), flip_x=1, flip_y=1, center_y=0.25),
        lambda samples, outputs: [np.stack([1 - b.reshape(-1, 2)[:, 0], 0.5 - b.reshape(-1, 2)[:, 1]], 1)
                                  for b in samples], max_abs=1e-6),
    "coord_transform": Case(lambda: BOX_FEED, lambda node, device: fn.coord_transform(
        fn.reshape(on_device(node, device), shape=[-1, 2]), M=[0.5, 2.0, -1.0, 1.0], T=[0.25, -3.0]),
        lambda samples, outputs: [b.reshape(-1, 2) @ np.array([[0.5, 2.0], [-1.0, 1.0]]).T + [0.25, -3.0]
                                  for b in samples], max_abs=1e-5),
    "box_encoder": _encode_case(offset=True),
    "roi_random_crop": Case(lambda: MASKS, lambda node, device: fn.roi_random_crop(
        node, crop_shape=(3, 3, 1), roi_start=(1, 2, 0), roi_end=(3, 3, 1)),
        lambda samples, outputs: _check_roi_windows(samples, outputs)),
    "segmentation.random_mask_pixel": Case(lambda: MASKS, lambda node, device: fn.segmentation.random_mask_pixel(
        node, foreground=1), lambda samples, outputs: _check_mask_pixels(samples, outputs)),
    "segmentation.select_masks": _select_case(),
    "segmentation.random_object_bbox": Case(lambda: MASKS, lambda node, device: fn.segmentation.random_object_bbox(
        node, format="box", k_largest=1), lambda samples, outputs: _check_object_boxes(samples, outputs)),
    "ssd_random_crop": Case(lambda: [], _ssd_crop_build, lambda samples, outputs: _check_ssd_crops(outputs)),
    "bbox_rotate": Case(lambda: BOX_FEED, lambda node, device: fn.bbox_rotate(
        node, angle=90.0, input_shape=[40, 60], bbox_layout="xyWH"),  # a quarter turn: x, y, w, h -> y, 1 - x - w, h, w
        lambda samples, outputs: [np.stack([b[:, 1], 1 - b[:, 0] - b[:, 2], b[:, 3], b[:, 2]], 1) for b in samples],
        max_abs=1e-5),
    "random_bbox_crop": Case(lambda: [xywh_to_ltrb(b) for b in BOX_FEED],
                             lambda node, device: fn.random_bbox_crop(node, thresholds=[0.0, 0.2], scaling=[0.3, 1.0],
                                                                      aspect_ratio=[0.5, 2.0], num_attempts=10,
                                                                      total_num_attempts=50),
                             lambda samples, outputs: _check_crops(samples, outputs)),
    "readers.coco": Case(list, lambda node, device: tuple(fn.readers.coco(
        file_root=coco_set()[0], annotations_file=coco_set()[1], image_ids=True)), _coco_reference),
}
