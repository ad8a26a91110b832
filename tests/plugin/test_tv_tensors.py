"""GenericIterator's tv_tensors: images, boxes and masks of a COCO pipeline handed over as
torchvision.tv_tensors (Image, BoundingBoxes on each image's canvas, Mask), checked against the same
pipeline's plain tensors and by torchvision's own transforms v2 taking them; the argument's checks
need no torchvision."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

from penstock import fn, pipeline_def, types
from penstock.plugin.pytorch import GenericIterator, TvTensors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
from make_coco import make_coco  # noqa: E402

BATCH = 4


@pytest.fixture(scope="module")
def coco_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco_tv")
    make_coco(str(root), 8, seed=7, sizes=(48, 96))
    return str(root)


def coco_pipeline(root, resize=None, masks=False):
    """Decoded images (HWC, or CHW at a fixed size with ``resize``), relative ltrb boxes, labels
    (and pixelwise masks)."""
    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=3)
    def pipe():
        outputs = fn.readers.coco(file_root=os.path.join(root, "images"), ratio=True, ltrb=True, skip_empty=True,
                                  annotations_file=os.path.join(root, "annotations", "instances.json"),
                                  pixelwise_masks=masks, name="Reader")
        images = fn.decoders.image(outputs[0], output_type=types.RGB)
        if resize:
            images = fn.resize(images, resize_x=resize[1], resize_y=resize[0])
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW")
        return (images, *outputs[1:])
    return pipe()


def first_step(root, names, tv_tensors=None, **kwargs):
    iterator = GenericIterator(coco_pipeline(root, **kwargs), names, reader_name="Reader", tv_tensors=tv_tensors)
    return next(iter(iterator))[0]


def test_tv_tensors_names_outputs_of_the_iterator_and_boxes_need_their_image(coco_root):
    names = ["images", "boxes", "labels"]
    with pytest.raises(ValueError, match="'box'"):
        GenericIterator(coco_pipeline(coco_root), names, reader_name="Reader",
                        tv_tensors=TvTensors(image="images", boxes="box"))
    with pytest.raises(ValueError, match="boxes need image="):
        TvTensors(boxes="boxes")
    with pytest.raises(ValueError, match="box_format"):
        TvTensors(image="images", boxes="boxes", box_format="LTRB")
    with pytest.raises(ValueError, match="ragged='list'"):
        GenericIterator(coco_pipeline(coco_root), names, reader_name="Reader", ragged="pad",
                        tv_tensors=TvTensors(image="images", boxes="boxes"))
    with pytest.raises(TypeError, match="TvTensors"):
        GenericIterator(coco_pipeline(coco_root), names, reader_name="Reader", tv_tensors={"image": "images"})


def test_images_and_relative_boxes_become_tv_tensors_in_pixels_on_each_images_canvas(coco_root):
    tv_tensors = pytest.importorskip("torchvision.tv_tensors")
    names = ["images", "boxes", "labels"]
    plain = first_step(coco_root, names)
    step = first_step(coco_root, names, TvTensors(image="images", boxes="boxes", relative_boxes=True))
    assert len(step["images"]) == len(step["boxes"]) == BATCH
    for image, boxes, plain_image, plain_boxes in zip(step["images"], step["boxes"], plain["images"], plain["boxes"]):
        assert isinstance(image, tv_tensors.Image) and isinstance(boxes, tv_tensors.BoundingBoxes)
        height, width = plain_image.shape[:2]  # the plain iterator's images are HWC
        assert torch.equal(image.as_subclass(torch.Tensor), plain_image.permute(2, 0, 1))
        assert boxes.canvas_size == (height, width) and boxes.format == tv_tensors.BoundingBoxFormat.XYXY
        expected = plain_boxes * torch.tensor([width, height, width, height], dtype=plain_boxes.dtype)
        torch.testing.assert_close(boxes.as_subclass(torch.Tensor), expected)
    assert all(torch.equal(a, b) for a, b in zip(step["labels"], plain["labels"]))  # not wrapped


def test_torchvision_transforms_take_the_boxes_as_they_are(coco_root):
    pytest.importorskip("torchvision")
    from torchvision.transforms import v2
    step = first_step(coco_root, ["images", "boxes", "labels"],
                      TvTensors(image="images", boxes="boxes", relative_boxes=True))
    image, boxes = step["images"][0], step["boxes"][0]
    flipped_image, flipped_boxes = v2.RandomHorizontalFlip(p=1.0)(image, boxes)
    width = image.shape[-1]
    assert torch.equal(flipped_image.as_subclass(torch.Tensor), image.as_subclass(torch.Tensor).flip(-1))
    expected = torch.stack([width - boxes[:, 2], boxes[:, 1], width - boxes[:, 0], boxes[:, 3]], 1)
    torch.testing.assert_close(flipped_boxes.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))


def test_a_dense_chw_batch_stays_one_image_and_masks_become_masks(coco_root):
    tv_tensors = pytest.importorskip("torchvision.tv_tensors")
    names = ["images", "boxes", "labels", "masks"]
    step = first_step(coco_root, names, TvTensors(image="images", boxes="boxes", masks="masks", box_format="xyxy"),
                      resize=(40, 56), masks=True)
    plain = first_step(coco_root, names, resize=(40, 56), masks=True)
    assert isinstance(step["images"], tv_tensors.Image) and step["images"].shape == (BATCH, 3, 40, 56)
    assert all(boxes.canvas_size == (40, 56) for boxes in step["boxes"])
    torch.testing.assert_close(step["boxes"][1].as_subclass(torch.Tensor), plain["boxes"][1])  # relative_boxes off: as they came
    for mask, plain_mask in zip(step["masks"], plain["masks"]):
        assert isinstance(mask, tv_tensors.Mask)
        assert np.array_equal(mask.as_subclass(torch.Tensor).numpy(), plain_mask.numpy())


def test_a_torchvision_detection_model_trains_on_the_targets(coco_root):
    """torchvision's SSDlite in training mode takes the images and each image's BoundingBoxes as they
    come (labels made int64, as its loss indexes with them) and gives finite losses."""
    pytest.importorskip("torchvision")
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large
    step = first_step(coco_root, ["images", "boxes", "labels"],
                      TvTensors(image="images", boxes="boxes", relative_boxes=True))
    torch.manual_seed(0)
    classes = int(max(int(labels.max()) for labels in step["labels"] if len(labels))) + 1
    model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=classes)
    model.train()
    images = [image.float() / 255 for image in step["images"]]
    targets = [{"boxes": boxes, "labels": labels.long().reshape(-1)} for boxes, labels in zip(step["boxes"],
                                                                                            step["labels"])]
    losses = model(images, targets)
    assert set(losses) == {"bbox_regression", "classification"}
    assert all(torch.isfinite(loss) for loss in losses.values())
