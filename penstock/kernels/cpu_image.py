"""Per-sample CPU image kernels over HWC arrays, on OpenCV (which releases the GIL)."""
from __future__ import annotations

import functools
import math

import cv2
import numpy as np

from penstock import numeric
from penstock.types import DALIInterpType

def crop_anchor(in_size: int, crop_size: int, position: float, rounding: str = "round") -> int:
    """Where a crop starts: DALI's ``position * (in_size - crop_size)`` (the position a float32), to
    nearest with halves away from zero ('round') or towards zero ('truncate')."""
    start = float(np.float32(position)) * (in_size - crop_size)
    if rounding == "truncate":
        return int(start)
    return int(math.copysign(math.floor(abs(start) + 0.5), start))


def fit_window(top: int, left: int, height: int, width: int, in_height: int, in_width: int, policy: str,
               op_name: str) -> tuple[int, int, int, int]:
    """The window to cut under ``out_of_bounds_policy``: unchanged when inside the image or for
    'pad' (the caller fills), cut to the image for 'trim_to_shape'; 'error' raises."""
    if top >= 0 and left >= 0 and top + height <= in_height and left + width <= in_width:
        return top, left, height, width
    if policy == "error":
        raise ValueError(f"{op_name}: the window {height}x{width} at ({top}, {left}) falls outside the {in_height}x"
                         f"{in_width} image. Slice can't be placed out of bounds with current policy. Pass "
                         "out_of_bounds_policy='pad' or 'trim_to_shape'.")
    if policy == "trim_to_shape":
        top0, left0 = max(top, 0), max(left, 0)
        return top0, left0, max(0, min(top + height, in_height) - top0), max(0, min(left + width, in_width) - left0)
    return top, left, height, width


def crop_window(image: np.ndarray, top: int, left: int, height: int, width: int, fill_values=(0,),
                policy: str = "error", op_name: str = "crop") -> np.ndarray:
    """The (height, width) window at (top, left); a view when it lies inside the image.

    Outside the image: ``policy`` 'pad' fills with fill_values, 'trim_to_shape' cuts the window to
    the image, 'error' raises.
    """
    in_height, in_width = image.shape[:2]
    top, left, height, width = fit_window(top, left, height, width, in_height, in_width, policy, op_name)
    if top >= 0 and left >= 0 and top + height <= in_height and left + width <= in_width:
        return image[top:top + height, left:left + width]
    channels = image.shape[2]
    fill = np.broadcast_to(np.asarray(fill_values, dtype=image.dtype), (channels,))
    result = np.empty((height, width, channels), image.dtype)
    result[...] = fill
    source_top, source_left = max(top, 0), max(left, 0)
    source_bottom, source_right = min(top + height, in_height), min(left + width, in_width)
    if source_bottom > source_top and source_right > source_left:
        result[source_top - top:source_bottom - top, source_left - left:source_right - left] = \
            image[source_top:source_bottom, source_left:source_right]
    return result


def affine_table(multipliers, addends) -> np.ndarray:
    """A 256-entry lookup table per channel, value * multiplier + addend, for uint8 inputs: float32
    of shape (1, 256, channels)."""
    values = np.arange(256, dtype=np.float64)[:, None]
    table = values * np.asarray(multipliers, np.float64) + np.asarray(addends, np.float64)
    return table.astype(np.float32).reshape(1, 256, len(multipliers))


