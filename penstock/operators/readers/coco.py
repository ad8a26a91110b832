"""``readers.coco``: images with their boxes, labels and masks from a COCO instances file.

The annotations file is parsed once, at build, into flat arrays (a ``CocoIndex``): per image its
file, size and id, and row ranges of the concatenated boxes, labels, polygons, vertices and
run-length masks of all images. The file is read a piece at a time and its arrays decoded one
element at a time, then converted by chunks into numpy columns: no Python object is kept per box.
``save_preprocessed_annotations`` writes that index to a folder (a JSON file and .npy arrays of
numbers: nothing that can carry code) and ``preprocessed_annotations`` reads it back, checked,
without parsing the annotations again.
"""
from __future__ import annotations

import codecs
import itertools
import json
import json.scanner
import os
import re

import numpy as np

from penstock import limits, registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers.files import (SAMPLE_READER_ARGS, ShardedReader, load_npy, read_bytes, sharded_epochs,
                                        shuffle_after_epoch_alone)
from penstock.schema import Arg, ArgError, OpSchema, require_one_of

INDEX_FILE = "penstock_coco_index.json"
INDEX_FORMAT = "penstock readers.coco index"
INDEX_VERSION = 1


def _exclusive(static: dict, per_sample: frozenset) -> None:
    if static.polygon_masks and static.pixelwise_masks:
        raise ArgError("'polygon_masks' and 'pixelwise_masks' exclude each other")
    if static.preprocessed_annotations and static.images is not None:
        raise ArgError("'images' selects from an annotations file; it cannot be used with 'preprocessed_annotations'")
    if bool(static.save_preprocessed_annotations) != bool(static.save_preprocessed_annotations_dir):
        raise ArgError("'save_preprocessed_annotations' and 'save_preprocessed_annotations_dir' go together, as in "
                       "DALI")
    if static.preprocessed_annotations and static.annotations_file:
        raise ArgError("'preprocessed_annotations' replaces 'annotations_file'; give one")
    if static.skip_cached_images:
        raise ArgError("'skip_cached_images' is not supported, as in DALI")


def _outputs(args: dict) -> int:
    return 3 + 2 * bool(args.polygon_masks) + bool(args.pixelwise_masks) + bool(args.image_ids)


registry.register_schema(OpSchema(
    name="readers.coco",
    class_name="readers.COCO",
    doc="Reads a COCO data set: a folder of images and an instances annotations file.\n\n"
        "Outputs, in order: the encoded images (uint8, 1-D); the boxes (float32 [M, 4], x, y, width, "
        "height, or left, top, right, bottom with ``ltrb``); the labels (int32 [M]); with "
        "``polygon_masks`` the polygons (int32 [P, 3]: object index, first vertex, end vertex) and "
        "vertices (float32 [V, 2]); with ``pixelwise_masks`` a mask (int32 [H, W, 1], each pixel the "
        "label of the object covering it, 0 elsewhere); with ``image_ids`` the image's id (int32 [1]).\n\n"
        "Images are read in the order of their ids (or of ``images``). Labels are the categories "
        "renumbered 1..K in the order the file lists them (0 is left for the background), unless "
        "``avoid_class_remapping``.",
    args=(
        Arg("file_root", "path", None, "Folder holding the images (their file_name is relative to it)."),
        Arg("annotations_file", "path", "", "The COCO instances JSON file."),
        Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom] instead of [x, y, width, height]."),
        Arg("ratio", "bool", False, "Box and vertex coordinates relative to the image's width and height."),
        Arg("size_threshold", "float", 0.1, "Objects whose box is narrower or lower than this (pixels) are left out."),
        Arg("skip_empty", "bool", False, "Leave out images with no objects (after the other filters)."),
        Arg("include_iscrowd", "bool", True, "Include the objects marked iscrowd=1."),
        Arg("polygon_masks", "bool", False, "Output the objects' polygons and their vertices."),
        Arg("pixelwise_masks", "bool", False, "Output a mask of labels per pixel (polygons and run-length masks)."),
        Arg("image_ids", "bool", False, "Output each image's id."),
        Arg("avoid_class_remapping", "bool", False, "Labels are the file's category ids as they are."),
        Arg("images", "paths", None, "Read only these images (file_name as in the annotations file), in this "
            "order; a name given twice is read twice."),
        Arg("preprocessed_annotations", "path", "", "Folder holding an index that save_preprocessed_annotations "
            "wrote, read instead of annotations_file: the images and objects that the saving reader's filters kept "
            "(size_threshold, include_iscrowd, skip_empty, avoid_class_remapping); ltrb and ratio are this reader's."),
        Arg("save_preprocessed_annotations", "bool", False, "Write the parsed index to "
            "save_preprocessed_annotations_dir (a JSON file and .npy arrays of numbers; the masks too with "
            "polygon_masks or pixelwise_masks)."),
        Arg("save_preprocessed_annotations_dir", "path", "", "Where save_preprocessed_annotations writes."),
        *SAMPLE_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=_outputs,
    input_names=(),
    is_source=True,
    checks=(require_one_of("annotations_file", "preprocessed_annotations", what="the annotations"), _exclusive,
            shuffle_after_epoch_alone),
))


