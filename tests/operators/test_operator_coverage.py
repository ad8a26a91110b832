"""Every operator on every device it has, from the registry: against an independent reference
(OpenCV, Pillow, numpy, torch) with a stated tolerance, and its GPU form against its CPU form.

``CASES`` holds one case per operator (the first operators' here, each later family's in
``tests/cases_<family>.py``; ``tests/operator_cases.py`` has ``Case`` and ``run_case``). ``test_every_operator_and_device_has_a_case`` fails when an
operator (or a device of one) is registered without a case here, so a new operator cannot land
untested. ``run_case`` runs a case on any device: on the GPU where there is one, else on the
emulated GPU (CPU tensors, the Triton kernels in Triton's interpreter), switched in-process.

Tolerances, in grey levels unless said otherwise: geometry that only moves pixels is exact;
resampling filters against Pillow's antialiased ones within a mean of 1 and a maximum of 5 (the
CPU low-passes with a Gaussian, the GPU kernel uses the exact filter); JPEG decoding against
Pillow within a mean of 0.5 and a maximum of 4 (two libjpeg-turbo builds, upsampling may differ);
normalization within float32 rounding. GPU against CPU: within twice the reference's tolerance
(each is within it, perhaps on opposite sides).
"""
from __future__ import annotations

import importlib
import pathlib

import cv2
import numpy as np
import pytest
import torch
from conftest import assert_close, encode, noise_image, pillow_decode
from operator_cases import Case, compare_outputs, on_device, image_op, ragged_images, run_case
from PIL import Image

from penstock import fn, registry, types


def pillow_resize(image, size, resample=Image.BILINEAR):
    planes = [np.asarray(Image.fromarray(image[:, :, c]).resize(size[::-1], resample)) for c in range(image.shape[2])]
    return np.stack(planes, axis=2)


def cv2_rotate(image, angle):
    """OpenCV's rotation about the centre into the bounding box of the rotated image (a reference
    written from OpenCV's own getRotationMatrix2D, not penstock's matrix)."""
    height, width = image.shape[:2]
    radians = np.radians(angle)
    out_w = int(np.ceil(width * abs(np.cos(radians)) + height * abs(np.sin(radians)) - 1e-6))
    out_h = int(np.ceil(width * abs(np.sin(radians)) + height * abs(np.cos(radians)) - 1e-6))
    out_w += (out_w - width) % 2
    out_h += (out_h - height) % 2
    matrix = cv2.getRotationMatrix2D(((width - 1) / 2, (height - 1) / 2), angle, 1.0)
    matrix[:, 2] += ((out_w - width) / 2, (out_h - height) / 2)
    return cv2.warpAffine(image, matrix, (out_w, out_h), flags=cv2.INTER_LINEAR, borderValue=(0, 0, 0))


def encoded(images, fmt="PNG", **save_args):
    return [np.frombuffer(encode(image, fmt, **save_args), np.uint8) for image in images]


def decoded_originals(samples):
    return [pillow_decode(sample.tobytes()) for sample in samples]


def found_window(output, original):
    """Whether ``output`` is a window of ``original`` (noise images: the match is exact and unique)."""
    height, width = output.shape[:2]
    for top in range(original.shape[0] - height + 1):
        for left in range(original.shape[1] - width + 1):
            if np.array_equal(original[top:top + height, left:left + width], output):
                return True
    return False


def check_random_windows(samples, outputs):
    for output, original in zip(outputs, decoded_originals(samples)):
        area = output.shape[0] * output.shape[1] / (original.shape[0] * original.shape[1])
        assert 0.08 * 0.9 <= area <= 1.0 and found_window(output, original), output.shape


def check_distribution(low, high, mean, std, tolerance):
    def check(samples, outputs):
        values = np.concatenate([np.ravel(output) for output in outputs]).astype(np.float64)
        assert values.min() >= low and values.max() <= high
        assert abs(values.mean() - mean) <= tolerance and abs(values.std() - std) <= tolerance
    return check


def anchor(size, crop, position):
    return int(np.floor(position * (size - crop) + 0.5))  # DALI's rounding of the window's start


FEED = [np.arange(12, dtype=np.float32).reshape(3, 4) + i for i in range(5)]
MEAN, STD = (120.0, 110.0, 100.0), (60.0, 55.0, 50.0)

