"""``_augment_step``: one step of an automatic augmentation policy in one operator. Each sample
applies the operation its ``op_index`` names with the parameter row ``row`` of that operation's
table (penstock.auto_aug builds the tables, one row per magnitude bin and sign).

On the GPU the whole batch is one pass of the image kernel, whatever each sample drew: a
geometric operation is the sample's sampling map (the identity for the others), brightness and
colour its colour matrix, and the value operations (posterize, solarize, invert, equalize,
auto_contrast, contrast) its 256-entry table per channel, looked up on every source value; the
statistics the tables need (a histogram per sample and channel) are one bincount for the batch.
Sharpness is a 3x3 filter over the samples that drew it (one launch). The CPU does the same per
sample with OpenCV, from the same tables and matrices.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.batch import PackedBatch, hwc_facts
from penstock.capabilities import ImagePlanStep
from penstock.columns import arg_column
from penstock.contract import BatchOperator, SampleOperator
from penstock.kernels import cpu_image
from penstock.operators.shared import color_tables
from penstock.operators.shared.windows import Window, apply_window
from penstock.operators.shared.images import check_hwc, declare_hwc, rotation_edge_map
from penstock.operators.shared.gpu_plan import batch_of
from penstock.operators.shared.affine import homogeneous, shear_linear
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

GEOMETRY = ("shear_x", "shear_y", "translate_x", "translate_y", "translate_x_rel", "translate_y_rel", "rotate")
COLOR = ("brightness", "color")
TABLES = ("posterize", "solarize", "solarize_add", "invert", "equalize", "auto_contrast", "contrast")
KINDS = ("identity", *GEOMETRY, *COLOR, *TABLES, "sharpness")
STATISTICS = ("equalize", "auto_contrast", "contrast")  # tables made from the sample's histogram
PARAMETERS = 9  # columns of a parameter row: the widest parameter is sharpness's 3x3 kernel
LUMA = np.array([0.299, 0.587, 0.114], np.float32)
_LUMA_ON_DEVICES: dict = {}


def _luma_on(torch, device):
    """LUMA on the device, copied there once (a copy per batch would wait for the GPU's queued work)."""
    weights = _LUMA_ON_DEVICES.get(device)
    if weights is None:
        weights = _LUMA_ON_DEVICES[device] = torch.as_tensor(LUMA, device=device)
    return weights


def _check_tables(static: dict, per_sample: frozenset) -> None:
    kinds, tables = static.get("kinds") or (), static.get("parameters")
    for kind in kinds:
        if kind not in KINDS:
            raise ArgError(f"argument 'kinds': unknown operation {kind!r}; known: {', '.join(KINDS)}")
    if tables is not None and len(tables) != len(kinds):
        raise ArgError(f"argument 'parameters': {len(tables)} tables for {len(kinds)} operations")


registry.register_schema(OpSchema(
    name="_augment_step", class_name="_AugmentStep",
    doc="One step of an automatic augmentation policy: each sample of a batch of uint8 RGB HWC images "
        "applies operation ``kinds[op_index]`` with row ``row`` of its parameter table.",
    args=(Arg("kinds", "strs", REQUIRED, "The operations, by kind."),
          Arg("parameters", "any", REQUIRED, "Per operation, its table of parameter rows (rows of up to 9 values)."),
          Arg("op_index", "int", 0, "The operation each sample applies.", per_sample=True, min=0),
          Arg("row", "int", 0, "The parameter row it uses.", per_sample=True, min=0),
          Arg("fill_value", "float", None, "What geometric operations bring in from outside the image; None "
              "repeats the edge pixels.", nullable=True),
          Arg("interp_type", "interp_type", types.INTERP_LINEAR, "INTERP_NN or INTERP_LINEAR for the geometric ones.")),
    checks=(_check_tables,),
    input_names=("images",)))


# ---- the rules, shared by both devices ------------------------------------------------------------
class Draw(NamedTuple):
    """One (operation, parameter row) pair that samples of a batch drew."""
    kind: str
    parameters: np.ndarray
    samples: np.ndarray  # their positions in the batch
    pair: tuple  # (op_index, row)


class Steps:
    """The step's operations and their parameter tables, as numpy arrays made once."""

    def __init__(self, args: dict):
        self.kinds = tuple(args.kinds)
        self.tables = [np.asarray(table, np.float64).reshape(-1, PARAMETERS) for table in args.parameters]
        self._fixed_tables = None
        self._fixed_rows = None

    def fixed_tables(self) -> tuple[np.ndarray, dict]:
        """The value tables that depend on the parameters alone (posterize, solarize, invert...),
        made once: uint8 [R, 256] with row 0 the identity, and (op_index, row) -> its row there."""
        if self._fixed_tables is None:
            import torch
            tables, rows = [np.arange(256, dtype=np.uint8)], {}
            for index, (kind, table) in enumerate(zip(self.kinds, self.tables)):
                if kind in TABLES and kind not in STATISTICS:
                    for row, parameters in enumerate(table):
                        rows[index, row] = len(tables)
                        no_counts = torch.zeros((1, 1, 256), dtype=torch.int64)
                        tables.append(value_tables([kind], parameters[None], no_counts)[0, 0].numpy())
            self._fixed_tables, self._fixed_rows = np.stack(tables), rows
        return self._fixed_tables, self._fixed_rows

    def draws(self, op_index, row) -> list:
        """The batch's distinct (operation, row) pairs, as Draws, from its op_index and row
        columns."""
        op_index, row = np.asarray(op_index, np.int64), np.asarray(row, np.int64)
        if len(op_index) and op_index.max() >= len(self.kinds):
            raise ValueError(f"_augment_step: op_index {op_index.max()} for {len(self.kinds)} operations")
        lengths = np.array([len(table) for table in self.tables], np.int64)
        beyond = np.flatnonzero(row >= lengths[op_index]) if len(op_index) else ()
        if len(beyond):
            index = op_index[beyond[0]]
            raise ValueError(f"_augment_step: parameter row {row[beyond[0]]} of a table of {lengths[index]} "
                             f"({self.kinds[index]})")
        rows_per_operation = int(lengths.max(initial=1))
        pairs, inverse = np.unique(op_index * rows_per_operation + row, return_inverse=True)
        order = np.argsort(inverse, kind="stable")  # the samples, grouped by pair
        bounds = np.searchsorted(inverse[order], np.arange(len(pairs) + 1))
        draws = []
        for position, pair in enumerate(pairs.tolist()):
            index, chosen_row = divmod(pair, rows_per_operation)
            draws.append(Draw(self.kinds[index], self.tables[index][chosen_row],
                              order[bounds[position]:bounds[position + 1]], (index, chosen_row)))
        return draws

    def of(self, args: dict) -> tuple[str, np.ndarray]:
        """(kind, parameter row of PARAMETERS values) of one sample."""
        index, row = args.op_index, args.row
        if index >= len(self.kinds):
            raise ValueError(f"_augment_step: op_index {index} for {len(self.kinds)} operations")
        table = self.tables[index]
        if row >= len(table):
            raise ValueError(f"_augment_step: parameter row {row} of a table of {len(table)} ({self.kinds[index]})")
        return self.kinds[index], table[row]


def geometry_map(kind: str, parameters: np.ndarray, height: int, width: int) -> np.ndarray:
    """The 3x3 map from output pixel edges to input ones of a geometric operation (the sample's size kept)."""
    return _geometry_map(kind, tuple(parameters[:2]), height, width)


@functools.lru_cache(maxsize=4096)  # a policy's parameter rows are few: the maps repeat batch after batch
def _geometry_map(kind: str, parameters: tuple, height: int, width: int) -> np.ndarray:
    if kind == "rotate":
        return _frozen(rotation_edge_map(height, width, height, width, parameters[0]))
    if kind.startswith("shear"):
        forward = homogeneous(shear_linear(parameters))
    else:
        offset = np.array(parameters) * ((width, height) if kind.endswith("_rel") else 1.0)
        forward = homogeneous(np.eye(2), offset)
    return _frozen(np.linalg.inv(forward))  # as warp_affine with inverse_map=False


@functools.lru_cache(maxsize=4096)
def color_map(kind: str, parameter: float) -> np.ndarray:
    """The 3x3 colour matrix of brightness (a factor) or colour (a saturation, DALI's YIQ map)."""
    if kind == "brightness":
        return _frozen(np.eye(3) * parameter)
    ones = np.ones(1)
    matrices, _ = color_tables.yiq_maps({"hue": 0 * ones, "saturation": parameter * ones, "value": ones,
                                         "brightness": ones, "contrast": ones}, np.uint8)
    return _frozen(matrices[0])


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # cached: shared by every sample that draws the same row
    return array


def value_tables(kinds: list, parameters: np.ndarray, counts):
    """The uint8 tables (torch [M, C, 256], on the device of ``counts``) of M value operations:
    ``parameters`` [M, PARAMETERS], ``counts`` int64 [M, C, 256] the histograms equalize,
    auto_contrast and contrast read. Each kind is computed for all its samples at once. Rounding
    to nearest, halves to even (penstock.numeric)."""
    import torch
    device = counts.device
    count, channels = counts.shape[0], counts.shape[1]
    levels = torch.arange(256, dtype=torch.float32, device=device)
    tables = torch.empty((count, channels, 256), dtype=torch.uint8, device=device)
    names = sorted(set(kinds))
    chosen_rows = [np.array([index for index, name in enumerate(kinds) if name == kind], np.int64) for kind in names]
    from penstock.runtime.pinned import to_device  # (torch only when a step runs)
    first_parameters, *row_tensors = to_device(device, [np.asarray(parameters, np.float32)[:, 0], *chosen_rows])
    for kind, chosen, rows in zip(names, chosen_rows, row_tensors):
        parameter = first_parameters[rows][:, None, None]
        histogram = counts[rows]
        if kind == "posterize":
            table = (levels.to(torch.int32) & parameter.to(torch.int32)).to(torch.float32)
        elif kind == "solarize":
            table = torch.where(levels < parameter, levels, 255.0 - levels)
        elif kind == "solarize_add":
            table = torch.where(levels < 128.0, (levels + parameter).clamp(max=255.0), levels)
        elif kind == "invert":
            table = (255.0 - levels).expand(len(chosen), 1, 256)
        elif kind == "equalize":
            table = equalize_table(histogram, histogram.cumsum(-1), histogram.sum(-1, keepdim=True), levels)
        elif kind == "auto_contrast":  # each channel stretched to [0, 255] from its lowest to its highest level
            present = (histogram > 0).to(torch.uint8)
            low = present.argmax(-1, keepdim=True).to(torch.float32)
            high = 255.0 - present.flip(-1).argmax(-1, keepdim=True).to(torch.float32)
            flat = high <= low
            scale = 255.0 / torch.where(flat, torch.full_like(low, 255.0), high - low)
            table = ((levels - torch.where(flat, torch.zeros_like(low), low)) * scale).round()
        else:  # contrast: a blend with the mean of the image's luma (PIL's and torchvision's rule)
            pixels = histogram.sum(-1).to(torch.float64)
            means = ((histogram.to(torch.float64) * levels).sum(-1) / pixels).to(torch.float32)  # [m, C]
            center = (means * _luma_on(torch, device)[:channels]).sum(-1)[:, None, None]
            table = (center + (levels - center) * parameter).round()
        tables[rows] = table.clamp(0.0, 255.0).expand(len(chosen), channels, 256).to(torch.uint8)
    return tables


def equalize_table(counts, cumulative, pixels, levels):
    """OpenCV's equalizeHist tables [C, 256] (float32, as OpenCV computes them) from histograms."""
    import torch
    # the count of the lowest level present: the smallest cumulative count above zero
    first = torch.where(cumulative > 0, cumulative, torch.full_like(cumulative, 2**62)).amin(-1, keepdim=True)
    scale = 255.0 / (pixels - first).clamp_min(1).float()
    table = ((cumulative - first).float() * scale).round().clamp(0, 255)
    return torch.where(first == pixels, levels.expand_as(table), table)  # one level only: left as it is


def sharpness_window(parameters: np.ndarray) -> Window:
    return Window(parameters[:9].reshape(3, 3).astype(np.float32), (1, 1), "reflect_101")


class AugmentStepDeclaration:
    def declare_outputs(self, inputs):
        declare_hwc(inputs[0], self.name)
        if inputs[0].dtype is not None and np.dtype(inputs[0].dtype) != np.uint8:
            raise TypeError(f"{self.name}: takes uint8 images, got {np.dtype(inputs[0].dtype)}")
        return inputs[0]


def _border(args: dict) -> tuple[str, tuple | None]:
    fill = args.fill_value
    return ("replicate", None) if fill is None else ("constant", (fill,) * 3)


@registry.register("_augment_step", "cpu")
class AugmentStep(AugmentStepDeclaration, SampleOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        self._steps = Steps(args)

    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        check_hwc(image, self.name)
        kind, parameters = self._steps.of(args)
        height, width, channels = image.shape
        if kind in GEOMETRY:
            border, fill = _border(args)
            warped = cpu_image.warp(image, geometry_map(kind, parameters, height, width), height, width,
                                    args.interp_type, border, fill)
            return numeric.saturate(warped, np.uint8)
        if kind in COLOR:
            values = image.reshape(-1, channels).astype(np.float32) @ color_map(kind, parameters[0]).T.astype(np.float32)
            return numeric.saturate(values.reshape(image.shape), np.uint8)
        if kind in TABLES:
            import torch
            counts = np.stack([np.bincount(image[:, :, c].ravel(), minlength=256) for c in range(channels)])
            table = value_tables([kind], parameters[None], torch.from_numpy(counts[None]))[0].numpy()
            return np.stack([table[c][image[:, :, c]] for c in range(channels)], axis=2)
        if kind == "sharpness":
            return numeric.saturate(apply_window(image, sharpness_window(parameters), self.name), np.uint8)
        return image.copy()


@registry.register("_augment_step", "gpu", requires=devices.gpu_problem)
class AugmentStepGpu(ImagePlanStep, AugmentStepDeclaration, BatchOperator):
    """Not LightOnGpu: runs the plan before it for the value operations' statistics, and a filter
    launch of its own."""

    def __init__(self, args, context):
        super().__init__(args, context)
        self._steps = Steps(args)
        self._fixed_device = None

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.kernels.image_plan import BORDER_CLAMP, BORDER_CONSTANT, ImagePlan
        from penstock.operators.shared.gpu_plan import kernel_filter
        from penstock.runtime.pinned import to_device
        samples, fresh = batch_of(inputs[0])
        if not len(samples):
            return samples
        count = len(samples)
        draws = self._steps.draws(arg_column(args, "op_index"), arg_column(args, "row"))
        sharpened = sorted((index, draw.parameters) for draw in draws if draw.kind == "sharpness"
                           for index in draw.samples.tolist())
        if sharpened:
            samples = self._sharpen(samples, fresh, sharpened)
        plan = ImagePlan.of(samples, upload=to_device)
        sizes = plan.sizes
        maps = np.tile(np.eye(3), (count, 1, 1))
        colors = np.tile(np.eye(3), (count, 1, 1))
        for draw in draws:  # the few distinct (operation, row) pairs of the batch
            if draw.kind in GEOMETRY:
                for index in draw.samples:
                    maps[index] = geometry_map(draw.kind, draw.parameters, *sizes[index])
            elif draw.kind in COLOR:
                colors[draw.samples] = color_map(draw.kind, draw.parameters[0])
        if any(draw.kind in TABLES for draw in draws):
            plan = plan.with_tables(self._batch_tables(samples, draws))
        fill = args[0].fill_value
        borders = np.full((count, 3), fill, np.float64) if fill is not None else None
        plan = plan.with_warp(maps, sizes, kernel_filter(args[0].interp_type),
                              BORDER_CONSTANT if fill is not None else BORDER_CLAMP, borders)
        return plan.with_color(colors, np.zeros((count, 3))).with_output(dtype=torch.uint8)

    def _sharpen(self, samples, fresh: bool, sharpened: list):
        """The batch with the samples that drew sharpness filtered (one launch): written over
        their pixels when the batch is this step's own, else in a new list."""
        from penstock.kernels.triton_filters import run_window
        from penstock.runtime.pinned import to_device
        import torch
        indices = [index for index, _ in sharpened]
        sources = [samples[index] for index in indices]
        results = run_window(sources, [_window_of(parameters) for _, parameters in sharpened],
                             [tuple(source.shape[:2]) for source in sources], "sum", "reflect_101",
                             [0.0] * len(sources), torch.uint8, self.name, upload=to_device)
        if fresh and isinstance(samples, PackedBatch):
            for source, result in zip(sources, results):
                source.copy_(result)
            return samples
        samples = list(samples)
        for index, result in zip(indices, results):
            samples[index] = result
        return samples

    def _batch_tables(self, samples, draws: list):
        """uint8 [N, C, 256] tables on the samples' device: the identity, the parameter-only tables
        (made once, gathered by row), and the tables made from the histograms of the samples that
        drew equalize, auto_contrast or contrast (every histogram in one launch, every table from
        them in another)."""
        from penstock.runtime.pinned import to_device
        from penstock.kernels.triton_filters import run_histograms, run_statistic_tables
        count, channels, device = len(samples), *hwc_facts(samples)[::2]
        fixed, fixed_rows = self._steps.fixed_tables()
        if self._fixed_device is None or self._fixed_device.device != device:
            self._fixed_device = to_device(device, [fixed])[0]
        rows = np.zeros(count, np.int64)
        needing, kinds, factors = [], [], []
        for draw in draws:
            if draw.kind in STATISTICS:
                needing.append(draw.samples)
                kinds += [draw.kind] * len(draw.samples)
                factors.append(np.full(len(draw.samples), draw.parameters[0]))
            elif draw.kind in TABLES:
                rows[draw.samples] = fixed_rows[draw.pair]
        rows = to_device(device, [rows])[0]
        tables = self._fixed_device[rows][:, None, :].expand(count, channels, 256).contiguous()
        if needing:
            needing = np.concatenate(needing)
            run_statistic_tables(run_histograms(samples, needing, upload=to_device), kinds, np.concatenate(factors),
                                 needing, tables, upload=to_device)
        return tables


def _window_of(parameters):
    window = sharpness_window(parameters)
    return window.weights, window.anchor
