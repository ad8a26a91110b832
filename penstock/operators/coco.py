"""``readers.coco``: images with their boxes, labels and masks from a COCO instances file.

The annotations file is parsed once, at build, into flat arrays (a ``CocoIndex``): per image its
file, size and id, and offsets into the concatenated boxes, labels, polygons, vertices and
run-length masks of all images. ``save_preprocessed_annotations`` writes that index to a folder
and ``preprocessed_annotations`` reads it back without parsing the JSON again.
"""
from __future__ import annotations

import json
import os

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers import (READER_ARGS, ShardedReader, read_bytes, sharded_epochs,
                                        shuffle_after_epoch_alone)
from penstock.schema import Arg, ArgError, OpSchema, require_one_of

INDEX_FILE = "penstock_coco_index.npz"


def _exclusive(static: dict, per_sample: frozenset) -> None:
    if static["polygon_masks"] and static["pixelwise_masks"]:
        raise ArgError("'polygon_masks' and 'pixelwise_masks' exclude each other")
    if static["preprocessed_annotations"] and static["images"] is not None:
        raise ArgError("'images' selects from an annotations file; it cannot be used with 'preprocessed_annotations'")
    if static["save_preprocessed_annotations"] and not static["save_preprocessed_annotations_dir"]:
        raise ArgError("'save_preprocessed_annotations' needs 'save_preprocessed_annotations_dir'")


def _outputs(args: dict) -> int:
    return 3 + 2 * bool(args["polygon_masks"]) + bool(args["pixelwise_masks"]) + bool(args["image_ids"])


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
        Arg("file_root", "str", None, "Folder holding the images (their file_name is relative to it)."),
        Arg("annotations_file", "str", "", "The COCO instances JSON file."),
        Arg("ltrb", "bool", False, "Boxes as [left, top, right, bottom] instead of [x, y, width, height]."),
        Arg("ratio", "bool", False, "Box and vertex coordinates relative to the image's width and height."),
        Arg("size_threshold", "float", 0.1, "Objects whose box is narrower or lower than this (pixels) are left out."),
        Arg("skip_empty", "bool", False, "Leave out images with no objects (after the other filters)."),
        Arg("include_iscrowd", "bool", True, "Include the objects marked iscrowd=1."),
        Arg("polygon_masks", "bool", False, "Output the objects' polygons and their vertices."),
        Arg("pixelwise_masks", "bool", False, "Output a mask of labels per pixel (polygons and run-length masks)."),
        Arg("image_ids", "bool", False, "Output each image's id."),
        Arg("avoid_class_remapping", "bool", False, "Labels are the file's category ids as they are."),
        Arg("images", "strs", None, "Read only these images (file_name as in the annotations file), in this "
            "order; a name given twice is read twice."),
        Arg("preprocessed_annotations", "str", "", "Folder holding an index that save_preprocessed_annotations wrote."),
        Arg("save_preprocessed_annotations", "bool", False, "Write the parsed index to save_preprocessed_annotations_dir."),
        Arg("save_preprocessed_annotations_dir", "str", "", "Where save_preprocessed_annotations writes."),
        *READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=_outputs,
    input_names=(),
    is_source=True,
    checks=(require_one_of("annotations_file", "preprocessed_annotations", what="the annotations"), _exclusive,
            shuffle_after_epoch_alone),
))


