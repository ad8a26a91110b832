"""Per-sample work in forked worker processes (Pipeline(worker_processes=True)) gives the same
batches as worker threads, reports errors the same way, and leaves no process behind."""
import dataclasses
import multiprocessing
import threading
import time

import numpy as np
import pytest
from helpers_data import make_class_tree

import penstock
from helpers_data import penstock_threads
from penstock.recipes import imagenet_train
from penstock.tuning import DEFAULT


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("processes")
    make_class_tree(str(root), {"a": 6, "b": 6}, height=40, width=48)
    return str(root)


def tuned(monkeypatch, **numbers) -> None:
    """Pipelines made from now on run with these tuning numbers changed (penstock.tuning)."""
    from penstock import tuning
    monkeypatch.setattr(tuning, "DEFAULT", dataclasses.replace(DEFAULT, **numbers))


def _batches(data, worker_processes, count=3):
    pipe = imagenet_train(data, batch_size=4, num_threads=2, device_id=None, seed=11, crop=32,
                          worker_processes=worker_processes)
    try:
        return [[batch.as_array().copy() for batch in pipe.run()] for _ in range(count)]
    finally:
        pipe.close()


def test_processes_give_the_same_batches_as_threads(data):
    for threaded, forked in zip(_batches(data, False), _batches(data, True)):
        for a, b in zip(threaded, forked):
            np.testing.assert_array_equal(a, b)


def test_stage_seconds_count_the_operators_the_processes_ran(data):
    """stage_seconds() has each operator's time whether it ran on a thread or in a worker process."""
    stages = {}
    for worker_processes in (False, True):
        pipe = imagenet_train(data, batch_size=4, num_threads=2, device_id=None, seed=11, crop=32,
                              worker_processes=worker_processes)
        try:
            for _ in range(3):
                pipe.run()
            stages[worker_processes] = pipe.stage_seconds()
        finally:
            pipe.close()
    operators = {name for name in stages[False] if "thread" not in name}
    assert {"readers.file", "decoders.image_random_crop"} <= operators
    assert operators <= set(stages[True]) and all(stages[True][name] > 0 for name in operators)


def test_process_errors_name_the_file_and_no_process_is_left(tmp_path):
    folder = tmp_path / "class_0"
    folder.mkdir()
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    pipe = imagenet_train(str(tmp_path), batch_size=1, num_threads=2, device_id=None, seed=1,
                          worker_processes=True)
    with pytest.raises(penstock.PipelineError, match="broken.jpg"):
        pipe.run()
    pipe.close()
    assert not [p for p in multiprocessing.active_children() if p.name == "penstock-worker-process"]


def test_shared_ring_reads_in_place_wraps_and_falls_back_when_full():
    from penstock.executor.shared_ring import HoldsRingRefs, RingRef, SharedRing
    from penstock.runtime.encoded_images import EncodedImage

    ring = SharedRing(1 << 16, DEFAULT.ring_smallest)
    image = np.arange(20_000, dtype=np.uint8)
    sent = [ring.put(EncodedImage((image + i, (1, 2, 3, 4), 7, 8, True))) for i in range(3)]
    assert all(isinstance(value, HoldsRingRefs) and isinstance(value[1][0], RingRef) for value in sent)
    for i, value in enumerate(sent):
        resolved = ring.resolve(value)[0]
        assert type(resolved) is EncodedImage and resolved[1:] == ((1, 2, 3, 4), 7, 8, True)
        assert np.array_equal(resolved[0], image + i)
    plain = ((1, 2), [3, np.zeros(4)])
    assert ring.put(plain) is plain and ring.resolve(plain) == (plain, 0)  # nothing to look into
    assert isinstance(ring.put(image), np.ndarray)  # no room left: the array travels as itself
    ring.release(max(ring.resolve(value)[1] for value in sent))
    wrapped = ring.put(image.reshape(100, 200))
    assert isinstance(wrapped, RingRef) and wrapped.start == 1 << 16  # skipped the tail, at the start again
    assert np.array_equal(ring.resolve(wrapped)[0], image.reshape(100, 200))
    assert ring.put(np.zeros(10, np.uint8)).shape == (10,)  # small arrays are not worth a reference


