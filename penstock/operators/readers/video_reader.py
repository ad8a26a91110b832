"""``readers.video`` and ``experimental.readers.video``: sequences of frames read from video files,
as DALI's two video readers make them; ``readers.video_resize``: the first, then ``resize``.

Each file is indexed once when the pipeline is built (its packets read, not decoded:
kernels.video_codecs.video_index); its samples are windows of ``sequence_length`` frames ``stride``
apart, starting every ``step`` frames. The two readers differ where DALI's do:

- readers.video (DALI's first reader): ``step`` defaults to ``sequence_length * stride``; a window
  fits when its last frame is in the file; ``pad_sequences`` adds the windows that start in the
  file but do not fit, their missing frames zero; uint8 values are truncated (DALI converts
  colours by truncation there); ``dtype=FLOAT`` gives 0..255, or 0..1 with ``normalized``.
- experimental.readers.video: ``step`` defaults to ``sequence_length * stride`` too, but a window
  fits when ``start + stride * sequence_length`` is within the file; ``pad_mode`` pads one last
  window past the end by DALI's modes; colours are rounded; ``file_list`` ranges are read by
  ``file_list_format`` and ``file_list_rounding``.

On the CPU the frames are decoded by FFmpeg on the workers; with ``device="gpu"`` the reader indexes
and chooses frames on the CPU and the GPU's video engines decode them (``VideoFramesOnGpu``), so
that frames never cross to the host.
"""
from __future__ import annotations

import math
import os
import threading
import warnings

import numpy as np

from penstock import devices, registry, types
from penstock.capabilities import DecodesOnLoad
from penstock.contract import BatchOperator, OutputSpec, SampleContext
from penstock.kernels.video_codecs import VideoDecodeError, decode_indexed, video_index
from penstock.limits import DEFAULT_MAX_PIXELS
from penstock.operators.shared.resizing import INTERP_ARGS, RESIZE_ARGS, RESIZE_CHECKS
from penstock.operators.shared.video import PAD_MODES, padded_index
from penstock.operators.shared.readers import READER_ARGS, ShardedReader, sharded_epochs
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema, given

LEGACY, EXPERIMENTAL, RESIZED = "readers.video", "experimental.readers.video", "readers.video_resize"
FRAMES_ON_GPU = "_video_frames"  # the mixed operator that decodes the GPU form's frames


def _file_args(labels_doc: str) -> tuple:
    return (
        Arg("filenames", "paths", None, "Paths of the video files. Excludes file_root and file_list."),
        Arg("labels", "ints", None, labels_doc),
        Arg("file_root", "path", None, "A folder with one sub-folder of videos per class (labels 0..K-1 in "
            "sorted folder order). Excludes filenames and file_list."),
        Arg("file_list", "path", None, "A text file of 'path label [start [end]]' lines. Excludes filenames "
            "and file_root."),
        Arg("sequence_length", "int", REQUIRED, "Frames a sample holds.", min=1),
        Arg("step", "int", -1, "Frames between the starts of a file's consecutive samples; below 1: "
            "sequence_length * stride."),
        Arg("stride", "int", 1, "Frames between consecutive frames of a sample.", min=1),
        Arg("enable_frame_num", "bool", False, "Also output each sample's first frame number (int32, (1,))."),
        Arg("enable_timestamps", "bool", False, "Also output each frame's time in seconds (float64, (F,))."),
        Arg("image_type", "image_type", types.RGB, "Colours of the frames: RGB or YCbCr.",
            choices=(types.RGB, types.YCbCr)),
        Arg("max_pixels", "int", DEFAULT_MAX_PIXELS, "Largest frame accepted, in pixels, as a file's header "
            "claims it; a larger one is refused when the file is indexed. penstock's own guard: DALI has no "
            "such argument.", min=1),
    )


