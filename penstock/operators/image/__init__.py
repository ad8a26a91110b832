"""Image operators: normalization and casts, erase and paste, mixing, CLAHE and debayer, file output, RandAugment's fused steps."""
from penstock.operators.image import normalize, erase_paste, image_extras, mixing, file_io, augment_step  # noqa: F401  (registers the family's operators)