def test_encoded_images_cross_the_ring_as_one_array_of_rows():
    import pickle

    from penstock.columns import RowColumn
    from penstock.executor.shared_ring import RingRows, SharedRing
    from penstock.runtime.encoded_images import KIND, PIXELS, EncodedImage

    ring = SharedRing(1 << 17, DEFAULT.ring_smallest)
    image = np.arange(20_000, dtype=np.uint8)
    small = EncodedImage((np.zeros((4, 4, 3), np.uint8), None, 4, 4, False))  # below the ring's smallest array
    pixels = np.arange(64 * 48 * 3, dtype=np.uint8).reshape(64, 48, 3)
    decoded = EncodedImage((pixels, None, 64, 48, False))  # decoded on the worker: a row of kind PIXELS
    images = [EncodedImage((image + i, (1, 2, 3, 4) if i else None, 7, 8, bool(i % 2))) for i in range(2)]
    column = pickle.loads(pickle.dumps(ring.put_column([images[0], small, images[1], decoded])))
    assert type(column) is RingRows
    positions, rows, ends, others = ring.resolve_rows(column)
    assert positions.tolist() == [0, 2, 3] and ends.tolist() == [20_000, 40_000, 40_000 + pixels.nbytes]
    assert rows[:, KIND].tolist() == [0, 1, PIXELS]  # nvImageCodec JPEG, hardware JPEG, pixels
    assert list(others) == [1] and others[1][1] == 0  # a small image goes through the pipe
    assert type(others[1][0]) is EncodedImage and np.array_equal(others[1][0].data, small.data)
    # the batch's column takes the rows at once; indexing makes a sample's EncodedImage, read in place
    batch = RowColumn.of(EncodedImage, [None] * 5)
    batch.put_rows([3, 1, 4], rows)
    batch[0] = others[1][0]  # in this process, pixels of any size become a row
    assert batch[2] is None and batch[0] is others[1][0] and batch.rows[0, KIND] == PIXELS
    assert batch.rows[0, RowColumn.NBYTES] == small.data.nbytes
    for index, sent in ((3, images[0]), (1, images[1]), (4, decoded)):
        received = batch[index]
        assert type(received) is EncodedImage and received[1:] == sent[1:]
        np.testing.assert_array_equal(received[0], sent[0])  # pixels come back in their shape
    # no room for all four: the ones that fit as rows, the last as itself
    fallback = SharedRing(1 << 16, DEFAULT.ring_smallest).put_column([EncodedImage((image, None, 7, 8, True))] * 4)
    assert type(fallback) is RingRows and len(fallback[1]) == 3 and isinstance(fallback[2][3], EncodedImage)
    # values without the row protocol go one by one
    assert ring.put_column([small]) == [small]
    assert ring.resolve_column([small]) == ([small], [0])


def test_row_column_of_preparations_made_in_this_process():
    from penstock.columns import RowColumn
    from penstock.contract import MISSING
    from penstock.runtime.encoded_images import EncodedImage

    data = np.frombuffer(b"\xff\xd8" + bytes(100), np.uint8)  # read-only bytes still give their address
    decoded = EncodedImage((np.zeros((4, 4, 3), np.uint8), None, 4, 4, False))
    column = RowColumn.of(EncodedImage, [EncodedImage((data, (1, 2, 3, 4), 9, 8, True)), decoded, MISSING])
    assert column.rows[0].tolist() == [data.ctypes.data, 102, 1, 2, 3, 4, 9, 8, 1]
    assert column[0][0] is data and column[1] is decoded and list(column.others) == [2]
    assert column.rows[1, 2:].tolist() == [-1, -1, -1, -1, 4, 4, 2]  # pixels: a row of kind PIXELS
    assert column.positions_without(MISSING) == (0, 1)
    column[2] = EncodedImage((data, None, 9, 8, False))
    assert column.positions_without(MISSING) is None and column.rows[2, 2] == -1


def test_processes_write_samples_into_the_shared_batch_buffer(data):
    """From the second batch on, the processes write each sample into its row of the batch, which
    lives in the arena shared with them: the batch handed out is that buffer, not a copy."""
    import mmap

    pipe = imagenet_train(data, batch_size=4, num_threads=2, device_id=None, seed=11, crop=32)
    try:
        assert "worker processes" in pipe.describe()  # the default for per-sample CPU work
        arrays = [pipe.run()[0].as_array() for _ in range(3)]
        assert all(isinstance(array.base, mmap.mmap) for array in arrays[1:])
        assert len({array.ctypes.data for array in arrays}) == 3  # batches still held are not reused
    finally:
        pipe.close()


