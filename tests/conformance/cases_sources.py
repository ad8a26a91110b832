"""external_source in its argument forms (batches and samples, callables, generator functions,
iterables and iterators with and without cycle, several outputs, declared layout, dtype and ndim)
and get_property (source info and layout of readers', decoders' and external_source's samples)."""
import numpy as np

from conformance.harness import Later, Node, Spec
from conformance.samples import image_tree, on_disk, paths

UNIFORM = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3) + i for i in range(3)]
RAGGED = [np.arange(6 * (i + 1), dtype=np.float32).reshape(i + 1, 2, 3) for i in range(3)]
BATCHES = [[np.full((2, 2), 10 * b + i, np.int32) for i in range(3)] for b in range(2)]  # an epoch of 2


def batch_source():
    return RAGGED


def batch_info_source(info):
    return [np.array([info.iteration, info.epoch_idx, i], np.int64) for i in range(3)]


def sample_source(info):
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int32)


def iteration_source(iteration):
    return [np.full((i + 1,), iteration, np.int16) for i in range(3)]


def two_outputs():
    return UNIFORM, RAGGED


def batches():
    yield from BATCHES


def mixed_dtypes():
    return [np.zeros(2, np.uint8), np.zeros(2, np.float32), np.zeros(2, np.uint8)]


def mixed_ndim():
    return [np.zeros(2, np.uint8), np.zeros((2, 2), np.uint8), np.zeros(2, np.uint8)]


SOURCES = {
    "ragged_callable": batch_source,
    "lambda": lambda: UNIFORM,
    "dense_array": lambda: np.stack(UNIFORM),
    "batch_info": batch_info_source,
    "iteration_number": iteration_source,
    "list_of_batches": BATCHES,
    "generator_function": batches,
    "iterator": Later(lambda: iter(BATCHES)),
    "mixed_dtypes": mixed_dtypes,
    "mixed_ndim": mixed_ndim,
    "scalars": lambda: [np.float32(i) for i in range(3)],
    "not_a_source": 5,
}

SPECS = [
    Spec("external_source", (), {"source": batch_source}, batch_size=3, iterations=2, grid={
        "source": SOURCES,
        "layout": ["ABC", "AB", ""],
        "dtype": {"FLOAT": "types.FLOAT", "UINT8": "types.UINT8", "list": ["types.FLOAT"]},
        "ndim": [3, 2],
        "batch": [True],
        "batch_info": [True, False],
        "blocking": [True, False],
        "no_copy": [True, False],
        "repeat_last": [True],
        "parallel": [False],
        "prefetch_queue_depth": [2],
        "use_copy_kernel": [False],
        "cycle": [True],
        "name": ["my_source"],
    }),
    Spec("external_source", (), {"source": batch_info_source, "batch_info": True}, name="external_source_batch_info",
         batch_size=3, iterations=2, grid={"batch": [True, False]}),
    Spec("external_source", (), {"source": sample_source, "batch": False}, name="external_source_samples",
         batch_size=3, iterations=2, grid={
             "dtype": ["types.INT32", "types.INT64"], "ndim": [1], "layout": ["X"], "batch_info": [True],
             "source": {"iteration_number": iteration_source, "list": BATCHES},
         }),
    Spec("external_source", (), {"source": BATCHES}, name="external_source_cycle", batch_size=3, iterations=3, grid={
        "cycle": [True, False, "no", "quiet", "raise", None, "sometimes"],
        "source": {"generator_function": batches, "iterator": Later(lambda: iter(BATCHES))},
    }),
    Spec("external_source", (), {"source": batches, "cycle": "quiet"}, name="external_source_generator_cycle",
         batch_size=3, iterations=3, grid={"cycle": ["raise", True]}),
    Spec("external_source", (), {"source": two_outputs, "num_outputs": 2}, name="external_source_outputs",
         batch_size=3, grid={
             "layout": [["ABC", "XYZ"], "ABC"],
             "dtype": [["types.UINT8", "types.FLOAT"], "types.UINT8"],
             "ndim": [[3, 3], 3],
             "num_outputs": [1, 3],
             "source": {"one_output": batch_source},
         }),
    Spec("get_property", (Node("readers.file", (), {"file_root": on_disk(image_tree, "root")}, output=0),),
         {"key": "source_info"}, batch_size=3, grid={
             "key": ["layout", "no_such_key"],
             "@input": {"decoded": (Node("decoders.image", (Node(
                 "readers.file", (), {"file_root": on_disk(image_tree, "root")}, output=0),)),),
                 "fed": (Node("external_source", (), {"source": lambda: UNIFORM, "layout": "HWC"}),),
                 "files": (Node("io.file.read", (Later(lambda: paths(image_tree()["names"][:3],
                                                                      image_tree()["root"])),)),)},
         }),
    Spec("get_property", (Node("external_source", (), {"source": lambda: UNIFORM, "layout": "HWC"}),),
         {"key": "layout"}, name="get_property_layout", batch_size=3,
         grid={"key": ["source_info"]}),
]

