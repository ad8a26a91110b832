"""The sample runner: what a worker thread, or a forked worker process, runs for one sample (the
sources' load, every per-sample operator in graph order, the per-sample preparation of batch
operators), and how per-sample argument values become an operator's arguments."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from penstock.columns import BatchArgs
from penstock.contract import MISSING, SampleContext, WholeBatchOperator
from penstock.frames import PerFrame
from penstock.executor import branches
from penstock.executor.buffers import BufferPool
from penstock.executor.jobs import Job, StageTimes, as_tuple, call_operator
from penstock.executor.plan import PREPARED, ExecutionPlan, Step


class SampleRunner:
    """Computes one sample at a time from the plan. Given the sample's job, it writes the pipeline
    outputs straight into the job's batch buffers (taken from ``pools``, one per kept value);
    ``store`` does the same for values computed elsewhere (in a worker process)."""

    def __init__(self, plan: ExecutionPlan, pools: list[BufferPool], times: StageTimes):
        self.plan = plan
        self._pools = pools
        self._timer = times.of_this_thread

    def timings(self) -> dict:
        """The calling thread's stage times (stage -> seconds), which compute() adds to."""
        return self._timer()

    def request(self, job: Job, index: int) -> tuple:
        """What computing one sample of ``job`` needs: (source items, random draws, index, source info)."""
        source_info = job.source_infos[index] if job.source_infos else ""
        items = {key: job.source_items[key][index] for key in self.plan.source_keys}
        params = {key: (None if draws is None else draws[index]) for key, draws in job.params.items()}
        return items, params, index, source_info

    def compute(self, items: dict, params: dict, index: int, source_info: str, job: Job | None = None) -> list:
        """Every per-sample CPU step for one sample; returns the kept values in slot order. With
        ``job``, outputs are written straight into the job's batch buffers."""
        plan = self.plan
        values: dict[tuple[int, int], Any] = {}
        timings = self._timer()
        clock = time.perf_counter
        for key, source, num_outputs in plan.worker_sources:
            sample = SampleContext(index, source_info)
            started = clock()
            result = call_operator(source.name, source_info, source.load, items[key], sample)
            timings[source.name] += clock() - started
            for position, value in enumerate(result):
                values[(key, position)] = value
        routes = plan.routes  # empty without conditionals
        for step in plan.cpu_steps:
            inputs = tuple(values[ref] for ref in step.inputs)
            if routes and _not_on_branch(step, inputs, values, routes):
                for position in range(step.num_outputs):
                    values[(step.key, position)] = MISSING
                continue
            args = step.impl.args
            if step.arg_inputs:
                args = call_operator(step.impl.name, source_info, sample_args, step.impl, step.arg_inputs, values)
            sample = SampleContext(index, source_info, params[step.key])
            out = self._output_slot(job, step, inputs, args, index) if job is not None else None
            started = clock()
            result = as_tuple(call_operator(step.impl.name, source_info, step.impl.run, inputs, args, sample, out),
                              step.num_outputs)
            timings[step.impl.name] += clock() - started
            for position, value in enumerate(result):
                values[(step.key, position)] = value
        for step in plan.prepared_on_cpu:
            inputs = tuple(values[ref] for ref in step.inputs)
            if routes and _not_on_branch(step, inputs, values, routes):
                values[(step.key, PREPARED)] = MISSING
                continue
            args = step.impl.args
            if step.arg_inputs:
                args = call_operator(step.impl.name, source_info, sample_args, step.impl, step.arg_inputs, values)
            sample = SampleContext(index, source_info, params[step.key])
            started = clock()
            values[(step.key, PREPARED)] = call_operator(step.impl.name, source_info, step.impl.prepare, inputs,
                                                         args, sample)
            timings[f"{step.impl.name} (cpu part)"] += clock() - started
        return [values.get(ref) for ref in plan.kept]  # (None: made later, by a whole-batch operator)

    def store_computed(self, job: Job, index: int, kept: list) -> None:
        """Stores what compute() gave for a sample in the job (not the values read from the
        sources' items, which the job holds already)."""
        for slot in self.plan.computed_slots:
            job.values[slot][index] = kept[slot]

    def _output_slot(self, job: Job, step: Step, inputs: tuple, args: dict, index: int):
        """The sample's row of the batch buffer that ``step`` may write its output into, or None."""
        output_index = self.plan.dense_outputs.get(step.key)
        if output_index is None or job.ragged[output_index]:
            return None
        spec = step.impl.output_spec(inputs, args)
        if spec is None:
            return None
        shape, dtype = tuple(spec[0]), np.dtype(spec[1])
        buffer = self.batch_buffer(job, output_index, shape, dtype)
        if buffer.shape[1:] != shape or buffer.dtype != dtype:
            job.ragged[output_index] = True
            return None
        return buffer[index, ...]  # a view, also of a buffer of scalars (buffer[index] is a copy then)

    def batch_buffer(self, job: Job, slot: int, row_shape: tuple, dtype) -> np.ndarray:
        """The job's batch buffer of a kept value: made for rows of ``row_shape`` and ``dtype`` by
        the first caller (checked again under the lock), as it is for the others."""
        buffer = job.buffers[slot]
        if buffer is None:
            with job.lock:
                buffer = job.buffers[slot]
                if buffer is None:
                    buffer = job.buffers[slot] = self._pools[slot].acquire((job.size, *row_shape), dtype)
        return buffer

    def store_stacked(self, job: Job, slot: int, indices: list, stacked: np.ndarray) -> list | None:
        """The values of several samples computed in a worker process, one array [n, ...] of them:
        copied into their output's batch buffer at once; the samples' rows of it, or None where the
        value is not kept in a dense buffer."""
        if slot not in self.plan.dense_slots or job.ragged[slot]:
            return None
        buffer = self.batch_buffer(job, slot, stacked.shape[1:], stacked.dtype)
        if buffer.shape[1:] != stacked.shape[1:] or buffer.dtype != stacked.dtype:
            job.ragged[slot] = True
            return None
        buffer[indices] = stacked
        return [buffer[index, ...] for index in indices]

    def store(self, job: Job, slot: int, index: int, value):
        """A value computed in a worker process: copied into its output's batch buffer when dense."""
        if slot not in self.plan.dense_slots or job.ragged[slot] or not isinstance(value, np.ndarray):
            return value
        buffer = self.batch_buffer(job, slot, value.shape, value.dtype)
        if buffer.shape[1:] != value.shape or buffer.dtype != value.dtype:
            job.ragged[slot] = True
            return value
        buffer[index] = value
        return buffer[index, ...]


