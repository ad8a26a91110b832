"""Batch mixing: ``mixup`` and ``cutmix`` over a batch of (images, labels), with soft labels, as
torchvision.transforms.v2's MixUp and CutMix (penstock's own: DALI has none).

Per batch, with chance ``probability``, lambda is drawn from Beta(alpha, alpha) and each sample is
mixed with the batch rolled by one (sample i with sample i - 1, the first with the last):

- mixup: image = lambda * image + (1 - lambda) * rolled image, labels alike.
- cutmix: a box centred on a uniformly drawn pixel (r_x, r_y), of half-sides int(r * W) and
  int(r * H), r = sqrt(1 - lambda) / 2, cut to the image, is taken from the rolled image; the
  labels mix with lambda corrected to the box's real area, 1 - box area / image area.

Labels given as class ids (integers, one per sample) become one-hot over ``num_classes``;
one-hot or soft labels (float vectors) are mixed as they are. Labels come out float32; images keep
their type (mixup rounds to integer types by penstock.numeric's rule). Images of a batch must
share one shape. Without mixing (the chance says no), images pass as they are and labels still
come out as float32 vectors.

Both devices run the same functions, written against the array API numpy and torch share; the
random draws are made once per batch from the operator's stream, so a seed fixes them.
"""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, numeric, registry
from penstock.contract import BatchOperator, OutputSpec, WholeBatchOperator
from penstock.schema import Arg, ArgError, OpSchema


def _check_alpha(static: dict, per_sample: frozenset) -> None:
    if static.alpha <= 0:
        raise ArgError(f"argument 'alpha': expected a value > 0 (the Beta(alpha, alpha) parameter), got {static.alpha}")


MIXING_ARGS = (
    Arg("alpha", "float", 1.0, "lambda is drawn from Beta(alpha, alpha) once per batch; alpha > 0."),
    Arg("num_classes", "int", None, "The number of classes, to make one-hot labels from class ids.", min=1),
    Arg("probability", "float", 1.0, "The chance that a batch is mixed.", min=0.0, max=1.0),
)

for _name, _class_name, _what in (
        ("mixup", "MixUp", "blends each image with the previous one of the batch (the first with the last) by "
         "lambda ~ Beta(alpha, alpha): lambda * image + (1 - lambda) * previous, labels alike"),
        ("cutmix", "CutMix", "pastes into each image a box of the previous image of the batch (the first takes "
         "the last's), the box's area about 1 - lambda, lambda ~ Beta(alpha, alpha); labels mix with lambda "
         "corrected to the box's real area")):
    registry.register_schema(OpSchema(
        name=_name, class_name=_class_name,
        doc=f"Batch mixing as torchvision.transforms.v2.{_class_name}: {_what}. Takes (images, labels), gives "
            "(images, float32 soft labels); class-id labels become one-hot over num_classes. Images of a batch "
            "share one shape (HWC).",
        args=MIXING_ARGS, num_inputs=(2, 2), num_outputs=2, input_names=("images", "labels"),
        checks=(_check_alpha,), moves_cpu_inputs=True))


# ---- the rules, shared by both devices (xp: numpy or torch) -------------------------------------
def soft_labels(xp, labels: list, num_classes: int | None, op_name: str):
    """The batch's labels as float32 (N, classes): class ids one-hot over num_classes, vectors as they are."""
    if not labels:
        return None
    first = labels[0]
    is_float = first.dtype.is_floating_point if xp is not np else first.dtype.kind == "f"
    if is_float:
        sizes = {tuple(label.shape) for label in labels}
        if len(sizes) > 1 or len(next(iter(sizes))) != 1:
            raise ValueError(f"{op_name}: labels: float labels must be vectors of one length (one-hot or soft), got "
                             f"shapes {sorted(sizes)}")
        stacked = xp.stack(list(labels))
        return stacked.astype(np.float32) if xp is np else stacked.float()
    if num_classes is None:
        raise ValueError(f"{op_name}: labels are class ids; give num_classes to make them one-hot")
    ids = []
    for label in labels:
        if (label.size if xp is np else label.numel()) != 1:
            raise ValueError(f"{op_name}: labels: expected one class id per sample, got a label of shape "
                             f"{tuple(label.shape)}")
        ids.append(int(label.reshape(-1)[0]))
    for value in ids:
        if not 0 <= value < num_classes:
            raise ValueError(f"{op_name}: labels: class id {value} is outside [0, {num_classes})")
    one_hot = np.eye(num_classes, dtype=np.float32)[ids]
    return one_hot if xp is np else xp.from_numpy(one_hot).to(first.device)


def mix(xp, values, lam: float):
    """lambda * values + (1 - lambda) * values rolled by one along the batch, in float32 (torchvision's
    order of operations: rolled * (1 - lambda) + values * lambda)."""
    values = values.astype(np.float32) if xp is np else values.float()
    rolled = xp.roll(values, 1, 0) if xp is np else values.roll(1, 0)
    return rolled * (1.0 - lam) + values * lam


