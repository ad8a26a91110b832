"""The image decoders and peek_image_shape against DALI itself: output types (YCbCr, ANY_DATA),
output dtypes, 16-bit files, gray and alpha channels, TIFF orientation, random_area as one value and
crop_d / crop_pos_z on 2-D images, on images made here with OpenCV and Pillow."""
import io

import cv2
import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

from penstock.compat import dali as compat  # noqa: E402


def picture(height, width, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (height, width, channels), dtype=np.uint8)


def encode(image, extension):
    ok, buffer = cv2.imencode(extension, image)
    assert ok
    return np.frombuffer(buffer.tobytes(), np.uint8)


def pillow_tiff(image, orientation):
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "TIFF", tiffinfo={274: orientation})
    return np.frombuffer(buffer.getvalue(), np.uint8)


SAMPLES = {
    "png": encode(picture(6, 9), ".png"),
    "png16": encode(picture(6, 9).astype(np.uint16) * 257 + picture(6, 9, seed=1), ".png"),
    "png_gray": encode(picture(5, 7, 1), ".png"),
    "png_rgba": encode(picture(5, 7, 4), ".png"),
    "tiff": encode(picture(6, 9), ".tiff"),
    "tiff16": encode(picture(4, 5).astype(np.uint16) * 251, ".tiff"),
    "jpeg": encode(picture(8, 8), ".jpg"),
}


def run(module, samples, operator="decoders.image", **args):
    function = module.fn
    for part in operator.split("."):
        function = getattr(function, part)

    @module.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=3)
    def pipeline():
        return function(module.fn.external_source(source=lambda: samples, batch=True), **args)

    pipe = pipeline()
    pipe.build()
    output = pipe.run()[0]
    return [np.array(output[index]) for index in range(len(samples))]


def both(samples, operator="decoders.image", **args):
    return (run(dali, samples, operator, **{name: _dali_value(value) for name, value in args.items()}),
            run(compat, samples, operator, **args))


def _dali_value(value):
    """The same enum member of DALI's types."""
    return getattr(dali.types, value.name) if hasattr(value, "name") and hasattr(dali.types, value.name) else value


@pytest.mark.parametrize("dtype", ["UINT8", "FLOAT", "INT16", "UINT16", "INT32"])
@pytest.mark.parametrize("output_type", ["RGB", "BGR", "GRAY", "YCbCr", "ANY_DATA"])
def test_output_types_and_dtypes_as_dali(output_type, dtype):
    """Exact values, dtype and shape for every output type and dtype DALI computes, over 8- and
    16-bit, gray, RGBA and TIFF files (YCbCr made from RGB, ANY_DATA keeping the file's channels)."""
    names = ["png", "png16", "png_gray", "png_rgba", "tiff", "tiff16"]
    expected, got = both([SAMPLES[name] for name in names], output_type=getattr(compat.types, output_type),
                         dtype=getattr(compat.types, dtype))
    for name, want, have in zip(names, expected, got):
        assert have.dtype == want.dtype and have.shape == want.shape, name
        np.testing.assert_array_equal(have, want, err_msg=name)


def test_jpeg_ycbcr_and_float_as_dali():
    for output_type in ("YCbCr", "GRAY"):
        expected, got = both([SAMPLES["jpeg"]], output_type=getattr(compat.types, output_type),
                             dtype=compat.types.FLOAT)
        assert got[0].dtype == np.float32 and got[0].shape == expected[0].shape
        np.testing.assert_allclose(got[0], expected[0], atol=6 / 255)


@pytest.mark.parametrize("adjust", [True, False])
def test_tiff_orientation_follows_adjust_orientation_as_dali(adjust):
    samples = [pillow_tiff(picture(4, 7), orientation) for orientation in (1, 3, 6, 8)]
    for output_type in ("RGB", "ANY_DATA"):
        expected, got = both(samples, adjust_orientation=adjust, output_type=getattr(compat.types, output_type))
        for want, have in zip(expected, got):
            np.testing.assert_array_equal(have, want)
    expected, got = both(samples, "peek_image_shape", adjust_orientation=adjust)
    np.testing.assert_array_equal(np.stack(got), np.stack(expected))


def test_peek_image_shape_any_data_gives_the_files_channels():
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(picture(3, 4, 2), "LA").save(buffer, "PNG")
    samples = [SAMPLES["png_gray"], SAMPLES["png_rgba"], SAMPLES["png16"], SAMPLES["jpeg"],
               np.frombuffer(buffer.getvalue(), np.uint8)]
    expected, got = both(samples, "peek_image_shape", image_type=compat.types.ANY_DATA)
    np.testing.assert_array_equal(np.stack(got), np.stack(expected))
