"""PyTorch iterators: batches of one or more pipelines as ``[{name: torch.Tensor}]`` per step,
exactly one epoch per pass, without copying dense CPU batches; images, boxes and masks as
torchvision.tv_tensors when asked (``TvTensors``)."""
from __future__ import annotations

import enum
from typing import Sequence

import torch

from penstock import checkpoints
from penstock.batch import Batch, GpuBatch
from penstock.pipeline import Pipeline


class LastBatchPolicy(enum.Enum):
    """What happens to an epoch's short last batch.

    FILL: return it full (the reader's padding included); DROP: skip it; PARTIAL: return only the
    epoch's real samples.
    """

    FILL = "fill"
    DROP = "drop"
    PARTIAL = "partial"


RAGGED_FORMS = ("list", "pad")
BOX_FORMATS = ("XYXY", "XYWH", "CXCYWH")  # torchvision's names; XYXY is DALI's ltrb


class TvTensors:
    """Which outputs a GenericIterator hands over as torchvision.tv_tensors, so that torchvision's
    transforms v2 and detection models take them as they are.

    image: the output holding the images (layout HWC, CHW or HW): a tv_tensors.Image, [N, C, H, W]
        for a dense batch (HWC viewed as CHW, no copy), else one per sample. Each sample's height
        and width are the canvas of its boxes.
    boxes: the outputs holding boxes ([n, 4] per sample): per sample a tv_tensors.BoundingBoxes in
        ``box_format`` ('XYXY' is DALI's ltrb, 'XYWH', 'CXCYWH') on its image's canvas. Boxes
        relative to the image (readers.coco's ratio=True, random_bbox_crop's) are scaled to pixels
        with ``relative_boxes=True``, as torchvision's boxes are in pixels.
    masks: the outputs holding masks ([n, H, W] or [H, W] per sample): per sample a tv_tensors.Mask.
    Boxes and masks come as lists of samples (torchvision's detection targets are per image), also
    from a dense batch.
    """

    def __init__(self, image: str | None = None, boxes: str | Sequence[str] = (), masks: str | Sequence[str] = (),
                 box_format: str = "XYXY", relative_boxes: bool = False):
        self.image = image
        self.boxes = [boxes] if isinstance(boxes, str) else list(boxes)
        self.masks = [masks] if isinstance(masks, str) else list(masks)
        self.box_format = str(box_format).upper()
        self.relative_boxes = relative_boxes
        if self.box_format not in BOX_FORMATS:
            raise ValueError(f"TvTensors: box_format must be one of {BOX_FORMATS}, got {box_format!r}")
        if self.boxes and image is None:
            raise ValueError("TvTensors: boxes need image= (the output whose samples give each box's canvas size)")

    def names(self) -> list[str]:
        return ([self.image] if self.image is not None else []) + self.boxes + self.masks

    def check(self, output_map: list[str], ragged: str) -> None:
        """At the iterator's construction: every name is an output, named once, and boxes and masks
        can be per sample."""
        names = self.names()
        unknown = [name for name in names if name not in output_map]
        if unknown:
            raise ValueError(f"GenericIterator: tv_tensors names {unknown}, which output_map {output_map} does not have")
        if len(set(names)) != len(names):
            raise ValueError(f"GenericIterator: tv_tensors names an output twice: {names}")
        if ragged == "pad" and (self.boxes or self.masks):
            raise ValueError("GenericIterator: tv_tensors gives boxes and masks per sample; use ragged='list'")

    def wrap(self, named: dict, layouts: dict) -> dict:
        """One pipeline's step ({name: tensor or list}) with the named outputs as tv_tensors."""
        try:
            from torchvision import tv_tensors
        except ImportError as error:
            raise ImportError(f"GenericIterator: tv_tensors needs torchvision ({error})") from None
        canvases = None
        if self.image is not None:
            images, canvases = _as_chw(named[self.image], layouts[self.image], self.image)
            named[self.image] = tv_tensors.Image(images) if isinstance(images, torch.Tensor) else \
                [tv_tensors.Image(image) for image in images]
        for name in self.boxes:
            samples = _samples(named[name])
            if len(samples) != len(canvases):
                raise ValueError(f"GenericIterator: output {name!r} has {len(samples)} samples, {self.image!r} "
                                 f"{len(canvases)}")
            named[name] = [self._boxes(tv_tensors, boxes, canvas, name) for boxes, canvas in zip(samples, canvases)]
        for name in self.masks:
            named[name] = [tv_tensors.Mask(mask) for mask in _samples(named[name])]
        return named

    def _boxes(self, tv_tensors, boxes: torch.Tensor, canvas: tuple[int, int], name: str):
        if boxes.shape[-1:] != (4,):
            raise ValueError(f"GenericIterator: output {name!r} holds a sample of shape {tuple(boxes.shape)}; "
                             "tv_tensors boxes are [n, 4]")
        if self.relative_boxes:
            height, width = canvas
            boxes = boxes * torch.tensor([width, height, width, height], dtype=boxes.dtype, device=boxes.device)
        return tv_tensors.BoundingBoxes(boxes, format=self.box_format, canvas_size=canvas)


