"""The GPU decoder's split of a batch: which JPEGs go to the hardware decoders (decided from the
header on the CPU workers), and, on a GPU, that every kind of image in one batch decodes as the CPU
decoder does: hardware JPEGs, JPEGs for nvImageCodec, other formats, and a batch nvJPEG refuses."""
import io

import numpy as np
import pytest
from conftest import CUDA
from PIL import Image

from penstock.kernels import image_codecs
from penstock.tuning import DEFAULT
from penstock.types import DALIImageType


def _image(height=48, width=64, seed=0):
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (height // 8, width // 8, 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR))


def _encoded(image, mode="RGB", **options):
    buffer = io.BytesIO()
    Image.fromarray(image).convert(mode).save(buffer, **({"format": "JPEG"} | options))
    return np.frombuffer(buffer.getvalue(), np.uint8).copy()


KINDS = {  # name -> (encoded, taken by the hardware decoders)
    "baseline 4:2:0": (_encoded(_image(seed=1)), True),
    "baseline 4:4:4": (_encoded(_image(seed=2), subsampling=0), True),
    "baseline 4:2:2": (_encoded(_image(seed=3), subsampling=1), True),
    "gray": (_encoded(_image(seed=4), "L"), True),
    "progressive": (_encoded(_image(seed=5), progressive=True), False),
    "CMYK": (_encoded(_image(seed=6), "CMYK"), False),
    "PNG": (_encoded(_image(seed=7), format="PNG"), False),
}


@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "PNG"])
def test_jpeg_header_tells_what_the_hardware_takes(kind):
    encoded, expected = KINDS[kind]
    assert image_codecs.jpeg_header(encoded).hardware is expected


@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "PNG"])
def test_jpeg_header_reads_the_size_libjpeg_turbo_reads(kind):
    encoded = KINDS[kind][0]
    assert image_codecs.jpeg_header(encoded)[:2] == image_codecs.jpeg_size(encoded) == (48, 64)


def test_a_first_scan_without_every_component_is_not_for_the_hardware():
    encoded = KINDS["baseline 4:2:0"][0].copy()
    start_of_scan = bytes(encoded).find(b"\xff\xda")
    assert encoded[start_of_scan + 4] == 3
    encoded[start_of_scan + 4] = 1  # a non-interleaved baseline JPEG: one component a scan
    assert image_codecs.jpeg_header(encoded)[:3] == (48, 64, False)


def test_jpeg_header_names_truncated_headers_and_takes_restart_markers():
    encoded = KINDS["baseline 4:2:0"][0]
    for truncated in (encoded[:40], encoded[:4]):
        with pytest.raises(image_codecs.DecodeError, match="corrupt JPEG header"):
            image_codecs.jpeg_header(truncated)
    import cv2
    ok, restarts = cv2.imencode(".jpg", _image(seed=8), [cv2.IMWRITE_JPEG_RST_INTERVAL, 2])
    assert image_codecs.jpeg_header(restarts).hardware  # restart markers are not a second scan


def _gpu_decoder(output_type=DALIImageType.RGB):
    if not CUDA:
        pytest.skip("needs a CUDA GPU")
    try:
        from penstock.runtime.nvimgcodec_decode import GpuImageDecoder
        return GpuImageDecoder(0, 4, output_type, 1.0, batch_size_hint=8, buffer_steps=DEFAULT.decode_buffer_steps)
    except ImportError as error:
        pytest.skip(str(error))


def _items(kinds, claim_hardware=None):
    from penstock.runtime.encoded_images import EncodedImage
    items = []
    for index, kind in enumerate(kinds):
        encoded, hardware = KINDS[kind]
        height, width = image_codecs.image_size(encoded)
        window = (5, 7, 30, 40) if index % 2 else None
        items.append(EncodedImage((encoded, window, height, width,
                                   hardware if claim_hardware is None else claim_hardware)))
    return items


def _check_against_cpu(items, images, output_type=DALIImageType.RGB):
    for (encoded, window, _, _, _), image in zip(items, images):
        reference = image_codecs.decode(encoded, output_type).astype(np.int16)
        if window is not None:
            top, left, height, width = window
            reference = reference[top:top + height, left:left + width]
        difference = np.abs(image.cpu().numpy().astype(np.int16) - reference)
        # decoders round differently (CMYK conversion: off by one everywhere), never by much
        assert difference.mean() <= 1.5 and difference.max() <= 8


