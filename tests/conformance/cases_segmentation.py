"""Segmentation: random_object_bbox, random_mask_pixel and select_masks. Masks with one object (or
one foreground pixel) make the random choices certain, so those outputs compare exactly; masks with
several objects compare statistically."""
import numpy as np

from conformance.harness import Close, Data, PerSample, Spec, Stats


def _masks(objects_per_sample, dtype="int32", shape=(12, 16)):
    """Label masks: per sample, (label, top, left, height, width) rectangles on background 0."""
    samples = []
    for objects in objects_per_sample:
        mask = np.zeros(shape, dtype)
        for label, top, left, height, width in objects:
            mask[top:top + height, left:left + width] = label
        samples.append(mask)
    return Data(samples)


ONE_OBJECT = _masks([[(1, 2, 3, 4, 5)], [(2, 0, 0, 3, 3)], [(3, 5, 10, 7, 6)]])
SEVERAL = _masks([[(1, 0, 0, 4, 4), (1, 6, 6, 5, 8), (2, 1, 10, 2, 2)], [(2, 0, 0, 12, 3), (3, 4, 6, 3, 3)],
                  [(1, 3, 3, 1, 1), (2, 8, 8, 4, 8), (5, 0, 12, 2, 4)]])
ONE_PIXEL = _masks([[(1, 3, 4, 1, 1)], [(2, 0, 15, 1, 1)], [(7, 11, 0, 1, 1)]])
# several runs, so that the statistics of the random choices settle
DRAWS = 40
RANDOM_BOXES = Stats(low=0, high=16, mean_tol=1.2, std_tol=1.2, independent=False)

SPECS = [
    Spec("segmentation.random_object_bbox", (ONE_OBJECT,), {}, grid={
        "@input": {"uint8": (_masks([[(1, 2, 3, 4, 5)], [(2, 0, 0, 3, 3)], [(3, 5, 10, 7, 6)]], "uint8"),),
                   "volume": (Data([np.pad(m[None], ((1, 1), (0, 0), (0, 0))) for m in ONE_OBJECT.samples]),),
                   "empty": (_masks([[], [], []]),),
                   "float": (Data([m.astype(np.float32) for m in ONE_OBJECT.samples]),)},
        "format": ["anchor_shape", "start_end", "box", "corners"],
        "output_class": [True],
        "background": [PerSample(np.int32(0), np.int32(0), np.int32(0))],  # others make 0 an object
        "classes": [(1, 2, 3), (4,), PerSample(np.int32([1]), np.int32([2]), np.int32([3, 1]))],
        "class_weights": [(1.0, 1.0, 1.0)],
        "foreground_prob": [1.0, 0.0, PerSample(np.float32(1), np.float32(0), np.float32(1))],
        "ignore_class": [True],
        "k_largest": [1, 2],
        "threshold": [(3, 3), (20, 20), PerSample(np.int32([1, 1]), np.int32([5, 5]), np.int32([2, 2]))],
        "cache_objects": [True],
    }, refused=("corners",)),
    Spec("segmentation.random_object_bbox", (SEVERAL,), {"format": "start_end"}, name="random_object_bbox_several",
         compare=RANDOM_BOXES, iterations=DRAWS, grid={
             "background": [2, PerSample(np.int32(0), np.int32(2), np.int32(0))],
             "foreground_prob": [0.5],
             "classes": [(1, 2)], "k_largest": [1],
             "class_weights": [(1.0, 0.0, 0.0, 0.0), PerSample(np.float32([1, 0, 0]), np.float32([0, 1, 0]),
                                                              np.float32([0.5, 0.5, 0]))],
             "ignore_class": [True], "output_class": [True],
             "threshold": [(2, 2)],
         }),
    Spec("segmentation.random_mask_pixel", (ONE_PIXEL,), {"foreground": 1}, grid={
        "@input": {"uint8": (_masks([[(1, 3, 4, 1, 1)], [(2, 0, 15, 1, 1)], [(7, 11, 0, 1, 1)]], "uint8"),),
                   "float": (Data([m.astype(np.float32) for m in ONE_PIXEL.samples]),)},
        "value": [PerSample(np.int32(1), np.int32(2), np.int32(7))],
        "threshold": [0.5, PerSample(np.float32(0), np.float32(1), np.float32(6))],
        "foreground": [PerSample(np.int32(1), np.int32(1), np.int32(1))],
    }),
    # no pixel to pick (an empty mask, no such value, nothing above the threshold): any pixel
    Spec("segmentation.random_mask_pixel", (SEVERAL,), {}, name="random_mask_pixel_several",
         compare=Stats(low=0, high=15, mean_tol=1.5, std_tol=1.5, independent=False), iterations=DRAWS, grid={
             "foreground": [1, PerSample(np.int32(0), np.int32(1), np.int32(0))],
             "value": [1, 4], "threshold": [1.5, 9.0],
             "@input": {"empty": (_masks([[], [], []]),)},
         }),
    Spec("segmentation.select_masks", (
        Data([np.int32([1]), np.int32([0, 2]), np.int32([3, 1])]),
        Data([np.int32([[0, 0, 3], [1, 3, 5]]), np.int32([[0, 0, 2], [1, 2, 4], [2, 4, 7]]),
              np.int32([[1, 0, 3], [3, 3, 6], [5, 6, 7]])]),
        Data([np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(14, dtype=np.float32).reshape(7, 2),
              np.arange(21, dtype=np.float32).reshape(7, 3)])), {}, compare=Close(), grid={
        "reindex_masks": [True, False],
        "@input": {"unknown_id": (Data([np.int32([9])] * 3), Data([np.int32([[0, 0, 1]])] * 3),
                                  Data([np.zeros((1, 2), np.float32)] * 3)),
                   "int_vertices": (Data([np.int32([0])] * 3), Data([np.int32([[0, 0, 2], [1, 2, 3]])] * 3),
                                    Data([np.arange(6, dtype=np.int32).reshape(3, 2)] * 3))},
    }),
]
