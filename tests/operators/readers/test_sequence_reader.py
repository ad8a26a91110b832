"""readers.sequence: which frames make each sample (DALI's windows: a stream per sub-folder, frames in
sorted order, ``sequence_length`` frames ``stride`` apart, starting every ``step``), the frames
against Pillow's decode, and the errors."""
from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import encode, pillow_decode, smooth_image
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from helpers_data import read_one_epoch
import hostile_files as hostile
import penstock
from penstock import fn, limits, types


def make_streams(root, lengths: dict[str, int], size=(12, 16)) -> dict[str, list[bytes]]:
    """Per stream folder, its frames' PNG bytes, frame k named so that sorting keeps the order."""
    streams = {}
    for name, count in lengths.items():
        (root / name).mkdir()
        frames = [encode(smooth_image(*size, seed=hash((name, k)) % 1000), "PNG") for k in range(count)]
        for k, data in enumerate(frames):
            (root / name / f"frame_{k:03d}.png").write_bytes(data)
        (root / name / "notes.txt").write_text("not a frame")
        streams[name] = frames
    return streams


@pytest.mark.parametrize("length, step, stride, starts", [
    (3, 1, 1, {"a": [0, 1, 2, 3], "b": [0, 1]}),
    (2, 2, 2, {"a": [0, 2], "b": [0]}),
    (3, 3, 2, {"a": [0], "b": []}),
])
def test_samples_are_windows_of_each_stream(tmp_path, length, step, stride, starts):
    streams = make_streams(tmp_path, {"b": 4, "a": 6})
    read = [sample for (sample,) in read_one_epoch(
        lambda: (fn.readers.sequence(name="Reader", file_root=str(tmp_path), sequence_length=length, step=step,
                                     stride=stride),), batch_size=3)]
    expected = [np.stack([pillow_decode(streams[name][start + k * stride]) for k in range(length)])
                for name in ("a", "b") for start in starts[name]]
    assert len(read) == len(expected)
    for got, want in zip(read, expected):
        assert got.shape == (length, 12, 16, 3) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)


def test_gray_frames_and_the_layout(tmp_path):
    streams = make_streams(tmp_path, {"s": 2})
    read = read_one_epoch(lambda: (fn.readers.sequence(name="Reader", file_root=str(tmp_path), sequence_length=2,
                                                       image_type=types.GRAY),), batch_size=1)
    assert read[0][0].shape == (2, 12, 16, 1)
    # OpenCV and Pillow round BT.601's weights differently: within one level (as tests/operators/decoders/test_decoders.py)
    assert np.abs(read[0][0][1].astype(int) - pillow_decode(streams["s"][1], "L")).max() <= 1


def test_streams_too_short_and_frames_of_other_sizes_are_clear_errors(tmp_path):
    make_streams(tmp_path, {"s": 2})
    with pytest.raises(ValueError, match="readers.sequence: no stream .* holds 3 frames"):
        read_one_epoch(lambda: (fn.readers.sequence(name="Reader", file_root=str(tmp_path), sequence_length=3),))
    (tmp_path / "s" / "frame_001.png").write_bytes(encode(smooth_image(10, 16), "PNG"))
    with pytest.raises(penstock.PipelineError, match=r"frame '.*frame_001\.png' is 16 x 10, the sequence's first "
                                                     r"frame 16 x 12"):
        read_one_epoch(lambda: (fn.readers.sequence(name="Reader", file_root=str(tmp_path), sequence_length=2),))


@pytest.mark.parametrize("kind", ["jpeg", "png"])
def test_a_frame_claiming_more_pixels_than_max_pixels_is_refused_from_its_header(tmp_path, kind):
    """A few hundred bytes claiming 60000 x 60000 pixels: refused before decoding, naming the frame
    (readers.sequence has no max_pixels argument, as in DALI: the decoders' default applies)."""
    make_streams(tmp_path, {"s": 2})
    bomb = hostile.BOMBS[kind]()
    assert len(bomb) < 1000
    (tmp_path / "s" / "frame_001.png").write_bytes(bomb.tobytes())
    started = time.perf_counter()
    refused = r"frame '.*frame_001\.png': its header claims 60000 x 60000 = 3,600,000,000 pixels, more than max_pixels="
    with pytest.raises(penstock.PipelineError, match=refused + "89,478,485") as raised:
        read_one_epoch(lambda: (fn.readers.sequence(name="Reader", file_root=str(tmp_path), sequence_length=2),))
    assert isinstance(raised.value.__cause__, limits.SizeClaimError)
    assert time.perf_counter() - started < 2.0