@pytest.mark.parametrize("output_type", [DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY])
def test_every_kind_of_image_in_one_batch_decodes_as_on_the_cpu(output_type):
    import torch
    decoder = _gpu_decoder(output_type)
    items = _items(list(KINDS) * 2)
    handed_back = []

    def run_on_workers(calls):  # the executor's CPU workers, here: records what is handed back
        handed_back.append(len(calls))
        for call in calls:
            call()
    pending = decoder.submit(items, torch.cuda.current_stream(), run_on_workers=run_on_workers)
    pending.wait()
    torch.cuda.synchronize()
    _check_against_cpu(items, pending.images, output_type)
    if decoder._hardware is not None:  # a GPU with hardware JPEG decoders
        assert sorted(pending.hardware) == [i for i, item in enumerate(items) if item[4]]
    assert decoder.decoded_on_cpu >= 2 and sum(handed_back) == decoder.decoded_on_cpu  # the PNGs at least
    decoder.close()


def test_a_batch_the_hardware_refuses_is_decoded_by_nvimagecodec():
    import torch
    decoder = _gpu_decoder()
    if decoder._hardware is None:
        pytest.skip("needs a GPU with hardware JPEG decoders")
    items = _items(["baseline 4:2:0", "progressive", "baseline 4:4:4"], claim_hardware=True)
    pending = decoder.submit(items, torch.cuda.current_stream())
    pending.wait()
    torch.cuda.synchronize()
    _check_against_cpu(items, pending.images)
    assert decoder.decoded_on_gpu + decoder.decoded_on_cpu == 3 and decoder.decoded_on_gpu >= 2
    assert decoder.refused_by_hardware == 3
    for _ in range(2):  # the same nvJPEG states decode good batches of the same size afterwards
        items = _items(["baseline 4:2:0", "gray", "baseline 4:4:4"])
        pending = decoder.submit(items, torch.cuda.current_stream())
        pending.wait()
        torch.cuda.synchronize()
        assert sorted(pending.hardware) == [0, 1, 2] and decoder.refused_by_hardware == 3
        _check_against_cpu(items, pending.images)
    decoder.close()



def test_hardware_batches_shrink_and_grow_again():
    """Batches whose hardware share changes from one to the next (other formats among the JPEGs, a
    short last batch) set nvJPEG's states up again for their size, smaller and larger than before."""
    import torch
    decoder = _gpu_decoder()
    if decoder._hardware is None:
        pytest.skip("needs a GPU with hardware JPEG decoders")
    for count in (24, 18, 12, 8, 4, 2, 1, 24, 3):
        items = _items((["baseline 4:2:0", "baseline 4:4:4", "gray"] * 8)[:count])
        pending = decoder.submit(items, torch.cuda.current_stream())
        pending.wait()
        torch.cuda.synchronize()
        assert sorted(pending.hardware) == list(range(count))
        _check_against_cpu(items, pending.images)
    assert decoder.refused_by_hardware == 0 and decoder.decoded_on_cpu == 0
    decoder.close()


def test_the_hardware_lane_decodes_as_the_calls_made_from_python(monkeypatch):
    """Where the hardware lane is built (a C compiler: Triton needs one on a GPU machine), the
    hardware share's calls are its thread's; the same batches through the decode calls made from
    Python give the same pixels, batch after batch (the states reused, a smaller batch between)."""
    import torch
    from penstock.runtime import hardware_lane
    from penstock.runtime import native
    decoders = {"lane": _gpu_decoder()}
    if decoders["lane"]._hardware is None:
        pytest.skip("needs a GPU with hardware JPEG decoders")
    assert decoders["lane"]._hardware.lane is not None, native.problem(hardware_lane.NAME)
    monkeypatch.setattr(hardware_lane, "for_nvjpeg", lambda *arguments: None)
    decoders["python"] = _gpu_decoder()
    assert decoders["python"]._hardware.lane is None
    for count in (8, 3, 8):
        items = _items((["baseline 4:2:0", "baseline 4:4:4", "gray", "baseline 4:2:2"] * 2)[:count])
        decoded = {}
        for name, decoder in decoders.items():
            pending = decoder.submit(items, torch.cuda.current_stream())
            assert pending.on_lane is (name == "lane")
            pending.wait()
            torch.cuda.synchronize()
            assert sorted(pending.hardware) == list(range(count))
            decoded[name] = [image.cpu() for image in pending.images]
        assert all(torch.equal(a, b) for a, b in zip(decoded["lane"], decoded["python"]))
        _check_against_cpu(items, decoded["lane"])
    assert decoders["lane"].seconds["decode call (decode stage)"] > 0
    for decoder in decoders.values():
        decoder.close()


