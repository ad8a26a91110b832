"""readers.coco against pycocotools' COCO API on a generated COCO set (benchmarks/make_coco.py):
the same images in the same order, boxes, labels, polygons and masks (run-length masks exactly,
filled polygons up to their border pixels); its filters, subsets, shards and saved index; and its
errors for files that are not COCO."""
from __future__ import annotations

import json
import os
import sys

import cv2
import numpy as np
import pytest

from penstock import PipelineError, fn, pipeline_def, types

pycocotools = pytest.importorskip("pycocotools")
from pycocotools import mask as mask_util  # noqa: E402
from pycocotools.coco import COCO  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "benchmarks"))
from make_coco import make_coco  # noqa: E402

from penstock.operators.readers.coco_masks import rle_decode, rle_from_string  # noqa: E402

IMAGES = 36
# pycocotools' compiled decoder calls numpy's __array__ the pre-2.0 way
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")


@pytest.fixture(scope="module")
def coco_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    annotations = make_coco(str(root), IMAGES, seed=3)
    return str(root / "images"), annotations, COCO(annotations)


def read_all(image_root, annotations, batch_size=IMAGES, epochs=1, **kwargs):
    """Every output of every sample over ``epochs`` epochs, as lists of numpy arrays."""
    source = {"annotations_file": annotations} if annotations is not None else {}

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=5)
    def pipe():
        return tuple(fn.readers.coco(file_root=image_root, name="Reader", **source, **kwargs))
    built = pipe()
    built.build()
    batches_per_epoch = built.reader_meta("Reader")["batches_per_epoch"]
    outputs = None
    for _ in range(epochs * batches_per_epoch):
        result = built.run()
        valid = built.last_epoch_info.valid
        if outputs is None:
            outputs = [[] for _ in result]
        for column, batch in zip(outputs, result):
            column.extend(np.asarray(batch.at(i)) for i in range(valid))
    meta = built.reader_meta("Reader")
    built.close()
    return outputs, meta


def expected_annotations(coco: COCO, image_id: int, threshold=0.1, crowd=True):
    return [a for a in coco.loadAnns(coco.getAnnIds(imgIds=image_id))
            if a["bbox"][2] >= threshold and a["bbox"][3] >= threshold and (crowd or not a["iscrowd"])]


def remapped(coco: COCO) -> dict:
    return {c["id"]: position for position, c in enumerate(coco.dataset["categories"], 1)}


def test_boxes_labels_and_order_match_pycocotools(coco_set):
    images, annotations, coco = coco_set
    (jpegs, boxes, labels, ids), meta = read_all(images, annotations, image_ids=True)
    assert [int(i[0]) for i in ids] == sorted(coco.getImgIds())  # ordered by image id
    labels_of = remapped(coco)
    for image_id, got_boxes, got_labels, jpeg in zip(ids, boxes, labels, jpegs):
        expected = expected_annotations(coco, int(image_id[0]))
        assert got_boxes.dtype == np.float32 and got_boxes.shape == (len(expected), 4)
        np.testing.assert_allclose(got_boxes, np.array([a["bbox"] for a in expected]).reshape(-1, 4), rtol=1e-6)
        assert got_labels.dtype == np.int32 and got_labels.tolist() == [labels_of[a["category_id"]] for a in expected]
        file_name = coco.loadImgs(int(image_id[0]))[0]["file_name"]
        with open(os.path.join(images, file_name), "rb") as handle:
            assert jpeg.tobytes() == handle.read()
    small = sum(1 for a in coco.dataset["annotations"] if min(a["bbox"][2:]) < 0.1)
    assert small > 0 and meta["skipped"]["small_objects"] == small


