"""The older operator names DALI programs still use, each the current operator under another name
(DALI's list of deprecated names): (fn name, ops name, current operator[, defaults]), where
``defaults`` are the older operator's own defaults of the current one's arguments. A name whose
operator penstock does not have yet is refused when used, saying so."""
from __future__ import annotations

import functools
import sys

DEPRECATED = (
    ("image_decoder", "ImageDecoder", "decoders.image"),
    ("image_decoder_crop", "ImageDecoderCrop", "decoders.image_crop"),
    ("image_decoder_random_crop", "ImageDecoderRandomCrop", "decoders.image_random_crop"),
    ("image_decoder_slice", "ImageDecoderSlice", "decoders.image_slice"),
    (None, "nvJPEGDecoder", "decoders.image"),
    (None, "nvJPEGDecoderCrop", "decoders.image_crop"),
    (None, "nvJPEGDecoderRandomCrop", "decoders.image_random_crop"),
    (None, "nvJPEGDecoderSlice", "decoders.image_slice"),
    ("audio_decoder", "AudioDecoder", "decoders.audio"),
    ("file_reader", "FileReader", "readers.file"),
    ("caffe_reader", "CaffeReader", "readers.caffe"),
    ("caffe2_reader", "Caffe2Reader", "readers.caffe2"),
    ("coco_reader", "COCOReader", "readers.coco"),
    ("mxnet_reader", "MXNetReader", "readers.mxnet"),
    ("nemo_asr_reader", "NemoAsrReader", "readers.nemo_asr"),
    ("numpy_reader", "NumpyReader", "readers.numpy"),
    ("sequence_reader", "SequenceReader", "readers.sequence"),
    ("tfrecord_reader", "TFRecordReader", "readers.tfrecord"),
    ("video_reader", "VideoReader", "readers.video"),
    ("video_reader_resize", "VideoReaderResize", "readers.video_resize"),
    ("coin_flip", "CoinFlip", "random.coin_flip"),
    ("uniform", "Uniform", "random.uniform"),
    ("normal_distribution", "NormalDistribution", "random.normal"),
    ("transform_translation", "TransformTranslation", "transforms.translation"),
    # the same operator without antialiasing by default
    ("fast_resize_crop_mirror", "FastResizeCropMirror", "resize_crop_mirror", {"antialias": False}),
)


def mirror(module_name: str, namespace, keep) -> None:
    """Gives the compat module ``module_name`` (nvidia.dali.fn or .ops) the members of penstock's
    ``namespace`` for which ``keep(name, value)`` holds, and its sub-namespaces (readers,
    transforms, experimental.decoders, ...), each importable under the compat module's name (a
    package to the import system, as DALI's are, however its imports are redirected)."""
    module = sys.modules[module_name]
    prefix = namespace.__name__ + "."
    for name, value in vars(namespace).items():
        if keep(name, value) or getattr(value, "__name__", "").startswith(prefix):
            setattr(module, name, value)
    module.__path__ = []
    for name, sub_namespace in list(sys.modules.items()):
        if name.startswith(prefix):
            sys.modules[module_name + name[len(namespace.__name__):]] = sub_namespace
            sub_namespace.__path__ = []


def install(module, namespace, name_of) -> None:
    """Sets each older name on ``module`` to the current operator found in ``namespace`` (penstock's
    fn or ops; ``name_of(entry)`` picks the name of the entry to set), and makes the names of
    operators penstock lacks fail with a message naming the current operator."""
    missing = {}
    for entry in DEPRECATED:
        old_name, current = name_of(entry), entry[2]
        if old_name is None:
            continue
        classes = module.__name__.endswith("ops")
        target = _lookup(namespace, current, classes)
        if target is None:
            missing[old_name] = current
        else:
            defaults = entry[3] if len(entry) > 3 else None
            setattr(module, old_name, _with_defaults(target, defaults, old_name, classes) if defaults else target)

    def __getattr__(name):
        if name in missing:
            raise AttributeError(f"{module.__name__}.{name} (now {missing[name]}): penstock does not have this "
                                 "operator yet")
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
    module.__getattr__ = __getattr__


def _with_defaults(target, defaults: dict, old_name: str, classes: bool):
    """``target`` (an fn function or an ops class) whose arguments not given take ``defaults``."""
    if classes:
        def __init__(self, *arguments, **kwargs):
            target.__init__(self, *arguments, **{**defaults, **kwargs})
        return type(old_name, (target,), {"__init__": __init__, "__doc__": target.__doc__})

    @functools.wraps(target)
    def call(*inputs, **kwargs):
        return target(*inputs, **{**defaults, **kwargs})
    call.__name__ = call.__qualname__ = old_name
    return call


def _lookup(namespace, current: str, classes: bool):
    """fn.readers.file, or for ops the class named by the schema (readers.File)."""
    from penstock import registry
    schema = registry.schemas().get(current)
    if schema is None:
        return None
    value = namespace
    for part in (schema.class_name if classes else current).split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value
