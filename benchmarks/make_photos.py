"""Make a folder-per-class JPEG set of large photographs: about 2 megapixels and 500 KiB each by
default, to measure how a pipeline's cost grows with image size beside the ImageNet-sized set.

usage: python benchmarks/make_photos.py OUT_DIR [IMAGES] [CLASSES] [--megapixels M] [--seed S]
Writes OUT_DIR/class_k/photo_i.jpg.

Each image is a region of one of the photographs bundled with penstock (penstock/data), turned
by a small angle, scaled to about M megapixels (aspect 3:4 to 16:9, either orientation), with
sensor-like noise whose strength varies image by image (an upscaled photograph alone compresses
to a fifth of a camera's file), saved at JPEG quality 88-95 with 4:2:0 chroma subsampling.
"""
from __future__ import annotations

import argparse
import glob
import os
from concurrent.futures import ProcessPoolExecutor

import cv2
import numpy as np

SOURCES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "penstock", "data",
                                        "*.jpg")))


def make_photo(index: int, out_dir: str, classes: int, megapixels: float, seed: int) -> int:
    """Writes image ``index``; returns its size in bytes."""
    rng = np.random.default_rng([seed, index])
    source = cv2.imread(SOURCES[index % len(SOURCES)], cv2.IMREAD_COLOR)
    height, width = source.shape[:2]
    aspect = rng.uniform(4 / 3, 16 / 9) if rng.random() < 0.8 else rng.uniform(1.0, 4 / 3)
    if rng.random() < 0.3:
        aspect = 1 / aspect  # portrait
    out_width = int(round(np.sqrt(megapixels * 1e6 * aspect)))
    out_height = int(round(out_width / aspect))
    # a region of the source (at least half of it each way), turned by up to 8 degrees about its centre
    region = rng.uniform(0.5, 1.0)
    crop_width = min(width, region * width)
    crop_height = min(height, crop_width / aspect)
    crop_width = crop_height * aspect
    centre_x = rng.uniform(crop_width / 2, width - crop_width / 2)
    centre_y = rng.uniform(crop_height / 2, height - crop_height / 2)
    turn = cv2.getRotationMatrix2D((centre_x, centre_y), rng.uniform(-8, 8), 1.0)
    scale = out_width / crop_width
    to_output = np.array([[scale, 0, out_width / 2 - scale * centre_x], [0, scale, out_height / 2 - scale * centre_y]])
    matrix = to_output @ np.vstack([turn, [0, 0, 1]])
    image = cv2.warpAffine(source, matrix, (out_width, out_height), flags=cv2.INTER_CUBIC,
                           borderMode=cv2.BORDER_REFLECT_101)
    noise = rng.normal(0.0, rng.uniform(3.5, 7.5), image.shape)
    image = np.clip(image + noise, 0, 255).astype(np.uint8)
    folder = os.path.join(out_dir, f"class_{index % classes:03d}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"photo_{index:06d}.jpg")
    quality = int(rng.integers(88, 96))
    cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                              cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420])
    return os.path.getsize(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("images", nargs="?", type=int, default=2048)
    parser.add_argument("classes", nargs="?", type=int, default=10)
    parser.add_argument("--megapixels", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not SOURCES:
        raise SystemExit("no photographs found in penstock/data")
    with ProcessPoolExecutor() as pool:
        sizes = list(pool.map(make_photo, range(args.images), [args.out_dir] * args.images,
                              [args.classes] * args.images, [args.megapixels] * args.images,
                              [args.seed] * args.images, chunksize=16))
    print(f"{args.images} photographs in {args.out_dir}: {np.mean(sizes) / 1024:.0f} KiB mean, "
          f"{min(sizes) / 1024:.0f}-{max(sizes) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
