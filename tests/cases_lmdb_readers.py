"""Cases of readers.caffe and readers.caffe2 (penstock.operators.readers.lmdb_readers) for the coverage test;
the readers' own tests, against the values written and against DALI, are in tests/operators/readers/test_lmdb_readers.py.

References: the images and labels written into each database (exact, dtypes and shapes too): raw
Caffe Datums come out as (height, width, channels) uint8 arrays with int32 labels of shape (1,);
Caffe2 records of an encoded image and a FLOAT label as the image's bytes and the float32 label.
"""
from __future__ import annotations

import functools
import tempfile

import numpy as np
from conformance.cases_readers import datum, lmdb_database, tensor_proto, tensor_protos
from operator_cases import Case

from penstock import fn

IMAGES = [np.arange(k, k + (2 + k) * 3 * (1 + k % 3), dtype=np.uint8).reshape(2 + k, 3, 1 + k % 3) for k in range(4)]
ENCODED = [b"\xff\xd8image %d" % k for k in range(4)]


@functools.cache
def _databases() -> dict:
    """Written once, when a case first builds its pipeline."""
    root = tempfile.mkdtemp(prefix="penstock-lmdb-")
    caffe = lmdb_database(f"{root}/caffe", {b"%02d" % k: datum(image.shape[2], image.shape[0], image.shape[1],
                                                                image.tobytes(), label=k, encoded=False)
                                             for k, image in enumerate(IMAGES)})
    caffe2 = lmdb_database(f"{root}/caffe2", {b"%02d" % k: tensor_protos(
        tensor_proto(data_type=4, strings=[data]), tensor_proto(floats=[k + 0.5])) for k, data in enumerate(ENCODED)})
    return {"caffe": caffe, "caffe2": caffe2}


def _caffe_reference(samples, outputs):
    images, labels = outputs
    for k, (image, label) in enumerate(zip(images, labels)):
        np.testing.assert_array_equal(image, IMAGES[k % 4], strict=True)
        np.testing.assert_array_equal(label, np.array([k % 4], np.int32), strict=True)


def _caffe2_reference(samples, outputs):
    images, labels = outputs
    for k, (image, label) in enumerate(zip(images, labels)):
        np.testing.assert_array_equal(image, np.frombuffer(ENCODED[k % 4], np.uint8), strict=True)
        np.testing.assert_array_equal(label, np.array([k % 4 + 0.5], np.float32), strict=True)


CASES = {
    "readers.caffe": Case(list, lambda node, device: tuple(fn.readers.caffe(path=_databases()["caffe"])),
                          _caffe_reference),
    "readers.caffe2": Case(list, lambda node, device: tuple(fn.readers.caffe2(path=_databases()["caffe2"])),
                           _caffe2_reference),
}
