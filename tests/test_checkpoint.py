"""Resume mid-epoch, bit-exact: a pipeline stopped after batch k and restored from its checkpoint
delivers exactly the batches k+1, ... an uninterrupted run delivers (readers with and without
shuffling, shards, random operators, threads and worker processes, the emulated GPU path, source
callables, on_error="skip"), and the PyTorch iterators resume the same steps through
state_dict() / load_state_dict()."""
import json
import os

import numpy as np
import pytest
from conftest import gpu_or_emulated
from helpers_data import make_class_tree, no_hang  # noqa: F401

from penstock import devices, fn, pipeline_def, types
from penstock.plugin.pytorch import GenericIterator, LastBatchPolicy

BATCH = 4


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("checkpoint"))
    make_class_tree(root, {"a": 9, "b": 8}, height=40, width=56)  # 17 files: a short last batch
    return root


@pipeline_def(batch_size=BATCH, num_threads=2, seed=7, enable_checkpointing=True, device_id=None)
def augmented(root, shuffle=True, shard_id=0, num_shards=1, device="cpu"):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=shuffle, shard_id=shard_id, num_shards=num_shards,
                                    name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed" if device == "gpu" else "cpu")
    images = fn.resize(images, resize_x=12, resize_y=12, device=device)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, mirror=fn.random.coin_flip(), device=device)
    return images, labels, fn.random.uniform(range=(0.0, 1.0))


def _batches(pipe, count):
    result = []
    for _ in range(count):
        outputs = pipe.run()
        result.append(tuple(np.asarray(batch.as_cpu().as_array() if hasattr(batch, "as_cpu") else batch.as_array())
                            .tobytes() for batch in outputs)
                      + ((pipe.last_epoch_info.valid,) if pipe.last_epoch_info is not None else ()))
    return result


def _resumes_exactly(make, stop_after, total=12):
    reference = make()
    expected = _batches(reference, total)
    reference.close()
    first = make()
    got = _batches(first, stop_after)
    checkpoint = first.checkpoint()
    _batches(first, 3)  # runs on: the checkpoint describes the state after batch stop_after
    first.close()
    resumed = make(checkpoint=checkpoint)
    got += _batches(resumed, total - stop_after)
    resumed.close()
    assert got == expected


@pytest.mark.parametrize("stop_after", [0, 2, 5, 9])  # inside epoch 0, at its end (5 batches), in epoch 1
@pytest.mark.parametrize("shuffle", [True, False])
def test_a_reader_pipeline_resumes_bit_exact(tree, stop_after, shuffle):
    _resumes_exactly(lambda **kw: augmented(tree, shuffle, **kw), stop_after)


@pytest.mark.parametrize("shard_id", [0, 1])
def test_a_shard_resumes_bit_exact(tree, shard_id):
    _resumes_exactly(lambda **kw: augmented(tree, True, shard_id, 2, **kw), 3)


def test_worker_processes_resume_bit_exact(tree):
    _resumes_exactly(lambda **kw: augmented(tree, worker_processes=True, **kw), 4)


def test_the_gpu_path_resumes_bit_exact(tree):
    with gpu_or_emulated():
        _resumes_exactly(lambda **kw: augmented(tree, device="gpu", device_id=0, **kw), 3, total=7)


def test_a_checkpoint_is_small_json_with_the_seed():
    @pipeline_def(batch_size=2, num_threads=1, seed=-1, device_id=None, enable_checkpointing=True)
    def randoms():
        return fn.random.uniform(range=(0.0, 1.0))
    pipe = randoms()
    _batches(pipe, 3)
    checkpoint = pipe.checkpoint()
    after = _batches(pipe, 2)
    pipe.close()
    assert len(checkpoint) < 1000 and json.loads(checkpoint)["iteration"] == 3
    resumed = randoms(checkpoint=checkpoint)  # seed -1 picks a new seed; the checkpoint's wins
    assert _batches(resumed, 2) == after
    resumed.close()


def test_source_callables_resume_with_their_sample_and_batch_info():
    def per_sample(info):
        if info.iteration >= 4:
            raise StopIteration
        return np.array([info.epoch_idx, info.iteration, info.idx_in_epoch], np.int64)

    @pipeline_def(batch_size=3, num_threads=1, seed=1, device_id=None, enable_checkpointing=True)
    def fed():
        return fn.external_source(source=per_sample, batch=False)

    def run(pipe, count):
        seen = []
        while len(seen) < count:
            try:
                seen.append(pipe.run()[0].as_array().tobytes())
            except StopIteration:
                pipe.reset()
                seen.append("end")
        return seen
    reference = fed()
    expected = run(reference, 12)
    reference.close()
    first = fed()
    got = run(first, 6)
    checkpoint = first.checkpoint()
    first.close()
    resumed = fed(checkpoint=checkpoint)
    got += run(resumed, 6)
    resumed.close()
    assert got == expected


