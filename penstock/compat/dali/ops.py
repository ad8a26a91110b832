"""``nvidia.dali.ops``: penstock's operator classes under their current DALI names, and the older
names DALI programs still use (FileReader, nvJPEGDecoder, ImageDecoder, ImageDecoderRandomCrop,
CoinFlip, ...), each the same class as its current name."""
import sys

from penstock import ops as _ops

for _name, _value in vars(_ops).items():
    if not _name.startswith("__"):
        setattr(sys.modules[__name__], _name, _value)
for _namespace in ("readers", "decoders", "random"):
    sys.modules[f"{__name__}.{_namespace}"] = getattr(_ops, _namespace)

# older names, as DALI kept them
FileReader = _ops.readers.File
nvJPEGDecoder = ImageDecoder = _ops.decoders.Image
nvJPEGDecoderRandomCrop = ImageDecoderRandomCrop = _ops.decoders.ImageRandomCrop
nvJPEGDecoderCrop = ImageDecoderCrop = _ops.decoders.ImageCrop
nvJPEGDecoderSlice = ImageDecoderSlice = _ops.decoders.ImageSlice
CoinFlip = _ops.random.CoinFlip
Uniform = _ops.random.Uniform
NormalDistribution = _ops.random.Normal
