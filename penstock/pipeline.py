"""Pipeline: a graph of operators plus the executor that runs it, and the @pipeline_def decorator."""
from __future__ import annotations

import functools
import inspect
import numbers
import os
import threading
import weakref
from typing import Any, Callable

import numpy as np

from penstock import checkpoints, devices, distributed, optimize, registry, types
from penstock import graph as graph_module
from penstock.batch import Batch
from penstock.contract import (BatchOperator, BuildContext, EpochInfo, FedSource, LayoutNotKnown, OutputSpec, Reader,
                               SourceOperator)
from penstock.executor import Executor, IterationResult, Source, Step
from penstock.graph import DataNode, Graph
from penstock.kernels import cpu_image


class Pipeline:
    """A data pipeline: define it (``define_graph``, ``@pipeline_def`` or ``with pipe:``), ``build()``,
    then ``run()`` batch after batch.

    Args:
        batch_size: samples per batch.
        num_threads: CPU threads: up to 8 Python worker threads for per-sample work (more contend for
            the interpreter lock; see executor.MAX_PYTHON_WORKERS), and the size of native pools
            (nvImageCodec's CPU threads for GPU decoding). None (the default): the machine's cores,
            divided among the processes of a distributed job on it (one pipeline per GPU under
            torchrun gets its share, penstock.distributed). A 'mixed' decoder's automatic CPU share
            of large JPEGs (``cpu_decoder_load`` not given) is sized by those cores, not by
            num_threads, and gets that many workers where num_threads is smaller.
        device_id: the GPU for 'mixed' and 'gpu' operators; None builds a CPU-only pipeline.
        seed: seed of every random choice (shuffles, crops, random generators); -1 picks one at random.
            Outputs for a given seed do not depend on num_threads or prefetch_queue_depth.
        prefetch_queue_depth: batches prepared ahead of the one being consumed; a pipeline with GPU
            operators holds up to two more in its GPU stage (one decoding while the other's
            kernels run), as each DALI stage has buffers of its own, and two more in its CPU stage
            (host memory only), whose time per batch varies.
        exec_async, exec_pipelined: accepted for DALI compatibility; penstock always runs ahead in the
            background (set prefetch_queue_depth=1 for the least memory).
        exec_dynamic, experimental_exec_dynamic, stream_policy, concurrency, max_streams,
            default_cuda_stream_priority, bytes_per_sample, py_callback_pickler: accepted for DALI
            compatibility (how DALI's executor schedules its work and streams); penstock's executor
            moves data from the GPU back to the CPU only as outputs, whatever they say.
        set_affinity: accepted for DALI compatibility; threads are left to the OS scheduler, except
            those that wait in GPU decode calls, which keep off the CPUs that service the GPU's interrupts.
        py_num_workers, py_start_method: accepted for DALI compatibility; Python sources run in the
            pipeline's producer thread.
        gpu_fallback: on a machine without a usable GPU, run the 'mixed' and 'gpu' operators on the
            CPU after one GpuFallbackWarning (the default), or raise where they are called (False).
            Pipelines made with device_id=None are CPU-only and never fall back.
        worker_processes: run the per-sample CPU operators in num_threads forked worker processes
            instead of threads, so that their Python runs in parallel (where fork exists); they write
            their samples straight into the batch buffers, which live in memory shared with them.
            None (the default) chooses processes for every pipeline with per-sample CPU work (the
            GPU stage, or the training loop, then has this process's interpreter to itself), and
            threads when an operator runs the user's own code (python_function), which then runs
            beside the user's state in this process.
        on_error: what a sample that an operator fails on (a file that cannot be read or decoded)
            does: "raise" (the default) raises a PipelineError naming the file, the operator and the
            reason; "skip" leaves the sample out and refills its batch with the next sample of the
            same shard that no batch holds yet (the epoch then ends one sample sooner, and every
            other sample of it is still delivered once), and ``skipped()`` lists what was left out.
            A reader's batch keeps its size (padding where the epoch has no sample left for it)
            and holds at least one sample of its epoch: once no good sample of the epoch is left,
            the batch before is marked the epoch's last (``EpochInfo.last``), and the reader's
            remaining batches of that epoch are not handed out. An epoch whose every sample fails
            raises, naming the files. Fed data has no spare samples: the failed one is left out,
            the batch is one sample shorter, and a batch whose every sample fails raises. A
            pipeline with a reader cannot also take feed_input data under "skip". Failures found
            on the GPU stage still raise.
        timeout: seconds run() waits for a batch before raising TimeoutError, which says what the
            pipeline's producer thread is doing (an external_source callback that never returns,
            for example; that thread cannot be stopped while it is in the user's code). None or 0
            (the default, as in PyTorch's DataLoader): no limit.
        enable_checkpointing: record what ``checkpoint()`` needs (as in DALI; it costs nothing
            measurable). ``checkpoint``: a string from ``checkpoint()`` to resume from (or the
            bytes of its file, or the file's path as a pathlib.Path): the pipeline (of the same
            definition) then gives exactly the batches the checkpointed one would have given next,
            with its seed. Every field of it is checked at build; a damaged one raises a ValueError
            naming the checkpoint (its file) and the field. An external_source fed by an iterator cannot be
            checkpointed (it cannot be rewound): give it a callable taking the sample or batch info.
        enable_conditionals: let ``if``/``elif``/``else``, ``and``, ``or``, ``not`` and ``x if c else
            y`` in the pipeline's definition choose per sample, on CPU batches of scalar bools
            (penstock.conditionals; as in DALI).
        output_dtype, output_ndim: the element type (types.*) and number of dimensions each output
            must have, one for all outputs or a list with one per output (None: any); build()
            refuses lists of another length than the outputs, and run() raises a RuntimeError
            naming the output whose batch differs (as in DALI).
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
        check_pipeline_arguments(locals())
        if isinstance(prefetch_queue_depth, dict):  # DALI's separate depths: the CPU and GPU stages
            prefetch_queue_depth = max(prefetch_queue_depth.values())
        self._batch_size = int(batch_size)
        self._num_threads = distributed.default_threads() if num_threads is None else int(num_threads)
        self._device_id = None if device_id is None else int(device_id)
        self._seed = int(np.random.SeedSequence().entropy % (2**31)) if seed is None or seed == -1 else int(seed)
        self._prefetch_depth = int(prefetch_queue_depth)
        self._worker_processes = None if worker_processes is None else bool(worker_processes)
        self._on_error = on_error
        self._timeout = None if not timeout else float(timeout)
        self._enable_checkpointing = bool(enable_checkpointing)
        self._enable_conditionals = bool(enable_conditionals)
        self._restore_from = checkpoint  # read at build
        self._fingerprint = None
        self._graph = Graph(gpu_fallback=bool(gpu_fallback), cpu_only=device_id is None)
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
            flat = [_constant_output(position, node) for position, node in enumerate(outputs)]
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
            cpu_image.claim_opencv()
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
                                   weakref.proxy(self), _node_in_words(node), len(node.inputs), node)
            impl = cls(node.static_args, context)
            self._impls[node.index] = impl
            if isinstance(impl, SourceOperator):
                sources.append(Source(node.index, impl, len(node.outputs)))
            else:
                steps.append(Step(node.index, impl,
                                  tuple((dep.op_node.index, dep.index) for dep in node.inputs),
                                  {name: (dep.op_node.index, dep.index) for name, dep in node.arg_inputs.items()},
                                  len(node.outputs)))
        if not sources:  # operators without inputs only (transforms.*, random generators): a batch of nothing
            sources.append(self._empty_source())
        if restored is not None:
            checkpoints.restore_sources(restored, sources)
        self._output_specs = self._declare_outputs()
        optimize.let_decoders_shrink(nodes, self._impls, self._outputs)
        optimize.let_decoders_share_windows(self._impls)
        outputs = [(node.op_node.index, node.index) for node in self._outputs]
        device = None
        if any(isinstance(step.impl, BatchOperator) for step in steps):
            device = devices.torch_device(self._device_id)
        return Executor(sources, steps, outputs, self._output_layouts(), self._num_threads, self._prefetch_depth,
                        device, self._worker_processes, skip_failures=self._on_error == "skip",
                        timeout=self._timeout, checkpointing=self._enable_checkpointing or restored is not None,
                        start_iteration=restored.iteration if restored is not None else 0)

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
                lines.append(f"      output {position}: {_spec_text(self._node_specs[(node.index, position)])}")
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
            if not self._impls[node.index].extends_image_plan or not node.inputs:
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
        self._check_outputs(self._last_result.outputs)
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
        count = len(self._outputs)
        dtypes, ndims = ([value] * count if not isinstance(value, (list, tuple)) else list(value)
                         for value in (self._expected_dtype, self._expected_ndim))
        if not len(dtypes) == len(ndims) == count:
            raise RuntimeError(f"Lengths of provided output descriptions do not match: output_dtype has {len(dtypes)} "
                               f"values and output_ndim {len(ndims)}, for {count} outputs")
        return dtypes, ndims

    def _check_outputs(self, batches) -> None:
        if self._expected_dtype is None and self._expected_ndim is None:
            return
        for index, (batch, dtype, ndim) in enumerate(zip(batches, *self._output_descriptions())):
            shapes = batch.shape()
            if ndim is not None and shapes and len(shapes[0]) != ndim:
                raise RuntimeError(f"Number of dimensions in the output_idx={index} does not match. Expected: {ndim}. "
                                   f"Received: {len(shapes[0])}.")
            if dtype is not None and shapes and batch.dtype != dtype:
                raise RuntimeError(f"Data type in the output_idx={index} does not match. Expected: {dtype}. "
                                   f"Received: {batch.dtype}.")

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
        return {node.name: self._impls[node.index].engines for node in self._nodes} if self._executor else {}

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
            cpu_image.release_opencv()

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


PIPELINE_ARGS = tuple(name for name in inspect.signature(Pipeline.__init__).parameters if name != "self")


def _node_in_words(node) -> str:
    inputs = ", ".join(dep.name for dep in node.inputs)
    return f"{node.name} (of {inputs})" if inputs else node.name


def _spec_text(spec: OutputSpec) -> str:
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


def _integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _flag(value) -> bool:
    return isinstance(value, (bool, np.bool_)) or (_integer(value) and value in (0, 1))


def _depth(value) -> bool:
    if isinstance(value, dict):
        return set(value) <= {"cpu_size", "gpu_size"} and bool(value) and \
            all(_integer(depth) and depth >= 1 for depth in value.values())
    return _integer(value) and value >= 1


# What each pipeline argument takes: (test, what to say when it fails). As in DALI, -1 stands for
# "not given" in batch_size (which must then be given), device_id (the current GPU) and seed (a
# random one); num_threads not given (None) is every core, and -1 is refused as DALI refuses it.
PIPELINE_ARGUMENT_RULES = {
    "batch_size": (lambda v: _integer(v) and v >= 1, "a positive int (samples per batch)"),
    "num_threads": (lambda v: v is None or (_integer(v) and v >= 1),
                    "a positive int (CPU threads), or None for every core"),
    "device_id": (lambda v: v is None or (_integer(v) and v >= -1),
                  "a GPU index >= 0, -1 for the current GPU, or None for a CPU-only pipeline"),
    "seed": (lambda v: v is None or _integer(v), "an int (-1 or None: a random seed)"),
    "prefetch_queue_depth": (_depth, "a positive int, or a dict with 'cpu_size' and 'gpu_size'"),
    "exec_async": (_flag, "True or False"),
    "exec_pipelined": (_flag, "True or False"),
    "set_affinity": (_flag, "True or False"),
    "py_num_workers": (lambda v: _integer(v) and v >= 1, "a positive int"),
    "py_start_method": (lambda v: v in ("fork", "spawn"), "'fork' or 'spawn'"),
    "enable_memory_stats": (_flag, "True or False"),
    "worker_processes": (lambda v: v is None or _flag(v), "True, False or None (penstock chooses)"),
    "gpu_fallback": (_flag, "True or False"),
    "on_error": (lambda v: v in ("raise", "skip"), "'raise' or 'skip'"),
    "enable_checkpointing": (_flag, "True or False"),
    "enable_conditionals": (_flag, "True or False"),
    "checkpoint": (lambda v: v is None or isinstance(v, (str, bytes, bytearray, os.PathLike)),
                   "what pipe.checkpoint() returned (a str, or bytes read from its file), or the file's path "
                   "as a pathlib.Path"),
    "timeout": (lambda v: v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool) and v >= 0),
                "a number of seconds >= 0, or None (0 and None: no limit)"),
    "output_dtype": (lambda v: all(item is None or (isinstance(item, types.DALIDataType) and item != types.NO_TYPE)
                                   for item in (v if isinstance(v, (list, tuple)) else [v])),
                     "a type (types.UINT8, ...), a list of types and None, or None"),
    "output_ndim": (lambda v: all(item is None or (_integer(item) and item >= 0)
                                  for item in (v if isinstance(v, (list, tuple)) else [v])),
                    "an int >= 0, a list of ints and None, or None"),
}


def check_pipeline_arguments(arguments: dict, where: str = "Pipeline") -> None:
    """Raises, naming the argument and the value, when a pipeline argument is of the wrong type
    or out of range; ``arguments`` may hold other names (they are not checked here)."""
    for name, (test, expected) in PIPELINE_ARGUMENT_RULES.items():
        if name not in arguments:
            continue
        value = arguments[name]
        if name == "batch_size" and value == -1 and _integer(value):
            raise ValueError(f"{where}: argument 'batch_size' must be given (a positive int, samples per batch)")
        if not test(value):  # a value of the right type out of range is a ValueError
            right_type = isinstance(value, str) if name in ("py_start_method", "on_error") else \
                _integer(value) or isinstance(value, dict)
            raise (ValueError if right_type else TypeError)(f"{where}: argument '{name}' must be {expected}, "
                                                            f"got {value!r}")


def _holds_node(items) -> bool:
    return any(isinstance(item, (DataNode, graph_module.Undefined)) or
               isinstance(item, (list, tuple)) and _holds_node(item) for item in items)


def _constant_output(position: int, output):
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
                from penstock.schema import closest
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
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                              default=pipeline_kwargs.get(name, parameter.default))
            for name, parameter in inspect.signature(Pipeline.__init__).parameters.items()
            if name != "self" and name not in function_parameters]
        own_parameters = [p for p in function_parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
        keyword_only = [p for p in own_parameters if p.kind == inspect.Parameter.KEYWORD_ONLY]
        positional = [p for p in own_parameters if p.kind != inspect.Parameter.KEYWORD_ONLY]
        create.__signature__ = inspect.Signature(positional + keyword_only + pipeline_parameters)
        create._is_pipeline_def = True
        return create

    return decorate(fn) if fn is not None else decorate
