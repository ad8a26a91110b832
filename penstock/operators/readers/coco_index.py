"""readers.coco's index (CocoIndex): the flat arrays of a parsed annotations file, with the reader's
filters applied (parse_annotations), and saved to and read back from a folder of a JSON file and
.npy arrays of numbers."""
from __future__ import annotations

import json
import json.scanner
import os

import numpy as np

from penstock.operators.readers.coco_annotations import annotation_at, read_tables
from penstock.operators.readers.coco_masks import check_runs, rle_from_string
from penstock.operators.readers.numpy_reader import load_npy


INDEX_FILE = "penstock_coco_index.json"
INDEX_FORMAT = "penstock readers.coco index"
INDEX_VERSION = 1


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The indices start..start + count - 1 of every (start, count), concatenated."""
    total = int(counts.sum())
    ends = np.cumsum(counts)
    return np.arange(total) - np.repeat(ends - counts - starts, counts)


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def parse_annotations(path: str, args: dict) -> CocoIndex:
    """The index of a COCO instances file, with the reader's filters applied."""
    what = f"annotations_file '{path}'"
    (image_ids, names, widths, heights), labels_of, table = read_tables(path, args)
    by_id = np.argsort(image_ids, kind="stable")
    sorted_ids = image_ids[by_id]
    repeated = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if len(repeated):
        raise ValueError(f"readers.coco: {what} lists image {sorted_ids[repeated[0]]} twice")
    found = np.minimum(np.searchsorted(sorted_ids, table.image), max(len(sorted_ids) - 1, 0))
    unknown = np.flatnonzero(sorted_ids[found] != table.image) if len(sorted_ids) else np.arange(len(table.image))
    if len(unknown):
        raise ValueError(f"readers.coco: {what}: {annotation_at(path, int(unknown[0]))} is of image "
                         f"{table.image[unknown[0]]}, which the file does not list")
    row = by_id[found] if len(sorted_ids) else found  # each annotation's image, as its place in the file
    category_ids = np.array(sorted(labels_of), np.int64)
    at = np.minimum(np.searchsorted(category_ids, table.category), max(len(category_ids) - 1, 0))
    unknown = (np.flatnonzero(category_ids[at] != table.category) if len(category_ids)
               else np.arange(len(table.category)))
    if len(unknown):
        raise ValueError(f"readers.coco: {what}: {annotation_at(path, int(unknown[0]))} has category "
                         f"{table.category[unknown[0]]}, which is not among the categories {sorted(labels_of)}")
    label = np.array([labels_of[int(i)] for i in category_ids], np.int64)[at] if len(at) else at

    crowd = table.crowd & (not args.include_iscrowd)
    small = ~crowd & ((table.box[:, 2] < args.size_threshold) | (table.box[:, 3] < args.size_threshold))
    skipped = {"small_objects": int(small.sum()), "crowd_objects": int(crowd.sum()), "empty_images": 0}
    if args.images is not None:
        by_name = dict(zip(names, range(len(names))))
        unknown_names = [name for name in args.images if name not in by_name]
        if unknown_names:
            raise ValueError(f"readers.coco: 'images' names {len(unknown_names)} images that '{path}' does not "
                             f"list, such as {unknown_names[0]!r}")
        chosen = np.array([by_name[name] for name in args.images], np.int64)
    else:
        chosen = by_id
    wanted = np.zeros(len(names), bool)
    wanted[chosen] = True
    kept = np.flatnonzero(~crowd & ~small & wanted[row])
    objects = kept[np.argsort(row[kept], kind="stable")]  # grouped by image, in file order within one
    object_row = row[objects]
    object_begin = _offsets(np.bincount(object_row, minlength=len(names)))
    if args.skip_empty:
        nonempty = object_begin[chosen + 1] > object_begin[chosen]
        skipped["empty_images"] = int((~nonempty).sum())
        chosen = chosen[nonempty]
    arrays = {"heights": heights[chosen], "widths": widths[chosen], "ids": image_ids[chosen],
              "objects": np.stack([object_begin[chosen], object_begin[chosen + 1]], 1),
              "boxes": table.box[objects].astype(np.float32), "labels": label[objects].astype(np.int32)}
    arrays.update(_polygon_arrays(table, objects, object_row, object_begin, chosen, len(names))
                  if args.polygon_masks or args.pixelwise_masks else _no_polygons(len(chosen)))
    arrays.update(_run_length_arrays(table, objects, object_row, object_begin, chosen, heights, widths, what))
    masks = {"polygons": bool(args.polygon_masks or args.pixelwise_masks),
             "run_lengths": bool(args.pixelwise_masks)}
    return CocoIndex([names[i] for i in chosen.tolist()], skipped, masks, **arrays)


def _no_polygons(samples: int) -> dict:
    empty = np.zeros((samples, 2), np.int64)
    return {"polygon_rows": empty, "vertex_rows": empty, "polygons": np.zeros((0, 3), np.int32),
            "vertices": np.zeros((0, 2), np.float32)}


