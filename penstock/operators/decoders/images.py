"""Image decoders: ``decoders.image``, ``decoders.image_random_crop``, ``decoders.image_crop`` and
``decoders.image_slice``. Input: encoded bytes (uint8, 1-D); output: HWC uint8 images. And
``peek_image_shape``: the shape they decode an image to, from its header.

On the CPU ('cpu') each sample is decoded on a worker, only its window, and smaller in the DCT
domain when a fixed-size resize follows. On the GPU ('mixed') the CPU decoder of the same name
chooses each window on the workers (so both devices choose the same windows for the same seed) and
the GPU stage decodes the batch on the hardware JPEG engines and CUDA cores; where the engines set
the pace (large JPEGs) and cores are spare, the workers decode a share themselves
(``cpu_decoder_load``, ``automatic_cpu_share``)."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from penstock import devices, distributed, registry, types
from penstock.contract import BatchOperator, OutputSpec, SampleContext, SampleOperator
from penstock.draws import UniformBlocks
from penstock.kernels import cpu_image
from penstock.kernels import image_codecs
from penstock.kernels import image_headers
from penstock.operators.shared import crop_windows as crop_generator
from penstock.operators.shared import images as geometry
from penstock.operators.shared.arrays import _slice_windows as slice_windows  # slice's window arithmetic, shared
from penstock.schema import Arg, ArgError, Arguments, OpSchema, given
from penstock.operators.shared.crop_windows import RANDOM_CROP_ARGS

# the decoders' output types, as DALI's
OUTPUT_TYPES = (types.UINT8, types.INT8, types.UINT16, types.INT16, types.UINT32, types.INT32, types.FLOAT)

# Arguments every image decoder takes, documented once.
DECODER_ARGS = (
    Arg("output_type", "image_type", types.RGB, "Colour space of the output: RGB, BGR, GRAY, YCbCr (ITU-R BT.601, "
        "made from RGB, or from gray for one-channel images) or ANY_DATA (the file's own channels: 1 for gray, 3, "
        "4 with alpha).", choices=(types.RGB, types.BGR, types.GRAY, types.YCbCr, types.ANY_DATA)),
    Arg("device_memory_padding", "int", 16 * 1024 * 1024, "Accepted for DALI compatibility (GPU buffer "
        "growth step); buffers are sized from the data.", min=0),
    Arg("host_memory_padding", "int", 8 * 1024 * 1024, "Accepted for DALI compatibility (pinned buffer "
        "growth step).", min=0),
    Arg("device_memory_padding_jpeg2k", "int", 0, "Accepted for DALI compatibility.", min=0),
    Arg("host_memory_padding_jpeg2k", "int", 0, "Accepted for DALI compatibility.", min=0),
    Arg("hw_decoder_load", "float", 1.0, "Share of each batch given to the GPU's hardware JPEG engines "
        "('mixed' device); the rest, and what the engines do not take, is decoded by nvImageCodec on CUDA "
        "cores (then its hybrid CPU + CUDA decoder), as in DALI. DALI's default is 0.65; penstock's is "
        "1.0: on an H200 smaller shares were slower and used more CPU.", min=0.0, max=1.0),
    Arg("cpu_decoder_load", "float", None, "Share of each batch's JPEGs decoded by the CPU workers beside the "
        "GPU's decoders ('mixed' device; penstock's, not DALI's): they decode it (only the window, smaller in "
        "the DCT domain when a resize follows) while the hardware JPEG engines and CUDA cores decode the rest, "
        "and the GPU copies the pixels from the workers' pinned memory. The same samples of every batch, so a "
        "seed gives the same batches. Not given: chosen per image from its size and the machine's cores per "
        "pipeline (not from num_threads or timing, so a seed gives the same batches whatever the threads): "
        "6% (on 16 cores) to 10% (on 24 or more) of windows (random crops) of ImageNet-sized JPEGs where no "
        "GPU work but the fused image kernel (resize, crop, flip, colour, normalize) follows the decode, none "
        "of whole ones, and up to 0.3 of "
        "larger ones (0.2 of whole images), as far as the spare cores keep pace "
        "(more of windows near an image's top, which the CPU decodes reading fewer rows; BENCHMARKS.md); the "
        "pipeline then runs a worker per core (at most 32) even where num_threads asks for fewer.",
        min=0.0, max=1.0),
    Arg("hybrid_huffman_threshold", "int", 1000000, "Accepted for DALI compatibility.", min=0),
    Arg("preallocate_width_hint", "int", 0, "Accepted for DALI compatibility.", min=0),
    Arg("preallocate_height_hint", "int", 0, "Accepted for DALI compatibility.", min=0),
    Arg("use_fast_idct", "bool", False, "Accepted for DALI compatibility; the accurate IDCT is used."),
    Arg("affine", "bool", True, "Accepted for DALI compatibility."),
    Arg("split_stages", "bool", False, "Accepted for DALI compatibility."),
    Arg("memory_stats", "bool", False, "Accepted for DALI compatibility."),
    Arg("jpeg_fancy_upsampling", "bool", False, "Accepted for DALI compatibility."),
    Arg("cache_size", "int", 0, "Accepted for DALI compatibility: decoded images are not cached (the page cache "
        "keeps the files).", min=0),
    Arg("cache_threshold", "int", 0, "Accepted for DALI compatibility (see cache_size).", min=0),
    Arg("cache_type", "str", "", "Accepted for DALI compatibility (see cache_size)."),
    Arg("cache_debug", "bool", False, "Accepted for DALI compatibility (see cache_size)."),
    Arg("cache_batch_copy", "bool", True, "Accepted for DALI compatibility (see cache_size)."),
    Arg("use_chunk_allocator", "bool", False, "Accepted for DALI compatibility."),
    Arg("adjust_orientation", "bool", True, "Apply the EXIF orientation: the image (and any window chosen "
        "in it) is the image as displayed, as in DALI. JPEG orientation is read by penstock; other formats' "
        "as OpenCV reads it."),
    Arg("max_pixels", "int", image_headers.PILLOW_MAX_IMAGE_PIXELS, "Largest image (height x width, as its "
        "header claims) decoded: larger ones fail, naming the file and the size, before any memory is "
        "allocated for them (a decompression bomb of a few KiB can claim billions of pixels). The default "
        "is Pillow's MAX_IMAGE_PIXELS; None lifts the limit.", min=1, nullable=True),
    Arg("dtype", "dtype", types.UINT8, "Output element type; values are scaled from the file's range (8 or 16 "
        "bits) to the type's (0 to 1 for FLOAT), as in DALI.", choices=OUTPUT_TYPES),
)


SLICE_ARGS = (
    Arg("start", "ints", None, "Start of the window in pixels, one value per sliced axis (x, y by default).",
        per_sample=True),
    Arg("rel_start", "floats", None, "Start of the window as fractions of the image's extent, one per sliced axis.",
        per_sample=True),
    Arg("end", "ints", None, "End of the window (exclusive) in pixels, one per sliced axis.", per_sample=True),
    Arg("rel_end", "floats", None, "End of the window as fractions of the image's extent.", per_sample=True),
    Arg("shape", "ints", None, "Size of the window in pixels, one per sliced axis.", per_sample=True),
    Arg("rel_shape", "floats", None, "Size of the window as fractions of the image's extent.", per_sample=True),
    Arg("axes", "ints", None, "The sliced axes as indices of the output's layout (HWC: 0 is H, 1 is W), in the "
        "order of the window's values; instead of axis_names. Default (1, 0).", per_sample=True),
    Arg("axis_names", "str", None, "The sliced axes by name, in the order of the window's values: 'WH' (the "
        "default: x then y), 'HW', 'W' or 'H'; an axis not named is kept whole."),
    Arg("normalized_anchor", "bool", True, "Whether a floating-point anchor input is a fraction of the extent "
        "(integer inputs are pixels)."),
    Arg("normalized_shape", "bool", True, "Whether a floating-point shape input is a fraction of the extent."),
)
NAMED_WINDOW = ("start", "rel_start", "end", "rel_end", "shape", "rel_shape")
SLICED_LAYOUT = "HW"  # the decoded image's axes a window may cut (the layout is HWC)


def _one_slice_form(static: dict, per_sample: frozenset) -> None:
    """As DALI: one of start / rel_start, one of end / rel_end / shape / rel_shape, axes or axis_names."""
    for group in (("rel_start", "start"), ("end", "rel_end", "shape", "rel_shape"), ("axes", "axis_names")):
        named = [name for name in group if name in per_sample or static.get(name) is not None]
        if len(named) > 1:
            raise ArgError(f"arguments {' and '.join(repr(name) for name in named)} exclude each other; give one")


def _decoder_schema(name, class_name, doc, extra_args=(), num_inputs=(1, 1), checks=()):
    return registry.register_schema(OpSchema(
        name=name, class_name=class_name, doc=doc, args=(*DECODER_ARGS, *extra_args),
        num_inputs=num_inputs, input_names=("data", "window_start", "window_shape"), checks=checks,
        also_named=((f"experimental.{name}", f"experimental.{class_name}"),)))  # DALI's older names


_decoder_schema("decoders.image", "decoders.Image",
                "Decodes JPEG, PNG, BMP, TIFF, PNM, WebP, JPEG 2000 and the first frame of GIF images.")
_decoder_schema("decoders.image_random_crop", "decoders.ImageRandomCrop",
                "Decodes a random window of each image (the RandomResizedCrop window: a random area and "
                "aspect ratio), chosen from the image's header before decoding so that only the window "
                "is produced.", RANDOM_CROP_ARGS, checks=(crop_generator.ordered_ranges,))
_decoder_schema("decoders.image_crop", "decoders.ImageCrop",
                "Decodes a fixed-size window of each image placed by crop_pos_x / crop_pos_y.", geometry.WINDOW_ARGS,
                checks=geometry.WINDOW_CHECKS)
_decoder_schema("decoders.image_slice", "decoders.ImageSlice",
                "Decodes a window of each image, as slice cuts one out of the decoded image: the anchor and "
                "shape as the second and third inputs (floating point: fractions of the extent unless "
                "normalized_anchor / normalized_shape say otherwise; integers: pixels), or as start, end, shape "
                "or their rel_ forms. Their values follow axis_names, 'WH' by default: (x, y) and (width, "
                "height), as random_bbox_crop gives them. Edges are rounded to whole pixels; a window outside "
                "the image is an error.", SLICE_ARGS, num_inputs=(1, 3),
                checks=(_one_slice_form,))


def random_crop_window(height: int, width: int, draws: np.ndarray, aspect_range, area_range) -> tuple:
    """(top, left, crop_height, crop_width) of a RandomResizedCrop window.

    ``draws`` holds, per attempt, (area fraction, log aspect ratio, y position, x position) uniforms
    in [0, 1); the first attempt whose window fits wins; otherwise the whole image clamped to the
    aspect range, centred (torchvision's and DALI's fallback).
    """
    area = height * width
    low_area, high_area = crop_generator.value_range(area_range)
    aspect_range = crop_generator.value_range(aspect_range)
    log_low, log_high = math.log(aspect_range[0]), math.log(aspect_range[1])
    for area_draw, ratio_draw, y_draw, x_draw in draws:
        target_area = max(0.0, area * (low_area + (high_area - low_area) * area_draw))
        ratio = math.exp(log_low + (log_high - log_low) * ratio_draw)
        crop_width = int(round(math.sqrt(target_area * ratio)))
        crop_height = int(round(math.sqrt(target_area / ratio)))
        if 0 < crop_width <= width and 0 < crop_height <= height:
            top = int(y_draw * (height - crop_height + 1))
            left = int(x_draw * (width - crop_width + 1))
            return top, left, crop_height, crop_width
    ratio = width / height
    if ratio < aspect_range[0]:
        crop_width, crop_height = width, int(round(width / aspect_range[0]))
    elif ratio > aspect_range[1]:
        crop_height, crop_width = height, int(round(height * aspect_range[1]))
    else:
        crop_height, crop_width = height, width
    return (height - crop_height) // 2, (width - crop_width) // 2, crop_height, crop_width


def check_encoded_input(name: str, data: OutputSpec) -> None:
    """At build: the input of an operator that reads encoded images holds 1-D uint8 samples."""
    if (data.ndim is not None and data.ndim != 1) or (data.dtype is not None and data.dtype != np.uint8):
        raise ValueError(f"{name}: expects encoded images (1-D uint8 arrays), but its input holds "
                         f"{data.ndim}-dimensional {data.dtype} samples")


def encoded_sample(data: np.ndarray) -> np.ndarray:
    """A sample of encoded bytes, checked where the input's type was not known at build."""
    if data.ndim != 1 or data.dtype != np.uint8:
        raise TypeError(f"expected encoded bytes (a 1-D uint8 array), got {data.dtype} of shape {data.shape}")
    return data