CASES: dict[str, Case] = {
    "resize": Case(ragged_images, image_op("resize", size=(12, 14)),
                   lambda samples, _: [pillow_resize(s, (12, 14)) for s in samples], max_abs=5, mean_abs=1.0),
    "crop": Case(lambda: ragged_images(smooth=False), image_op("crop", crop=(15, 12), crop_pos_x=0.3),
                 lambda samples, _: [s[anchor(s.shape[0], 15, 0.5):][:15, anchor(s.shape[1], 12, 0.3):][:, :12]
                                     for s in samples]),
    "flip": Case(lambda: ragged_images(smooth=False), image_op("flip", horizontal=1, vertical=1),
                 lambda samples, _: [cv2.flip(s, -1) for s in samples]),
    "transpose": Case(lambda: ragged_images(smooth=False), image_op("transpose", perm=(2, 0, 1)),
                      lambda samples, _: [torch.from_numpy(s).permute(2, 0, 1).numpy() for s in samples]),
    "rotate": Case(ragged_images, image_op("rotate", angle=30.0, fill_value=0.0),
                   lambda samples, _: [cv2_rotate(s, 30.0) for s in samples], max_abs=60, mean_abs=1.5),
    "crop_mirror_normalize": Case(
        ragged_images, image_op("crop_mirror_normalize", crop=(16, 16), mirror=1, mean=MEAN, std=STD),
        lambda samples, _: [((s[anchor(s.shape[0], 16, 0.5):][:16, anchor(s.shape[1], 16, 0.5):][:, :16][:, ::-1]
                              - np.float32(MEAN)) / np.float32(STD)).transpose(2, 0, 1) for s in samples],
        max_abs=1e-5, rtol=1e-5),
    "normalize": Case(ragged_images, image_op("normalize", axes=(0, 1)),
                      lambda samples, _: [(s - s.mean((0, 1))) / s.std((0, 1)) for s in
                                          (x.astype(np.float64) for x in samples)], max_abs=1e-4),
    # halves of the GPU form go to even (as DALI's GPU): a level from the CPU's at most
    "cast": Case(lambda: [np.array([[[0.5, 1.5, 2.5]], [[-0.5, 254.5, 300.0]]], np.float32)],
                 image_op("cast", dtype=types.UINT8),
                 lambda samples, _: [np.clip(np.sign(s) * np.floor(np.abs(s) + 0.5), 0, 255).astype(np.uint8)
                                     for s in samples], max_abs=1),  # halves away from zero, as DALI's CPU
    "decoders.image": Case(lambda: encoded(ragged_images(), "JPEG", quality=90), image_op("decoders.image"),
                           lambda samples, _: decoded_originals(samples), max_abs=4, mean_abs=0.5),
    "decoders.image_random_crop": Case(lambda: encoded(ragged_images(smooth=False)),
                                       image_op("decoders.image_random_crop"), check_random_windows),
    "decoders.image_crop": Case(lambda: encoded(ragged_images(smooth=False)),
                                image_op("decoders.image_crop", crop=(16, 14), crop_pos_y=0.2),
                                lambda samples, _: [s[anchor(s.shape[0], 16, 0.2):][:16, anchor(s.shape[1], 14, 0.5):]
                                                    [:, :14] for s in decoded_originals(samples)]),
    "decoders.image_slice": Case(lambda: encoded(ragged_images(smooth=False)),
                                 image_op("decoders.image_slice", start=(3, 2), shape=(9, 10)),  # (x, y)
                                 lambda samples, _: [s[2:12, 3:12] for s in decoded_originals(samples)]),
    "peek_image_shape": Case(lambda: encoded(ragged_images(), "JPEG") + encoded(ragged_images(), "PNG"),
                             image_op("peek_image_shape"),
                             lambda samples, _: [np.array(pillow_decode(s.tobytes()).shape) for s in samples]),
    "external_source": Case(lambda: FEED, lambda node, device: node, lambda samples, _: samples),
    "_to_gpu": Case(lambda: FEED, lambda node, device: node.gpu(), lambda samples, _: samples),
    "random.coin_flip": Case(list, lambda node, device: fn.random.coin_flip(probability=0.3, shape=(64,)),
                             check_distribution(0, 1, 0.3, np.sqrt(0.3 * 0.7), 0.05)),
    "random.uniform": Case(list, lambda node, device: fn.random.uniform(range=(2.0, 4.0), shape=(64,)),
                           check_distribution(2.0, 4.0, 3.0, 2 / np.sqrt(12), 0.05)),
    "random.normal": Case(list, lambda node, device: fn.random.normal(mean=1.0, stddev=2.0, shape=(64,)),
                          check_distribution(-20, 20, 1.0, 2.0, 0.15)),
    # DataNode arithmetic against numpy's (float32 throughout: no promotion question here)
    "_arithmetic": Case(lambda: FEED, lambda node, device: (on_device(node, device) * 0.5 - 3) / (on_device(node, device) + 1),
                        lambda samples, _: [(s * np.float32(0.5) - np.float32(3)) / (s + np.float32(1))
                                            for s in samples], rtol=1e-6),
    # the operators of conditionals: split by a per-sample predicate, one branch flipped, merged back
    "_split": Case(ragged_images, lambda node, device: _split_flip_merge(node, device),
                   lambda samples, _: [s[:, ::-1] if sum(s.shape) > 60 else s for s in samples]),
    "_merge": Case(ragged_images, lambda node, device: _split_flip_merge(node, device),
                   lambda samples, _: [s[:, ::-1] if sum(s.shape) > 60 else s for s in samples]),
    # tensor manipulation against numpy's
    "slice": Case(lambda: ragged_images(smooth=False),
                  lambda node, device: fn.slice(on_device(node, device), [0.25, 0.5], [0.5, 0.25]),  # x, y as DALI
                  lambda samples, _: [s[int(np.floor(0.5 * s.shape[0] + 0.5)):int(np.floor(0.75 * s.shape[0] + 0.5)),
                                        int(np.floor(0.25 * s.shape[1] + 0.5)):int(np.floor(0.75 * s.shape[1] + 0.5))]
                                      for s in samples]),
    "element_extract": Case(lambda: FEED, lambda node, device: fn.element_extract(on_device(node, device), element_map=[2]),
                            lambda samples, _: [s[2] for s in samples]),
    "cast_like": Case(lambda: [s * 40 - 100 for s in FEED],
                      lambda node, device: fn.cast_like(on_device(node, device), fn.cast(on_device(node, device), dtype=types.UINT8)),
                      lambda samples, _: [np.clip(np.sign(s) * np.floor(np.abs(s) + 0.5), 0, 255).astype(np.uint8)
                                     for s in samples]),  # halves away from zero, as DALI
    "get_property": Case(lambda: ragged_images(), lambda node, device: fn.get_property(on_device(node, device),
                                                                                        key="layout"),
                         lambda samples, _: [np.frombuffer(b"HWC", np.uint8) for _ in samples]),
    "constant": Case(list, lambda node, device: fn.constant(fdata=[1.5, 2.5, 3.5, 4.5], shape=(2, 2)),
                     lambda samples, outputs: [np.array([[1.5, 2.5], [3.5, 4.5]], np.float32)] * len(outputs)),
    "random.beta": Case(list, lambda node, device: fn.random.beta(alpha=2.0, beta=5.0, shape=(400,)),
                        check_distribution(0, 1, 2 / 7, np.sqrt(10 / (49 * 8)), 0.02)),
    "random.choice": Case(list, lambda node, device: fn.random.choice([1, 3, 5], p=[0.5, 0.25, 0.25], shape=(400,)),
                          check_distribution(1, 5, 2.5, np.sqrt(0.5 * 2.25 + 0.25 * 0.25 + 0.25 * 6.25), 0.15)),
    "pad": Case(lambda: ragged_images(smooth=False), lambda node, device: fn.pad(on_device(node, device), axes=(0, 1),
                                                                                 fill_value=7, align=(8,)),
                lambda samples, _: [np.pad(s, ((0, 40 - s.shape[0]), (0, 32 - s.shape[1]), (0, 0)), constant_values=7)
                                    for s in samples]),
    "permute_batch": Case(lambda: FEED, lambda node, device: fn.permute_batch(on_device(node, device), indices=[4, 0, 0, 2, 1]),
                          lambda samples, _: [samples[i] for i in (4, 0, 0, 2, 1)]),
    "batch_permutation": Case(list, lambda node, device: fn.batch_permutation(no_fixed_points=True),
                              lambda samples, outputs: _check_permutation(outputs)),
    "zeros": Case(list, lambda node, device: fn.zeros(shape=(2, 3), dtype=types.FLOAT),
                  lambda samples, outputs: [np.zeros((2, 3), np.float32)] * len(outputs)),
    "ones": Case(list, lambda node, device: fn.ones(shape=(4,)),
                 lambda samples, outputs: [np.ones(4, np.int32)] * len(outputs)),
    "full": Case(lambda: [s[:1] for s in FEED], lambda node, device: fn.full(on_device(node, device), shape=(2, 3, 4)),
                 lambda samples, _: [np.broadcast_to(s, (2, 3, 4)) for s in samples]),
    "full_like": Case(lambda: FEED, lambda node, device: fn.full_like(on_device(node, device),
                                                                       on_device(fn.constant(fdata=[1.5, 2.0, 2.5, 3.0]), device)),
                      lambda samples, _: [np.broadcast_to(np.float32([1.5, 2.0, 2.5, 3.0]), s.shape) for s in samples]),
    "zeros_like": Case(lambda: FEED, lambda node, device: fn.zeros_like(on_device(node, device)),
                       lambda samples, _: [np.zeros_like(s) for s in samples]),
    "ones_like": Case(lambda: FEED, lambda node, device: fn.ones_like(on_device(node, device), dtype=types.UINT8),
                      lambda samples, _: [np.ones(s.shape, np.uint8) for s in samples]),
    "shapes": Case(lambda: FEED, lambda node, device: fn.shapes(on_device(node, device)),
                   lambda samples, _: [np.array(s.shape, np.int64) for s in samples]),
    "reshape": Case(lambda: FEED, lambda node, device: fn.reshape(on_device(node, device), shape=(4, 3)),
                    lambda samples, _: [s.reshape(4, 3) for s in samples]),
    "reinterpret": Case(lambda: FEED, lambda node, device: fn.reinterpret(on_device(node, device), dtype=types.INT16),
                        lambda samples, _: [s.view(np.int16) for s in samples]),
    "squeeze": Case(lambda: [s[None] for s in FEED], lambda node, device: fn.squeeze(on_device(node, device), axes=(0,)),
                    lambda samples, _: [s[0] for s in samples]),
    "expand_dims": Case(lambda: FEED, lambda node, device: fn.expand_dims(on_device(node, device), axes=(0, 2)),
                        lambda samples, _: [s[None, :, None] for s in samples]),
    "cat": Case(lambda: FEED, lambda node, device: fn.cat(on_device(node, device), on_device(node, device) * 2, axis=1),
                lambda samples, _: [np.concatenate([s, s * 2], axis=1) for s in samples]),
    "stack": Case(lambda: FEED, lambda node, device: fn.stack(on_device(node, device), on_device(node, device), axis=1),
                  lambda samples, _: [np.stack([s, s], axis=1) for s in samples]),
    "copy": Case(lambda: FEED, lambda node, device: fn.copy(on_device(node, device)), lambda samples, _: samples),
    # what x[...] on a DataNode makes
    "tensor_subscript": Case(lambda: FEED, lambda node, device: on_device(node, device)[1:, -2],
                             lambda samples, _: [s[1:, -2] for s in samples]),
    "one_hot": Case(lambda: [np.array(i % 3, np.int32) for i in range(5)],
                    lambda node, device: fn.one_hot(on_device(node, device), num_classes=3),
                    lambda samples, _: [np.eye(3, dtype=np.float32)[int(s)] for s in samples]),
    **{f"reductions.{kind}": Case(lambda: FEED, lambda node, device, kind=kind: getattr(fn.reductions, kind)(
        on_device(node, device), axes=(1,)), lambda samples, _, reference=reference: [reference(s, axis=1).astype(s.dtype)
                                                                         for s in samples],
        rtol=1e-6) for kind, reference in (("sum", np.sum), ("min", np.min), ("max", np.max), ("mean", np.mean),
                                            ("mean_square", lambda s, axis: np.mean(s * s, axis=axis)),
                                            ("rms", lambda s, axis: np.sqrt(np.mean(s * s, axis=axis))))},
    **{f"reductions.{kind}": Case(lambda: FEED, lambda node, device, kind=kind: getattr(fn.reductions, kind)(
        on_device(node, device), fn.reductions.mean(on_device(node, device), axes=(0,), keep_dims=True), axes=(0,), ddof=1),
        lambda samples, _, reference=reference: [reference(s, axis=0, ddof=1).astype(np.float32) for s in samples],
        rtol=1e-6)
       for kind, reference in (("std_dev", np.std), ("variance", np.var))},
    # the functions against numpy's results for the same samples
    # (python_function gets CuPy arrays on the GPU: numpy's functions dispatch to CuPy's)
    "python_function": Case(lambda: FEED, lambda node, device: fn.python_function(
        on_device(node, device), function=lambda x: np.sqrt(np.abs(x)) * 2, device=device),
        lambda samples, _: [np.sqrt(np.abs(s)) * 2 for s in samples], rtol=1e-6, gpu_needs_cupy=True),
    "torch_python_function": Case(lambda: FEED, lambda node, device: fn.torch_python_function(
        on_device(node, device), function=lambda batch: [x.flip(0) + 1 for x in batch], device=device),
        lambda samples, _: [s[::-1] + 1 for s in samples]),
    "dl_tensor_python_function": Case(lambda: FEED, lambda node, device: fn.dl_tensor_python_function(
        on_device(node, device), device=device,
        function=lambda batch: [torch.utils.dlpack.to_dlpack(torch.from_dlpack(x).flip(0) * 3) for x in batch]),
        lambda samples, _: [s[::-1] * 3 for s in samples]),
}