def _one_source(static: dict, per_sample: frozenset) -> None:
    named = [name for name in ("filenames", "file_root", "file_list") if given(static, per_sample, name)]
    if len(named) != 1:
        raise ArgError("give the videos one way: filenames, file_root or file_list" +
                       (f" (got {', '.join(named)})" if named else ""))
    if static.get("labels") is not None and not given(static, per_sample, "filenames"):
        raise ArgError("labels go with filenames")


def _legacy_checks(static: dict, per_sample: frozenset) -> None:
    _one_source(static, per_sample)
    numbered = given(static, per_sample, "file_list") or static.get("labels") is not None
    for name in ("enable_frame_num", "enable_timestamps"):
        if static.get(name) and not numbered:
            raise ArgError(f"{name} needs file_list, or filenames with labels (as DALI's readers.video)")


def _outputs(static: dict) -> int:
    """The frames, the label, the first frame's number, the frames' times: as given (readers.video's
    checks refuse the last two where DALI's reader cannot report them)."""
    return 1 + _has_labels(static) + bool(static.get("enable_frame_num")) + bool(static.get("enable_timestamps"))


def _has_labels(static: dict) -> bool:
    return static.get("labels") is not None or static.get("file_root") is not None or \
        static.get("file_list") is not None


def _on_gpu(schema, static, per_sample, add):
    """The GPU form: this reader on the CPU choosing each sample's frames, and the GPU's video
    engines decoding them; the other outputs are copied to the GPU."""
    index_args = static.replace(device="cpu", frames_on_gpu=True)
    outputs = add(schema.name, (), index_args)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    frames = add(FRAMES_ON_GPU, (outputs[0],), {
        "device": "mixed", "files": tuple(video_files(static, schema.name)[0]),
        "image_type": static.image_type, "dtype": static.get("dtype", types.UINT8),
        "normalized": static.get("normalized", False), "fill_value": tuple(static.get("fill_value", (0,))),
        "truncate": schema.name == LEGACY, "max_pixels": static.max_pixels})
    moved = (frames, *(output.gpu() for output in outputs[1:]))
    return moved[0] if len(moved) == 1 else moved


registry.register_schema(OpSchema(
    name=LEGACY, class_name="readers.Video",
    doc="Reads sequences of frames from video files (FHWC), as DALI's readers.video: windows of "
        "``sequence_length`` frames ``stride`` apart, starting every ``step`` frames, in every file. Outputs: "
        "the frames, then the label (int32, (1,); with labels, file_root or file_list), then with file_list or "
        "filenames with labels, the first frame's number (enable_frame_num) and the frames' times in seconds "
        "(enable_timestamps). With device='gpu' the GPU's video engines decode (PyNvVideoCodec), else FFmpeg on "
        "the CPU workers.",
    args=(
        *_file_args("One label per file of filenames (an empty list: 0, 1, 2, ...); without it, no label output."),
        Arg("pad_sequences", "bool", False, "Also read the windows that start in a file but run past its end: "
            "their missing frames are zero, their frame numbers and times -1."),
        Arg("file_list_frame_num", "bool", False, "file_list's start and end are frame numbers, not seconds."),
        Arg("file_list_include_preceding_frame", "bool", False, "file_list's times in seconds map to frames "
            "rounding the start down and the end up (otherwise start up, end down)."),
        Arg("dtype", "dtype", types.UINT8, "Element type of the frames: UINT8 or FLOAT.",
            choices=(types.UINT8, types.FLOAT)),
        Arg("normalized", "bool", False, "With dtype=FLOAT, values in [0, 1] rather than [0, 255]."),
        Arg("channels", "int", 3, "Channels of the frames; only 3.", choices=(3,)),
        Arg("skip_vfr_check", "bool", False, "Read videos of variable frame rate (whose frame numbers are then "
            "the order of their frames) rather than refuse them."),
        Arg("additional_decode_surfaces", "int", 2, "Accepted for DALI compatibility (NVDEC's surfaces are "
            "sized by the decoder)."),
        *READER_ARGS,
    ),
    num_inputs=(0, 0), num_outputs=_outputs, input_names=(), is_source=True,
    checks=(_legacy_checks,), composed=_on_gpu, composed_devices=("gpu",),
))

