"""readers.video and experimental.readers.video against the frames of clips made here with FFmpeg's
encoders (PyAV), decoded by PyAV itself as the reference (4:2:0 planes converted with BT.601 by
numpy: within 1 level, 2 where DALI's first reader truncates); the windows each file gives against
the rules of DALI's loaders; the GPU form (NVDEC where it exists, else FFmpeg and a copy) against the
CPU form; hostile files. DALI's own CPU reader (VP9) is compared in the conformance tier."""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import gpu_or_emulated
from video_clips import clip_frames, encoded_clip

import penstock
from penstock import fn, types

av = pytest.importorskip("av")

CLIPS = {"h264.mp4": ("libx264", 30, 48, 64), "vp9.webm": ("libvpx-vp9", 19, 32, 48),
         "hevc.mp4": ("libx265", 41, 48, 64)}  # x265 corrupts its heap on frames under 48 x 64


def write_clip(path: str, codec: str, frames: int, height: int, width: int, seed: int = 0, options=None) -> None:
    container = {"mp4": "mp4", "webm": "webm", "mkv": "matroska"}[path.rsplit(".", 1)[1]]
    encoded_clip(codec, container, "yuv420p", frames, height, width, seed=seed, options=options).tofile(path)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """{name: path}, in class folders c0 (h264, vp9) and c1 (hevc)."""
    root = tmp_path_factory.mktemp("videos")
    paths = {}
    for number, (name, (codec, frames, height, width)) in enumerate(CLIPS.items()):
        folder = root / ("c1" if name.startswith("hevc") else "c0")
        folder.mkdir(exist_ok=True)
        paths[name] = str(folder / name)
        options = {"x265-params": "log-level=error:keyint=8:pools=none:frame-threads=1"} if codec == "libx265" else {"g": "8"}
        write_clip(paths[name], codec, frames, height, width, seed=number, options=options)
    return paths


