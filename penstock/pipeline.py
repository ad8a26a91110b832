"""Pipeline: a graph of operators plus the executor that runs it, and the @pipeline_def decorator.
Its arguments are described in pipeline_args, what its outputs may be and must hold in
pipeline_outputs."""
from __future__ import annotations

import functools
import inspect
import threading
import weakref
from typing import Any, Callable

import numpy as np

from penstock import checkpoints, devices, distributed, frames, optimize, registry, tuning
from penstock import graph as graph_module
from penstock.batch import Batch
from penstock.capabilities import ImagePlanStep, ReportsEngines
from penstock.contract import (BatchOperator, BuildContext, EpochInfo, FedSource, LayoutNotKnown, OutputSpec, Reader,
                               SourceOperator)
from penstock.executor import Executor, IterationResult, Source, Step
from penstock.graph import DataNode, Graph
from penstock.pipeline_args import PIPELINE_ARGS, PIPELINE_ARGUMENTS, arguments_doc, check_pipeline_arguments
from penstock.pipeline_outputs import check_outputs, constant_output, output_descriptions, spec_text
from penstock.runtime import thread_settings
from penstock.schema import closest


class Pipeline:
    """A data pipeline: define it (``define_graph``, ``@pipeline_def`` or ``with pipe:``), ``build()``,
    then ``run()`` batch after batch. Its arguments are described (and checked) by
    penstock.pipeline_args.PIPELINE_ARGUMENTS, as listed below.
    """

    def __init__(self, batch_size: int = -1, num_threads: int | None = None, device_id: int | None = -1,
                 seed: int = -1, prefetch_queue_depth: int = 2, exec_async: bool = True,
                 exec_pipelined: bool = True, set_affinity: bool = False, py_num_workers: int = 1,
                 py_start_method: str = "fork", enable_memory_stats: bool = False, worker_processes: bool | None = None,
                 gpu_fallback: bool = True, on_error: str = "raise", timeout: float | None = None,
                 enable_checkpointing: bool = False, checkpoint: str | bytes | None = None,
                 enable_conditionals: bool = False, exec_dynamic: bool | None = None,
                 experimental_exec_dynamic: bool | None = None, stream_policy=None, concurrency=None,
                 max_streams: int | None = None, default_cuda_stream_priority: int | None = None,
                 bytes_per_sample: int = 0, py_callback_pickler=None, output_dtype=None, output_ndim=None):
        given = check_pipeline_arguments(locals())
        prefetch_queue_depth = given["prefetch_queue_depth"]
        if isinstance(prefetch_queue_depth, dict):  # DALI's separate depths: the CPU and GPU stages
            prefetch_queue_depth = max(prefetch_queue_depth.values())
        self._batch_size = given["batch_size"]
        self._num_threads = distributed.default_threads() if num_threads is None else given["num_threads"]
        self._device_id = given["device_id"]
        self._seed = int(np.random.SeedSequence().entropy % (2**31)) if seed is None or seed == -1 else given["seed"]
        self._prefetch_depth = prefetch_queue_depth
        self._worker_processes = given["worker_processes"]
        self._on_error = on_error
        self._timeout = given["timeout"] or None
        self._enable_checkpointing = given["enable_checkpointing"]
        self._enable_conditionals = given["enable_conditionals"]
        self._restore_from = checkpoint  # read at build
        self._fingerprint = None
        self._graph = Graph(gpu_fallback=given["gpu_fallback"], cpu_only=device_id is None)
        self._outputs: list[DataNode] | None = None
        self._given_outputs: tuple | None = None
        self._expected_dtype, self._expected_ndim = output_dtype, output_ndim  # checked at every run
        self._executor: Executor | None = None
        self._impls: dict[int, Any] = {}
        self._first_run = True
        self._feed_ended = False
        self._fed_runs = 0  # runs that used a fed batch (of every feed_input source)
        self._last_result: IterationResult | None = None
        self._build_lock = threading.Lock()
        self._claims_opencv = False
        # the numbers that tune speed and memory (penstock.tuning), given to the executor and every operator
        self._tuning = tuning.DEFAULT

    # ---- definition --------------------------------------------------------------------------
    def __enter__(self) -> "Pipeline":
        graph_module.push_graph(self._graph)
        return self

    def __exit__(self, *exc) -> None:
        graph_module.pop_graph()

    def define_graph(self):
        """Override in a subclass: call operators and return the outputs."""
        raise NotImplementedError("Pipeline: define the graph by overriding define_graph(), by decorating "
                                  "a function with @pipeline_def, or by calling set_outputs() inside `with pipe:`")

    def set_outputs(self, *outputs) -> None:
        """The pipeline's outputs: DataNodes (made in this pipeline's definition, or by operators
        called outside any pipeline, which then join this one), or constants (numbers, lists,
        arrays, types.Constant), each a batch of that value, as in DALI."""
        self._given_outputs = outputs  # taken when the pipeline is built, where DALI checks them

    def _take_outputs(self, outputs: tuple) -> None:
        with self:
            flat = [constant_output(position, node) for position, node in enumerate(outputs)]
        if not flat:
            raise ValueError("Pipeline: the pipeline has no outputs")
        self._graph.adopt(flat)
        self._outputs, self._given_outputs = flat, None

    def iter_setup(self) -> None:
        """Override in a subclass to feed inputs (``feed_input``) before each iteration."""

    # ---- building ------------------------------------------------------------------------------
    def build(self) -> None:
        with self._build_lock:
            if self._executor is not None:
                return
            if self._given_outputs is not None:
                self._take_outputs(self._given_outputs)
            elif self._outputs is None:
                define_graph = self.define_graph
                if self._enable_conditionals:
                    from penstock import conditionals
                    define_graph = conditionals.convert(type(self).define_graph).__get__(self)
                with self:
                    outputs = define_graph()
                self._take_outputs(tuple(outputs) if isinstance(outputs, (list, tuple)) else (outputs,))
            self._output_descriptions()  # the lengths checked before anything starts
            self._executor = self._make_executor()
            thread_settings.claim_threads()
            self._claims_opencv = True

    def _make_executor(self) -> Executor:
        nodes = self._graph.needed_nodes(self._outputs)
        self._nodes = nodes
        self._fingerprint = checkpoints.fingerprint(nodes, self._batch_size)
        restored = None
        if self._restore_from is not None:
            restored = checkpoints.load(self._restore_from, self._fingerprint)
            self._restore_from = restored  # read once: a file is not read again
            self._seed = restored.seed  # its random choices are those of the checkpointed pipeline
        sources, steps = [], []
        # operators are numbered for their seeds without the data movements (.gpu()) between them, so
        # that a pipeline makes the same random choices on the CPU and on the GPU
        seed_numbers = {node.index: number for number, node in
                        enumerate(n for n in self._graph.nodes if not n.schema.name.startswith("_"))}
        # the process's environment, read once here and handed to every operator
        machine = dict(cores=distributed.default_threads(), job=distributed.place(),
                       emulated_gpu=devices.emulating_gpu())
        for node in nodes:
            if node.device != "cpu" and (self._device_id is None):
                raise ValueError(f"{node.schema.name}: runs on device '{node.device}' but the pipeline was "
                                 "made with device_id=None (CPU only)")
            cls = registry.implementation(node.schema.name, node.device)
            op_seed = node.static_args.get("seed", -1)
            if op_seed is None or op_seed == -1:
                number = seed_numbers.get(node.index, node.index)
                op_seed = int(np.random.SeedSequence([self._seed, number]).generate_state(1, np.uint64)[0])
            # a weak reference: the executor's threads hold the implementations, and must not keep the
            # pipeline alive (its __del__ is what stops them when the user forgets close())
            context = BuildContext(self._batch_size, self._num_threads, self._device_id, op_seed,
                                   weakref.proxy(self), _node_in_words(node), len(node.inputs), node,
                                   tuning=self._tuning, **machine)
            impl = cls(node.static_args, context)
            self._impls[node.index] = impl
            if isinstance(impl, SourceOperator):
                sources.append(Source(node.index, impl, len(node.outputs)))
        if not sources:  # operators without inputs only (transforms.*, random generators): a batch of nothing
            sources.append(self._empty_source())
        if restored is not None:
            checkpoints.restore_sources(restored, sources)
        self._output_specs = self._declare_outputs()  # (operators given per-frame arguments are wrapped here)
        for node in nodes:
            impl = self._impls[node.index]
            if not isinstance(impl, SourceOperator):
                steps.append(Step(node.index, impl,
                                  tuple((dep.op_node.index, dep.index) for dep in node.inputs),
                                  {name: (dep.op_node.index, dep.index) for name, dep in node.arg_inputs.items()},
                                  len(node.outputs)))
        optimize.let_decoders_shrink(nodes, self._impls, self._outputs)
        optimize.let_decoders_share_windows(self._impls)
        outputs = [(node.op_node.index, node.index) for node in self._outputs]
        device = None
        if any(isinstance(step.impl, BatchOperator) for step in steps):
            device = devices.torch_device(distributed.gpu_of(self._device_id))
        return Executor(sources, steps, outputs, self._output_layouts(), self._num_threads, self._prefetch_depth,
                        device, self._worker_processes, skip_failures=self._on_error == "skip",
                        timeout=self._timeout, checkpointing=self._enable_checkpointing or restored is not None,
                        start_iteration=restored.iteration if restored is not None else 0, tuning=self._tuning)

    def _empty_source(self) -> Source:
        """A source of batch_size empty samples, which a graph of operators without inputs runs on."""
        schema = registry.get_schema("zeros")
        static, _ = schema.validate({})
        context = BuildContext(self._batch_size, self._num_threads, self._device_id, 0, weakref.proxy(self),
                               "the samples of a pipeline without a source")
        return Source(len(self._graph.nodes), registry.implementation("zeros", "cpu")(static, context), 1)

    def checkpoint(self, filename: str | None = None, iterator_state: dict | None = None) -> str:
        """The pipeline's state after the last batch run() returned, as a string (written to
        ``filename`` too when given); ``Pipeline(checkpoint=...)`` resumes from it (as in DALI).
        ``iterator_state``: what an iterator over the pipeline keeps with it (penstock.plugin)."""
        if not self._enable_checkpointing and self._restore_from is None:
            raise RuntimeError("checkpoint: make the pipeline with enable_checkpointing=True to take checkpoints")
        self.build()
        iteration, states = self._executor.checkpoint_state()
        text = checkpoints.dump(self._seed, iteration, self._fingerprint, states, iterator_state)
        if filename is not None:
            with open(filename, "w") as handle:
                handle.write(text)
        return text

    def restore(self, checkpoint) -> None:
        """Resumes from ``checkpoint`` (as ``Pipeline(checkpoint=...)`` does), before the first run()."""
        if self._executor is not None and self._executor.started:
            raise RuntimeError("restore: the pipeline has run already; restore a checkpoint into a new pipeline, "
                               "or before its first run()")
        if self._executor is not None:  # built, never started: built again from the checkpoint
            self._executor.shutdown()
            self._executor = None
            self._impls = {}
        self._restore_from = checkpoint
        self.build()

    @property
    def restored_iterator_state(self) -> dict | None:
        """The iterator state that came with the checkpoint this pipeline was restored from."""
        if self._restore_from is None:
            return None
        self.build()
        return self._restore_from.iterator

    @property
    def restored_from(self) -> str | None:
        """What the checkpoint this pipeline was restored from is called in errors ("checkpoint", or
        "checkpoint '<file>'"), or None."""
        if self._restore_from is None:
            return None
        self.build()
        return self._restore_from.where

    def _declare_outputs(self) -> list[OutputSpec]:
        """What each pipeline output holds, declared operator by operator from the sources on,
        before anything runs: inputs an operator cannot take fail here, naming it."""
        specs: dict[tuple[int, int], OutputSpec] = {}
        self._layout_wanted = []
        for node in self._nodes:
            inputs = tuple(specs[(dep.op_node.index, dep.index)] for dep in node.inputs)
            frame_args = frozenset(name for name, dep in node.arg_inputs.items()
                                   if specs[(dep.op_node.index, dep.index)].layout.startswith("F"))
            if frame_args and not self._impls[node.index].frame_args:
                # arguments given per frame (fn.per_frame): the operator runs frame by frame
                self._impls[node.index] = frames.framewise(self._impls[node.index], frame_args)
            try:
                declared = self._impls[node.index].declare_outputs(inputs)
            except LayoutNotKnown as error:
                if not self._uses_feed_input():
                    raise
                # as in DALI, the layout may come with the data (feed_input(..., layout=)): the
                # declaration is made again then, and run() refuses to start without it
                self._layout_wanted.append(error)
                declared = OutputSpec(None, None, "")
            if isinstance(declared, OutputSpec):
                declared = (declared,) * len(node.outputs)
            if len(declared) != len(node.outputs):
                raise RuntimeError(f"{node.name}: declared {len(declared)} outputs, has {len(node.outputs)}")
            for position, spec in enumerate(declared):
                specs[(node.index, position)] = spec
        self._node_specs = specs
        return [specs[(node.op_node.index, node.index)] for node in self._outputs]

    def describe(self) -> str:
        """The built pipeline in words: each operator in execution order with its device and why
        it runs there, what it declares to produce, and what was decided for it at build; then
        how the stages run."""
        self.build()
        lines = [f"pipeline: batch {self._batch_size}, num_threads {self._num_threads} (the stages line says what "
                 f"runs them), seed {self._seed}, device_id {self._device_id}"]
        for node in self._nodes:
            inputs = ", ".join(dep.name for dep in node.inputs) or "-"
            lines.append(f"  {node.name} on {node.device} ({node.placement}); inputs: {inputs}")
            for position in range(len(node.outputs)):
                lines.append(f"      output {position}: {spec_text(self._node_specs[(node.index, position)])}")
            for note in self._impls[node.index].build_notes():
                lines.append(f"      {note}")
        for chain in self._fused_image_chains():
            lines.append(f"  one kernel launch per batch: {' -> '.join(chain)}")
        lines.append(f"  stages: {self._executor.describe()}")
        return "\n".join(lines)

    def _fused_image_chains(self) -> list[list[str]]:
        """Runs of GPU image steps, each extending its input's image plan, that fuse into one
        kernel launch: a step joins its input's run when it is that output's only consumer and
        the output is not a pipeline output (otherwise the plan runs there)."""
        consumers: dict[tuple[int, int], int] = {}
        for node in self._nodes:
            for dep in node.inputs:
                key = (dep.op_node.index, dep.index)
                consumers[key] = consumers.get(key, 0) + 1
        outputs = {(node.op_node.index, node.index) for node in self._outputs}
        chains: dict[int, list[str]] = {}
        for node in self._nodes:
            if not isinstance(self._impls[node.index], ImagePlanStep) or not node.inputs:
                continue
            dep = node.inputs[0]
            key = (dep.op_node.index, dep.index)
            joined = dep.op_node.index in chains and consumers.get(key) == 1 and key not in outputs
            chain = chains.pop(dep.op_node.index) if joined else []
            chains[node.index] = chain + [node.name]
        return [chain for chain in chains.values() if len(chain) > 1]

    def _output_layouts(self) -> list[str]:
        return [spec.layout for spec in self._output_specs]

    @property
    def output_specs(self) -> list[OutputSpec]:
        """What each output holds (element type, dimensions, layout, shape when fixed), as declared
        before running."""
        self.build()
        return list(self._output_specs)

    # ---- running ----------------------------------------------------------------------------
    def run(self) -> tuple[Batch, ...]:
        """The next batch of every output, as a tuple of Batch."""
        self.build()
        feeds = self._uses_feed_input()
        if feeds:
            self._feed_ahead()
            self._check_fed()
            if self._layout_wanted:
                raise self._layout_wanted[0]
        self._last_result = self._executor.next()
        for index, (batch, node) in enumerate(zip(self._last_result.outputs, self._outputs)):
            batch.name = f"output {index} ({node.name})"
        if self._expected_dtype is not None or self._expected_ndim is not None:
            check_outputs(self._last_result.outputs, *self._output_descriptions())
        if feeds:
            self._fed_runs += 1
        return self._last_result.outputs

    def skipped(self, epoch: int | None = None) -> list:
        """What ``on_error="skip"`` left out of the batches of ``epoch`` handed out so far (default:
        the epoch of the last batch run() returned): one ``Skipped(source, operator, reason)`` per
        failed sample, in the order of the batches."""
        if self._executor is None:
            return []
        if epoch is None:
            info = self._last_result.epoch_info if self._last_result is not None else None
            epoch = info.epoch if info is not None else 0
        return self._executor.skipped(epoch)

    def _fed_sources(self) -> list[FedSource]:
        return [impl for impl in self._impls.values() if isinstance(impl, SourceOperator) and impl.fed]

    def _uses_feed_input(self) -> bool:
        return bool(self._fed_sources())

    def _feed_ahead(self) -> None:
        # the first run feeds the whole prefetch queue, as DALI does; later runs feed one batch.
        # Once iter_setup signalled the end, it is not called again before reset(): the pipeline
        # drains what was fed, then stops.
        if self._feed_ended:
            return
        rounds = self._prefetch_depth if self._first_run else 1
        self._first_run = False
        for _ in range(rounds):
            try:
                self.iter_setup()
            except StopIteration:
                self._feed_ended = True
                self._end_of_feed()
                return

    def _check_fed(self) -> None:
        """Raises, rather than waiting forever, when this run's batch was never fed."""
        if self._feed_ended:
            return
        for node in self._nodes:
            impl = self._impls[node.index]
            if isinstance(impl, SourceOperator) and impl.fed and not impl.has_data_for(self._fed_runs):
                raise RuntimeError(f"feed_input: no data was fed to {node.name} for iteration {self._fed_runs}; "
                                   "call pipe.feed_input() for it in iter_setup(), or before run()")

    def _end_of_feed(self) -> None:
        for impl in self._fed_sources():
            impl.feed_end()

    def feed_input(self, data_node: DataNode | str, data, layout: str | None = None, **kwargs) -> None:
        """Gives an external_source without ``source`` its data for one iteration."""
        self.build()
        node = self._graph.find(data_node) if isinstance(data_node, str) else data_node.op_node
        if not issubclass(registry.implementation(node.schema.name, node.device), FedSource):
            raise TypeError(f"feed_input: {node.name} is not an external_source")
        impl = self._impls.get(node.index)
        if impl is None:
            raise ValueError(f"feed_input: {node.name} is not used by the pipeline's outputs")
        if not impl.fed:
            raise TypeError(f"feed_input: {node.name} has a source of its own; feed_input is for an "
                            "external_source made without one")
        if layout is not None:  # declared again before the data goes in: operators find axes by name
            impl.name_layout(layout)
            self._output_specs = self._declare_outputs()
            self._executor.set_output_layouts(self._output_layouts())
        impl.feed(data)

    def reset(self) -> None:
        """After a source signalled its end (StopIteration), lets the pipeline start over."""
        if self._executor is None:
            return
        if self._feed_ended and self._executor.ended:
            # everything fed was consumed: the next run fills the prefetch queue again
            self._first_run, self._feed_ended = True, False
        self._executor.reset()

    @property
    def last_epoch_info(self) -> EpochInfo | None:
        """Epoch bookkeeping of the last batch run() returned (None for sources without epochs)."""
        return None if self._last_result is None else self._last_result.epoch_info

    def _reader(self, name: str | None):
        self.build()
        if name is not None:
            impl = self._impls.get(self._graph.find(name).index)
            if not isinstance(impl, Reader):
                raise ValueError(f"{name} has no epoch size: it is not a reader (or not used by the outputs)")
            return impl
        readers = [impl for impl in self._impls.values() if isinstance(impl, Reader)]
        if len(readers) != 1:
            raise ValueError(f"Pipeline: {len(readers)} readers in this pipeline; name one")
        return readers[0]

    def epoch_size(self, name: str | None = None):
        """Samples in the named reader's data set (all shards); with no name, a dict for every reader."""
        self.build()
        if name is None:
            return {node.static_args.get("name") or node.name: self._impls[node.index].epoch_size()
                    for node in self._graph.nodes if isinstance(self._impls.get(node.index), Reader)}
        return self._reader(name).epoch_size()

    def output_dtype(self) -> list:
        """The element type each output must have (None: any), as given by ``output_dtype``."""
        self.build()
        return self._output_descriptions()[0]

    def output_ndim(self) -> list:
        """The number of dimensions each output must have (None: any), as given by ``output_ndim``."""
        self.build()
        return self._output_descriptions()[1]

    def _output_descriptions(self) -> tuple[list, list]:
        return output_descriptions(self._expected_dtype, self._expected_ndim, len(self._outputs))

    def reader_meta(self, name: str | None = None) -> dict:
        """epoch_size, epoch_size_padded, number_of_shards, shard_id, pad_last_batch, stick_to_shard
        of the named reader; with no name, a dict of them for every reader (as DALI)."""
        self.build()
        if name is None:
            return {node.static_args.get("name") or node.name: self._impls[node.index].reader_meta()
                    for node in self._graph.nodes if isinstance(self._impls.get(node.index), Reader)}
        return self._reader(name).reader_meta()

    def engines(self) -> dict[str, list[str]]:
        """Per operator, which engines did its work so far, in words (decoders say CPU or GPU)."""
        impls = {node.name: self._impls[node.index] for node in self._nodes} if self._executor else {}
        return {name: impl.engines if isinstance(impl, ReportsEngines) else [] for name, impl in impls.items()}

    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent so far in each operator and stage (CPU operators summed over their threads or
        worker processes)."""
        return self._executor.stage_seconds() if self._executor is not None else {}

    def close(self) -> None:
        """Stops the background threads. The pipeline cannot run afterwards."""
        if self._executor is not None:
            self._executor.shutdown()
        if self._claims_opencv:
            self._claims_opencv = False
            thread_settings.release_threads()

    def __del__(self):
        if getattr(self, "_build_lock", None) is not None:  # __init__ ran to the end
            self.close()

    # ---- properties -----------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self._batch_size

    max_batch_size = batch_size

    @property
    def num_threads(self) -> int:
        return self._num_threads

    @property
    def device_id(self):
        return self._device_id

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def prefetch_queue_depth(self) -> int:
        return self._prefetch_depth


Pipeline.__doc__ = f"{Pipeline.__doc__.rstrip()}\n\n{arguments_doc()}"


def _node_in_words(node) -> str:
    inputs = ", ".join(dep.name for dep in node.inputs)
    return f"{node.name} (of {inputs})" if inputs else node.name


def pipeline_def(fn: Callable | None = None, **pipeline_kwargs):
    """Turns a function that calls operators into a pipeline factory.

    ``@pipeline_def(batch_size=32, num_threads=4, device_id=0, seed=1)`` on ``def pipe(data_dir): ...``
    makes ``pipe(data_dir, batch_size=64)`` return a Pipeline; pipeline arguments given at the call
    override the decorator's. The function returns the pipeline's outputs.
    """
    check_pipeline_arguments(pipeline_kwargs, "pipeline_def")  # here, where the mistake is written

    def decorate(func: Callable) -> Callable[..., Pipeline]:
        from penstock import conditionals
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
            inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY,
                              default=pipeline_kwargs.get(arg.name, arg.default))
            for arg in PIPELINE_ARGUMENTS if arg.name not in function_parameters]
        own_parameters = [p for p in function_parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
        keyword_only = [p for p in own_parameters if p.kind == inspect.Parameter.KEYWORD_ONLY]
        positional = [p for p in own_parameters if p.kind != inspect.Parameter.KEYWORD_ONLY]
        create.__signature__ = inspect.Signature(positional + keyword_only + pipeline_parameters)
        create._is_pipeline_def = True
        return create

    return decorate(fn) if fn is not None else decorate