LEGACY_ARGS = registry.get_schema(LEGACY).args


def _resized(schema, static, per_sample, add):
    """readers.video_resize: readers.video, then resize on the same device."""
    reader = registry.get_schema(LEGACY)
    read = add(LEGACY, (), reader.arguments({name: value for name, value in static.items() if name in reader.all_args}))
    read = read if isinstance(read, tuple) else (read,)
    resize = registry.get_schema("resize")
    resized = add("resize", (read[0],), {**{name: value for name, value in static.items()
                                            if name in resize.all_args and name not in ("name", "seed", "dtype")},
                                         "device": "cpu" if static.device == "cpu" else "gpu"})
    return resized if len(read) == 1 else (resized, *read[1:])


registry.register_schema(OpSchema(
    name=RESIZED, class_name="readers.VideoResize",
    doc="readers.video, its sequences then resized as ``resize`` resizes them (DALI's readers.video_resize): the "
        "reader's outputs, the frames resized.",
    args=(*LEGACY_ARGS, *RESIZE_ARGS, *INTERP_ARGS),
    num_inputs=(0, 0), num_outputs=_outputs, input_names=(), is_source=True,
    checks=(_legacy_checks, *RESIZE_CHECKS), composed=_resized, composed_devices=("cpu", "gpu"),
))


registry.register_schema(OpSchema(
    name=EXPERIMENTAL, class_name="experimental.readers.Video",
    doc="Reads sequences of frames from video files (FHWC uint8), as DALI's experimental.readers.video: "
        "windows of ``sequence_length`` frames ``stride`` apart, starting every ``step`` frames, in every file; "
        "``pad_mode`` pads one last window past a file's end. Outputs: the frames, then the label (int32, (1,); "
        "with labels, file_root or file_list), the first frame's index (enable_frame_num) and the frames' times "
        "in seconds (enable_timestamps).",
    args=(
        *_file_args("One label per file of filenames; without it, no label output."),
        Arg("pad_mode", "str", "none", "One last window past a file's end: 'none' (no such window), "
            "'constant' (fill_value), 'edge' or 'repeat', 'reflect_1001' or 'symmetric', 'reflect_101' or "
            "'reflect'.", choices=tuple(PAD_MODES)),
        Arg("fill_value", "ints", (0,), "The padding frames' value with pad_mode='constant': one, or one per "
            "channel.", min=0, max=255),
        Arg("file_list_format", "str", "timestamps", "file_list's start and end: 'frames' (numbers, negative "
            "from the end) or 'timestamps' (seconds).", choices=("frames", "timestamps")),
        Arg("file_list_rounding", "str", "start_down_end_up", "How file_list's times map to frames.",
            choices=("start_down_end_up", "start_up_end_down", "all_up", "all_down")),
        Arg("file_list_include_end", "bool", True, "Whether file_list's end frame is read."),
        Arg("uniform_sample", "bool", False, "One sample per file: sequence_length frames spread evenly over it "
            "(numpy.linspace(first, last, sequence_length), rounded half away from zero; frames repeat in a short "
            "file); stride, step and pad_mode are then not used."),
        *READER_ARGS,
    ),
    num_inputs=(0, 0), num_outputs=_outputs, input_names=(), is_source=True,
    checks=(_one_source,), composed=_on_gpu, composed_devices=("gpu",),
))