def normalize_uint8(image: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Applies a per-channel lookup table to an HWC uint8 image: float32 HWC (GIL released)."""
    channels = image.shape[2]
    source = image if image.flags.c_contiguous else np.ascontiguousarray(image)
    if channels > 4:
        return np.stack([table[0, :, c][source[:, :, c]] for c in range(channels)], axis=2)
    lut = table if channels > 1 else table[:, :, :1]
    result = cv2.LUT(source, lut if channels > 1 else lut.reshape(1, 256))
    return result.reshape(image.shape)


def lookup_planes(image: np.ndarray, table: np.ndarray, out: np.ndarray, mirror: bool = False,
                  native_lookup=None) -> None:
    """``out[c] = table[0, :, c][image[:, :, c]]`` for an HWC uint8 image, mirrored left to right
    first when asked, each channel looked up straight into its plane of ``out`` [C, H, W] (GIL
    released). ``native_lookup``: a callable giving the C lookup's function
    (runtime.native.lookup_planes) or None; without it the channels are split into planes and
    looked up by OpenCV, which costs four passes over the image where the C lookup makes one."""
    function = native_lookup() if native_lookup is not None else None
    height, width, channels = image.shape
    if function is not None and out.flags.c_contiguous and image.strides[1:] == (channels, 1) \
            and out.shape == (channels, height, width):
        items = np.ascontiguousarray(table[0, :, :channels].astype(out.dtype, copy=False))
        function(image.ctypes.data, height, width, image.strides[0], channels, items.ctypes.data,
                 out.dtype.itemsize, out.ctypes.data, int(bool(mirror)))
        return
    source = image if image.flags.c_contiguous else np.ascontiguousarray(image)
    if mirror:
        source = cv2.flip(source, 1).reshape(image.shape)
    planes = cv2.split(source) if image.shape[2] > 1 else [source.reshape(image.shape[:2])]
    for channel, plane in enumerate(planes):
        lut = np.ascontiguousarray(table[0, :, channel]).reshape(1, 256)
        target = out[channel]
        written = cv2.LUT(plane, lut, dst=target) if target.flags.c_contiguous else None
        if written is None or not np.shares_memory(written, target):
            target[...] = cv2.LUT(plane, lut)


def affine_sample(image: np.ndarray, matrix: np.ndarray, height: int, width: int, nearest: bool, border,
                  dtype, native_warp=None) -> np.ndarray:
    """DALI's CPU warp of an HWC image into a (height, width) output of ``dtype``: the 2x3 float32
    ``matrix`` maps output pixel centres (x + 0.5, y + 0.5; origin at the top-left pixel's corner) to
    input coordinates, sampled by the nearest pixel or bilinearly. Outside the input: ``border``
    (one value, already of ``dtype``), or for None the edge pixel repeated. The arithmetic is
    DALI's, in float32 (the positions along a row stepped by the matrix's first column), so that
    integer outputs round as DALI's do. ``native_warp``: a callable giving the C warp's function
    (runtime.native.affine_warp) or None; the bilinear warp then runs in C, without the
    interpreter lock."""
    f32 = np.float32
    m = np.asarray(matrix, f32).reshape(2, 3)
    rows = np.arange(height, dtype=f32) + f32(0.5)
    positions = []
    for axis in range(2):
        # a row starts at matrix @ (0.5, y + 0.5, 1) and steps by the first column, restarting every
        # 256 pixels from a start stepped by 256 columns (DALI's checkpoints against drift)
        start = (m[axis, 2] + m[axis, 0] * f32(0.5) + m[axis, 1] * rows).astype(f32)
        step, tile_step = m[axis, 0], f32(256) * m[axis, 0]
        coords = np.empty((height, width), f32)
        for first in range(0, width, 256):
            last = min(first + 256, width)
            steps = np.empty((height, last - first), f32)
            steps[:, 0] = start
            steps[:, 1:] = step
            coords[:, first:last] = np.add.accumulate(steps, axis=1, dtype=f32)
            start = (start + tile_step).astype(f32)
        positions.append(coords)
    x, y = (coords.ravel() for coords in positions)
    in_height, in_width, channels = image.shape
    pixels = np.ascontiguousarray(image).reshape(-1, channels)

    def outside(column, row):
        return (column < 0) | (column >= in_width) | (row < 0) | (row >= in_height)

    if nearest:
        column, row = np.floor(x).astype(np.intp), np.floor(y).astype(np.intp)
        index = np.clip(row, 0, in_height - 1) * in_width + np.clip(column, 0, in_width - 1)
        result = numeric.saturate(np.take(pixels, index, axis=0), dtype)
        if border is not None:
            result[outside(column, row)] = border
        return result.reshape(height, width, channels)
    # the border meets the input's pixels in the input's type (DALI converts it back with saturation)
    border_in = None if border is None else numeric.saturate(np.asarray(border), image.dtype).astype(f32)
    native = native_warp() if native_warp is not None else None
    if native is not None:  # the same float32 operations in C, without the interpreter lock
        source = np.ascontiguousarray(image, dtype=f32)
        output = np.empty((height, width, channels), f32)
        edge = None if border_in is None else np.ascontiguousarray(np.broadcast_to(border_in, (channels,)))
        native(source.ctypes.data, in_height, in_width, channels, np.ascontiguousarray(m).ctypes.data,
               height, width, None if edge is None else edge.ctypes.data, output.ctypes.data)
        return numeric.saturate(output, dtype)
    x -= f32(0.5)
    y -= f32(0.5)
    x0, y0 = np.floor(x), np.floor(y)
    qx, qy = x - x0, y - y0
    px = f32(1) - qx
    x0, y0 = x0.astype(np.intp), y0.astype(np.intp)
    columns = (np.clip(x0, 0, in_width - 1), np.clip(x0 + 1, 0, in_width - 1))
    rows = (np.clip(y0, 0, in_height - 1) * in_width, np.clip(y0 + 1, 0, in_height - 1) * in_width)

    def corner(dx, dy):
        """The corner's pixels as float32 channel planes (long inner loops below; HWC's are 3 long)."""
        values = np.array(np.take(pixels, rows[dy] + columns[dx], axis=0).T, dtype=f32, order="C")
        if border_in is not None:
            values[:, outside(x0 + dx, y0 + dy)] = border_in
        return values

    # DALI's float32 steps, each rounded: s0 = s00 * px + s01 * qx, s1 likewise, s0 + (s1 - s0) * qy
    top = corner(0, 0)
    top *= px
    top += corner(1, 0) * qx
    bottom = corner(0, 1)
    bottom *= px
    bottom += corner(1, 1) * qx
    bottom -= top
    bottom *= qy
    bottom += top
    return np.ascontiguousarray(numeric.saturate(bottom, dtype).T).reshape(height, width, channels)


_CV2_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
                "reflect_101": cv2.BORDER_REFLECT_101, "wrap": cv2.BORDER_WRAP}
_CV2_WARP_FILTERS = {DALIInterpType.INTERP_NN: cv2.INTER_NEAREST, DALIInterpType.INTERP_CUBIC: cv2.INTER_CUBIC}


def warp(image: np.ndarray, edge_map: np.ndarray, height: int, width: int, interp: DALIInterpType, border: str,
         fill) -> np.ndarray:
    """The HWC image sampled through ``edge_map`` (3x3, output pixel edges (x + 0.5, y + 0.5, 1) ->
    input ones) into a (height, width) output of its dtype; outside the input ``border``
    ('constant' with ``fill`` per channel, 'replicate', 'reflect', 'reflect_101', 'wrap')."""
    shift = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    unshift = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
    centre_map = unshift @ edge_map @ shift  # OpenCV's coordinates are pixel centres
    flags = _CV2_WARP_FILTERS.get(interp, cv2.INTER_LINEAR) | cv2.WARP_INVERSE_MAP
    channels = image.shape[2]
    source = np.ascontiguousarray(image)
    if source.dtype not in (np.uint8, np.uint16, np.int16, np.float32, np.float64):
        source = source.astype(np.float32)
    fills = np.broadcast_to(np.asarray(fill if fill is not None else 0.0, np.float64), (channels,))
    results = []
    for first in range(0, channels, 4):  # OpenCV warps up to 4 channels at a time
        plane = np.ascontiguousarray(source[:, :, first:first + 4])
        value = tuple(float(v) for v in fills[first:first + 4]) + (0.0,) * 4
        if np.array_equal(centre_map[2], (0.0, 0.0, 1.0)):
            warped = cv2.warpAffine(plane, centre_map[:2], (width, height), flags=flags,
                                    borderMode=_CV2_BORDERS[border], borderValue=value[:4])
        else:
            warped = cv2.warpPerspective(plane, centre_map, (width, height), flags=flags,
                                         borderMode=_CV2_BORDERS[border], borderValue=value[:4])
        results.append(warped.reshape(height, width, plane.shape[2]))
    return results[0] if len(results) == 1 else np.concatenate(results, axis=2)


def perspective_warp(image: np.ndarray, matrix: np.ndarray, height: int, width: int, interp: DALIInterpType,
                     border: str, fill, inverse_map: bool) -> np.ndarray:
    """DALI's CPU warp_perspective: OpenCV's warpPerspective of an HW or HWC image (up to 4
    channels) by the 3x3 float32 ``matrix`` in OpenCV's coordinates (pixel centres at integers),
    output to input when ``inverse_map``, else input to output (OpenCV inverts it); ``fill``: one
    value per channel (border 'constant')."""
    flags = _CV2_WARP_FILTERS.get(interp, cv2.INTER_LINEAR) | (cv2.WARP_INVERSE_MAP if inverse_map else 0)
    value = tuple(float(v) for v in fill) + (0.0,) * (4 - len(fill))
    warped = cv2.warpPerspective(np.ascontiguousarray(image), np.asarray(matrix, np.float32), (width, height),
                                 flags=flags, borderMode=_CV2_BORDERS[border], borderValue=value)
    return warped.reshape(height, width, *image.shape[2:])


# ---- DALI's separable resampling ----------------------------------------------------------------
# resize, resize_crop_mirror and random_resized_crop resample one axis at a time as DALI's CPU
# kernels do (float32 arithmetic, the same filter tables and coordinate mapping), so that their
# outputs agree with DALI's to the last level of uint8 outputs, not only approximately.
NEAREST, LINEAR, TRIANGULAR, GAUSSIAN, CUBIC, LANCZOS3 = "nearest", "linear", "triangular", "gaussian", "cubic", \
    "lanczos3"
RESAMPLING_FILTERS = {DALIInterpType.INTERP_NN: NEAREST, DALIInterpType.INTERP_LINEAR: LINEAR,
                      DALIInterpType.INTERP_TRIANGULAR: TRIANGULAR, DALIInterpType.INTERP_GAUSSIAN: GAUSSIAN,
                      DALIInterpType.INTERP_CUBIC: CUBIC, DALIInterpType.INTERP_LANCZOS3: LANCZOS3}
_F32 = np.float32


def _sinc(x: np.ndarray) -> np.ndarray:
    x = (x * _F32(math.pi)).astype(_F32)
    small = np.abs(x) < 1e-5
    safe = np.where(small, _F32(1.0), x)
    return np.where(small, _F32(1.0) - x * x * _F32(1.0 / 6), np.sin(safe) / safe).astype(_F32)


def _cubic_window(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    x2 = x * x
    x3 = x2 * x
    outer = _F32(-0.5) * x3 + _F32(2.5) * x2 - _F32(4.0) * x + _F32(2.0)
    inner = _F32(1.5) * x3 - _F32(2.5) * x2 + _F32(1.0)
    return np.where(x >= 2, _F32(0.0), np.where(x > 1, outer, inner)).astype(_F32)


def _filter_tables() -> dict:
    """Each filter's table of coefficients with its (anchor, scale) as DALI builds them: the
    triangle's 3 points, and 65, 129 and 193 samples of the Gaussian, cubic and Lanczos windows."""
    def positions(size: int, half_width: float) -> np.ndarray:
        i = np.arange(size, dtype=_F32)
        return (_F32(half_width) * (i - _F32((size - 1) * 0.5)) / _F32(size - 1)).astype(_F32)
    lanczos_x = positions(193, 6.0)
    lanczos = np.where(np.abs(lanczos_x) >= 3, _F32(0.0), _sinc(lanczos_x) * _sinc(lanczos_x / _F32(3)))
    tables = {TRIANGULAR: np.array([0.0, 1.0, 0.0], _F32),
              GAUSSIAN: np.exp(-positions(65, 4.0) ** 2).astype(_F32),
              LANCZOS3: lanczos.astype(_F32),
              CUBIC: _cubic_window(positions(129, 4.0))}
    # (anchor, scale) of each table once DALI has rescaled the Lanczos and cubic ones to 6 and 4
    placement = {TRIANGULAR: (1.0, 1.0), GAUSSIAN: (1.0, 32.0), LANCZOS3: (3.0, 32.0), CUBIC: (2.0, 32.0)}
    return {kind: (table, _F32(placement[kind][0]), _F32(placement[kind][1])) for kind, table in tables.items()}


