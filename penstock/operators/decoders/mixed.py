"""The image decoders on the GPU ('mixed'): the CPU decoder of the same name chooses each window on
the workers (so both devices choose the same windows for the same seed) and the GPU stage decodes
the batch on the hardware JPEG engines and CUDA cores; where the engines set the pace (large JPEGs)
and cores are spare, the workers decode a share themselves (``cpu_decoder_load``,
operators.decoders.cpu_share)."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from penstock import registry, types
from penstock.capabilities import PreparesOnCpu, ReportsEngines, SharesWindows, ShrinksOnDecode, WantsCpuWorkers
from penstock.contract import BatchOperator
from penstock.kernels import image_codecs
from penstock.operators.decoders.cpu_share import GOLDEN, least_window_share, share_model
from penstock.operators.decoders.images import DecoderDeclaration, Image, ImageCrop, ImageRandomCrop, ImageSlice
from penstock.runtime.nvimgcodec_library import decoder_problem


class MixedDecoder(PreparesOnCpu, ShrinksOnDecode, SharesWindows, WantsCpuWorkers, ReportsEngines, DecoderDeclaration,
                   BatchOperator):
    """Decodes on the GPU. The CPU workers parse each header and choose its window (random crop,
    fixed crop, slice: the CPU decoder of the same name decides, so both devices choose the same
    windows for the same seed) and tell which JPEGs the hardware decoders take; the GPU stage then
    decodes the batch, ``hw_decoder_load`` of those on the hardware JPEG engines (one nvJPEG call)
    and the rest through nvImageCodec on CUDA cores."""

    cpu_class = None
    preparation_crosses_processes = True  # prepare() returns plain data
    lanes = (("GPU decode", 2),)  # runtime.nvimgcodec_decode.LANES

    def __init__(self, args, context):
        super().__init__(args, context)
        self._windows = self.cpu_class(args, context)
        self._engine = None
        self._emulated = context.emulated_gpu  # decode on the CPU workers, for the emulated GPU
        # the GPU's decoders make 8-bit RGB, BGR or gray: other outputs are decoded by the CPU
        # workers and uploaded
        self._decoded_on_cpu = self._emulated or args.dtype is not types.UINT8 or \
            args.output_type not in (types.RGB, types.BGR, types.GRAY)
        self._tuning = context.tuning
        self._cpu_load = args.cpu_decoder_load  # None: automatic_cpu_share, per image
        self._automatic_cpu_share = share_model(context.tuning)
        # the machine's cores per pipeline, not num_threads: the batches stay the same whatever the threads
        self._spare_cores = context.cores - context.tuning.pipeline_cores
        self._window_floor = 0.0  # least_window_share(...) once share_windows() says the engines set it

    def share_windows(self):
        self._window_floor = least_window_share(self._spare_cores, self._tuning)

    # the GPU's decoders read the encoded JPEGs where the workers put them (and the GPU uploads the
    # share they decoded themselves, with cpu_decoder_load)
    gpu_reads_preparations = True

    def decode_smaller_for(self, target):  # what the CPU workers decode of the batch
        self._windows.decode_smaller_for(target)

    def build_notes(self):
        if self._cpu_load is None:
            whole = self.cpu_class is Image
            small, large = (self._automatic_cpu_share(pixels, self._spare_cores, whole_image=whole,
                                                window_floor=self._window_floor)
                            for pixels in (500 * 375, 2_000_000))
            what = "whole images" if whole else "windows down to the bottom row; more of windows nearer the top"
            notes = [f"decodes a share of the JPEGs on the CPU workers, by size ({small:.0%} of 500x375 ones, "
                     f"{large:.0%} of 2-megapixel ones; {what})"] if large else []
        else:
            notes = [f"decodes {self._cpu_load:.0%} of each batch's JPEGs on the CPU workers"] if self._cpu_load else []
        return notes + self._windows.build_notes()

    def decodes_on_cpu(self, index: int, pixels: int = 0, rows_read: float = 1.0, whole_image: bool = False) -> bool:
        """Whether sample ``index`` of a batch (a JPEG of ``pixels`` pixels whose decode on the CPU
        reads ``rows_read`` of its rows; ``whole_image``: without a window) is in the CPU workers'
        share: spread evenly over the batch, and no timing decides, so a seed gives the same pixels
        in every run. A given cpu_decoder_load takes the same samples of every batch; the automatic
        share of each image is taken at a fixed, evenly spread point per index."""
        load = self._cpu_load
        if load is None:
            share = self._automatic_cpu_share(pixels, self._spare_cores, rows_read, whole_image, self._window_floor)
            return share > 0 and (index + 1) * GOLDEN % 1.0 < share
        return load > 0 and math.floor((index + 1) * load) > math.floor(index * load)

    def draw(self, rng, count):
        return self._windows.draw(rng, count)

    def cpu_workers_wanted(self) -> int:
        """The automatic share keeps the machine's spare cores busy: as many workers as its cores
        per pipeline, even where num_threads asks for fewer (DALI's examples ask for 4), which the
        share of large JPEGs would leave the pipeline waiting for."""
        if self._cpu_load is not None or self._spare_cores <= 0 or self._decoded_on_cpu:
            return 0
        tuning = self._tuning  # the machine's cores per pipeline, at most max_share_workers (21 busy at the cap)
        return min(self._spare_cores + tuning.pipeline_cores, tuning.max_share_workers)

    @property
    def engines(self) -> list[str]:
        if self._engine is None:
            return ["CPU threads"]
        engines = []
        if self._engine.decoded_on_gpu:
            engines.append("GPU (hardware JPEG engines and CUDA cores)")
        if self._engine.decoded_on_cpu:
            engines.append("CPU workers (their share of the JPEGs, and what the GPU decoders do not take)")
        return engines

    def prepare(self, inputs, args, sample):
        """On a CPU worker (thread or process): an EncodedImage (the data, its size and window); the
        decoded window itself when the GPU is emulated on the CPU."""
        if self._decoded_on_cpu:
            return np.asarray(self._windows.run(inputs, args, sample))
        return self.encoded(inputs, args, sample)

    def encoded(self, inputs, args, sample):
        """The EncodedImage of one sample: a JPEG's data, size, window, and whether the hardware
        JPEG decoders take it (from the header, checked against ``max_pixels``). What the GPU
        decoders do not take (other formats; CMYK, YCCK, 12-bit, lossless and arithmetic-coded
        JPEGs; JPEGs to be shown rotated or flipped) is decoded here by the CPU decoder of the same
        name (the same window for the same draws) and goes to the GPU as pixels: decoded once, and
        not on the thread that launches the GPU work."""
        from penstock.runtime.encoded_images import EncodedImage
        data = np.ascontiguousarray(inputs[0])  # the decoders read its bytes from its address
        header = image_codecs.jpeg_header(data) if image_codecs.is_jpeg(data) else None
        if header is None or not header.gpu or (args.adjust_orientation and header.orientation != 1):
            return self._decoded_here(inputs, args, sample)
        image_codecs.check_pixels(header.height, header.width, args.max_pixels)
        window = self._clipped_window(header.height, header.width, inputs, args, sample)
        rows_read = 1.0 if window is None else (window[0] + window[2]) / header.height
        if self.decodes_on_cpu(sample.index, header.height * header.width if header.hardware else 0, rows_read,
                               window is None):
            return self._decoded_here(inputs, args, sample, window[2:] if window else (header.height, header.width))
        return EncodedImage((data, window, header.height, header.width, header.hardware))

    def _decoded_here(self, inputs, args, sample, extent=None):
        """The CPU decoder's image; ``extent``: the size the GPU's decoders would have made of it."""
        from penstock.runtime.encoded_images import EncodedImage
        image = np.ascontiguousarray(self._windows.run(inputs, args, sample))
        if extent is None:
            return EncodedImage((image, None, image.shape[0], image.shape[1], False))
        return EncodedImage((image, None, image.shape[0], image.shape[1], False, tuple(extent)))

    def _clipped_window(self, height, width, inputs, args, sample):
        window = self._windows.window(height, width, inputs, args, sample)
        if window is not None:
            self._windows._check_window(window, height, width)
            top, left, crop_height, crop_width = window
            top, left = max(top, 0), max(left, 0)
            window = (top, left, min(crop_height, height - top), min(crop_width, width - left))
        return window

    def run_batch(self, inputs, args, batch):
        import torch
        from penstock.kernels.image_plan import ImagePlan
        from penstock.runtime.pinned import to_device
        prepared = inputs[0]
        if self._decoded_on_cpu:  # copies: the images may lie in worker processes' rings, written over after the batch
            images = [torch.from_numpy(np.array(image)) for image in prepared]
            return ImagePlan.of(images if self._emulated else [image.to(batch.device) for image in images],
                                upload=to_device)
        if self._engine is None:
            self._engine = self._new_engine(batch.device, batch.run_call)
        def describe(index):  # errors surface when the batch's outputs are made, so they name the operator
            return f"{self.name} on '{batch.source_infos[index]}'" if batch.source_infos else \
                f"{self.name} on sample {index}"

        # the decode runs while the executor finishes the batch before this one; the plan waits
        # for it before its kernel reads the images
        pending = self._engine.submit(prepared, batch.stream, describe, batch.run_call, batch.run_on_workers)
        return replace(ImagePlan.of(pending.images, upload=to_device), pending=pending)

    def open(self, device, run_call):
        """nvImageCodec's instance and nvJPEG's hardware decoder take a second or two to make: made
        while the CPU stage reads and parses the first batch, not after."""
        if self._engine is None and not self._decoded_on_cpu and device is not None and device.type == "cuda":
            self._engine = self._new_engine(device, run_call)

    def _new_engine(self, device, run_call):
        from penstock.runtime.nvimgcodec_decode import GpuImageDecoder
        return GpuImageDecoder(device.index or 0, self.context.num_threads, self.args.output_type,
                               self.args.hw_decoder_load, batch_size_hint=self.context.batch_size,
                               run_call=run_call, buffer_steps=self.context.tuning.decode_buffer_steps)

    def close(self):
        if self._engine is not None:  # kept: its counts say which engines decoded
            self._engine.close()


@registry.register("decoders.image", "mixed", requires=decoder_problem)
class ImageMixed(MixedDecoder):
    cpu_class = Image


@registry.register("decoders.image_random_crop", "mixed", requires=decoder_problem)
class ImageRandomCropMixed(MixedDecoder):
    cpu_class = ImageRandomCrop


@registry.register("decoders.image_crop", "mixed", requires=decoder_problem)
class ImageCropMixed(MixedDecoder):
    cpu_class = ImageCrop


@registry.register("decoders.image_slice", "mixed", requires=decoder_problem)
class ImageSliceMixed(MixedDecoder):
    cpu_class = ImageSlice
