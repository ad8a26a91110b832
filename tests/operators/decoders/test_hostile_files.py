"""Hostile and unusual files through every decoder, on the CPU and on the emulated GPU path: each
either decodes as Pillow / OpenCV do (stated tolerances) or fails with DecodeError naming what is
wrong; headers claiming more pixels than ``max_pixels`` fail before any memory is allocated.

Tolerances: CMYK and YCCK decode exactly as Pillow converts them (libjpeg's components, Pillow's
conversion); 12-bit JPEGs (which Pillow and OpenCV do not decode) within 2 grey levels on average
of the 8-bit image they were made from; other JPEG kinds exactly as OpenCV decodes them (the same
libjpeg-turbo), windows included (1 grey level at most where chroma is upsampled at a window's edge).
"""
import io
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from PIL import Image, ImageOps

import hostile_files as hostile
import penstock
from penstock import devices, fn, pipeline_def, registry, types
from penstock.contract import BuildContext, SampleContext
from penstock.kernels import image_codecs, turbojpeg3

if not turbojpeg3.available():  # it writes the arithmetic-coded, 12-bit, CMYK and YCCK files of the corpus
    pytest.skip("the hostile corpus is made with TurboJPEG 3 (libturbojpeg 3), not found here", allow_module_level=True)

DECODERS = ("decoders.image", "decoders.image_crop", "decoders.image_slice", "decoders.image_random_crop")
EXTRA_ARGS = {"decoders.image_crop": {"crop": (20, 24)},
              "decoders.image_slice": {"rel_start": (0.25, 0.125), "rel_shape": (0.5, 0.625)}}


def _decoder(name, device="cpu", **kwargs):
    """The implementation of a decoder, built as a pipeline builds it, and its arguments."""
    args, _ = registry.get_schema(name).validate({**EXTRA_ARGS.get(name, {}), **kwargs})
    context = BuildContext(batch_size=1, num_threads=1, device_id=0 if device == "mixed" else None, seed=7)
    return registry.implementations()[(name, device)](args, context), args


def _run(name, data, **kwargs):
    """(decoded image, the window it was cut from in the displayed image or None)."""
    impl, args = _decoder(name, **kwargs)
    draws = impl.draw(np.random.Generator(np.random.Philox(key=[7, 0])), 1)
    sample = SampleContext(0, "file.jpg", draws[0] if draws is not None else None)
    image = impl.run((data,), args, sample)
    height, width = _displayed_size(data, args["adjust_orientation"])
    return image, impl.window(height, width, (data,), args, sample)


def _displayed_size(data, adjust):
    if not image_codecs.is_jpeg(data):
        return image_codecs.image_size(data)
    header = image_codecs.jpeg_header(data)
    swap = adjust and header.orientation >= 5
    return (header.width, header.height) if swap else (header.height, header.width)


def _cut(reference, window):
    if window is None:
        return reference
    top, left, height, width = window
    return reference[top:top + height, left:left + width]


def _pillow(data, mode="RGB", transpose=True):
    with Image.open(io.BytesIO(data.tobytes())) as image:
        image = ImageOps.exif_transpose(image) if transpose else image
        return np.asarray(image.convert(mode))


# ---- JPEG kinds every decoder takes ----------------------------------------------------------------
PHOTO = hostile.photo(48, 64, seed=3)
INK = np.dstack([PHOTO, np.full(PHOTO.shape[:2], 200, np.uint8)])  # C M Y K as stored (Adobe: inverted)
JPEG_KINDS = {
    "CMYK (Pillow, Adobe marker)": hostile.pillow_encoded(PHOTO, "JPEG", "CMYK", quality=95),
    "CMYK (TurboJPEG)": hostile.turbojpeg_encoded(INK, colorspace=hostile._CS_CMYK),
    "YCCK (TurboJPEG)": hostile.turbojpeg_encoded(INK, colorspace=hostile._CS_YCCK),
    "arithmetic-coded": hostile.turbojpeg_encoded(PHOTO, arithmetic=True),
    "restart markers": hostile.turbojpeg_encoded(PHOTO, restart_rows=1),
    "progressive": hostile.pillow_encoded(PHOTO, "JPEG", quality=95, progressive=True),
    "huge EXIF block": hostile.with_huge_exif(PHOTO),
}


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("kind", list(JPEG_KINDS))
def test_every_jpeg_kind_decodes_in_every_decoder(kind, name):
    data = JPEG_KINDS[kind]
    image, window = _run(name, data)
    reference = _cut(_pillow(data), window)
    assert image.shape == reference.shape and image.dtype == np.uint8
    difference = np.abs(image.astype(int) - reference)
    assert difference.max() <= 1, (kind, name, difference.max())