def test_processes_write_fixed_shape_values_for_the_gpu_stage_into_shared_rows():
    """Values of a fixed shape that the GPU stage reads (box_encoder's outputs on the CPU, on their way
    to the GPU) are written by the processes into their rows of a shared buffer once a batch has
    shown their shape, as pipeline outputs are, instead of coming back through the pipes; a batch whose rows
    differ in shape goes back to the pipes. The batches are the threads' batches."""
    import mmap

    from cases_detection import ANCHORS, random_boxes, xywh_to_ltrb
    from conftest import gpu_or_emulated

    from penstock import fn, pipeline_def
    from penstock.columns import ArrayColumn

    def boxes_of(iteration):
        return [xywh_to_ltrb(random_boxes(1 + (iteration + index) % 3, iteration * 10 + index)) for index in range(4)]

    def pipeline(worker_processes):
        @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=3, worker_processes=worker_processes)
        def encode():
            boxes = fn.external_source(source=boxes_of, batch=True)
            labels = fn.external_source(source=lambda iteration: [np.arange(1, len(b) + 1, dtype=np.int32)
                                                                   for b in boxes_of(iteration)], batch=True)
            encoded, encoded_labels = fn.box_encoder(boxes, labels, anchors=ANCHORS.tolist(), criteria=0.3)
            return encoded.gpu(), encoded_labels.gpu(), fn.cast(boxes, dtype=penstock.types.FLOAT64)
        return encode()

    seen = []
    with gpu_or_emulated():
        threads, processes = pipeline(False), pipeline(True)
        try:
            from penstock.operators.tensor import transfer
            original = transfer.ToGpu.run_batch

            def watched(self, inputs, args, batch):
                if isinstance(inputs[0], ArrayColumn) and inputs[0].complete:
                    seen.append(isinstance(inputs[0].array.base, mmap.mmap))
                return original(self, inputs, args, batch)
            transfer.ToGpu.run_batch = watched
            for _ in range(10):  # the batches prefetched before the first one's rows were known come by the pipes
                want, got = threads.run(), processes.run()
                for want_batch, got_batch in zip(want, got):
                    for index in range(4):
                        np.testing.assert_array_equal(np.asarray(got_batch.at(index).cpu() if hasattr(
                            got_batch.at(index), "cpu") else got_batch.at(index)), np.asarray(
                            want_batch.at(index).cpu() if hasattr(want_batch.at(index), "cpu") else want_batch.at(index)))
        finally:
            transfer.ToGpu.run_batch = original
            threads.close()
            processes.close()
    assert any(seen) and not all(seen)  # threads' columns are their own; the processes' rows are shared


@pytest.mark.parametrize("counts", [[[2] * 8, [2, 2, 3, 3, 1, 2, 2, 4], [2] * 8, [1, 2] * 4],
                                    [[1, 2] * 4, [3] * 8, [3, 3, 3, 3, 2, 2, 2, 2], [3] * 8]])
def test_values_whose_shapes_change_from_batch_to_batch_come_back_whole(counts):
    """Boxes on their way to the GPU: a batch whose every sample had the same number of boxes makes
    the next batch's samples be written in place, in rows of that shape; those that do not fit come
    back through the pipes, and the batch is the threads' batch."""
    from cases_detection import random_boxes, xywh_to_ltrb
    from conftest import gpu_or_emulated

    from penstock import fn, pipeline_def

    def boxes_of(iteration):
        return [xywh_to_ltrb(random_boxes(count, 100 * iteration + index))
                for index, count in enumerate(counts[iteration % len(counts)])]

    def pipeline(worker_processes):
        @pipeline_def(batch_size=8, num_threads=3, device_id=0, seed=3, worker_processes=worker_processes)
        def flipped():
            boxes = fn.external_source(source=boxes_of, batch=True)
            return fn.bb_flip(boxes, ltrb=True, horizontal=fn.random.coin_flip()).gpu()
        return flipped()

    with gpu_or_emulated():
        threads, processes = pipeline(False), pipeline(True)
        try:
            for _ in range(2 * len(counts)):
                (want,), (got,) = threads.run(), processes.run()
                for index in range(8):
                    np.testing.assert_array_equal(np.asarray(got.at(index).cpu()), np.asarray(want.at(index).cpu()))
        finally:
            threads.close()
            processes.close()


def test_pipelines_running_the_users_code_stay_on_threads(data):
    from penstock import fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=1)
    def with_function():
        jpegs, _ = fn.readers.file(file_root=data)
        images = fn.decoders.image(jpegs)
        return fn.python_function(images, function=lambda image: image[:4], batch_processing=False)

    pipe = with_function()
    try:
        pipe.build()
        assert "worker processes" not in pipe.describe()
        assert pipe.run()[0].at(0).shape[0] == 4
    finally:
        pipe.close()


def test_shared_arena_reuses_freed_space_and_says_when_full():
    from penstock.executor import buffers

    arena = buffers.SharedArena()
    first = arena.array((4, 3, 5), np.float16)
    second = arena.array((1000,), np.int32)
    assert arena.location(first)[0] == 0 and arena.location(second)[0] == 4096  # page-aligned
    np.testing.assert_array_equal(arena.view(arena.location(second)), second)
    row = first[1]
    del first
    assert arena.array((8,), np.uint8) is not None and arena.location(np.zeros(3)) is None
    del row
    third = arena.array((16,), np.uint8)  # first's space, free once its last view went
    assert arena.location(third)[0] == 0
    assert arena.array((arena.size,), np.uint8) is None  # no room: the pool makes a private buffer
    pool = buffers.BufferPool(keep=2, arena=arena)
    assert arena.location(pool.acquire((3, 4), np.float32)) is not None


