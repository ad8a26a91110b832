"""The graph a pipeline definition builds: DataNodes (symbolic batches) and the operators between.

Calling an operator (``fn.resize(images, ...)`` or an ``ops`` object) inside a pipeline definition
validates its arguments against the schema right there, checks device placement, and appends an
OpNode to the graph of the pipeline being defined.
"""
from __future__ import annotations

import itertools
import numbers
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from penstock import registry, types
from penstock.schema import Arguments, OpSchema

class DataNode:
    """A symbolic batch: the output ``index`` of an operator, living on ``device``."""

    _is_penstock_data_node = True

    def __init__(self, op_node: "OpNode", index: int, device: str, scope: "Scope | None" = None):
        self.op_node = op_node
        self.index = index
        self.device = device
        self.scope = scope  # the branch of a conditional whose samples alone it holds (None: all)

    @property
    def name(self) -> str:
        return f"{self.op_node.name}[{self.index}]"

    def gpu(self) -> "DataNode":
        """This batch copied to the GPU (itself when it is there already)."""
        if self.device == "gpu" or current_graph("gpu()").falls_back("_to_gpu", "mixed"):
            return self
        return invoke(registry.get_schema("_to_gpu"), (self,), {"device": "mixed"})

    def cpu(self) -> "DataNode":
        if self.device == "cpu":
            return self
        raise ValueError(f"{self.name}: data cannot move from the GPU back to the CPU inside a pipeline; "
                         "return it as an output instead")

    def __bool__(self):
        raise TypeError(f"{self.name} is a symbolic batch, not a value, so it has no truth value. To "
                        "choose per sample with `if`, `and`, `or` or `not`, make the pipeline with "
                        "enable_conditionals=True (@pipeline_def(enable_conditionals=True)); or use a "
                        "per-sample argument such as mirror=fn.random.coin_flip()")

    # one symbolic batch is not a sequence of anything: not Iterable (as DALI's), though it can be indexed
    __iter__ = None

    def shape(self, *, dtype=None, device: str = "cpu") -> "DataNode":
        """Each sample's shape, as a batch of 1-D arrays (int64 unless ``dtype``), as DALI's."""
        kwargs = {"device": device} if dtype is None else {"device": device, "dtype": dtype}
        return invoke(registry.get_schema("shapes"), (self,), kwargs)

    def property(self, key: str, *, device: str = "cpu") -> "DataNode":
        """A property of each sample ('source_info', 'layout') as 1-D uint8 arrays (fn.get_property)."""
        return invoke(registry.get_schema("get_property"), (self,), {"key": key, "device": device})

    def source_info(self, *, device: str = "cpu") -> "DataNode":
        return self.property("source_info", device=device)

    def __getitem__(self, subscripts) -> "DataNode":
        """Numpy-style indexing of every sample (operators/tensor/subscript.py): ints and per-sample
        DataNodes as indices, slices, and ``newaxis`` (or ``newaxis("Z")``, naming the new axis)."""
        return index_node(self, subscripts)

    def __repr__(self):
        return f"DataNode({self.name}, device='{self.device}')"

    # arithmetic: element-wise, per sample (operators/tensor/arithmetic.py); comparisons give bool batches,
    # so a DataNode is compared by identity only where penstock itself needs it (hash, `is`)
    def _arithmetic(self, other, op: str, constant_first: bool = False) -> "DataNode":
        schema = registry.get_schema("_arithmetic")
        if isinstance(other, DataNode):
            return invoke(schema, (other, self) if constant_first else (self, other), {"op": op})
        return invoke(schema, (self,), {"op": op, "constant": other, "constant_first": constant_first})

    __hash__ = object.__hash__
    def __add__(self, other):
        return self._arithmetic(other, "add")

    def __radd__(self, other):
        return self._arithmetic(other, "add", constant_first=True)

    def __sub__(self, other):
        return self._arithmetic(other, "sub")

    def __rsub__(self, other):
        return self._arithmetic(other, "sub", constant_first=True)

    def __mul__(self, other):
        return self._arithmetic(other, "mul")

    def __rmul__(self, other):
        return self._arithmetic(other, "mul", constant_first=True)

    def __truediv__(self, other):
        return self._arithmetic(other, "truediv")

    def __rtruediv__(self, other):
        return self._arithmetic(other, "truediv", constant_first=True)

    def __floordiv__(self, other):
        return self._arithmetic(other, "floordiv")

    def __rfloordiv__(self, other):
        return self._arithmetic(other, "floordiv", constant_first=True)

    def __mod__(self, other):
        return self._arithmetic(other, "mod")

    def __rmod__(self, other):
        return self._arithmetic(other, "mod", constant_first=True)

    def __pow__(self, other):
        return self._arithmetic(other, "pow")

    def __rpow__(self, other):
        return self._arithmetic(other, "pow", constant_first=True)

    def __eq__(self, other):
        return self._arithmetic(other, "eq")

    def __ne__(self, other):
        return self._arithmetic(other, "ne")

    def __lt__(self, other):
        return self._arithmetic(other, "lt")

    def __le__(self, other):
        return self._arithmetic(other, "le")

    def __gt__(self, other):
        return self._arithmetic(other, "gt")

    def __ge__(self, other):
        return self._arithmetic(other, "ge")

    def __and__(self, other):
        return self._arithmetic(other, "bitand")

    def __or__(self, other):
        return self._arithmetic(other, "bitor")

    def __xor__(self, other):
        return self._arithmetic(other, "bitxor")

    def __rand__(self, other):
        return self._arithmetic(other, "bitand", constant_first=True)

    def __ror__(self, other):
        return self._arithmetic(other, "bitor", constant_first=True)

    def __rxor__(self, other):
        return self._arithmetic(other, "bitxor", constant_first=True)

    def __pos__(self):
        return invoke(registry.get_schema("_arithmetic"), (self,), {"op": "plus"})

    def __neg__(self):
        return invoke(registry.get_schema("_arithmetic"), (self,), {"op": "neg"})

    def __abs__(self):
        return invoke(registry.get_schema("_arithmetic"), (self,), {"op": "abs"})


