"""``readers.coco``: images with their boxes, labels and masks from a COCO instances file.

The annotations file is parsed once, at build, into flat arrays (a ``CocoIndex``, coco_index.py): per
image its file, size and id, and row ranges of the concatenated boxes, labels, polygons, vertices and
run-length masks of all images. The file is read a piece at a time and its arrays decoded one
element at a time, then converted by chunks into numpy columns (coco_annotations.py): no Python
object is kept per box. ``save_preprocessed_annotations`` writes that index to a folder (a JSON file
and .npy arrays of numbers: nothing that can carry code) and ``preprocessed_annotations`` reads it
back, checked, without parsing the annotations again. Masks are filled from polygons and run-length
strings per sample (coco_masks.py).
"""
from __future__ import annotations

import os

import numpy as np

from penstock import limits, registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers.coco_index import CocoIndex, parse_annotations
from penstock.operators.readers.coco_masks import pixelwise_mask
from penstock.operators.shared.readers import (SAMPLE_READER_ARGS, ShardedReader, read_bytes, sharded_epochs,
                                               shuffle_after_epoch_alone)
from penstock.schema import Arg, ArgError, OpSchema, require_one_of


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