def test_the_arenas_upload_region_holds_what_the_gpu_copies_and_its_pools_fall_back_when_full():
    """Buffers the GPU copies from go first to the arena's upload region (the part the pipeline
    pins), their space reused once freed; the region's highest use says how much to pin; a pool
    whose region is full takes the rest of the arena."""
    from penstock.executor import buffers

    arena = buffers.SharedArena(upload_bytes=3 * 4096)
    uploaded = arena.array((1000,), np.int32, upload=True)
    other = arena.array((10,), np.uint8)
    assert arena.location(uploaded)[0] == 0 and arena.location(other)[0] >= arena.upload_bytes
    assert arena.upload_high_water == 4096 and len(arena.upload_region(1 << 20)) == 3 * 4096
    del uploaded
    again = arena.array((2000,), np.int32, upload=True)  # two pages, from the start again
    assert arena.location(again)[0] == 0 and arena.upload_high_water == 2 * 4096
    assert arena.array((5000,), np.int32, upload=True) is None  # no room in the region
    pool = buffers.BufferPool(keep=2, arena=arena, upload=True)
    fallback = pool.acquire((5000,), np.int32)
    assert arena.location(fallback)[0] >= arena.upload_bytes  # the rest of the arena, still shared


@pytest.mark.parametrize("values", [
    [np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros((0, 4), np.float32), np.ones((1, 4), np.float32)],
    [np.arange(3, dtype=np.int32), np.arange(5, dtype=np.int32)],  # ragged, one rank: packed
    [np.zeros((2, 4), np.float32), np.zeros(4, np.float32)],  # ranks differ: sent as they are
    [np.zeros(2, np.float32), np.zeros(3, np.int64)],  # types differ: sent as they are
    [np.full((2, 2), 7, np.uint8), np.full((2, 2), 9, np.uint8)],  # one shape: stacked
])
def test_a_column_crosses_the_pipe_and_comes_back_as_its_samples(values):
    import pickle

    from penstock.executor.worker_process import pack_column, unpack_rows
    back = unpack_rows(pickle.loads(pickle.dumps(pack_column(values))))
    assert len(back) == len(values)
    for sent, received in zip(values, back):
        assert received.shape == sent.shape and received.dtype == sent.dtype
        np.testing.assert_array_equal(received, sent)
        assert received.flags.writeable


def test_light_samples_go_many_to_a_message(data, monkeypatch):
    """Each message costs the dispatcher's thread; samples that take a worker little time are sent
    more than Tuning.process_chunk at a time once their time is measured (results unchanged)."""
    from penstock.executor import processes
    sizes = []
    send = processes.ProcessLink.send

    def counting_send(self, request):
        sizes.append(sum(len(block[0]) for block in request))
        return send(self, request)
    monkeypatch.setattr(processes.ProcessLink, "send", counting_send)
    tuned(monkeypatch, message_seconds=1.0, heavy_message_seconds=1.0)  # every sample light, however slow this machine
    pipe = imagenet_train(data, batch_size=96, num_threads=2, device_id=None, seed=11, crop=32, worker_processes=True)
    try:
        for _ in range(6):
            pipe.run()
    finally:
        pipe.close()
    assert max(sizes) > DEFAULT.process_chunk


def test_array_column_holds_a_batch_of_rows_and_reads_as_one_array():
    from penstock.columns import ArrayColumn
    from penstock.contract import MISSING

    column = ArrayColumn.of([None, np.array(7.0, np.float32), None, None], (), np.float32)
    column.put_rows([0, 2, 3], np.array([1.0, 2.0, 3.0], np.float32))
    assert not column.complete and column[1] == 7.0 and column[2].shape == () and column[2] == 2.0
    np.testing.assert_array_equal(np.asarray(column), [1.0, 7.0, 2.0, 3.0])  # one sample held as itself
    column.put_rows([1], np.array([5.0], np.float32))
    assert column.complete and np.asarray(column) is column.array and list(column.others) == []
    assert column.positions_without(MISSING) is None
    column[3] = MISSING  # a sample on the other branch of a conditional
    assert column.positions_without(MISSING) == (0, 1, 2) and column[3] is MISSING
    assert not column.fits(np.zeros((2, 3), np.float32)) and column.fits(np.zeros(2, np.float32))
    draws = ArrayColumn.full(np.arange(4, dtype=np.int32))
    assert draws.complete and [int(value) for value in draws] == [0, 1, 2, 3] and draws[2].shape == ()


