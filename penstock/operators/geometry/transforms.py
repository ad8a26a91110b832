"""Affine-matrix builders: ``transforms.translation``, ``transforms.scale``, ``transforms.rotation``,
``transforms.shear``, ``transforms.crop`` and ``transforms.combine``, as DALI's.

Each makes, per sample, a float32 matrix of shape (ndim, ndim + 1): the top rows of the
homogeneous (ndim + 1) x (ndim + 1) map of points (x, y[, z]). The number of dimensions comes
from the lengths of the arguments (rotation: 3 with ``axis``, else 2). Given a matrix as input,
the new transform is combined with it: by default the input's transform applies first and this
one after it (new @ input); with ``reverse_order`` the other way round (input @ new).
``transforms.combine`` of [T1, T2, T3] applies T1 first, then T2, then T3 (T3 @ T2 @ T1), or the
reverse order with ``reverse_order``.

Translation, scale, crop and combine make transforms of 1 to 6 dimensions; rotation and shear of 2
or 3. Input matrices are float32, as DALI takes them. The outputs' layout is '**' (DALI's: two axes
of no name).

They run on the CPU only (their work is a few multiplications per sample), and their outputs feed
GPU operators as per-sample arguments, as any CPU argument does (``fn.warp_affine(images.gpu(),
matrix=fn.transforms.rotation(angle=...))``).
"""
from __future__ import annotations

import math

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema
from penstock.operators.shared.affine import homogeneous, shear_linear

REVERSE_ORDER = Arg("reverse_order", "bool", False, "False: the input's transform applies first, this one after "
                    "it; True: the other way round.")
CENTER = Arg("center", "floats", None, "The fixed point of the transform, one value per dimension; default the "
             "origin.", per_sample=True)


def _schema(name: str, class_name: str, doc: str, args: tuple, checks: tuple = ()):
    registry.register_schema(OpSchema(
        name=name, class_name=class_name, doc=doc + " Given a matrix (ndim, ndim + 1) as input, the transform is "
        "combined with it (see reverse_order). Output: float32 (ndim, ndim + 1).",
        args=(*args, REVERSE_ORDER), num_inputs=(0, 1), input_names=("input",), checks=checks))


def _static(*names):
    """A schema check of a rule, run at the call when none of ``names`` is a per-sample input."""
    def wrap(rule):
        def check(static: dict, per_sample: frozenset) -> None:
            if not per_sample & set(names):
                rule(static)
        return check
    return wrap


def about_center(matrix: np.ndarray, center) -> np.ndarray:
    """``matrix`` (homogeneous, without translation) moved so that ``center`` stays in place (DALI:
    the translation becomes center - linear @ center)."""
    if center is None:
        return matrix
    size = matrix.shape[0] - 1
    center = np.asarray(center, np.float64)
    result = matrix.copy()
    result[:size, size] = center - matrix[:size, :size] @ center
    return result


def as_homogeneous(matrix, op_name: str, what: str) -> np.ndarray:
    """A given (ndim, ndim + 1) affine matrix as its (ndim + 1) x (ndim + 1) homogeneous form."""
    values = np.asarray(matrix, np.float64)
    if values.ndim != 2 or values.shape[1] != values.shape[0] + 1:
        raise ValueError(f"{op_name}: {what}: expected an affine matrix of shape (ndim, ndim + 1), such as (2, 3), "
                         f"got shape {values.shape}")
    return np.vstack([values, np.eye(1, values.shape[1], values.shape[0])])


def compose(own: np.ndarray, given, reverse_order: bool, op_name: str) -> np.ndarray:
    """The builder's matrix combined with the input's (when there is one), as float32 (ndim, ndim + 1)."""
    if given is not None:
        given = as_homogeneous(given, op_name, "input")
        if given.shape != own.shape:
            raise ValueError(f"{op_name}: input: a {given.shape[0] - 1}D transform, but the arguments describe a "
                             f"{own.shape[0] - 1}D transform")
        own = given @ own if reverse_order else own @ given
    return own[:-1].astype(np.float32)


def combine(matrices: list, reverse_order: bool, op_name: str) -> np.ndarray:
    """[T1, T2, ...] as one transform: T1 applied first (... @ T2 @ T1), or last with reverse_order."""
    result = None
    for position, matrix in enumerate(matrices):
        step = as_homogeneous(matrix, op_name, f"input {position}")
        if result is not None and step.shape != result.shape:
            raise ValueError(f"{op_name}: input {position} is a {step.shape[0] - 1}D transform, input 0 a "
                             f"{result.shape[0] - 1}D one")
        result = step if result is None else (result @ step if reverse_order else step @ result)
    return result[:-1].astype(np.float32)


