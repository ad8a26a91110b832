"""Operator families, each with its schemas and its implementations for every device it has, side
by side; importing this package registers every operator."""
from penstock.operators import (arithmetic, batch_ops, conditional, decoders, external, geometry, normalize, python_function, random,  # noqa: F401
                                readers, tensors, transfer)
from penstock.operators import warps  # noqa: F401,E402
from penstock.operators import color, color_nonlinear, augment_step  # noqa: F401,E402
from penstock.operators import filters, noise  # noqa: F401,E402
from penstock.operators import distortions, erase_paste, mixing, transforms  # noqa: F401,E402
from penstock.operators import coco, lmdb_readers, record_readers  # noqa: F401,E402
from penstock.operators import boxes  # noqa: F401,E402
from penstock.operators import segmentation, subscript  # noqa: F401,E402
from penstock.operators import crop_generator, file_io, image_extras, sequences  # noqa: F401,E402