# ---- the annotations file, a piece at a time -----------------------------------------------------------
_SPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
READ_BYTES = 1 << 22  # the text held at once while a file is walked (a value longer than that: more)
FLOAT32_MAX = float(np.finfo(np.float32).max)
CHUNK = 512  # elements of an array converted to numpy columns at once: they die young, and collections stay cheap


class JsonStream:
    """A JSON file read a piece at a time, its values decoded one by one by json's own scanner.
    json.load holds the whole text and every object of the document at once (2 GB for 10^6 boxes,
    and the garbage collector walks them all, again and again, while they are made); walking an
    array element by element keeps a piece of text and one chunk of elements."""

    def __init__(self, handle, what: str):
        self.handle, self.what = handle, what
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.scan = json.scanner.make_scanner(json.JSONDecoder())
        self.text, self.pos, self.offset, self.ended = "", 0, 0, False

    def _refill(self) -> bool:
        """Appends the next piece of the file, False at its end. A piece is at least as long as the
        text held, so that a long value is decoded again only a logarithmic number of times."""
        if self.ended:
            return False
        data = self.handle.read(max(READ_BYTES, 2 * (len(self.text) - self.pos)))
        self.ended = not data
        self.offset += self.pos
        self.text = self.text[self.pos:] + self.decoder.decode(data, final=self.ended)
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file), not consumed."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text) or not self._refill():
                return self.text[self.pos:self.pos + 1]

    def expect(self, allowed: str, what: str) -> str:
        char = self.peek()
        if not char or char not in allowed:
            raise self.error(f"expected {what}")
        self.pos += 1
        return char

    def value(self):
        self.peek()
        while True:
            try:
                value, end = self.scan(self.text, self.pos)
            except StopIteration:
                if self._refill():
                    continue
                raise self.error("expected a value") from None
            except json.JSONDecodeError as error:
                if self._refill():  # the value may go on in the next piece
                    continue
                raise self.error(error.msg, error.pos) from None
            except RecursionError:
                raise self.error("values nested too deeply") from None
            if end < len(self.text) or not self._refill():  # a number may go on in the next piece
                self.pos = end
                return value

    def array(self, what: str):
        """Yields the elements of the array that comes next."""
        self.expect("[", f"{what} to be a list")
        if self.peek() == "]":
            self.pos += 1
            return
        scan, separator = self.scan, _SEPARATOR.match
        while True:
            # most elements, and the separator after them, lie in the text held: one scan and one
            # match each; the others (and errors) take the general path
            try:
                value, end = scan(self.text, self.pos)
                found = separator(self.text, end)
            except (StopIteration, json.JSONDecodeError, RecursionError):
                found = None
            if found is not None and found.end() < len(self.text):
                self.pos = found.end()
                yield value
                if found.group(1) == "]":
                    return
                continue
            yield self.value()
            if self.expect(",]", "',' or ']'") == "]":
                return
            self.peek()  # the fast path scans from the next value's first character

    def members(self):
        """Yields the keys of the object that comes next; each key's value is read before the next."""
        self.expect("{", "an object")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise self.error("expected a key (a string)")
            self.expect(":", "':'")
            yield key
            if self.expect(",}", "',' or '}'") == "}":
                return

    def end(self) -> None:
        if self.peek():
            raise self.error("expected the end of the file")

    def error(self, message: str, pos: int | None = None) -> ValueError:
        at = self.offset + (self.pos if pos is None else pos)
        return ValueError(f"readers.coco: {self.what} is not JSON: {message} at character {at:,}")


