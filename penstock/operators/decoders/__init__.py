"""Image decoders, CPU and mixed; the audio decoder; the video decoder."""
from penstock.operators.decoders import audio, images, mixed, video  # noqa: F401  (registers the family's operators)