def test_hardware_and_cuda_decoders_share_a_batch():
    """hw_decoder_load 0.5: half the JPEGs the hardware takes go to it, the rest to nvImageCodec,
    both decoded at once by the decoder's two threads."""
    import torch
    from penstock.runtime.nvimgcodec_decode import GpuImageDecoder
    if not CUDA:
        pytest.skip("needs a CUDA GPU")
    decoder = GpuImageDecoder(0, 4, DALIImageType.RGB, 0.5, batch_size_hint=8, buffer_steps=DEFAULT.decode_buffer_steps)
    if decoder._hardware is None:
        pytest.skip("needs a GPU with hardware JPEG decoders")
    items = _items(["baseline 4:2:0", "baseline 4:4:4", "baseline 4:2:2", "gray"] * 6)
    for _ in range(3):  # batches after the first reuse the decoders' states
        pending = decoder.submit(items, torch.cuda.current_stream())
        assert len(pending.hardware) == 12 and len(pending.decoding) == 12
        pending.wait()
        torch.cuda.synchronize()
        _check_against_cpu(items, pending.images)
    assert decoder.decoded_on_cpu == 0
    decoder.close()


def test_encoded_data_address_for_writable_read_only_and_offset_arrays():
    from penstock.columns import address_of as _address
    writable = np.arange(32, dtype=np.uint8)
    read_only = np.frombuffer(bytes(32), np.uint8)
    for array in (writable, read_only, writable[5:], read_only[7:]):
        assert _address(array) == array.ctypes.data


def _mixed_and_cpu_decoders(name="decoders.image_random_crop", num_threads=1, cores=1, **given):
    from penstock import registry
    from penstock.contract import BuildContext
    from penstock.operators.decoders import images as decoders
    args, _ = registry.get_schema(name).validate({"output_type": DALIImageType.RGB, **given})
    context = BuildContext(batch_size=4, num_threads=num_threads, device_id=None, seed=3, cores=cores)
    return registry.implementations()[(name, "mixed")](args, context), decoders.ImageRandomCrop(args, context), args


def test_the_workers_send_jpeg_headers_and_decode_other_formats_themselves():
    from penstock.contract import SampleContext
    mixed, cpu, args = _mixed_and_cpu_decoders()
    draws = mixed.draw(np.random.Generator(np.random.Philox(key=[3, 0])), 2)
    jpeg, png = KINDS["baseline 4:2:0"][0], KINDS["PNG"][0]
    data, window, height, width, hardware = mixed.encoded((jpeg,), args, SampleContext(0, "a.jpg", draws[0]))
    assert data is jpeg and (height, width, hardware) == (48, 64, True)
    top, left, window_height, window_width = window
    assert 0 <= top and top + window_height <= 48 and 0 <= left and left + window_width <= 64
    pixels, window, height, width, hardware = mixed.encoded((png,), args, SampleContext(1, "b.png", draws[1]))
    reference = cpu.run((png,), args, SampleContext(1, "b.png", draws[1]))
    np.testing.assert_array_equal(pixels, reference)  # the same window, decoded once, on the worker
    assert window is None and (height, width) == reference.shape[:2] and not hardware


def test_the_cpu_workers_decode_their_share_of_the_jpegs():
    """cpu_decoder_load 0.5: every other sample of a batch is decoded on its worker (the CPU
    decoder's window for the same draws), the rest go to the GPU as encoded data; the same samples
    in every batch."""
    from penstock.contract import SampleContext
    mixed, cpu, args = _mixed_and_cpu_decoders(cpu_decoder_load=0.5)
    draws = mixed.draw(np.random.Generator(np.random.Philox(key=[3, 0])), 4)
    jpeg = KINDS["baseline 4:2:0"][0]
    on_cpu = []
    for index in range(4):
        item = mixed.encoded((jpeg,), args, SampleContext(index, "a.jpg", draws[index]))
        data, window, height, width, hardware = item[:5]
        if data.ndim == 3:
            on_cpu.append(index)
            np.testing.assert_array_equal(data, cpu.run((jpeg,), args, SampleContext(index, "a.jpg", draws[index])))
            assert window is None and (height, width) == data.shape[:2] and not hardware
            assert item.extent == data.shape[:2]  # the window the GPU would have decoded, here at full scale
        else:
            assert data is jpeg and hardware and item.extent is None
    assert on_cpu == [1, 3]
    assert [index for index in range(8) if mixed.decodes_on_cpu(index)] == [1, 3, 5, 7]