class NewAxis:
    """``newaxis`` in a DataNode's subscripts adds an axis of extent 1; ``newaxis("Z")`` names it."""

    def __init__(self, name: str | None = None):
        if name is not None and (not isinstance(name, str) or len(name) != 1):
            raise ValueError(f"newaxis: the name of a new axis is one character, got {name!r}")
        self.name = name

    def __call__(self, name: str | None = None) -> "NewAxis":
        return NewAxis(name)


newaxis = NewAxis()


def index_node(node: DataNode, subscripts) -> DataNode:
    """``node[subscripts]``: tensor_subscript for the indices and ranges, then expand_dims for new axes."""
    if not isinstance(subscripts, tuple):
        subscripts = (subscripts,)
    args, new_axes, new_names, axis = {}, [], [], 0
    for position, item in enumerate(subscripts):
        if isinstance(item, NewAxis):
            new_axes.append(position - len([a for a in args if a.startswith("at_")]))
            if item.name is not None:
                new_names.append(item.name)
            continue
        if item is Ellipsis:
            raise TypeError(f"{node.name}: `...` in a subscript is not supported (as in DALI); write the axes out")
        if item is None:  # as DALI: None is the whole axis
            pass
        elif isinstance(item, slice):
            for bound, value in zip(("lo", "hi", "step"), (item.start, item.stop, item.step)):
                if value is not None:
                    args[f"{bound}_{axis}"] = value
        elif isinstance(item, (DataNode, numbers.Integral)) or isinstance(item, np.ndarray) and item.ndim == 0:
            args[f"at_{axis}"] = item
        else:
            raise TypeError(f"{node.name}: a subscript is an int, a slice, a DataNode or newaxis, got "
                            f"{type(item).__name__}")
        axis += 1
    if new_names and len(new_names) != len(new_axes):
        raise ValueError(f"{node.name}: name every new axis or none")
    result = node
    if args or not (new_axes and isinstance(subscripts[-1], NewAxis)):
        result = invoke(registry.get_schema("tensor_subscript"), (node,), {**args, "num_subscripts": axis})
    if new_axes:
        expand = {"axes": new_axes, **({"new_axis_names": "".join(new_names)} if new_names else {})}
        result = invoke(registry.get_schema("expand_dims"), (result,), expand)
    return result


