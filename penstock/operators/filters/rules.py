"""What the filters take and the windows they make: the schemas of ``gaussian_blur``, ``laplacian``,
``filter`` (the user's kernel), ``median_blur``, ``erode`` and ``dilate`` (the last three also under
DALI's names ``experimental.median_blur``, ``experimental.erode`` and ``experimental.dilate``), their
argument checks, and the plain functions that build each operator's ``Window`` (weights, anchor,
border rule, what it computes) from its arguments, shared by both devices (convolution.py applies
them)."""
from __future__ import annotations

import math

import numpy as np

from penstock import registry
from penstock.operators.shared.windows import Window
from penstock.schema import REQUIRED, Arg, ArgError, ArgTypeError, OpSchema, closest

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


def median_size(args: dict, op_name: str) -> tuple[int, int]:
    _checked(op_name, _check_median, args)
    return per_axis(args.window_size, "window_size")