_TABLES = _filter_tables()


def _filter_for(kind: str, antialias: bool, in_size: float, out_size: int):
    """(table, anchor, scale) of the filter that resamples ``in_size`` source pixels to ``out_size``:
    DALI's default radius (widened by the shrink factor with antialias), the table rescaled to it."""
    shrinking = antialias and in_size > out_size
    ratio = _F32(in_size) / _F32(out_size)
    if kind == LINEAR:
        kind, support = TRIANGULAR, _F32(2.0)
    elif kind == TRIANGULAR:
        support = max(_F32(1.0), _F32(2.0) * (ratio if shrinking else _F32(1.0)))
    elif kind == GAUSSIAN:
        sigma = _F32(float((ratio if shrinking else _F32(1.0)) * _F32(0.5)) / math.sqrt(2.0))
        support = max(_F32(1.0), _F32(4 * math.sqrt(2.0)) * sigma)
    elif kind == CUBIC:
        support = _F32(2.0) * max(_F32(2.0), _F32(2.0) * ratio if shrinking else _F32(2.0))
    else:
        support = _F32(2.0) * max(_F32(3.0), _F32(3.0) * ratio if shrinking else _F32(3.0))
    table, anchor, scale = _TABLES[kind]
    new_scale = _F32(_F32(len(table) - 1) / support)
    return table, _F32(anchor * scale / new_scale), new_scale