def _polygon_arrays(table, objects, object_row, object_begin, chosen, images: int) -> dict:
    """The kept objects' polygons, grouped by image as the objects are: per polygon its object's
    number within the image and its vertex range within the image's vertices."""
    counts = table.polygon_count[objects]
    polygons = _ranges(_offsets(table.polygon_count)[objects], counts)  # their rows in the file's polygons
    vertex_counts = table.vertex_count[polygons]
    vertices = table.vertices[_ranges(_offsets(table.vertex_count)[polygons], vertex_counts)]
    owner = np.repeat(np.arange(len(objects)), counts)
    polygon_row = object_row[owner]
    polygon_begin = np.searchsorted(polygon_row, np.arange(images + 1))
    vertex_offsets = _offsets(vertex_counts)
    vertex_begin = vertex_offsets[polygon_begin]
    first = vertex_offsets[:-1] - vertex_begin[polygon_row]
    return {"polygon_rows": np.stack([polygon_begin[chosen], polygon_begin[chosen + 1]], 1),
            "vertex_rows": np.stack([vertex_begin[chosen], vertex_begin[chosen + 1]], 1),
            "polygons": np.stack([owner - object_begin[polygon_row], first, first + vertex_counts], 1).astype(np.int32),
            "vertices": vertices}


def _run_length_arrays(table, objects, object_row, object_begin, chosen, heights, widths, what: str) -> dict:
    """The kept objects' run-length masks, grouped by image: per mask its object's number within the
    image and its runs, checked against the image's size."""
    place = np.full(len(table.image), -1, np.int64)
    place[objects] = np.arange(len(objects))
    entries = sorted((int(place[row]), name, segment) for row, name, segment in table.run_lengths if place[row] >= 0)
    numbers, runs = [], []
    for index, name, segment in entries:
        image = int(object_row[index])
        runs.append(_run_lengths(segment, int(heights[image]), int(widths[image]), f"{what}: {name}"))
        numbers.append(index - object_begin[image])
    rows = object_row[[index for index, _, _ in entries]] if entries else np.zeros(0, np.int64)
    begin = np.searchsorted(rows, np.arange(len(heights) + 1))
    return {"rle_rows": np.stack([begin[chosen], begin[chosen + 1]], 1),
            "rle_objects": np.array(numbers, np.int32),
            "rle_count_offsets": _offsets(np.array([len(r) for r in runs], np.int64)),
            "rle_counts": np.concatenate(runs) if runs else np.zeros(0, np.int64)}


def _run_lengths(segment: dict, height: int, width: int, name: str) -> np.ndarray:
    counts, size = segment.get("counts"), segment.get("size")
    if counts is None or size is None or size != [height, width]:
        raise ValueError(f"readers.coco: {name} has a run-length mask of size {size} for an image of "
                         f"{height} x {width}")
    try:
        if isinstance(counts, str):
            runs = np.array(rle_from_string(counts), np.int64)
        elif isinstance(counts, list) and all(type(count) is int for count in counts):
            runs = np.array(counts, np.int64) if counts else np.zeros(0, np.int64)
        else:
            raise ValueError("its counts are neither a string nor a list of integers")
        check_runs(runs, height, width)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"readers.coco: {name} has a run-length mask that is wrong: {error}") from None
    return runs


