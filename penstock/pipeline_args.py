"""Pipeline's arguments: one ``schema.Arg`` each (kind, default, range, doc), checked by
``Arg.convert`` as operator arguments are, and documented from the same tuple."""
from __future__ import annotations

import numbers
import os
import textwrap

import numpy as np

from penstock import schema, types
from penstock.schema import Arg, ArgError, ArgTypeError


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _whole(value):
    """An int, not a bool or a whole float: a pipeline's counts and indices are written as ints."""
    if _is_int(value):
        return int(value)
    raise ArgTypeError(f"expected an int, got {value!r}")


def _number(value):
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    raise ArgTypeError(f"expected a number, got {value!r}")


def _queue_depth(value):
    """An int, or DALI's separate depths of the CPU and GPU stages (a dict)."""
    if not isinstance(value, dict):
        if _whole(value) < 1:
            raise ArgError(f"expected a depth >= 1, got {value!r}")
        return int(value)
    if not value or not set(value) <= {"cpu_size", "gpu_size"} or not all(
            _is_int(depth) and depth >= 1 for depth in value.values()):
        raise ArgError(f"expected depths >= 1 under 'cpu_size' and 'gpu_size', got {value!r}")
    return value


def _checkpoint(value):
    if isinstance(value, (str, bytes, bytearray, os.PathLike)):
        return value
    raise ArgTypeError(f"expected a checkpoint, got {value!r}")


def _per_output(check):
    """One value for every output, or a list of them (None: any); kept as given, the outputs'
    count being known at build."""
    def convert(value):
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if item is not None:
                check(item)
        return value
    return convert


def _output_type(item):
    if not isinstance(item, types.DALIDataType) or item == types.NO_TYPE:
        raise ArgTypeError(f"expected a type, got {item!r}")


def _output_ndim(item):
    if _whole(item) < 0:
        raise ArgError(f"expected an int >= 0, got {item!r}")


# what a kind takes, in the words of the errors (kinds whose words do not follow from their range)
KIND_WORDS = {
    "any": "any value",
    "bool": "True or False",
    "queue_depth": "a positive int, or a dict with 'cpu_size' and 'gpu_size'",
    "checkpoint": "what pipe.checkpoint() returned (a str, or bytes read from its file), or the file's path "
                  "as a pathlib.Path",
    "output_types": "a type (types.UINT8, ...), or a list of types and None",
    "output_ndims": "an int >= 0, or a list of ints and None",
}
schema.CONVERTERS.update({"whole": _whole, "number": _number, "queue_depth": _queue_depth,
                          "checkpoint": _checkpoint, "output_types": _per_output(_output_type),
                          "output_ndims": _per_output(_output_ndim)})

_DALI = "Accepted for DALI compatibility"
_SCHEDULING = (f"{_DALI} (how DALI's executor schedules its work and streams); penstock's executor moves data "
               "from the GPU back to the CPU only as outputs, whatever it says.")

