"""The COCO instances file read a piece at a time (JsonStream) into numpy columns by chunks: the
images' table, the categories' labels and the annotations' columns (AnnotationTable), checked as they
are read."""
from __future__ import annotations

import codecs
import itertools
import json
import json.scanner
import re

import numpy as np


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


def read_tables(path: str, args: dict) -> tuple:
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


def annotation_at(path: str, row: int) -> str:
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