def _file_reader_case(tmp_path_factory) -> Case:
    root = tmp_path_factory.mktemp("reader")
    contents = {}
    for index in range(5):
        folder = root / f"class_{index % 2}"
        folder.mkdir(exist_ok=True)
        data = encode(noise_image(5 + index, 6, seed=index), "PNG")
        (folder / f"{index}.png").write_bytes(data)
        contents[data] = index % 2

    def reference(samples, outputs):  # what Python's open() reads, with the folder's class
        for data, label in zip(*outputs):
            assert contents[bytes(data)] == int(label[0])
    return Case(list, lambda node, device: fn.readers.file(file_root=str(root)), reference)


def _numpy_reader_case(tmp_path_factory) -> Case:
    root = tmp_path_factory.mktemp("numpy_reader")
    arrays = [np.random.default_rng(index).random((index + 1, 3)).astype(np.float32) for index in range(5)]
    for index, array in enumerate(arrays):
        np.save(root / f"{index}.npy", array)
    return Case(list, lambda node, device: fn.readers.numpy(file_root=str(root)),
                lambda samples, outputs: arrays)  # what np.load reads, in file order


def _tfrecord_reader_case(tmp_path_factory) -> Case:
    """Records of one bytes feature, encoded here by hand (tests/operators/readers/test_tfrecord_reader.py checks the
    reader against protobuf's own encoder)."""
    from penstock import tfrecord

    def field(number: int, payload: bytes) -> bytes:  # a length-delimited field (every length < 128)
        return bytes([number << 3 | 2, len(payload)]) + payload

    root = tmp_path_factory.mktemp("tfrecord_reader")
    payloads = [bytes(range(index, index + 3 + index)) for index in range(5)]
    with open(root / "data.tfrecord", "wb") as handle:
        for payload in payloads:
            example = field(1, field(1, field(1, b"data") + field(2, field(1, field(1, payload)))))
            handle.write(len(example).to_bytes(8, "little") + bytes(4) + example + bytes(4))
    features = {"data": tfrecord.FixedLenFeature((), tfrecord.string, "")}
    return Case(list, lambda node, device: fn.readers.tfrecord(path=[str(root / "data.tfrecord")],
                                                               features=features)["data"],
                lambda samples, outputs: [np.frombuffer(payload, np.uint8) for payload in payloads])