def run_whole_batch_steps(plan: ExecutionPlan, job: Job, times: StageTimes) -> None:
    """The whole-batch CPU operators of a batch whose per-sample work has finished, in graph
    order, each on the samples of its branch (MISSING elsewhere) when the pipeline has conditionals."""
    kept = plan.kept
    for step in plan.whole_batch_steps:
        impl = step.impl
        columns = [job.values[kept[ref]] for ref in step.inputs]
        arg_columns = {name: job.values[kept[ref]] for name, ref in step.arg_inputs.items()}
        where = branches.positions_of(columns[0]) if plan.has_branches and columns else None
        columns = [branches.present(column, where) for column in columns]
        count = job.size if where is None else len(where)
        args = batch_args(impl, {name: branches.present(column, where) for name, column in arg_columns.items()},
                          count) if arg_columns else [impl.args] * count
        started = time.perf_counter()
        params = branches.take(job.params[step.key], where)
        if isinstance(impl, WholeBatchOperator):
            result = as_tuple(call_operator(impl.name, "", impl.run_batch, columns, args, params), step.num_outputs)
        else:  # a per-sample operator after a whole-batch one (plan._after_whole_batch)
            result = _run_per_sample(impl, step, job, columns, args, params, where)
        times.of_this_thread()[impl.name] += time.perf_counter() - started
        for position, samples in enumerate(result):
            slot = kept.get((step.key, position))
            if slot is None:
                continue
            if where is not None:  # back in place among the samples of the other branch
                full = [MISSING] * job.size
                for index, sample in zip(where, samples):
                    full[index] = sample
                samples = full
            job.values[slot] = list(samples)


def _run_per_sample(impl, step: Step, job: Job, columns: list, args, params, where) -> tuple:
    """A per-sample operator's outputs for the samples of ``columns``, one sample after another."""
    outputs = [[] for _ in range(step.num_outputs)]
    for position in range(len(args)):
        index = position if where is None else where[position]
        source_info = job.source_infos[index] if job.source_infos else ""
        sample = SampleContext(index, source_info, None if params is None else params[position])
        result = as_tuple(call_operator(impl.name, source_info, impl.run, tuple(column[position] for column in columns),
                                        args[position], sample), step.num_outputs)
        for output, value in zip(outputs, result):
            output.append(value)
    return tuple(outputs)


