"""Videos decoded from memory on the CPU through FFmpeg (the ``av`` binding, PyAV, which bundles
FFmpeg's demuxers and decoders: H.264, HEVC, VP8, VP9, AV1, MPEG-4, MJPEG, ... in MP4, Matroska,
WebM, AVI, ...).

``decode_video`` is what ``decoders.video`` runs per sample: the container's header read first and
its frame size checked against a pixel limit before anything is decoded, then the frames asked for,
as RGB uint8 [F, H, W, 3]. 4:2:0 frames are converted as DALI's CPU decoder converts them (BT.601,
limited range, or full range for JPEG-range streams; chroma upsampled bilinearly, centres aligned),
other pixel formats by FFmpeg's own converter.
"""
from __future__ import annotations

import io
import numpy as np

from penstock.limits import DEFAULT_MAX_PIXELS, checked_pixels

# BT.601: R = Y + 1.402 V, G = Y - 0.344136 U - 0.714136 V, B = Y + 1.772 U (U and V centred on 128)
_LIMITED_LUMA, _LIMITED_CHROMA = np.float32(255 / 219), np.float32(255 / 224)


class VideoDecodeError(ValueError):
    """Data that is not a video FFmpeg can read, or a truncated or corrupt one."""


def _rgb_of(frame) -> np.ndarray:
    """A decoded frame as RGB uint8 [H, W, 3]."""
    import cv2
    name = frame.format.name
    if name not in ("yuv420p", "yuvj420p") or frame.height % 2 or frame.width % 2:
        return frame.to_ndarray(format="rgb24")
    height, width = frame.height, frame.width
    planes = frame.to_ndarray(format=name)  # Y, then U and V at half resolution, as rows of the width
    luma = planes[:height].astype(np.float32)
    chroma = [cv2.resize(part.reshape(height // 2, width // 2).astype(np.float32), (width, height),
                         interpolation=cv2.INTER_LINEAR)
              for part in (planes[height:height + height // 4], planes[height + height // 4:])]
    full_range = name == "yuvj420p" or int(getattr(frame, "color_range", 0) or 0) == 2
    if full_range:
        y, u, v = luma, chroma[0] - 128, chroma[1] - 128
    else:
        y, u, v = (luma - 16) * _LIMITED_LUMA, (chroma[0] - 128) * _LIMITED_CHROMA, (chroma[1] - 128) * _LIMITED_CHROMA
    rgb = np.stack([y + np.float32(1.402) * v, y - np.float32(0.344136) * u - np.float32(0.714136) * v,
                    y + np.float32(1.772) * u], axis=-1)
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def decode_video(data, what: str, wanted: set[int] | None, *,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS) -> tuple[dict[int, np.ndarray], int, tuple[int, int]]:
    """The frames ``wanted`` (indices; None: every frame) of an encoded video: (RGB frame [H, W, 3]
    by index, for those the video holds; the number of frames decoded, which is the video's length
    where it ends before the last index wanted; (height, width)). Decoding stops after the last
    index wanted.

    Refused with VideoDecodeError naming ``what``: data FFmpeg cannot read, a container without
    video, a corrupt stream, frames that change size; with SizeClaimError: a frame size over
    ``max_pixels``, before decoding."""
    import av
    encoded = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else \
        np.ascontiguousarray(data, np.uint8).tobytes()
    if not encoded:
        raise VideoDecodeError(f"{what}: cannot decode video: the encoded data is empty")
    try:
        container = av.open(io.BytesIO(encoded), mode="r")
    except (av.error.FFmpegError, ValueError) as error:
        raise VideoDecodeError(f"{what}: cannot decode video: {error}") from None
    frames: dict[int, np.ndarray] = {}
    with container:
        if not container.streams.video:
            raise VideoDecodeError(f"{what}: cannot decode video: the container holds no video stream")
        stream = container.streams.video[0]
        height, width = int(stream.codec_context.height or 0), int(stream.codec_context.width or 0)
        checked_pixels(f"{what}: its header", height, width, max_pixels)
        last = None if wanted is None else max(wanted, default=-1)
        count = 0
        try:
            for frame in container.decode(stream):
                if last is not None and count > last:
                    break
                if wanted is None or count in wanted:
                    frames[count] = _rgb_of(frame)
                    if frames[count].shape[:2] != (height, width):
                        raise VideoDecodeError(f"{what}: frame {count} is {frames[count].shape[0]} x "
                                               f"{frames[count].shape[1]}, the stream's header says {height} x "
                                               f"{width} (frames that change size are not supported)")
                count += 1
        except av.error.FFmpegError as error:
            raise VideoDecodeError(f"{what}: cannot decode video: {error} (after {count} frames)") from None
    if not count:
        raise VideoDecodeError(f"{what}: cannot decode video: the stream has no frames")
    return frames, count, (height, width)