def _webdataset_reader_case(tmp_path_factory) -> Case:
    import io
    import tarfile
    root = tmp_path_factory.mktemp("webdataset_reader")
    payloads = [bytes(range(index, 2 * index + 3)) for index in range(5)]
    with tarfile.open(root / "data.tar", "w") as archive:  # the reference: what tarfile stored
        for index, payload in enumerate(payloads):
            info = tarfile.TarInfo(f"{index:03d}.bin")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return Case(list, lambda node, device: fn.readers.webdataset(paths=[str(root / "data.tar")], ext=["bin"]),
                lambda samples, outputs: [np.frombuffer(payload, np.uint8) for payload in payloads])


def _mxnet_reader_case(tmp_path_factory) -> Case:
    """RecordIO records of one part each, written to the format (tests/operators/readers/test_mxnet_reader.py has the
    parts a payload holding the magic number is split into)."""
    import struct
    root = tmp_path_factory.mktemp("mxnet_reader")
    payloads = [bytes(range(index, 2 * index + 3)) for index in range(5)]
    with open(root / "data.rec", "wb") as handle:
        for index, payload in enumerate(payloads):
            data = struct.pack("<IfQQ", 0, float(index), index, 0) + payload
            handle.write(struct.pack("<II", 0xCED7230A, len(data)) + data + bytes(-len(data) % 4))

    def reference(samples, outputs):
        images, labels = outputs
        assert [bytes(image) for image in images] == payloads[:len(images)]
        assert [label.tolist() for label in labels] == [[float(k)] for k in range(len(labels))]
    return Case(list, lambda node, device: fn.readers.mxnet(path=[str(root / "data.rec")]), reference)