def test_ltrb_ratio_and_original_category_ids(coco_set):
    images, annotations, coco = coco_set
    (_, boxes, labels, ids), _ = read_all(images, annotations, image_ids=True, ltrb=True, ratio=True,
                                          avoid_class_remapping=True)
    for image_id, got_boxes, got_labels in zip(ids, boxes, labels):
        info = coco.loadImgs(int(image_id[0]))[0]
        expected = expected_annotations(coco, int(image_id[0]))
        xywh = np.array([a["bbox"] for a in expected], np.float64).reshape(-1, 4)
        ltrb = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
        scale = np.array([info["width"], info["height"]] * 2)
        np.testing.assert_allclose(got_boxes, ltrb / scale, rtol=1e-5, atol=1e-7)
        assert got_labels.tolist() == [a["category_id"] for a in expected]


def test_crowd_and_empty_filters_count_what_they_skip(coco_set):
    images, annotations, coco = coco_set
    (_, boxes, _, ids), meta = read_all(images, annotations, batch_size=5, image_ids=True, include_iscrowd=False,
                                        skip_empty=True)
    crowd = sum(1 for a in coco.dataset["annotations"] if a["iscrowd"])
    kept = [i for i in sorted(coco.getImgIds()) if expected_annotations(coco, i, crowd=False)]
    assert crowd > 0 and meta["skipped"]["crowd_objects"] == crowd
    assert [int(i[0]) for i in ids] == kept and meta["skipped"]["empty_images"] == IMAGES - len(kept) > 0
    assert all(len(b) > 0 for b in boxes)


def test_polygons_and_vertices_are_the_segmentations(coco_set):
    images, annotations, coco = coco_set
    (_, _, _, polygons, vertices, ids), _ = read_all(images, annotations, polygon_masks=True, image_ids=True)
    for image_id, got_polygons, got_vertices in zip(ids, polygons, vertices):
        expected = expected_annotations(coco, int(image_id[0]))
        rows = [(number, polygon) for number, a in enumerate(expected) if isinstance(a["segmentation"], list)
                for polygon in a["segmentation"]]  # run-length masks have no polygons
        assert got_polygons.shape == (len(rows), 3) and got_vertices.dtype == np.float32
        for (number, polygon), (index, start, end) in zip(rows, got_polygons):
            assert index == number
            np.testing.assert_allclose(got_vertices[start:end], np.reshape(polygon, (-1, 2)), rtol=1e-6)


def test_pixelwise_masks_match_pycocotools(coco_set):
    images, annotations, coco = coco_set
    (_, _, labels, masks, ids), _ = read_all(images, annotations, pixelwise_masks=True, image_ids=True)
    labels_of = remapped(coco)
    for image_id, mask, got_labels in zip(ids, masks, labels):
        info = coco.loadImgs(int(image_id[0]))[0]
        assert mask.dtype == np.int32 and mask.shape == (info["height"], info["width"], 1)
        expected = np.zeros((info["height"], info["width"]), np.int32)
        border = np.zeros_like(expected, bool)
        for a in sorted(expected_annotations(coco, int(image_id[0])), key=lambda a: labels_of[a["category_id"]]):
            covered = coco.annToMask(a).astype(bool)
            expected[covered] = labels_of[a["category_id"]]
            if not a["iscrowd"]:  # a filled polygon's border pixels may go either way
                ring = cv2.dilate(covered.astype(np.uint8), np.ones((3, 3), np.uint8)) - \
                    cv2.erode(covered.astype(np.uint8), np.ones((3, 3), np.uint8))
                border |= ring.astype(bool)
        differ = mask[:, :, 0] != expected
        assert not (differ & ~border).any(), f"image {int(image_id[0])}: masks differ inside objects"
        assert differ.sum() <= 0.25 * max(border.sum(), 1)


def test_run_length_masks_decode_as_pycocotools():
    rng = np.random.default_rng(1)
    for height, width in [(7, 5), (40, 33), (1, 1)]:
        mask = np.asfortranarray((rng.random((height, width)) < 0.3).astype(np.uint8))
        encoded = mask_util.encode(mask)
        counts = rle_from_string(encoded["counts"].decode())
        np.testing.assert_array_equal(rle_decode(counts, height, width), mask.astype(bool))