def constant_batch(value, dtype=None, shape=None, layout=None, device=None, **kwargs) -> DataNode:
    """A batch of ``value`` in every sample (fn.constant), as DALI's types.Constant makes one: Python
    floats as float32, ints as int32, numpy values with their own type, unless ``dtype``."""
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value, dtype=types._constant_type(value) if dtype is None else types.to_numpy_dtype(dtype))
    if shape is not None:
        shape = tuple(int(size) for size in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
        array = np.broadcast_to(array, shape) if array.size == 1 else array.reshape(shape)
    node = invoke(registry.get_schema("constant"), (), {"value": np.ascontiguousarray(array),
                                                        "dtype": array.dtype.name, "shape": array.shape,
                                                        "layout": layout or "", **kwargs})
    return node.gpu() if device == "gpu" else node


_serials = itertools.count()


@dataclass(eq=False)
class OpNode:
    """One operator call in a graph."""

    schema: OpSchema
    device: str
    static_args: dict[str, Any]
    inputs: tuple[DataNode, ...]
    arg_inputs: dict[str, DataNode]
    index: int
    outputs: tuple[DataNode, ...] = field(default=())
    placement: str = "given"  # why it runs on its device: "given", "the default" or "follows a GPU input"
    graph: "Graph | None" = None
    # the order of every call in this process: an operator is called after those it depends on, so
    # sorting by it orders the operators of graphs merged into one (Graph.adopt)
    serial: int = field(default_factory=lambda: next(_serials))

    @property
    def name(self) -> str:
        return self.static_args.get("name") or f"{self.schema.name}#{self.index}"

    def dependencies(self) -> list[DataNode]:
        return [*self.inputs, *self.arg_inputs.values()]


class Undefined:
    """What a variable holds after a conditional that set it in one branch only (penstock.conditionals)."""

    def __init__(self, name: str, where: str):
        self.message = (f"variable '{name}' is set in only one branch of the conditional at {where}, so it has "
                        "no value for the other branch's samples; set it in both branches (or before the `if`)")

    def __repr__(self):
        return f"<undefined: {self.message}>"


@dataclass(eq=False)
class Scope:
    """One branch of a conditional (``if`` on a per-sample predicate): the samples of the enclosing
    scope (``parent``, None for all) whose ``predicate`` is ``branch``. ``where`` names the line."""

    parent: "Scope | None"
    predicate: DataNode
    branch: bool
    where: str
    sibling: "Scope | None" = None  # the other branch of the same conditional
    splits: dict = field(default_factory=dict)  # id(node) -> (node, its part in this branch)

    def ancestors(self) -> list["Scope | None"]:
        chain, scope = [], self
        while scope is not None:
            chain.append(scope)
            scope = scope.parent
        return [*chain, None]


class GpuFallbackWarning(UserWarning):
    """A pipeline asked for the GPU on a machine without a usable one and runs on the CPU instead."""


class Graph:
    """The operators of one pipeline, in the order they were called (a valid execution order).

    ``gpu_fallback``: on a machine without a usable GPU, 'mixed' and 'gpu' operators become CPU
    operators (one warning per pipeline); ``cpu_only`` pipelines (device_id=None) never fall back.
    """

    def __init__(self, gpu_fallback: bool = False, cpu_only: bool = True, detached: bool = False):
        self.nodes: list[OpNode] = []
        # holds the operators called outside any pipeline's definition, until a pipeline adopts them
        self.detached = detached
        self.gpu_fallback = gpu_fallback
        self.cpu_only = cpu_only
        self._warned = False
        self.scope: Scope | None = None  # the branch being defined (penstock.conditionals)

    def bring(self, node: DataNode, scope: "Scope | None | str" = "current") -> DataNode:
        """``node`` restricted to the samples of ``scope`` (default: the branch being defined),
        split by each predicate on the way down from where it was made (a split shared by both
        branches of a conditional)."""
        scope = self.scope if scope == "current" else scope
        if node.scope is scope:
            return node
        if scope is None or node.scope not in scope.ancestors():
            made, used = node.scope.where if node.scope else "outside every branch", \
                scope.where if scope else "after the conditional"
            raise ValueError(f"{node.name} was made in a branch of the conditional at {made} and is used "
                             f"{'in another branch' if scope else ''} ({used}), where its samples do not exist")
        outer = self.bring(node, scope.parent)
        split = scope.splits.get(id(outer))
        if split is None:
            schema = registry.get_schema("_split")
            saved, self.scope = self.scope, scope.parent
            try:
                true_part, false_part = add_validated(schema, (outer,), *schema.validate(
                    {"predicate": scope.predicate, "where": scope.where, "device": outer.device}))
            finally:
                self.scope = saved
            split = (outer, true_part if scope.branch else false_part)
            scope.splits[id(outer)] = split
            scope.sibling.splits[id(outer)] = (outer, false_part if scope.branch else true_part)
            true_part.scope, false_part.scope = (scope, scope.sibling) if scope.branch else (scope.sibling, scope)
        return split[1]

    def falls_back(self, op_name: str, device: str) -> bool:
        """Whether ``op_name`` on ``device`` runs on the CPU instead (warning once if so)."""
        if device == "cpu" or not self.gpu_fallback or self.cpu_only or gpu_available():
            return False
        try:
            registry.implementation(op_name, device)
            return False
        except ValueError as error:
            reason = str(error)
        if op_name != "_to_gpu" and "cpu" not in registry.devices(op_name):
            return False
        if not self._warned:
            self._warned = True
            warnings.warn(f"{reason}. The 'mixed' and 'gpu' operators of this pipeline run on the CPU "
                          "instead, with the same results within the documented tolerances; pass "
                          "gpu_fallback=False to the pipeline to make this an error",
                          GpuFallbackWarning, stacklevel=4)
        return True

    def add(self, schema: OpSchema, device: str, static_args: dict, inputs: tuple, arg_inputs: dict) -> OpNode:
        node = OpNode(schema, device, static_args, inputs, arg_inputs, index=len(self.nodes), graph=self)
        if not self.detached:  # detached operators are found from the outputs that need them, or freed
            self.nodes.append(node)
        return node

    def adopt(self, outputs: list[DataNode]) -> None:
        """Takes into this graph the operators that ``outputs`` depend on and that were called outside
        any pipeline (as DALI allows); refuses those of another pipeline."""
        foreign, seen, stack = [], set(), [output.op_node for output in outputs]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.graph is not self:
                if not node.graph.detached:
                    raise ValueError(f"Pipeline: {node.name} belongs to another pipeline")
                foreign.append(node)
            stack.extend(dep.op_node for dep in node.dependencies())
        if not foreign:
            return
        for node in foreign:
            node.graph = self
        self.nodes = sorted([*self.nodes, *foreign], key=lambda node: node.serial)
        for index, node in enumerate(self.nodes):
            node.index = index

    def find(self, name: str) -> OpNode:
        for node in self.nodes:
            if node.static_args.get("name") == name:
                return node
        names = [node.static_args.name for node in self.nodes if node.static_args.get("name")]
        raise ValueError(f"no operator named '{name}' in this pipeline; named operators: "
                         f"{', '.join(names) or 'none (pass name=... to a reader)'}")

    def needed_nodes(self, outputs: list[DataNode]) -> list[OpNode]:
        """The operators the outputs depend on, and those without outputs (run for their side
        effects), in execution order."""
        needed: set[int] = set()
        stack = [output.op_node for output in outputs] + [node for node in self.nodes if not node.outputs]
        while stack:
            node = stack.pop()
            if node.index in needed:
                continue
            needed.add(node.index)
            stack.extend(dep.op_node for dep in node.dependencies())
        return [node for node in self.nodes if node.index in needed]


def gpu_available() -> bool:
    """Whether this machine runs GPU work (moving data to the GPU is the least of it)."""
    return "mixed" in registry.available_devices("_to_gpu")


_defining = threading.local()


def push_graph(graph: Graph) -> None:
    stack = getattr(_defining, "stack", None)
    if stack is None:
        stack = _defining.stack = []
    stack.append(graph)


def pop_graph() -> None:
    _defining.stack.pop()


def current_graph(op_name: str) -> Graph:
    """The graph of the pipeline being defined; outside any, the graph of operators that a pipeline
    adopts when given their outputs (set_outputs)."""
    stack = getattr(_defining, "stack", None)
    if stack:
        return stack[-1]
    detached = getattr(_defining, "detached", None)
    if detached is None:
        detached = _defining.detached = Graph(gpu_fallback=True, cpu_only=False, detached=True)
    return detached


def invoke(schema: OpSchema, inputs: tuple, kwargs: dict):
    """Validates a call of ``schema`` and adds it to the current graph; returns its output node(s).
    Without ``device``, an operator runs on the GPU when any of its data inputs is there (DALI's
    placement), else on the CPU. Lists of data nodes among the inputs are DALI's multiple input
    sets: one operator for each position of the lists."""
    input_sets = _input_sets(schema.name, tuple(inputs))
    if input_sets is not None:
        results = [invoke(schema, one_set, kwargs) for one_set in input_sets]
        return results[0] if len(results) == 1 else _output_sets(results)
    graph = current_graph(schema.name)
    inputs, kwargs = _argument_inputs(schema, tuple(inputs), kwargs)
    for value in (*inputs, *kwargs.values()):
        if isinstance(value, Undefined):
            raise NameError(f"{schema.name}: {value.message}")
    if graph.scope is not None:  # inside a branch: only the branch's samples of each input
        inputs = tuple(graph.bring(node) if isinstance(node, DataNode) else node for node in inputs)
        kwargs = {name: graph.bring(value) if isinstance(value, DataNode) else value
                  for name, value in kwargs.items()}
    placement = "given" if "device" in kwargs else "the default"
    if "device" not in kwargs and any(isinstance(node, DataNode) and node.device == "gpu" for node in inputs):
        kwargs, placement = {**kwargs, "device": "gpu"}, "follows a GPU input"
    static, per_sample = schema.validate(kwargs)
    schema.check_call(static, per_sample)
    inputs = tuple(value if isinstance(value, DataNode) else _constant_node(schema, position, value, static.device)
                   for position, value in enumerate(inputs))
    if schema.moves_cpu_inputs and static.device == "gpu":
        inputs = tuple(node.gpu() if isinstance(node, DataNode) and node.device == "cpu" else node for node in inputs)
    outputs = add_validated(schema, inputs, static, per_sample)
    if isinstance(outputs, tuple) and not outputs:  # python_function with num_outputs=0: as DALI's call
        return []
    first = outputs[0] if isinstance(outputs, tuple) else outputs
    if first.op_node.schema is schema and first.op_node.placement == "given":
        first.op_node.placement = placement
    if schema.output_names is not None:
        return dict(zip(schema.output_names(static), outputs if isinstance(outputs, tuple) else (outputs,)))
    if schema.listed_outputs_arg is not None and static.get(schema.listed_outputs_arg) is not None:
        return list(outputs) if isinstance(outputs, tuple) else [outputs]
    return outputs


def _input_sets(op_name: str, inputs: tuple) -> list[tuple] | None:
    """DALI's multiple input sets: where inputs are lists holding data nodes, the inputs of each
    operator, the other inputs repeated ([a, [x, y]] -> (a, x), (a, y)); None where there are none."""
    def is_set(value):
        return isinstance(value, list) and any(isinstance(item, DataNode) for item in value)
    lengths = {len(value) for value in inputs if is_set(value)}
    if not lengths:
        return None
    if len(lengths) > 1:
        raise ValueError(f"{op_name}: the lists of inputs (multiple input sets) have different lengths "
                         f"{sorted(lengths)}; give lists of one length")
    (count,) = lengths
    return [tuple(value[position] if is_set(value) else value for value in inputs) for position in range(count)]


def _output_sets(results: list) -> list:
    """The outputs of the operators of several input sets, as DALI groups them: a list of the
    operators' outputs where each has one, else one list per output position."""
    results = [list(result) if isinstance(result, (tuple, list)) else [result] for result in results]
    if len(results[0]) == 1:
        return [result[0] for result in results]
    return [[result[position] for result in results] for position in range(len(results[0]))]


def _argument_inputs(schema: OpSchema, inputs: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Positional inputs beyond the data inputs, as the per-sample arguments they stand for."""
    high = schema.num_inputs[1]
    if len(inputs) <= high or not schema.argument_inputs:
        return inputs, kwargs
    extra = inputs[high:]
    if len(extra) > len(schema.argument_inputs):
        raise TypeError(f"{schema.name}: expected at most {high + len(schema.argument_inputs)} inputs, got {len(inputs)}")
    kwargs = dict(kwargs)
    for name, value in zip(schema.argument_inputs, extra):
        if name in kwargs:
            raise TypeError(f"{schema.name}: '{name}' given as an input and as an argument; give it once")
        kwargs[name] = value
    return inputs[:high], kwargs


def _constant_node(schema: OpSchema, position: int, value, device: str):
    """A Python number, list or numpy array given as an operator's input: a constant batch, as
    DALI makes one (ints are int32, floats float32); anything else is refused by add_validated."""
    if isinstance(value, (str, bytes, dict)) or value is None or callable(value):
        return value
    if isinstance(value, types.Constant):
        array = np.asarray(value.value, dtype=value.dtype)
    else:
        try:
            array = np.asarray(value)
        except Exception:
            return value
        if array.dtype.kind not in "biuf":
            return value
        if array.dtype == np.float64 and not isinstance(value, np.ndarray):
            array = array.astype(np.float32)
        elif array.dtype == np.int64 and not isinstance(value, np.ndarray):
            array = array.astype(np.int32)
    node = invoke(registry.get_schema("constant"), (), {"value": array, "dtype": array.dtype.name,
                                                        "shape": array.shape})
    node = node.gpu() if device == "gpu" else node
    graph = current_graph(schema.name)
    return graph.bring(node) if graph.scope is not None else node


def add_validated(schema: OpSchema, inputs: tuple, static: dict, per_sample: dict):
    graph = current_graph(schema.name)
    low, high = schema.num_inputs
    if not low <= len(inputs) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise TypeError(f"{schema.name}: expected {expected} input(s), got {len(inputs)}")
    for position, node in enumerate(inputs):
        if not isinstance(node, DataNode):
            raise TypeError(f"{schema.name}: input {position} must be a DataNode (an operator's output), or a "
                            f"number or array (a constant); got {type(node).__name__}")
    device = static.device
    if graph.falls_back(schema.name, device):
        device = "cpu"
        static = static.replace(device=device)
    if device in schema.composed_devices and not registry.has_implementation(schema.name, device):
        def add(name: str, add_inputs: tuple, arguments: dict):
            """One operator of the composition: ``arguments`` as a user gives them (validated
            here), or an ``Arguments`` already validated (taken as they are)."""
            part = registry.get_schema(name)
            if isinstance(arguments, Arguments):
                return add_validated(part, add_inputs, part.arguments(arguments), {})
            part_static, part_per_sample = part.validate(arguments)
            part.check_call(part_static, part_per_sample)
            return add_validated(part, add_inputs, part_static, part_per_sample)
        return schema.composed(schema, static, per_sample, add)
    if schema.is_source and device == "gpu" and "gpu" not in registry.devices(schema.name) and gpu_available():
        # a source that only runs on the CPU, asked for on the GPU: read on the CPU, then moved
        outputs = add_validated(schema, inputs, static.replace(device="cpu"), per_sample)
        moved = tuple(output.gpu() for output in (outputs if isinstance(outputs, tuple) else (outputs,)))
        return moved[0] if len(moved) == 1 else moved
    registry.implementation(schema.name, device)  # raises here, where the user called, if unavailable
    for where, node in [*((f"input {i}", n) for i, n in enumerate(inputs)),
                        *((f"argument '{k}'", n) for k, n in per_sample.items())]:
        if node.device == "gpu" and device in ("cpu", "mixed"):
            raise ValueError(f"{schema.name}: {where} ({node.name}) is on the GPU but the operator runs on "
                             f"device '{device}'; data flows cpu -> mixed -> gpu, never back. Use "
                             f"device='gpu' or keep the producer on the CPU.")
    if device == "gpu" and any(node.device == "cpu" for node in inputs):
        raise ValueError(f"{schema.name}: runs on the GPU but its input is on the CPU; move it with "
                         f".gpu() or decode with device='mixed'")
    node = graph.add(schema, device, static, tuple(inputs), per_sample)
    output_device = "cpu" if device == "cpu" else "gpu"
    scope = graph.scope if node.dependencies() else None  # a source makes every sample
    node.outputs = tuple(DataNode(node, i, output_device, scope)
                         for i in range(schema.outputs_for(static, len(inputs))))
    return node.outputs[0] if len(node.outputs) == 1 else node.outputs
