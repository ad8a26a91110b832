"""Make a COCO-format detection data set: JPEGs of drawn objects and an instances JSON written as
COCO writes it (images, annotations with bbox, area, iscrowd and segmentation, categories).

usage: python benchmarks/make_coco.py OUT_DIR [IMAGES] [--seed S] [--sizes MIN MAX] [--photos DIR]
Writes OUT_DIR/images/*.jpg and OUT_DIR/annotations/instances.json.

With ``--photos DIR`` the images are the first IMAGES JPEGs under DIR (an ImageNet-like folder,
such as the one benchmarks/make_photos.py or the GPU machine's data tool makes), copied unchanged,
and each is annotated with 1-6 objects of the same kinds, not drawn: the photographs' decode cost
is what such a set measures.

Each image holds 0-6 objects (rectangles, triangles and ellipses as polygons, drawn filled over a
smooth background, each object's bbox the bounds of its polygon); about one image in ten has none,
one in eight holds a crowd region (iscrowd=1, its segmentation an RLE with uncompressed counts in
column-major order, as COCO's instances files store them), and one in twelve a sliver object
thinner than a pixel. Category ids are not contiguous and not listed in order, as in COCO.
"""
from __future__ import annotations

import argparse
import json
import os

import cv2
import numpy as np

CATEGORIES = [{"id": 7, "name": "triangle", "supercategory": "shape"},
              {"id": 1, "name": "rectangle", "supercategory": "shape"},
              {"id": 18, "name": "ellipse", "supercategory": "shape"},
              {"id": 3, "name": "crowd", "supercategory": "region"}]


def rle_counts(mask: np.ndarray) -> list[int]:
    """Uncompressed COCO RLE of a binary mask: run lengths over the column-major pixels, starting
    with a run of zeros."""
    flat = np.asfortranarray(mask).reshape(-1, order="F").astype(np.uint8)
    changes = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], changes, [flat.size]])
    counts = np.diff(bounds).tolist()
    return counts if flat[0] == 0 else [0] + counts


def _shape(rng: np.random.Generator, width: int, height: int) -> tuple[str, np.ndarray]:
    kind = rng.choice(["rectangle", "triangle", "ellipse"])
    w, h = rng.uniform(0.1, 0.5) * width, rng.uniform(0.1, 0.5) * height
    x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
    if kind == "rectangle":
        points = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
    elif kind == "triangle":
        points = [(x + rng.uniform(0, w), y), (x + w, y + h), (x, y + h * rng.uniform(0.5, 1))]
    else:
        angles = np.linspace(0, 2 * np.pi, 16, endpoint=False)
        points = list(zip(x + w / 2 + w / 2 * np.cos(angles), y + h / 2 + h / 2 * np.sin(angles)))
    return str(kind), np.round(np.asarray(points, np.float64), 2)