def test_ragged_column_holds_parts_and_packs_the_batch_in_sample_order():
    import torch

    from penstock.columns import RaggedColumn
    from penstock.contract import MISSING
    from penstock.runtime.pinned import upload_ragged
    boxes = [np.arange(4 * count, dtype=np.float32).reshape(count, 4) + 100 * index
             for index, count in enumerate([2, 0, 3, 1])]
    column = RaggedColumn.of([None, None, None, boxes[3]], np.float32, 2)
    column.put_part([2, 0], np.concatenate([boxes[2].ravel(), boxes[0].ravel()]), np.array([[3, 4], [2, 4]]))
    assert not column.complete and column[1] is None
    np.testing.assert_array_equal(column[3], boxes[3])  # held as itself
    column.put_part([1, 3], boxes[3].ravel(), np.array([[0, 4], [1, 4]]))
    assert column.complete and list(column.others) == []
    for index, box in enumerate(boxes):
        assert column[index].shape == box.shape
        np.testing.assert_array_equal(column[index], box)
    packed = upload_ragged(torch.device("cpu"), column)
    assert [tuple(shape) for shape in packed.shapes] == [box.shape for box in boxes]
    for index, box in enumerate(boxes):
        np.testing.assert_array_equal(packed[index].numpy(), box)
    assert not column.fits(np.zeros(3, np.int32), np.array([[3]])) and column.fits(np.zeros(4, np.float32),
                                                                                  np.array([[1, 4]]))
    column[1] = MISSING  # a sample on the other branch of a conditional
    assert column.positions_without(MISSING) == (0, 2, 3) and not column.complete


def test_draws_only_the_gpu_takes_stay_in_this_process(data, monkeypatch):
    """A random generator read only by a GPU operator is read from the batch's draws: the requests
    carry neither its draws nor the GPU steps' own, the replies do not send it back, and the
    batches are those of threads."""
    from conftest import gpu_or_emulated

    from penstock import fn, pipeline_def, types
    from penstock.executor import processes
    requests = []
    send = processes.ProcessLink.send
    monkeypatch.setattr(processes.ProcessLink, "send", lambda self, request: requests.append(request) or
                        send(self, request))

    def batches(worker_processes):
        @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=7, worker_processes=worker_processes)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=data, name="Reader")
            images = fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), resize_x=16, resize_y=16)
            flip = fn.random.coin_flip()
            images = fn.flip(images, horizontal=flip)  # the CPU takes the coin; the GPU too, below
            images = fn.color_twist(images.gpu(), brightness=fn.random.uniform(range=[0.5, 1.5]),
                                    hue=fn.random.uniform(range=[-20.0, 20.0]))
            return fn.crop_mirror_normalize(images, mirror=flip, dtype=types.FLOAT), labels
        built = pipe()
        built.build()
        try:
            plan = built._executor._plan
            tensors = ([batch.as_tensor() for batch in built.run()] for _ in range(3))
            return plan, [[t.cpu().numpy() if hasattr(t, "cpu") else np.array(t) for t in batch] for batch in tensors]
        finally:
            built.close()
    with gpu_or_emulated():
        plan, from_processes = batches(True)
        _, from_threads = batches(False)
    assert len(plan.passed_slots) == 3  # the coin and both uniforms
    assert len(plan.source_keys) == 2  # the reader and the coin, which flip takes on the CPU
    for indices, infos, items, step_keys, draws, shared in (block for request in requests for block in request):
        assert len(items) == 2 and set(step_keys) <= plan.worker_step_keys
    for got, want in zip(from_processes, from_threads):
        for got_output, want_output in zip(got, want):
            np.testing.assert_array_equal(got_output, want_output)


def _rings_of_a_mixed_decoder_pipeline(data, after_first_batch=lambda executor: None) -> tuple:
    """Runs a batch of a pipeline whose mixed decoder reads the JPEGs out of two worker processes'
    rings, calls ``after_first_batch`` with its executor, and closes it: (whether the plan says the
    GPU reads the rings, the rings)."""
    from conftest import gpu_or_emulated

    from penstock import fn, pipeline_def, types

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=7, worker_processes=True)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data)
        # no automatic CPU share, which would run a worker per core of the machine
        return fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, cpu_decoder_load=0), labels
    with gpu_or_emulated():
        built = pipe()
        built.build()
        try:
            built.run()
            after_first_batch(built._executor)
            return built._executor._plan.gpu_reads_rings, built._executor._processes.rings()
        finally:
            built.close()


def test_rings_the_gpu_reads_share_one_pinned_budget(data):
    """The mixed decoder's encoded JPEGs are read by the GPU out of the worker processes' rings,
    which are then pinned: the processes share Tuning.pinned_rings_bytes (each ring between
    32 MiB and Tuning.ring_bytes), enough for batches of 2-megapixel JPEGs to stay off the pipes."""
    from penstock.executor.shared_ring import pinned_ring_bytes
    assert pinned_ring_bytes(16, DEFAULT) == DEFAULT.pinned_rings_bytes // 16
    assert pinned_ring_bytes(1, DEFAULT) == DEFAULT.ring_bytes and pinned_ring_bytes(1024, DEFAULT) == 32 << 20
    gpu_reads_rings, rings = _rings_of_a_mixed_decoder_pipeline(data)
    assert gpu_reads_rings and [ring._size for ring in rings] == [pinned_ring_bytes(2, DEFAULT)] * 2