def test_an_iterator_source_cannot_be_checkpointed():
    @pipeline_def(batch_size=2, num_threads=1, seed=1, device_id=None, enable_checkpointing=True)
    def fed():
        return fn.external_source(source=iter([[np.zeros(2)] * 2] * 5), batch=True)
    with pytest.raises(TypeError, match="iterable, which cannot be rewound.*give a callable"):
        fed().build()


def test_checkpoint_needs_enable_checkpointing(tree):
    pipe = augmented(tree, enable_checkpointing=False)
    pipe.run()
    with pytest.raises(RuntimeError, match="enable_checkpointing=True"):
        pipe.checkpoint()
    pipe.close()


def test_a_checkpoint_of_another_pipeline_is_refused(tree):
    pipe = augmented(tree)
    pipe.run()
    checkpoint = pipe.checkpoint()
    pipe.close()
    with pytest.raises(ValueError, match="made by a different pipeline"):
        augmented(tree, shuffle=False, checkpoint=checkpoint).build()
    with pytest.raises(ValueError, match="made by a different pipeline"):
        augmented(tree, batch_size=5, checkpoint=checkpoint).build()
    with pytest.raises(ValueError, match="not a penstock checkpoint"):
        augmented(tree, checkpoint="{}").build()


def test_the_checkpoint_file_is_written_when_named(tree, tmp_path):
    pipe = augmented(tree)
    pipe.run()
    path = tmp_path / "pipe.cpt"
    assert pipe.checkpoint(str(path)) == path.read_text()
    pipe.close()
    resumed = augmented(tree, checkpoint=path.read_bytes())
    resumed.run()
    resumed.close()


def test_skipping_resumes_with_the_samples_lent(tmp_path):
    root = str(tmp_path)
    paths = make_class_tree(root, {"a": 17})["a"]
    for index in (2, 6):
        with open(paths[index], "r+b") as handle:
            handle.truncate(40)
    make = lambda **kw: augmented(root, on_error="skip", **kw)  # noqa: E731
    _resumes_exactly(make, 2)
    _resumes_exactly(make, 4)


@pytest.mark.parametrize("policy", [LastBatchPolicy.FILL, LastBatchPolicy.PARTIAL, LastBatchPolicy.DROP])
@pytest.mark.parametrize("stop_after", [1, 4, 6])
def test_the_pytorch_iterator_resumes_through_its_state_dict(tree, policy, stop_after):
    def steps(iterator, count):
        result = []
        while len(result) < count:
            try:
                batch = next(iterator)[0]
            except StopIteration:
                iterator.reset()
                result.append("epoch end")
                continue
            result.append(tuple(batch[name].numpy().tobytes() for name in ("data", "label", "draw")))
        return result

    def iterator_over(pipe):
        return GenericIterator([pipe], ["data", "label", "draw"], reader_name="Reader", last_batch_policy=policy)
    reference = augmented(tree)
    expected = steps(iterator_over(reference), 14)
    reference.close()
    first_pipe = augmented(tree)
    first = iterator_over(first_pipe)
    got = steps(first, stop_after)
    state = first.state_dict()
    first_pipe.close()
    resumed_pipe = augmented(tree)
    resumed = iterator_over(resumed_pipe)
    resumed.load_state_dict(state)
    got += steps(resumed, 14 - stop_after)
    resumed_pipe.close()
    assert got == expected


@pytest.fixture(scope="module")
def record_files(tmp_path_factory):
    """A TFRecord file and a webdataset archive of 11 samples of 8 bytes each (one short batch)."""
    import io
    import tarfile
    root = tmp_path_factory.mktemp("records")
    payloads = [bytes([index] * 8) for index in range(11)]

    def field(number, payload):
        return bytes([number << 3 | 2, len(payload)]) + payload
    with open(root / "data.tfrecord", "wb") as handle:
        for payload in payloads:
            example = field(1, field(1, field(1, b"x") + field(2, field(1, field(1, payload)))))
            handle.write(len(example).to_bytes(8, "little") + bytes(4) + example + bytes(4))
    with tarfile.open(root / "data.tar", "w") as archive:
        for index, payload in enumerate(payloads):
            info = tarfile.TarInfo(f"{index:03d}.bin")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return root


@pytest.mark.parametrize("reader", ["tfrecord", "webdataset"])
@pytest.mark.parametrize("order", [{"random_shuffle": True}, {"shuffle_after_epoch": True}])
def test_record_readers_resume_bit_exact(record_files, reader, order):
    from penstock import tfrecord

    @pipeline_def(batch_size=BATCH, num_threads=2, seed=5, enable_checkpointing=True, device_id=None)
    def records():
        if reader == "tfrecord":
            return fn.readers.tfrecord(path=[str(record_files / "data.tfrecord")], name="Reader", features={
                "x": tfrecord.FixedLenFeature((), tfrecord.string, "")}, **order)["x"]
        return fn.readers.webdataset(paths=[str(record_files / "data.tar")], ext=["bin"], name="Reader", **order)
    _resumes_exactly(lambda **kw: records(**kw), 4)