def _filter_values(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The table interpolated linearly at (fractional) indices ``x``; 0 outside it."""
    size = len(table)
    valid = (x > -1) & (x < size)
    first = np.floor(np.where(valid, x, 0)).astype(np.int64)
    fraction = (x - first).astype(_F32)
    padded = np.concatenate([[_F32(0.0)], table, [_F32(0.0)]])
    low, high = padded[np.clip(first + 1, 0, size + 1)], padded[np.clip(first + 2, 0, size + 1)]
    return np.where(valid, low + fraction * (high - low), _F32(0.0)).astype(_F32)


def _axis_taps(in_size: int, out_size: int, origin: float, scale: float, filt):
    """Per output index, the source indices (clamped to the edge) and normalized weights of DALI's
    InitializeResamplingFilter."""
    table, anchor, filter_scale = filt
    support = max(1, int(math.ceil(_F32(len(table) - 1) / filter_scale)))
    scale = _F32(scale)
    start = _F32(_F32(origin) + _F32(_F32(_F32(0.5) * scale - _F32(0.5)) - anchor))
    positions = (np.arange(out_size, dtype=_F32) * scale + start).astype(_F32)
    first = np.ceil(positions)
    offsets = (first - positions).astype(_F32)
    ks = np.arange(support, dtype=_F32)
    weights = _filter_values(table, ((offsets[:, None] + ks) * filter_scale).astype(_F32))
    total = np.zeros(out_size, _F32)
    for k in range(support):  # in order, in float32, as DALI sums them
        total += weights[:, k]
    weights = np.where(total[:, None] != 0, weights / np.where(total == 0, _F32(1.0), total)[:, None], weights)
    indices = np.clip(first.astype(np.int64)[:, None] + np.arange(support), 0, in_size - 1)
    return indices, weights.astype(_F32)


@functools.lru_cache(maxsize=1024)
def _taps_of(in_size: int, out_size: int, origin: float, scale: float, kind: str, shrinking: bool, extent: float):
    """_axis_taps of a filter kind, kept for the sizes and windows that come again (photographs of
    a data set share a few sizes: building the taps was a third of resizing one to 256 pixels)."""
    indices, weights = _axis_taps(in_size, out_size, origin, scale, _filter_for(kind, shrinking, extent, out_size))
    indices.flags.writeable = weights.flags.writeable = False
    return indices, weights


def _nearest_indices(in_size: int, out_size: int, origin: float, scale: float) -> np.ndarray:
    """DALI's nearest-neighbour source indices: floor(origin + (i + 0.5) * scale) in float32,
    clamped. (DALI's CPU kernel steps the outer axes' positions as running float32 sums, which
    may land an exact tie on the pixel before; here, as on the GPU, a tie takes the later pixel.)"""
    positions = (_F32(origin) + (np.arange(out_size, dtype=_F32) + _F32(0.5)) * _F32(scale)).astype(_F32)
    return np.clip(np.floor(positions).astype(np.int64), 0, in_size - 1)


def _resample_axis(array: np.ndarray, axis: int, taps, native=None, rounded: bool = False) -> np.ndarray:
    """The taps applied along ``axis``: per output index, the first tap's product, then each
    further one's added in turn, in float32. ``native``: the C function (runtime.native's
    resample_axis) or None; with it the same operations run in C, without the interpreter lock,
    and ``rounded`` gives a uint8 output rounded as ``resample`` rounds."""
    indices, weights = taps
    if native is not None:
        # other types are converted as each term's astype converts them, once for all terms
        source = np.ascontiguousarray(array, array.dtype if array.dtype in (np.uint8, _F32) else _F32)
        shape = (*array.shape[:axis], len(indices), *array.shape[axis + 1:])
        out = np.empty(shape, np.uint8 if rounded else _F32)
        indices, weights = np.ascontiguousarray(indices, np.int64), np.ascontiguousarray(weights, _F32)
        native(source.ctypes.data, int(source.dtype == np.uint8), math.prod(array.shape[:axis]), array.shape[axis],
               math.prod(array.shape[axis + 1:]), indices.ctypes.data, weights.ctypes.data, indices.shape[1],
               len(indices), out.ctypes.data, int(rounded))
        return out
    shape = [1] * array.ndim
    shape[axis] = len(indices)
    result = None
    for k in range(indices.shape[1]):
        term = np.take(array, indices[:, k], axis=axis).astype(_F32, copy=False) * weights[:, k].reshape(shape)
        result = term if result is None else np.add(result, term, out=result)
    return result


def _pass_order(in_sizes: list, out_sizes: list, supports: list) -> list:
    """DALI's order of the passes (indices into the spatial axes): the one with the least cost,
    a weighted sum of the work and the sizes of the intermediate images."""
    import itertools
    count = len(in_sizes)
    best, best_cost = list(range(count)), math.inf
    # DALI numbers the axes innermost first (x = 0) and tries orders in that numbering
    for order in itertools.permutations(range(count)):
        sizes, cost = list(reversed(in_sizes)), 0.0
        for axis in order:
            sizes[axis] = out_sizes[count - 1 - axis]
            volume = float(np.prod(sizes))
            multiplier = 1.4 if axis == 0 else (1.2 if axis > 1 else 1.0)
            cost += multiplier * supports[count - 1 - axis] * volume + 3 * volume
        if cost < best_cost:
            best, best_cost = [count - 1 - axis for axis in order], cost
    return best


def _opencv_enlarges(array: np.ndarray, plans: list, kinds: list, roi_lo: tuple, roi_hi: tuple, dtype) -> bool:
    """Whether the resampling is a linear enlargement (or copy) of a whole HW / HWC uint8 or float32
    image into its own type, which OpenCV's bilinear resize gives."""
    if array.dtype != dtype or array.dtype not in (np.uint8, np.float32) or [plan[0] for plan in plans] != [0, 1]:
        return False
    if array.ndim not in (2, 3) or array.ndim == 3 and array.shape[2] > 4:
        return False
    return all(kind == LINEAR and plan[2] >= plan[1] and float(lo) == 0.0 and float(hi) == plan[1]
               for plan, kind, lo, hi in zip(plans, kinds, roi_lo, roi_hi))