def cutmix_box(height: int, width: int, lam: float, centre_x: float, centre_y: float) -> tuple[int, int, int, int]:
    """torchvision's CutMix box (x1, y1, x2, y2) for lambda and a centre drawn as fractions in [0, 1)
    (r_x = int(centre_x * width), as torch.randint(width) draws it)."""
    r_x, r_y = int(centre_x * width), int(centre_y * height)
    r = 0.5 * math.sqrt(1.0 - lam)
    half_width, half_height = int(r * width), int(r * height)
    return (max(r_x - half_width, 0), max(r_y - half_height, 0), min(r_x + half_width, width),
            min(r_y + half_height, height))


def box_lambda(box: tuple[int, int, int, int], height: int, width: int) -> float:
    """lambda corrected to the box's real area: 1 - box area / image area."""
    x1, y1, x2, y2 = box
    return float(1.0 - (x2 - x1) * (y2 - y1) / (width * height))


def _stacked(xp, images: list, op_name: str):
    shapes = {tuple(image.shape) for image in images}
    if len(shapes) > 1:
        raise ValueError(f"{op_name}: the batch's images differ in shape {sorted(shapes)}; mix images of one shape "
                         "(resize or crop them first)")
    if len(next(iter(shapes))) != 3:
        raise ValueError(f"{op_name}: expected HWC images (3 dimensions), got shape {next(iter(shapes))}")
    return xp.stack(list(images))


def mix_batch(xp, kind: str, images: list, labels: list, args: dict, draw, op_name: str) -> tuple[list, list]:
    """(images, soft labels) of one batch; ``draw``: (apply, lambda, centre_x, centre_y) of the batch."""
    if not images:
        return [], []
    if len(labels) != len(images):
        raise ValueError(f"{op_name}: {len(images)} images but {len(labels)} labels")
    soft = soft_labels(xp, labels, args.num_classes, op_name)
    applied, lam, centre_x, centre_y = (float(value) for value in draw)
    if applied >= args.probability:
        return list(images), list(soft)
    batch = _stacked(xp, images, op_name)
    if kind == "mixup":
        mixed = mix(xp, batch, lam)
        out = numeric.saturate(mixed, batch.dtype) if xp is np else numeric.saturate_tensor(mixed, batch.dtype)
        return list(out), list(mix(xp, soft, lam))
    height, width = batch.shape[1], batch.shape[2]
    x1, y1, x2, y2 = cutmix_box(height, width, lam, centre_x, centre_y)
    out = batch.copy() if xp is np else batch.clone()
    rolled = xp.roll(batch, 1, 0) if xp is np else batch.roll(1, 0)
    out[:, y1:y2, x1:x2] = rolled[:, y1:y2, x1:x2]
    return list(out), list(mix(xp, soft, box_lambda((x1, y1, x2, y2), height, width)))


class MixingDeclaration:
    kind = ""

    def declare_outputs(self, inputs):
        images, labels = inputs
        if images.ndim is not None and images.ndim != 3:
            raise ValueError(f"{self.name}: expected HWC images (3 dimensions), but its images have {images.ndim}")
        classes = self.args.num_classes
        label_shape = (classes,) if classes and labels.dtype is not None and labels.dtype.kind in "iub" else None
        return images, OutputSpec(np.dtype(np.float32), 1, "", label_shape)

    def draw(self, rng, count):
        # one draw for the whole batch: (chance, lambda, box centre x, box centre y), repeated per sample
        row = np.array([rng.random(), rng.beta(self.args.alpha, self.args.alpha), rng.random(), rng.random()])
        return np.tile(row, (count, 1))


class Mixing(MixingDeclaration, WholeBatchOperator):
    def run_batch(self, inputs, args, params):
        if args and any(a is not args[0] and a != args[0] for a in args):
            raise ValueError(f"{self.name}: arguments differ between samples; mixing takes one set per batch")
        return mix_batch(np, self.kind, inputs[0], inputs[1], args[0] if args else self.args,
                         params[0] if len(params) else (1.0, 1.0, 0.0, 0.0), self.name)


class MixingGpu(MixingDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.operators.shared.gpu_plan import tensors_of
        images, labels = tensors_of(inputs[0]), tensors_of(inputs[1])
        params = batch.params
        return mix_batch(torch, self.kind, images, labels, args[0] if args else self.args,
                         params[0] if params is not None and len(params) else (1.0, 1.0, 0.0, 0.0), self.name)


for _kind, _class_name in (("mixup", "MixUp"), ("cutmix", "CutMix")):
    registry.register(_kind, "cpu")(type(_class_name, (Mixing,), {"kind": _kind}))
    registry.register(_kind, "gpu", requires=devices.gpu_problem)(type(_class_name + "Gpu", (MixingGpu,), {"kind": _kind}))


__all__ = ["box_lambda", "cutmix_box", "mix", "mix_batch", "soft_labels"]
