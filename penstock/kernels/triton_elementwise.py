"""One Triton kernel launch for a chain of element-wise operations on a ragged GPU batch
(``images * 0.5 + 1 > x``): the expression is compiled once per shape of the chain (its operations,
types and constants) into a kernel that reads every operand where it lies and writes each sample
once.

An expression is a tree of tuples: ``("leaf", i)`` is operand i, a batch of per-sample tensors
that each have the output sample's shape or hold one element (a per-sample scalar, broadcast);
``("const", value, dtype)`` a scalar constant; ``(op, dtype, child, ...)`` an operation computing
``dtype`` after converting its children as the operators do (penstock.numeric.promoted: the
operands of a comparison to their common type, of other operations to the result's).

Every sample has a row in a table of int64s: its element count, where it starts in the packed
output, and a pointer per operand (no gathering copy); programs run over (block of elements,
sample).
"""
from __future__ import annotations

import linecache

import numpy as np
import torch
import triton
import triton.language as tl  # noqa: F401  (the generated kernels' namespace)

from penstock import numeric
from penstock.batch import PackedBatch
from penstock.kernels.triton_launch import INTERPRETED, launch

BLOCK = 1024

# the operations the kernel computes, as Triton expressions of their converted operands a, b
BINARY = {
    "add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}",
    "truediv": "tl.div_rn({a}, {b})",
    "min": "tl.where({a} < {b}, {a}, {b})", "max": "tl.where({a} > {b}, {a}, {b})",  # DALI's, NaN included
    "eq": "{a} == {b}", "ne": "{a} != {b}", "lt": "{a} < {b}", "le": "{a} <= {b}", "gt": "{a} > {b}",
    "ge": "{a} >= {b}", "bitand": "{a} & {b}", "bitor": "{a} | {b}", "bitxor": "{a} ^ {b}",
}
FLOAT_UNARY = {"sqrt": "tl.sqrt_rn({a})", "rsqrt": "tl.div_rn(1.0, tl.sqrt_rn({a}))", "exp": "tl.exp({a})",
               "log": "tl.log({a})", "log2": "tl.log2({a})", "sin": "tl.sin({a})", "cos": "tl.cos({a})",
               "floor": "tl.floor({a})", "ceil": "tl.ceil({a})", "abs": "tl.abs({a})"}
FUSED = frozenset({*BINARY, "floordiv", "mod", "neg", *FLOAT_UNARY})

_TRITON_TYPES = {"bool": "tl.int1", "int8": "tl.int8", "int16": "tl.int16", "int32": "tl.int32",
                 "int64": "tl.int64", "uint8": "tl.uint8", "uint16": "tl.uint16", "uint32": "tl.uint32",
                 "uint64": "tl.uint64", "float16": "tl.float16", "float32": "tl.float32", "float64": "tl.float64"}
_kernels: dict = {}


def leaves_of(expression) -> list[int]:
    if expression[0] == "leaf":
        return [expression[1]]
    if expression[0] == "const":
        return []
    return [leaf for child in expression[2:] for leaf in leaves_of(child)]


