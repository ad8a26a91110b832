"""Readers: readers.file, coco, mxnet, numpy, webdataset and sequence over tiny data sets written to
pytest's temporary folder (samples.py), and io.file.read. Each reader's arguments are cases of one
batch of 3; its epochs, shards and shuffles run three batches over data sets of 4 to 7 samples, so
that epochs wrap and padding shows. With shuffling off, both libraries must read the same samples in
the same order; with it on, give the same statistics."""
import numpy as np

from conformance.harness import Close, Later, PerSample, Spec, Stats
from conformance.samples import (coco, f32, image_tree, numpy_files, on_disk, paths, recordio, sequences,
                                 webdataset)

SHUFFLED = Stats(mean_tol=20, std_tol=20, independent=False, shapes=False)
# arguments that tune how files are read and buffered, not what comes out
READING = {"dont_use_mmap": [True], "lazy_init": [True], "prefetch_queue_depth": [2], "read_ahead": [True],
           "skip_cached_images": [True], "tensor_init_bytes": [1024]}


def reader_specs(op, args, name=None, compare=Close(), grid=()):
    """A reader's cases: its own grid and the reading arguments; shards (with padding and sticking);
    shuffles (compared statistically)."""
    name = name or op
    return [
        Spec(op, (), args, name=name, compare=compare, batch_size=3, grid={**READING, **dict(grid)}),
        Spec(op, (), args, name=f"{name}_epochs", compare=compare, batch_size=3, iterations=3),
        Spec(op, (), {**args, "num_shards": 2, "shard_id": 1}, name=f"{name}_shards", compare=compare,
             batch_size=3, iterations=3, grid={
                 "shard_id": [0, 2], "num_shards": [3, 20], "pad_last_batch": [True], "stick_to_shard": [True],
             }, refused=("2", "20")),
        Spec(op, (), {**args, "random_shuffle": True, "initial_fill": 4}, name=f"{name}_shuffled",
             compare=SHUFFLED, batch_size=3, iterations=3, grid={
                 "initial_fill": [1, 100],
                 "random_shuffle": [False],
                 "shuffle_after_epoch": [True],
                 "shuffle_after_epoch_seed": [7],
             }),
    ]


IMAGES = on_disk(image_tree, "root")

SPECS = [
    *reader_specs("readers.file", {"file_root": IMAGES}, grid={
        "file_filters": [["*.png"], ["*.PNG"], "*.jpg"],
        "case_sensitive_filter": [True],
        "dir_filters": [["class1", "class2"]],
    }),
    Spec("readers.file", (), {"file_list": on_disk(image_tree, "list")}, name="readers.file_list", batch_size=3,
         iterations=3, grid={"file_root": {"root": IMAGES}}),
    Spec("readers.file", (), {"files": on_disk(image_tree, "names", lambda names: names[:5]), "file_root": IMAGES},
         name="readers.file_files", batch_size=3, iterations=3, grid={
             "labels": [[4, 3, 2, 1, 0], [1, 2]],
             "files": {"absolute": Later(lambda: [image_tree()["root"] + "/" + n for n in image_tree()["names"]])},
         }),
    *reader_specs("readers.mxnet", {"path": on_disk(recordio, "path"), "index_path": on_disk(recordio, "index_path")},
                  compare=Close(atol=0)),
    *reader_specs("readers.numpy", {"file_root": on_disk(numpy_files, "root")}, grid={
        "file_filter": ["array[13].npy", "*.npz.npy"],
        "cache_header_information": [True], "register_buffers": [False], "use_o_direct": [True],
    }),
    Spec("readers.numpy", (), {"files": on_disk(numpy_files, "names")}, name="readers.numpy_files", batch_size=3,
         iterations=2, grid={
             "file_list": {"list": on_disk(numpy_files, "list")},
             "file_root": {"root": on_disk(numpy_files, "root")},
         }),
    Spec("readers.numpy", (), {"file_root": on_disk(numpy_files, "root"), "file_filter": "array*.npy",
                               "roi_start": (1, 1), "roi_end": (3, 2)}, name="readers.numpy_roi", batch_size=3,
         grid={
             "roi_start": [PerSample(np.int32([0, 0]), np.int32([1, 0]), np.int32([2, 1]))],
             "roi_end": [PerSample(np.int32([2, 2]), np.int32([3, 3]), np.int32([4, 2]))],
             "roi_shape": [(2, 2), PerSample(np.int32([1, 1]), np.int32([2, 1]), np.int32([1, 2]))],
             "rel_roi_start": [(0.25, 0.0), PerSample(f32(0, 0), f32(0.5, 0.5), f32(0.2, 0.4))],
             "rel_roi_end": [(0.75, 1.0), PerSample(f32(1, 1), f32(0.8, 0.7), f32(0.5, 0.9))],
             "rel_roi_shape": [(0.5, 0.5), PerSample(f32(1, 1), f32(0.5, 0.5), f32(0.3, 0.6))],
             "roi_axes": [(1,), (1, 0)],
             "out_of_bounds_policy": ["pad", "trim_to_shape", "error"],
             "fill_value": [-1.0],
         }),
    Spec("readers.numpy", (), {"file_root": on_disk(numpy_files, "root"), "file_filter": "array*.npy",
                               "roi_start": (-1, 2), "roi_end": (3, 9), "out_of_bounds_policy": "pad"},
         name="readers.numpy_roi_out", batch_size=3, grid={
             "out_of_bounds_policy": ["trim_to_shape", "error"], "fill_value": [5.0],
         }),
    *reader_specs("readers.webdataset", {"paths": on_disk(webdataset, "path"), "ext": ["jpg", "bin"],
                                         "index_paths": on_disk(webdataset, "index_path")}, grid={
        "ext": [["cls"], ["jpg;bin", "cls"], ["JPG"]],
        "missing_component_behavior": ["skip", "fill", "error"],
        "dtypes": [["types.UINT8", "types.INT16"], ["types.UINT8", "types.UINT8"]],
        "case_sensitive_extensions": [False],
    }),
    Spec("readers.webdataset", (), {"paths": on_disk(webdataset, "path"), "ext": ["jpg"]},
         name="readers.webdataset_no_index", batch_size=3, iterations=2),
    *reader_specs("readers.sequence", {"file_root": on_disk(sequences, "root"), "sequence_length": 2}, grid={
        "sequence_length": [3, 6], "step": [2], "stride": [2],
        "image_type": ["types.GRAY", "types.BGR", "types.RGB"],
    }),
    *reader_specs("readers.coco", {"file_root": on_disk(coco, "root"),
                                   "annotations_file": on_disk(coco, "annotations")},
                  compare=Close(atol=6, rtol=1e-6), grid={
        "ltrb": [True], "ratio": [True], "image_ids": [True], "avoid_class_remapping": [True],
        "include_iscrowd": [False], "size_threshold": [0.01, 5.0], "skip_empty": [True],
        "polygon_masks": [True], "pixelwise_masks": [True],
        "images": {"two": Later(lambda: coco()["images"][1:3])},
        "save_preprocessed_annotations": [True],
        "save_preprocessed_annotations_dir": {"folder": Later(lambda: coco()["root"] + "/preprocessed")},
        "preprocessed_annotations": {"missing": Later(lambda: coco()["root"] + "/none")},
    }),
    Spec("io.file.read", (Later(lambda: paths(image_tree()["names"][:3], image_tree()["root"])),), {},
         grid={"dont_use_mmap": [True], "use_o_direct": [True],
               "@input": {"missing": (Later(lambda: paths(["nope.jpg"] * 3, image_tree()["root"])),)}}),
]
