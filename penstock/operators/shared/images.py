"""What image operators of several families share: HWC checks, crop and window arguments and their
arithmetic, rotated sizes."""
from __future__ import annotations

import math
import numpy as np

from penstock.batch import one_value
from penstock.columns import BatchArgs
from penstock.contract import OutputSpec
from penstock.kernels import cpu_image
from penstock.schema import Arg, ArgError, given


# Window arguments shared by crop, crop_mirror_normalize, resize_crop_mirror and decoders.image_crop,
# documented once; without a window the whole image is kept.
WINDOW_ARGS = (
    Arg("crop", "floats", None, "Window size (height, width) in pixels, truncated, or (depth, height, width) for "
        "volumes and sequences; a size of 0 or less keeps the image's.", per_sample=True, length=(2, 3)),
    Arg("crop_w", "float", 0.0, "Window width in pixels, truncated (with crop_h, instead of crop).", per_sample=True),
    Arg("crop_h", "float", 0.0, "Window height in pixels, truncated (with crop_w, instead of crop).", per_sample=True),
    Arg("crop_d", "float", 0.0, "Window depth (the D axis of volumes, else the F axis of sequences), truncated "
        "(with crop_h and crop_w, instead of crop); 0 keeps the whole depth.", per_sample=True),
    Arg("crop_pos_x", "float", 0.5, "Horizontal window position, 0 (left edge) to 1 (right edge): the window "
        "starts at crop_pos_x * (width - window width).", per_sample=True, min=0.0, max=1.0),
    Arg("crop_pos_y", "float", 0.5, "Vertical window position, 0 (top edge) to 1 (bottom edge).",
        per_sample=True, min=0.0, max=1.0),
    Arg("crop_pos_z", "float", 0.5, "Depthwise window position, 0 (first slice or frame) to 1 (last).",
        per_sample=True, min=0.0, max=1.0),
    Arg("rounding", "str", "round", "How the window's start becomes a whole pixel: 'round' (to nearest, halves "
        "away from zero) or 'truncate' (towards zero).", choices=("round", "truncate")),
)


def _one_window_form(static: dict, per_sample: frozenset) -> None:
    separate = given(static, per_sample, "crop_h") or given(static, per_sample, "crop_w")
    if given(static, per_sample, "crop") and separate:
        raise ArgError("give the window as crop=(height, width) or as crop_h and crop_w, not both")
    if given(static, per_sample, "crop_h") != given(static, per_sample, "crop_w"):
        raise ArgError("give crop_w and crop_h together")
    if given(static, per_sample, "crop") and given(static, per_sample, "crop_d"):
        raise ArgError("give a depth as crop=(depth, height, width) or as crop_d beside crop_h and crop_w, not "
                       "crop_d beside crop")


# the checks of a call that takes WINDOW_ARGS
WINDOW_CHECKS = (_one_window_form,)