def _sequence_reader_case(tmp_path_factory) -> Case:
    root = tmp_path_factory.mktemp("sequence_reader")
    (root / "stream").mkdir()
    frames = [noise_image(6, 5, seed=index) for index in range(4)]
    for index, frame in enumerate(frames):
        (root / "stream" / f"{index}.png").write_bytes(encode(frame, "PNG"))
    return Case(list, lambda node, device: fn.readers.sequence(file_root=str(root), sequence_length=3),
                lambda samples, outputs: [np.stack(frames[start % 2:start % 2 + 3])  # two sequences, repeated
                                          for start in range(len(outputs))])


def _nemo_asr_reader_case(tmp_path_factory) -> Case:
    import json

    import soundfile
    root = tmp_path_factory.mktemp("nemo_asr")
    clips, lines = [], []
    for index in range(3):
        clip = (0.3 * np.sin(np.arange(400 + 100 * index) * 0.05 * (index + 1))).astype(np.float32)
        soundfile.write(root / f"{index}.wav", clip, 8000, subtype="FLOAT")
        clips.append(clip)
        lines.append(json.dumps({"audio_filepath": str(root / f"{index}.wav"), "text": f"clip {index}"}))
    (root / "manifest.json").write_text("\n".join(lines) + "\n")
    return Case(list, lambda node, device: fn.readers.nemo_asr(manifest_filepaths=[str(root / "manifest.json")],
                                                               read_sample_rate=False, read_text=False),
                # soundfile's float samples, in manifest order (a batch of 5 goes on into the next epoch)
                lambda samples, outputs: [clips[index % len(clips)] for index in range(len(outputs))])