# In the order of Pipeline.__init__'s parameters, with its defaults. As in DALI, -1 stands for "not
# given" in batch_size (which must then be given), device_id (the current GPU) and seed (a random one).
PIPELINE_ARGUMENTS = (
    Arg("batch_size", "whole", -1, "Samples per batch.", min=1),
    Arg("num_threads", "whole", None, "CPU threads: up to 8 Python worker threads for per-sample work (more "
        "contend for the interpreter lock; see penstock.tuning, max_python_workers), and the size of native "
        "pools (nvImageCodec's CPU threads for GPU decoding). None (the default): the machine's cores, divided among "
        "the processes of a distributed job on it (one pipeline per GPU under torchrun gets its share, "
        "penstock.distributed). A 'mixed' decoder's automatic CPU share of large JPEGs (``cpu_decoder_load`` "
        "not given) is sized by those cores, not by num_threads, and gets that many workers where num_threads "
        "is smaller.", min=1, nullable=True),
    Arg("device_id", "whole", -1, "The GPU for 'mixed' and 'gpu' operators (-1: the current one); None builds "
        "a CPU-only pipeline.", min=-1, nullable=True),
    Arg("seed", "whole", -1, "Seed of every random choice (shuffles, crops, random generators); -1 or None "
        "picks one at random. Outputs for a given seed do not depend on num_threads or prefetch_queue_depth.",
        nullable=True),
    Arg("prefetch_queue_depth", "queue_depth", 2, "Batches prepared ahead of the one being consumed; a "
        "pipeline with GPU operators holds up to two more in its GPU stage (one decoding while the other's "
        "kernels run), as each DALI stage has buffers of its own, and two more in its CPU stage (host memory "
        "only), whose time per batch varies."),
    Arg("exec_async", "bool", True, f"{_DALI}; penstock always runs ahead in the background (set "
        "prefetch_queue_depth=1 for the least memory)."),
    Arg("exec_pipelined", "bool", True, f"{_DALI}, as exec_async."),
    Arg("set_affinity", "bool", False, f"{_DALI}; threads are left to the OS scheduler, except those that wait "
        "in GPU decode calls, which keep off the CPUs that service the GPU's interrupts."),
    Arg("py_num_workers", "whole", 1, f"{_DALI}; Python sources run in the pipeline's producer thread.", min=1),
    Arg("py_start_method", "str", "fork", f"{_DALI}, as py_num_workers.", choices=("fork", "spawn")),
    Arg("enable_memory_stats", "bool", False, f"{_DALI}."),
    Arg("worker_processes", "bool", None, "Run the per-sample CPU operators in num_threads forked worker "
        "processes instead of threads, so that their Python runs in parallel (where fork exists); they write "
        "their samples straight into the batch buffers, which live in memory shared with them. None (the "
        "default) chooses processes for every pipeline with per-sample CPU work (the GPU stage, or the "
        "training loop, then has this process's interpreter to itself), and threads when an operator runs the "
        "user's own code (python_function), which then runs beside the user's state in this process.",
        nullable=True),
    Arg("gpu_fallback", "bool", True, "On a machine without a usable GPU, run the 'mixed' and 'gpu' operators "
        "on the CPU after one GpuFallbackWarning (the default), or raise where they are called (False). "
        "Pipelines made with device_id=None are CPU-only and never fall back."),
    Arg("on_error", "str", "raise", "What a sample that an operator fails on (a file that cannot be read or "
        "decoded) does: 'raise' (the default) raises a PipelineError naming the file, the operator and the "
        "reason; 'skip' leaves the sample out and refills its batch with the next sample of the same shard "
        "that no batch holds yet (the epoch then ends one sample sooner, and every other sample of it is "
        "still delivered once), and ``skipped()`` lists what was left out. A reader's batch keeps its size "
        "(padding where the epoch has no sample left for it) and holds at least one sample of its epoch: once "
        "no good sample of the epoch is left, the batch before is marked the epoch's last "
        "(``EpochInfo.last``), and the reader's remaining batches of that epoch are not handed out. An epoch "
        "whose every sample fails raises, naming the files. Fed data has no spare samples: the failed one is "
        "left out, the batch is one sample shorter, and a batch whose every sample fails raises. A pipeline "
        "with a reader cannot also take feed_input data under 'skip'. Failures found on the GPU stage still "
        "raise.", choices=("raise", "skip")),
    Arg("timeout", "number", None, "Seconds run() waits for a batch before raising TimeoutError, which says "
        "what the pipeline's producer thread is doing (an external_source callback that never returns, for "
        "example; that thread cannot be stopped while it is in the user's code). None or 0 (the default, as "
        "in PyTorch's DataLoader): no limit.", min=0, nullable=True),
    Arg("enable_checkpointing", "bool", False, "Record what ``checkpoint()`` needs (as in DALI; it costs "
        "nothing measurable)."),
    Arg("checkpoint", "checkpoint", None, "A string from ``checkpoint()`` to resume from (or the bytes of its "
        "file, or the file's path as a pathlib.Path): the pipeline (of the same definition) then gives exactly "
        "the batches the checkpointed one would have given next, with its seed. Every field of it is checked "
        "at build; a damaged one raises a ValueError naming the checkpoint (its file) and the field. An "
        "external_source fed by an iterator cannot be checkpointed (it cannot be rewound): give it a callable "
        "taking the sample or batch info.", nullable=True),
    Arg("enable_conditionals", "bool", False, "Let ``if``/``elif``/``else``, ``and``, ``or``, ``not`` and ``x "
        "if c else y`` in the pipeline's definition choose per sample, on CPU batches of scalar bools "
        "(penstock.conditionals; as in DALI)."),
    Arg("exec_dynamic", "any", None, _SCHEDULING),
    Arg("experimental_exec_dynamic", "any", None, _SCHEDULING),
    Arg("stream_policy", "any", None, _SCHEDULING),
    Arg("concurrency", "any", None, _SCHEDULING),
    Arg("max_streams", "any", None, _SCHEDULING),
    Arg("default_cuda_stream_priority", "any", None, _SCHEDULING),
    Arg("bytes_per_sample", "any", 0, _SCHEDULING),
    Arg("py_callback_pickler", "any", None, _SCHEDULING),
    Arg("output_dtype", "output_types", None, "The element type (types.*) each output must have, one for all "
        "outputs or a list with one per output (None: any); build() refuses a list of another length than "
        "the outputs, and run() raises a RuntimeError naming the output whose batch differs (as in DALI).",
        nullable=True),
    Arg("output_ndim", "output_ndims", None, "The number of dimensions each output must have, as "
        "output_dtype.", nullable=True),
)
PIPELINE_ARGS = tuple(arg.name for arg in PIPELINE_ARGUMENTS)
_BY_NAME = {arg.name: arg for arg in PIPELINE_ARGUMENTS}


