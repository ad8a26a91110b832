"""Image decoders, CPU and mixed; the audio decoder."""
from penstock.operators.decoders import audio, images, mixed  # noqa: F401  (registers the family's operators)
