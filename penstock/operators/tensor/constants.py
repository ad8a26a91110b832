"""Sources of the same array in every sample: ``constant`` (what a Python value given as an input
becomes), ``zeros`` and ``ones``."""
from __future__ import annotations

import numpy as np

from penstock import numeric, registry, types
from penstock.contract import OutputSpec, SourceBatch, SourceOperator
from penstock.operators.tensor.table import LAYOUT_ARG
from penstock.schema import Arg, OpSchema


registry.register_schema(OpSchema(
    name="constant", class_name="Constant", num_inputs=(0, 0), input_names=(), is_source=True,
    doc="The same array in every sample: ``value`` (any array-like), else ``fdata`` or ``idata`` (as in DALI), "
        "shaped by ``shape`` (default: 1-D, or the value's own shape).",
    args=(Arg("value", "any", None, "The data (a number, a list, a numpy array)."),
          Arg("fdata", "floats", None, "Floating-point data."), Arg("idata", "ints", None, "Integer data."),
          Arg("shape", "ints", None, "The shape of each sample.", min=0),
          Arg("dtype", "dtype", None, "Element type (default: float32 for fdata, int32 for idata, else the value's)."),
          LAYOUT_ARG)))


CONSTANT_TYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                             np.int64, np.uint64, np.float32, np.float16))


def _check_dali_constant(args) -> None:
    """fdata or idata, not both; a layout of one name per axis; DALI's element types."""
    if args.fdata is not None and args.idata is not None:
        raise ValueError("constant: arguments 'fdata' and 'idata' exclude each other; give one")
    values = args.fdata if args.fdata is not None else args.idata
    ndim = len(args.shape) if args.shape is not None else 1
    if args.layout and len(args.layout) != ndim:
        raise ValueError(f"constant: layout '{args.layout}' has {len(args.layout)} axes for "
                         f"{ndim}-dimensional outputs ({len(values)} values)")
    if args.dtype is not None and np.dtype(args.dtype.numpy) not in CONSTANT_TYPES:
        raise TypeError(f"constant: dtype {np.dtype(args.dtype.numpy).name} is not an output type; it takes "
                        f"{', '.join(t.name for t in CONSTANT_TYPES)}")


@registry.register("constant", "cpu")
class Constant(SourceOperator):
    fits_any_batch = True

    def __init__(self, args, context):
        super().__init__(args, context)
        data = args.value if args.value is not None else args.fdata if args.fdata is not None \
            else args.idata
        if data is None:
            raise ValueError("constant: give value, fdata or idata")
        if args.value is None:  # DALI's arguments, with DALI's rules
            _check_dali_constant(args)
        default = np.float32 if args.fdata is not None else np.int32 if args.idata is not None else None
        dtype = args.dtype.numpy if args.dtype is not None else default
        # converted as DALI converts: rounded to nearest and saturated (idata=-1 as uint8 is 0)
        array = np.array(data) if dtype is None else numeric.saturate(np.array(data), np.dtype(dtype))
        if args.shape is not None and array.size == 1:  # one value fills the shape
            array = np.full(tuple(args.shape), array.reshape(()), array.dtype)
        if args.shape is not None:
            if int(np.prod(args.shape)) != array.size:
                raise ValueError(f"constant: {array.size} values do not fill shape {tuple(args.shape)}")
            array = array.reshape(tuple(args.shape))
        array.setflags(write=False)  # one array shared by every sample
        self.array = array

    def declare_outputs(self, inputs):
        return OutputSpec(self.array.dtype, self.array.ndim, self.args.layout, self.array.shape)

    def next_batch(self, iteration):
        return SourceBatch([self.array] * self.context.batch_size)

    def load(self, item, sample):
        return (item,)


# ---- zeros, ones: a fixed array of a value in every sample ---------------------------------------------
for _name, _value in (("zeros", 0), ("ones", 1)):
    registry.register_schema(OpSchema(
        name=_name, class_name=_name.capitalize(), num_inputs=(0, 0), input_names=(), is_source=True,
        doc=f"An array of ``shape`` and ``dtype`` holding {_name} in every sample (as in DALI: int32 by default).",
        args=(Arg("shape", "ints", (), "The shape of each sample (default: a scalar).", min=0),
              Arg("dtype", "dtype", types.INT32, "Element type."), LAYOUT_ARG)))


class FilledSource(Constant):
    """zeros and ones: Constant's batches of one read-only array, made from shape, dtype and value."""

    value = 0

    def __init__(self, args, context):
        SourceOperator.__init__(self, args, context)
        array = np.full(tuple(args.shape), self.value, dtype=args.dtype.numpy)
        array.setflags(write=False)
        self.array = array


registry.register("zeros", "cpu")(type("Zeros", (FilledSource,), {"value": 0}))


registry.register("ones", "cpu")(type("Ones", (FilledSource,), {"value": 1}))