def test_images_subset_in_its_order_with_repeats(coco_set):
    images, annotations, coco = coco_set
    names = [info["file_name"] for info in coco.dataset["images"]]
    chosen = [names[5], names[2], names[5]]
    (_, _, _, ids), _ = read_all(images, annotations, batch_size=3, images=chosen, image_ids=True)
    by_name = {info["file_name"]: info["id"] for info in coco.dataset["images"]}
    assert [int(i[0]) for i in ids] == [by_name[n] for n in chosen]


@pytest.mark.parametrize("arguments", [{"random_shuffle": True}, {"shuffle_after_epoch": True}])
def test_shards_deliver_every_image_once_per_epoch(coco_set, arguments):
    images, annotations, _ = coco_set
    per_epoch = []
    for shard in range(2):
        (_, _, _, ids), _ = read_all(images, annotations, batch_size=4, epochs=3, image_ids=True,
                                     shard_id=shard, num_shards=2, **arguments)
        per_epoch.append([[int(i[0]) for i in ids[e * 18:(e + 1) * 18]] for e in range(3)])
    for epoch in range(3):
        union = per_epoch[0][epoch] + per_epoch[1][epoch]
        assert sorted(union) == sorted(set(union)) and len(union) == IMAGES
    if "shuffle_after_epoch" in arguments:  # every epoch permuted, the first too (as DALI)
        assert per_epoch[0][0] != sorted(per_epoch[0][0]) and per_epoch[0][1] != per_epoch[0][0]


def test_saved_index_reads_back_the_same(coco_set, tmp_path):
    images, annotations, _ = coco_set
    first, _ = read_all(images, annotations, pixelwise_masks=True, image_ids=True, save_preprocessed_annotations=True,
                        save_preprocessed_annotations_dir=str(tmp_path / "index"))

    @pipeline_def(batch_size=IMAGES, num_threads=1, device_id=None)
    def again():
        return tuple(fn.readers.coco(file_root=images, preprocessed_annotations=str(tmp_path / "index"),
                                     pixelwise_masks=True, image_ids=True))
    pipe = again()
    pipe.build()
    second = pipe.run()
    for column, batch in zip(first, second):
        for index, expected in enumerate(column):
            np.testing.assert_array_equal(np.asarray(batch.at(index)), expected)
    pipe.close()


def _broken(tmp_path, images, edit) -> str:
    with open(os.path.join(os.path.dirname(images), "annotations", "instances.json")) as handle:
        document = json.load(handle)
    edit(document)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("categories"), "lacks 'categories'"),
    (lambda d: d["annotations"][3]["bbox"].__setitem__(2, -4.0), "annotation 4 has bbox"),
    (lambda d: d["annotations"][5].__setitem__("category_id", 99), "annotation 6 has category 99"),
    (lambda d: d["images"][0].__setitem__("file_name", "missing.jpg"), "missing.jpg"),
    (lambda d: d["annotations"][0].__setitem__("image_id", 5), "annotation 1 is of image 5"),
])
def test_files_that_are_not_coco_say_what_is_wrong(coco_set, tmp_path, edit, message):
    images, _, _ = coco_set
    broken = _broken(tmp_path, images, edit)

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return tuple(fn.readers.coco(file_root=images, annotations_file=broken))
    with pytest.raises((ValueError, FileNotFoundError), match="readers.coco") as caught:
        pipe().build()
    assert message in str(caught.value)


def test_arguments_that_exclude_each_other_fail_at_the_call(coco_set):
    images, annotations, _ = coco_set
    with pytest.raises(ValueError, match="polygon_masks"):
        @pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            return tuple(fn.readers.coco(file_root=images, annotations_file=annotations, polygon_masks=True,
                                         pixelwise_masks=True))
        pipe()