def video_files(args, name: str) -> tuple[list[str], list[int] | None, list[tuple[float, float] | None]]:
    """(paths, labels or None, (start, end) or None per file) of the reader's arguments, as DALI
    lists them: file_root's class folders sorted, each one's files sorted by path."""
    if args.get("file_root") is not None:
        root = args.file_root
        if not os.path.isdir(root):
            raise FileNotFoundError(f"{name}: file_root '{root}' is not a folder")
        entries = []
        for label, folder in enumerate(sorted(entry.name for entry in os.scandir(root) if entry.is_dir())):
            entries += [(os.path.join(root, folder, entry.name), label)
                        for entry in os.scandir(os.path.join(root, folder)) if entry.is_file()]
        entries.sort()
        return [path for path, _ in entries], [label for _, label in entries], [None] * len(entries)
    if args.get("file_list") is not None:
        return _read_file_list(args.file_list, name)
    paths = list(args.filenames)
    labels = None
    if args.get("labels") is not None:
        labels = list(args.labels) or list(range(len(paths)))
        if len(labels) != len(paths):
            raise ValueError(f"{name}: {len(labels)} labels for {len(paths)} files")
    return paths, labels, [None] * len(paths)


def _read_file_list(file_list: str, name: str):
    try:
        with open(file_list) as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise FileNotFoundError(f"{name}: cannot read file_list '{file_list}': {error.strerror}") from None
    paths, labels, ranges = [], [], []
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        try:
            label = int(fields[1])
            bounds = [float(value) for value in fields[2:4]]
        except (IndexError, ValueError):
            raise ValueError(f"{name}: line {number} of '{file_list}' should be 'path label [start [end]]', got "
                             f"{line!r}") from None
        if label < 0:
            raise ValueError(f"{name}: line {number} of '{file_list}': labels are not negative, got {label}")
        if len(bounds) == 2 and bounds[0] == bounds[1]:
            continue  # DALI skips an empty range (with a warning)
        paths.append(fields[0])
        labels.append(label)
        ranges.append((bounds + [0.0, 0.0])[:2] if bounds else None)
    return paths, labels, ranges


def frame_range(args, name: str, index, bounds, what: str) -> tuple[int, int]:
    """[first, end) of the frames of a file that file_list's ``bounds`` (start, end) select, as
    each of DALI's readers maps them."""
    frames = index.frames
    if bounds is None or bounds == [0.0, 0.0]:
        return 0, frames
    start, end = bounds
    if name == LEGACY:
        if args.file_list_frame_num:
            first = int(start) if start >= 0 else frames + int(start)
            last = int(end) if end > 0 else frames + int(end)
        else:
            rate, down = index.frame_rate, args.file_list_include_preceding_frame
            first = (math.floor if down else math.ceil)(start * rate) + (frames if start < 0 else 0)
            last = (math.ceil if down else math.floor)(end * rate) + (frames if end <= 0 else 0)
        if not first <= last <= frames:
            raise ValueError(f"{what}: file_list's range ({start}, {end}) is frames [{first}, {last}), outside its "
                             f"{frames} frames or reversed")
        return first, last
    start_down = args.file_list_rounding in ("start_down_end_up", "all_down")
    end_down = args.file_list_rounding in ("start_up_end_down", "all_down")
    if args.file_list_format == "frames":
        start, end = (frames + start if start < 0 else start), (frames + end if end < 0 else end)
        first = math.floor(start) if start_down else math.ceil(start)
        last = math.floor(end) if end_down else math.ceil(end)
    else:
        numerator, denominator = index.time_base
        first = _frame_at(index.pts, int(start * denominator / numerator), start_down)
        last = _frame_at(index.pts, int(end * denominator / numerator), end_down)
    if args.file_list_include_end:
        last = min(last, frames)
    return first, min(last, frames)


def _frame_at(pts: np.ndarray, timestamp: int, round_down: bool) -> int:
    """The frame DALI's index gives a timestamp: the one at it, else the first after it (or, to
    round down, the one before that); 0 past the last frame."""
    after = int(np.searchsorted(pts, timestamp, side="left"))
    if after == len(pts):
        return 0
    if pts[after] == timestamp:
        return after
    return after - 1 if round_down and after > 0 else after


