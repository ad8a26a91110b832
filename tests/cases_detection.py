"""Cases of the detection operators for test_operator_coverage: readers.coco against pycocotools'
COCO API on a small generated set (benchmarks/make_coco.py), made once per test session."""
from __future__ import annotations

import functools
import os
import sys
import tempfile

import numpy as np
from operator_cases import Case

from penstock import fn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))


@functools.lru_cache(maxsize=1)
def coco_set() -> tuple[str, str]:
    from make_coco import make_coco
    root = tempfile.mkdtemp(prefix="penstock-coco-")
    return os.path.join(root, "images"), make_coco(root, 8, seed=11, sizes=(48, 96))


def _coco_reference(samples, outputs):
    import warnings

    from pycocotools.coco import COCO
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


CASES = {
    "readers.coco": Case(list, lambda node, device: tuple(fn.readers.coco(
        file_root=coco_set()[0], annotations_file=coco_set()[1], image_ids=True)), _coco_reference),
}
