"""Videos decoded on the GPU's video engines (NVDEC) through NVIDIA's PyNvVideoCodec, which bundles
FFmpeg's demuxers and drives the driver's decoder (H.264, HEVC, VP9, AV1, ... as the GPU has them).

Frames come out as NV12 in device memory; penstock converts them itself, in one Triton pass a
frame (kernels.triton_video, the CPU path's arithmetic), so that both devices give the same colours. Each thread
keeps one decoder open, on the thread's CUDA stream, and moves it from video to video: a new one
costs about as much as decoding a short clip.
"""
from __future__ import annotations

import threading

from penstock.kernels.video_codecs import VideoDecodeError
from penstock.limits import DEFAULT_MAX_PIXELS, checked_pixels

_local = threading.local()


def nvdec_problem() -> str | None:
    """Why NVDEC decoding is not available here, or None."""
    try:
        import PyNvVideoCodec  # noqa: F401
    except ImportError:
        return "PyNvVideoCodec is not installed (pip install PyNvVideoCodec)"
    except RuntimeError as error:  # raised on import where the driver has no video engine library
        return f"PyNvVideoCodec cannot reach the GPU's video engines: {str(error).splitlines()[0]}"
    return None


class _Decoder:
    def __init__(self, source, device, what: str, max_pixels):
        import PyNvVideoCodec as nvc
        import torch
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        self.device = device
        try:
            self.decoder = nvc.SimpleDecoder(source, gpu_id=device.index or 0, cuda_stream=stream,
                                             use_device_memory=True, output_color_type=nvc.OutputColorType.NATIVE)
        except Exception as error:  # PyNvVideoCodec's own exception types, per failure
            raise _decode_error(error, what) from None
        self.described(what, max_pixels)

    def described(self, what: str, max_pixels) -> None:
        try:
            meta = self.decoder.get_stream_metadata()
        except Exception as error:
            raise _decode_error(error, what) from None
        self.height, self.width, self.frames = int(meta.height), int(meta.width), int(meta.num_frames)
        checked_pixels(f"{what}: its header", self.height, self.width, max_pixels)


def _decode_error(error: Exception, what: str) -> VideoDecodeError:
    return VideoDecodeError(f"{what}: cannot decode video on the GPU: {_first_line(error)}")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return " ".join(text.split("\n")[:2]) if text else type(error).__name__


def _decoder(key, source, device, what: str, max_pixels) -> _Decoder:
    """The thread's decoder, moved to ``source`` when it holds another video: NVDEC's session is
    kept (reconfigured), which costs a little over a frame, where a new one costs tens of frames."""
    held = getattr(_local, "decoder", None)
    if held is not None and held.key == (key, device):
        return held
    _local.decoder = None  # until it holds ``source``
    if held is not None and held.device == device and isinstance(source, str):
        try:
            held.decoder.reconfigure_decoder(source)
        except Exception:  # a change NVDEC cannot reconfigure to (another codec): a new session
            pass
        else:
            held.described(what, max_pixels)
            held.key = (key, device)
            _local.decoder = held
            return held
    made = _Decoder(source, device, what, max_pixels)
    made.key = (key, device)
    _local.decoder = made
    return made


def drop_thread_decoder() -> None:
    """Forgets the calling thread's decoder (after an error, which may have left it unusable)."""
    _local.decoder = None


def decode_frames(source, indices, device, what: str, *, key=None, image_type: str = "rgb",
                  rounding: str = "nearest", full_range: bool = False, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                  run_from: int | None = None):
    """The frames ``indices`` (display order, repeats allowed) of a video, a path or encoded
    bytes, decoded by NVDEC on ``device`` (a torch device): uint8 [F, H, W, 3] on the device, in
    the order asked for. ``key`` names the video for the thread's open decoders (a path names
    itself). Converted on the calling thread's current stream, on which NVDEC also decodes.
    ``run_from`` (a key frame's display index): where NVDEC fails to seek to the frames (open
    GOPs, whose leading frames need the GOP before them), every frame from there is decoded
    instead, and the ones asked for kept."""
    import torch

    from penstock.kernels.triton_video import nv12_to_rgb
    decoder = _decoder(key if key is not None else source, source, device, what, max_pixels)
    wanted = sorted(set(int(i) for i in indices))
    if wanted and (wanted[0] < 0 or wanted[-1] >= decoder.frames):
        raise VideoDecodeError(f"{what}: frames {[i for i in wanted if not 0 <= i < decoder.frames][:8]} are outside "
                               f"its {decoder.frames} frames")
    try:
        decoded = decoder.decoder.get_batch_frames_by_index(wanted)
    except Exception as error:
        if run_from is None or not 0 <= run_from < wanted[0]:
            raise _decode_error(error, what) from None
        run = list(range(run_from, wanted[-1] + 1))
        try:
            decoded = decoder.decoder.get_batch_frames_by_index(run)
        except Exception as again:
            raise _decode_error(again, what) from None
        if len(decoded) == len(run):
            decoded = [decoded[index - run[0]] for index in wanted]
    if len(decoded) != len(wanted):
        raise VideoDecodeError(f"{what}: cannot decode video on the GPU: {len(decoded)} of the {len(wanted)} frames "
                               "asked for were decoded (a truncated or corrupt stream)")
    height, width = decoder.height, decoder.width
    frames = torch.empty((len(wanted), height, width, 3), dtype=torch.uint8, device=device)
    for place, frame in enumerate(decoded):  # read before the decoder reuses its surfaces
        planes = torch.from_dlpack(frame)
        if planes.dtype != torch.uint8 or tuple(planes.shape) != (height * 3 // 2, width) or planes.stride(1) != 1:
            raise VideoDecodeError(f"{what}: NVDEC gave frames of {tuple(planes.shape)} {planes.dtype}, not 8-bit "
                                   f"4:2:0 of {height} x {width}")
        nv12_to_rgb(planes, frames[place], full_range, image_type, rounding)
    if wanted == list(indices):
        return frames
    position = {index: place for place, index in enumerate(wanted)}
    return frames[torch.as_tensor([position[int(i)] for i in indices], device=frames.device)]