def test_the_cpu_share_spreads_over_the_batch():
    mixed, _, _ = _mixed_and_cpu_decoders(cpu_decoder_load=0.2)
    chosen = [index for index in range(256) if mixed.decodes_on_cpu(index)]
    assert len(chosen) == 51 and chosen[:3] == [4, 9, 14]
    assert chosen == [index for index in range(256) if mixed.decodes_on_cpu(index, 2_000_000)]  # given: any size
    nothing, _, _ = _mixed_and_cpu_decoders(cpu_decoder_load=0.0)
    assert not any(nothing.decodes_on_cpu(index, 2_000_000) for index in range(256))
    assert nothing.gpu_reads_preparations  # the GPU's decoders read the JPEGs out of the workers' rings


def test_the_automatic_cpu_share_follows_image_size_and_spare_cores():
    """Not given, the share is the smaller of what brings the hardware engines' time per image
    down to twice the pipeline's (for windows, at least the floor given) and what the spare cores
    keep pace with: none for whole ImageNet-sized JPEGs, for JPEGs the engines do not take or
    without spare cores, the floor of ImageNet-sized windows, about a fifth of whole 2-megapixel images with
    12 spare cores, and more of windows whose decode on the CPU reads fewer of the image's rows."""
    from penstock.operators.decoders.cpu_share import share_model
    automatic_cpu_share = share_model(DEFAULT)
    floor = {"window_floor": 0.1}  # where the engines set the pace (test_windows_are_shared_where_...)
    for pixels in (500 * 375, 600 * 800):
        assert automatic_cpu_share(pixels, 60, whole_image=True, **floor) == 0.0
        assert automatic_cpu_share(pixels, 60, **floor) == automatic_cpu_share(pixels, 60, 0.1, **floor) == 0.1
        assert automatic_cpu_share(pixels, 60) == 0.0
    assert automatic_cpu_share(0, 60, **floor) == 0.0  # not for the engines: nothing to take off them
    assert automatic_cpu_share(500 * 375, 2, rows_read=0.5, **floor) == pytest.approx(2 / 26)  # what 2 spare cores keep up with
    assert automatic_cpu_share(2_000_000, 0) == 0.0 and automatic_cpu_share(2_000_000, -2) == 0.0
    assert automatic_cpu_share(2_000_000, 12) == pytest.approx(12 / 60)
    assert automatic_cpu_share(2_000_000, 12, rows_read=0.5) == 0.3  # 12 / 36, beyond the cap
    assert automatic_cpu_share(2_000_000, 10, rows_read=0.75) == pytest.approx(10 / 46)
    assert automatic_cpu_share(2_000_000, 10) < automatic_cpu_share(2_000_000, 10, rows_read=0.9)
    # whole images (no window) at most 0.2, windows 0.3: what was measured to pay on 32 cores
    assert automatic_cpu_share(2_000_000, 26, whole_image=True) == 0.2
    assert automatic_cpu_share(2_000_000, 26) == 0.3
    assert automatic_cpu_share(2_000_000, 10, whole_image=True) == pytest.approx(10 / 58)
    assert automatic_cpu_share(2_000_000, 60) == 0.3  # at most what was measured to pay
    one = automatic_cpu_share(1_000_000, 60)
    assert one == pytest.approx(1 - 2 * 37 / 95)  # here the engines' time sets it
    assert 0 < automatic_cpu_share(800_000, 60) < one < automatic_cpu_share(1_500_000, 60)