def make_coco(out_dir: str, count: int, seed: int = 0, sizes=(96, 320)) -> str:
    """Writes the data set; returns the annotations file's path."""
    rng = np.random.default_rng(seed)
    image_dir, annotation_dir = os.path.join(out_dir, "images"), os.path.join(out_dir, "annotations")
    os.makedirs(image_dir, exist_ok=True)
    os.makedirs(annotation_dir, exist_ok=True)
    category_of = {c["name"]: c["id"] for c in CATEGORIES}
    images, annotations = [], []
    image_ids = rng.permutation(np.arange(1000, 1000 + 3 * count))[:count]  # not in file order
    for index, image_id in enumerate(image_ids.tolist()):
        height, width = (int(v) for v in rng.integers(sizes[0], sizes[1], 2))
        ys, xs = np.mgrid[0:height, 0:width]
        base = rng.integers(40, 200, 3)
        canvas = np.clip(base + 40 * np.sin(xs[..., None] / rng.uniform(8, 30)) + 30 * np.cos(ys[..., None] / 17.0),
                         0, 255).astype(np.uint8)
        objects = 0 if rng.random() < 0.1 else int(rng.integers(1, 7))
        for _ in range(objects):
            kind, points = _shape(rng, width, height)
            cv2.fillPoly(canvas, [np.round(points).astype(np.int32)], [int(v) for v in rng.integers(0, 256, 3)])
            annotations.append(_polygon_annotation(points, image_id, category_of[kind]))
        if rng.random() < 1 / 8:  # a crowd region, its segmentation a run-length mask
            mask = np.zeros((height, width), np.uint8)
            cx, cy = int(rng.integers(width // 4, 3 * width // 4)), int(rng.integers(height // 4, 3 * height // 4))
            cv2.ellipse(mask, (cx, cy), (width // 6, height // 8), 0, 0, 360, 1, -1)
            rows, columns = np.nonzero(mask)
            annotations.append({"segmentation": {"counts": rle_counts(mask), "size": [height, width]},
                                "area": float(mask.sum()), "iscrowd": 1, "image_id": image_id,
                                "bbox": [float(columns.min()), float(rows.min()), float(columns.max() - columns.min() + 1),
                                         float(rows.max() - rows.min() + 1)],
                                "category_id": category_of["crowd"]})
        if rng.random() < 1 / 12:  # a sliver below the readers' default size threshold (0.1 px)
            x, y = float(rng.uniform(0, width - 2)), float(rng.uniform(0, height - 10))
            annotations.append({"segmentation": [[x, y, x + 0.05, y, x + 0.05, y + 8, x, y + 8]], "area": 0.4,
                                "iscrowd": 0, "image_id": image_id, "bbox": [x, y, 0.05, 8.0],
                                "category_id": category_of["rectangle"]})
        name = f"{index:06d}.jpg"
        cv2.imwrite(os.path.join(image_dir, name), canvas[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
        images.append(_image_entry(name, height, width, image_id))
    return _write_annotations(annotation_dir, images, annotations, "penstock generated shapes")


def _polygon_annotation(points: np.ndarray, image_id: int, category: int) -> dict:
    """A COCO annotation of one polygon object: its segmentation, area and bounding box."""
    left, top = points.min(0)
    right, bottom = points.max(0)
    return {"segmentation": [points.reshape(-1).tolist()], "area": float(cv2.contourArea(points.astype(np.float32))),
            "iscrowd": 0, "image_id": image_id, "bbox": [round(v, 2) for v in (left, top, right - left, bottom - top)],
            "category_id": category}


def _image_entry(name: str, height: int, width: int, image_id: int) -> dict:
    return {"license": 1, "file_name": name, "coco_url": "", "height": height, "width": width,
            "date_captured": "2026-01-01 00:00:00", "flickr_url": "", "id": image_id}


def annotate_photos(out_dir: str, photos: str, count: int, seed: int = 0) -> str:
    """Copies the first ``count`` JPEGs under ``photos`` and writes COCO annotations of 1-6 objects
    each; returns the annotations file's path."""
    import shutil
    rng = np.random.default_rng(seed)
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(photos) for name in names
                   if name.lower().endswith((".jpg", ".jpeg")))[:count]
    if len(files) < count:
        raise SystemExit(f"--photos {photos}: {len(files)} JPEGs, {count} asked for")
    image_dir, annotation_dir = os.path.join(out_dir, "images"), os.path.join(out_dir, "annotations")
    os.makedirs(image_dir, exist_ok=True)
    os.makedirs(annotation_dir, exist_ok=True)
    category_of = {c["name"]: c["id"] for c in CATEGORIES}
    images, annotations = [], []
    for index, source in enumerate(files):
        height, width = _jpeg_size(source)
        image_id = 1000 + 3 * index
        for _ in range(int(rng.integers(1, 7))):
            kind, points = _shape(rng, width, height)
            annotations.append(_polygon_annotation(points, image_id, category_of[kind]))
        name = f"{index:06d}.jpg"
        shutil.copyfile(source, os.path.join(image_dir, name))
        images.append(_image_entry(name, height, width, image_id))
    return _write_annotations(annotation_dir, images, annotations, "penstock annotated photographs")


def _jpeg_size(path: str) -> tuple[int, int]:
    """(height, width) of a JPEG from its frame header (decoded, where no header says it)."""
    with open(path, "rb") as handle:
        data = handle.read()
    at = 2
    while at + 9 < len(data):
        marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            return int.from_bytes(data[at + 5:at + 7], "big"), int.from_bytes(data[at + 7:at + 9], "big")
        at += 2 + length
    return cv2.imread(path, cv2.IMREAD_UNCHANGED).shape[:2]


def _write_annotations(annotation_dir: str, images: list, annotations: list, description: str) -> str:
    for number, annotation in enumerate(annotations, 1):
        annotation["id"] = number
    path = os.path.join(annotation_dir, "instances.json")
    with open(path, "w") as handle:
        json.dump({"info": {"description": description, "version": "1.0", "year": 2026},
                   "licenses": [{"id": 1, "name": "generated", "url": ""}], "images": images,
                   "annotations": annotations, "categories": CATEGORIES}, handle)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("images", type=int, nargs="?", default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", type=int, nargs=2, default=(96, 320), metavar=("MIN", "MAX"),
                        help="image sides are drawn from [MIN, MAX)")
    parser.add_argument("--photos", help="annotate the JPEGs under this folder instead of drawing images")
    args = parser.parse_args()
    if args.photos:
        print(annotate_photos(args.out_dir, args.photos, args.images, args.seed))
    else:
        print(make_coco(args.out_dir, args.images, args.seed, tuple(args.sizes)))


if __name__ == "__main__":
    main()
