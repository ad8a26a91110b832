"""@pipeline_def: a function that calls operators, made into a factory of pipelines (the
definition side of Pipeline; the arguments it takes are checked by penstock.pipeline_args)."""
from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Callable

from penstock.pipeline_args import PIPELINE_ARGS, PIPELINE_ARGUMENTS, check_pipeline_arguments
from penstock.schema import closest

if TYPE_CHECKING:
    from penstock.pipeline import Pipeline


def pipeline_def(fn: Callable | None = None, **pipeline_kwargs):
    """Turns a function that calls operators into a pipeline factory.

    ``@pipeline_def(batch_size=32, num_threads=4, device_id=0, seed=1)`` on ``def pipe(data_dir): ...``
    makes ``pipe(data_dir, batch_size=64)`` return a Pipeline; pipeline arguments given at the call
    override the decorator's. The function returns the pipeline's outputs.
    """
    check_pipeline_arguments(pipeline_kwargs, "pipeline_def")  # here, where the mistake is written

    def decorate(func: Callable) -> Callable[..., Pipeline]:
        from penstock import conditionals
        from penstock.pipeline import Pipeline
        conditionals.check_pipeline_definition(func)
        function_parameters = inspect.signature(func).parameters
        variadic = [p.name for p in function_parameters.values() if p.kind == inspect.Parameter.VAR_KEYWORD]

        @functools.wraps(func)
        def create(*args, **kwargs) -> Pipeline:
            if variadic:  # it would take pipeline arguments of any name, added to Pipeline later or not
                raise TypeError(f"pipeline_def: using variadic keyword argument `**{variadic[0]}` in a "
                                f"graph-defining function is not allowed ({func.__name__})")
            # as DALI, names the decorator was given are checked when a pipeline is made
            unknown = sorted(set(pipeline_kwargs) - set(PIPELINE_ARGS))
            if unknown:
                raise TypeError(f"pipeline_def: unknown pipeline argument '{unknown[0]}'"
                                f"{closest(unknown[0], PIPELINE_ARGS)}")
            own = {name: kwargs.pop(name) for name in list(kwargs)
                   if name in PIPELINE_ARGS and name not in function_parameters}
            pipe = Pipeline(**{**pipeline_kwargs, **own})
            define = func
            if pipe._enable_conditionals:
                from penstock import conditionals
                define = conditionals.convert(func)
            with pipe:
                outputs = define(*args, **kwargs)
            if outputs is None:
                raise ValueError(f"pipeline_def: {func.__name__}() returned no outputs")
            pipe.set_outputs(*(outputs if isinstance(outputs, tuple) else (outputs,)))  # a list is one output
            return pipe

        pipeline_parameters = [
            inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, default=pipeline_kwargs.get(arg.name, arg.default))
            for arg in PIPELINE_ARGUMENTS if arg.name not in function_parameters]
        own_parameters = [p for p in function_parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
        keyword_only = [p for p in own_parameters if p.kind == inspect.Parameter.KEYWORD_ONLY]
        positional = [p for p in own_parameters if p.kind != inspect.Parameter.KEYWORD_ONLY]
        create.__signature__ = inspect.Signature(positional + keyword_only + pipeline_parameters)
        create._is_pipeline_def = True
        return create

    return decorate(fn) if fn is not None else decorate