def test_masks_follow_the_image_through_flip_and_nearest_resize(coco_set):
    images, annotations, _ = coco_set

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=2)
    def pipe():
        _, _, _, masks = fn.readers.coco(file_root=images, annotations_file=annotations, pixelwise_masks=True)
        flipped = fn.flip(masks, horizontal=1)
        resized = fn.resize(masks, resize_x=50, resize_y=40, interp_type=types.INTERP_NN)
        return masks, flipped, resized
    built = pipe()
    built.build()
    masks, flipped, resized = built.run()
    for index in range(4):
        mask = np.asarray(masks.at(index))
        np.testing.assert_array_equal(np.asarray(flipped.at(index)), mask[:, ::-1])
        small = np.asarray(resized.at(index))
        # nearest by pixel centres (OpenCV's INTER_NEAREST_EXACT): labels are kept, never blended
        expected = cv2.resize(mask[:, :, 0], (50, 40), interpolation=cv2.INTER_NEAREST_EXACT)
        assert small.dtype == np.int32
        np.testing.assert_array_equal(small[:, :, 0], expected)
    built.close()


def test_boxes_from_worker_processes_reach_the_gpu_as_from_threads(coco_set, monkeypatch):
    """Ragged boxes and labels computed in worker processes land in the batch as parts
    (contract.RaggedColumn) and are copied to the GPU from them: the same samples as threads give."""
    from conftest import gpu_or_emulated

    from penstock.runtime import pinned
    image_root, annotations, _ = coco_set
    copies = []
    upload_ragged = pinned.upload_ragged
    monkeypatch.setattr(pinned, "upload_ragged", lambda *args: copies.append(1) or upload_ragged(*args))

    def encoded(worker_processes):
        @pipeline_def(batch_size=12, num_threads=2, device_id=0, seed=5, worker_processes=worker_processes)
        def pipe():
            _, boxes, labels = fn.readers.coco(file_root=image_root, annotations_file=annotations, ltrb=True,
                                               ratio=True, name="Reader")
            boxes = fn.bb_flip(boxes, ltrb=True, horizontal=fn.random.coin_flip(probability=0.5))
            return boxes.gpu(), labels.gpu()
        built = pipe()
        built.build()
        try:
            return [[[np.asarray(batch.at(i).cpu()) for i in range(len(batch))] for batch in built.run()]
                    for _ in range(2)]
        finally:
            built.close()
    with gpu_or_emulated():
        from_processes = encoded(True)
        assert copies  # boxes and labels copied from their parts (batches run ahead: more than asked)
        from_threads = encoded(False)
    for batch_processes, batch_threads in zip(from_processes, from_threads):
        for output_processes, output_threads in zip(batch_processes, batch_threads):
            assert len(output_processes) == 12
            for got, want in zip(output_processes, output_threads):
                assert got.shape == want.shape and got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)