def _chunks(items):
    """(position of the first, list) for chunks of ``items``; positions count from 1."""
    position = 1
    while chunk := list(itertools.islice(items, CHUNK)):
        yield position, chunk
        position += len(chunk)


def _annotation_name(annotation, position: int) -> str:
    return f"annotation {annotation.get('id', position) if isinstance(annotation, dict) else position}"


def _refuse_lacking(chunk: list, first: int, keys: tuple, name, what: str):
    for position, entry in enumerate(chunk, first):
        if not isinstance(entry, dict):
            raise ValueError(f"readers.coco: {what}: {name(entry, position)} is not an object")
        missing = [key for key in keys if key not in entry]
        if missing:
            raise ValueError(f"readers.coco: {what}: {name(entry, position)} lacks {', '.join(map(repr, missing))}")
    raise AssertionError("no entry lacks a key")


def _integers(values: list, refuse) -> np.ndarray:
    """``values`` as int64, or ``refuse(i)`` raised for the first that is not an integer."""
    array = np.array(values) if values else np.zeros(0, np.int64)
    if array.dtype.kind == "i" and array.ndim == 1:
        return array.astype(np.int64, copy=False)
    for index, value in enumerate(values):
        if type(value) is not int or not -2**63 <= value < 2**63:
            raise refuse(index)
    raise AssertionError("no value is not an integer")


def _image_table(items, what: str) -> tuple:
    """(ids, file names, widths, heights) of the images, in file order."""
    ids, names, widths, heights = [], [], [], []
    for first, chunk in _chunks(items):
        try:
            chunk_names = [entry["file_name"] for entry in chunk]
            columns = [[entry[key] for entry in chunk] for key in ("id", "width", "height")]
        except (KeyError, TypeError):
            _refuse_lacking(chunk, first, ("id", "file_name", "width", "height"),
                            lambda entry, position: f"image entry {position}", what)
        for key, column, out in zip(("id", "width", "height"), columns, (ids, widths, heights)):
            array = _integers(column, lambda i: ValueError(
                f"readers.coco: {what}: image entry {first + i} has {key} {column[i]!r}: it takes an integer"))
            if key != "id" and (array < 0).any():
                i = int(np.argmax(array < 0))
                raise ValueError(f"readers.coco: {what}: image entry {first + i} has {key} {column[i]}: it takes "
                                 "an integer of at least 0")
            out.append(array)
        if not all(type(name) is str for name in chunk_names):
            i = next(i for i, name in enumerate(chunk_names) if type(name) is not str)
            raise ValueError(f"readers.coco: {what}: image entry {first + i} has file_name {chunk_names[i]!r}: "
                             "it takes a string")
        names.extend(chunk_names)
    def joined(parts):
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return joined(ids), names, joined(widths), joined(heights)


def _labels_of(items, args: dict, what: str) -> dict:
    """{category id: label}: the categories numbered 1.. in file order, or their ids as they are."""
    labels_of = {}
    for position, category in enumerate(items, 1):
        if not isinstance(category, dict) or "id" not in category:
            raise ValueError(f"readers.coco: {what}: category {position} lacks 'id'")
        category_id = category["id"]
        if type(category_id) is not int:
            raise ValueError(f"readers.coco: {what}: category {position} has id {category_id!r}: it takes an integer")
        if args.avoid_class_remapping and not -2**31 <= category_id < 2**31:
            raise ValueError(f"readers.coco: {what}: category {position} has id {category_id}, which an int32 label "
                             "cannot hold (avoid_class_remapping keeps the ids as labels)")
        labels_of[category_id] = category_id if args.avoid_class_remapping else len(labels_of) + 1
    return labels_of


