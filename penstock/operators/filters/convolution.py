"""Filters: ``gaussian_blur``, ``laplacian``, ``filter`` (the user's kernel), ``median_blur``,
``erode`` and ``dilate`` over HWC (or HW) images, as DALI's; the last three also under DALI's
names ``experimental.median_blur``, ``experimental.erode`` and ``experimental.dilate``.

Every operator but the median is a window slid over the image: each builds, from its arguments,
a ``Window`` (weights, anchor, border rule, what it computes: a weighted sum or the minimum or
maximum over the taps). The rules that build windows are plain functions shared by both devices;
the CPU applies a window with OpenCV after padding the image by the border rule (so every rule,
'wrap' included, means the same as on the GPU), the GPU with one Triton kernel launch over the
ragged batch (penstock.kernels.triton_filters). Sums are computed in float32 and converted to the
output type by penstock.numeric's rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.schema import REQUIRED, Arg, ArgError, ArgTypeError, OpSchema, closest
from penstock.operators.shared.windows import Window, apply_window

# DALI's border names -> the rule each means (the morphology operators take OpenCV's names too)
BORDER_RULES = {"reflect_101": "reflect_101", "reflect_1001": "reflect_1001", "wrap": "wrap", "clamp": "clamp",
                "constant": "constant", "replicate": "clamp", "reflect": "reflect_1001"}
# filter's border names (any letter case), as DALI 2.4 parses them -> the rule each means
FILTER_BORDERS = {"reflect_101": "reflect_101", "reflect101": "reflect_101", "101": "reflect_101",
                  "reflect_1001": "reflect_1001", "reflect1001": "reflect_1001", "1001": "reflect_1001",
                  "reflect": "reflect_1001", "wrap": "wrap", "clamp": "clamp", "edge": "clamp",
                  "constant": "constant", "const": "constant", "fill": "constant", "pad": "constant"}
MORPHOLOGY_BORDERS = ("constant", "replicate", "reflect", "reflect_101", "wrap")
MAX_LAPLACIAN_WINDOW = 31  # DALI's limit (OpenCV's), whatever its documentation says (23)


# ---- argument rules, shared by both devices --------------------------------------------------
def per_axis(values, name: str, count: int = 2) -> tuple:
    """``count`` values (one per spatial axis, outermost first) from one value or one per axis."""
    values = tuple(values)
    if len(values) == 1:
        return values * count
    if len(values) == count:
        return values
    raise ArgError(f"argument '{name}': expected one value or one per spatial axis ({count} here), got {len(values)}")


def _check_odd(name: str, values, low: int, high: int | None = None, zero_allowed: bool = False) -> None:
    for value in values:
        if zero_allowed and value == 0:
            continue
        if value < low or (high is not None and value > high) or value % 2 == 0:
            span = f"between {low} and {high}" if high is not None else f"of at least {low}"
            raise ArgError(f"argument '{name}': window sizes must be odd integers {span}"
                           f"{' (or 0)' if zero_allowed else ''}, got {value}")


def _checked(op_name: str, check, *arguments) -> None:
    """Runs an argument check on a sample's values (per-sample arguments), naming the operator;
    returns what the check returns."""
    try:
        return check(*arguments)
    except ArgError as error:
        raise ValueError(f"{op_name}: {error}") from None


def _static_check(names: tuple[str, ...], check):
    """A schema check that runs ``check(static)`` when none of ``names`` is a per-sample input."""
    def schema_check(static: dict, per_sample: frozenset) -> None:
        if not per_sample & set(names):
            check(static)
    return schema_check


def anchor_of(anchor, size: tuple[int, int], name: str = "anchor") -> tuple[int, int]:
    """The anchor (row, column) of a window of ``size``: -1 on an axis means its middle."""
    anchors = per_axis(anchor, name)
    result = []
    for value, extent in zip(anchors, size):
        if value == -1:
            value = extent // 2
        if not 0 <= value < extent:
            raise ArgError(f"argument '{name}': {value} is outside the window's {extent} rows or columns "
                           "(give 0 to size - 1, or -1 for the middle)")
        result.append(value)
    return result[0], result[1]


def gaussian_window(sigma: float, size: int) -> np.ndarray:
    """DALI's Gaussian window: from sigma alone, 2 * ceil(3 * sigma) + 1 taps; from the size alone,
    sigma = (radius - 1) * 0.3 + 0.8; normalized to sum 1."""
    if size == 0:
        size = 2 * math.ceil(3 * sigma) + 1
    if sigma == 0:
        sigma = ((size - 1) / 2 - 1) * 0.3 + 0.8
    positions = np.arange(size, dtype=np.float64) - (size - 1) / 2
    window = np.exp(-positions ** 2 / (2 * sigma ** 2))
    return window / window.sum()


def _check_gaussian(args: dict) -> None:
    count = max(len(args.sigma), len(args.window_size))
    sizes, sigmas = per_axis(args.window_size, "window_size", count), per_axis(args.sigma, "sigma", count)
    _check_odd("window_size", sizes, 1, zero_allowed=True)
    for sigma, size in zip(sigmas, sizes):
        if sigma == 0 and size == 0:
            raise ArgError("give sigma or window_size for every axis (both are 0)")


# A separable filter: the sum of terms, each a factor and one 1-D window per spatial axis (outermost first)
Terms = list[tuple[float, list[np.ndarray]]]


def gaussian_terms(args: dict, count: int, op_name: str) -> Terms:
    _checked(op_name, _check_gaussian, args)
    sizes = _checked(op_name, per_axis, args.window_size, "window_size", count)
    sigmas = _checked(op_name, per_axis, args.sigma, "sigma", count)
    return [(1.0, [gaussian_window(sigma, size) for sigma, size in zip(sigmas, sizes)])]


def smoothing_window(size: int) -> np.ndarray:
    """Binomial coefficients: [1, 2, 1] convolved with itself, ``size`` taps (OpenCV's Sobel smoothing)."""
    window = np.ones(1)
    for _ in range(size - 1):
        window = np.convolve(window, [1.0, 1.0])
    return window


def derivative_window(size: int) -> np.ndarray:
    """The second derivative [1, -2, 1] convolved with the smoothing window of ``size - 2`` taps."""
    return np.convolve(smoothing_window(size - 2), [1.0, -2.0, 1.0])


def _check_laplacian(args: dict) -> None:
    _check_odd("window_size", args.window_size, 3, MAX_LAPLACIAN_WINDOW)
    if args.smoothing_size is not None:
        _check_odd("smoothing_size", args.smoothing_size, 1, MAX_LAPLACIAN_WINDOW)


def _check_laplacian_call(static: dict, per_sample: frozenset) -> None:
    if static.normalized_kernel and ("scale" in per_sample or tuple(static.scale) != (1.0,)):
        raise ArgError("argument 'scale' cannot be given with normalized_kernel=True (it sets the scale)")


def laplacian_terms(args: dict, count: int, op_name: str) -> Terms:
    """The sum over the spatial axes of the second derivative along each: the derivative window
    along its axis and smoothing windows along the others (of smoothing_size, default the
    derivative's size), scaled by its ``scale`` or, with normalized_kernel, by
    2 ** -(sum of its window sizes - axes - 2), as DALI."""
    _checked(op_name, _check_laplacian, args)
    derivative = _checked(op_name, per_axis, args.window_size, "window_size", count)
    smoothing = _checked(op_name, per_axis, args.smoothing_size, "smoothing_size", count) \
        if args.smoothing_size is not None else None
    scales = _checked(op_name, per_axis, args.scale, "scale", count)
    terms = []
    for axis in range(count):
        sizes = [derivative[axis] if other == axis or smoothing is None else smoothing[other] for other in range(count)]
        windows = [derivative_window(size) if other == axis else smoothing_window(size)
                   for other, size in enumerate(sizes)]
        scale = 2.0 ** -(sum(sizes) - count - 2) if args.normalized_kernel else scales[axis]
        terms.append((scale, windows))
    return terms


def _centered(weights: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Odd-sized ``weights`` in the middle of zeros of the odd ``shape``."""
    padded = np.zeros(shape)
    top, left = (shape[0] - weights.shape[0]) // 2, (shape[1] - weights.shape[1]) // 2
    padded[top:top + weights.shape[0], left:left + weights.shape[1]] = weights
    return padded


def planar_window(terms: Terms) -> Window:
    """The 2-D window (reflect_101 borders) of separable terms over one or two spatial axes (one
    axis stands as a row: a window of one tap in height)."""
    products = [scale * np.outer(*(windows if len(windows) == 2 else [np.ones(1), *windows]))
                for scale, windows in terms]
    shape = (max(p.shape[0] for p in products), max(p.shape[1] for p in products))
    weights = sum(_centered(product, shape) for product in products)
    return Window(weights.astype(np.float32), (shape[0] // 2, shape[1] // 2), "reflect_101")


def separable_volume(volume: np.ndarray, terms: Terms) -> np.ndarray:
    """The terms over a [D, H, W, C] volume in float32, reflect_101 borders, one axis at a time."""
    total = np.zeros(volume.shape, np.float32)
    for scale, windows in terms:
        values = volume.astype(np.float32)
        for axis, window in enumerate(windows):
            if len(window) == 1:
                values = values * np.float32(window[0])
                continue
            radius = len(window) // 2
            pad = [(0, 0)] * values.ndim
            pad[axis] = (radius, radius)
            padded = np.pad(values, pad, mode="reflect" if values.shape[axis] > 1 else "edge")
            taps = np.lib.stride_tricks.sliding_window_view(padded, len(window), axis=axis)
            values = taps @ window.astype(np.float32)
        total += np.float32(scale) * values
    return total


def _check_filter(args: dict) -> None:
    given = args.filter
    if isinstance(given, np.ndarray) and given.dtype not in (np.float32, np.float64):
        # DALI takes float32 filters (its constants make float64 arrays float32)
        raise ArgTypeError(f"argument 'filter': expected float32 values, got {given.dtype}")
    weights = np.asarray(given, dtype=np.float64) if given is not None else None
    if weights is None or weights.ndim != 2 or weights.size == 0:
        shape = "nothing" if weights is None else f"an array of shape {weights.shape}"
        raise ArgError(f"argument 'filter': expected a non-empty 2-D array (rows, columns of the filter), got {shape}")
    anchor_of(args.anchor, weights.shape)


FILTER_MODES = ("same", "valid")


def _check_filter_names(static: dict, per_sample: frozenset) -> None:
    """border and mode, in any letter case (as DALI)."""
    for name, names in (("border", list(FILTER_BORDERS)), ("mode", FILTER_MODES)):
        if static[name].lower() not in names:
            raise ArgError(f"argument '{name}': expected one of {', '.join(map(repr, names))} (any letter case), "
                           f"got {static[name]!r}{closest(static[name].lower(), names)}")


def is_valid_mode(args: dict) -> bool:
    return args.get("mode", "same").lower() == "valid"


def filter_window(args: dict, op_name: str) -> Window:
    _checked(op_name, _check_filter, args)
    weights = np.asarray(args.filter, dtype=np.float32)
    valid = is_valid_mode(args)
    anchor = (0, 0) if valid else anchor_of(args.anchor, weights.shape)
    fill = args.fill_value if args.fill_value is not None else 0.0
    return Window(weights, anchor, FILTER_BORDERS[args.border.lower()], float(fill), valid=valid)


def _mask_and_anchor(args: dict) -> tuple[tuple[int, int], tuple[int, int]]:
    """The structuring element's (rows, columns) and anchor (row, column): DALI gives both as
    (x, y), width first (CV-CUDA's and OpenCV's order)."""
    width, height = per_axis(args.mask_size, "mask_size")
    x, y = per_axis(args.anchor, "anchor")
    return (height, width), anchor_of((y, x), (height, width))


def _check_morphology(args: dict) -> None:
    _mask_and_anchor(args)


def morphology_window(args: dict, op_name: str, operation: str, dtype: np.dtype) -> Window:
    """A rectangle of mask_size; more iterations grow it by mask_size - 1 each (as DALI and
    OpenCV say of iterations), with the anchor scaled alike. The 'constant' border takes no part."""
    mask, anchor = _checked(op_name, _mask_and_anchor, args)
    iterations = args.iterations
    size = tuple(extent + (iterations - 1) * (extent - 1) for extent in mask)
    neutral = float("inf") if operation == "min" else float("-inf")
    if dtype.kind in "iu":  # OpenCV's default border value: the type's extreme
        neutral = float(np.iinfo(dtype).max if operation == "min" else np.iinfo(dtype).min)
    return Window(np.ones(size, np.float32), (anchor[0] * iterations, anchor[1] * iterations),
                  BORDER_RULES[args.border_mode], neutral, operation)


def median_cpu(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The median over a window of ``size`` around each pixel, the edge pixels repeated outside:
    OpenCV's medianBlur where it applies, else numpy over sliding windows."""
    height, width, channels = image.shape
    square = size[0] == size[1]
    if square and channels in (1, 3, 4) and (image.dtype == np.uint8 or (image.dtype == np.float32 and size[0] <= 5)):
        return cv2.medianBlur(np.ascontiguousarray(image), size[0]).reshape(image.shape)
    padded = np.pad(image, ((size[0] // 2,) * 2, (size[1] // 2,) * 2, (0, 0)), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=(0, 1))
    return np.median(windows.reshape(height, width, channels, -1), axis=-1).astype(image.dtype)


# ---- schemas -------------------------------------------------------------------------------------
DTYPE_ARG = Arg("dtype", "dtype", None, "Output type: the input's (the default; sums are computed in float32 and "
                "rounded, halves away from zero, and saturated to it) or float, as DALI.")
LAYOUTS_DOC = (" Samples are laid out as frames or channels first ('F', 'C': each plane is filtered on its own), then "
               "the spatial axes, then channels ('C') or none: HW, HWC, CHW, FHWC, FCHW...; without a layout every "
               "axis is spatial.")
# DALI's CPU kernels' input types (gaussian_blur.h, laplacian.h, filter.h)
BLUR_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                         np.int64, np.float16, np.float32, np.float64))
LAPLACIAN_TYPES = BLUR_TYPES[:-1]
FILTER_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.int16, np.float32))

registry.register_schema(OpSchema(
    name="gaussian_blur", class_name="GaussianBlur",
    doc="Blurs images, sequences and volumes (1 to 3 spatial axes) with a Gaussian window per spatial axis. From "
        "sigma alone the window has 2 * ceil(3 * sigma) + 1 taps; from window_size alone sigma = (radius - 1) * 0.3 "
        "+ 0.8, radius = (window_size - 1) / 2, as DALI. The data is reflected at its edges (reflect_101)."
        + LAYOUTS_DOC,
    args=(Arg("sigma", "floats", (0.0,), "Standard deviation of the window: one, or one per spatial axis "
              "(outermost first); 0 derives it from window_size.", per_sample=True, length=(1, 2, 3), min=0.0),
          Arg("window_size", "ints", (0,), "Odd window size: one, or one per spatial axis; 0 derives it from sigma.",
              per_sample=True, length=(1, 2, 3), min=0),
          DTYPE_ARG),
    checks=(_static_check(("sigma", "window_size"), _check_gaussian),),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="laplacian", class_name="Laplacian",
    doc="The Laplacian of images, sequences and volumes (1 to 3 spatial axes): the sum of the second derivatives "
        "along the spatial axes, each a separable window (OpenCV's Sobel windows: the derivative along its axis, "
        "binomial smoothing along the others), the data reflected at its edges (reflect_101), as DALI."
        + LAYOUTS_DOC,
    args=(Arg("window_size", "ints", (3,), "Odd size (3 to 31) of the derivative windows: one, or one per "
              "spatial axis.", per_sample=True, length=(1, 2, 3), min=3, max=MAX_LAPLACIAN_WINDOW),
          Arg("smoothing_size", "ints", None, "Odd size (1 to 31) of the smoothing windows: one, or one per "
              "spatial axis; default the derivative window's size.", per_sample=True, length=(1, 2, 3), min=1,
              max=MAX_LAPLACIAN_WINDOW),
          Arg("scale", "floats", (1.0,), "Factor of each derivative: one, or one per spatial axis.", per_sample=True,
              length=(1, 2, 3)),
          Arg("normalized_kernel", "bool", False, "Scales each derivative by 2 ** -(sum of its window sizes - "
              "axes - 2) (not with scale)."),
          DTYPE_ARG),
    checks=(_static_check(("window_size", "smoothing_size", "scale"), _check_laplacian), _check_laplacian_call),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="filter", class_name="Filter",
    doc="Correlates images (two spatial axes) with a 2-D filter (the filter is not flipped, as in DALI): "
        "``fn.filter(data, filter, fill_value)``; the filter (float32 values, per sample when it is an "
        "operator's output) and the fill value may also be given as arguments. In mode 'same' the output "
        "keeps the input's size and the anchor places the filter; in mode 'valid' only the pixels whose "
        "filter lies inside the image are computed (the anchor does not apply). Types: uint8, uint16, int16 and "
        "float." + LAYOUTS_DOC,
    args=(Arg("filter", "any", REQUIRED, "The 2-D filter (rows, columns) of float32 values.", per_sample=True,
              input_types=(np.dtype(np.float32),)),
          Arg("fill_value", "float", None, "What pixels outside the image read with border 'constant' "
              "(default 0).", per_sample=True, nullable=True),
          Arg("anchor", "ints", (-1,), "The filter's element (row, column) placed on each output pixel: one "
              "value or one per axis; -1 means the middle (size // 2).", per_sample=True, length=(1, 2), min=-1),
          Arg("border", "str", "reflect_101", "Pixels outside the image: 'reflect_101' (dcb|abcd|cba; also "
              "'reflect101', '101'), 'reflect_1001' (cba|abcd|dcb; also 'reflect1001', '1001', 'reflect'), 'wrap', "
              "'clamp' (also 'edge') or 'constant' (fill_value; also 'const', 'fill', 'pad'), in any letter case, "
              "as DALI."),
          Arg("mode", "str", "same", "'same' (output of the input's size) or 'valid', in any letter case."),
          DTYPE_ARG),
    checks=(_static_check(("filter", "anchor"), _check_filter), _check_filter_names),
    argument_inputs=("filter", "fill_value"),
    also_named=(("experimental.filter", "experimental.Filter"),),
    input_names=("data",)))

MEDIAN_ARGS = (Arg("window_size", "ints", (3,), "Odd window size: one, or one per axis (height, width).",
                   per_sample=True, length=(1, 2), min=1),)
MEDIAN_DOC = ("The median of each channel over a window around each pixel of HW, HWC, CHW, FHWC or FCHW images; "
              "outside the image the edge pixels repeat.")
MORPHOLOGY_ARGS = (
    Arg("mask_size", "ints", (3, 3), "Size of the rectangular structuring element: one, or (width, height) "
        "as DALI.", per_sample=True, length=(1, 2), min=1),
    Arg("anchor", "ints", (-1, -1), "The element's pixel (x, y) placed on each output pixel; -1 means "
        "its middle (size // 2).", per_sample=True, length=(1, 2), min=-1),
    Arg("iterations", "int", 1, "Times the operation is applied: each one more grows the mask by "
        "mask_size - 1 (as DALI).", min=1),
    Arg("border_mode", "str", "constant", "Pixels outside the image: 'constant' (they take no part), "
        "'replicate', 'reflect', 'reflect_101' or 'wrap'.", choices=MORPHOLOGY_BORDERS),
)
MORPHOLOGY_DOCS = {"erode": "The minimum of each channel over a rectangle around each pixel of HW, HWC, CHW, "
                            "FHWC or FCHW images (erosion, as OpenCV's erode with a rectangular element).",
                   "dilate": "The maximum of each channel over a rectangle around each pixel of HW, HWC, CHW, "
                             "FHWC or FCHW images (dilation, as OpenCV's dilate with a rectangular element)."}


def _check_median(args: dict) -> None:
    _check_odd("window_size", per_axis(args.window_size, "window_size"), 1)


def _register_under_both_names(name: str, class_name: str, doc: str, args: tuple, checks: tuple) -> None:
    """The operator as ``name``, also named DALI's ``experimental.name``."""
    registry.register_schema(OpSchema(name=name, class_name=class_name, doc=doc, args=args, checks=checks,
                                      input_names=("input",),
                                      also_named=((f"experimental.{name}", f"experimental.{class_name}"),)))


_register_under_both_names("median_blur", "MedianBlur", MEDIAN_DOC, MEDIAN_ARGS,
                           (_static_check(("window_size",), _check_median),))
for _name, _class_name in (("erode", "Erode"), ("dilate", "Dilate")):
    _register_under_both_names(_name, _class_name, MORPHOLOGY_DOCS[_name], MORPHOLOGY_ARGS,
                               (_static_check(("mask_size", "anchor"), _check_morphology),))


# ---- implementations -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SampleAxes:
    """How a sample's axes split, as DALI reads its layout: leading frame or channel-first axes
    (each plane between them is filtered on its own), the spatial axes, then channels or none."""

    lead: int
    spatial: int
    channels: bool

    def planes(self, sample):
        """[planes, *spatial, channels] (a reshape: a view where it can be; numpy or torch)."""
        shape = tuple(sample.shape)
        count = int(np.prod(shape[:self.lead], dtype=np.int64)) if self.lead else 1
        return sample.reshape(count, *shape[self.lead:self.lead + self.spatial], shape[-1] if self.channels else 1)

    def restore(self, planes, sample_shape: tuple):
        """planes' inverse for the filtered planes (whose spatial size may differ: mode 'valid')."""
        spatial = tuple(planes.shape[1:1 + self.spatial])
        return planes.reshape(*sample_shape[:self.lead], *spatial, *sample_shape[-1:] if self.channels else ())


def sample_axes(layout: str, ndim: int, op_name: str, spatial_counts: tuple) -> SampleAxes:
    if not layout:
        if ndim not in spatial_counts:
            raise ValueError(f"{op_name}: a sample of {ndim} dimensions without a layout (every axis is then spatial); "
                             f"takes {' or '.join(map(str, spatial_counts))} spatial axes: give the layout")
        return SampleAxes(0, ndim, False)
    if len(layout) != ndim:
        raise ValueError(f"{op_name}: a sample of {ndim} dimensions in the layout '{layout}'")
    lead = len(layout) - len(layout.lstrip("FC"))
    channels = len(layout) > lead and layout[-1] == "C"
    inner = layout[lead:len(layout) - channels]
    if lead > 2 or len(inner) not in spatial_counts or "F" in inner or "C" in inner:
        raise ValueError(f"{op_name}: takes layouts of frames or channels first ('F', 'C'), then "
                         f"{' or '.join(map(str, spatial_counts))} spatial axes, then channels ('C') or none; got "
                         f"'{layout}'")
    if (lead, len(inner), channels) == (0, 1, True):
        # DALI's kernels refuse this one form (one spatial axis then channels, as 'WC'); 'FWC' goes
        raise ValueError(f"{op_name}: takes no samples of one spatial axis followed by channels ('{layout}'), as "
                         "DALI; give them a leading frames axis or lay them out channels first")
    return SampleAxes(lead, len(inner), channels)


class FilterDeclaration:
    """What every filter declares and checks: the layouts and types it takes, and its output type
    (the input's, or float where dtype says so)."""

    keeps_type = False  # min, max and median: the input's type always
    input_types: tuple = ()  # () takes every type
    spatial_counts = (2,)
    layouts: tuple = ()  # DALI's list where it has one (without a layout: HW or HWC by the dimensions)
    # integer outputs round halves to even on the CPU too (filter: DALI converts with OpenCV's rounding),
    # else away from zero (DALI's own CPU kernels)
    halves_to_even = False

    def declare_outputs(self, inputs):
        spec = inputs[0]
        self._layout = spec.layout
        if spec.ndim is not None or spec.layout:
            self.axes_of(spec.ndim if spec.ndim is not None else len(spec.layout))
        dtype = self.output_type(self.args, spec.dtype) if spec.dtype is not None else None
        valid = is_valid_mode(self.args)
        return spec.but(dtype=dtype, shape=None if valid else spec.shape)

    def axes_of(self, ndim: int) -> SampleAxes:
        layout = self._layout
        if self.layouts:
            if layout and layout not in self.layouts:
                raise ValueError(f"{self.name}: takes the layouts {', '.join(self.layouts)}; got '{layout}'")
            layout = layout or {2: "HW", 3: "HWC"}.get(ndim, "")
        return sample_axes(layout, ndim, self.name, self.spatial_counts)

    def output_type(self, args: dict, input_type) -> np.dtype:
        input_type = np.dtype(input_type)
        if self.input_types and input_type not in self.input_types:
            raise TypeError(f"{self.name}: takes {', '.join(t.name for t in self.input_types)} data, got {input_type}")
        dtype = args.get("dtype")
        if dtype is None or self.keeps_type:
            return input_type
        if np.dtype(dtype.numpy) not in (input_type, np.dtype(np.float32)):
            raise TypeError(f"{self.name}: argument 'dtype': the output type is the input's ({input_type}) or float, "
                            f"got {np.dtype(dtype.numpy)}")
        return np.dtype(dtype.numpy)

    def window(self, args: dict, dtype: np.dtype, spatial: int) -> Window:
        raise NotImplementedError

    def filtered(self, sample: np.ndarray, args: dict) -> np.ndarray:
        """One sample's output on the CPU."""
        axes = self.axes_of(sample.ndim)
        out_type = self.output_type(args, sample.dtype)
        planes = axes.planes(sample)
        if axes.spatial == 3:
            terms = self.terms(args, 3)
            result = np.stack([separable_volume(plane, terms) for plane in planes])
        else:
            window = self.window(args, sample.dtype, axes.spatial)
            rows = planes if axes.spatial == 2 else planes[:, None]  # one spatial axis: a row
            result = np.stack([apply_window(plane, window, self.name) for plane in rows])
            result = result if axes.spatial == 2 else result[:, 0]
        if self.halves_to_even and out_type.kind in "iu":
            result = np.rint(result)
        return axes.restore(numeric.saturate(result, out_type), sample.shape)


class WindowFilter(FilterDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        return self.filtered(np.asarray(inputs[0]), args)


class WindowFilterGpu(FilterDeclaration, BatchOperator):
    """Every plane of the batch (images, the frames of sequences, the channels of channel-first
    samples) in one Triton launch; volumes through the CPU form on the executor's CPU workers."""

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.kernels import triton_filters
        from penstock.runtime.pinned import to_device
        samples = tensors_of(inputs[0])
        if not samples:
            return []
        axes = [self.axes_of(sample.dim()) for sample in samples]
        if any(a.spatial == 3 for a in axes):
            return self.through_host(samples, args, batch)
        dtype = types.to_numpy_dtype(samples[0].dtype)
        out_type = self.output_type(args[0], dtype)
        windows = [self.window(a, dtype, sample_axes.spatial) for a, sample_axes in zip(args, axes)]
        operations, borders = {w.operation for w in windows}, {w.border for w in windows}
        assert len(operations) == len(borders) == 1  # set by static arguments: one per batch
        images, owners = [], []
        for index, (sample, sample_axes) in enumerate(zip(samples, axes)):
            planes = sample_axes.planes(sample)
            planes = planes if sample_axes.spatial == 2 else planes[:, None]
            images.extend(planes.unbind(0))
            owners.extend([index] * len(planes))
        results = triton_filters.run_window(
            images, [(windows[o].weights, windows[o].anchor) for o in owners],
            [windows[o].output_size(*image.shape[:2], self.name) for o, image in zip(owners, images)],
            operations.pop(), borders.pop(), [windows[o].fill for o in owners], types.to_torch_dtype(out_type),
            self.name, upload=to_device)
        outputs, start = [], 0
        for sample, sample_axes in zip(samples, axes):
            count = owners.count(len(outputs))
            planes = torch.stack(results[start:start + count])
            planes = planes if sample_axes.spatial == 2 else planes[:, 0]
            outputs.append(sample_axes.restore(planes, tuple(sample.shape)))
            start += count
        return outputs

    def through_host(self, samples, args, batch):
        import torch
        hosts = [sample.cpu().numpy() for sample in samples]
        results: list = [None] * len(hosts)

        def filter_sample(index: int):
            def call():
                results[index] = self.filtered(hosts[index], args[index])
            return call
        batch.run_on_workers([filter_sample(index) for index in range(len(hosts))])
        return [torch.from_numpy(result).to(sample.device) for result, sample in zip(results, samples)]


class SeparableRule:
    """gaussian_blur and laplacian: sums of separable terms over 1 to 3 spatial axes."""

    spatial_counts = (1, 2, 3)

    def window(self, args, dtype, spatial):
        return planar_window(self.terms(args, spatial))


class GaussianBlurRule(SeparableRule):
    input_types = BLUR_TYPES

    def terms(self, args, count):
        return gaussian_terms(args, count, self.name)


class LaplacianRule(SeparableRule):
    input_types = LAPLACIAN_TYPES

    def terms(self, args, count):
        return laplacian_terms(args, count, self.name)


class FilterRule:
    input_types = FILTER_TYPES
    halves_to_even = True

    def window(self, args, dtype, spatial):
        return filter_window(args, self.name)


class ErodeRule:
    keeps_type = True
    layouts = ("HW", "HWC", "FHWC", "CHW", "FCHW")

    def window(self, args, dtype, spatial):
        return morphology_window(args, self.name, "min", np.dtype(dtype))


class DilateRule:
    keeps_type = True
    layouts = ("HW", "HWC", "FHWC", "CHW", "FCHW")

    def window(self, args, dtype, spatial):
        return morphology_window(args, self.name, "max", np.dtype(dtype))


def _register_window_filter(names: tuple[str, ...], rule: type) -> None:
    for name in names:
        suffix = "".join(part.title() for part in name.replace(".", "_").split("_"))
        registry.register(name, "cpu")(type(suffix, (rule, WindowFilter), {}))
        registry.register(name, "gpu", requires=devices.gpu_problem)(type(suffix + "Gpu", (rule, WindowFilterGpu), {}))


_register_window_filter(("gaussian_blur",), GaussianBlurRule)
_register_window_filter(("laplacian",), LaplacianRule)
_register_window_filter(("filter",), FilterRule)
_register_window_filter(("erode",), ErodeRule)
_register_window_filter(("dilate",), DilateRule)


def median_size(args: dict, op_name: str) -> tuple[int, int]:
    _checked(op_name, _check_median, args)
    return per_axis(args.window_size, "window_size")


def median_tensor(image, size: tuple[int, int]):
    """The median over a window of ``size`` around each pixel of an HWC tensor, the edge pixels
    repeated outside (torch: the padded image unfolded into windows)."""
    import torch
    height, width, channels = image.shape
    planes = image.permute(2, 0, 1)[None].to(torch.float32)  # float32 holds 8- and 16-bit values exactly
    padded = torch.nn.functional.pad(planes, (size[1] // 2, size[1] // 2, size[0] // 2, size[0] // 2),
                                     mode="replicate")
    windows = padded.unfold(2, size[0], 1).unfold(3, size[1], 1)  # [1, C, H, W, size_y, size_x]
    median = windows.reshape(channels, height, width, -1).median(dim=-1).values
    return median.permute(1, 2, 0).to(image.dtype)


class MedianDeclaration(FilterDeclaration):
    keeps_type = True
    layouts = ("HW", "HWC", "FHWC", "CHW", "FCHW")


class MedianBlur(MedianDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = np.asarray(inputs[0])
        axes = self.axes_of(image.ndim)
        size = median_size(args, self.name)
        return axes.restore(np.stack([median_cpu(plane, size) for plane in axes.planes(image)]), image.shape)


class MedianBlurGpu(MedianDeclaration, BatchOperator):
    """Per plane with torch: a median needs a sort per pixel, which the window kernel does not do."""

    def run_batch(self, inputs, args, batch):
        import torch
        results = []
        for sample, a in zip(tensors_of(inputs[0]), args):
            axes = self.axes_of(sample.dim())
            size = median_size(a, self.name)
            planes = torch.stack([median_tensor(plane, size) for plane in axes.planes(sample)])
            results.append(axes.restore(planes, tuple(sample.shape)))
        return results


registry.register("median_blur", "cpu")(MedianBlur)
registry.register("median_blur", "gpu", requires=devices.gpu_problem)(MedianBlurGpu)


__all__ = ["BORDER_RULES", "SampleAxes", "Window", "anchor_of", "apply_window", "filter_window", "gaussian_terms",
           "gaussian_window", "laplacian_terms", "morphology_window", "per_axis", "planar_window", "sample_axes",
           "separable_volume"]
