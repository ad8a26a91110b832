"""Small ragged batches the cases share: images of several dtypes and layouts, boxes, coordinates."""
from __future__ import annotations

import os

import numpy as np

from conformance.harness import Data

SIZES = ((6, 8), (9, 7), (5, 5))  # (height, width): ragged, one odd, one square


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(0, 255, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, shape, dtype=dtype) \
        if dtype.itemsize > 1 else rng.integers(info.min, info.max + 1, shape, dtype=dtype)


def images(dtype="uint8", layout="HWC", channels=3, sizes=SIZES, frames=2, seed=0) -> Data:
    """A batch of images: layout HWC, CHW, HW, FHWC, FCHW or CFHW (``frames`` frames), DHWC or CDHW
    (depth = height)."""
    samples = []
    for index, (height, width) in enumerate(sizes):
        shape = {"HWC": (height, width, channels), "CHW": (channels, height, width), "HW": (height, width),
                 "FHWC": (frames, height, width, channels), "DHWC": (height, height, width, channels),
                 "FCHW": (frames, channels, height, width), "CDHW": (channels, height, height, width),
                 "CFHW": (channels, frames, height, width)}[layout]
        samples.append(_values(shape, dtype, seed + index))
    return Data(samples, layout)


def tensors(shapes, dtype="float32", layout=None, seed=0) -> Data:
    """A batch of random tensors of the given shapes."""
    return Data([_values(shape, dtype, seed + index) for index, shape in enumerate(shapes)], layout)


def constant_images(value, dtype="uint8", shape=(32, 32, 3), count=3) -> Data:
    """Flat images: what random operators add shows in the outputs' statistics."""
    return Data([np.full(shape, value, dtype) for _ in range(count)], "HWC")


def boxes(counts=(3, 1, 2), ltrb=True, seed=0) -> Data:
    """Per sample, ``count`` boxes inside the unit square: [l, t, r, b] or [x, y, w, h], float32."""
    samples = []
    for index, count in enumerate(counts):
        rng = np.random.default_rng(seed + index)
        start = rng.uniform(0.0, 0.5, (count, 2))
        size = rng.uniform(0.1, 0.5, (count, 2))
        samples.append(np.hstack([start, start + size if ltrb else size]).astype(np.float32))
    return Data(samples)


def f32(*values):
    return np.asarray(values, np.float32)


# ---- encoded images and files on disk ------------------------------------------------------------
FOLDER = None  # pytest's temporary folder of the session (conftest); a folder of its own otherwise


def folder(name: str):
    """A subfolder of the tier's temporary folder, made once; the data sets below write into it."""
    global FOLDER
    if FOLDER is None:
        import tempfile
        FOLDER = tempfile.mkdtemp(prefix="conformance-")
    path = os.path.join(str(FOLDER), name)
    os.makedirs(path, exist_ok=True)
    return path