# ---- a saved index is a file like any other -----------------------------------------------------------
class _CreatesFile:
    """Unpickling it creates ``path``: what an index that held objects could make penstock run."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _read_index(images, folder, **kwargs):
    @pipeline_def(batch_size=IMAGES, num_threads=1, device_id=None)
    def pipe():
        return tuple(fn.readers.coco(file_root=images, preprocessed_annotations=str(folder), **kwargs))
    built = pipe()
    built.build()
    try:
        return [[np.asarray(batch.at(i)) for i in range(len(batch))] for batch in built.run()]
    finally:
        built.close()


def test_an_index_holding_pickled_objects_is_refused_and_never_run(coco_set, tmp_path):
    images, annotations, _ = coco_set
    folder, marker = tmp_path / "index", tmp_path / "ran"
    read_all(images, annotations, pixelwise_masks=True, save_preprocessed_annotations=True,
             save_preprocessed_annotations_dir=str(folder))
    saved = sorted(path for path in folder.iterdir() if path.suffix in (".npy", ".npz"))
    assert saved
    payload = np.array([_CreatesFile(str(marker))], dtype=object)
    for path in saved:
        original = path.read_bytes()
        for kind in ("object array", "pickle"):
            if path.suffix == ".npz":
                with np.load(path, allow_pickle=False) as archive:
                    np.savez(path, **{key: payload for key in archive.files})
            elif kind == "object array":
                np.save(path, payload, allow_pickle=True)
            else:
                import pickle
                path.write_bytes(pickle.dumps(payload[0]))
            with pytest.raises(ValueError, match="readers.coco") as caught:
                _read_index(images, folder, pixelwise_masks=True)
            assert str(path) in str(caught.value), kind
            assert not marker.exists(), f"{path.name} ({kind}) ran code"
        path.write_bytes(original)


@pytest.mark.parametrize("saved, loaded", [
    ({"pixelwise_masks": True, "skip_empty": True, "include_iscrowd": False},
     {"pixelwise_masks": True, "image_ids": True, "ltrb": True, "ratio": True}),
    ({"polygon_masks": True, "avoid_class_remapping": True, "size_threshold": 20.0},
     {"polygon_masks": True, "image_ids": True, "ratio": True}),
])
def test_a_saved_index_gives_what_the_file_gives_with_the_reading_arguments(coco_set, tmp_path, saved, loaded):
    """The filters are the saving reader's (as DALI's); ltrb, ratio and the outputs are the reading one's."""
    images, annotations, _ = coco_set
    folder = tmp_path / "index"
    _, saved_meta = read_all(images, annotations, save_preprocessed_annotations=True,
                             save_preprocessed_annotations_dir=str(folder), **saved)
    expected, _ = read_all(images, annotations, **{**saved, **loaded})
    got, meta = read_all(images, None, preprocessed_annotations=str(folder), **loaded)
    assert meta["skipped"] == saved_meta["skipped"] and len(got) == len(expected)
    for column_expected, column_got in zip(expected, got):
        assert len(column_got) == len(column_expected)
        for want, have in zip(column_expected, column_got):
            assert have.dtype == want.dtype
            np.testing.assert_array_equal(have, want)


def test_an_index_saved_without_masks_is_refused_for_masks(coco_set, tmp_path):
    images, annotations, _ = coco_set
    read_all(images, annotations, save_preprocessed_annotations=True, save_preprocessed_annotations_dir=str(tmp_path))
    for argument in ("polygon_masks", "pixelwise_masks"):
        with pytest.raises(ValueError, match=f"'{argument}' needs masks"):
            _read_index(images, tmp_path, **{argument: True})


def test_an_index_whose_rows_lie_outside_its_arrays_is_refused(coco_set, tmp_path):
    images, annotations, _ = coco_set
    read_all(images, annotations, save_preprocessed_annotations=True, save_preprocessed_annotations_dir=str(tmp_path))
    objects = np.load(tmp_path / "objects.npy", allow_pickle=False)
    objects[3, 1] = 10**12
    np.save(tmp_path / "objects.npy", objects, allow_pickle=False)
    with pytest.raises(ValueError, match="row ranges outside") as caught:
        _read_index(images, tmp_path)
    assert str(tmp_path / "objects.npy") in str(caught.value)


def test_the_file_read_a_few_bytes_at_a_time_gives_the_same_index(coco_set, monkeypatch):
    """The file is walked in pieces: values cut at a piece's end (numbers, strings, objects) are
    read again whole."""
    from penstock.operators.readers import coco_annotations
    images, annotations, _ = coco_set
    expected, _ = read_all(images, annotations, pixelwise_masks=True, image_ids=True)
    monkeypatch.setattr(coco_annotations, "READ_BYTES", 7)
    monkeypatch.setattr(coco_annotations, "CHUNK", 5)
    got, _ = read_all(images, annotations, pixelwise_masks=True, image_ids=True)
    for column_expected, column_got in zip(expected, got):
        for want, have in zip(column_expected, column_got):
            np.testing.assert_array_equal(have, want)


# ---- sizes the annotations file claims --------------------------------------------------------------------
def _pipeline_over(image_root, path, **kwargs):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return tuple(fn.readers.coco(file_root=image_root, annotations_file=path, **kwargs))
    return pipe()