class AnnotationTable:
    """The annotations of a file as columns, in file order (row i: annotation i + 1): image id,
    category id, box (float64 [N, 4], x, y, width, height), crowd flag; with masks, each
    annotation's polygon count, each polygon's vertex count and all vertices (float32 [V, 2]); the
    run-length masks as (row, annotation name, segmentation) triples."""

    def __init__(self, parts: list, masks: bool):
        def joined(key, empty):
            return np.concatenate([part[key] for part in parts]) if parts else empty
        self.image, self.category = joined("image", np.zeros(0, np.int64)), joined("category", np.zeros(0, np.int64))
        self.box, self.crowd = joined("box", np.zeros((0, 4))), joined("crowd", np.zeros(0, bool))
        if masks:
            self.polygon_count = joined("polygon_count", np.zeros(0, np.int64))
            self.vertex_count = joined("vertex_count", np.zeros(0, np.int64))
            self.vertices = joined("vertices", np.zeros((0, 2), np.float32))
        self.run_lengths = [entry for part in parts for entry in part["run_lengths"]]

    @classmethod
    def read(cls, items, what: str, masks: bool, run_lengths: bool) -> AnnotationTable:
        return cls([_annotation_columns(chunk, first, what, masks, run_lengths) for first, chunk in _chunks(items)],
                   masks)


def _first_bad_box(boxes: list) -> int:
    for index, box in enumerate(boxes):
        try:
            values = np.array(box, np.float64)
        except (TypeError, ValueError):
            return index
        if values.shape != (4,) or not np.isfinite(values).all() or values[2] < 0 or values[3] < 0:
            return index
    raise AssertionError("no box is wrong")