def test_the_automatic_cpu_share_takes_the_same_samples_whatever_the_threads():
    from penstock.contract import SampleContext
    from penstock.operators.decoders import cpu_share
    (few, cpu, args), (many, _, _) = (_mixed_and_cpu_decoders(num_threads=threads) for threads in (1, 8))
    assert args["cpu_decoder_load"] is None and few._spare_cores == many._spare_cores  # the machine's cores
    few._spare_cores = many._spare_cores = 12
    small, large = (
        [index for index in range(256) if decoder.decodes_on_cpu(index, pixels, whole_image=True)]
        for decoder, pixels in ((few, 400 * 300), (few, 1600 * 1200)))
    assert small == [] and 45 <= len(large) <= 58  # 20% of 256 whole images, spread over the batch
    assert max(np.diff(large)) <= 8
    assert large == [index for index in range(256) if many.decodes_on_cpu(index, 1600 * 1200, whole_image=True)]
    assert not any(few.decodes_on_cpu(index, 400 * 300, rows_read=0.8) for index in range(256))
    few.share_windows(), many.share_windows()  # the engines set the pace: that floor of small windows
    windows = [index for index in range(256) if few.decodes_on_cpu(index, 400 * 300, rows_read=0.8)]
    assert abs(len(windows) - 256 * cpu_share.least_window_share(12, DEFAULT)) <= 5 and max(np.diff(windows)) <= 26
    assert windows == [index for index in range(256) if many.decodes_on_cpu(index, 400 * 300, rows_read=0.8)]
    # a 2-megapixel JPEG chosen for the workers' share comes back decoded (the CPU decoder's window)
    jpeg = _encoded(_image(1200, 1600, seed=9))
    draws = few.draw(np.random.Generator(np.random.Philox(key=[3, 0])), 256)
    index = large[0]
    data, window, height, width, hardware, extent = few.encoded((jpeg,), args, SampleContext(index, "a.jpg", draws[index]))
    np.testing.assert_array_equal(data, cpu.run((jpeg,), args, SampleContext(index, "a.jpg", draws[index])))
    assert window is None and not hardware and extent == data.shape[:2]  # no resize after it: full scale
    # not in the share even of windows at the top (the share's cap)
    other = next(index for index in range(256) if (index + 1) * cpu_share.GOLDEN % 1.0 >= DEFAULT.max_automatic_cpu_share)
    data, *_ = few.encoded((jpeg,), args, SampleContext(other, "a.jpg", draws[other]))
    assert data is jpeg  # the rest go to the GPU encoded


def test_the_automatic_cpu_share_gets_a_worker_per_core_whatever_num_threads(tmp_path, monkeypatch):
    """The automatic share is sized by the machine's cores per pipeline: the decoder asks for that
    many workers (at most 32), and the pipeline runs them even where num_threads asks for fewer (a
    share of large JPEGs on 2 workers would leave the GPU waiting); a given cpu_decoder_load, or the
    emulated GPU (which decodes every image on the workers), leaves num_threads to decide."""
    from conftest import gpu_or_emulated

    from penstock import devices, fn, pipeline_def
    from penstock.operators.decoders import mixed as decoders
    assert _mixed_and_cpu_decoders(cores=8)[0].cpu_workers_wanted() == 8  # 2 spare cores
    assert _mixed_and_cpu_decoders(cores=8, cpu_decoder_load=0.0)[0].cpu_workers_wanted() == 0
    with devices.emulated_gpu():
        assert _mixed_and_cpu_decoders(cores=8)[0].cpu_workers_wanted() == 0
    assert _mixed_and_cpu_decoders(cores=128)[0].cpu_workers_wanted() == 32  # a pipeline alone on a large host

    monkeypatch.setattr(decoders.MixedDecoder, "cpu_workers_wanted", lambda self: 6)
    Image.fromarray(_image(48, 64)).save(tmp_path / "a.jpg")

    @pipeline_def(batch_size=2, num_threads=2, device_id=0, seed=1, worker_processes=True)
    def pipe():
        jpegs, _ = fn.readers.file(files=[str(tmp_path / "a.jpg")] * 2)
        return fn.decoders.image(jpegs, device="mixed")
    with gpu_or_emulated():
        built = pipe()
        built.build()
        try:
            built.run()
            assert built._executor._processes.count == 6
        finally:
            built.close()


