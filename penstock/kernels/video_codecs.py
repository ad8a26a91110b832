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
from typing import NamedTuple
import numpy as np

from penstock.limits import DEFAULT_MAX_PIXELS, checked_pixels

# BT.601: R = Y + 1.402 V, G = Y - 0.344136 U - 0.714136 V, B = Y + 1.772 U (U and V centred on 128)
_LIMITED_LUMA, _LIMITED_CHROMA = np.float32(255 / 219), np.float32(255 / 224)


class VideoDecodeError(ValueError):
    """Data that is not a video FFmpeg can read, or a truncated or corrupt one."""


def frames_from_yuv420(xp, luma, chroma_u, chroma_v, full_range: bool, image_type: str = "rgb",
                       rounding: str = "nearest"):
    """RGB (or YCbCr) uint8 [..., H, W, 3] of 4:2:0 planes, numpy or torch: ``luma`` [..., H, W]
    and the chroma planes already upsampled to it, all float32. BT.601 in the stream's range, as
    DALI converts; ``rounding`` "nearest" (its decoders) or "truncate" (its legacy readers.video)."""
    if image_type == "ycbcr":
        channels = (luma, chroma_u, chroma_v)
    else:
        if full_range:
            y, u, v = luma, chroma_u - 128, chroma_v - 128
        else:
            y, u, v = (luma - 16) * _LIMITED_LUMA, (chroma_u - 128) * _LIMITED_CHROMA, (chroma_v - 128) * _LIMITED_CHROMA
        channels = (y + float(np.float32(1.402)) * v,
                    y - float(np.float32(0.344136)) * u - float(np.float32(0.714136)) * v,
                    y + float(np.float32(1.772)) * u)
    values = xp.stack(channels, -1)
    values = xp.round(values) if rounding == "nearest" else values
    if xp is np:
        return np.clip(values, 0, 255).astype(np.uint8)
    return values.clamp_(0, 255).to(xp.uint8)


