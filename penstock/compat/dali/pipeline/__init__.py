"""``nvidia.dali.pipeline``: Pipeline, pipeline_def and DataNode are penstock's own."""
from penstock.graph import DataNode
from penstock.pipeline import Pipeline, pipeline_def


def do_not_convert(func=None):
    """Leaves a function as it is written when conditionals rewrite the user's code
    (penstock.conditionals): its `if` statements keep Python's meaning. As a decorator, with or
    without parentheses."""
    def mark(function):
        if getattr(function, "_is_pipeline_def", False):
            raise ValueError("Pipeline definition cannot be marked with @do_not_convert.")
        function._penstock_converted = True  # what penstock.conditionals.convert skips
        return function
    return mark if func is None else mark(func)


__all__ = ["DataNode", "Pipeline", "do_not_convert", "pipeline_def"]
