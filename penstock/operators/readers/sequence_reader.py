"""``readers.sequence``: sequences of frames (image files in a folder per stream), decoded."""
from __future__ import annotations

import os

import numpy as np

from penstock import limits, registry, types
from penstock.capabilities import DecodesOnLoad
from penstock.contract import OutputSpec, SampleContext
from penstock.kernels import image_codecs
from penstock.operators.readers.file_lists import FILE_EXTENSIONS, name_matcher
from penstock.operators.shared.readers import READER_ARGS, ShardedReader, read_bytes, sharded_epochs
from penstock.schema import REQUIRED, Arg, OpSchema


IMAGE_EXTENSIONS = tuple(extension for extension in FILE_EXTENSIONS if extension not in (".flac", ".ogg", ".wav"))


registry.register_schema(OpSchema(
    name="readers.sequence",
    class_name="readers.Sequence",
    doc="Reads sequences of frames from a folder of streams: each sub-folder of ``file_root`` is a stream "
        "whose image files, in sorted order, are its frames. A sample is ``sequence_length`` frames ``stride`` "
        "apart, the samples of a stream starting every ``step`` frames while the whole sequence fits (as in "
        "DALI). The frames are decoded (``image_type``) and stacked: uint8, layout FHWC; a stream's frames "
        "must share one size.",
    args=(
        Arg("file_root", "path", REQUIRED, "The folder of streams."),
        Arg("sequence_length", "int", REQUIRED, "Frames in a sample.", min=1),
        Arg("step", "int", 1, "Frames between the starts of a stream's consecutive samples.", min=1),
        Arg("stride", "int", 1, "Frames between consecutive frames of a sample.", min=1),
        Arg("image_type", "image_type", types.RGB, "Colour space the frames are decoded to.",
            choices=(types.RGB, types.BGR, types.GRAY)),
        Arg("dtype", "dtype", types.UINT8, "Element type of the frames; only UINT8.", choices=(types.UINT8,)),
        *READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=1,
    input_names=(),
    is_source=True,
))


def frame_sequences(file_root: str, length: int, step: int, stride: int) -> list[list[str]]:
    """The frames of every sample: the image files of each sub-folder in sorted order, windows of
    ``length`` frames ``stride`` apart starting every ``step`` frames while they fit (DALI's)."""
    if not os.path.isdir(file_root):
        raise FileNotFoundError(f"readers.sequence: file_root '{file_root}' is not a folder")
    is_image = name_matcher(IMAGE_EXTENSIONS, case_sensitive=False)
    sequences = []
    for stream in sorted(entry.path for entry in os.scandir(file_root) if entry.is_dir()):
        frames = sorted(entry.path for entry in os.scandir(stream) if entry.is_file() and is_image(entry.name))
        last_start = len(frames) - 1 - (length - 1) * stride
        sequences.extend([frames[start + k * stride] for k in range(length)]
                         for start in range(0, last_start + 1, step))
    return sequences


def decode_frame(path: str, image_type) -> np.ndarray:
    """The frame at ``path``, decoded as displayed, after its header's size is checked against the
    decoders' default max_pixels (DALI's sequence reader has no max_pixels argument: a frame is
    refused where decoders.image would refuse it)."""
    data = read_bytes(path)
    try:
        header = None
        if image_codecs.image_format(data) == "jpeg":
            header = image_codecs.jpeg_header_for_cpu(data)
            height, width = header.height, header.width
        else:
            height, width = image_codecs.image_size(data)
    except ValueError as error:
        raise ValueError(f"frame '{path}': {error}") from None
    limits.checked_pixels(f"frame '{path}': its header", height, width, limits.DEFAULT_MAX_PIXELS,
                          remedy="the decoders' default, which readers.sequence applies to every frame")
    try:
        return image_codecs.decode(data, image_type, adjust_orientation=True, header=header)
    except ValueError as error:
        raise ValueError(f"frame '{path}': {error}") from None


@registry.register("readers.sequence", "cpu")
class SequenceReader(DecodesOnLoad, ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.sequences = frame_sequences(args.file_root, args.sequence_length, args.step, args.stride)
        if not self.sequences:
            raise ValueError(f"readers.sequence: no stream in '{args.file_root}' holds "
                             f"{(args.sequence_length - 1) * args.stride + 1} frames, what a sequence of "
                             f"{args.sequence_length} frames {args.stride} apart needs")
        self.paths = [f"{frames[0]} (a sequence of {len(frames)} frames)" for frames in self.sequences]
        self.sources = [""] * len(self.sequences)  # DALI's sequences carry no source_info
        self.epochs = sharded_epochs(args, context, len(self.sequences), "readers.sequence")

    def load(self, index, sample: SampleContext) -> tuple:
        frames = []
        for path in self.sequences[index]:
            frame = decode_frame(path, self.args.image_type)
            if frames and frame.shape != frames[0].shape:
                raise ValueError(f"frame '{path}' is {frame.shape[1]} x {frame.shape[0]}, the sequence's first "
                                 f"frame {frames[0].shape[1]} x {frames[0].shape[0]}: a sequence's frames share one "
                                 "size")
            frames.append(frame)
        return (np.stack(frames),)

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.uint8), 4, "FHWC", channels=self.args.image_type.channels)
