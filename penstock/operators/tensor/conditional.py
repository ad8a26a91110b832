"""The two operators that conditionals add to a graph (penstock.conditionals): ``_split`` gives a
batch's samples whose predicate is true as its first output and the others as its second;
``_merge`` puts the two branches' results back in the samples' order.

On the CPU a sample runs alone (executor.samples), so a split is a choice per sample: the branch
not taken holds ``MISSING``, and the operators of a branch skip the samples whose inputs are
MISSING. On the GPU stage a branch is a smaller batch, with the positions of its samples in the
whole batch (executor.branches).
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry
from penstock.capabilities import RoutesSamples
from penstock.contract import MISSING, BatchOperator, SampleOperator
from penstock.schema import REQUIRED, Arg, OpSchema

PREDICATE = Arg("predicate", "any", REQUIRED, "Per sample, which branch it takes: true where not zero.",
                per_sample=True)
WHERE = Arg("where", "str", "", "The conditional's place in the pipeline function (file:line).")

registry.register_schema(OpSchema(
    name="_split", class_name="_Split", num_outputs=2, args=(PREDICATE, WHERE),
    doc="The samples whose predicate is true (output 0) and the others (output 1)."))
registry.register_schema(OpSchema(
    name="_merge", class_name="_Merge", num_inputs=(2, 2), input_names=("if_true", "if_false"),
    args=(PREDICATE, WHERE), doc="Each sample from the branch its predicate chose."))


def predicate_value(args: dict) -> bool:
    """The sample's predicate: a scalar of bool or of a numeric type, true where it is not zero (as
    DALI's `if` takes it)."""
    value = args.predicate
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return bool(value)
    array = np.asarray(value)
    what = f"an array of shape {array.shape}" if array.ndim else f"{value!r} ({type(value).__name__})"
    raise TypeError(f"the condition at {args.where} must be a scalar per sample (a comparison, "
                    f"fn.random.coin_flip(), a bool or a number; non-zero is true), as in DALI; got {what}")


class Routing(RoutesSamples):
    def build_notes(self):
        return [f"the conditional at {self.args.where}"]

    def predicates(self, args):
        return [predicate_value(sample_args) for sample_args in args]

    def samples_of(self, value):
        from penstock.operators.shared.gpu_plan import tensors_of
        return tensors_of(value)


@registry.register("_split", "cpu")
class Split(Routing, SampleOperator):
    routes_samples = "split"

    def declare_outputs(self, inputs):
        return (inputs[0], inputs[0])

    def run(self, inputs, args, sample, out=None):
        return (inputs[0], MISSING) if predicate_value(args) else (MISSING, inputs[0])


@registry.register("_merge", "cpu")
class Merge(Routing, SampleOperator):
    routes_samples = "merge"

    def declare_outputs(self, inputs):
        first, second = inputs
        if first.dtype is not None and second.dtype is not None and first.dtype != second.dtype:
            raise ValueError(f"_merge: the conditional at {self.args.where} leaves {first.dtype} in one branch "
                             f"and {second.dtype} in the other; a variable must keep its type in both branches")
        same = first == second
        return first if same else first.but(shape=first.shape if first.shape == second.shape else None,
                                            layout=first.layout if first.layout == second.layout else "",
                                            ndim=first.ndim if first.ndim == second.ndim else None,
                                            dtype=first.dtype or second.dtype,
                                            channels=first.channels if first.channels == second.channels else None)

    def run(self, inputs, args, sample, out=None):
        return inputs[0] if predicate_value(args) else inputs[1]


@registry.register("_split", "gpu", requires=devices.gpu_problem)
class SplitGpu(Routing, BatchOperator):
    """Runs on the GPU stage as executor.branches says (it never gets a batch of its own)."""

    routes_samples = "split"
    declare_outputs = Split.declare_outputs


@registry.register("_merge", "gpu", requires=devices.gpu_problem)
class MergeGpu(Routing, BatchOperator):
    routes_samples = "merge"
    declare_outputs = Merge.declare_outputs
