"""What a pipeline's outputs may be and must hold: constants made into constant batches, the
element types and dimensions output_dtype and output_ndim ask of them, and their declared
specs in words (describe())."""
from __future__ import annotations

from penstock import graph as graph_module
from penstock import types
from penstock.contract import OutputSpec
from penstock.graph import DataNode


def output_descriptions(expected_dtype, expected_ndim, count: int) -> tuple[list, list]:
    """The element type and number of dimensions each of ``count`` outputs must have (None: any),
    from output_dtype and output_ndim (one value for all, or a list of one per output)."""
    dtypes, ndims = ([value] * count if not isinstance(value, (list, tuple)) else list(value)
                     for value in (expected_dtype, expected_ndim))
    if not len(dtypes) == len(ndims) == count:
        raise RuntimeError(f"Lengths of provided output descriptions do not match: output_dtype has {len(dtypes)} "
                           f"values and output_ndim {len(ndims)}, for {count} outputs")
    return dtypes, ndims


def check_outputs(batches, dtypes: list, ndims: list) -> None:
    """Raises, naming the output, where a batch has another element type or number of dimensions
    than its output must have (as in DALI)."""
    for index, (batch, dtype, ndim) in enumerate(zip(batches, dtypes, ndims)):
        shapes = batch.shape()
        if ndim is not None and shapes and len(shapes[0]) != ndim:
            raise RuntimeError(f"Number of dimensions in the output_idx={index} does not match. Expected: {ndim}. "
                               f"Received: {len(shapes[0])}.")
        if dtype is not None and shapes and batch.dtype != dtype:
            raise RuntimeError(f"Data type in the output_idx={index} does not match. Expected: {dtype}. "
                               f"Received: {batch.dtype}.")


def spec_text(spec: OutputSpec) -> str:
    parts = [str(spec.dtype) if spec.dtype is not None else "dtype from the data"]
    if spec.layout:
        parts.append(spec.layout)
    elif spec.ndim is not None:
        parts.append(f"{spec.ndim}-D")
    if spec.shape is not None:
        parts.append(f"shape {spec.shape}")
    elif spec.channels is not None:
        parts.append(f"{spec.channels} channels")
    return ", ".join(parts)


def _holds_node(items) -> bool:
    return any(isinstance(item, (DataNode, graph_module.Undefined)) or
               isinstance(item, (list, tuple)) and _holds_node(item) for item in items)


def constant_output(position: int, output):
    """An output as a DataNode: constants become constant batches (DALI's types.Constant)."""
    if isinstance(output, graph_module.Undefined):
        raise NameError(f"Pipeline: output {position}: {output.message}")
    if isinstance(output, DataNode):
        return output
    if isinstance(output, (list, tuple)) and _holds_node(output):
        raise TypeError(f"Illegal pipeline output type. The output {position} contains a nested `DataNode`. "
                        "Missing list/tuple expansion (*) is the likely cause.")
    value, dtype = (output.value, output.dtype) if isinstance(output, types.Constant) else (output, None)
    try:
        node = graph_module.constant_batch(value, dtype, device="cpu")
    except (TypeError, ValueError):
        node = None
    if not isinstance(node, DataNode):
        raise TypeError(f"Illegal output type. The output {position} is a `{type(output)}`: an output is a "
                        "DataNode (an operator's result) or a constant (a number, a list of numbers, an array)")
    return node