def resampling_passes(shape: tuple, axes: tuple, out_sizes: tuple, roi_lo: tuple, roi_hi: tuple, min_filter: str,
                      mag_filter: str, antialias: bool) -> tuple[list, list, list]:
    """DALI's resampling of an array of ``shape`` along its spatial ``axes`` (see ``resample``) as
    passes, one per axis in DALI's order: (axis, taps) with taps (indices, weights) [out, K] of a
    filter, or (axis, indices) [out] of nearest neighbours (weights None). Also the per-axis plans
    and filter kinds, in the axes' order (for resample's shortcuts)."""
    plans, kinds = [], []
    for position, axis in enumerate(axes):
        in_size, out_size = shape[axis], out_sizes[position]
        lo, hi = _F32(roi_lo[position]), _F32(roi_hi[position])
        extent = abs(float(hi) - float(lo))
        kind = min_filter if out_size < extent else mag_filter
        if kind == LINEAR and antialias and out_size < extent:
            kind = TRIANGULAR
        elif kind == TRIANGULAR and not (antialias and out_size < extent):
            kind = LINEAR
        scale = _F32(_F32(hi - lo) / _F32(out_size))
        shrinking = antialias and out_size < extent
        filt = None if kind == NEAREST else _filter_for(kind, shrinking, extent, out_size)
        support = 1 if filt is None else max(1, int(math.ceil(_F32(len(filt[0]) - 1) / filt[2])))
        plans.append((axis, in_size, out_size, lo, scale, filt, support,
                      (in_size, out_size, float(lo), float(scale), kind, shrinking, extent)))
        kinds.append(kind)
    order = _pass_order([p[1] for p in plans], [p[2] for p in plans], [p[6] for p in plans])
    passes = []
    for position in order:
        axis, in_size, out_size, lo, scale, filt, _, taps_key = plans[position]
        passes.append((axis, (_nearest_indices(in_size, out_size, lo, scale), None) if filt is None
                       else _taps_of(*taps_key)))
    return passes, plans, kinds