class DecoderDeclaration:
    """What every image decoder declares, on both devices: encoded bytes in, HWC uint8 out."""

    def declare_outputs(self, inputs):
        check_encoded_input(self.name, inputs[0])
        output_type = self.args.output_type
        return OutputSpec(self.args.dtype.numpy, 3, "HWC",
                          channels=None if output_type is types.ANY_DATA else output_type.channels)


class ImageDecoder(DecoderDeclaration, SampleOperator):
    """Decodes whole images, or a window of each: subclasses choose the window."""

    # set at build when a resize follows: (height, width) of an image -> the size it is resized to
    shrink_target = None
    decodes_smaller = True

    def decode_smaller_for(self, target):
        self.shrink_target = target

    def build_notes(self):
        if self.shrink_target is None:
            return []
        return ["decodes at 1/2, 1/4 or 1/8 scale in the DCT domain where the window stays at least as large "
                "as the resize after it makes it (and is resized to the same size)"]

    def window(self, height: int, width: int, inputs: tuple, args: dict, sample: SampleContext):
        return None

    def run(self, inputs, args, sample, out=None):
        data = encoded_sample(inputs[0])
        output_type, adjust, dtype = args.output_type, args.adjust_orientation, args.dtype
        kind = image_codecs.image_format(data)
        if kind != "jpeg":
            image_codecs.check_pixels(*image_codecs.image_size(data), args.max_pixels)
            image = image_codecs.decode(data, output_type, adjust_orientation=adjust, dtype=dtype)
            window = self.window(*image.shape[:2], inputs, args, sample)
            return image if window is None else self._cut(image, window)
        header = image_codecs.jpeg_header_for_cpu(data)
        image_codecs.check_pixels(header.height, header.width, args.max_pixels)
        height, width = header.height, header.width
        if adjust and image_headers.orientation_swaps_axes(header.orientation):
            height, width = width, height  # as displayed: the window is chosen in that image
        window = self.window(height, width, inputs, args, sample)
        if window is None:
            scale = self._dct_scale(height, width)
            image = image_codecs.decode(data, output_type, min_height=-(-header.height // scale) if scale > 1 else 0,
                                        min_width=-(-header.width // scale) if scale > 1 else 0,
                                        adjust_orientation=adjust, header=header, dtype=dtype)
            return _scaled_extent(image, height, width, scale)
        self._check_window(window, height, width)
        scale = self._dct_scale(*window[2:])
        image = image_codecs.decode_jpeg_window(data, output_type, window, scale, adjust_orientation=adjust,
                                                header=header, dtype=dtype)
        return _scaled_extent(image, *window[2:], scale)

    def _check_window(self, window, height: int, width: int) -> None:
        """Windows reaching outside the image are cut to it (random crops) or rejected (fixed crops)."""

    def _dct_scale(self, crop_height: int, crop_width: int) -> int:
        """The largest of 1, 2, 4, 8 that keeps the window at least as large as the resize after it
        makes it, and that the resize takes to the same size as the whole window (a decoded size
        stands for a whole number of pixels, which may move an aspect-keeping resize's rounding)."""
        if self.shrink_target is None:
            return 1
        target = self.shrink_target(crop_height, crop_width)
        target_height, target_width = target
        scale = 1
        while scale < 8 and crop_height >= 2 * scale * target_height and crop_width >= 2 * scale * target_width \
                and self.shrink_target(_scaled_size(crop_height, 2 * scale), _scaled_size(crop_width, 2 * scale)) == target:
            scale *= 2
        return scale

    def _cut(self, image, window):
        top, left, crop_height, crop_width = window
        return cpu_image.crop_window(image, top, left, crop_height, crop_width, policy="trim_to_shape")


def _scaled_extent(image: np.ndarray, height: int, width: int, scale: int) -> np.ndarray:
    """A DCT-scaled decode cut to the nearest whole pixels of what the (height, width) it stands
    for covers: the decoder rounds its size up, and a last column that stands for 1 of 8 pixels
    would stretch the image (by up to 2% at 1/8 scale) when the resize after it samples it."""
    if scale == 1:
        return image
    return image[:_scaled_size(height, scale), :_scaled_size(width, scale)]


def _scaled_size(size: int, scale: int) -> int:
    return max(1, int(size / scale + 0.5))


@registry.register("decoders.image", "cpu")
class Image(ImageDecoder):
    pass


@registry.register("decoders.image_random_crop", "cpu")
class ImageRandomCrop(ImageDecoder):
    def draw(self, rng, count):
        return UniformBlocks.draw(rng, count, self.args.num_attempts)

    def window(self, height, width, inputs, args, sample):
        return random_crop_window(height, width, sample.params, args.random_aspect_ratio, args.random_area)


class FixedWindowDecoder(ImageDecoder):
    """A decoder whose window must lie inside the image: outside is an error, not a silent cut."""

    def _check_window(self, window, height, width):
        top, left, crop_height, crop_width = window
        if top < 0 or left < 0 or top + crop_height > height or left + crop_width > width:
            raise ValueError(f"{self.name}: the window {crop_height}x{crop_width} at ({top}, {left}) falls "
                             f"outside the {height}x{width} image")

    def _cut(self, image, window):
        self._check_window(window, *image.shape[:2])
        return super()._cut(image, window)


@registry.register("decoders.image_crop", "cpu")
class ImageCrop(FixedWindowDecoder):
    def window(self, height, width, inputs, args, sample):
        return geometry.crop_placement(height, width, args)


def slice_axes(args: dict, op_name: str) -> tuple[int, ...]:
    """The axes of the decoded image (0: H, 1: W) that the window's values refer to, in order."""
    if args.get("axes") is not None:
        axes = tuple(args.axes)
        if any(axis not in (0, 1) for axis in axes):
            raise ValueError(f"{op_name}: argument 'axes': {list(axes)}; a window cuts axes 0 (H) and 1 (W) of the "
                             "decoded HWC image")
    else:
        names = args.get("axis_names") or "WH"
        if any(name not in SLICED_LAYOUT for name in names):
            raise ValueError(f"{op_name}: argument 'axis_names': {names!r}; a window cuts the axes 'H' and 'W' of "
                             "the decoded HWC image")
        axes = tuple(SLICED_LAYOUT.index(name) for name in names)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op_name}: the sliced axes {list(axes)} repeat")
    return axes


def _single_precision(values):
    """rel_ values as DALI reads them (float32): the rounding of the window's edges follows."""
    return None if values is None else np.asarray(values, np.float32).tolist()


def _anchor_input(name: str, values, count: int, op_name: str) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype not in (np.int32, np.int64, np.float32):
        raise TypeError(f"{op_name}: the {name} input holds {values.dtype} values; it takes int32, int64 (pixels) or "
                        "float32")
    if values.size != count:  # unlike the arguments, one value does not stand for every axis (as DALI)
        raise ValueError(f"{op_name}: the {name} input has {values.size} values for the {count} sliced axes; give "
                         "one per axis")
    return values.reshape(-1)


@registry.register("decoders.image_slice", "cpu")
class ImageSlice(FixedWindowDecoder):
    def declare_outputs(self, inputs):
        named = [name for name in NAMED_WINDOW if self.args.get(name, ()) is not None]  # absent: per sample
        if len(inputs) == 2:
            raise ValueError(f"{self.name}: takes the window as two inputs (anchor and shape) or as arguments "
                             "(start, end, shape and their rel_ forms), not one input")
        if len(inputs) == 3 and named:
            raise ValueError(f"{self.name}: the window is given twice: as the anchor and shape inputs and as "
                             f"{', '.join(named)}; give one")
        if len(inputs) == 1 and not named:
            raise ValueError(f"{self.name}: give the window: anchor and shape inputs, or start/end/shape arguments "
                             "(or their rel_ forms)")
        return super().declare_outputs(inputs)

    def window(self, height, width, inputs, args, sample):
        """(top, left, height, width): slice's window arithmetic (tensors._slice_windows, which also
        decides which anchor and shape inputs are fractions) on the decoded image's extents, before
        anything is decoded."""
        axes = slice_axes(args, self.name)
        # slice's arguments, as slice_windows reads them
        window_args = Arguments({**{name: args[name] for name in NAMED_WINDOW}, "axes": axes, "anchor": None,
                                 "window_shape": None, "normalized_anchor": args.normalized_anchor,
                                 "normalized_shape": args.normalized_shape})
        for name in ("rel_start", "rel_end", "rel_shape"):
            window_args[name] = _single_precision(args[name])
        if len(inputs) == 3:
            window_args["anchor"], window_args["window_shape"] = (
                _anchor_input(name, value, len(axes), self.name) for name, value in (("anchor", inputs[1]),
                                                                                     ("shape", inputs[2])))
        bounds = [(0, height), (0, width)]
        try:
            windows = slice_windows(window_args, (height, width))
        except ValueError as error:
            raise ValueError(f"{self.name}: {error}") from None
        for axis, (begin, end) in zip(axes, windows):
            if end <= begin:
                raise ValueError(f"{self.name}: the window is empty or ends before it starts on axis "
                                 f"{SLICED_LAYOUT[axis]} ({begin} to {end})")
            bounds[axis] = (begin, end)
        (top, bottom), (left, right) = bounds
        return top, left, bottom - top, right - left


registry.register_schema(OpSchema(
    name="peek_image_shape", class_name="PeekImageShape", input_names=("data",),
    doc="The shape (height, width, channels) each encoded image has once decoded by the decoders (with the "
        "same adjust_orientation, and image_type as their output_type), read from its header without "
        "decoding. On the CPU only, as in DALI.",
    args=(Arg("adjust_orientation", "bool", True, "The shape as displayed: the EXIF orientation applied, as the "
              "decoders apply it (JPEG, PNG, WebP, TIFF)."),
          Arg("image_type", "image_type", types.RGB, "The colour space decoded to: 1 channel for GRAY, the file's "
              "own channels for ANY_DATA, else 3.", choices=(types.RGB, types.BGR, types.GRAY, types.YCbCr,
                                                             types.ANY_DATA)),
          Arg("dtype", "dtype", types.INT64, "Element type of the shape.", aliases=("type",),
              choices=(types.INT32, types.INT64, types.UINT32, types.UINT64, types.FLOAT, types.FLOAT64))),
    also_named=(("experimental.peek_image_shape", "experimental.PeekImageShape"),)))


@registry.register("peek_image_shape", "cpu")
class PeekImageShape(SampleOperator):
    def declare_outputs(self, inputs):
        check_encoded_input(self.name, inputs[0])
        return OutputSpec(self.args.dtype.numpy, 1, "", (3,))

    def run(self, inputs, args, sample, out=None):
        data = encoded_sample(inputs[0])
        height, width = image_codecs.decoded_size(data, args.adjust_orientation)
        image_type = args.image_type
        channels = image_codecs.stored_channels(data) if image_type is types.ANY_DATA else image_type.channels
        return np.array([height, width, channels], dtype=args.dtype.numpy)


# The CPU workers' share of a JPEG when cpu_decoder_load is not given, from a model of what each
# decoder costs (H100 and H200, BENCHMARKS.md): nvJPEG's hardware call takes about 13 us per image
# plus 82 us per megapixel of the whole image (256 windows of 0.24-megapixel JPEGs: 8.4 ms; of
# 2-megapixel JPEGs: 45 ms; whole images and windows alike); the rest of the GPU training pipeline
# keeps up with about 27,000 images/s (37 us each), so a share only pays where the hardware takes
# longer than that per image. One CPU core decodes a whole image in about 48 times the hardware's
# time for it (2-megapixel photographs at the 1/4 scale validation's resize allows: 8.3-9.0 ms, from
# the cores busy; reading the entropy-coded data, which no scale shortens, is most of it), and a
# window in that times the share of the image's rows down to the window's bottom (libjpeg-turbo
# reads the data that far; training windows: 6.6 ms). A whole image gets a share only where the
# engines take more than twice the pipeline's time per image: on ImageNet-like sets (0.1-0.5
# megapixels) validation did no faster with 0.1 (26,959 / 27,506 images/s against 27,781 / 27,103,
# H100, 16 cores), where on 2-megapixel photographs 0.2 made training 20% faster on 16. Windows get
# at least least_window_share(spare cores) where the cores allow and the engines set the pipeline's
# pace (no GPU work but the fused image kernel after the decode: optimize.let_decoders_share_windows):
# with the engines' calls made by the hardware lane (kernels/hardware_lane.py), ImageNet-sized
# training did 29,283 / 29,020 with a tenth on the workers against 26,685 / 26,242 without, past the
# engines' ceiling (about 27,700 windows/s). Each point of share keeps about 0.6 cores busy (4 + 60 x
# the share, measured at 0.06-0.15), and what it gains grows with the cores: on 16 (10 spare) 0.06 did
# as well as 0.1 on fewer cores (27,882 / 28,699 images/s on 8.3 / 7.7 cores, against 26,909 / 29,093
# on 9.8 / 9.5, and 27,312 / 27,540 on 4.7 / 4.5 without), where on 32 (26 spare) each step paid:
# 29,039 / 28,790 with 0.06, 29,617 / 29,816 with 0.1, 30,512 / 30,806 with 0.15 on 13.0 cores (H100s,
# one call each). So the floor spends a share of the spare cores (0.006 a core: 0.06 on 16 cores),
# at most MAX_WINDOW_FLOOR: with 0.13 on 32 cores, 11.9 / 12.8 cores were busy on a later start,
# about what DALI keeps busy on that host (11.7-12.0 in other calls), where 0.1 keeps 9.5-10.0.
HARDWARE_US_PER_IMAGE, HARDWARE_US_PER_MEGAPIXEL = 13.0, 82.0
PIPELINE_US_PER_IMAGE = 37.0
HEADROOM = 2.0
WINDOW_FLOOR_PER_SPARE_CORE = 0.006
MAX_WINDOW_FLOOR = 0.1
CPU_TO_HARDWARE_TIME = 48.0  # a whole image's
# what a GPU pipeline's own process and its share-free workers keep busy (4.1-4.6 cores measured),
# and 2 more: with 14.8 of 16 cores busy (a share of 0.21 of whole 2-megapixel images) validation
# ran no faster than with 8.8 (0.1)
PIPELINE_CORES = 6
MAX_AUTOMATIC_CPU_SHARE = 0.3  # larger shares were slower wherever measured (64 cores for one GPU)
# of whole images (no window) at most: on a 32-core host, validation on 2-megapixel photographs did
# 3,935 images/s with 0.3 of them on the CPU workers, 4,912 with 0.2 and 4,656 with none (19 cores
# busy at 0.3: not the cores; the cause was not found), where training windows did best at 0.3
MAX_WHOLE_IMAGE_CPU_SHARE = 0.2
# workers the automatic share gets at most: at its cap, with the engines at their rate, the share
# keeps about 21 cores busy (0.3 of 8,000 images/s of 48 x the hardware's time each, whatever the
# image size) and the pipeline about 5 more; a pipeline alone on a host of 128 cores does not fork 128
MAX_SHARE_WORKERS = 32
_GOLDEN = (math.sqrt(5) - 1) / 2


def least_window_share(spare_cores: int) -> float:
    """The least share of windows the CPU workers decode where the hardware engines set the
    pipeline's pace: more where more cores are spare (see the model above)."""
    return max(0.0, min(MAX_WINDOW_FLOOR, WINDOW_FLOOR_PER_SPARE_CORE * spare_cores))


def automatic_cpu_share(pixels: int, spare_cores: int, rows_read: float = 1.0, whole_image: bool = False,
                        window_floor: float = 0.0) -> float:
    """The share of JPEGs of ``pixels`` pixels that the CPU workers decode: enough to bring the
    hardware engines' time per image down to HEADROOM times the pipeline's (``needed``), no more
    than the spare cores decode in the time the engines take for the rest (``affordable``:
    (1 - f) * hardware = f * cpu / spare). ``rows_read``: the share of the image's rows the CPU
    decoder reads (down to its window's bottom): windows near the top cost the workers less, where
    the engines take the same time for any window. ``whole_image``: decoded without a window.
    ``pixels`` 0: a JPEG the hardware engines do not take (no share). ``window_floor``: the least
    share of a window (least_window_share(spare_cores) where the engines set the pipeline's pace)."""
    if spare_cores <= 0:
        return 0.0
    hardware = HARDWARE_US_PER_IMAGE + HARDWARE_US_PER_MEGAPIXEL * pixels / 1e6
    needed = 1.0 - HEADROOM * PIPELINE_US_PER_IMAGE / hardware
    if pixels and not whole_image:
        needed = max(needed, window_floor)
    affordable = spare_cores / (spare_cores + CPU_TO_HARDWARE_TIME * rows_read)
    cap = MAX_WHOLE_IMAGE_CPU_SHARE if whole_image else MAX_AUTOMATIC_CPU_SHARE
    return max(0.0, min(needed, affordable, cap))


class MixedDecoder(DecoderDeclaration, BatchOperator):
    """Decodes on the GPU. The CPU workers parse each header and choose its window (random crop,
    fixed crop, slice: the CPU decoder of the same name decides, so both devices choose the same
    windows for the same seed) and tell which JPEGs the hardware decoders take; the GPU stage then
    decodes the batch, ``hw_decoder_load`` of those on the hardware JPEG engines (one nvJPEG call)
    and the rest through nvImageCodec on CUDA cores."""

    cpu_class = None
    prepares_on_cpu = True
    preparation_crosses_processes = True  # prepare() returns plain data
    lanes = (("GPU decode", 2),)  # kernels.nvimgcodec_decode.LANES

    decodes_smaller = True  # what the CPU workers decode of the batch
    shares_windows = True

    def __init__(self, args, context):
        super().__init__(args, context)
        self._windows = self.cpu_class(args, context)
        self._engine = None
        self._emulated = devices.emulating_gpu()  # decode on the CPU workers, for the emulated GPU
        # the GPU's decoders make 8-bit RGB, BGR or gray: other outputs are decoded by the CPU
        # workers and uploaded
        self._decoded_on_cpu = self._emulated or args.dtype is not types.UINT8 or \
            args.output_type not in (types.RGB, types.BGR, types.GRAY)
        self._cpu_load = args.cpu_decoder_load  # None: automatic_cpu_share, per image
        # the machine's cores per pipeline, not num_threads: the batches stay the same whatever the threads
        self._spare_cores = distributed.default_threads() - PIPELINE_CORES
        self._window_floor = 0.0  # least_window_share(...) once share_windows() says the engines set it

    def share_windows(self):
        self._window_floor = least_window_share(self._spare_cores)

    # the GPU's decoders read the encoded JPEGs where the workers put them (and the GPU uploads the
    # share they decoded themselves, with cpu_decoder_load)
    gpu_reads_preparations = True

    def decode_smaller_for(self, target):
        self._windows.decode_smaller_for(target)

    def build_notes(self):
        if self._cpu_load is None:
            whole = self.cpu_class is Image
            small, large = (automatic_cpu_share(pixels, self._spare_cores, whole_image=whole,
                                                window_floor=self._window_floor)
                            for pixels in (500 * 375, 2_000_000))
            what = "whole images" if whole else "windows down to the bottom row; more of windows nearer the top"
            notes = [f"decodes a share of the JPEGs on the CPU workers, by size ({small:.0%} of 500x375 ones, "
                     f"{large:.0%} of 2-megapixel ones; {what})"] if large else []
        else:
            notes = [f"decodes {self._cpu_load:.0%} of each batch's JPEGs on the CPU workers"] if self._cpu_load else []
        return notes + self._windows.build_notes()

    def decodes_on_cpu(self, index: int, pixels: int = 0, rows_read: float = 1.0, whole_image: bool = False) -> bool:
        """Whether sample ``index`` of a batch (a JPEG of ``pixels`` pixels whose decode on the CPU
        reads ``rows_read`` of its rows; ``whole_image``: without a window) is in the CPU workers'
        share: spread evenly over the batch, and no timing decides, so a seed gives the same pixels
        in every run. A given cpu_decoder_load takes the same samples of every batch; the automatic
        share of each image is taken at a fixed, evenly spread point per index."""
        load = self._cpu_load
        if load is None:
            share = automatic_cpu_share(pixels, self._spare_cores, rows_read, whole_image, self._window_floor)
            return share > 0 and (index + 1) * _GOLDEN % 1.0 < share
        return load > 0 and math.floor((index + 1) * load) > math.floor(index * load)

    def draw(self, rng, count):
        return self._windows.draw(rng, count)

    def cpu_workers_wanted(self) -> int:
        """The automatic share keeps the machine's spare cores busy: as many workers as its cores
        per pipeline, even where num_threads asks for fewer (DALI's examples ask for 4), which the
        share of large JPEGs would leave the pipeline waiting for."""
        if self._cpu_load is not None or self._spare_cores <= 0 or self._decoded_on_cpu:
            return 0
        return min(self._spare_cores + PIPELINE_CORES, MAX_SHARE_WORKERS)  # the machine's cores per pipeline

    @property
    def engines(self) -> list[str]:
        if self._engine is None:
            return ["CPU threads"]
        engines = []
        if self._engine.decoded_on_gpu:
            engines.append("GPU (hardware JPEG engines and CUDA cores)")
        if self._engine.decoded_on_cpu:
            engines.append("CPU workers (their share of the JPEGs, and what the GPU decoders do not take)")
        return engines

    def prepare(self, inputs, args, sample):
        """On a CPU worker (thread or process): an EncodedImage (the data, its size and window); the
        decoded window itself when the GPU is emulated on the CPU."""
        if self._decoded_on_cpu:
            return np.asarray(self._windows.run(inputs, args, sample))
        return self.encoded(inputs, args, sample)

    def encoded(self, inputs, args, sample):
        """The EncodedImage of one sample: a JPEG's data, size, window, and whether the hardware
        JPEG decoders take it (from the header, checked against ``max_pixels``). What the GPU
        decoders do not take (other formats; CMYK, YCCK, 12-bit, lossless and arithmetic-coded
        JPEGs; JPEGs to be shown rotated or flipped) is decoded here by the CPU decoder of the same
        name (the same window for the same draws) and goes to the GPU as pixels: decoded once, and
        not on the thread that launches the GPU work."""
        from penstock.runtime.nvimgcodec_decode import EncodedImage
        data = np.ascontiguousarray(inputs[0])  # the decoders read its bytes from its address
        header = image_codecs.jpeg_header(data) if image_codecs.is_jpeg(data) else None
        if header is None or not header.gpu or (args.adjust_orientation and header.orientation != 1):
            return self._decoded_here(inputs, args, sample)
        image_codecs.check_pixels(header.height, header.width, args.max_pixels)
        window = self._clipped_window(header.height, header.width, inputs, args, sample)
        rows_read = 1.0 if window is None else (window[0] + window[2]) / header.height
        if self.decodes_on_cpu(sample.index, header.height * header.width if header.hardware else 0, rows_read,
                               window is None):
            return self._decoded_here(inputs, args, sample, window[2:] if window else (header.height, header.width))
        return EncodedImage((data, window, header.height, header.width, header.hardware))

    def _decoded_here(self, inputs, args, sample, extent=None):
        """The CPU decoder's image; ``extent``: the size the GPU's decoders would have made of it."""
        from penstock.runtime.nvimgcodec_decode import EncodedImage
        image = np.ascontiguousarray(self._windows.run(inputs, args, sample))
        if extent is None:
            return EncodedImage((image, None, image.shape[0], image.shape[1], False))
        return EncodedImage((image, None, image.shape[0], image.shape[1], False, tuple(extent)))

    def _clipped_window(self, height, width, inputs, args, sample):
        window = self._windows.window(height, width, inputs, args, sample)
        if window is not None:
            self._windows._check_window(window, height, width)
            top, left, crop_height, crop_width = window
            top, left = max(top, 0), max(left, 0)
            window = (top, left, min(crop_height, height - top), min(crop_width, width - left))
        return window

    def run_batch(self, inputs, args, batch):
        import torch
        from penstock.kernels.image_plan import ImagePlan
        prepared = inputs[0]
        if self._decoded_on_cpu:  # copies: the images may lie in worker processes' rings, written over after the batch
            images = [torch.from_numpy(np.array(image)) for image in prepared]
            return ImagePlan.of(images if self._emulated else [image.to(batch.device) for image in images])
        if self._engine is None:
            self._engine = self._new_engine(batch.device, batch.run_call)
        def describe(index):  # errors surface when the batch's outputs are made, so they name the operator
            return f"{self.name} on '{batch.source_infos[index]}'" if batch.source_infos else \
                f"{self.name} on sample {index}"

        # the decode runs while the executor finishes the batch before this one; the plan waits
        # for it before its kernel reads the images
        pending = self._engine.submit(prepared, batch.stream, describe, batch.run_call, batch.run_on_workers)
        return replace(ImagePlan.of(pending.images), pending=pending)

    def open(self, device, run_call):
        """nvImageCodec's instance and nvJPEG's hardware decoder take a second or two to make: made
        while the CPU stage reads and parses the first batch, not after."""
        if self._engine is None and not self._decoded_on_cpu and device is not None and device.type == "cuda":
            self._engine = self._new_engine(device, run_call)

    def _new_engine(self, device, run_call):
        from penstock.runtime.nvimgcodec_decode import GpuImageDecoder
        return GpuImageDecoder(device.index or 0, self.context.num_threads, self.args.output_type,
                               self.args.hw_decoder_load, batch_size_hint=self.context.batch_size,
                               run_call=run_call)

    def close(self):
        if self._engine is not None:  # kept: its counts say which engines decoded
            self._engine.close()


@registry.register("decoders.image", "mixed", requires=devices.decoder_problem)
class ImageMixed(MixedDecoder):
    cpu_class = Image


@registry.register("decoders.image_random_crop", "mixed", requires=devices.decoder_problem)
class ImageRandomCropMixed(MixedDecoder):
    cpu_class = ImageRandomCrop


@registry.register("decoders.image_crop", "mixed", requires=devices.decoder_problem)
class ImageCropMixed(MixedDecoder):
    cpu_class = ImageCrop


@registry.register("decoders.image_slice", "mixed", requires=devices.decoder_problem)
class ImageSliceMixed(MixedDecoder):
    cpu_class = ImageSlice