class VideoSample:
    """One sample: its file, its frames (-1: a padding frame) and what the outputs report."""
    __slots__ = ("file", "frames", "first")

    def __init__(self, file: int, frames: list[int], first: int):
        self.file, self.frames, self.first = file, frames, first


def samples_of_file(name: str, args, file: int, first: int, end: int, frames: int) -> list[VideoSample]:
    """The windows of one file's frames [first, end), by the reader's rules (module docstring)."""
    length, stride = args.sequence_length, args.stride
    step = args.step if args.step > 0 else length * stride
    samples = []
    start = first
    if name == EXPERIMENTAL and args.uniform_sample:
        spread = np.floor(np.linspace(first, end - 1, length) + 0.5).astype(np.int64).tolist()
        return [VideoSample(file, spread, spread[0])]
    if name == LEGACY:
        span = 1 + (length - 1) * stride
        while start < end and start + span <= end:
            samples.append(VideoSample(file, [start + k * stride for k in range(length)], start))
            start += step
        if args.pad_sequences:
            while start < end:
                samples.append(VideoSample(file, [start + k * stride if start + k * stride < end else -1
                                                  for k in range(length)], start))
                start += step
        return samples
    while start + stride * length <= end:
        samples.append(VideoSample(file, [start + k * stride for k in range(length)], start))
        start += step
    mode = PAD_MODES[args.pad_mode]
    if mode is not None and start < end:
        wanted = [start + k * stride for k in range(length)]
        samples.append(VideoSample(file, [index if index < end else
                                          (-1 if mode == "constant" else
                                           first + padded_index(index - first, end - first, mode))
                                          for index in wanted], start))
    return samples


class VideoReaderBase(ShardedReader):
    """Both readers on the CPU: the files indexed at build, the samples' windows listed; ``load``
    decodes a window's frames (or, for the GPU form, gives the window to decode there)."""

    def __init__(self, args, context):
        super().__init__(args, context)
        name = self.name
        self.files, self.labels, ranges = video_files(args, name)
        if not self.files:
            raise ValueError(f"{name}: no video files given")
        check_rate = not args.get("skip_vfr_check", True) if name == LEGACY else False
        self.indices, self.key_frames, self.samples = [], [], []
        for number, (path, bounds) in enumerate(zip(self.files, ranges)):
            try:
                index = video_index(path, f"{name}: '{path}'", max_pixels=args.max_pixels, check_frame_rate=check_rate)
            except OSError as error:
                raise FileNotFoundError(f"{name}: cannot read '{path}': {error}") from None
            self.indices.append(index)
            self.key_frames.append(np.searchsorted(index.pts, index.key_pts))
            first, end = frame_range(args, name, index, bounds, f"{name}: '{path}'")
            self.samples += samples_of_file(name, args, number, first, end, index.frames)
        if not self.samples:
            raise ValueError(f"{name}: no file holds a sequence of {args.sequence_length} frames {args.stride} apart")
        self.paths = [self.files[sample.file] for sample in self.samples]
        self.epochs = sharded_epochs(args, context, len(self.samples), name)
        self._frames_on_gpu = bool(args.get("frames_on_gpu", False))

    def load(self, index, sample: SampleContext) -> tuple:
        window = self.samples[index]
        outputs = [np.asarray([window.file, self.run_from(window), *window.frames], np.int64) if self._frames_on_gpu
                   else self.decoded(window)]
        if self.labels is not None:
            outputs.append(np.asarray([self.labels[window.file]], np.int32))
        args = self.args
        if args.enable_frame_num:
            outputs.append(np.asarray([window.first], np.int32))
        if args.enable_timestamps:
            seconds = self.indices[window.file].seconds
            outputs.append(np.asarray([seconds[i] if i >= 0 else -1.0 for i in window.frames], np.float64))
        return tuple(outputs)

    def run_from(self, window: VideoSample) -> int:
        """The key frame two before the window's first frame: where the GPU's decoder starts when it
        cannot seek to the window itself (open GOPs)."""
        first = min(i for i in window.frames if i >= 0)
        keys = self.key_frames[window.file]
        return int(keys[max(0, int(np.searchsorted(keys, first, side="right")) - 2)]) if len(keys) else 0

    def decoded(self, window: VideoSample) -> np.ndarray:
        path, index, args = self.files[window.file], self.indices[window.file], self.args
        image_type = "ycbcr" if args.image_type == types.YCbCr else "rgb"
        frames = decode_indexed(path, index, [i for i in window.frames if i >= 0], f"{self.name}: '{path}'",
                                image_type=image_type, rounding="truncate" if self.name == LEGACY else "nearest")
        fill = np.broadcast_to(np.asarray(args.get("fill_value", (0,)), np.uint8), (index.height, index.width, 3))
        stacked = np.stack([frames[i] if i >= 0 else fill for i in window.frames])
        return finished_frames(np, stacked, args.get("dtype", types.UINT8), args.get("normalized", False))

    def declare_outputs(self, inputs):
        args = self.args
        specs = [OutputSpec(np.dtype(np.int64), 1) if self._frames_on_gpu else
                 OutputSpec(np.dtype(args.get("dtype", types.UINT8).numpy), 4, "FHWC", channels=3)]
        if self.labels is not None:
            specs.append(OutputSpec(np.dtype(np.int32), 1))
        if args.enable_frame_num:
            specs.append(OutputSpec(np.dtype(np.int32), 1))
        if args.enable_timestamps:
            specs.append(OutputSpec(np.dtype(np.float64), 1))
        return tuple(specs)


