"""decoders.video against the frames written into clips made here with FFmpeg's encoders (PyAV):
VP9 in WebM, MJPEG in AVI, H.264 in MP4 and MPEG-4 in AVI, smooth content, so a lossy codec keeps
each frame within a few levels (mean 3, as stated per case); frame selection and padding against
the index arithmetic of DALI's documentation; hostile data; the mixed form against the CPU form.
DALI's own CPU decoder (VP8, VP9 and MJPEG) is compared in the conformance tier."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_or_emulated, run_batches
from video_clips import clip_frames, encoded_clip

import penstock
from penstock import fn

av = pytest.importorskip("av")

FRAMES, HEIGHT, WIDTH = 8, 48, 64


def source_frames() -> np.ndarray:
    return clip_frames(FRAMES, HEIGHT, WIDTH)


def encoded(codec: str, container: str, pixel_format: str = "yuv420p", options=None, frames: int = FRAMES):
    return encoded_clip(codec, container, pixel_format, frames, HEIGHT, WIDTH, options=options)


CLIPS = {
    "vp9-webm": lambda: encoded("libvpx-vp9", "webm", options={"crf": "10", "b": "0"}),
    "mjpeg-avi": lambda: encoded("mjpeg", "avi", "yuvj420p", options={"q:v": "2"}),
    "h264-mp4": lambda: encoded("libx264", "mp4", options={"crf": "10"}),
    "mpeg4-avi": lambda: encoded("mpeg4", "avi", options={"b": "4000000"}),
}


def decoded(samples: list, device: str = "cpu", **kwargs) -> list[np.ndarray]:
    with gpu_or_emulated():
        (batch,), = run_batches(lambda data: fn.decoders.video(data, device=device, **kwargs), samples, num_threads=1,
                                device_id=0 if device == "mixed" else None)
    assert batch.layout() == "FHWC"
    return [np.asarray(sample) for sample in (batch.as_cpu() if device == "mixed" else batch)]


@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_every_frame_is_the_frame_written(clip):
    got, = decoded([CLIPS[clip]()])
    assert got.shape == (FRAMES, HEIGHT, WIDTH, 3) and got.dtype == np.uint8
    difference = np.abs(got.astype(np.int64) - source_frames().astype(np.int64))
    assert difference.mean() <= 3.0, clip


@pytest.mark.parametrize("kwargs, frames", [
    (dict(start_frame=2, sequence_length=3), [2, 3, 4]),
    (dict(start_frame=1, stride=3), [1, 4, 7]),
    (dict(end_frame=5, stride=2), [0, 2, 4]),
    (dict(frames=[5, 0, 5, 7]), [5, 0, 5, 7]),
    (dict(start_frame=5, sequence_length=6, pad_mode="edge"), [5, 6, 7, 7, 7, 7]),
    (dict(start_frame=5, sequence_length=6, pad_mode="repeat"), [5, 6, 7, 7, 7, 7]),
    (dict(start_frame=5, sequence_length=6, pad_mode="reflect_1001"), [5, 6, 7, 7, 6, 5]),
    (dict(start_frame=5, sequence_length=6, pad_mode="reflect_101"), [5, 6, 7, 6, 5, 4]),
    (dict(start_frame=3, sequence_length=6, stride=2, pad_mode="reflect_101"), [3, 5, 7, 5, 3, 1]),
    (dict(start_frame=5, sequence_length=6, pad_mode="none"), [5, 6, 7]),
])
def test_frames_are_chosen_and_padded_as_dali_documents(kwargs, frames):
    clip = CLIPS["vp9-webm"]()
    every, = decoded([clip])
    got, = decoded([clip], **kwargs)
    np.testing.assert_array_equal(got, every[frames])


def test_constant_padding_takes_the_fill_value():
    got, = decoded([CLIPS["mjpeg-avi"]()], start_frame=6, sequence_length=4, fill_value=[10, 20, 30])
    every, = decoded([CLIPS["mjpeg-avi"]()])
    np.testing.assert_array_equal(got[:2], every[6:])
    assert np.all(got[2:] == np.uint8([10, 20, 30]))


def test_videos_of_different_lengths_in_one_batch():
    short = encoded("libvpx-vp9", "webm", frames=3)
    got = decoded([short, CLIPS["mjpeg-avi"]()])
    assert [sample.shape for sample in got] == [(3, HEIGHT, WIDTH, 3), (FRAMES, HEIGHT, WIDTH, 3)]


@pytest.mark.parametrize("data, message", [
    (np.zeros(0, np.uint8), "the encoded data is empty"),
    (np.frombuffer(b"not a video at all" * 50, np.uint8).copy(), "cannot decode video"),
])
def test_bad_data_is_refused_naming_the_sample(data, message):
    with pytest.raises(penstock.PipelineError, match=f"decoders.video: sample 0.*{message}"):
        decoded([data])


def test_a_truncated_video_is_refused_or_gives_the_frames_it_holds():
    clip = CLIPS["h264-mp4"]()
    try:
        got, = decoded([clip[:len(clip) // 2]])
    except penstock.PipelineError as error:
        assert "decoders.video: sample 0" in str(error)
    else:
        assert 0 < len(got) <= FRAMES


def test_a_frame_larger_than_max_pixels_is_refused_before_decoding():
    with pytest.raises(penstock.PipelineError, match="claims 48 x 64 = 3,072 pixels, more than max_pixels=1,000"):
        decoded([CLIPS["vp9-webm"]()], max_pixels=1000)


def test_start_frame_past_the_end_and_conflicting_selections_are_refused():
    with pytest.raises(penstock.PipelineError, match="start_frame 20 is past the video's 8 frames"):
        decoded([CLIPS["vp9-webm"]()], start_frame=20, sequence_length=2)
    with pytest.raises(Exception, match="give the frames as frames"):
        decoded([CLIPS["vp9-webm"]()], frames=[1], start_frame=2)


def test_the_mixed_form_gives_the_cpu_frames():
    clips = [CLIPS["vp9-webm"](), CLIPS["mpeg4-avi"]()]
    for on_cpu, on_gpu in zip(decoded(clips, start_frame=1, sequence_length=5, pad_mode="edge"),
                              decoded(clips, "mixed", start_frame=1, sequence_length=5, pad_mode="edge")):
        np.testing.assert_array_equal(on_gpu, on_cpu)