def takes(arg: Arg) -> str:
    """What an argument takes, in words: from its kind, range and choices."""
    if arg.choices:
        words = " or ".join(map(repr, arg.choices))
    elif arg.kind == "whole":
        words = "an int" if arg.min is None else "a positive int" if arg.min == 1 else f"an int >= {arg.min}"
    elif arg.kind == "number":
        words = "a number" if arg.min is None else f"a number >= {arg.min}"
    else:
        words = KIND_WORDS[arg.kind]
    return words + (", or None" if arg.nullable else "")


def check_pipeline_arguments(arguments: dict, where: str = "Pipeline") -> dict:
    """The pipeline arguments among ``arguments``, converted by their Arg; raises, naming the argument
    and the value, where one is of the wrong type (TypeError) or out of range (ValueError). Other
    names are left out (pipeline_def checks them)."""
    converted = {}
    for name, value in arguments.items():
        arg = _BY_NAME.get(name)
        if arg is None:
            continue
        if name == "batch_size" and _is_int(value) and value == -1:
            raise ValueError(f"{where}: argument 'batch_size' must be given (a positive int, samples per batch)")
        if value is None and arg.nullable:
            converted[name] = None
            continue
        try:
            converted[name] = arg.convert(value)
        except ArgError as error:
            raise (TypeError if isinstance(error, TypeError) else ValueError)(
                f"{where}: argument '{name}' must be {takes(arg)}, got {value!r}") from None
    return converted


def arguments_doc() -> str:
    """The Args section of Pipeline's docstring."""
    lines = ["    Args:"]
    for arg in PIPELINE_ARGUMENTS:
        lines.append(textwrap.fill(f"{arg.name} ({takes(arg)}; default {arg.default!r}): {arg.doc}", 100,
                                   initial_indent=" " * 8, subsequent_indent=" " * 12))
    return "\n".join(lines) + "\n"