def test_a_mask_larger_than_the_limit_is_refused_before_it_is_made(coco_set, tmp_path):
    import tracemalloc
    images, _, _ = coco_set
    claimed = {}

    def claim(document):  # 20000 x 5000: 10^8 pixels, more than limits.DEFAULT_MAX_PIXELS
        first = min(document["images"], key=lambda image: image["id"])
        first.update(width=20000, height=5000)
        claimed.update(first)
    broken = _broken(tmp_path, images, claim)
    built = _pipeline_over(images, broken, pixelwise_masks=True)
    built.build()
    tracemalloc.start()
    try:
        with pytest.raises(PipelineError, match="SizeClaimError: readers.coco") as caught:
            built.run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        built.close()
    message = str(caught.value)
    assert broken in message and f"image {claimed['id']}" in message and claimed["file_name"] in message
    assert "20000" in message and "5000" in message
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB allocated before the refusal"


def _crowd_annotation(document):
    return next(a for a in document["annotations"] if isinstance(a["segmentation"], dict))


def _polygon_annotation(document):
    return next(a for a in document["annotations"] if isinstance(a["segmentation"], list) and not a["iscrowd"])


def _zigzag(document):
    """A polygon of 20000 vertices crossing every row of its image thousands of times."""
    annotation = _polygon_annotation(document)
    image = next(i for i in document["images"] if i["id"] == annotation["image_id"])
    xs = np.linspace(0, image["width"], 10000)
    points = np.stack([np.concatenate([xs, xs[::-1]]), np.tile([0.0, image["height"]], 10000)], 1)
    annotation["segmentation"] = [points.reshape(-1).tolist()]
    return annotation


@pytest.mark.parametrize("edit, message", [
    # runs whose int64 sum wraps around to the image's pixels: np.repeat would be asked for 2^64
    (lambda d: _crowd_annotation(d)["segmentation"].__setitem__(
        "counts", [2**62] * 4 + [_crowd_annotation(d)["segmentation"]["size"][0]
                                 * _crowd_annotation(d)["segmentation"]["size"][1]]), "has a run of"),
    (lambda d: _crowd_annotation(d)["segmentation"].__setitem__("counts", [-5, 10**9]), "has a run of -5"),
    # a compressed run that never ends: its value would grow without bound
    (lambda d: _crowd_annotation(d)["segmentation"].__setitem__("counts", "o" * 2000), "is not a run"),
    (lambda d: _polygon_annotation(d)["segmentation"][0].__setitem__(0, float("inf")), "within float32's range"),
    (lambda d: _polygon_annotation(d)["segmentation"][0].append(3.0), "x, y pairs"),
    (lambda d: _polygon_annotation(d)["segmentation"][0].__setitem__(1, 1e300), "within float32's range"),
])
def test_masks_that_claim_more_than_their_image_are_refused_at_build(coco_set, tmp_path, edit, message):
    images, _, _ = coco_set
    broken = _broken(tmp_path, images, edit)
    with pytest.raises(ValueError, match="readers.coco") as caught:
        _pipeline_over(images, broken, pixelwise_masks=True).build()
    assert broken in str(caught.value) and "annotation" in str(caught.value) and message in str(caught.value)


def test_a_polygon_crossing_its_rows_more_than_its_pixels_is_refused(coco_set, tmp_path):
    images, _, _ = coco_set
    annotation = {}
    broken = _broken(tmp_path, images, lambda d: annotation.update(_zigzag(d)))
    with open(broken) as handle:
        name = next(i["file_name"] for i in json.load(handle)["images"] if i["id"] == annotation["image_id"])
    built = _pipeline_over(images, broken, pixelwise_masks=True, images=[name, name])
    built.build()
    with pytest.raises(PipelineError, match="SizeClaimError: readers.coco") as caught:
        built.run()
    built.close()
    assert broken in str(caught.value) and f"image {annotation['image_id']}" in str(caught.value)
    assert "crosses the rows" in str(caught.value)