@pytest.mark.parametrize("kind", ["CMYK (Pillow, Adobe marker)", "YCCK (TurboJPEG)"])
@pytest.mark.parametrize("output_type", [types.BGR, types.GRAY])
def test_cmyk_to_bgr_and_gray(kind, output_type):
    data = JPEG_KINDS[kind]
    image, _ = _run("decoders.image", data, output_type=output_type)
    rgb = _pillow(data)
    expected = rgb[:, :, ::-1] if output_type is types.BGR else \
        np.asarray(Image.fromarray(rgb).convert("L"))[:, :, None]
    assert image.shape == expected.shape
    assert np.abs(image.astype(int) - expected).max() <= 1


def test_cmyk_without_the_adobe_marker_is_not_inverted():
    """The same components with and without Adobe's APP14 marker: inverted only with it (as
    ImageMagick reads them; Pillow and OpenCV assume the marker on every CMYK JPEG). The reference
    for the file without it is Pillow's conversion of the stored components taken as ink."""
    data = JPEG_KINDS["CMYK (TurboJPEG)"]
    marker = bytes(data).find(b"\xff\xee")
    assert marker > 0 and bytes(data[marker + 4:marker + 9]) == b"Adobe"
    length = data[marker + 2] << 8 | data[marker + 3]
    stripped = np.concatenate([data[:marker], data[marker + 2 + length:]])
    assert not image_codecs.jpeg_header(stripped).adobe
    without, _ = _run("decoders.image", stripped)
    with Image.open(io.BytesIO(stripped.tobytes())) as image:
        stored = 255 - np.asarray(image)  # Pillow inverted them, assuming the marker
    expected = np.asarray(Image.fromarray(stored, "CMYK").convert("RGB"))
    assert np.abs(without.astype(int) - expected).max() <= 1
    with_marker, _ = _run("decoders.image", data)
    assert np.abs(without.astype(int) - with_marker).mean() > 50  # not the same colours


@pytest.mark.parametrize("name", DECODERS)
def test_twelve_bit_jpegs_decode_to_eight_bits(name):
    data = hostile.turbojpeg_encoded(PHOTO, twelve_bit=True)
    image, window = _run(name, data)
    expected = _cut(PHOTO, window)
    assert image.shape == expected.shape and image.dtype == np.uint8
    assert np.abs(image.astype(int) - expected).mean() <= 2.0


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_as_pillow_applies_it(name, orientation):
    stored = hostile.photo(40, 56, seed=orientation)
    data = hostile.with_orientation(stored, orientation)
    image, window = _run(name, data)
    reference = _cut(_pillow(data), window)
    assert image.shape == reference.shape
    assert np.abs(image.astype(int) - reference).max() <= 1


def test_adjust_orientation_false_keeps_the_stored_image():
    data = hostile.with_orientation(hostile.photo(40, 56, seed=1), 6)
    image, _ = _run("decoders.image", data, adjust_orientation=False)
    assert image.shape == (40, 56, 3)
    assert np.abs(image.astype(int) - _pillow(data, transpose=False)).max() <= 1


# ---- headers claiming huge images --------------------------------------------------------------------
@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("kind", list(hostile.BOMBS))
def test_a_bomb_fails_from_its_header_naming_its_size(kind, name):
    data = hostile.BOMBS[kind]()
    started = time.perf_counter()
    with pytest.raises(image_codecs.ImageTooLarge, match=r"claims \d+ x \d+ = [\d,]+ pixels, more than the "
                                                         r"decoder's max_pixels=89,478,485"):
        _run(name, data)
    assert time.perf_counter() - started < 1.0


