"""Resume mid-epoch, bit-exact: a pipeline stopped after batch k and restored from its checkpoint
delivers exactly the batches k+1, ... an uninterrupted run delivers (readers with and without
shuffling, shards, random operators, threads and worker processes, the emulated GPU path, source
callables, on_error="skip"), and the PyTorch iterators resume the same steps through
state_dict() / load_state_dict()."""
import json
import os
import re

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


@pytest.mark.parametrize("broken, stops", [((2, 6), (2, 4)), (tuple(range(9, 17)), (1, 2, 3))])
def test_skipping_resumes_with_the_samples_lent(tmp_path, broken, stops):
    """Failures inside the epoch, and at its end (the epoch ends batches early: resuming after its
    last batch goes on with the next epoch)."""
    root = str(tmp_path)
    paths = make_class_tree(root, {"a": 17})["a"]
    for index in broken:
        with open(paths[index], "r+b") as handle:
            handle.truncate(40)
    make = lambda **kw: augmented(root, on_error="skip", **kw)  # noqa: E731
    for stop_after in stops:
        _resumes_exactly(make, stop_after, total=8)


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


# ---- damaged checkpoints: one ValueError naming the checkpoint (or its file) and the field ---------------
@pytest.fixture(scope="module")
def taken(tree):
    """A checkpoint with an iterator's state, after 2 of the epoch's 5 steps, and the keys of its
    reader's and its random generator's states."""
    pipe = augmented(tree)
    iterator = GenericIterator([pipe], ["data", "label", "draw"], reader_name="Reader")
    next(iterator), next(iterator)
    checkpoint = iterator.state_dict()["checkpoints"][0]
    pipe.close()
    content = json.loads(checkpoint)
    reader = next(key for key, state in content["sources"].items() if state is not None)
    generator = next(key for key, state in content["sources"].items() if state is None)
    return content, reader, generator


def _without(name):
    def change(content, reader, generator):
        parent, _, leaf = name.rpartition(".")
        target = content
        for part in parent.split(".") if parent else ():
            target = target[reader if part == "READER" else part]
        del target[leaf]
    return change


def _setting(name, value):
    def change(content, reader, generator):
        *parents, leaf = name.split(".")
        target = content
        for part in parents:
            target = target[{"READER": reader, "GENERATOR": generator}.get(part, part)]
        target[{"READER": reader, "GENERATOR": generator}.get(leaf, leaf)] = value
    return change


TAMPERINGS = [  # (what is done, the field named, what the message says)
    (_without("graph"), "graph", "is missing"),
    (_without("seed"), "seed", "is missing"),
    (_without("iteration"), "iteration", "is missing"),
    (_without("sources"), "sources", "is missing"),
    (_without("iterator"), "iterator", "is missing"),
    (_setting("extra", 1), "extra", "unknown field"),
    (_setting("graph", 7), "graph", "must be a string"),
    (_setting("seed", "7"), "seed", "must be an int"),
    (_setting("seed", True), "seed", "must be an int"),
    (_setting("seed", -5), "seed", "must be an int from 0"),
    (_setting("seed", 2**70), "seed", "must be an int from 0"),
    (_setting("iteration", 2.5), "iteration", "must be an int"),
    (_setting("iteration", -1), "iteration", "must be an int from 0"),
    (_setting("iteration", 10**40), "iteration", "must be an int from 0"),
    (_setting("sources", []), "sources", "must be an object"),
    (_setting("sources", {"x": None}), "sources", "must be an object"),
    (_setting("sources.999", None), "sources.999", "names no source"),
    (_setting("sources.READER", [1, 2]), "sources.READER", "must be an object"),
    (_setting("sources.GENERATOR", {"epoch": 1}), "sources.GENERATOR", "must be null"),
    (_without("sources.READER.batch_in_epoch"), "sources.READER.batch_in_epoch", "is missing"),
    (_setting("sources.READER.batch_in_epoch", "1"), "sources.READER.batch_in_epoch", "must be an int"),
    (_setting("sources.READER.batch_in_epoch", -1), "sources.READER.batch_in_epoch", "must be an int from 0"),
    (_setting("sources.READER.batch_in_epoch", 5), "sources.READER.batch_in_epoch", "less than the epoch's 5"),
    (_setting("sources.READER.batch_in_epoch", 2**80), "sources.READER.batch_in_epoch", "must be an int from 0"),
    (_setting("sources.READER.epoch", 2**64), "sources.READER.epoch", "must be an int from 0"),
    (_setting("sources.READER.epoch", None), "sources.READER.epoch", "must be an int"),
    (_setting("sources.READER.ends", [3]), "sources.READER.ends", "must be an object"),
    (_setting("sources.READER.ends", {"0": -1}), "sources.READER.ends.0", "a sample count from 0 to 17"),
    (_setting("sources.READER.ends", {"0": 18}), "sources.READER.ends.0", "a sample count from 0 to 17"),
    (_setting("sources.READER.ends", {"7": 3}), "sources.READER.ends", "keyed by the epochs 0 to 0"),
    (_setting("sources.READER.ends", {"x": 3}), "sources.READER.ends", "keyed by the epochs"),
    (_setting("sources.READER.shuffled", 1), "sources.READER.shuffled", "unknown field"),
    (_setting("iterator", [2]), "iterator", "must be an object or null"),
    (_without("iterator.steps"), "iterator.steps", "is missing"),
    (_setting("iterator.steps", -2), "iterator.steps", "must be an int from 0"),
    (_setting("iterator.delivered", "0"), "iterator.delivered", "must be a list"),
    (_setting("iterator.delivered", [-1]), "iterator.delivered", "must be a list"),
    (_setting("iterator.epoch_done", 0), "iterator.epoch_done", "must be true or false"),
]


