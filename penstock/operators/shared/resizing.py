"""The arguments of resizing, written once: resize, resize_crop_mirror, tensor_resize and
readers.video_resize take them (sizes follow the layout's spatial axes, outermost first: D, H, W)."""
from __future__ import annotations

from penstock import types
from penstock.schema import Arg, ArgError, given, require_one_of


INTERP_ARGS = (
    Arg("interp_type", "interp_type", types.INTERP_LINEAR, "Resampling filter: INTERP_NN, INTERP_LINEAR, "
        "INTERP_CUBIC, INTERP_LANCZOS3, INTERP_TRIANGULAR or INTERP_GAUSSIAN."),
    Arg("min_filter", "interp_type", None, "Filter along axes that shrink (default interp_type)."),
    Arg("mag_filter", "interp_type", None, "Filter along axes that keep their size or grow (default interp_type)."),
    Arg("antialias", "bool", True, "Widen the filter by the shrink factor along axes that shrink (not for "
        "INTERP_NN)."),
    Arg("minibatch_size", "int", 32, "Accepted for DALI compatibility.", min=1),
    Arg("temp_buffer_hint", "int", 0, "Accepted for DALI compatibility.", min=0),
)


RESIZE_ARGS = (
    Arg("resize_x", "float", 0.0, "Output width; negative flips the image horizontally.", per_sample=True),
    Arg("resize_y", "float", 0.0, "Output height; negative flips the image vertically.", per_sample=True),
    Arg("resize_z", "float", 0.0, "Output depth of volumes; negative flips them.", per_sample=True),
    Arg("size", "floats", None, "Output size, one value per spatial axis ((height, width) or (depth, height, "
        "width)); a 0 is a missing size; one value stands for every axis.", per_sample=True, length=(1, 2, 3)),
    Arg("resize_shorter", "float", 0.0, "Length of the shorter side; keeps the aspect ratio (mode 'not_smaller' "
        "with this size along every axis).", per_sample=True, min=0.0),
    Arg("resize_longer", "float", 0.0, "Length of the longer side; keeps the aspect ratio (mode 'not_larger' "
        "with this size along every axis).", per_sample=True, min=0.0),
    Arg("mode", "str", None, "'default' (missing sizes scale by the average scale of the given ones), "
        "'stretch' (missing sizes keep the input's), 'not_larger' (fit inside), 'not_smaller' (cover).",
        choices=(None, "default", "stretch", "not_larger", "not_smaller")),
    Arg("max_size", "floats", None, "Upper limit of the output size, one value or one per axis; with "
        "'not_larger', 'not_smaller', resize_shorter and resize_longer it lowers the common scale; otherwise "
        "it caps each axis on its own.", length=(1, 2, 3), min=0.0),
    Arg("roi_start", "floats", None, "Start of the input region to resize, per spatial axis (with roi_end); "
        "a start past the end flips that axis.", per_sample=True, length=(1, 2, 3)),
    Arg("roi_end", "floats", None, "End of the input region to resize, per spatial axis.", per_sample=True,
        length=(1, 2, 3)),
    Arg("roi_relative", "bool", False, "roi_start and roi_end are fractions of the input size (0 to 1)."),
    Arg("subpixel_scale", "bool", True, "Keep the exact scale of a fractional output size (the input region "
        "moves about its centre); False stretches the input onto the rounded size."),
)


def _one_size_form(static: dict, per_sample: frozenset) -> None:
    forms = [any(given(static, per_sample, name) for name in ("resize_x", "resize_y", "resize_z")),
             given(static, per_sample, "size"), given(static, per_sample, "resize_shorter"),
             given(static, per_sample, "resize_longer")]
    if sum(forms) > 1:
        raise ArgError("give the output size one way: resize_x / resize_y / resize_z, size, resize_shorter "
                       "or resize_longer")
    if given(static, per_sample, "mode") and (forms[2] or forms[3]):
        raise ArgError("resize_shorter, resize_longer and mode exclude each other")
    if given(static, per_sample, "roi_start") != given(static, per_sample, "roi_end"):
        raise ArgError("give roi_start and roi_end together")


RESIZE_CHECKS = (require_one_of("size", "resize_x", "resize_y", "resize_z", "resize_shorter", "resize_longer",
                                what="the output size"), _one_size_form)