def finished_frames(xp, frames, dtype, normalized: bool):
    """uint8 frames as the reader's ``dtype``: FLOAT in [0, 255], or [0, 1] when ``normalized``."""
    if dtype != types.FLOAT:
        return frames
    values = frames.astype(np.float32) if xp is np else frames.float()
    return values / np.float32(255) if normalized else values


@registry.register(LEGACY, "cpu")
class VideoReader(DecodesOnLoad, VideoReaderBase):
    pass


@registry.register(EXPERIMENTAL, "cpu")
class ExperimentalVideoReader(DecodesOnLoad, VideoReaderBase):
    pass


registry.register_schema(OpSchema(
    name=FRAMES_ON_GPU, class_name="VideoFramesOnGpu",
    doc="The GPU form of the video readers: decodes each sample's frames ([file, key frame to decode from if "
        "seeking fails, frame, ...], -1 for a padding frame) of ``files`` on the GPU's video engines.",
    args=(
        Arg("files", "strs", REQUIRED, "The reader's files."),
        Arg("image_type", "image_type", types.RGB, "RGB or YCbCr.", choices=(types.RGB, types.YCbCr)),
        Arg("dtype", "dtype", types.UINT8, "UINT8 or FLOAT.", choices=(types.UINT8, types.FLOAT)),
        Arg("normalized", "bool", False, "FLOAT in [0, 1]."),
        Arg("fill_value", "ints", (0,), "The padding frames' value."),
        Arg("truncate", "bool", False, "uint8 values truncated, not rounded."),
        Arg("max_pixels", "int", DEFAULT_MAX_PIXELS, "Largest frame accepted.", min=1),
    ),
))