def test_rings_are_pinned_after_the_first_batch_and_unpinned_at_close(data, monkeypatch):
    """Where the GPU reads the rings, a thread of the executor's pins them once the first batch is
    handed out (not beside it: pinning holds the process's memory map); close() waits for it and
    unpins every ring it pinned, and no thread is left (nor the one that warms Triton up)."""
    threads_before = set(threading.enumerate())

    import torch

    from penstock.executor.gpu_stage import GpuStage
    from penstock.runtime import pinned
    pinning, unpinned = [], []
    monkeypatch.setattr(GpuStage, "on_cuda", property(lambda self: True))  # the emulated GPU, read as CUDA
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    from penstock.executor import executor as executor_module

    def pin(memory):  # records its thread, and whether its executor had handed out a batch
        thread = threading.current_thread()
        pinning.append((thread.name, [executor._handed_out.is_set() for executor in executor_module._live_executors
                                      if getattr(executor, "_pinning", None) is thread]))
        return True
    monkeypatch.setattr(pinned, "pin", pin)
    monkeypatch.setattr(pinned, "unpin", lambda memory: unpinned.append(memory))

    def pinning_ends(executor):  # else close() may stop it between the rings
        assert "triton-warm-up x 1" in executor.describe()  # beside a GPU stage on CUDA
        executor._pinning.join(timeout=10)
    _, rings = _rings_of_a_mixed_decoder_pipeline(data, pinning_ends)
    assert pinning == [("penstock-pin-rings", [True])] * 2
    assert sorted(map(id, unpinned)) == sorted(id(ring.memory) for ring in rings)
    assert not set(penstock_threads()) - threads_before


def test_mixed_decoder_batches_do_not_share_the_rings_the_workers_write_next(tmp_path, monkeypatch):
    """The emulated GPU's decoded images come out of the worker processes' rings: each batch holds
    its own pixels once the workers write the next batches over the ring (a ring of 128 KiB wraps
    every batch here), and they are those of the CPU decoder."""
    from conftest import gpu_or_emulated

    from penstock import fn, pipeline_def, types
    from penstock.executor import processes
    monkeypatch.setattr(processes, "pinned_ring_bytes", lambda count, tuning: 128 << 10)
    data = str(tmp_path)
    make_class_tree(data, {"a": 12, "b": 12}, height=72, width=80)  # 17 KiB decoded: through the ring

    def batches(device, worker_processes):
        @pipeline_def(batch_size=6, num_threads=2, device_id=0, seed=7, prefetch_queue_depth=1,
                      worker_processes=worker_processes)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=data, random_shuffle=False)
            return fn.decoders.image(jpegs, device=device, output_type=types.RGB), labels
        built = pipe()
        built.build()
        try:
            outputs = [built.run()[0] for _ in range(4)]  # all held before any is read
            return [[np.array(batch.as_cpu().at(index)) for index in range(len(batch))] for batch in outputs]
        finally:
            built.close()
    with gpu_or_emulated():
        mixed = batches("mixed", True)
    want = batches("cpu", False)
    for got_batch, want_batch in zip(mixed, want):
        for got, expected in zip(got_batch, want_batch):
            if np.array_equal(got, expected):
                continue
            # the GPU's JPEG decoders differ from libjpeg-turbo by a few levels
            assert got.shape == expected.shape
            assert np.abs(got.astype(int) - expected.astype(int)).mean() < 2.0


def test_worker_processes_run_below_the_pipelines_priority(data):
    """The workers are niced (Tuning.worker_niceness) so that the pipeline's own threads, which
    feed the GPU, get a core when the workers fill every one."""
    import os

    pipe = penstock.Pipeline(batch_size=2, num_threads=1, device_id=None, worker_processes=True)
    with pipe:
        jpegs, _ = penstock.fn.readers.file(file_root=data)
        pipe.set_outputs(penstock.fn.decoders.image(jpegs))
    pipe.build()
    try:
        pipe.run()
        pids = [link._process.pid for link in pipe._executor._processes._links]
        expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + DEFAULT.worker_niceness)
        assert pids and all(os.getpriority(os.PRIO_PROCESS, pid) == expected for pid in pids)
    finally:
        pipe.close()


