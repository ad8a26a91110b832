"""decoders.video (also experimental.decoders.video): encoded videos (a 1-D uint8 array a sample)
decoded into frame sequences, FHWC uint8 RGB, as DALI's: the frames chosen by ``frames``, or by
``start_frame`` and ``stride`` up to ``end_frame`` or for ``sequence_length`` frames, and the
frames asked for past the video's end padded by ``pad_mode``. The decoding is
penstock.kernels.video_codecs.decode_video, on the CPU (FFmpeg). The 'mixed' form decodes on the
CPU workers too and hands the frames to the GPU (penstock does not use the GPU's video engines yet).
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.kernels.video_codecs import decode_video
from penstock.limits import DEFAULT_MAX_PIXELS
from penstock.operators.decoders.audio import sample_name
from penstock.operators.shared.video import PAD_MODES, padded_index
from penstock.schema import Arg, ArgError, OpSchema, given

NAME = "decoders.video"



def _one_selection(static: dict, per_sample: frozenset) -> None:
    if given(static, per_sample, "frames") and any(
            given(static, per_sample, name) for name in ("start_frame", "sequence_length", "stride", "end_frame")):
        raise ArgError("give the frames as frames, or as start_frame, stride and end_frame or sequence_length, "
                       "not both")
    if given(static, per_sample, "end_frame") and given(static, per_sample, "sequence_length"):
        raise ArgError("give end_frame or sequence_length, not both")


registry.register_schema(OpSchema(
    name=NAME, class_name="decoders.Video", input_names=("encoded",),
    doc="Decodes videos (H.264, HEVC, VP8, VP9, AV1, MPEG-4, MJPEG, ... in MP4, Matroska, WebM, AVI and the other "
        "containers FFmpeg reads) from encoded bytes into sequences of RGB frames, FHWC uint8: every frame, or "
        "those of ``frames``, or from ``start_frame`` by ``stride`` up to ``end_frame`` (exclusive) or for "
        "``sequence_length`` frames; frames asked for past the end are padded by ``pad_mode``.",
    args=(
        Arg("frames", "ints", None, "The indices of the frames to decode, in any order, repeats allowed.",
            per_sample=True, min=0),
        Arg("start_frame", "int", None, "The first frame (default 0).", per_sample=True, min=0),
        Arg("stride", "int", None, "Frames between two decoded ones (default 1).", per_sample=True, min=1),
        Arg("end_frame", "int", None, "The frame to stop before.", per_sample=True, min=0),
        Arg("sequence_length", "int", None, "The number of frames to decode.", per_sample=True, min=1),
        Arg("pad_mode", "str", "constant", "Frames asked for past the end: 'none' (a shorter sequence), "
            "'constant' (fill_value), 'edge' or 'repeat' (the last frame again), 'reflect_1001' or 'symmetric' "
            "(ABC -> ABCCBA), 'reflect_101' or 'reflect' (ABC -> ABCBA).", choices=tuple(PAD_MODES)),
        Arg("fill_value", "ints", (0,), "The padding frames' value with pad_mode='constant': one, or one per "
            "channel, in [0, 255].", min=0, max=255),
        Arg("build_index", "bool", True, "Accepted for DALI compatibility (frames are found by decoding in order)."),
        Arg("affine", "bool", True, "Accepted for DALI compatibility (the mixed form's thread pinning)."),
        Arg("max_pixels", "int", DEFAULT_MAX_PIXELS, "Largest frame accepted, in pixels, as the stream's header "
            "claims it; larger ones are refused before decoding. penstock's own guard: DALI has no such argument.",
            min=1),
    ),
    also_named=(("experimental.decoders.video", "experimental.decoders.Video"),),
    checks=(_one_selection,),
))


def frame_selection(args) -> tuple[list[int] | None, int, int]:
    """(the indices asked for, before padding, or None for every frame from ``start`` by ``stride``
    to the video's end; start; stride)."""
    start, stride = args.start_frame or 0, args.stride or 1
    if args.frames is not None:
        return [int(index) for index in np.ravel(args.frames)], start, stride
    if args.sequence_length is not None:
        return [start + step * stride for step in range(args.sequence_length)], start, stride
    if args.end_frame is not None:
        return list(range(start, args.end_frame, stride)), start, stride
    return None, start, stride


def decoded_sequence(data, args, what: str) -> np.ndarray:
    """One sample's frames, [F, H, W, 3] uint8."""
    data = np.asarray(data)
    if data.ndim != 1 or data.dtype != np.uint8:
        raise TypeError(f"{what}: expected an encoded video (a 1-D uint8 array), got {data.dtype} of shape "
                        f"{data.shape}")
    indices, start, stride = frame_selection(args)
    if indices is not None and not indices:
        raise ValueError(f"{what}: no frames asked for (end_frame {args.end_frame} at or before start_frame {start})")
    wanted = None if indices is None and start == 0 and stride == 1 else \
        set(indices) if indices is not None else None
    frames, count, (height, width) = decode_video(data, what, wanted, max_pixels=args.max_pixels)
    if indices is None:
        indices = list(range(start, count, stride))
    if args.frames is None and start >= count:
        raise ValueError(f"{what}: start_frame {start} is past the video's {count} frames")
    if all(index < count for index in indices):
        return np.stack([frames[index] for index in indices])
    mode = PAD_MODES[args.pad_mode]
    if mode is None:
        kept = [frames[index] for index in indices if index < count]
        if args.frames is not None or not kept:
            raise ValueError(f"{what}: frames {sorted({index for index in indices if index >= count})} are past the "
                             f"video's {count} frames (pad_mode 'none')")
        return np.stack(kept)
    if mode == "constant":
        fill = _fill_frame(args.fill_value, height, width, what)
        return np.stack([frames[index] if index < count else fill for index in indices])
    # the frames past the end are frames of the video, mirrored (or repeated) at its last one
    mapped = [padded_index(index, count, mode) for index in indices]
    missing = {index for index in mapped if index not in frames}
    if missing:
        frames.update(decode_video(data, what, missing, max_pixels=args.max_pixels)[0])
    return np.stack([frames[index] for index in mapped])


def _fill_frame(fill_value, height: int, width: int, what: str) -> np.ndarray:
    values = np.asarray(fill_value, np.uint8).ravel()
    if values.size not in (1, 3):
        raise ValueError(f"{what}: fill_value has {values.size} values for frames of 3 channels; give 1 or 3")
    return np.broadcast_to(values, (height, width, 3))


class VideoDeclaration:
    def declare_outputs(self, inputs):
        data = inputs[0]
        if (data.ndim is not None and data.ndim != 1) or (data.dtype is not None and data.dtype != np.uint8):
            raise TypeError(f"{self.name}: expects encoded videos (1-D uint8 arrays), but its input holds "
                            f"{data.ndim}-dimensional {data.dtype} samples")
        return OutputSpec(np.dtype(np.uint8), 4, "FHWC", channels=3)


@registry.register(NAME, "cpu")
class Video(VideoDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return decoded_sequence(inputs[0], args, sample_name(self.name, sample))


@registry.register(NAME, "mixed", requires=devices.gpu_problem)
class VideoMixed(VideoDeclaration, BatchOperator):
    """Decoded on the CPU workers, each sample's frames then copied to the device."""

    def run_batch(self, inputs, args, batch):
        from penstock.runtime.pinned import to_device
        samples = list(inputs[0])
        sequences: list = [None] * len(samples)

        def decode(index):
            def call():
                where = batch.source_infos[index] if batch.source_infos else ""
                what = f"{self.name}: sample {index}" + (f" ('{where}')" if where else "")
                sequences[index] = decoded_sequence(samples[index], args[index], what)
            return call
        batch.run_on_workers([decode(index) for index in range(len(samples))])
        return to_device(batch.device, sequences) if sequences else []