def _annotation_columns(chunk: list, first: int, what: str, masks: bool, run_lengths: bool) -> dict:
    try:
        image = [annotation["image_id"] for annotation in chunk]
        category = [annotation["category_id"] for annotation in chunk]
        boxes = [annotation["bbox"] for annotation in chunk]
    except (KeyError, TypeError):
        _refuse_lacking(chunk, first, ("image_id", "category_id", "bbox"), _annotation_name, what)

    def refuse(index: int, problem: str) -> ValueError:
        return ValueError(f"readers.coco: {what}: {_annotation_name(chunk[index], first + index)} {problem}")
    columns = {"image": _integers(image, lambda i: refuse(i, f"has image_id {image[i]!r}: it takes an integer")),
               "category": _integers(category, lambda i: refuse(i, f"has category_id {category[i]!r}: it takes an "
                                                                   "integer"))}
    try:
        box = np.array(boxes, np.float64).reshape(len(boxes), -1) if boxes else np.zeros((0, 4))
    except (TypeError, ValueError):
        box = None
    if box is None or box.shape[1] != 4 or not (np.isfinite(box).all() and (box[:, 2:] >= 0).all()):
        index = _first_bad_box(boxes)
        raise refuse(index, f"has bbox {boxes[index]}: it takes [x, y, width, height] with width and height at least 0")
    columns["box"] = box
    crowd = np.array([annotation.get("iscrowd", 0) for annotation in chunk])
    if len(chunk) and crowd.dtype.kind not in "biuf":
        index = next(i for i, value in enumerate(crowd.tolist()) if type(value) not in (bool, int, float))
        raise refuse(index, f"has iscrowd {chunk[index].get('iscrowd')!r}: it takes 0 or 1")
    columns["crowd"] = crowd != 0
    columns["run_lengths"] = []
    if masks:
        segments = [annotation.get("segmentation") for annotation in chunk]
        polygon_lists = [segment if type(segment) is list else () for segment in segments]
        polygon_count = np.fromiter(map(len, polygon_lists), np.int64, len(chunk))
        polygons = list(itertools.chain.from_iterable(polygon_lists))
        owner = np.repeat(np.arange(len(chunk)), polygon_count)  # the chunk's row of each polygon
        if not all(type(polygon) is list for polygon in polygons):
            index = next(i for i, polygon in enumerate(polygons) if type(polygon) is not list)
            raise refuse(int(owner[index]), "has a segmentation that is not a list of polygons (lists of x, y)")
        lengths = np.fromiter(map(len, polygons), np.int64, len(polygons))
        try:
            vertices = np.fromiter(itertools.chain.from_iterable(polygons), np.float64, int(lengths.sum()))
        except (TypeError, ValueError):
            vertices = None
        else:  # the index's type; coordinates past its range become infinite, and are refused
            with np.errstate(over="ignore"):
                vertices = vertices.astype(np.float32)
        odd = lengths % 2 == 1
        if vertices is None or odd.any() or not np.isfinite(vertices).all():
            index = int(np.argmax(odd)) if odd.any() else next(
                i for i, polygon in enumerate(polygons)
                if not all(type(v) in (int, float) and abs(v) <= FLOAT32_MAX for v in polygon))
            raise refuse(int(owner[index]), f"has a polygon {str(polygons[index])[:80]}: it takes x, y pairs "
                                            "within float32's range")
        columns.update(polygon_count=polygon_count, vertex_count=lengths // 2, vertices=vertices.reshape(-1, 2))
        if run_lengths:
            columns["run_lengths"] = [(first - 1 + i, _annotation_name(chunk[i], first + i), segment)
                                      for i, segment in enumerate(segments) if type(segment) is dict]
    return columns


def _read_tables(path: str, args: dict) -> tuple:
    """(images, labels_of, annotations) of the file, each checked on its own."""
    what = f"annotations_file '{path}'"
    masks = args.polygon_masks or args.pixelwise_masks
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise FileNotFoundError(f"readers.coco: cannot read annotations_file '{path}': {error.strerror}") from None
    tables: dict = {}
    with handle:
        stream = JsonStream(handle, what)
        try:
            if stream.peek() != "{":
                stream.value()
                raise ValueError(f"readers.coco: {what} is not a COCO file (a JSON object with 'images', "
                                 "'annotations' and 'categories')")
            for key in stream.members():
                if key in tables:
                    raise ValueError(f"readers.coco: {what} lists '{key}' twice")
                if key == "images":
                    tables[key] = _image_table(stream.array("'images'"), what)
                elif key == "categories":
                    tables[key] = _labels_of(stream.array("'categories'"), args, what)
                elif key == "annotations":
                    tables[key] = AnnotationTable.read(stream.array("'annotations'"), what, masks,
                                                       args.pixelwise_masks)
                else:
                    stream.value()
            stream.end()
        except UnicodeDecodeError as error:
            raise ValueError(f"readers.coco: {what} is not JSON: {error}") from None
        except OSError as error:
            raise FileNotFoundError(f"readers.coco: cannot read annotations_file '{path}': {error.strerror}") from None
    missing = [key for key in ("images", "annotations", "categories") if key not in tables]
    if missing:
        raise ValueError(f"readers.coco: {what}: the file lacks {', '.join(map(repr, missing))}")
    return tables["images"], tables["categories"], tables["annotations"]


def _annotation_at(path: str, row: int) -> str:
    """The name of annotation ``row`` (from 0) of the file, read again: only errors need it, and
    keeping every annotation's id would cost as much as its box."""
    with open(path, "rb") as handle:
        stream = JsonStream(handle, "")
        for key in stream.members():
            if key != "annotations":
                stream.value()
                continue
            for position, annotation in enumerate(stream.array(""), 1):
                if position == row + 1:
                    return _annotation_name(annotation, position)
    return f"annotation {row + 1}"


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
    (image_ids, names, widths, heights), labels_of, table = _read_tables(path, args)
    by_id = np.argsort(image_ids, kind="stable")
    sorted_ids = image_ids[by_id]
    repeated = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if len(repeated):
        raise ValueError(f"readers.coco: {what} lists image {sorted_ids[repeated[0]]} twice")
    found = np.minimum(np.searchsorted(sorted_ids, table.image), max(len(sorted_ids) - 1, 0))
    unknown = np.flatnonzero(sorted_ids[found] != table.image) if len(sorted_ids) else np.arange(len(table.image))
    if len(unknown):
        raise ValueError(f"readers.coco: {what}: {_annotation_at(path, int(unknown[0]))} is of image "
                         f"{table.image[unknown[0]]}, which the file does not list")
    row = by_id[found] if len(sorted_ids) else found  # each annotation's image, as its place in the file
    category_ids = np.array(sorted(labels_of), np.int64)
    at = np.minimum(np.searchsorted(category_ids, table.category), max(len(category_ids) - 1, 0))
    unknown = (np.flatnonzero(category_ids[at] != table.category) if len(category_ids)
               else np.arange(len(table.category)))
    if len(unknown):
        raise ValueError(f"readers.coco: {what}: {_annotation_at(path, int(unknown[0]))} has category "
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


# ---- masks --------------------------------------------------------------------------------------------
def rle_from_string(text: str) -> list[int]:
    """The run lengths of COCO's compressed RLE string (six bits a character, five of value and one
    of continuation; from the third run on, each is stored as its difference to the run two before)."""
    counts, position = [], 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            if position == len(text):
                raise ValueError("the run-length string ends inside a run")
            code = ord(text[position]) - 48
            if not 0 <= code < 64 or shift > 60:  # past 64 bits a run is no count, and the value grows without end
                raise ValueError(f"the run-length string has {text[position]!r} at {position}, which is not a run")
            value |= (code & 0x1F) << shift
            more = bool(code & 0x20)
            position, shift = position + 1, shift + 5
            if not more and code & 0x10:
                value |= -1 << shift  # negative: sign-extend
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def check_runs(counts: np.ndarray, height: int, width: int) -> None:
    """Refuses run lengths that are negative or that do not cover exactly height x width pixels
    (checked before the sum, which large runs would overflow)."""
    pixels = height * width
    if len(counts) and (counts.min() < 0 or counts.max() > pixels):
        run = int(counts.min() if counts.min() < 0 else counts.max())
        raise ValueError(f"a run-length mask of {height} x {width} has a run of {run}")
    if int(counts.sum()) != pixels:
        raise ValueError(f"a run-length mask's runs cover {int(counts.sum())} pixels, not {height} x {width}")


def rle_decode(counts, height: int, width: int) -> np.ndarray:
    """A bool [height, width] mask from run lengths over its column-major pixels (zeros first)."""
    counts = np.asarray(counts, np.int64)
    check_runs(counts, height, width)
    flat = np.repeat(np.arange(len(counts)) % 2 == 1, counts)
    return flat.reshape(width, height).T


CROSSINGS_AT_ONCE = 1 << 20  # (edge, row) pairs a polygon's fill computes at once: bounded temporaries


def fill_polygon(layer: np.ndarray, points: np.ndarray) -> None:
    """Sets the pixels of ``layer`` whose centres (x + 0.5, y + 0.5) lie inside the polygon (even-odd
    rule; a centre on a left edge is outside, on a right edge inside: COCO's own sampling). The
    points must be finite; a polygon crossing the rows more than twice per pixel on average is
    refused (a SizeClaimError): it would cost more than the image's pixels."""
    if len(points) < 3:
        return
    height, width = layer.shape
    start = points.astype(np.float64)
    end = np.roll(start, -1, axis=0)
    # the rows an edge may cross, a row of margin each side: the exact test below decides
    low, high = np.minimum(start[:, 1], end[:, 1]), np.maximum(start[:, 1], end[:, 1])
    first_row = np.clip(np.floor(low) - 1, 0, height).astype(np.int64)
    spans = np.clip(np.ceil(high) + 1, 0, height).astype(np.int64) - first_row
    spans = np.maximum(spans, 0)
    top, bottom = int(first_row.min()), int((first_row + spans).max())
    if bottom <= top:
        return
    total = int(spans.sum())
    if total > 2 * (bottom - top + 2) * (width + 1):
        raise limits.SizeClaimError(f"a polygon of {len(points):,} vertices crosses the rows {total:,} times, more "
                                    f"than twice the {(bottom - top) * width:,} pixels it spans")
    # parity per pixel: a crossing toggles every column whose centre lies right of it; a column is
    # inside when an odd number of crossings lie left of its centre
    parity = np.zeros((bottom - top, width + 1), np.uint8)
    ends = np.cumsum(spans)
    for low_pair in range(0, total, CROSSINGS_AT_ONCE):
        pair = np.arange(low_pair, min(low_pair + CROSSINGS_AT_ONCE, total))
        edge = np.searchsorted(ends, pair, side="right")
        row = first_row[edge] + pair - (ends[edge] - spans[edge])
        centre = row + 0.5
        y0, y1 = start[edge, 1], end[edge, 1]
        crosses = (y0 <= centre) != (y1 <= centre)  # each edge counted once per row
        edge, row, centre, y0, y1 = edge[crosses], row[crosses], centre[crosses], y0[crosses], y1[crosses]
        x0 = start[edge, 0]
        x = np.clip(x0 + (centre - y0) / (y1 - y0) * (end[edge, 0] - x0), -1, width + 1)
        column = np.floor(x - 0.5) + 1  # the first column whose centre lies right of x, rounding fixed below
        column -= (column - 0.5) > x
        column += (column + 0.5) <= x
        np.bitwise_xor.at(parity, (row - top, np.clip(column, 0, width).astype(np.int64)), 1)
    np.bitwise_xor.accumulate(parity, axis=1, out=parity)
    layer[top:bottom] |= parity[:, :width]


def pixelwise_mask(polygons: np.ndarray, vertices: np.ndarray, runs: list, labels: np.ndarray,
                   height: int, width: int) -> np.ndarray:
    """int32 [H, W, 1]: each pixel the label of the object covering it (0: none); where objects of
    different labels overlap, the higher label is kept. ``vertices`` in pixels, finite; ``runs``:
    (object number, run lengths) pairs. The caller has checked height x width (limits)."""
    mask = np.zeros((height, width), np.int32)
    shapes: dict = {}
    for number, start, end in polygons:
        shapes.setdefault(int(labels[number]), []).append(("polygon", vertices[start:end]))
    for number, counts in runs:
        shapes.setdefault(int(labels[number]), []).append(("rle", counts))
    for label in sorted(shapes):
        layer = np.zeros((height, width), np.uint8)
        for kind, shape in shapes[label]:
            if kind == "rle":  # decoded one at a time: an image may list many
                layer |= rle_decode(shape, height, width)
            else:
                fill_polygon(layer, shape)
        mask[layer > 0] = label
    return mask[:, :, None]


# ---- the reader ---------------------------------------------------------------------------------------
@registry.register("readers.coco", "cpu")
class CocoReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        if args.preprocessed_annotations:
            self.source = f"preprocessed_annotations '{args.preprocessed_annotations}'"
            self.index = CocoIndex.load(args.preprocessed_annotations)
            for argument, needs in (("polygon_masks", ("polygons",)), ("pixelwise_masks", ("polygons", "run_lengths"))):
                if args[argument] and not all(self.index.masks[part] for part in needs):
                    raise ValueError(f"readers.coco: '{argument}' needs masks that the index in {self.source} was "
                                     f"saved without: save it with {argument}=True")
        else:
            self.source = f"annotations_file '{args.annotations_file}'"
            self.index = parse_annotations(args.annotations_file, args)
        if args.save_preprocessed_annotations:
            self.index.save(args.save_preprocessed_annotations_dir)
        if args.image_ids and len(self.index.ids) and not (
                -2**31 <= self.index.ids.min() and self.index.ids.max() < 2**31):
            raise ValueError(f"readers.coco: 'image_ids' outputs int32 ids, and {self.source} has image ids from "
                             f"{self.index.ids.min()} to {self.index.ids.max()}")
        root = args.file_root or ""
        self.sources = list(self.index.files)  # source_info: the file_name as the annotations give it (DALI's)
        self.paths = [os.path.join(root, name) for name in self.sources]
        missing = _missing_files(self.paths)
        if missing:
            raise FileNotFoundError(f"readers.coco: {len(missing)} images that {self.source} lists are not files, "
                                    f"such as '{missing[0]}' (file_root '{root}')")
        if not self.paths:
            raise ValueError(f"readers.coco: no images to read in {self.source}")
        self.epochs = sharded_epochs(args, context, len(self.paths), "readers.coco")

    def load(self, index, sample: SampleContext) -> tuple:
        x = self.index
        height, width = int(x.heights[index]), int(x.widths[index])
        begin, end = x.objects[index]
        boxes = x.boxes[begin:end]
        if self.args.ltrb or self.args.ratio:
            boxes = boxes.astype(np.float64)
            if self.args.ltrb:
                boxes[:, 2:] += boxes[:, :2]
            if self.args.ratio:
                boxes /= np.array([width, height, width, height], np.float64)
        outputs = [read_bytes(self.paths[index]), boxes.astype(np.float32), x.labels[begin:end].copy()]
        polygons = x.polygons[slice(*x.polygon_rows[index])]
        vertices = x.vertices[slice(*x.vertex_rows[index])]
        if self.args.polygon_masks or self.args.pixelwise_masks:
            self._check_polygons(index, polygons, len(vertices), end - begin)
        if self.args.polygon_masks:
            scale = np.array([width, height], np.float64) if self.args.ratio else None
            outputs += [polygons.copy(), vertices.copy() if scale is None else (vertices / scale).astype(np.float32)]
        if self.args.pixelwise_masks:
            outputs.append(self._mask(index, polygons, vertices, x.labels[begin:end], height, width))
        if self.args.image_ids:
            outputs.append(np.array([x.ids[index]], np.int32))
        return tuple(outputs)

    def _image(self, index: int) -> str:
        return f"image {self.index.ids[index]} ('{self.index.files[index]}')"

    def _check_polygons(self, index: int, polygons: np.ndarray, vertices: int, objects: int) -> None:
        """A saved index is a file like any other: its rows must stay within the sample's own."""
        if len(polygons) and not ((0 <= polygons[:, 0]) & (polygons[:, 0] < objects) & (0 <= polygons[:, 1])
                                  & (polygons[:, 1] <= polygons[:, 2]) & (polygons[:, 2] <= vertices)).all():
            raise ValueError(f"readers.coco: {self.source}: the polygons of {self._image(index)} refer to objects or "
                             "vertices it does not have")

    def _mask(self, index: int, polygons, vertices, labels, height: int, width: int) -> np.ndarray:
        x = self.index
        try:
            limits.checked_pixels(self._image(index), height, width, limits.DEFAULT_MAX_PIXELS,
                                  limit_name="penstock.limits.DEFAULT_MAX_PIXELS",
                                  remedy="pixelwise_masks makes a mask of the image's size: its width and height "
                                         "in the file are wrong, or the mask is too large to make")
        except limits.SizeClaimError as error:
            raise limits.SizeClaimError(f"readers.coco: {self.source}: {error}") from None
        try:
            numbers = x.rle_objects[slice(*x.rle_rows[index])]
            if len(numbers) and not ((0 <= numbers) & (numbers < len(labels))).all():
                raise ValueError("its run-length masks refer to objects it does not have")
            if not np.isfinite(vertices).all():
                raise ValueError("its polygons have vertices that are not finite")
            runs = [(int(number), x.rle_counts[x.rle_count_offsets[r]:x.rle_count_offsets[r + 1]])
                    for number, r in zip(numbers.tolist(), range(*x.rle_rows[index]))]
            return pixelwise_mask(polygons, vertices, runs, labels, height, width)
        except ValueError as error:  # SizeClaimError included, kept as such
            raise type(error)(f"readers.coco: {self.source}: {self._image(index)}: {error}") from None

    def declare_outputs(self, inputs):
        specs = [OutputSpec(np.dtype(np.uint8), 1, ""), OutputSpec(np.dtype(np.float32), 2, ""),
                 OutputSpec(np.dtype(np.int32), 1, "")]
        if self.args.polygon_masks:
            specs += [OutputSpec(np.dtype(np.int32), 2, ""), OutputSpec(np.dtype(np.float32), 2, "")]
        if self.args.pixelwise_masks:
            specs.append(OutputSpec(np.dtype(np.int32), 3, "HWC", channels=1))
        if self.args.image_ids:
            specs.append(OutputSpec(np.dtype(np.int32), 1, "", (1,)))
        return tuple(specs)

    def reader_meta(self) -> dict:
        return {**super().reader_meta(), "skipped": dict(self.index.skipped)}


def _missing_files(paths: list) -> list:
    """The paths that are not files. A folder's listing answers for all its files at once (one call
    instead of one per image); what it does not answer (links, other folders) is asked one by one."""
    listed: dict = {}
    missing = []
    for path in paths:
        folder, name = os.path.split(path)
        if folder not in listed:
            try:
                with os.scandir(folder or ".") as entries:
                    listed[folder] = {entry.name for entry in entries if entry.is_file(follow_symlinks=False)}
            except OSError:
                listed[folder] = set()
        if name not in listed[folder] and not os.path.isfile(path):
            missing.append(path)
    return missing