def _samples(value) -> list:
    """A step's output as a list of per-sample tensors (views of a dense batch's rows)."""
    return list(value.unbind(0)) if isinstance(value, torch.Tensor) else list(value)


def _as_chw(images, layout: str, name: str):
    """(the images with channels first, each sample's (height, width)); a dense batch stays one tensor."""
    if layout not in ("HWC", "CHW", "HW"):
        raise ValueError(f"GenericIterator: output {name!r} has layout {layout!r}; tv_tensors images are HWC, CHW "
                         "or HW")
    if isinstance(images, torch.Tensor):
        if layout == "HWC":
            images = images.permute(0, 3, 1, 2)
        height, width = images.shape[-2:]
        return images, [(int(height), int(width))] * len(images)
    if layout == "HWC":
        images = [image.permute(2, 0, 1) for image in images]
    return images, [(int(image.shape[-2]), int(image.shape[-1])) for image in images]


def to_torch(batch: Batch | GpuBatch, ragged: str = "list", fill_value=0):
    """A batch as a tensor sharing its memory (CPU numpy via from_numpy, GPU via DLPack). A batch
    whose samples differ in shape is a list of per-sample tensors (``ragged="list"``), or one
    tensor padded to the largest shape with ``fill_value`` (``ragged="pad"``)."""
    if batch.is_dense_tensor():
        if isinstance(batch, GpuBatch):
            return torch.from_dlpack(batch)
        return _from_numpy(batch.as_array())
    samples = [batch.at(i) for i in range(len(batch))]
    samples = [sample if isinstance(sample, torch.Tensor) else _from_numpy(sample) for sample in samples]
    if ragged == "list":
        return samples
    ranks = {sample.dim() for sample in samples}
    if len(ranks) > 1:
        raise ValueError(f"{batch.name or 'an output'}: samples of {sorted(ranks)} dimensions cannot be padded "
                         "to one tensor; use ragged='list'")
    shape = [max(sizes) for sizes in zip(*(sample.shape for sample in samples))]
    padded = torch.full((len(samples), *shape), fill_value, dtype=samples[0].dtype, device=samples[0].device)
    for row, sample in zip(padded, samples):
        row[tuple(slice(0, size) for size in sample.shape)] = sample
    return padded


def _from_numpy(array):
    return torch.from_numpy(array if array.flags.writeable else array.copy())