def resample(array: np.ndarray, axes: tuple, out_sizes: tuple, roi_lo: tuple, roi_hi: tuple, min_filter: str,
             mag_filter: str, antialias: bool, dtype, native_axis=None) -> np.ndarray:
    """DALI's resampling of ``array`` along its spatial ``axes`` (outermost first; others, channels
    and frames, are carried along) to ``out_sizes``: the source window from ``roi_lo`` to
    ``roi_hi`` in each axis (flipped where lo > hi), the filter min_filter where the axis shrinks,
    else mag_filter (names of RESAMPLING_FILTERS' values); ``dtype``: the output's.
    ``native_axis``: a callable giving the C function of one axis's taps
    (runtime.native.resample_axis) or None; the filtered passes (and a uint8 output's rounding)
    then run in C, several times faster, to the same bits."""
    dtype = np.dtype(dtype)
    passes, plans, kinds = resampling_passes(array.shape, axes, out_sizes, roi_lo, roi_hi, min_filter, mag_filter,
                                             antialias)
    if _opencv_enlarges(array, plans, kinds, roi_lo, roi_hi, dtype):
        # DALI's linear enlargement of a whole image is OpenCV's bilinear (within a level of uint8):
        # ~40x faster than the taps below
        enlarged = cv2.resize(array, (out_sizes[1], out_sizes[0]), interpolation=cv2.INTER_LINEAR)
        return enlarged.reshape(out_sizes[0], out_sizes[1], *array.shape[2:])  # (OpenCV drops one channel)
    if all(weights is None for _, (_, weights) in passes):  # nearest neighbour along every axis: a gather
        result = array
        for axis, (indices, _) in passes:
            result = np.take(result, indices, axis=axis)
        return numeric.saturate(result, dtype) if result.dtype != dtype else np.ascontiguousarray(result)
    native = native_axis() if native_axis is not None else None
    result = array
    for number, (axis, taps) in enumerate(passes):
        if taps[1] is None:
            result = np.take(result, taps[0], axis=axis).astype(_F32, copy=False)
        else:
            rounded = native is not None and dtype == np.uint8 and number == len(passes) - 1
            result = _resample_axis(result, axis, taps, native, rounded)
    if dtype.kind in "iu" and result.dtype != dtype:  # DALI's ConvertSat: to nearest, halves away from zero, saturated
        info = np.iinfo(dtype)
        return np.clip(np.trunc(result + np.copysign(_F32(0.5), result)), info.min, info.max).astype(dtype)
    return result.astype(dtype, copy=False)