def test_windows_are_shared_where_the_engines_set_the_pace(tmp_path, monkeypatch):
    """The decoder's windows get a share on the CPU workers only where every other GPU step is a
    copy or a step of the fused image kernel (the ResNet-50 training recipe); a step that launches
    work of its own (a filter, RandAugment's statistics, box encoding) means the hardware engines do
    not set the pace, and the share would only add work. The share grows with the spare cores: 6%
    on 16 cores, 10% at most (on 24 or more), none without spare cores."""
    from conftest import gpu_or_emulated

    from penstock import distributed, fn, pipeline_def, types
    from penstock.operators.decoders import mixed as decoders
    from penstock.operators.decoders.cpu_share import least_window_share
    cores = DEFAULT.pipeline_cores
    assert least_window_share(16 - cores, DEFAULT) == pytest.approx(0.06)
    assert least_window_share(32 - cores, DEFAULT) == 0.1
    assert least_window_share(122, DEFAULT) == 0.1
    assert least_window_share(2 - cores, DEFAULT) == least_window_share(0, DEFAULT) == 0.0
    monkeypatch.setattr(distributed, "default_threads", lambda: 16)  # the machine's cores per pipeline
    Image.fromarray(_image(48, 64)).save(tmp_path / "a.jpg")

    def built(extra):
        @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=1, worker_processes=False)
        def pipe():
            jpegs, labels = fn.readers.file(files=[str(tmp_path / "a.jpg")] * 2, labels=[0, 1])
            images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB)
            images = extra(fn.resize(images, resize_x=32, resize_y=32))
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW",
                                              mirror=fn.random.coin_flip())
            return images, labels.gpu()
        made = pipe()
        made.build()
        decoder = next(impl for impl in made._impls.values() if isinstance(impl, decoders.MixedDecoder))
        made.close()
        return decoder._window_floor

    with gpu_or_emulated():
        assert built(lambda images: fn.flip(images, horizontal=1)) == pytest.approx(0.06)
        assert built(lambda images: fn.gaussian_blur(images, window_size=3)) == 0.0


def test_the_automatic_cpu_share_prefers_windows_the_workers_decode_cheaply():
    """A window near the image's top costs the CPU decoder less (it reads the entropy-coded rows
    down to the window's bottom), where the hardware engines take the same time for any window: a
    sample whose point lies between the whole image's share and the top window's is decoded on the
    workers for the top window only."""
    from penstock.contract import SampleContext
    from penstock.operators.decoders.cpu_share import GOLDEN, share_model
    jpeg = _encoded(_image(1200, 1600, seed=4))
    whole = share_model(DEFAULT)(1200 * 1600, 12)
    index = next(index for index in range(256) if whole <= (index + 1) * GOLDEN % 1.0 < 0.25)
    for rel_start, on_cpu in (((0.0, 0.0), True), ((0.0, 0.7), False)):  # (x, y): at the top, near the bottom
        mixed, _, args = _mixed_and_cpu_decoders("decoders.image_slice", rel_start=rel_start, rel_shape=(0.5, 0.3))
        mixed._spare_cores = 12
        data, window, *_ = mixed.encoded((jpeg,), args, SampleContext(index, "a.jpg", None))
        assert (data.ndim == 3) == on_cpu and (window is None) == on_cpu
        if on_cpu:
            assert data.shape == (360, 800, 3)


