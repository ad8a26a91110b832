"""What opening a large COCO instances file costs: penstock's readers.coco (pipeline build and first
batch) against pycocotools' ``COCO(path)``, each in a fresh process, on the same generated file.

usage: python benchmarks/coco_open.py [--boxes 1000000] [--images 125000] [--repeat 3] [--keep DIR]
       [--reader-args '{"polygon_masks": true}']

The file is written as COCO writes its instances files: every annotation with an id, image_id,
category_id, bbox, area, iscrowd and a polygon segmentation of 8 vertices (80 categories). The
images are copies of one small JPEG, so that the reader finds its files. Each measurement runs
in a child process: wall time of the open alone (after the imports), and the child's peak resident
memory (ru_maxrss), in all and above what it held after its imports. The best of --repeat runs is
printed, with ratios to pycocotools.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

VERTICES = 8
CATEGORIES = 80


def make_file(folder: str, boxes: int, images: int, seed: int = 0) -> tuple[str, str]:
    """Writes FOLDER/annotations.json and FOLDER/images/; returns their paths."""
    rng = np.random.default_rng(seed)
    image_root = os.path.join(folder, "images")
    os.makedirs(image_root, exist_ok=True)
    widths, heights = rng.integers(320, 640, images), rng.integers(240, 480, images)
    image_ids = rng.permutation(images) + 1  # listed out of id order, as COCO's files are
    image_entries = [{"license": 1, "file_name": f"{image_id:012d}.jpg", "coco_url": "", "height": int(h),
                      "width": int(w), "date_captured": "2026-01-01 00:00:00", "flickr_url": "", "id": int(image_id)}
                     for image_id, w, h in zip(image_ids.tolist(), widths, heights)]
    owner = rng.integers(0, images, boxes)
    w, h = widths[owner], heights[owner]
    size = rng.uniform(0.05, 0.5, (boxes, 2)) * np.stack([w, h], 1)
    corner = rng.uniform(0, 1, (boxes, 2)) * (np.stack([w, h], 1) - size)
    angles = np.linspace(0, 2 * np.pi, VERTICES, endpoint=False)
    centre, radius = corner + size / 2, size / 2
    polygon = np.round(np.stack([centre[:, :1] + radius[:, :1] * np.cos(angles),
                                 centre[:, 1:] + radius[:, 1:] * np.sin(angles)], 2), 2).reshape(boxes, -1)
    bbox = np.round(np.concatenate([corner, size], 1), 2)
    categories = rng.integers(1, CATEGORIES + 1, boxes)
    columns = zip(polygon.tolist(), (size[:, 0] * size[:, 1]).tolist(), owner.tolist(), bbox.tolist(),
                  categories.tolist())
    annotations = [{"segmentation": [p], "area": round(a, 2), "iscrowd": 0, "image_id": int(image_ids[o]),
                    "bbox": b, "category_id": c, "id": number}
                   for number, (p, a, o, b, c) in enumerate(columns, 1)]
    path = os.path.join(folder, "annotations.json")
    with open(path, "w") as handle:
        json.dump({"info": {"description": "penstock coco_open benchmark"}, "licenses": [{"id": 1, "name": "x"}],
                   "images": image_entries, "annotations": annotations,
                   "categories": [{"id": i, "name": f"class{i}", "supercategory": "thing"}
                                  for i in range(1, CATEGORIES + 1)]}, handle)
    import cv2
    jpeg = cv2.imencode(".jpg", np.full((8, 8, 3), 128, np.uint8))[1].tobytes()
    for entry in image_entries:
        with open(os.path.join(image_root, entry["file_name"]), "wb") as handle:
            handle.write(jpeg)
    return path, image_root


CHILD = r"""
import json, resource, sys, time
tool, path, image_root, reader_args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if tool == "penstock":
    from penstock import fn, pipeline_def
else:
    from pycocotools.coco import COCO
after_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if tool == "penstock":
    @pipeline_def(batch_size=32, num_threads=2, device_id=None)
    def pipe():
        return tuple(fn.readers.coco(file_root=image_root, annotations_file=path, **reader_args))
    built = pipe()
    built.build()
    built.run()
    seconds = time.perf_counter() - start
    built.close()
else:
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):  # COCO() prints its progress
        COCO(path)
    seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_kib": peak, "after_imports_kib": after_imports}))
"""


def measure(tool: str, path: str, image_root: str, reader_args: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, tool, path, image_root, json.dumps(reader_args)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{tool} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=1_000_000)
    parser.add_argument("--images", type=int, default=125_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the best is printed")
    parser.add_argument("--keep", metavar="DIR", help="write the file there (and reuse it when it is there)")
    parser.add_argument("--reader-args", default="{}", help="more readers.coco arguments, as JSON")
    parser.add_argument("--generate", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        make_file(args.generate, args.boxes, args.images)
        return
    reader_args = json.loads(args.reader_args)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or scratch
        path = os.path.join(folder, "annotations.json")
        image_root = os.path.join(folder, "images")
        if not (args.keep and os.path.exists(path)):
            # in a process of its own: Linux keeps a process's peak memory across fork and exec, and
            # the children measured would inherit the generator's
            subprocess.run([sys.executable, __file__, "--generate", folder, "--boxes", str(args.boxes),
                            "--images", str(args.images)], check=True)
        print(f"{args.boxes:,} boxes over {args.images:,} images, {os.path.getsize(path) / 2**20:.0f} MiB of JSON; "
              f"readers.coco arguments {reader_args}; best of {args.repeat}")
        best = {}
        for tool in ("pycocotools", "penstock"):
            runs = [measure(tool, path, image_root, reader_args) for _ in range(args.repeat)]
            best[tool] = {"seconds": min(r["seconds"] for r in runs),
                          "peak": min(r["peak_kib"] for r in runs) / 1024,
                          "added": min(r["peak_kib"] - r["after_imports_kib"] for r in runs) / 1024}
    reference = best["pycocotools"]
    print(f"{'':12} {'open s':>8} {'peak MiB':>9} {'added MiB':>10} {'time x':>7} {'peak x':>7} {'added x':>8}")
    for tool, row in best.items():
        print(f"{tool:12} {row['seconds']:8.2f} {row['peak']:9.0f} {row['added']:10.0f} "
              f"{row['seconds'] / reference['seconds']:7.2f} {row['peak'] / reference['peak']:7.2f} "
              f"{row['added'] / reference['added']:8.2f}")


if __name__ == "__main__":
    main()