def test_bombs_cost_neither_time_nor_memory():
    """Every bomb through every decoder in a fresh process: well under a second each, and the
    process never grows by more than 200 MiB (a decoded 60000 x 60000 image would be 10 GiB)."""
    script = textwrap.dedent(f"""
        import resource, sys, time
        sys.path[:0] = [{os.path.dirname(__file__)!r}, {os.path.dirname(os.path.dirname(os.path.dirname(__file__)))!r}]
        import numpy as np
        import hostile_files as hostile
        import test_hostile_files as cases
        from penstock.kernels import image_codecs
        bombs = [maker() for maker in hostile.BOMBS.values()]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        for name in cases.DECODERS:
            for data in bombs:
                try:
                    cases._run(name, data)
                except image_codecs.ImageTooLarge:
                    continue
                raise SystemExit("decoded a bomb")
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(f"{{time.perf_counter() - started:.3f}} {{grown:.1f}}")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    seconds, grown_mib = map(float, result.stdout.split())
    assert seconds < 0.1 * len(DECODERS) * len(hostile.BOMBS) and grown_mib < 200


def test_max_pixels_is_the_decoders_limit_and_none_lifts_it():
    data = hostile.pillow_encoded(hostile.photo(48, 64), "PNG")
    with pytest.raises(image_codecs.ImageTooLarge, match="48 x 64 = 3,072 pixels, more than the decoder's "
                                                         "max_pixels=3,000"):
        _run("decoders.image", data, max_pixels=3000)
    assert _run("decoders.image", data, max_pixels=None)[0].shape == (48, 64, 3)
    assert _run("decoders.image", data, max_pixels=3072)[0].shape == (48, 64, 3)


def test_a_bomb_in_a_pipeline_names_the_file_and_the_operator(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(hostile.png_bomb().tobytes())

    @pipeline_def(batch_size=1, num_threads=1, seed=1)
    def decode():
        data, _ = fn.readers.file(files=[str(path)])
        return fn.decoders.image(data)
    pipe = decode()
    with pytest.raises(penstock.PipelineError, match=r"decoders\.image failed on sample from '.*bomb\.png': "
                                                     r"ImageTooLarge: its header claims 60000 x 60000"):
        pipe.run()
    pipe.close()


# ---- broken files ---------------------------------------------------------------------------------
BROKEN = {
    **{f"truncated {kind} at {len(cut)}": cut for kind, data in
       (("JPEG", hostile.pillow_encoded(PHOTO, "JPEG")), ("progressive JPEG", JPEG_KINDS["progressive"]),
        ("CMYK JPEG", JPEG_KINDS["CMYK (Pillow, Adobe marker)"]), ("PNG", hostile.pillow_encoded(PHOTO, "PNG")),
        ("WebP", hostile.pillow_encoded(PHOTO, "WEBP")), ("TIFF", hostile.pillow_encoded(PHOTO, "TIFF")))
       for cut in hostile.truncations(data, 6)},
    **{f"random bytes behind {kind} magic": hostile.random_behind_magic(magic, seed=index)
       for index, (kind, magic) in enumerate(hostile.MAGICS.items())},
    "zero-height PNG": hostile.zero_size_png(),
    "empty": np.zeros(0, np.uint8),
}


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_file_decodes_or_fails_with_a_decode_error(case, name):
    try:
        image, _ = _run(name, BROKEN[case])
    except image_codecs.DecodeError as error:
        assert str(error)
        return
    except ValueError as error:  # a fixed window outside what the header says: named as such
        assert "falls outside" in str(error)
        return
    assert image.dtype == np.uint8 and image.ndim == 3 and image.size > 0


# ---- the same files on the emulated GPU path -----------------------------------------------------
@pytest.mark.parametrize("kind", ["CMYK (Pillow, Adobe marker)", "YCCK (TurboJPEG)", "arithmetic-coded"])
def test_the_emulated_gpu_decoders_match_the_cpu_decoders(kind, tmp_path):
    path = tmp_path / "image.jpg"
    path.write_bytes(JPEG_KINDS[kind].tobytes())

    @pipeline_def(batch_size=1, num_threads=1, seed=2, device_id=0)
    def decode(device):
        data, _ = fn.readers.file(files=[str(path)])
        return tuple(fn.decoders.image_random_crop(data, device=device) if name.endswith("random_crop") else
                     getattr(fn.decoders, name.split(".")[1])(data, device=device, **EXTRA_ARGS.get(name, {}))
                     for name in DECODERS)
    outputs = []
    for device in ("cpu", "mixed"):
        with devices.emulated_gpu():
            pipe = decode(device)
            outputs.append([batch.as_cpu().as_array() if hasattr(batch, "as_cpu") else batch.as_array()
                            for batch in pipe.run()])
            pipe.close()
    for cpu, gpu in zip(*outputs):
        np.testing.assert_array_equal(cpu, gpu)


def test_the_mixed_decoders_send_what_the_gpu_does_not_take_as_pixels():
    """On the CPU workers, 'mixed' decoders pass JPEGs the GPU decoders take as bytes, and decode
    the rest there (CMYK, YCCK, 12-bit, arithmetic-coded, shown rotated): as the CPU decoder does."""
    mixed, args = _decoder("decoders.image", "mixed")
    cpu, _ = _decoder("decoders.image")
    plain = hostile.pillow_encoded(PHOTO, "JPEG")
    for data, on_gpu in ((plain, True), (JPEG_KINDS["CMYK (Pillow, Adobe marker)"], False),
                         (JPEG_KINDS["YCCK (TurboJPEG)"], False), (JPEG_KINDS["arithmetic-coded"], False),
                         (hostile.turbojpeg_encoded(PHOTO, twelve_bit=True), False),
                         (hostile.with_orientation(PHOTO, 6), False), (hostile.with_orientation(PHOTO, 1), True)):
        encoded = mixed.encoded((data,), args, SampleContext(0, "file.jpg"))
        assert (encoded.data is data) == on_gpu
        if not on_gpu:
            np.testing.assert_array_equal(encoded.data, cpu.run((data,), args, SampleContext(0, "file.jpg")))
    with pytest.raises(image_codecs.ImageTooLarge):
        mixed.encoded((hostile.jpeg_bomb(),), args, SampleContext(0, "bomb.jpg"))