@pytest.mark.parametrize("tamper, field, says", TAMPERINGS)
def test_a_tampered_checkpoint_names_the_field(tree, taken, tamper, field, says):
    content, reader, generator = taken
    content = json.loads(json.dumps(content))
    tamper(content, reader, generator)
    field = field.replace("READER", reader).replace("GENERATOR", generator)
    pipe = augmented(tree, checkpoint=json.dumps(content))
    with pytest.raises(ValueError, match=rf"^checkpoint: .*field '{re.escape(field)}'") as caught:
        pipe.build()
    assert says in str(caught.value)
    pipe.close()


@pytest.mark.parametrize("steps, delivered, field, says", [
    (6, [0], "iterator.steps", "at most the epoch's 5 steps"),
    (2, [0, 0], "iterator.delivered", "a list of 1 counts"),
])
def test_an_iterator_state_that_does_not_fit_the_iterator_names_the_field(tree, taken, steps, delivered, field, says):
    content, _, _ = taken
    content = {**content, "iterator": {**content["iterator"], "steps": steps, "delivered": delivered}}
    pipe = augmented(tree, checkpoint=json.dumps(content))
    with pytest.raises(ValueError, match=rf"^checkpoint: field '{field}'.*{says}"):
        GenericIterator([pipe], ["data", "label", "draw"], reader_name="Reader")
    pipe.close()


@pytest.mark.parametrize("text, says", [
    ("", "not JSON"),
    ("{\"format\": \"penstock checkpoint 1\", \"graph\": ", "not JSON"),  # truncated
    ("[1, 2]", "a JSON list, not an object"),
    ("42", "a JSON int, not an object"),
    ("null", "a JSON NoneType, not an object"),
    ("{\"format\": \"penstock checkpoint 2\"}", "field 'format'"),
    ("[" * 100000, "nested too deep|not JSON"),
    (b"\xff\xfe\x00garbage", "not UTF-8 text"),
    (b"PK\x03\x04\x14\x00", "not JSON"),
])
def test_what_is_not_a_checkpoint_is_refused_saying_why(tree, text, says):
    pipe = augmented(tree, checkpoint=text)
    with pytest.raises(ValueError, match=rf"^checkpoint: not a penstock checkpoint \(.*({says})"):
        pipe.build()
    pipe.close()


def test_a_checkpoint_file_is_named_in_its_errors(tree, taken, tmp_path):
    import pathlib
    content, reader, _ = taken
    path = tmp_path / "pipe.cpt"
    path.write_text(json.dumps({**content, "sources": {**content["sources"], reader: {
        **content["sources"][reader], "batch_in_epoch": 9}}}))
    pipe = augmented(tree, checkpoint=pathlib.Path(path))
    with pytest.raises(ValueError, match=rf"^checkpoint '{re.escape(str(path))}': field 'sources\.{reader}\."
                                         r"batch_in_epoch' must be less than the epoch's 5 batches, got 9"):
        pipe.build()
    pipe.close()
    path.write_text(json.dumps(content))  # intact, from its file: it resumes
    pipe = augmented(tree, checkpoint=pathlib.Path(path))
    assert pipe.last_epoch_info is None and pipe.run()[0] is not None and pipe.last_epoch_info.index == 2
    pipe.close()


def test_load_state_dict_refuses_what_state_dict_did_not_give(tree):
    pipe = augmented(tree)
    iterator = GenericIterator([pipe], ["data", "label", "draw"], reader_name="Reader")
    for state in ({}, {"checkpoints": "x"}, [1]):
        with pytest.raises(ValueError, match="load_state_dict: give what state_dict\\(\\) returned"):
            iterator.load_state_dict(state)
    pipe.close()