def _video_reader_case(op: str):
    def case(tmp_path_factory) -> Case:
        from video_clips import clip_frames, encoded_clip
        root = tmp_path_factory.mktemp("video_reader")
        encoded_clip("libvpx-vp9", "webm", options={"crf": "10", "b": "0"}).tofile(root / "clip.webm")
        written = clip_frames(8, 48, 64)
        reader = fn.readers.video if op == "readers.video" else fn.experimental.readers.video
        return Case(list, lambda node, device: reader(filenames=[str(root / "clip.webm")], sequence_length=4),
                    # windows of frames 0-3 and 4-7, epoch after epoch; the codec's loss as decoders.video's case
                    lambda samples, outputs: [written[4 * (index % 2):4 * (index % 2) + 4] for index in range(len(outputs))],
                    max_abs=40, mean_abs=3.5)  # readers.video truncates where the others round: half a level more
    return case


# readers: their cases make files first
SOURCE_CASES = {"readers.file": _file_reader_case, "readers.numpy": _numpy_reader_case,
                "readers.tfrecord": _tfrecord_reader_case, "readers.webdataset": _webdataset_reader_case,
                "readers.mxnet": _mxnet_reader_case, "readers.sequence": _sequence_reader_case,
                "readers.nemo_asr": _nemo_asr_reader_case, "readers.video": _video_reader_case("readers.video"),
                "experimental.readers.video": _video_reader_case("experimental.readers.video")}


def _check_permutation(outputs):
    order = [int(value) for value in outputs]
    assert sorted(order) == list(range(len(order))) and all(i != v for i, v in enumerate(order))