CROP_ARGS = (
    *WINDOW_ARGS,
    Arg("out_of_bounds_policy", "str", "error", "A window reaching outside the image: 'error', 'pad' "
        "(with fill_values) or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "floats", (0.0,), "Padding value, one or one per channel."),
)


def check_hwc(image: np.ndarray, op_name: str) -> None:
    if image.ndim != 3:
        raise ValueError(f"{op_name}: expected an HWC image (3 dimensions), got shape {image.shape}")


def declare_hwc(spec: OutputSpec, op_name: str) -> None:
    """Rejects, before anything runs, inputs declared with other than 3 dimensions."""
    if spec.ndim is not None and spec.ndim != 3:
        raise ValueError(f"{op_name}: expected HWC images (3 dimensions), but its input has {spec.ndim}")


def crop_size(args) -> tuple[int, int] | None:
    """The window's (height, width) as DALI reads it (truncated; 0 or less: the image's size along
    that axis); None where no window is given, or where it is given per sample and read from the
    operator's build-time arguments (which hold no per-sample ones)."""
    crop = args.get("crop")
    if crop:
        return int(crop[-2]), int(crop[-1])
    if args.get("crop_h") or args.get("crop_w"):
        return int(args.get("crop_h") or 0), int(args.get("crop_w") or 0)
    return None


def crop_depth(args) -> int | None:
    """The window's depth (crop=(depth, height, width), else crop_d), truncated; None where none is
    given (or it is 0): the whole depth."""
    crop = args.get("crop")
    depth = int(crop[0]) if crop is not None and len(crop) == 3 else int(args.get("crop_d") or 0)
    return depth or None


def crop_placement(image_height: int, image_width: int, args: dict) -> tuple[int, int, int, int] | None:
    """(top, left, height, width) of the window crop / crop_mirror_normalize ask for, or None."""
    size = crop_size(args)
    if size is None:
        return None
    height, width = (size if size > 0 else extent for size, extent in zip(size, (image_height, image_width)))
    top = cpu_image.crop_anchor(image_height, height, args.crop_pos_y, args.rounding)
    left = cpu_image.crop_anchor(image_width, width, args.crop_pos_x, args.rounding)
    return top, left, height, width


def window_of_layout(shape: tuple, layout: str, args, op_name: str) -> list[tuple[int, int]] | None:
    """crop's window in a sample of ``shape`` and ``layout`` (DALI's crop layouts: images, volumes
    and sequences, channels first or last): (start, size) per axis, the window fitted to the sample
    by ``out_of_bounds_policy`` ('error' raises, 'trim_to_shape' cuts it, 'pad' leaves it reaching
    outside); None where no window is asked for. The depth is the D axis, or the F axis of
    sequences without one (as in DALI)."""
    height_width = crop_placement(shape[layout.index("H")], shape[layout.index("W")], args)
    depth = crop_depth(args)
    depth_axis = layout.find("D") if "D" in layout else layout.find("F")
    if height_width is None and (depth is None or depth_axis < 0):
        return None
    window = [(0, extent) for extent in shape]
    if height_width is not None:
        top, left, height, width = height_width
        window[layout.index("H")], window[layout.index("W")] = (top, height), (left, width)
    if depth is not None and depth_axis >= 0:
        extent = shape[depth_axis]
        size = depth if depth > 0 else extent
        window[depth_axis] = (cpu_image.crop_anchor(extent, size, args.crop_pos_z, args.rounding), size)
    inside = all(start >= 0 and start + size <= extent for (start, size), extent in zip(window, shape))
    if inside or args.out_of_bounds_policy == "pad":
        return window
    if args.out_of_bounds_policy == "error":
        starts, sizes = (tuple(part) for part in zip(*window))
        raise ValueError(f"{op_name}: the window of shape {sizes} at {starts} falls outside the sample of shape "
                         f"{tuple(shape)} ({layout}). Slice can't be placed out of bounds with current policy. "
                         "Pass out_of_bounds_policy='pad' or 'trim_to_shape'.")
    return [(max(start, 0), max(0, min(start + size, extent) - max(start, 0)))
            for (start, size), extent in zip(window, shape)]


def cut_window(xp, sample, window: list[tuple[int, int]], fill_values, channel_axis: int):
    """The window (start, size per axis) of a numpy array or a torch tensor; where it reaches
    outside the sample, the outside is ``fill_values`` (one, or one per channel along
    ``channel_axis``)."""
    shape = tuple(sample.shape)
    if all(start >= 0 and start + size <= extent for (start, size), extent in zip(window, shape)):
        return sample[tuple(slice(start, start + size) for start, size in window)]
    sizes = tuple(size for _, size in window)
    fill_shape = [1] * len(shape)
    if len(fill_values) > 1:
        fill_shape[channel_axis] = len(fill_values)
    if xp is np:
        fill = np.asarray(fill_values, np.float64).reshape(fill_shape).astype(sample.dtype)
        result = np.empty(sizes, sample.dtype)
    else:
        fill = xp.as_tensor(np.asarray(fill_values, np.float64).reshape(fill_shape)).to(sample.dtype).to(sample.device)
        result = xp.empty(sizes, dtype=sample.dtype, device=sample.device)
    result[...] = fill
    source = tuple(slice(max(start, 0), min(start + size, extent)) for (start, size), extent in zip(window, shape))
    target = tuple(slice(part.start - start, part.stop - start) for part, (start, _) in zip(source, window))
    if all(part.stop > part.start for part in source):
        result[target] = sample[source]
    return result


def _crop_args_shared(args) -> bool:
    """Whether every sample has the same crop arguments: none of CROP_ARGS given per sample, or one
    dict for every sample (compared in C, not sample by sample in Python)."""
    if not len(args):
        return False
    if isinstance(args, BatchArgs):
        return not any(args.varies(arg.name) for arg in CROP_ARGS)
    return one_value(args) is not None


def _crop_args(args) -> list:
    """The samples' argument dicts as far as the crop reads them: the first sample's for every
    sample when they share the crop arguments (BatchArgs then makes no dict per sample)."""
    return [args[0]] * len(args) if _crop_args_shared(args) else list(args)


def crop_windows(plan, args: list, op_name: str) -> list:
    """Each sample's crop window for a GPU plan; worked out once per distinct (size, arguments):
    samples share argument dictionaries when their per-sample arguments are equal."""
    sizes = plan.sizes
    if _crop_args_shared(args) and one_value(sizes) is not None:
        # one size and one set of arguments (a crop after a fixed-size resize): one window for all
        (height, width), a = sizes[0], args[0]
        placement = crop_placement(height, width, a) or (0, 0, height, width)
        return [cpu_image.fit_window(*placement, height, width, a.out_of_bounds_policy, op_name)] * len(args)
    args = _crop_args(args)
    known: dict = {}
    windows = []
    for (height, width), a in zip(plan.sizes, args):
        key = (height, width, id(a))
        window = known.get(key)
        if window is None:
            placement = crop_placement(height, width, a) or (0, 0, height, width)
            window = known[key] = cpu_image.fit_window(*placement, height, width, a.out_of_bounds_policy, op_name)
        windows.append(window)
    return windows


def with_crop_of(plan, args: list, op_name: str):
    """The plan with each sample's window (crop / crop_mirror_normalize) and its fill values."""
    from penstock.kernels.image_plan import BORDER_FILL_OUTSIDE, ImagePlan
    args = _crop_args(args)
    if plan.border != BORDER_FILL_OUTSIDE and any(a.out_of_bounds_policy == "pad" for a in args):
        # the plan's outside is a warp's border, not this fill
        plan = ImagePlan.of(plan.materialize()[0], upload=plan.upload)
    return plan.with_crop(crop_windows(plan, args, op_name)).with_fills([a.fill_values for a in args])


def _radians(angle: float) -> np.float32:
    """DALI's deg2rad, in float32."""
    return np.float32(np.float32(angle) * np.float32(math.pi / 180))


def rotated_size(height: int, width: int, angle: float, args: dict, size_per_sample: bool = False) -> tuple[int, int]:
    """The output (height, width) of rotate for one sample: ``size``, else DALI's RotatedCanvasSize,
    each side given the parity of the input side that contributes most to it."""
    if args.size:
        return warp_size(height, width, args.size, size_per_sample)
    if args.keep_size:
        return height, width
    radians = float(_radians(angle))
    cos, sin = abs(math.cos(radians)), abs(math.sin(radians))
    out_width = math.ceil(cos * width + sin * height - 1e-2)
    out_height = math.ceil(cos * height + sin * width - 1e-2)
    parity_width, parity_height = (width % 2, height % 2) if sin <= cos else (height % 2, width % 2)
    out_width += (out_width % 2) ^ parity_width
    out_height += (out_height % 2) ^ parity_height
    return out_height, out_width


def warp_size(height: int, width: int, size, per_sample: bool) -> tuple[int, int]:
    """The output (height, width) of a warp: ``size`` (rounded; truncated when given per sample, as
    DALI reads a per-sample size), else the input's."""
    return warp_sizes((height, width), size, per_sample)


def warp_sizes(extents: tuple, size, per_sample: bool) -> tuple:
    """warp_size of any number of spatial axes (a volume's depth, height and width)."""
    if not size:
        return tuple(int(extent) for extent in extents)
    if per_sample:
        return tuple(max(int(value), 1) for value in size)
    return tuple(max(int(math.floor(value + 0.5)), 1) for value in size)


def rotation_edge_map(height: int, width: int, out_height: int, out_width: int, angle: float) -> np.ndarray:
    """The 3x3 map from output pixel edges to input ones (origin at the top-left pixel's corner)
    that turns the picture ``angle`` degrees counter-clockwise about its centre: DALI's
    translation(in / 2) * rotation * translation(-out / 2), in its float32 arithmetic."""
    f32 = np.float32
    radians = _radians(angle)
    cos, sin = np.cos(radians, dtype=f32), np.sin(radians, dtype=f32)
    in_x, in_y, out_x, out_y = (f32(size) * f32(0.5) for size in (width, height, out_width, out_height))
    return np.array([[cos, -sin, f32(f32(cos * -out_x) + f32(-sin * -out_y)) + in_x],
                     [sin, cos, f32(f32(sin * -out_x) + f32(cos * -out_y)) + in_y],
                     [0.0, 0.0, 1.0]], np.float64)