# ---- the index ------------------------------------------------------------------------------------
class CocoIndex:
    """Flat arrays of a parsed annotations file. Per sample i: ``files[i]``, ``heights``/``widths``,
    ``ids``, and [begin, end) row ranges: ``objects[i]`` of ``boxes`` (float32 x, y, width, height
    in pixels) and ``labels``; ``polygon_rows[i]`` of ``polygons`` (object number within the image,
    first and end vertex within the image's vertices); ``vertex_rows[i]`` of ``vertices`` (float32
    pixels); ``rle_rows[i]`` of ``rle_objects`` (object number), whose runs are
    ``rle_counts[rle_count_offsets[r]:rle_count_offsets[r + 1]]``. A sample's rows are a slice of
    the arrays; an image listed twice in ``images`` is two samples sharing theirs. ``masks`` says
    whether the polygons and the run-length masks were parsed."""

    ARRAYS = {"heights": (np.int64, 1), "widths": (np.int64, 1), "ids": (np.int64, 1), "objects": (np.int64, 2),
              "boxes": (np.float32, 2), "labels": (np.int32, 1), "polygon_rows": (np.int64, 2),
              "polygons": (np.int32, 2), "vertex_rows": (np.int64, 2), "vertices": (np.float32, 2),
              "rle_rows": (np.int64, 2), "rle_objects": (np.int32, 1), "rle_count_offsets": (np.int64, 1),
              "rle_counts": (np.int64, 1)}
    # per sample, the rows of which array it owns
    RANGES = {"objects": "boxes", "polygon_rows": "polygons", "vertex_rows": "vertices", "rle_rows": "rle_objects"}

    def __init__(self, files: list, skipped: dict, masks: dict, **arrays):
        self.files, self.skipped, self.masks = files, skipped, masks
        for name in self.ARRAYS:
            setattr(self, name, arrays[name])

    def save(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        for name, (dtype, _) in self.ARRAYS.items():
            np.save(os.path.join(folder, f"{name}.npy"), np.ascontiguousarray(getattr(self, name), dtype),
                    allow_pickle=False)
        with open(os.path.join(folder, INDEX_FILE), "w") as handle:  # last: its arrays are there before it is
            json.dump({"format": INDEX_FORMAT, "version": INDEX_VERSION, "masks": self.masks,
                       "skipped": self.skipped, "files": self.files}, handle)

    @classmethod
    def load(cls, folder: str) -> CocoIndex:
        """The index saved in ``folder``, checked: a JSON file and arrays of numbers of the types
        and shapes ``save`` writes, whose row ranges lie within the arrays. Nothing is unpickled: an
        array of objects (or any pickle) is refused, naming its file."""
        path = os.path.join(folder, INDEX_FILE)
        what = f"preprocessed_annotations '{folder}'"
        try:
            with open(path, "rb") as handle:
                meta = json.loads(handle.read())
        except OSError as error:
            raise FileNotFoundError(f"readers.coco: cannot read preprocessed annotations '{path}': "
                                    f"{error.strerror or error}") from None
        except ValueError as error:
            raise ValueError(f"readers.coco: {what}: '{path}' is not JSON: {error}") from None
        if not (isinstance(meta, dict) and meta.get("format") == INDEX_FORMAT and meta.get("version") == INDEX_VERSION
                and isinstance(meta.get("files"), list) and all(type(name) is str for name in meta["files"])
                and isinstance(meta.get("skipped"), dict) and isinstance(meta.get("masks"), dict)):
            raise ValueError(f"readers.coco: {what}: '{path}' is not an index that save_preprocessed_annotations "
                             f"wrote (version {INDEX_VERSION})")
        arrays = {name: _index_array(folder, name, dtype, ndim, what) for name, (dtype, ndim) in cls.ARRAYS.items()}
        _check_index(arrays, len(meta["files"]), folder, what)
        masks = {key: bool(meta["masks"].get(key)) for key in ("polygons", "run_lengths")}
        return cls(meta["files"], dict(meta["skipped"]), masks, **arrays)


def _index_array(folder: str, name: str, dtype, ndim: int, what: str) -> np.ndarray:
    path = os.path.join(folder, f"{name}.npy")
    try:
        array = load_npy(path)
    except ValueError as error:  # a pickle, an object array, an archive, a truncated file: never unpickled
        raise ValueError(f"readers.coco: {what}: {error} (an index holds arrays of numbers only)") from None
    if array.dtype != np.dtype(dtype) or array.ndim != ndim:
        raise ValueError(f"readers.coco: {what}: '{path}' holds {array.dtype} [{', '.join(map(str, array.shape))}], "
                         f"not the {np.dtype(dtype)} array of {ndim} dimensions that save_preprocessed_annotations "
                         "writes")
    return array


def _check_index(arrays: dict, samples: int, folder: str, what: str) -> None:
    def refuse(name: str, problem: str) -> ValueError:
        return ValueError(f"readers.coco: {what}: '{os.path.join(folder, name + '.npy')}' {problem}")
    for name in ("heights", "widths", "ids", *CocoIndex.RANGES):
        if len(arrays[name]) != samples:
            raise refuse(name, f"holds {len(arrays[name])} rows for {samples} images")
    if (arrays["heights"] < 0).any() or (arrays["widths"] < 0).any():
        raise refuse("heights", "or widths.npy holds a negative size")
    for name, rows in CocoIndex.RANGES.items():
        ranges = arrays[name]
        if ranges.shape[1:] != (2,) or not ((0 <= ranges[:, 0]) & (ranges[:, 0] <= ranges[:, 1])
                                            & (ranges[:, 1] <= len(arrays[rows]))).all():
            raise refuse(name, f"holds row ranges outside the {len(arrays[rows])} rows of {rows}.npy")
    for name, width in (("boxes", 4), ("polygons", 3), ("vertices", 2)):
        if arrays[name].shape[1] != width:
            raise refuse(name, f"has {arrays[name].shape[1]} columns, not {width}")
    if len(arrays["labels"]) != len(arrays["boxes"]):
        raise refuse("labels", f"holds {len(arrays['labels'])} labels for {len(arrays['boxes'])} boxes")
    offsets = arrays["rle_count_offsets"]
    if len(offsets) != len(arrays["rle_objects"]) + 1 or offsets[0] != 0 or offsets[-1] != len(arrays["rle_counts"]) \
            or (np.diff(offsets) < 0).any():
        raise refuse("rle_count_offsets", "does not divide rle_counts.npy into one range per run-length mask")
