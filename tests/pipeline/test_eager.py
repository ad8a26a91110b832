"""penstock.eager: operators called on data give what a pipeline gives for the same batch, in the
form the batch was given, on both devices; sources take batch_size; mistakes fail at the call."""
import numpy as np
import pytest
import torch
from conftest import encode, gpu_or_emulated, ragged_images

import penstock
from penstock import eager, fn, pipeline_def, types

IMAGES = ragged_images(3, seed=7)


def _in_pipeline(build, samples, device="cpu"):
    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=0 if device == "gpu" else None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: samples, batch=True, layout="HWC")
        return build(data.gpu() if device == "gpu" else data)
    pipeline = pipe()
    (batch,) = pipeline.run()
    pipeline.close()
    return [np.asarray(sample) for sample in (batch.as_cpu() if device == "gpu" else batch)]


@pytest.mark.parametrize("name, kwargs", [
    ("resize", {"resize_shorter": 20}),
    ("crop_mirror_normalize", {"crop": (16, 12), "mean": [1.0, 2.0, 3.0], "std": [2.0, 2.0, 2.0], "mirror": 1,
                               "dtype": types.FLOAT}),
    ("flip", {"vertical": 1}),
    ("slice", {"start": (2, 3), "shape": (9, 8)}),
    ("reductions.mean", {"axes": (0, 1)}),
])
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_eager_calls_equal_the_pipeline(name, kwargs, device):
    operator_eager, operator_fn = eager, fn
    for part in name.split("."):
        operator_eager, operator_fn = getattr(operator_eager, part), getattr(operator_fn, part)
    with gpu_or_emulated() if device == "gpu" else _nothing():
        expected = _in_pipeline(lambda x: operator_fn(x, **kwargs), IMAGES, device)
        got = operator_eager(IMAGES, device=device, **kwargs)
    assert isinstance(got, list) and len(got) == len(IMAGES)
    for want, sample in zip(expected, got):
        sample = sample.cpu().numpy() if isinstance(sample, torch.Tensor) else sample
        assert sample.dtype == want.dtype
        np.testing.assert_array_equal(sample, want)


def _nothing():
    import contextlib
    return contextlib.nullcontext()


def test_results_keep_the_form_of_the_batch():
    stacked = np.stack([IMAGES[0]] * 3)
    got = eager.resize(stacked, size=(10, 12))
    assert isinstance(got, np.ndarray) and got.shape == (3, 10, 12, 3)
    tensor = eager.flip(torch.from_numpy(stacked), horizontal=1)
    assert isinstance(tensor, torch.Tensor) and torch.equal(tensor, torch.from_numpy(stacked[:, :, ::-1].copy()))
    assert isinstance(eager.resize(stacked, resize_shorter=8, max_size=9), np.ndarray)
    ragged = eager.resize(list(stacked[:2]) + [IMAGES[1]], resize_shorter=8)
    assert isinstance(ragged, list)


def test_a_pipeline_output_is_an_eager_input():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def images():
        return fn.external_source(source=lambda: [IMAGES[0], IMAGES[1]], batch=True, layout="HWC")
    (batch,) = images().run()
    flipped = eager.flip(batch, horizontal=1)
    assert isinstance(flipped, list) and len(flipped) == 2
    assert all(np.array_equal(out, image[:, ::-1]) for out, image in zip(flipped, IMAGES[:2]))


def test_per_sample_arguments_and_sources():
    stacked = np.stack([IMAGES[0]] * 2)
    got = eager.flip(stacked, horizontal=eager.per_sample([0, 1]))
    np.testing.assert_array_equal(got[0], stacked[0])
    np.testing.assert_array_equal(got[1], stacked[1][:, ::-1])
    eager.seed(4)
    first = eager.random.uniform(batch_size=5, range=(2.0, 3.0))
    eager.seed(4)
    again = eager.random.uniform(batch_size=5, range=(2.0, 3.0))
    assert first.shape == (5,) and np.array_equal(first, again) and (first >= 2).all() and (first < 3).all()
    assert not np.array_equal(first, eager.random.uniform(batch_size=5, range=(2.0, 3.0)))  # the next call draws anew


def test_a_reader_gives_one_epoch_of_batches(tmp_path):
    for index, image in enumerate(IMAGES):
        (tmp_path / f"class{index % 2}").mkdir(exist_ok=True)
        (tmp_path / f"class{index % 2}" / f"{index}.jpg").write_bytes(encode(image, "JPEG"))
    batches = list(eager.readers.file(file_root=str(tmp_path), batch_size=2))
    assert len(batches) == 2
    labels = [int(label) for _, batch_labels in batches for label in batch_labels.ravel()]
    assert labels[:3] == [0, 0, 1]
    decoded = eager.decoders.image(batches[0][0])
    assert [d.shape for d in decoded] == [IMAGES[0].shape, IMAGES[2].shape]


def test_mistakes_fail_at_the_call():
    with pytest.raises(TypeError, match="resize: unknown argument 'resize_shortr'.*resize_shorter"):
        eager.resize(IMAGES, resize_shortr=3)
    with pytest.raises(TypeError, match="flip: argument 'device'|cannot be given per sample"):
        eager.flip(IMAGES, device=eager.per_sample(["cpu"] * 3))
    with pytest.raises(TypeError, match="random.uniform: a source called eagerly needs batch_size"):
        eager.random.uniform()
    with pytest.raises(penstock.PipelineError, match="slice failed.*outside the sample's extent"):
        eager.slice(IMAGES, start=(0, 0), shape=(1000, 1))
    with pytest.raises(ValueError, match="the samples of a batch must have one number of dimensions"):
        eager.flip([IMAGES[0], IMAGES[1][..., 0]], horizontal=1)  # checked as a pipeline's input is
    with pytest.raises(TypeError, match="external_source: gave no batch; an eager call takes the data itself"):
        eager.external_source(batch_size=2)


def test_a_call_runs_through_a_pipeline_of_its_own_with_the_pipelines_seed_rule():
    eager.seed(11)
    first = eager.random.coin_flip(batch_size=6)
    eager.seed(11)
    assert np.array_equal(first, eager.random.coin_flip(batch_size=6))
    values = eager.external_source(source=lambda: [np.float32(1.5)] * 3, batch_size=3)  # any source
    assert values.shape == (3,) and (values == 1.5).all()
