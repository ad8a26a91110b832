"""Videos decoded on the GPU's video engines (NVDEC) through NVIDIA's PyNvVideoCodec, which bundles
FFmpeg's demuxers and drives the driver's decoder (H.264, HEVC, VP9, AV1, ... as the GPU has them).

Frames come out as NV12 in device memory; penstock converts them itself (``frames_from_yuv420``,
the CPU path's arithmetic on the GPU), so that both devices give the same colours. Each thread
keeps a few decoders open (one per recent video), on the thread's CUDA stream: reopening one costs
more than the frames of a short clip.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from penstock.kernels.video_codecs import VideoDecodeError, frames_from_yuv420
from penstock.limits import DEFAULT_MAX_PIXELS, checked_pixels

# open decoders a thread keeps (each holds NVDEC surfaces in device memory)
DECODERS_PER_THREAD = 2

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
        stream = torch.cuda.current_stream(device)
        try:
            self.decoder = nvc.SimpleDecoder(source, gpu_id=device.index or 0, cuda_stream=stream.cuda_stream,
                                             use_device_memory=True, output_color_type=nvc.OutputColorType.NATIVE)
            meta = self.decoder.get_stream_metadata()
        except Exception as error:  # PyNvVideoCodec's own exception types, per failure
            raise _decode_error(error, what) from None
        self.height, self.width, self.frames = int(meta.height), int(meta.width), int(meta.num_frames)
        checked_pixels(f"{what}: its header", self.height, self.width, max_pixels)


def _decode_error(error: Exception, what: str) -> VideoDecodeError:
    return VideoDecodeError(f"{what}: cannot decode video on the GPU: {_first_line(error)}")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return " ".join(text.split("\n")[:2]) if text else type(error).__name__


def _decoder(key, source, device, what: str, max_pixels) -> _Decoder:
    cache = getattr(_local, "decoders", None)
    if cache is None:
        cache = _local.decoders = OrderedDict()
    found = cache.get((key, device))
    if found is not None:
        cache.move_to_end((key, device))
        return found
    made = _Decoder(source, device, what, max_pixels)
    cache[(key, device)] = made
    while len(cache) > DECODERS_PER_THREAD:
        cache.popitem(last=False)
    return made


def decode_frames(source, indices, device, what: str, *, key=None, image_type: str = "rgb",
                  rounding: str = "nearest", full_range: bool = False, max_pixels: int | None = DEFAULT_MAX_PIXELS):
    """The frames ``indices`` (display order, repeats allowed) of a video, a path or encoded
    bytes, decoded by NVDEC on ``device`` (a torch device): uint8 [F, H, W, 3] on the device, in
    the order asked for. ``key`` names the video for the thread's open decoders (a path names
    itself). Converted on the calling thread's current stream, on which NVDEC also decodes."""
    import torch
    decoder = _decoder(key if key is not None else source, source, device, what, max_pixels)
    wanted = sorted(set(int(i) for i in indices))
    if wanted and (wanted[0] < 0 or wanted[-1] >= decoder.frames):
        raise VideoDecodeError(f"{what}: frames {[i for i in wanted if not 0 <= i < decoder.frames][:8]} are outside "
                               f"its {decoder.frames} frames")
    try:
        decoded = decoder.decoder.get_batch_frames_by_index(wanted)
    except Exception as error:
        raise _decode_error(error, what) from None
    if len(decoded) != len(wanted):
        raise VideoDecodeError(f"{what}: cannot decode video on the GPU: {len(decoded)} of the {len(wanted)} frames "
                               "asked for were decoded (a truncated or corrupt stream)")
    # the decoder reuses its surfaces: its frames are read (converted) before it decodes again
    planes = torch.stack([torch.from_dlpack(frame) for frame in decoded])
    height, width = decoder.height, decoder.width
    if planes.dtype != torch.uint8 or tuple(planes.shape[1:]) != (height * 3 // 2, width):
        raise VideoDecodeError(f"{what}: NVDEC gave frames of {tuple(planes.shape[1:])} {planes.dtype}, not 8-bit "
                               f"4:2:0 of {height} x {width} (decode it on the CPU)")
    luma = planes[:, :height].float()
    chroma = planes[:, height:].reshape(len(wanted), height // 2, width // 2, 2).permute(0, 3, 1, 2).float()
    chroma = torch.nn.functional.interpolate(chroma, size=(height, width), mode="bilinear", align_corners=False)
    frames = frames_from_yuv420(torch, luma, chroma[:, 0], chroma[:, 1], full_range, image_type, rounding)
    if wanted == list(indices):
        return frames
    position = {index: place for place, index in enumerate(wanted)}
    return frames[torch.as_tensor([position[int(i)] for i in indices], device=frames.device)]