def _rgb_of(frame, image_type: str = "rgb", rounding: str = "nearest") -> np.ndarray:
    """A decoded frame as RGB (or YCbCr) uint8 [H, W, 3]."""
    import cv2
    name = frame.format.name
    if name not in ("yuv420p", "yuvj420p") or frame.height % 2 or frame.width % 2:
        if image_type == "ycbcr":
            return frame.to_ndarray(format="yuv444p").transpose(1, 2, 0).copy()
        return frame.to_ndarray(format="rgb24")
    height, width = frame.height, frame.width
    planes = frame.to_ndarray(format=name)  # Y, then U and V at half resolution, as rows of the width
    luma = planes[:height].astype(np.float32)
    chroma = [cv2.resize(part.reshape(height // 2, width // 2).astype(np.float32), (width, height),
                         interpolation=cv2.INTER_LINEAR)
              for part in (planes[height:height + height // 4], planes[height + height // 4:])]
    full_range = name == "yuvj420p" or int(getattr(frame, "color_range", 0) or 0) == 2
    return frames_from_yuv420(np, luma, chroma[0], chroma[1], full_range, image_type, rounding)


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


class VideoIndex(NamedTuple):
    """What a video file holds, from its packets (no frame decoded): the frames' presentation
    times in display order (``pts``, in ``time_base`` units), their times in seconds, and the
    frame size its header claims."""
    pts: np.ndarray
    seconds: np.ndarray
    height: int
    width: int
    frame_rate: float
    time_base: tuple[int, int]  # (numerator, denominator) of a pts unit, in seconds
    key_pts: np.ndarray  # the key frames' presentation times, ascending
    key_dts: np.ndarray  # and their decoding times, where a seek lands on them in any container

    @property
    def frames(self) -> int:
        return len(self.pts)


def _open(source, what: str):
    import av
    try:
        container = av.open(source, mode="r")
    except (av.error.FFmpegError, ValueError, OSError) as error:
        raise VideoDecodeError(f"{what}: cannot read video: {error}") from None
    if not container.streams.video:
        container.close()
        raise VideoDecodeError(f"{what}: cannot read video: the container holds no video stream")
    return container


def video_index(path: str, what: str, *, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                check_frame_rate: bool = True) -> VideoIndex:
    """The index of the video at ``path``: its packets read, not decoded, so a container's claim
    of a frame count costs nothing. Refused with VideoDecodeError naming ``what``: a file FFmpeg
    cannot read, without video or frames, or (``check_frame_rate``) of variable frame rate; with
    SizeClaimError: a frame size over ``max_pixels``."""
    import av
    with _open(path, what) as container:
        stream = container.streams.video[0]
        height, width = int(stream.codec_context.height or 0), int(stream.codec_context.width or 0)
        checked_pixels(f"{what}: its header", height, width, max_pixels)
        try:
            packets = [(packet.pts if packet.pts is not None else packet.dts, packet.dts, packet.is_keyframe)
                       for packet in container.demux(stream) if packet.size]
        except av.error.FFmpegError as error:
            raise VideoDecodeError(f"{what}: cannot read video: {error}") from None
        time_base = (stream.time_base.numerator, stream.time_base.denominator) if stream.time_base else (0, 1)
        rate = float(stream.average_rate or stream.guessed_rate or 0)
    if not packets:
        raise VideoDecodeError(f"{what}: cannot read video: the stream has no frames")
    pts = [value for value, _, _ in packets]
    none = np.zeros(0, np.int64)
    if any(value is None for value in pts):  # no timing at all: frames in order, at the stated rate
        order = np.arange(len(pts), dtype=np.int64)
        seconds = order / rate if rate else order.astype(np.float64)
        return VideoIndex(order, seconds, height, width, rate, time_base, none, none)
    keys = sorted((value, dts if dts is not None else value) for value, dts, key in packets if key)
    order = np.sort(np.asarray(pts, np.int64))
    steps = np.diff(order)
    if check_frame_rate and len(steps) > 1 and steps.max() - steps.min() > max(1, int(0.01 * np.median(steps))):
        raise VideoDecodeError(f"{what}: variable frame rate (frames {steps.min()} to {steps.max()} time units "
                               f"apart): decoding by frame number needs a constant rate (skip_vfr_check=True "
                               f"reads it anyway)")
    return VideoIndex(order, order * (time_base[0] / time_base[1]), height, width, rate, time_base,
                      np.asarray([value for value, _ in keys], np.int64), np.asarray([dts for _, dts in keys], np.int64))


def decode_indexed(path: str, index: VideoIndex, wanted, what: str, *, image_type: str = "rgb",
                   rounding: str = "nearest") -> dict[int, np.ndarray]:
    """The frames ``wanted`` (display indices within ``index``) of the video at ``path``, decoded
    from the key frame before the first of them (a seek), as uint8 [H, W, 3] by index; from the
    start where that seek misses some (a stream without key frames in its index)."""
    wanted = sorted(set(int(i) for i in wanted))
    if not wanted:
        return {}
    first = index.pts[wanted[0]]
    keys = np.searchsorted(index.key_pts, first, side="right") - 1
    seek_to = int(index.key_dts[keys]) if keys >= 0 and wanted[0] > 0 else None
    frames = _decode_from(path, index, wanted, what, image_type, rounding, seek_to)
    if len(frames) < len(wanted) and seek_to is not None:
        frames = _decode_from(path, index, wanted, what, image_type, rounding, None)
    missing = [position for position in wanted if position not in frames]
    if missing:
        raise VideoDecodeError(f"{what}: cannot decode video: frames {missing[:8]} of its {index.frames} could not "
                               "be decoded (a truncated or corrupt stream)")
    return frames


def _decode_from(path: str, index: VideoIndex, wanted: list[int], what: str, image_type: str, rounding: str,
                 seek_to: int | None) -> dict[int, np.ndarray]:
    import av
    by_pts = {int(value): position for position, value in enumerate(index.pts)}
    frames: dict[int, np.ndarray] = {}
    with _open(path, what) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            if seek_to is not None:
                container.seek(seek_to, stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                position = by_pts.get(frame.pts)
                if position is None:
                    continue
                if position in wanted and position not in frames:
                    frames[position] = _checked(_rgb_of(frame, image_type, rounding), index, position, what)
                if position >= wanted[-1] and len(frames) == len(wanted):
                    break
        except av.error.FFmpegError as error:
            raise VideoDecodeError(f"{what}: cannot decode video: {error}") from None
    return frames


def _checked(frame: np.ndarray, index: VideoIndex, position: int, what: str) -> np.ndarray:
    if frame.shape[:2] != (index.height, index.width):
        raise VideoDecodeError(f"{what}: frame {position} is {frame.shape[0]} x {frame.shape[1]}, the stream's header "
                               f"says {index.height} x {index.width} (frames that change size are not supported)")
    return frame