class GenericIterator:
    """Iterates pipelines, giving per step a list (one entry per pipeline) of {output name: tensor}.

    The epoch's end comes from the pipeline's reader (``reader_name``, or its only reader), else from
    ``size`` (samples per epoch, summed over the pipelines), else from the pipeline's sources ending
    (StopIteration). ``last_batch_policy`` decides the short last batch; every sample of the epoch
    is delivered exactly once (FILL adds padding, DROP leaves the short batch out). Under a
    pipeline's ``on_error="skip"`` the epoch ends once no good sample of it is left, which may be
    batches before ``len()``; with several pipelines, one whose epoch ended sooner gives its last
    batch again as padding (no samples under PARTIAL) until the others end theirs.
    ``last_batch_padded`` is accepted from DALI programs and changes nothing: the readers count
    their padding, and the iterator uses that count (docs/dali.md). An output whose samples differ
    in shape (variable crops, boxes, text) comes as a list of per-sample tensors (``ragged="list"``,
    the default) or padded to the batch's largest shape with ``fill_value`` (``ragged="pad"``), and
    then with its samples' lengths along their first axis as ``<name>_lengths`` (int64 [batch]): the
    number of boxes of each sample, for example. ``tv_tensors=TvTensors(image=..., boxes=..., masks=...)``
    hands those outputs over as torchvision.tv_tensors (Image, BoundingBoxes on each image's canvas,
    Mask), for torchvision's transforms v2 and detection models.
    """

    def __init__(self, pipelines: Pipeline | Sequence[Pipeline], output_map: Sequence[str], size: int = -1,
                 reader_name: str | None = None, auto_reset: bool | str = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, last_batch_padded: bool = False,
                 fill_last_batch: bool | None = None, dynamic_shape: bool = False, prepare_first_batch: bool = True,
                 ragged: str = "list", fill_value=0, tv_tensors: TvTensors | None = None):
        if ragged not in RAGGED_FORMS:
            raise ValueError(f"GenericIterator: ragged must be one of {RAGGED_FORMS}, got {ragged!r}")
        self._ragged, self._fill_value = ragged, fill_value
        if tv_tensors is not None and not isinstance(tv_tensors, TvTensors):
            raise TypeError(f"GenericIterator: tv_tensors takes a TvTensors, got {type(tv_tensors).__name__}")
        self._tv_tensors = tv_tensors
        self._pipes = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
        if not self._pipes:
            raise ValueError("GenericIterator: give at least one pipeline")
        self._output_map = list(output_map)
        if len(set(self._output_map)) != len(self._output_map):
            raise ValueError(f"GenericIterator: output_map has repeated names: {self._output_map}")
        if tv_tensors is not None:
            tv_tensors.check(self._output_map, ragged)
        if fill_last_batch is not None:  # DALI's older spelling
            last_batch_policy = LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
        if isinstance(last_batch_policy, str):
            last_batch_policy = LastBatchPolicy[last_batch_policy.upper()]
        self._policy = last_batch_policy
        self._auto_reset = auto_reset in (True, "yes")
        self._size = size
        self._reader_name = reader_name
        if size > 0 and reader_name is not None:
            raise ValueError("GenericIterator: give size or reader_name, not both")
        for pipe in self._pipes:
            pipe.build()
        self._mode = self._choose_mode()
        self._delivered = [0] * len(self._pipes)
        self._steps = 0  # steps delivered in the current epoch
        self._epoch_done = False
        self._ended = [False] * len(self._pipes)  # reader mode: which pipelines gave their epoch's last batch
        self._last_outputs: list = [None] * len(self._pipes)
        restored = self._pipes[0].restored_iterator_state
        if restored is not None:  # the pipelines resume from checkpoints this iterator's kind took
            self._take_state(restored)

    def _choose_mode(self) -> str:
        if self._reader_name is not None:
            for pipe in self._pipes:
                pipe.reader_meta(self._reader_name)  # raises if the pipeline has no such reader
            return "reader"
        if self._size > 0:
            return "size"
        readers = self._pipes[0].epoch_size()  # {name: size} of every reader
        if len(readers) > 1:  # which one ends the epoch? guessing would give epochs that never end
            raise ValueError(f"GenericIterator: the pipeline has {len(readers)} readers "
                             f"({', '.join(readers)}); name the one that sets the epoch with reader_name=")
        return "reader" if readers else "stop"

    def _shard_size(self, index: int) -> int:
        count = len(self._pipes)
        return self._size * (index + 1) // count - self._size * index // count

    def __iter__(self):
        return self

    def __next__(self) -> list[dict[str, torch.Tensor]]:
        if self._epoch_done:
            self._finish_epoch()
        if self._mode == "reader" and self._policy is LastBatchPolicy.DROP and self._steps == self._full_steps():
            # every shard has this many full batches: stop here, on every pipeline and on every
            # process reading another shard, and leave the rest of the epoch unread
            self._skip_rest_of_epoch()
            self._epoch_done = True
            self._finish_epoch()
        step = []
        lasts = []
        for index, pipe in enumerate(self._pipes):
            if self._ended[index]:
                # its epoch ended sooner (on_error="skip" took more of its shard): running it would
                # start its next epoch, so its last batch comes again, as padding only
                step.append((self._last_outputs[index], 0))
                lasts.append(True)
                continue
            try:
                outputs = pipe.run()
            except StopIteration:
                self._epoch_done = True
                self._finish_epoch()
            if len(outputs) != len(self._output_map):
                raise ValueError(f"GenericIterator: the pipeline has {len(outputs)} outputs but output_map "
                                 f"names {len(self._output_map)}")
            valid, pipe_last = self._valid_samples(index, pipe, len(outputs[0]))
            if self._mode == "reader" and pipe_last:
                self._ended[index] = True
                self._last_outputs[index] = outputs
            lasts.append(pipe_last)
            step.append((outputs, valid))
        self._steps += 1
        # the epoch ends when every pipeline delivered its share (with `size`, shares may differ by one)
        if all(lasts):
            self._epoch_done = True
        short = any(valid < len(outputs[0]) for outputs, valid in step)
        if short and self._policy is LastBatchPolicy.DROP:
            self._finish_epoch()
        result = []
        for outputs, valid in step:
            tensors = [to_torch(batch, self._ragged, self._fill_value) for batch in outputs]
            named = dict(zip(self._output_map, tensors))
            if self._ragged == "pad":  # each padded output's true lengths along its first axis
                named.update({f"{name}_lengths": torch.tensor([shape[0] if shape else 1 for shape in batch.shape()], dtype=torch.int64)
                              for name, batch in zip(self._output_map, outputs) if not batch.is_dense_tensor()})
            if self._policy is LastBatchPolicy.PARTIAL:
                named = {name: tensor[:valid] for name, tensor in named.items()}
            if self._tv_tensors is not None:
                named = self._tv_tensors.wrap(named, {name: batch.layout() for name, batch in
                                                      zip(self._output_map, outputs)})
            result.append(named)
        return result

    next = __next__

    def _valid_samples(self, index: int, pipe: Pipeline, length: int) -> tuple[int, bool]:
        if self._mode == "reader":
            info = pipe.last_epoch_info
            return info.valid, info.last
        if self._mode == "size":
            remaining = self._shard_size(index) - self._delivered[index]
            valid = min(length, remaining)
            self._delivered[index] += valid
            return valid, remaining <= length
        return length, False

    def _finish_epoch(self):
        if self._auto_reset:
            self.reset()
        raise StopIteration

    def _full_steps(self) -> int:
        """Reader mode: the number of full batches that every shard has in every epoch."""
        meta = self._pipes[0].reader_meta(self._reader_name)
        return meta["epoch_size"] // meta["number_of_shards"] // self._pipes[0].batch_size

    def _skip_rest_of_epoch(self) -> None:
        """Runs each pipeline to its reader's epoch end, so that the next epoch starts aligned."""
        for pipe in self._pipes:
            info = pipe.last_epoch_info if self._steps else None
            while info is None or not info.last:
                pipe.run()
                info = pipe.last_epoch_info

    def reset(self) -> None:
        """Starts the next epoch; mid-epoch, the rest of the current epoch is skipped."""
        if not self._epoch_done and self._mode == "reader" and self._steps > 0:
            self._skip_rest_of_epoch()
        for pipe in self._pipes:
            pipe.reset()
        self._delivered = [0] * len(self._pipes)
        self._steps = 0
        self._epoch_done = False
        self._ended = [False] * len(self._pipes)
        self._last_outputs = [None] * len(self._pipes)

    def __len__(self) -> int:
        batch_size = self._pipes[0].batch_size
        if self._mode == "reader":
            if self._policy is LastBatchPolicy.DROP:
                return self._full_steps()
            return self._pipes[0].reader_meta(self._reader_name)["batches_per_epoch"]
        if self._mode == "size":
            shards = [self._shard_size(i) for i in range(len(self._pipes))]
            if self._policy is LastBatchPolicy.DROP:
                return min(shards) // batch_size
            return -(-max(shards) // batch_size)
        raise TypeError("GenericIterator: the length of an epoch of a source without epochs is unknown")

    @property
    def size(self) -> int:
        return self._size

    # ---- checkpoints (as DALI's iterators, and torchdata's StatefulDataLoader protocol) -------
    def checkpoints(self) -> list[str]:
        """One checkpoint per pipeline (made with enable_checkpointing=True), with this iterator's
        place in the epoch: pipelines made with ``checkpoint=`` these, and an iterator over them,
        give exactly the steps this one would give next."""
        state = {"steps": self._steps, "delivered": list(self._delivered), "epoch_done": self._epoch_done}
        return [pipe.checkpoint(iterator_state=state) for pipe in self._pipes]

    def state_dict(self) -> dict:
        return {"checkpoints": self.checkpoints()}

    def load_state_dict(self, state: dict) -> None:
        """Resumes from ``state_dict()``'s value; before the first step."""
        checkpoints = state.get("checkpoints") if isinstance(state, dict) else None
        if not isinstance(checkpoints, (list, tuple)):
            raise ValueError("load_state_dict: give what state_dict() returned (a dict whose 'checkpoints' is a list "
                             f"of one checkpoint per pipeline), got {type(state).__name__}")
        if len(checkpoints) != len(self._pipes):
            raise ValueError(f"load_state_dict: {len(checkpoints)} checkpoints for {len(self._pipes)} pipelines")
        for pipe, checkpoint in zip(self._pipes, checkpoints):
            pipe.restore(checkpoint)
        self._take_state(self._pipes[0].restored_iterator_state or {"steps": 0, "delivered": [0] * len(self._pipes),
                                                                    "epoch_done": False})

    def _take_state(self, state: dict) -> None:
        """The place in the epoch of the iterator that took the checkpoint (its fields' types were
        checked when the checkpoint was loaded; here, what they must be for this iterator)."""
        where = self._pipes[0].restored_from or "checkpoint"
        if len(state["delivered"]) != len(self._pipes):
            raise checkpoints.field_error(where, "iterator.delivered", f"a list of {len(self._pipes)} counts (one per "
                                          "pipeline)", state["delivered"])
        if self._mode == "reader" and state["steps"] > len(self):
            raise checkpoints.field_error(where, "iterator.steps", f"at most the epoch's {len(self)} steps",
                                          state["steps"])
        self._steps = state["steps"]
        self._delivered = list(state["delivered"])
        self._epoch_done = state["epoch_done"]

    @property
    def skipped_count(self) -> int:
        """Samples that pipelines made with on_error="skip" left out in the current epoch (the
        epoch of the last batch delivered); ``pipe.skipped()`` says which and why."""
        return sum(len(pipe.skipped()) for pipe in self._pipes)


class ClassificationIterator(GenericIterator):
    """A GenericIterator over pipelines with two outputs, named "data" and "label"."""

    def __init__(self, pipelines, size: int = -1, reader_name: str | None = None, auto_reset: bool | str = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, last_batch_padded: bool = False,
                 fill_last_batch: bool | None = None, dynamic_shape: bool = False, prepare_first_batch: bool = True,
                 ragged: str = "list", fill_value=0):
        super().__init__(pipelines, ["data", "label"], size=size, reader_name=reader_name, auto_reset=auto_reset,
                         last_batch_policy=last_batch_policy, last_batch_padded=last_batch_padded,
                         fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         prepare_first_batch=prepare_first_batch, ragged=ragged, fill_value=fill_value)


__all__ = ["ClassificationIterator", "GenericIterator", "LastBatchPolicy", "TvTensors", "to_torch"]
