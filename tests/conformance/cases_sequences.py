"""Sequence operators: per_frame (marks per-frame arguments: the layout gains F) and
sequence_rearrange (reorders, repeats and drops frames, by a fixed or per-sample order)."""
import numpy as np

from conformance.harness import Data, PerSample, Spec
from conformance.samples import images, tensors

SEQUENCES = images(layout="FHWC", frames=4)

SPECS = [
    Spec("per_frame", (tensors([(4,), (4,), (4,)]),), {}, grid={
        "@input": {"laid_out": (tensors([(4, 2), (3, 2), (2, 2)], layout="XY"),),
                   "already_frames": (tensors([(4, 2), (3, 2), (2, 2)], layout="FX"),),
                   "channels_first": (tensors([(4, 2), (3, 2), (2, 2)], layout="CX"),),
                   "scalars": (Data([np.float32(1)] * 3),),
                   "int": (tensors([(3,), (2,), (5,)], "int32"),)},
        "replace": [True, False],
    }),
    Spec("per_frame", (tensors([(4, 2), (3, 2), (2, 2)], layout="XY"),), {"replace": True}, name="per_frame_replace",
         grid={"@input": {"frames": (tensors([(4, 2), (3, 2), (2, 2)], layout="FX"),)}}),
    Spec("sequence_rearrange", (SEQUENCES,), {"new_order": (3, 0, 1)}, grid={
        "@input": {"fchw": (images(layout="FCHW", frames=4),), "f32": (images("float32", layout="FHWC", frames=4),),
                   "no_layout": (tensors([(4, 2), (4, 3), (4, 1)]),),
                   "frames_x": (tensors([(4, 2), (4, 3), (4, 1)], layout="FX"),),
                   "hwc": (images(),)},
        "new_order": [(0,), (1, 1, 1, 1, 1), (3, 2, 1, 0), (4,), (-1,), (),
                      PerSample(np.int32([0, 1]), np.int32([3]), np.int32([2, 2, 0]))],
    }),
]