def _check_center(center, ndim: int) -> None:
    if center is not None and len(center) != ndim:
        raise ArgError(f"argument 'center': expected {ndim} values (one per dimension), got {len(center)}")


# ---- translation --------------------------------------------------------------------------------
def translation_matrix(args: dict, given: int | None = None) -> np.ndarray:
    offset = np.asarray(args.offset, np.float64)
    return homogeneous(np.eye(len(offset)), offset)


_schema("transforms.translation", "transforms.Translation", "A translation by ``offset``.",
        (Arg("offset", "floats", REQUIRED, "The translation, one value per dimension (x, y[, z]).",
             per_sample=True),))


# ---- scale --------------------------------------------------------------------------------------
def _scale_factors(args: dict, given: int | None) -> tuple:
    """As DALI: several values give the dimensions (``ndim`` is then not read); one value scales
    every dimension of the input matrix, or ``ndim`` of them, or the one dimension of a 1D transform."""
    scale = tuple(args.scale)
    if len(scale) > 1:
        return scale
    return scale * (given or args.ndim or 1)


def scale_matrix(args: dict, given: int | None = None) -> np.ndarray:
    factors = _scale_factors(args, given)
    _check_center(args.center, len(factors))
    return about_center(homogeneous(np.diag(factors)), args.center)


def _check_scale(static: dict) -> None:
    if len(static.scale) > 1:
        _check_center(static.center, len(static.scale))


_schema("transforms.scale", "transforms.Scale", "A scaling by ``scale`` (one factor per dimension) about "
        "``center``.",
        (Arg("scale", "floats", REQUIRED, "The factor of each dimension; one value with ``ndim`` scales every "
             "dimension alike.", per_sample=True),
         CENTER,
         Arg("ndim", "int", None, "The number of dimensions, when ``scale`` is one value.", min=1)),
        checks=(_static("scale", "center")(_check_scale),))


# ---- rotation -----------------------------------------------------------------------------------
def rotation_linear(angle_degrees: float, axis=None) -> np.ndarray:
    """DALI's rotation: in 2D [[cos, -sin], [sin, cos]] (from x towards y: with y pointing down, as
    in images, clockwise on screen); in 3D about ``axis`` by the right-hand rule (Rodrigues)."""
    radians = math.radians(angle_degrees)
    cos, sin = math.cos(radians), math.sin(radians)
    if axis is None:
        return np.array([[cos, -sin], [sin, cos]])
    with np.errstate(invalid="ignore", divide="ignore"):  # an axis of length 0 gives NaNs, as in DALI
        x, y, z = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    cross = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return cos * np.eye(3) + sin * cross + (1 - cos) * np.outer((x, y, z), (x, y, z))


def rotation_matrix(args: dict, given: int | None = None) -> np.ndarray:
    _check_rotation(args)
    linear = rotation_linear(args.angle, args.axis)
    return about_center(homogeneous(linear), args.center)


def _check_rotation(args: dict) -> None:
    axis = args.axis
    if axis is not None and len(axis) != 3:
        raise ArgError(f"argument 'axis': expected 3 values, got {tuple(axis)}")
    _check_center(args.center, 3 if axis is not None else 2)


_schema("transforms.rotation", "transforms.Rotation", "A rotation by ``angle`` degrees about ``center``: in 2D "
        "the matrix [[cos, -sin], [sin, cos]] (x turns towards y; in image coordinates, y down, that is "
        "clockwise on screen), in 3D about ``axis`` (right-hand rule).",
        (Arg("angle", "float", REQUIRED, "The angle, in degrees.", per_sample=True),
         Arg("axis", "floats", None, "The axis of a 3D rotation (any non-zero length; of length 0, the matrix is "
             "NaNs); makes the transform 3D.",
             per_sample=True),
         CENTER),
        checks=(_static("axis", "center")(_check_rotation),))


def _shear_factors(args: dict) -> list:
    if (args.shear is None) == (args.angles is None):
        raise ArgError("give one of 'shear' (factors) or 'angles' (degrees)")
    name = "shear" if args.shear is not None else "angles"
    try:
        values = np.asarray(args[name], np.float64).ravel().tolist()
    except (TypeError, ValueError):
        raise ArgError(f"argument '{name}': expected numbers, got {args[name]!r}") from None
    if len(values) not in (2, 6):
        raise ArgError(f"argument '{name}': expected 2 values (2D) or 6 (3D, a 3 x 2 matrix), got {len(values)}")
    if name == "shear":
        return values
    if any(abs(angle) > 90 for angle in values):
        raise ArgError(f"argument 'angles': expected angles in [-90, 90] degrees, got {tuple(values)}")
    return [math.tan(math.radians(angle)) for angle in values]