def test_the_batch_buffer_keeps_the_gpu_decoders_room_for_the_workers_share():
    """The workers' share of the JPEGs comes as pixels, smaller where a resize follows (DCT
    scaling), but keeps the room the GPU's decoders would have taken in the batch buffer: its size
    does not move with which JPEGs the workers took (the allocator keeps a block of every size)."""
    from penstock.columns import RowColumn
    from penstock.runtime.encoded_images import EncodedImage, batch_layout
    jpeg = np.zeros(1000, np.uint8)
    small = np.zeros((30, 40, 3), np.uint8)  # a 120 x 160 window decoded at 1/4 scale
    ring = np.zeros(small.nbytes, np.uint8)
    plain = EncodedImage((small, None, 30, 40, False))  # a format the GPU does not take: its own size
    share = EncodedImage((small, None, 30, 40, False, (120, 160)))
    assert EncodedImage.from_ring_row(ring, share.ring_row())[5] == (120, 160)
    assert len(EncodedImage.from_ring_row(ring, plain.ring_row())) == 5
    held_apart = EncodedImage((np.zeros((30, 80, 3), np.uint8)[:, ::2], None, 30, 40, False, (120, 160)))
    kept_bytes = []
    for values in ([EncodedImage((jpeg, (0, 0, 120, 160), 480, 640, True)), share, plain],
                   [held_apart, EncodedImage((jpeg, None, 120, 160, True)), plain]):
        column = RowColumn.of(EncodedImage, values)
        heights, widths, kept = batch_layout(column, 3)
        kept_bytes.append(kept.sum())
        assert [(height, width) for height, width in zip(heights, widths)] == \
            [(value.window or (value.height, value.width))[-2:] for value in values]
    assert 0 in RowColumn.of(EncodedImage, [held_apart]).others  # not addressable as bytes: held as itself
    assert kept_bytes[0] == kept_bytes[1] == 2 * (120 * 160 * 3) + -(-30 * 40 * 3 // 256) * 256


@pytest.mark.parametrize("where", ["pageable", "pinned ring"])
def test_images_decoded_on_the_workers_are_uploaded_beside_gpu_decoded_ones(where):
    """Pixels the workers decoded arrive as rows of kind PIXELS (their bytes in a worker's ring, or
    in an array of this process), copied into the batch buffer without an object per image: from a
    pinned ring in place, from other memory through a staged upload."""
    import mmap

    import torch
    from penstock.columns import RowColumn
    from penstock.runtime import pinned
    from penstock.runtime.encoded_images import KIND, PIXELS, EncodedImage
    decoder = _gpu_decoder()
    memory = mmap.mmap(-1, 1 << 20)
    ring = np.frombuffer(memory, np.uint8)
    if where == "pinned ring":
        assert pinned.pin(memory)
    try:
        items = _items(["baseline 4:2:0", "gray", "baseline 4:4:4"])
        decoded = image_codecs.decode(KINDS["PNG"][0], DALIImageType.RGB)
        pixels = [np.ascontiguousarray(decoded[3:40, 2:50]), np.ascontiguousarray(decoded[:20, :30])]
        for position, (index, image) in enumerate(zip((1, 3), pixels)):
            stored = ring[8192 * position:8192 * position + image.nbytes].reshape(image.shape)
            stored[:] = image
            items.insert(index, EncodedImage((stored, None, *image.shape[:2], False)))
        column = RowColumn.of(EncodedImage, items)
        assert column.rows[[1, 3], KIND].tolist() == [PIXELS, PIXELS] and not column.others
        pending = decoder.submit(column, torch.cuda.current_stream())
        pending.wait()
        torch.cuda.synchronize()
        for index, image in zip((1, 3), pixels):
            np.testing.assert_array_equal(pending.images[index].cpu().numpy(), image)
        _check_against_cpu([items[0], items[2], items[4]], [pending.images[0], pending.images[2], pending.images[4]])
        assert decoder.decoded_on_cpu == 2 and decoder.decoded_on_gpu == 3
        assert decoder.copied_in_place == (2 if where == "pinned ring" else 0)
    finally:
        if where == "pinned ring":
            torch.cuda.synchronize()
            pinned.unpin(memory)
        decoder.close()


def test_pixels_of_the_wrong_size_are_named():
    import torch
    from penstock.runtime.encoded_images import EncodedImage
    decoder = _gpu_decoder()
    items = _items(["baseline 4:2:0"])
    items.append(EncodedImage((np.zeros((10, 12, 1), np.uint8), None, 10, 12, False)))  # one channel, not three
    with pytest.raises(image_codecs.DecodeError, match="sample 1: decoded on the CPU to 120 bytes"):
        decoder.submit(items, torch.cuda.current_stream())
    decoder.close()


def test_the_mixed_decoders_declare_the_lanes_their_engine_uses():
    from penstock.runtime.nvimgcodec_decode import LANES
    from penstock.operators.decoders.mixed import MixedDecoder
    assert MixedDecoder.lanes == LANES


def test_batch_buffers_take_a_few_sizes_that_repeat():
    """A batch's decode buffer is rounded up to one of Tuning.decode_buffer_steps sizes per power of two, at most
    1/4 more than it needs, so that the caching allocator's blocks are reused from batch to batch."""
    from penstock.runtime.nvimgcodec_decode import buffer_bytes as rounded
    assert DEFAULT.decode_buffer_steps == 4

    def buffer_bytes(nbytes):
        return rounded(nbytes, DEFAULT.decode_buffer_steps)
    assert buffer_bytes(0) == 1 and buffer_bytes(1000) == 1000 and buffer_bytes(1 << 20) == 1 << 20
    needs = range(130_000_000, 150_000_000, 997)
    sizes = {buffer_bytes(need) for need in needs}
    assert all(need <= buffer_bytes(need) <= need * 1.25 for need in needs)
    assert sizes == {134217728, 167772160}  # 130-150 MB: 128 MiB and 160 MiB (steps of 32 MiB)