def _source(expression, leaf_types: list[np.dtype], scalar_leaves: frozenset) -> str:
    """The kernel of an expression, as Python source."""
    lines, counter = [], [0]

    def name() -> str:
        counter[0] += 1
        return f"v{counter[0]}"

    def emit(node) -> tuple[str, np.dtype]:
        kind = node[0]
        if kind == "leaf":
            index = node[1]
            dtype = np.dtype(leaf_types[index])
            pointer = f"tl.load(row + {2 + index}).to(tl.pointer_type({_TRITON_TYPES[dtype.name]}))"
            variable = name()
            if index in scalar_leaves:
                lines.append(f"    {variable} = tl.load({pointer})")
            else:
                lines.append(f"    {variable} = tl.load({pointer} + elements, mask=active)")
            return variable, dtype
        if kind == "const":
            dtype = np.dtype(node[2])
            variable = name()
            value = bool(node[1]) if dtype.kind == "b" else repr(node[1].item() if hasattr(node[1], "item") else node[1])
            lines.append(f"    {variable} = tl.full((1,), {value}, {_TRITON_TYPES[dtype.name]})")
            return variable, dtype
        op, dtype = node[0], np.dtype(node[1])
        operands = [emit(child) for child in node[2:]]
        if op in ("eq", "ne", "lt", "le", "gt", "ge"):
            common = numeric.promoted(*[operand_type for _, operand_type in operands])
            converted = [_converted(value, operand_type, common) for value, operand_type in operands]
        else:
            converted = [_converted(value, operand_type, dtype) for value, operand_type in operands]
        variable = name()
        if op in BINARY:
            expression_text = BINARY[op].format(a=converted[0], b=converted[1])
        elif op == "neg":
            expression_text = f"-{converted[0]}"
        elif op in ("floor", "ceil", "abs") and dtype.kind != "f":
            expression_text = f"tl.abs({converted[0]})" if op == "abs" else converted[0]
        elif op in FLOAT_UNARY:
            expression_text = FLOAT_UNARY[op].format(a=converted[0])
        elif op == "floordiv":
            a, b = converted
            if dtype.kind == "f":
                expression_text = f"tl.floor(tl.div_rn({a}, {b}))"
            else:  # rounded down, as Python and numpy do (Triton's // truncates)
                lines.append(f"    q_{variable} = {a} // {b}")
                lines.append(f"    r_{variable} = {a} - q_{variable} * {b}")
                expression_text = f"q_{variable} - ((r_{variable} != 0) & ((r_{variable} < 0) != ({b} < 0))).to(q_{variable}.dtype)"
        elif op == "mod":
            a, b = converted
            if dtype.kind == "f":
                expression_text = f"{a} - tl.floor(tl.div_rn({a}, {b})) * {b}"
            else:  # the sign of the divisor, as Python and numpy
                lines.append(f"    r_{variable} = {a} - ({a} // {b}) * {b}")
                expression_text = f"r_{variable} + tl.where((r_{variable} != 0) & ((r_{variable} < 0) != ({b} < 0)), {b}, 0)"
        else:
            raise ValueError(f"'{op}' is not computed by the element-wise kernel")
        lines.append(f"    {variable} = ({expression_text})")
        return variable, np.dtype(np.bool_) if op in ("eq", "ne", "lt", "le", "gt", "ge") else dtype

    result, result_type = emit(expression)
    body = "\n".join(lines)
    return (f"def kernel(table, output, COLUMNS: tl.constexpr, BLOCK: tl.constexpr):\n"
            f"    sample = tl.program_id(1)\n"
            f"    row = table + sample * COLUMNS\n"
            f"    count = tl.load(row)\n"
            f"    elements = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)\n"
            f"    active = elements < count\n"
            f"{body}\n"
            f"    start = tl.load(row + 1)\n"
            f"    tl.store(output + start + elements, ({result}).to({_TRITON_TYPES[result_type.name]}) "
            f"+ tl.zeros((BLOCK,), {_TRITON_TYPES[result_type.name]}), mask=active)\n")


def _converted(value: str, dtype: np.dtype, target: np.dtype) -> str:
    return value if np.dtype(dtype) == np.dtype(target) else f"{value}.to({_TRITON_TYPES[np.dtype(target).name]})"


def _kernel(expression, leaf_types: list, scalar_leaves: frozenset):
    key = (repr(expression), tuple(np.dtype(t).name for t in leaf_types), scalar_leaves)
    kernel = _kernels.get(key)
    if kernel is None:
        source = _source(expression, leaf_types, scalar_leaves)
        filename = f"<penstock elementwise kernel {len(_kernels)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # Triton reads the source
        namespace = {"tl": tl, "triton": triton}
        exec(compile(source, filename, "exec"), namespace)
        kernel = _kernels[key] = triton.jit(namespace["kernel"])
    return kernel


def run_elementwise(expression, leaves: list[list], shapes: list[tuple], result_type: np.dtype, device, *,
                    upload) -> PackedBatch:
    """The expression over the batch: ``leaves[i]`` holds operand i's per-sample tensors (each of
    the sample's output shape in ``shapes``, or of one element), the result one PackedBatch.
    ``upload(device, arrays)``: the arrays as tensors on the device (runtime.pinned.to_device)."""
    count = len(shapes)
    sizes = [int(np.prod(shape)) for shape in shapes]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if count else np.zeros(0, np.int64)
    total = int(sum(sizes))
    from penstock.types import to_torch_dtype
    output = torch.empty(max(total, 1), dtype=to_torch_dtype(np.dtype(result_type)), device=device)
    if count == 0 or total == 0:
        return PackedBatch(output, [int(o) for o in offsets], list(shapes))
    leaf_indices = sorted(set(leaves_of(expression)))
    columns = 2 + len(leaves)
    table = np.zeros((count, columns), np.int64)
    table[:, 0] = sizes
    table[:, 1] = offsets
    kept = []  # the contiguous tensors whose addresses are in the table, alive until the launch
    scalar_leaves = set()  # operands of one element per sample, broadcast over the sample
    for index in leaf_indices:
        for sample, tensor in enumerate(leaves[index]):
            tensor = tensor if tensor.is_contiguous() else tensor.contiguous()
            kept.append(tensor)
            table[sample, 2 + index] = tensor.data_ptr()
        if all(tensor.numel() == 1 for tensor in leaves[index]):
            scalar_leaves.add(index)
    from penstock.types import to_numpy_dtype
    leaf_types = [to_numpy_dtype(column[0].dtype) if column else np.float32 for column in leaves]
    kernel = _kernel(expression, leaf_types, frozenset(scalar_leaves))
    table = upload(device, [table])[0]
    block = min(BLOCK, triton.next_power_of_2(max(sizes))) if INTERPRETED else BLOCK
    launch(kernel, (triton.cdiv(max(sizes), block), count), table, output, COLUMNS=columns, BLOCK=block)
    return PackedBatch(output, [int(o) for o in offsets], list(shapes))