def shear_matrix(args: dict, given: int | None = None) -> np.ndarray:
    factors = _shear_factors(args)
    ndim = 2 if len(factors) == 2 else 3
    _check_center(args.center, ndim)
    return about_center(homogeneous(shear_linear(factors)), args.center)


def _check_shear(static: dict) -> None:
    factors = _shear_factors(static)
    _check_center(static.center, 2 if len(factors) == 2 else 3)


_schema("transforms.shear", "transforms.Shear", "A shear about ``center``, from factors (``shear``) or angles "
        "in degrees (``angles``, factor = tan(angle)).",
        (Arg("shear", "any", None, "The factors: 2D (shear_x, shear_y), also as a 2 x 1 tensor; 3D (xy, xz, yx, yz, "
             "zx, zy), also as a 3 x 2 tensor; factor 'ab' is the offset along axis a per unit along axis b.",
             per_sample=True),
         Arg("angles", "any", None, "The shear angles in degrees, in [-90, 90], in the order and forms of ``shear``.",
             per_sample=True),
         CENTER),
        checks=(_static("shear", "angles", "center")(_check_shear),))


# ---- crop ---------------------------------------------------------------------------------------
CROP_RANGES = ("from_start", "from_end", "to_start", "to_end")


def _crop_ranges(args: dict) -> list[np.ndarray]:
    lengths = [len(args[name]) for name in CROP_RANGES]
    ndim = max(lengths)
    for name, length in zip(CROP_RANGES, lengths):
        if length not in (1, ndim):
            raise ArgError(f"argument '{name}': {length} values, but another range has {ndim}; give one value "
                           f"or one per dimension")
    return [np.broadcast_to(np.asarray(args[name], np.float64), (ndim,)).copy() for name in CROP_RANGES]


def crop_matrix(args: dict, given: int | None = None) -> np.ndarray:
    """The map taking [from_start, from_end] to [to_start, to_end] on every axis (DALI's
    transforms.crop); ``absolute`` swaps a start and end given the wrong way round. An empty source
    range gives infinite (or NaN) entries, as in DALI."""
    from_start, from_end, to_start, to_end = _crop_ranges(args)
    if args.absolute:
        from_start, from_end = np.minimum(from_start, from_end), np.maximum(from_start, from_end)
        to_start, to_end = np.minimum(to_start, to_end), np.maximum(to_start, to_end)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = (to_end - to_start) / (from_end - from_start)
        return homogeneous(np.diag(scale), to_start - scale * from_start)


def _check_crop(static: dict) -> None:
    crop_matrix(static)


_schema("transforms.crop", "transforms.Crop", "The map that takes the box [from_start, from_end] onto [to_start, "
        "to_end] (each one value, or one per dimension), as after a crop.",
        (Arg("from_start", "floats", (0.0,), "The lower corner of the source box.", per_sample=True),
         Arg("from_end", "floats", (1.0,), "The upper corner of the source box.", per_sample=True),
         Arg("to_start", "floats", (0.0,), "The lower corner of the destination box.", per_sample=True),
         Arg("to_end", "floats", (1.0,), "The upper corner of the destination box.", per_sample=True),
         Arg("absolute", "bool", False, "Swap a start and an end when the start is larger.")),
        checks=(_static(*CROP_RANGES)(_check_crop),))


# ---- combine ------------------------------------------------------------------------------------
MAX_COMBINED = 99
registry.register_schema(OpSchema(
    name="transforms.combine", class_name="transforms.Combine",
    doc=f"Combines 2 to {MAX_COMBINED} affine transforms (ndim, ndim + 1) of one shape: [T1, T2, T3] becomes the "
        "transform that applies T1, then T2, then T3 (T3 @ T2 @ T1); with reverse_order T3 first (T1 @ T2 @ T3). "
        "Output: float32 (ndim, ndim + 1).",
    args=(Arg("reverse_order", "bool", False, "Apply the inputs from the last to the first."),),
    num_inputs=(2, MAX_COMBINED), input_names=tuple(f"input{i}" for i in range(MAX_COMBINED))))