@registry.register(FRAMES_ON_GPU, "mixed", requires=devices.gpu_problem)
class VideoFramesOnGpu(BatchOperator):
    """Each sample's frames decoded on a lane thread: by NVDEC into device memory, or, where NVDEC
    is not available or cannot decode a file (AV1 on some GPUs, frames under its smallest size), by
    FFmpeg and copied over."""

    # threads that wait on the video engines (H100 and H200 have 7), each with its own decoder
    lanes = (("decode", 8),)

    def __init__(self, args, context):
        super().__init__(args, context)
        self._indices: dict[str, object] = {}  # path -> VideoIndex, for the files FFmpeg decodes
        self._on_cpu: set[str] = set()  # files NVDEC refused

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(self.args.dtype.numpy), 4, "FHWC", channels=3)

    def run_batch(self, inputs, args, batch):
        import torch
        windows = [np.asarray(sample) for sample in inputs[0]]
        results: list = [None] * len(windows)
        errors: list = [None] * len(windows)
        finished = threading.Semaphore(0)

        def decode(position: int):
            def call():
                try:
                    results[position] = self._decoded(windows[position], batch.device)
                except BaseException as error:  # reported on the batch, below
                    errors[position] = error
                finally:
                    finished.release()
            return call
        for position in range(len(windows)):
            batch.run_call("decode", decode(position))
        for _ in windows:
            finished.acquire()
        for error in errors:
            if error is not None:
                raise error
        if batch.device.type == "cuda":
            current = torch.cuda.current_stream(batch.device)
            for frames in results:
                frames.record_stream(current)  # made on a decode thread's stream, used and freed on this one
        return results

    def _decoded(self, window: np.ndarray, device):
        """One sample's frames on the device, on the calling lane thread's stream (synchronized)."""
        import torch

        from penstock.kernels.nvdec import nvdec_problem
        static = self.args
        path = static.files[int(window[0])]
        run_from, frames = int(window[1]), [int(i) for i in window[2:]]
        real = [i for i in frames if i >= 0]
        what = f"{self.name}: '{path}'"
        image_type = "ycbcr" if static.image_type == types.YCbCr else "rgb"
        rounding = "truncate" if static.truncate else "nearest"
        on_gpu = device.type == "cuda"
        stream = _thread_stream(device) if on_gpu else None
        with torch.cuda.stream(stream) if on_gpu else _nothing():
            decoded = None
            if on_gpu and path not in self._on_cpu and nvdec_problem() is None:
                decoded = self._nvdec(path, real, device, what, image_type, rounding, run_from)
            if decoded is None:
                index = self._index(path, what)
                by_index = decode_indexed(path, index, real, what, image_type=image_type, rounding=rounding)
                decoded = torch.from_numpy(np.stack([by_index[i] for i in real])).to(device, non_blocking=True)
            if len(real) < len(frames):
                fill = torch.as_tensor(np.asarray(static.fill_value, np.uint8)).to(device)
                padded = fill.expand(len(frames), *decoded.shape[1:]).clone()
                padded[[k for k, i in enumerate(frames) if i >= 0]] = decoded
                decoded = padded
            result = finished_frames(torch, decoded, static.dtype, static.normalized)
        if stream is not None:
            stream.synchronize()
        return result

    def _index(self, path: str, what: str):
        index = self._indices.get(path)
        if index is None:
            index = self._indices[path] = video_index(path, what, max_pixels=self.args.max_pixels,
                                                      check_frame_rate=False)
        return index

    def _nvdec(self, path, real, device, what, image_type, rounding, run_from):
        """The frames by NVDEC, or None where it cannot decode the file (a codec, profile or size
        its engines lack; a damaged stream) with a new decoder either: the file then goes to
        FFmpeg (said once per reader), whose error, if it fails too, is the one raised."""
        from penstock.kernels.nvdec import decode_frames, drop_thread_decoder
        for attempt in range(2):
            try:
                return decode_frames(path, real, device, what, image_type=image_type, rounding=rounding,
                                     max_pixels=self.args.max_pixels, run_from=run_from)
            except VideoDecodeError as error:
                drop_thread_decoder()  # the next attempt, and the next video, start a new session
                if attempt:
                    if not self._on_cpu:
                        warnings.warn(f"{error}; this file, and any other NVDEC cannot decode, is decoded by FFmpeg "
                                      "on the CPU instead", RuntimeWarning, stacklevel=2)
                    self._on_cpu.add(path)
        return None


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_streams = threading.local()


def _thread_stream(device):
    stream = getattr(_streams, "stream", None)
    if stream is None:
        import torch
        stream = _streams.stream = torch.cuda.Stream(device)
    return stream