def picture(height, width, channels=3, seed=0):
    """A smooth uint8 image (gradients and a disc): lossy codecs keep it within a few levels."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    planes = [(x * 255 / max(width - 1, 1)), (y * 255 / max(height - 1, 1)),
              np.where((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(height, width) / 3) ** 2, 200.0, 40.0)]
    image = np.stack([planes[(seed + c) % 3] for c in range(channels)], axis=-1)
    return image.round().astype(np.uint8)


def encode(image, extension: str) -> np.ndarray:
    """``image`` (HWC, RGB order) encoded as ``extension`` ('.jpg', '.png', ...): 1-D uint8 bytes."""
    import cv2
    bgr = image[..., ::-1] if image.ndim == 3 and image.shape[2] == 3 else image
    params = [cv2.IMWRITE_JPEG_QUALITY, 95] if extension == ".jpg" else \
        [cv2.IMWRITE_WEBP_QUALITY, 101] if extension == ".webp" else []
    ok, data = cv2.imencode(extension, np.ascontiguousarray(bgr), params)
    assert ok, f"OpenCV could not encode {extension}"
    return data.ravel()


def encoded(extension=".jpg", sizes=((24, 32), (30, 20), (16, 16)), channels=3) -> Data:
    """A batch of encoded images (1-D uint8 samples) of the given (height, width) sizes."""
    return Data([encode(picture(h, w, channels, i), extension) for i, (h, w) in enumerate(sizes)])


def _once(make):
    """A data set maker that writes its files the first time it is asked for them."""
    made = {}

    def cached():
        key = str(FOLDER)
        if key not in made:
            made[key] = make()
        return made[key]
    cached.__name__ = make.__name__
    return cached


@_once
def image_tree():
    """file_root/<class>/<name>.jpg|png: 7 images in 3 classes, and a file_list of them."""
    root = folder("images")
    entries = []
    for index in range(7):
        label = index % 3
        extension = ".png" if index % 2 else ".jpg"
        os.makedirs(os.path.join(root, f"class{label}"), exist_ok=True)
        name = f"class{label}/image{index}{extension}"
        with open(os.path.join(root, name), "wb") as file:
            file.write(encode(picture(10 + index, 12 + 2 * index, 3, index), extension).tobytes())
        entries.append((name, label * 10 + index))
    with open(os.path.join(root, "notes.txt"), "w") as file:
        file.write("not an image\n")
    with open(os.path.join(root, "list.txt"), "w") as file:
        file.writelines(f"{name} {label}\n" for name, label in entries)
    return {"root": root, "list": os.path.join(root, "list.txt"), "names": [n for n, _ in entries],
            "labels": [label for _, label in entries]}


@_once
def numpy_files():
    """.npy files of several dtypes and shapes (and a Fortran-ordered one)."""
    root = folder("numpy")
    names = []
    for index, (shape, dtype) in enumerate([((4, 6), "float32"), ((5, 3), "float32"), ((4, 4), "float32"),
                                            ((6, 2), "float32"), ((3, 7), "float32")]):
        array = np.arange(np.prod(shape), dtype=dtype).reshape(shape) + index
        name = f"array{index}.npy"
        np.save(os.path.join(root, name), np.asfortranarray(array) if index == 2 else array)
        names.append(name)
    np.save(os.path.join(root, "other.npz.npy"), np.zeros((2, 2), np.int16))
    with open(os.path.join(root, "list.txt"), "w") as file:
        file.writelines(name + "\n" for name in names)
    return {"root": root, "list": os.path.join(root, "list.txt"), "names": names}


@_once
def recordio():
    """An MXNet RecordIO file of 5 JPEG images with float labels, and its index."""
    import struct
    root = folder("mxnet")
    path, index_path = os.path.join(root, "data.rec"), os.path.join(root, "data.idx")
    with open(path, "wb") as data, open(index_path, "w") as index:
        for key in range(5):
            image = encode(picture(8 + key, 10 + key, 3, key), ".jpg").tobytes()
            record = struct.pack("<IfQQ", 0, float(key) + 0.5, key, 0) + image
            index.write(f"{key}\t{data.tell()}\n")
            data.write(struct.pack("<II", 0xced7230a, len(record)))
            data.write(record + b"\0" * (-len(record) % 4))
    return {"path": path, "index_path": index_path}


@_once
def webdataset():
    """A webdataset tar of 5 samples (jpg, cls and npy-like raw components; one lacks its cls), and
    its index made by DALI's own rule (wds2idx's format)."""
    import io
    import tarfile
    root = folder("webdataset")
    path = os.path.join(root, "data.tar")
    members = []
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key in range(5):
            parts = {"jpg": encode(picture(8, 8 + key, 3, key), ".jpg").tobytes(),
                     "bin": np.arange(4 + key, dtype=np.int16).tobytes()}
            if key != 3:
                parts["cls"] = str(key).encode()
            for extension, payload in parts.items():
                info = tarfile.TarInfo(f"sample{key:03d}.{extension}")
                info.size = len(payload)
                members.append((key, extension, tar.offset, len(payload)))
                tar.addfile(info, io.BytesIO(payload))
    index_path = os.path.join(root, "data.idx")
    with open(index_path, "w") as index:
        index.write(f"v1.2 {len(set(key for key, *_ in members))}\n")
        for key in sorted(set(key for key, *_ in members)):
            own = [m for m in members if m[0] == key]
            index.write(" ".join(f"{ext} {offset} {size} sample{key:03d}.{ext}"
                                 for _, ext, offset, size in own) + "\n")
    return {"path": path, "index_path": index_path}


@_once
def sequences():
    """file_root/<sequence>/<frame>.png: two sequences of 5 and 3 frames."""
    root = folder("sequences")
    for name, frames in (("walk", 5), ("run", 3)):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for frame in range(frames):
            with open(os.path.join(root, name, f"{frame:02d}.png"), "wb") as file:
                file.write(encode(picture(6, 8, 3, frame), ".png").tobytes())
    return {"root": root}


@_once
def videos():
    """file_root/<class>/<video>.webm: VP9 clips (what DALI's CPU decoder reads) of 30, 19 and 41
    frames in two classes; "files" lists them, "list" is a file_list of them with ranges."""
    from video_clips import encoded_clip
    root = folder("videos")
    paths = []
    for label, name, frames, height, width in ((0, "x", 30, 32, 48), (0, "y", 19, 24, 32), (1, "z", 41, 32, 40)):
        os.makedirs(os.path.join(root, f"c{label}"), exist_ok=True)
        paths.append(os.path.join(root, f"c{label}", f"{name}.webm"))
        encoded_clip("libvpx-vp9", "webm", "yuv420p", frames, height, width, seed=label + frames).tofile(paths[-1])
    listed = os.path.join(root, "list.txt")
    with open(listed, "w") as file:
        file.write(f"{paths[0]} 4 0.2 0.9\n{paths[1]} 1\n{paths[2]} 2 0.1 1.5\n")
    frame_list = os.path.join(root, "frames.txt")
    with open(frame_list, "w") as file:
        file.write(f"{paths[0]} 4 3 20\n{paths[1]} 1\n{paths[2]} 2 -30 -2\n")
    return {"root": root, "files": paths, "list": listed, "frames": frame_list}


@_once
def coco():
    """A COCO folder: 4 images, boxes of 3 categories (ids 1, 5, 9), a crowd box, a tiny box, one image
    with no annotations, polygon and RLE-free segmentations."""
    import json
    root = folder("coco")
    images, annotations = [], []
    for index in range(4):
        name = f"img{index}.jpg"
        height, width = 20 + 4 * index, 24 + 2 * index
        with open(os.path.join(root, name), "wb") as file:
            file.write(encode(picture(height, width, 3, index), ".jpg").tobytes())
        images.append({"id": 100 + index, "file_name": name, "height": height, "width": width})
    boxes = [(100, 1, [2, 3, 10, 8], 0), (100, 5, [5, 5, 6, 6], 0), (101, 9, [1, 1, 20, 15], 1),
             (101, 1, [3, 4, 0.05, 0.05], 0), (103, 5, [0, 0, 12, 10], 0), (103, 9, [10, 2, 8, 9], 0)]
    for number, (image_id, category, (x, y, w, h), crowd) in enumerate(boxes):
        annotations.append({"id": number + 1, "image_id": image_id, "category_id": category, "bbox": [x, y, w, h],
                            "iscrowd": crowd, "area": w * h,
                            "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]})
    with open(os.path.join(root, "annotations.json"), "w") as file:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": i, "name": f"c{i}"} for i in (1, 5, 9)]}, file)
    return {"root": root, "annotations": os.path.join(root, "annotations.json"),
            "images": [image["file_name"] for image in images]}


def paths(names, root) -> Data:
    """File paths as DALI's io.file.read takes them: 1-D uint8 arrays of their UTF-8 bytes."""
    return Data([np.frombuffer(os.path.join(root, name).encode(), np.uint8) for name in names])


def oriented_jpeg(orientation=6, size=(12, 20)) -> np.ndarray:
    """A JPEG whose EXIF orientation tag asks for a rotation (6: 90 degrees clockwise)."""
    import io
    from PIL import Image
    image = Image.fromarray(picture(*size, 3, 1))
    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=95, exif=exif)
    return np.frombuffer(buffer.getvalue(), np.uint8)


def on_disk(dataset, key, pick=None):
    """An argument naming a data set's files (``dataset()[key]``, through ``pick`` if given), made
    when the case runs."""
    from conformance.harness import Later
    return Later(lambda: dataset()[key] if pick is None else pick(dataset()[key]))