# ---- the implementations (CPU) ------------------------------------------------------------------
BUILDERS = {"transforms.translation": translation_matrix, "transforms.scale": scale_matrix,
            "transforms.rotation": rotation_matrix, "transforms.shear": shear_matrix,
            "transforms.crop": crop_matrix}
# the dimensionalities each operator makes (DALI's)
DIMENSIONS = {"transforms.rotation": (2, 3), "transforms.shear": (2, 3)}
ANY_DIMENSIONS = tuple(range(1, 7))
MATRIX_LAYOUT = "**"


def _check_dimensions(op_name: str, ndim: int) -> None:
    supported = DIMENSIONS.get(op_name, ANY_DIMENSIONS)
    if ndim not in supported:
        raise ValueError(f"{op_name}: a {ndim}D transform; it makes transforms of {supported[0]} to {supported[-1]} "
                         "dimensions")


def _matrix_spec(ndim: int | None) -> OutputSpec:
    return OutputSpec(np.dtype(np.float32), 2, MATRIX_LAYOUT, (ndim, ndim + 1) if ndim else None)


def _check_input_spec(spec: OutputSpec, op_name: str, what: str) -> int | None:
    """The dimensionality of a declared matrix input, rejecting declared shapes that are no affine
    matrix and types other than float32."""
    if spec.dtype is not None and spec.dtype != np.float32:
        raise TypeError(f"{op_name}: {what}: expected float32 affine matrices, got {spec.dtype}")
    if spec.ndim is not None and spec.ndim != 2:
        raise ValueError(f"{op_name}: {what}: expected affine matrices (ndim, ndim + 1), but it has {spec.ndim} "
                         "dimensions")
    if spec.shape is not None and (len(spec.shape) != 2 or spec.shape[1] != spec.shape[0] + 1):
        raise ValueError(f"{op_name}: {what}: expected affine matrices of shape (ndim, ndim + 1), got {spec.shape}")
    return spec.shape[0] if spec.shape is not None else None


def _check_input(matrix: np.ndarray, op_name: str, what: str) -> int:
    if matrix.dtype != np.float32:
        raise TypeError(f"{op_name}: {what}: expected float32 affine matrices, got {matrix.dtype}")
    return as_homogeneous(matrix, op_name, what).shape[0] - 1


class TransformBuilder(SampleOperator):
    build = None

    def declare_outputs(self, inputs):
        given = _check_input_spec(inputs[0], self.name, "input") if inputs else None
        try:
            own = type(self).build(self.args, given).shape[0] - 1
        except (KeyError, TypeError, ValueError, ArgError):  # a per-sample argument (absent here) decides
            own = None
        if own is not None:
            _check_dimensions(self.name, own)
        if given is not None and own is not None and given != own:
            raise ValueError(f"{self.name}: input: a {given}D transform, but the arguments describe a {own}D transform")
        return _matrix_spec(own or given)

    def output_spec(self, inputs, args):
        return None

    def run(self, inputs, args, sample, out=None):
        given = _check_input(inputs[0], self.name, "input") if inputs else None
        try:
            own = type(self).build(args, given)
        except ArgError as error:
            raise ValueError(f"{self.name}: {error}") from None
        _check_dimensions(self.name, own.shape[0] - 1)
        return compose(own, inputs[0] if inputs else None, args.reverse_order, self.name)


for _name, _build in BUILDERS.items():
    _class_name = _name.split(".")[1].capitalize()
    registry.register(_name, "cpu")(type(_class_name, (TransformBuilder,), {"build": staticmethod(_build)}))


@registry.register("transforms.combine", "cpu")
class Combine(SampleOperator):
    def declare_outputs(self, inputs):
        dims = {_check_input_spec(spec, self.name, f"input {position}") for position, spec in enumerate(inputs)}
        dims.discard(None)
        if len(dims) > 1:
            raise ValueError(f"{self.name}: the inputs are transforms of {sorted(dims)} dimensions; combine transforms "
                             "of one dimensionality")
        ndim = dims.pop() if dims else None
        if ndim is not None:
            _check_dimensions(self.name, ndim)
        return _matrix_spec(ndim)

    def run(self, inputs, args, sample, out=None):
        for position, matrix in enumerate(inputs):
            _check_dimensions(self.name, _check_input(matrix, self.name, f"input {position}"))
        return combine(list(inputs), args.reverse_order, self.name)


__all__ = ["about_center", "combine", "compose", "crop_matrix", "homogeneous", "rotation_linear", "rotation_matrix",
           "scale_matrix", "shear_linear", "shear_matrix", "translation_matrix"]