_DYING_PIPELINES = """
import dataclasses, functools, itertools, os, sys, threading, time
import numpy as np
import penstock.tuning
from penstock import fn, pipeline_def
from penstock.executor import processes
from penstock.tuning import DEFAULT

data, death, marks = sys.argv[1], sys.argv[2], sys.argv[3]
sizes = itertools.count()


def marked(tag, result):
    def function(image):
        open(os.path.join(marks, f"{tag}-{os.getpid()}"), "w").close()
        return result(image)
    return function


def sleeping(image):
    time.sleep(60)
    return image


def large(ragged, megabytes):  # rows of 1000 floats: a sample of about ``megabytes``
    rows = int(megabytes * 262)
    return lambda image: np.ones((rows + (next(sizes) if ragged else 0), 1000), np.float32)


def pipeline(function=None):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1, worker_processes=True, prefetch_queue_depth=1)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data)
        images = fn.decoders.image(jpegs)
        return images if function is None else fn.python_function(images, function=function, batch_processing=False)
    built = pipe()
    built.build()
    return built


def start(phase, built):  # run() waits for ever in some phases: from a thread, as a training loop's prefetcher would
    threading.Thread(target=built.run, daemon=True).start()
    while built._executor._processes is None or len(built._executor._processes._links) < 1:
        time.sleep(0.01)
    started.append((phase, built))


started = []
idle = pipeline()
idle.run()  # and the batch after it, made ahead: then nothing to do
started.append(("idle", idle))
time.sleep(0.3)
# replies are never read from here on: a worker with a reply larger than its pipe holds waits in the send
processes.ProcessLink.receive = lambda self: time.sleep(3600)
start("computing", pipeline(marked("computing", sleeping)))
for ragged in (False, True):
    layout = "ragged" if ragged else "dense"
    start(f"sending {layout}", pipeline(marked(f"sending {layout}", large(ragged, 0.9))))  # through the pipe
    # through the ring, which is full after one sample: the other waits in the pipe
    penstock.tuning.DEFAULT = dataclasses.replace(DEFAULT, lent_ring_bytes=4 << 20)
    start(f"ring full {layout}", pipeline(marked(f"ring full {layout}", large(ragged, 3.0))))
while len(os.listdir(marks)) < len(started) - 1:
    time.sleep(0.01)
time.sleep(0.5)  # the replies fill the pipes
for phase, built in started:
    print(phase, *(link._process.pid for link in built._executor._processes._links), sep=",", flush=True)
if death == "exit":
    os._exit(0)  # as a kill would: no close(), no pipe closed by the interpreter
time.sleep(60)  # killed meanwhile
"""


