"""Cases of the sequence operators (penstock.operators.tensor.sequences), random_crop_generator
(penstock.operators.random.crop_generator), io.file.read and dump_image (penstock.operators.image.file_io), clahe and debayer
(penstock.operators.image.image_extras) for the coverage test; the operators' own tests, against numpy,
OpenCV and DALI, are in tests/operators/tensor/test_sequences.py, tests/operators/random/test_crop_generator.py, tests/operators/image/test_file_io.py
and tests/operators/image/test_image_extras.py.

References: per_frame hands the data on untouched; sequence_rearrange against numpy's indexing of
the first axis (exact); random_crop_generator's windows lie inside the images whose shapes it is
given, as int32 (y, x) pairs; io.file.read against Python's read of the files (exact); clahe
against OpenCV's CLAHE of each channel (exact); debayer of the images' green channel read as
Bayer sensor images against OpenCV's bilinear demosaicing (exact).
"""
from __future__ import annotations

import pathlib
import shutil
import tempfile

import cv2
import numpy as np
from operator_cases import Case, on_device, ragged_images

from penstock import fn

ORDER = [2, 0, 0, 1]


def _frames(node, device):
    """The fed HWC images marked as sequences of rows (per_frame replaces the layout's first letter)."""
    return fn.per_frame(on_device(node, device), replace=True, device=device)


def _windows_inside(samples, outputs):
    anchors, shapes = outputs
    for image, anchor, shape in zip(samples, anchors, shapes):
        assert anchor.dtype == shape.dtype == np.int32 and anchor.shape == shape.shape == (2,)
        assert (anchor >= 0).all() and (shape >= 1).all() and (anchor + shape <= image.shape[:2]).all()


def _file_paths():
    """Three files written for the case, as the encoded paths io.file.read takes."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="penstock-file-read-"))
    paths = []
    for index, data in enumerate([b"", bytes(range(256)), b"penstock" * 100]):
        (root / f"file{index}").write_bytes(data)
        paths.append(np.frombuffer(str(root / f"file{index}").encode(), np.uint8))
    return paths


def _file_contents(samples, _):
    """The files' bytes, read here; the files' folder goes once they are read."""
    paths = [pathlib.Path(path.tobytes().decode()) for path in samples]
    contents = [np.frombuffer(path.read_bytes(), np.uint8) for path in paths]
    shutil.rmtree(paths[0].parent)
    return contents


DUMP_SUFFIX = "penstock-dump-case"


def _dumped(samples, _):
    """The images as dump_image passes them on, once the PPM/PGM files it wrote hold them (the files
    go once read)."""
    for index, sample in enumerate(samples):
        path = pathlib.Path(f"{index}-{DUMP_SUFFIX}-0.ppm")
        header, width, height, levels, *values = path.read_text().split()
        path.unlink()
        assert header == ("P3" if sample.shape[2] == 3 else "P2") and levels == "255"
        assert (int(height), int(width)) == sample.shape[:2]
        np.testing.assert_array_equal(np.array(values, np.uint8).reshape(sample.shape), sample)
    return samples


CASES = {
    "per_frame": Case(ragged_images, _frames, lambda samples, _: samples),
    "sequence_rearrange": Case(ragged_images, lambda node, device: fn.sequence_rearrange(_frames(node, device),
                                                                                         new_order=ORDER),
                               lambda samples, _: [s[ORDER] for s in samples]),
    "random_crop_generator": Case(ragged_images, lambda node, device: tuple(fn.random_crop_generator(fn.shapes(node))),
                                  _windows_inside),
    "clahe": Case(ragged_images, lambda node, device: fn.clahe(node, tiles_x=3, tiles_y=2, clip_limit=2.0, luma_only=False),
                  lambda samples, _: [np.stack([cv2.createCLAHE(2.0, (3, 2)).apply(np.ascontiguousarray(s[:, :, c]))
                                                for c in range(3)], axis=2) for s in samples]),
    "debayer": Case(lambda: [s[:s.shape[0] // 2 * 2, :s.shape[1] // 2 * 2, 1:2].copy() for s in ragged_images()],
                    lambda node, device: fn.debayer(node, blue_position=(0, 1)),
                    lambda samples, _: [cv2.cvtColor(s[:, :, 0], cv2.COLOR_BayerGB2RGB) for s in samples]),
    "io.file.read": Case(_file_paths, lambda node, device: fn.io.file.read(node), _file_contents),
    "dump_image": Case(ragged_images, lambda node, device: fn.dump_image(node, suffix=DUMP_SUFFIX), _dumped),
}
