"""Image decoders: ``decoders.image``, ``decoders.image_random_crop``, ``decoders.image_crop`` and
``decoders.image_slice``, their arguments and their CPU implementations (the GPU's: decoders.mixed).
Input: encoded bytes (uint8, 1-D); output: HWC uint8 images. And ``peek_image_shape``: the shape
they decode an image to, from its header.

On the CPU ('cpu') each sample is decoded on a worker, only its window, and smaller in the DCT
domain when a fixed-size resize follows."""
from __future__ import annotations

import math

import numpy as np

from penstock import registry, types
from penstock.capabilities import ShrinksOnDecode
from penstock.contract import OutputSpec, SampleContext, SampleOperator
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


class ImageDecoder(ShrinksOnDecode, DecoderDeclaration, SampleOperator):
    """Decodes whole images, or a window of each: subclasses choose the window."""

    # set at build when a resize follows: (height, width) of an image -> the size it is resized to
    shrink_target = None

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
            window_args = window_args.replace(anchor=_anchor_input("anchor", inputs[1], len(axes), self.name),
                                              window_shape=_anchor_input("shape", inputs[2], len(axes), self.name))
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