@pytest.mark.parametrize("death", ["SIGKILL", "exit"])
def test_worker_processes_end_when_the_pipeline_process_dies(data, tmp_path, death):
    """A pipeline process that dies without closing its pipeline (killed, or os._exit) leaves no
    worker process behind within 2 s, whatever the workers were doing: idle, computing (a function
    that sleeps), sending a reply larger than the pipe holds (dense and ragged outputs) or with a
    full ring (the reply then goes through the pipe). Their pipes do not tell them (the later
    workers inherit the earlier ones' ends), and a send waits for ever where nobody reads."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script, marks = tmp_path / "dying.py", tmp_path / "marks"
    script.write_text(_DYING_PIPELINES)
    marks.mkdir()
    # no pipe of ours for the workers to hold: their output goes to a file
    with open(tmp_path / "out.txt", "w") as out:
        parent = subprocess.Popen([sys.executable, str(script), data, death, str(marks)], stdout=out)
        try:
            deadline = time.monotonic() + 60
            while (tmp_path / "out.txt").read_text().count("\n") < 6 and parent.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.02)
            if death == "SIGKILL":
                parent.send_signal(signal.SIGKILL)
            assert parent.wait(timeout=30) in (0, -signal.SIGKILL)
        finally:
            parent.kill()
            parent.wait()
    died = time.monotonic()
    workers = {}
    for line in (tmp_path / "out.txt").read_text().splitlines():
        phase, *pids = line.split(",")
        workers[phase] = [int(pid) for pid in pids]
    assert len(workers) == 6 and all(workers.values())

    def alive(pid: int) -> bool:  # an exited process may stay a zombie where nothing reaps it
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    while any(alive(pid) for pids in workers.values() for pid in pids) and time.monotonic() < died + 2:
        time.sleep(0.05)
    left = {phase: [pid for pid in pids if alive(pid)] for phase, pids in workers.items()}
    for pid in (pid for pids in left.values() for pid in pids):
        os.kill(pid, signal.SIGKILL)
    assert not any(left.values()), f"worker processes alive 2 s after their pipeline's process died: {left}"


def test_worker_processes_outlive_the_thread_that_started_them(data):
    """The system kills the worker processes when the thread that forked them ends: a pipeline first
    run from a thread that then ends keeps its workers, and runs on from another."""
    threads_before = set(threading.enumerate())

    pipe = imagenet_train(data, batch_size=2, num_threads=2, device_id=None, seed=11, crop=32, worker_processes=True)
    try:
        first = threading.Thread(target=pipe.run)
        first.start()
        first.join()
        links = pipe._executor._processes._links
        time.sleep(0.2)  # a kill would have arrived
        assert all(link._process.is_alive() for link in links)
        for _ in range(3):
            pipe.run()
        assert pipe._executor._processes._links == links
    finally:
        pipe.close()
    assert not set(penstock_threads()) - threads_before


def test_shared_heap_lends_arrays_given_back_in_any_order():
    from penstock.executor.shared_ring import RingRef, SharedHeap
    LENT_SMALLEST = DEFAULT.lent_smallest

    heap = SharedHeap(4 * LENT_SMALLEST, LENT_SMALLEST, DEFAULT.ring_bytes)
    values = [np.full(LENT_SMALLEST // 4, index, np.float32) for index in range(4)]
    refs = [heap.put(value) for value in values]
    assert all(type(ref) is RingRef for ref in refs) and [ref[0] for ref in refs] == [0, 1 << 20, 2 << 20, 3 << 20]
    assert heap.put(values[0]) is values[0]  # full: the array travels as itself
    assert heap.put(np.zeros(10)).shape == (10,)  # small arrays are not worth a reference
    lent = [heap.lend(ref) for ref in refs]
    for value, array in zip(values, lent):
        np.testing.assert_array_equal(array, value)
    row = lent[2][:5]
    del lent[1:3]  # given back out of order: the second one's room is free, the third's held by a view
    again = heap.put(values[3] + 1)
    assert again[0] == 1 << 20 and heap.put(values[3]) is values[3]
    del row
    assert heap.put(values[3])[0] == 2 << 20  # lowest addresses first


def test_large_samples_cross_as_views_of_the_heap_and_match_threads(tmp_path):
    """Decoded images of a megabyte and more come back through the worker's SharedHeap and are
    the batch's samples as they are (no copy), dense or ragged; their room is given back when the
    batch is dropped."""
    import mmap

    from penstock import fn, pipeline_def
    make_class_tree(str(tmp_path / "same"), {"a": 4}, height=600, width=640)
    make_class_tree(str(tmp_path / "mixed"), {"a": 2}, height=600, width=640)
    make_class_tree(str(tmp_path / "mixed"), {"b": 2}, height=640, width=600)

    def batches(folder, worker_processes):
        @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1, worker_processes=worker_processes)
        def pipe():
            jpegs, _ = fn.readers.file(file_root=str(tmp_path / folder))
            return fn.decoders.image(jpegs)
        built = pipe()
        built.build()
        try:
            outputs = [built.run()[0] for _ in range(3)]
            bases = {type(outputs[-1].at(index).base) for index in range(4)}
            images = [[np.array(batch.at(index)) for index in range(4)] for batch in outputs]
            if worker_processes:
                heaps = [link.ring for link in built._executor._processes._links]
                del outputs
                deadline = time.monotonic() + 5  # the processes take their buffers back as they come to it
                while sum(int(heap._returns[0]) for heap in heaps) < 8 and time.monotonic() < deadline:
                    time.sleep(0.01)
                given_back = sum(int(heap._returns[0]) for heap in heaps)
                return images, bases, given_back
            return images, bases, None
        finally:
            built.close()
    for folder in ("same", "mixed"):
        forked, bases, given_back = batches(folder, True)
        threaded, _, _ = batches(folder, False)
        assert bases == {mmap.mmap} and given_back >= 8  # the first two batches' at least
        for got, want in zip(forked, threaded):
            for got_image, want_image in zip(got, want):
                np.testing.assert_array_equal(got_image, want_image)


def test_closed_pipelines_leave_no_descriptor_open(data):
    import os
    _batches(data, True, count=1)  # whatever a first pipeline opens for the process's life
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        _batches(data, True, count=2)
    assert len(os.listdir("/proc/self/fd")) == before


def test_replies_larger_than_the_pipe_reach_a_process_with_descriptors_past_1024(tmp_path):
    """A worker waits for its pipe to drain with poll, not select, which takes no descriptor of
    1024 or more: a long-lived process (a test session, a training job's loggers) has such ones."""
    import os
    import resource

    from penstock import fn, pipeline_def
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200:
        pytest.skip("the process may not open 1,200 files")
    make_class_tree(str(tmp_path / "large"), {"a": 4}, height=300, width=400)
    padding = []
    while not padding or padding[-1] < 1100:
        padding.append(os.open(os.devnull, os.O_RDONLY))
    try:
        @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1, worker_processes=True)
        def pipe():
            jpegs, _ = fn.readers.file(file_root=str(tmp_path / "large"))
            return fn.decoders.image(jpegs)  # 360 KB a sample: through the pipe, not the heap
        built = pipe()
        try:
            for _ in range(3):
                assert built.run()[0].shape() == [(300, 400, 3)] * 4
        finally:
            built.close()
    finally:
        for descriptor in padding:
            os.close(descriptor)