def _not_on_branch(step: Step, inputs: tuple, values: dict, routes: dict[int, str]) -> bool:
    """Whether the sample is not on the branch of a conditional that ``step`` belongs to: one of its
    inputs is MISSING (a merge takes one MISSING input: the branch the sample did not take)."""
    if any(values[ref] is MISSING for ref in step.arg_inputs.values()):
        return True
    if routes.get(step.key) == "merge":
        return all(value is MISSING for value in inputs)
    return any(value is MISSING for value in inputs)


def sample_args(impl, arg_inputs: dict, values: dict) -> dict:
    """The operator's arguments for one sample, with its per-sample arguments filled in."""
    args = impl.args.replace()
    for name, ref in arg_inputs.items():
        args[name] = _per_sample_value(impl, name, values[ref])
    return args


def batch_args(impl, columns: dict, size: int) -> BatchArgs:
    """Each sample's arguments for a batch operator, its per-sample arguments (``columns``: name ->
    per-sample values) filled in. Numbers drawn per sample are converted for the whole column at
    once; other values are few per batch (a choice among some), each distinct one converted once."""
    per_sample, keys = {}, {}
    for name, column in columns.items():
        numbers = None if name in impl.frame_args else _numbers(impl.schema.all_args[name], column, size)
        if numbers is not None:
            per_sample[name] = numbers
            continue
        converted: dict = {}
        values, keys[name] = [], []
        for index in range(size):
            value = column[index]
            key = _value_key(value)
            if key not in converted:
                converted[key] = call_operator(impl.name, "", _per_sample_value, impl, name, value)
            values.append(converted[key])
            keys[name].append(key)
        per_sample[name] = values
    return BatchArgs(impl.args, size, per_sample, keys)


def _numbers(arg, column, size: int) -> np.ndarray | None:
    """A float or int argument's per-sample values as a float64 or int64 array (what
    ``arg.convert`` gives each), converted for the whole column; None where one of them needs the
    per-sample conversion (not one number per sample, out of range or not among the choices: that
    conversion says why)."""
    if arg.kind not in ("float", "int"):
        return None
    try:
        values = np.asarray(column)
    except (ValueError, TypeError):
        return None
    if values.dtype.kind not in "biuf" or values.size != size or (arg.scalar and values.ndim != 1):
        return None
    if arg.input_types and values.dtype not in arg.input_types:
        return None
    values = values.reshape(size)
    if arg.kind == "int":
        if values.dtype.kind == "f" and not (np.isfinite(values).all() and np.array_equal(values, np.floor(values))):
            return None
        values = values.astype(np.int64)
    else:
        values = values.astype(np.float64)
    if (arg.min is not None and (values < arg.min).any()) or (arg.max is not None and (values > arg.max).any()):
        return None
    if arg.choices and not set(values.tolist()) <= set(arg.choices):
        return None
    return values


def _value_key(value):
    """A hashable stand-in for a per-sample argument's value."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return type(value), value


def _per_sample_value(impl, name: str, value):
    """A per-sample argument's array, converted to the plain value the schema describes (of a
    per-frame argument, each frame's value: a PerFrame)."""
    if name in impl.frame_args:
        array = np.asarray(value)
        if array.ndim == 0:
            raise ValueError(f"per-frame argument '{name}': expected one value per frame (an array whose first axis "
                             "is the frames), got a scalar")
        return PerFrame(_converted_value(impl, name, frame) for frame in array)
    return _converted_value(impl, name, value)


def _converted_value(impl, name: str, value):
    arg = impl.schema.all_args[name]
    array = np.asarray(value)
    if arg.scalar and array.ndim != 0:
        raise ValueError(f"per-sample argument '{name}': expected one number (0-d) a sample, got shape {array.shape}")
    if arg.input_types and array.dtype not in arg.input_types:
        raise TypeError(f"per-sample argument '{name}': expected {' or '.join(np.dtype(t).name for t in arg.input_types)} "
                        f"values, got {array.dtype.name}")
    if arg.kind == "tensor":
        return array
    # one value stays a list for sequences and arrays of any shape (a 1x1 filter is not a number)
    plain = array.item() if array.ndim == 0 or (array.size == 1 and arg.kind not in ("floats", "ints", "any")) \
        else array.tolist()
    try:
        return arg.convert(plain)
    except ValueError as error:
        raise ValueError(f"per-sample argument '{name}': {error}") from None