# ---- the index ------------------------------------------------------------------------------------
class CocoIndex:
    """Flat arrays of a parsed annotations file. Per image i: ``files[i]``, ``heights``/``widths``,
    ``ids``; its objects are rows ``object_offsets[i]:object_offsets[i + 1]`` of ``boxes`` and
    ``labels``; its polygons rows ``polygon_offsets[i]:...`` of ``polygons`` (object index within the
    image, first and end vertex within the image's vertices), its vertices rows
    ``vertex_offsets[i]:...`` of ``vertices``; its run-length masks rows ``rle_offsets[i]:...`` of
    ``rle_objects`` (object index) with counts ``rle_counts[rle_count_offsets[r]:...[r + 1]]``."""

    ARRAYS = ("heights", "widths", "ids", "object_offsets", "boxes", "labels", "polygon_offsets", "polygons",
              "vertex_offsets", "vertices", "rle_offsets", "rle_objects", "rle_count_offsets", "rle_counts")

    def __init__(self, files: list, skipped: dict, **arrays):
        self.files, self.skipped = files, skipped
        for name in self.ARRAYS:
            setattr(self, name, arrays[name])

    def save(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        np.savez(os.path.join(folder, INDEX_FILE), files=np.array(self.files, dtype=object),
                 skipped=np.array(json.dumps(self.skipped)), **{name: getattr(self, name) for name in self.ARRAYS})

    @classmethod
    def load(cls, folder: str) -> "CocoIndex":
        path = os.path.join(folder, INDEX_FILE)
        try:
            saved = np.load(path, allow_pickle=True)
        except OSError as error:
            raise FileNotFoundError(f"readers.coco: cannot read preprocessed annotations '{path}': "
                                    f"{error.strerror or error}") from None
        return cls(list(saved["files"]), json.loads(str(saved["skipped"])), **{name: saved[name] for name in cls.ARRAYS})


def _require(entry: dict, keys: tuple, what: str, path: str) -> None:
    missing = [key for key in keys if key not in entry]
    if missing:
        raise ValueError(f"readers.coco: '{path}': {what} lacks {', '.join(repr(k) for k in missing)}")


def parse_annotations(path: str, args: dict) -> CocoIndex:
    """The index of a COCO instances file, with the reader's filters applied."""
    try:
        with open(path, "rb") as handle:
            document = json.loads(handle.read())
    except OSError as error:
        raise FileNotFoundError(f"readers.coco: cannot read annotations_file '{path}': {error.strerror}") from None
    except ValueError as error:
        raise ValueError(f"readers.coco: annotations_file '{path}' is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"readers.coco: annotations_file '{path}' is not a COCO file (a JSON object with "
                         "'images', 'annotations' and 'categories')")
    _require(document, ("images", "annotations", "categories"), "the file", path)
    labels_of = {}
    for position, category in enumerate(document["categories"], 1):
        _require(category, ("id",), f"category {position}", path)
        labels_of[category["id"]] = category["id"] if args["avoid_class_remapping"] else len(labels_of) + 1
    images = {}
    for position, image in enumerate(document["images"], 1):
        _require(image, ("id", "file_name", "width", "height"), f"image entry {position}", path)
        images[image["id"]] = image
    objects_of: dict = {image_id: [] for image_id in images}
    skipped = {"small_objects": 0, "crowd_objects": 0, "empty_images": 0}
    parse_masks = args["polygon_masks"] or args["pixelwise_masks"]
    for position, annotation in enumerate(document["annotations"], 1):
        _require(annotation, ("image_id", "category_id", "bbox"), f"annotation {annotation.get('id', position)}", path)
        name = f"annotation {annotation.get('id', position)}"
        if annotation["image_id"] not in images:
            raise ValueError(f"readers.coco: '{path}': {name} is of image {annotation['image_id']}, which the file "
                             "does not list")
        if annotation["category_id"] not in labels_of:
            raise ValueError(f"readers.coco: '{path}': {name} has category {annotation['category_id']}, which is not "
                             f"among the categories {sorted(labels_of)}")
        box = annotation["bbox"]
        if len(box) != 4 or box[2] < 0 or box[3] < 0:
            raise ValueError(f"readers.coco: '{path}': {name} has bbox {box}: it takes [x, y, width, height] with "
                             "width and height at least 0")
        if annotation.get("iscrowd", 0) and not args["include_iscrowd"]:
            skipped["crowd_objects"] += 1
            continue
        if box[2] < args["size_threshold"] or box[3] < args["size_threshold"]:
            skipped["small_objects"] += 1
            continue
        objects_of[annotation["image_id"]].append(annotation)

    if args["images"] is not None:
        by_name = {image["file_name"]: image_id for image_id, image in images.items()}
        unknown = [name for name in args["images"] if name not in by_name]
        if unknown:
            raise ValueError(f"readers.coco: 'images' names {len(unknown)} images that '{path}' does not list, "
                             f"such as {unknown[0]!r}")
        chosen = [by_name[name] for name in args["images"]]
    else:
        chosen = sorted(images)
    if args["skip_empty"]:
        kept = [image_id for image_id in chosen if objects_of[image_id]]
        skipped["empty_images"] = len(chosen) - len(kept)
        chosen = kept

    files, heights, widths = [], [], []
    boxes, labels, object_offsets = [], [], [0]
    polygons, vertices, polygon_offsets, vertex_offsets = [], [], [0], [0]
    rle_objects, rle_counts, rle_offsets, rle_count_offsets = [], [], [0], [0]
    for image_id in chosen:
        image = images[image_id]
        width, height = image["width"], image["height"]
        files.append(image["file_name"])
        heights.append(height)
        widths.append(width)
        scale = np.array([width, height, width, height], np.float64) if args["ratio"] else np.ones(4)
        first_vertex = len(vertices)
        for number, annotation in enumerate(objects_of[image_id]):
            x, y, w, h = annotation["bbox"]
            boxes.append(np.array([x, y, x + w, y + h] if args["ltrb"] else [x, y, w, h]) / scale)
            labels.append(labels_of[annotation["category_id"]])
            segmentation = annotation.get("segmentation") if parse_masks else None
            if isinstance(segmentation, list):
                for polygon in segmentation:
                    points = np.asarray(polygon, np.float64).reshape(-1, 2) / scale[:2]
                    start = len(vertices) - first_vertex
                    vertices.extend(points)
                    polygons.append((number, start, start + len(points)))
            elif isinstance(segmentation, dict) and args["pixelwise_masks"]:
                counts = segmentation.get("counts")
                size = segmentation.get("size")
                if counts is None or size is None or list(size) != [height, width]:
                    raise ValueError(f"readers.coco: '{path}': annotation {annotation.get('id')} has a run-length "
                                     f"mask of size {size} for an image of {height} x {width}")
                counts = rle_from_string(counts) if isinstance(counts, str) else counts
                rle_objects.append(number)
                rle_counts.extend(counts)
                rle_count_offsets.append(len(rle_counts))
        object_offsets.append(len(boxes))
        polygon_offsets.append(len(polygons))
        vertex_offsets.append(len(vertices))
        rle_offsets.append(len(rle_objects))
    return CocoIndex(
        files, skipped, heights=np.array(heights, np.int64), widths=np.array(widths, np.int64),
        ids=np.array(chosen, np.int64), object_offsets=np.array(object_offsets, np.int64),
        boxes=np.array(boxes, np.float32).reshape(-1, 4), labels=np.array(labels, np.int32),
        polygon_offsets=np.array(polygon_offsets, np.int64), polygons=np.array(polygons, np.int32).reshape(-1, 3),
        vertex_offsets=np.array(vertex_offsets, np.int64), vertices=np.array(vertices, np.float32).reshape(-1, 2),
        rle_offsets=np.array(rle_offsets, np.int64), rle_objects=np.array(rle_objects, np.int64),
        rle_count_offsets=np.array(rle_count_offsets, np.int64), rle_counts=np.array(rle_counts, np.int64))


# ---- masks --------------------------------------------------------------------------------------------
def rle_from_string(text: str) -> list[int]:
    """The run lengths of COCO's compressed RLE string (six bits a character, five of value and one
    of continuation; from the third run on, each is stored as its difference to the run two before)."""
    counts, position = [], 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            code = ord(text[position]) - 48
            value |= (code & 0x1F) << shift
            more = bool(code & 0x20)
            position, shift = position + 1, shift + 5
            if not more and code & 0x10:
                value |= -1 << shift  # negative: sign-extend
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def rle_decode(counts, height: int, width: int) -> np.ndarray:
    """A bool [height, width] mask from run lengths over its column-major pixels (zeros first)."""
    counts = np.asarray(counts, np.int64)
    if counts.sum() != height * width:
        raise ValueError(f"a run-length mask's runs cover {int(counts.sum())} pixels, not {height} x {width}")
    flat = np.repeat(np.arange(len(counts)) % 2 == 1, counts)
    return flat.reshape(width, height).T


def fill_polygon(layer: np.ndarray, points: np.ndarray) -> None:
    """Sets the pixels of ``layer`` whose centres (x + 0.5, y + 0.5) lie inside the polygon (even-odd
    rule; a centre on a left edge is outside, on a right edge inside: COCO's own sampling)."""
    if len(points) < 3:
        return
    height, width = layer.shape
    start, end = points.astype(np.float64), np.roll(points, -1, axis=0).astype(np.float64)
    low, high = np.floor(min(start[:, 1].min(), end[:, 1].min())), np.ceil(max(start[:, 1].max(), end[:, 1].max()))
    rows = np.arange(max(int(low) - 1, 0), min(int(high) + 1, height))
    if len(rows) == 0:
        return
    centres = rows[:, None] + 0.5  # [R, 1] against edges [E]
    crosses = (start[:, 1] <= centres) != (end[:, 1] <= centres)  # each edge counted once per row
    with np.errstate(divide="ignore", invalid="ignore"):
        along = (centres - start[:, 1]) / (end[:, 1] - start[:, 1])
    x = np.where(crosses, start[:, 0] + along * (end[:, 0] - start[:, 0]), np.inf)
    x.sort(axis=1)
    pairs = crosses.sum(1) // 2
    columns = np.arange(width) + 0.5
    for row, xs, count in zip(rows, x, pairs):
        for k in range(count):
            layer[row, (columns > xs[2 * k]) & (columns <= xs[2 * k + 1])] = 1


def pixelwise_mask(polygons: np.ndarray, vertices: np.ndarray, rles: list, labels: np.ndarray,
                   height: int, width: int) -> np.ndarray:
    """int32 [H, W, 1]: each pixel the label of the object covering it (0: none); where objects of
    different labels overlap, the higher label is kept. ``vertices`` in pixels; ``rles``: (object
    index, bool mask) pairs."""
    mask = np.zeros((height, width), np.int32)
    shapes: dict = {}
    for number, start, end in polygons:
        shapes.setdefault(int(labels[number]), []).append(("polygon", vertices[start:end]))
    for number, rle in rles:
        shapes.setdefault(int(labels[number]), []).append(("rle", rle))
    for label in sorted(shapes):
        layer = np.zeros((height, width), np.uint8)
        for kind, shape in shapes[label]:
            if kind == "rle":
                layer |= shape.astype(np.uint8)
            else:
                fill_polygon(layer, shape)
        mask[layer > 0] = label
    return mask[:, :, None]


# ---- the reader ---------------------------------------------------------------------------------------
@registry.register("readers.coco", "cpu")
class CocoReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        if args["preprocessed_annotations"]:
            self.index = CocoIndex.load(args["preprocessed_annotations"])
        else:
            self.index = parse_annotations(args["annotations_file"], args)
        if args["save_preprocessed_annotations"]:
            self.index.save(args["save_preprocessed_annotations_dir"])
        root = args["file_root"] or ""
        self.paths = [os.path.join(root, name) for name in self.index.files]
        missing = [path for path in self.paths if not os.path.isfile(path)]
        if missing:
            where = args["annotations_file"] or args["preprocessed_annotations"]
            raise FileNotFoundError(f"readers.coco: {len(missing)} images that '{where}' lists are not files, "
                                    f"such as '{missing[0]}' (file_root '{root}')")
        if not self.paths:
            raise ValueError(f"readers.coco: no images to read in '{args['annotations_file']}'")
        self.epochs = sharded_epochs(args, context, len(self.paths), "readers.coco")

    def load(self, index, sample: SampleContext) -> tuple:
        x = self.index
        objects = slice(x.object_offsets[index], x.object_offsets[index + 1])
        outputs = [read_bytes(self.paths[index]), x.boxes[objects].copy(), x.labels[objects].copy()]
        polygons = x.polygons[x.polygon_offsets[index]:x.polygon_offsets[index + 1]]
        vertices = x.vertices[x.vertex_offsets[index]:x.vertex_offsets[index + 1]]
        if self.args["polygon_masks"]:
            outputs += [polygons.copy(), vertices.copy()]
        if self.args["pixelwise_masks"]:
            height, width = int(x.heights[index]), int(x.widths[index])
            in_pixels = vertices * (np.array([width, height], np.float32) if self.args["ratio"] else 1)
            rles = [(int(x.rle_objects[r]), rle_decode(x.rle_counts[x.rle_count_offsets[r]:x.rle_count_offsets[r + 1]],
                                                       height, width))
                    for r in range(x.rle_offsets[index], x.rle_offsets[index + 1])]
            outputs.append(pixelwise_mask(polygons, in_pixels, rles, x.labels[objects], height, width))
        if self.args["image_ids"]:
            outputs.append(np.array([x.ids[index]], np.int32))
        return tuple(outputs)

    def declare_outputs(self, inputs):
        specs = [OutputSpec(np.dtype(np.uint8), 1, ""), OutputSpec(np.dtype(np.float32), 2, ""),
                 OutputSpec(np.dtype(np.int32), 1, "")]
        if self.args["polygon_masks"]:
            specs += [OutputSpec(np.dtype(np.int32), 2, ""), OutputSpec(np.dtype(np.float32), 2, "")]
        if self.args["pixelwise_masks"]:
            specs.append(OutputSpec(np.dtype(np.int32), 3, "HWC", channels=1))
        if self.args["image_ids"]:
            specs.append(OutputSpec(np.dtype(np.int32), 1, "", (1,)))
        return tuple(specs)

    def reader_meta(self) -> dict:
        return {**super().reader_meta(), "skipped": dict(self.index.skipped)}
