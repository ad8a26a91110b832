"""kernels.nvdec's part of the work, on any machine: PyNvVideoCodec stood in for by a decoder that
gives FFmpeg's NV12 planes (as NVDEC gives them), so that the conversion to RGB, the frame order,
repeats, the thread's one decoder moved from video to video, and the errors are checked against
the CPU path (kernels.video_codecs), to the level. The real engine is exercised by the reader's
tests on a GPU machine."""
from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
av = pytest.importorskip("av")

# where the conversion kernel runs: compiled on a GPU, else in Triton's interpreter on the CPU
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class _Frame:
    def __init__(self, planes):
        self.planes = planes

    def __dlpack__(self, **kwargs):
        return self.planes.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.planes.__dlpack_device__()


class FakeSimpleDecoder:
    """PyNvVideoCodec.SimpleDecoder's calls that kernels.nvdec makes, answered by FFmpeg."""
    created = 0

    def __init__(self, source, **kwargs):
        FakeSimpleDecoder.created += 1
        self._open(source)

    def _open(self, source):
        with av.open(source) as container:
            self.frames = [frame.to_ndarray(format="nv12") for frame in container.decode(video=0)]
            stream = container.streams.video[0]
            self.height, self.width = stream.codec_context.height, stream.codec_context.width

    def get_stream_metadata(self):
        return types.SimpleNamespace(height=self.height, width=self.width, num_frames=len(self.frames))

    fail_seeks = False  # NVDEC's failure to seek into an open GOP: only runs from a frame it may start at succeed

    def get_batch_frames_by_index(self, indices):
        if self.fail_seeks and indices != list(range(indices[0], indices[-1] + 1)):
            raise RuntimeError("GetFramesByIdxList :  Error code : 1")
        return [_Frame(torch.from_numpy(self.frames[i].copy()).to(DEVICE)) for i in indices]

    def reconfigure_decoder(self, source):
        self._open(source)


@pytest.fixture
def fake_nvdec(monkeypatch):
    module = types.SimpleNamespace(SimpleDecoder=FakeSimpleDecoder,
                                   OutputColorType=types.SimpleNamespace(NATIVE="native"))
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", module)
    from penstock.kernels import nvdec
    monkeypatch.setattr(nvdec, "_local", threading.local())
    return nvdec


def clip(tmp_path, name: str, seed: int, frames: int = 12) -> str:
    from video_clips import clip_frames
    path = str(tmp_path / name)
    with av.open(path, "w") as output:
        stream = output.add_stream("libx264", rate=25, options={"g": "4"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for frame in clip_frames(frames, 48, 64, seed):
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    return path


@pytest.mark.parametrize("image_type, rounding", [("rgb", "nearest"), ("rgb", "truncate"), ("ycbcr", "nearest")])
def test_frames_are_the_cpu_paths_in_the_order_asked_for(fake_nvdec, tmp_path, image_type, rounding):
    from penstock.kernels.video_codecs import decode_indexed, video_index
    path = clip(tmp_path, "a.mp4", 0)
    wanted = [5, 2, 2, 9]
    got = fake_nvdec.decode_frames(path, wanted, DEVICE, "a", image_type=image_type, rounding=rounding).cpu()
    expected = decode_indexed(path, video_index(path, "a"), wanted, "a", image_type=image_type, rounding=rounding)
    assert got.dtype == torch.uint8 and tuple(got.shape) == (4, 48, 64, 3)
    for place, index in enumerate(wanted):
        assert np.abs(got[place].numpy().astype(int) - expected[index].astype(int)).max() <= 1


def test_one_decoder_a_thread_moves_from_video_to_video(fake_nvdec, tmp_path):
    first, second = clip(tmp_path, "a.mp4", 0), clip(tmp_path, "b.mp4", 3, frames=7)
    created = FakeSimpleDecoder.created
    device = DEVICE
    a = fake_nvdec.decode_frames(first, [0, 1], device, "a")
    b = fake_nvdec.decode_frames(second, [6], device, "b")
    again = fake_nvdec.decode_frames(first, [0, 1], device, "a")
    assert FakeSimpleDecoder.created == created + 1
    assert torch.equal(a, again) and tuple(b.shape) == (1, 48, 64, 3)
    with pytest.raises(ValueError, match="outside its 7 frames"):
        fake_nvdec.decode_frames(second, [7], device, "b")
    with pytest.raises(ValueError, match="max_pixels"):
        fake_nvdec.decode_frames(clip(tmp_path, "c.mp4", 1), [0], device, "c", max_pixels=100)


def test_a_failed_seek_decodes_the_run_from_the_key_frame_given(fake_nvdec, tmp_path, monkeypatch):
    path = clip(tmp_path, "a.mp4", 0)
    device = DEVICE
    expected = fake_nvdec.decode_frames(path, [5, 7, 9], device, "a")
    monkeypatch.setattr(FakeSimpleDecoder, "fail_seeks", True)
    fake_nvdec.drop_thread_decoder()
    with pytest.raises(ValueError, match="Error code : 1"):
        fake_nvdec.decode_frames(path, [5, 7, 9], device, "a")
    assert torch.equal(fake_nvdec.decode_frames(path, [5, 7, 9], device, "a", run_from=4), expected)


@pytest.mark.parametrize("image_type, rounding, full_range", [("rgb", "nearest", False), ("rgb", "truncate", False),
                                                              ("rgb", "nearest", True), ("ycbcr", "nearest", False)])
def test_the_nv12_kernel_is_the_cpu_paths_conversion(image_type, rounding, full_range):
    """kernels.triton_video against the CPU path (OpenCV's bilinear chroma, frames_from_yuv420) on
    random planes, rows padded to a wider pitch as NVDEC's surfaces are: within a level."""
    import cv2

    from penstock.kernels.triton_video import nv12_to_rgb
    from penstock.kernels.video_codecs import frames_from_yuv420
    height, width, pitch = 6, 10, 16
    rng = np.random.default_rng(3)
    surface = rng.integers(0, 256, (height * 3 // 2, pitch), dtype=np.uint8)
    luma = surface[:height, :width].astype(np.float32)
    chroma = surface[height:, :width].reshape(height // 2, width // 2, 2).astype(np.float32)
    u, v = (cv2.resize(np.ascontiguousarray(chroma[..., k]), (width, height), interpolation=cv2.INTER_LINEAR)
            for k in (0, 1))
    expected = frames_from_yuv420(np, luma, u, v, full_range, image_type, rounding)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    planes = torch.from_numpy(surface).to(device)[:, :width]
    got = nv12_to_rgb(planes, torch.empty((height, width, 3), dtype=torch.uint8, device=device), full_range,
                      image_type, rounding).cpu().numpy()
    assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1
