"""Ready-made pipelines: the ImageNet (ResNet-50) training and validation pipelines that the demo, the
benchmarks and the examples run. Without shard_id/num_shards they read the shard of the process's
rank in a distributed job (docs/distributed.md), else the whole data set."""
from __future__ import annotations

from penstock import fn, types
from penstock.pipeline import Pipeline, pipeline_def

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def decoder_device(device: str) -> str:
    return "mixed" if device == "gpu" else "cpu"


def _decoder_tuning(hw_decoder_load: float | None, cpu_decoder_load: float | None) -> dict:
    """The decoder arguments a recipe's caller set (None: the decoder's default)."""
    given = {"hw_decoder_load": hw_decoder_load, "cpu_decoder_load": cpu_decoder_load}
    return {name: value for name, value in given.items() if value is not None}


@pipeline_def
def imagenet_train(data_dir: str, device: str = "cpu", crop: int = 224, shard_id: int | None = None,
                   num_shards: int | None = None,
                   dtype=types.FLOAT16, hw_decoder_load: float | None = None,
                   cpu_decoder_load: float | None = None):
    """file reader -> random-crop decode -> resize to crop x crop -> coin-flip mirror + normalize, CHW."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, shard_id=shard_id,
                                    num_shards=num_shards, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device=decoder_device(device), output_type=types.RGB,
                                           random_aspect_ratio=(3 / 4, 4 / 3), random_area=(0.08, 1.0),
                                           num_attempts=100, **_decoder_tuning(hw_decoder_load, cpu_decoder_load))
    images = fn.resize(images, device=device, resize_x=crop, resize_y=crop, interp_type=types.INTERP_TRIANGULAR)
    images = fn.crop_mirror_normalize(images, device=device, dtype=dtype, output_layout="CHW",
                                      crop=(crop, crop), mean=IMAGENET_MEAN, std=IMAGENET_STD,
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


@pipeline_def
def imagenet_val(data_dir: str, device: str = "cpu", crop: int = 224, size: int = 256, shard_id: int | None = None,
                 num_shards: int | None = None, dtype=types.FLOAT16, hw_decoder_load: float | None = None,
                 cpu_decoder_load: float | None = None):
    """file reader -> decode -> resize shorter side to size -> centre crop + normalize, CHW."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=False, shard_id=shard_id,
                                    num_shards=num_shards, pad_last_batch=True, name="Reader")
    images = fn.decoders.image(jpegs, device=decoder_device(device), output_type=types.RGB,
                               **_decoder_tuning(hw_decoder_load, cpu_decoder_load))
    images = fn.resize(images, device=device, resize_shorter=size, interp_type=types.INTERP_TRIANGULAR)
    images = fn.crop_mirror_normalize(images, device=device, dtype=dtype, output_layout="CHW",
                                      crop=(crop, crop), mean=IMAGENET_MEAN, std=IMAGENET_STD)
    return images, labels


__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "Pipeline", "imagenet_train", "imagenet_val"]
