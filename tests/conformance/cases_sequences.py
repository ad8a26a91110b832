"""Sequence operators: per_frame (marks per-frame arguments: the layout gains F),
sequence_rearrange (reorders, repeats and drops frames, by a fixed or per-sample order), and
decoders.video over the codecs DALI's CPU decoder reads (VP9 in WebM, MJPEG in AVI), clips made here
with FFmpeg's encoders (PyAV): frames within 1 level (DALI converts the colours in its own float
steps)."""
import numpy as np
from video_clips import encoded_clip

from conformance.cases_readers import reader_specs
from conformance.harness import Close, Data, PerSample, Spec
from conformance.samples import images, on_disk, tensors, videos

SEQUENCES = images(layout="FHWC", frames=4)


def _clips() -> Data:
    return Data([encoded_clip("libvpx-vp9", "webm", "yuv420p", 6, 32, 48, seed=0),
                 encoded_clip("mjpeg", "avi", "yuvj420p", 8, 32, 48, seed=1),
                 encoded_clip("libvpx-vp9", "webm", "yuv420p", 5, 32, 48, seed=2)])


VIDEOS = _clips()

SPECS = [
    Spec("decoders.video", (VIDEOS,), {}, compare=Close(atol=1.01), grid={
        "start_frame": [1, 4, PerSample(np.int32(0), np.int32(2), np.int32(4))],
        "sequence_length": [3, 9, PerSample(np.int32(1), np.int32(2), np.int32(7))],
        "stride": [2, PerSample(np.int32(1), np.int32(2), np.int32(3))],
        "end_frame": [4, PerSample(np.int32(2), np.int32(3), np.int32(5))],
        "frames": [(0, 3, 3, 1), (7,), PerSample(np.int32([0]), np.int32([1, 0]), np.int32([4, 4]))],
        "pad_mode": ["none", "edge", "repeat", "reflect_1001", "symmetric", "reflect_101", "reflect"],
        "fill_value": [(9,), (10, 20, 30)],
        "build_index": [False], "affine": [False],
    }),
    Spec("decoders.video", (VIDEOS,), {"start_frame": 2, "sequence_length": 8}, name="decoders.video_padded",
         compare=Close(atol=1.01), grid={
             "pad_mode": ["none", "constant", "edge", "reflect_1001", "reflect_101",
                          PerSample("edge", "constant", "reflect_101")],
             "stride": [2], "fill_value": [(7,), (1, 2, 3)]}),
    Spec("experimental.decoders.video", (VIDEOS,), {"sequence_length": 4}, compare=Close(atol=1.01)),
    *reader_specs("experimental.readers.video", {"filenames": on_disk(videos, "files"), "sequence_length": 8},
                  compare=Close(atol=1.01), grid={
                      "stride": [2], "step": [5, 40],
                      "pad_mode": ["constant", "edge", "repeat", "reflect_1001", "symmetric", "reflect_101",
                                   "reflect"],
                      "fill_value": [(9,), (10, 20, 30)],
                      "labels": [(5, 6, 7)], "enable_frame_num": [True], "enable_timestamps": [True],
                      "image_type": ["types.RGB"], "uniform_sample": [True]}),
    Spec("experimental.readers.video", (), {"file_root": on_disk(videos, "root"), "sequence_length": 4,
                                            "enable_frame_num": True, "enable_timestamps": True},
         name="experimental.readers.video_root", compare=Close(atol=1.01), batch_size=3, iterations=3),
    *[Spec("experimental.readers.video", (), {"file_list": on_disk(videos, listed), "sequence_length": 4,
                                              "file_list_format": format, "enable_frame_num": True,
                                              "enable_timestamps": True},
           name=f"experimental.readers.video_{listed}", compare=Close(atol=1.01), batch_size=3, iterations=3, grid={
               "file_list_rounding": ["start_up_end_down", "all_up", "all_down"],
               "file_list_include_end": [False], "pad_mode": ["edge"]})
      for listed, format in (("list", "timestamps"), ("frames", "frames"))],
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