def reference_frames(path: str, image_type: str = "rgb", truncate: bool = False) -> np.ndarray:
    """Every frame as PyAV decodes it, 4:2:0 converted with BT.601 (limited range) by numpy, the
    chroma upsampled bilinearly with centres aligned (a separable [1/4, 3/4] filter, edges repeated)."""
    frames = []
    with av.open(path) as container:
        for frame in container.decode(video=0):
            planes = frame.to_ndarray(format="yuv420p")
            height, width = frame.height, frame.width
            y = planes[:height].astype(np.float64)
            chroma = [part.reshape(height // 2, width // 2).astype(np.float64)
                      for part in (planes[height:height + height // 4], planes[height + height // 4:])]
            u, v = (_upsampled(plane) for plane in chroma)
            if image_type == "ycbcr":
                values = np.stack([y, u, v], -1)
            else:
                y, u, v = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
                values = np.stack([y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u], -1)
            values = np.floor(values) if truncate else np.round(values)
            frames.append(np.clip(values, 0, 255).astype(np.uint8))
    return np.stack(frames)


def _upsampled(plane: np.ndarray) -> np.ndarray:
    for axis in (0, 1):
        before = np.concatenate([np.take(plane, [0], axis), np.take(plane, range(plane.shape[axis] - 1), axis)], axis)
        after = np.concatenate([np.take(plane, range(1, plane.shape[axis]), axis), np.take(plane, [-1], axis)], axis)
        even, odd = 0.25 * before + 0.75 * plane, 0.75 * plane + 0.25 * after
        plane = np.stack([even, odd], axis + 1).reshape(*plane.shape[:axis], -1, *plane.shape[axis + 1:])
    return plane


def read(op: str, batches: int, batch_size: int = 3, device: str = "cpu", **kwargs) -> list[list[list[np.ndarray]]]:
    """``batches`` batches of every output, each a list of samples."""
    reader = fn.readers.video if op == "readers.video" else fn.experimental.readers.video

    @penstock.pipeline_def(batch_size=batch_size, num_threads=2, device_id=0 if device == "gpu" else None, seed=5)
    def pipeline():
        outputs = reader(device=device, **kwargs)
        return tuple(outputs) if isinstance(outputs, (list, tuple)) else outputs
    with gpu_or_emulated():
        pipe = pipeline()
        try:
            got = [pipe.run() for _ in range(batches)]
        finally:
            pipe.close()
    return [[[np.asarray(sample) for sample in (output.as_cpu() if device == "gpu" else output)] for output in batch]
            for batch in got]


def windows(frames: int, length: int, stride: int, step: int, legacy: bool, pad: bool) -> list[list[int]]:
    """The frames of each window of a file, by DALI's loaders' rules (-1: padding)."""
    span = 1 + (length - 1) * stride if legacy else length * stride
    found, start = [], 0
    while start < frames and start + span <= frames:
        found.append([start + k * stride for k in range(length)])
        start += step
    while pad and start < frames:
        found.append([start + k * stride if start + k * stride < frames else -1 for k in range(length)])
        start += step
        if not legacy:
            break
    return found


@pytest.mark.parametrize("op, legacy", [("readers.video", True), ("experimental.readers.video", False)])
@pytest.mark.parametrize("length, stride, step", [(4, 1, -1), (3, 2, 5), (5, 3, 2)])
def test_windows_hold_the_frames_of_each_file(clips, op, legacy, length, stride, step):
    files = [clips["h264.mp4"], clips["vp9.webm"]]
    references = [reference_frames(path, truncate=legacy) for path in files]
    expected = []
    for label, reference in enumerate(references):
        expected += [(label, window, reference[window])
                     for window in windows(len(reference), length, stride, step if step > 0 else length * stride,
                                           legacy, pad=False)]
    got = read(op, batches=1, batch_size=len(expected), filenames=files, labels=[0, 1], sequence_length=length,
               stride=stride, step=step, enable_frame_num=True, enable_timestamps=True)[0]
    frames, labels, firsts, times = got
    assert len(frames) == len(expected)
    for sample, (label, window, reference) in enumerate(expected):
        assert frames[sample].shape == reference.shape and frames[sample].dtype == np.uint8
        assert np.abs(frames[sample].astype(int) - reference).max() <= (2 if legacy else 1)
        assert labels[sample].tolist() == [label] and firsts[sample].tolist() == [window[0]]
        np.testing.assert_allclose(times[sample], np.asarray(window) / 25, atol=1e-9)


def test_file_root_labels_classes_and_shuffling_keeps_every_window(clips):
    root = os.path.dirname(os.path.dirname(clips["h264.mp4"]))
    counts = {name: len(windows(CLIPS[name][1], 4, 1, 4, True, False)) for name in CLIPS}
    total = sum(counts.values())
    frames, labels = read("readers.video", batches=1, batch_size=total, file_root=root, sequence_length=4)[0]
    assert [int(label[0]) for label in labels] == [0] * (counts["h264.mp4"] + counts["vp9.webm"]) + [1] * counts["hevc.mp4"]
    shuffled = read("readers.video", batches=1, batch_size=total, file_root=root, sequence_length=4, random_shuffle=True)[0]
    assert sorted(int(label[0]) for label in shuffled[1]) == sorted(int(label[0]) for label in labels)
    assert sorted(f.tobytes() for f in shuffled[0]) == sorted(f.tobytes() for f in frames)


def test_pad_sequences_zeroes_the_frames_past_the_end(clips):
    path = clips["vp9.webm"]  # 19 frames
    reference = reference_frames(path, truncate=True)
    expected = windows(19, 4, 2, 5, legacy=True, pad=True)
    assert any(-1 in window for window in expected)
    frames, labels, firsts, times = read("readers.video", batches=1, batch_size=len(expected), filenames=[path],
                                         labels=[], sequence_length=4, stride=2, step=5, pad_sequences=True,
                                         enable_frame_num=True, enable_timestamps=True)[0]
    for sample, window in enumerate(expected):
        real = [k for k, index in enumerate(window) if index >= 0]
        assert np.abs(frames[sample][real].astype(int) - reference[[window[k] for k in real]]).max() <= 2
        assert not frames[sample][[k for k in range(4) if k not in real]].any()
        assert times[sample][[k for k in range(4) if k not in real]].tolist() == [-1.0] * (4 - len(real))
        assert labels[sample].tolist() == [0] and firsts[sample].tolist() == [window[0]]


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect_1001", "reflect_101"])
def test_experimental_reader_pads_one_last_window_by_pad_mode(clips, mode):
    path = clips["vp9.webm"]  # 19 frames: windows of 3 x 2 start at 0, 6, 12, and 18 runs past the end
    reference = reference_frames(path)
    frames, = read("experimental.readers.video", batches=1, batch_size=4, filenames=[path], sequence_length=3,
                   stride=2, pad_mode=mode, fill_value=[10, 20, 30])[0]
    last = frames[3]
    assert np.abs(last[0].astype(int) - reference[18]).max() <= 1
    padding = {"constant": None, "edge": 18, "reflect_1001": 17, "reflect_101": 16}[mode]
    for slot, past in ((1, 20), (2, 22)):
        if mode == "constant":
            assert (last[slot] == [10, 20, 30]).all()
        else:
            from penstock.operators.shared.video import PAD_MODES, padded_index
            assert np.abs(last[slot].astype(int) - reference[padded_index(past, 19, PAD_MODES[mode])]).max() <= 1
    assert padding is None or padded_index(20, 19, PAD_MODES[mode]) == padding


def test_float_output_and_ycbcr(clips):
    path = clips["h264.mp4"]
    reference = reference_frames(path, truncate=True)
    normalized, = read("readers.video", batches=1, batch_size=1, filenames=[path], sequence_length=2,
                       dtype=types.FLOAT, normalized=True)[0]
    assert normalized[0].dtype == np.float32 and 0 <= normalized[0].min() and normalized[0].max() <= 1
    assert np.abs(normalized[0] * 255 - reference[:2]).max() <= 2
    ycbcr, = read("experimental.readers.video", batches=1, batch_size=1, filenames=[path], sequence_length=2,
                  image_type=types.YCbCr)[0]
    assert np.abs(ycbcr[0].astype(int) - reference_frames(path, "ycbcr")[:2]).max() <= 1


def test_file_list_ranges_in_frames_and_seconds(clips, tmp_path):
    listed = tmp_path / "list.txt"
    listed.write_text(f"{clips['h264.mp4']} 7 0.2 0.6\n{clips['hevc.mp4']} 3 -12 -2\n")
    frames, labels, firsts = read("readers.video", batches=1, batch_size=2, file_list=str(listed),
                                  sequence_length=5, enable_frame_num=True)[0]
    # 0.2 s to 0.6 s at 25 frames/s: frames [5, 15); the second line, frame numbers: 41 - 12 = 29 to 39
    assert [int(label[0]) for label in labels] == [7, 7]
    assert [int(first[0]) for first in firsts] == [5, 10]
    by_frames = read("readers.video", batches=1, batch_size=2, file_list=str(listed), sequence_length=5,
                     file_list_frame_num=True, enable_frame_num=True)[0]
    assert [int(label[0]) for label in by_frames[1]] == [3, 3] and [int(f[0]) for f in by_frames[2]] == [29, 34]


# HEVC frames of 48 x 64 are below NVDEC's smallest: on a GPU that file goes to FFmpeg, and says so
@pytest.mark.filterwarnings("ignore:.*decoded by FFmpeg on the CPU instead:RuntimeWarning")
def test_gpu_form_gives_the_cpu_forms_frames(clips):
    files = [clips["h264.mp4"], clips["hevc.mp4"]]
    kwargs = dict(filenames=files, labels=[4, 5], sequence_length=3, stride=2, step=7, enable_frame_num=True)
    on_cpu = read("readers.video", batches=2, **kwargs)
    on_gpu = read("readers.video", batches=2, device="gpu", **kwargs)
    for batch_cpu, batch_gpu in zip(on_cpu, on_gpu):
        for output_cpu, output_gpu in zip(batch_cpu, batch_gpu):
            for cpu, gpu in zip(output_cpu, output_gpu):
                assert cpu.shape == gpu.shape and cpu.dtype == gpu.dtype
                assert np.abs(cpu.astype(int) - gpu.astype(int)).max() <= 2


def test_hostile_files_are_named(clips, tmp_path):
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(__import__("pathlib").Path(clips["h264.mp4"]).read_bytes()[:300])
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"not a video" * 50)
    for path in (truncated, garbage):
        with pytest.raises(Exception, match=str(path.name)):
            read("readers.video", batches=1, filenames=[str(path)], sequence_length=2)
    with pytest.raises(Exception, match="max_pixels"):
        read("readers.video", batches=1, filenames=[clips["h264.mp4"]], sequence_length=2, max_pixels=100)
    with pytest.raises(Exception, match="no file holds"):
        read("readers.video", batches=1, filenames=[clips["vp9.webm"]], sequence_length=50)
    with pytest.raises(Exception, match="one way"):
        read("readers.video", batches=1, filenames=[clips["vp9.webm"]], file_root=str(tmp_path), sequence_length=2)


def test_variable_frame_rate_is_refused_unless_asked_for(tmp_path):
    path = str(tmp_path / "vfr.mkv")
    with av.open(path, "w") as output:
        stream = output.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        stream.codec_context.time_base = stream.time_base = __import__("fractions").Fraction(1, 1000)
        pts = 0
        for index, frame in enumerate(clip_frames(12, 32, 32)):
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts, video_frame.time_base = pts, stream.time_base
            pts += 40 if index % 2 else 90
            for packet in stream.encode(video_frame):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    with pytest.raises(Exception, match="variable frame rate"):
        read("readers.video", batches=1, filenames=[path], sequence_length=2)
    frames, = read("readers.video", batches=1, filenames=[path], sequence_length=2, skip_vfr_check=True)[0]
    assert frames[0].shape == (2, 32, 32, 3)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_video_resize_is_the_reader_then_resize(clips, device):
    files = [clips["h264.mp4"], clips["vp9.webm"]]
    resize_args = dict(resize_x=40, resize_y=30, interp_type=types.INTERP_CUBIC)

    @penstock.pipeline_def(batch_size=3, num_threads=2, device_id=0 if device == "gpu" else None, seed=5)
    def pipeline():
        resized, labels = fn.readers.video_resize(device=device, filenames=files, labels=[], sequence_length=3,
                                                  name="Reader", **resize_args)
        frames, same_labels = fn.readers.video(device=device, filenames=files, labels=[], sequence_length=3)
        return resized, fn.resize(frames, **resize_args), labels, same_labels
    with gpu_or_emulated():
        pipe = pipeline()
        try:
            for _ in range(2):
                resized, reference, labels, same_labels = (output.as_cpu() if device == "gpu" else output
                                                            for output in pipe.run())
                for index in range(3):
                    assert np.asarray(resized[index]).shape == (3, 30, 40, 3)
                    np.testing.assert_array_equal(np.asarray(resized[index]), np.asarray(reference[index]))
                    assert np.asarray(labels[index]).tolist() == np.asarray(same_labels[index]).tolist()
            assert pipe.epoch_size("Reader") == pipe.epoch_size()[next(iter(pipe.epoch_size()))]
        finally:
            pipe.close()