def _split_flip_merge(node, device):
    from penstock.graph import invoke
    predicate = fn.reductions.sum(fn.shapes(node)) > 60
    arguments = {"predicate": predicate, "where": "a test", "device": device}
    flipped, kept = invoke(registry.get_schema("_split"), (on_device(node, device),), arguments)
    return invoke(registry.get_schema("_merge"), (fn.flip(flipped, horizontal=1), kept), arguments)


# each later family's cases, from tests/cases_<family>.py
for _path in sorted(pathlib.Path(__file__).parents[1].glob("cases_*.py")):
    _family = importlib.import_module(_path.stem).CASES
    _repeated = set(_family) & set(CASES)
    assert not _repeated, f"{_path.name} repeats the cases of {sorted(_repeated)}"
    CASES.update(_family)

PAIRS = sorted(registry.implementations())


def test_every_operator_and_device_has_a_case():
    missing = sorted({name for name, _ in PAIRS} - set(CASES) - set(SOURCE_CASES))
    assert not missing, f"operators without a case in {__file__}: {missing}"


@pytest.mark.parametrize("name, device", PAIRS, ids=[f"{name}-{device}" for name, device in PAIRS])
def test_operator_matches_its_reference(name, device, tmp_path_factory):
    case = SOURCE_CASES[name](tmp_path_factory) if name in SOURCE_CASES else CASES[name]
    samples, outputs = run_case(case, device)
    expected = case.reference(samples, outputs)
    if expected is not None:
        compare_outputs(case, outputs, expected, f"{name} on {device}")


GPU_PAIRS = [(name, device) for name, device in PAIRS if device != "cpu" and (name, "cpu") in PAIRS]


@pytest.mark.parametrize("name, device", GPU_PAIRS, ids=[f"{name}-{device}" for name, device in GPU_PAIRS])
def test_gpu_form_matches_the_cpu_form(name, device):
    case = CASES[name]
    samples, on_gpu = run_case(case, device)
    _, on_cpu = run_case(case, "cpu")
    if case.compare_gpu_to_cpu is not None:
        case.compare_gpu_to_cpu(samples, on_gpu, on_cpu)
        return
    several = bool(on_cpu) and isinstance(on_cpu[0], list)  # an operator of several outputs: a list each
    pairs = [(f"output {k}, sample {index}", g, c) for k, (gpu_column, cpu_column) in
             enumerate(zip(on_gpu, on_cpu) if several else [(on_gpu, on_cpu)])
             for index, (g, c) in enumerate(zip(gpu_column, cpu_column))]
    for where, gpu_output, cpu_output in pairs:
        assert gpu_output.dtype == cpu_output.dtype, f"{name}: {where}"
        # each within the reference's tolerance, perhaps on opposite sides of it
        assert_close(gpu_output, cpu_output, 2 * case.max_abs, case.mean_abs and 2 * case.mean_abs, 2 * case.rtol,
                     where=f"{name} gpu vs cpu, {where}")


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_cast_rounds_and_saturates_on_every_device(device):
    """Halves away from zero on the CPU, to even on the GPU: DALI's rules on each."""
    values = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 254.5, 255.5, 300.0, -3.0, np.nan]], np.float32)[:, :, None]
    on_cpu = device == "cpu"
    case = Case(lambda: [values], image_op("cast", dtype=types.UINT8), None)
    _, [output] = run_case(case, device)
    to_uint8 = [1, 2, 3, 0, 0, 255, 255, 255, 0, 0] if on_cpu else [0, 2, 2, 0, 0, 254, 255, 255, 0, 0]
    np.testing.assert_array_equal(output[0, :, 0], to_uint8)
    case = Case(lambda: [values], image_op("cast", dtype=types.INT8), None)
    _, [output] = run_case(case, device)
    np.testing.assert_array_equal(output[0, :, 0], [1, 2, 3, -1, -2, 127, 127, 127, -3, 0] if on_cpu else
                                  [0, 2, 2, 0, -2, 127, 127, 127, -3, 0])
    case = Case(lambda: [values.reshape(1, 1, 10)], image_op("cast", dtype=types.UINT8), None)  # 10 channels
    _, [output] = run_case(case, device)
    np.testing.assert_array_equal(output[0, 0], to_uint8)
