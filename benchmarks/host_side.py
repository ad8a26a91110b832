"""The host side of the GPU training pipeline, measured on any machine: what the pipeline's own
process spends per batch in Python (the interpreter-lock budget that the GPU decoder's thread
competes for), with the GPU stood in for.

The real CPU stage runs (reader, worker processes, header parsing and window choice, the requests
and replies between them); the GPU decoder is a thread that sleeps (interpreter lock released)
``decode_ms`` per batch, as nvJPEG's batched hardware call blocks; the GPU operators build their
plans and kernel tables as on a GPU, and only the kernel launch is left out. Prints images/s, the
decoder-bound ceiling, and each of the process's threads' CPU time per batch.

usage: PENSTOCK_GPU_ON_CPU=1 TRITON_INTERPRET=1 python benchmarks/host_side.py DATA [threads] [batches] [decode_ms]
       [batch_size (default 256)]
Compare two versions in one sitting (PYTHONPATH=the other checkout): machines differ. On a machine
with fewer cores than worker processes + 3, the figures include time the threads wait for a core.
"""
import os
import queue
import sys
import threading
import time
from dataclasses import replace

import torch

from penstock.operators.decoders import mixed as decoders
from penstock.kernels import triton_resample
from penstock.batch import PackedBatch
from penstock.kernels.image_plan import ImagePlan
from penstock.runtime.pinned import to_device

DATA = sys.argv[1]
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
BATCHES = int(sys.argv[3]) if len(sys.argv) > 3 else 40
DECODE_S = (float(sys.argv[4]) if len(sys.argv) > 4 else 9.8) / 1000
BATCH_SIZE = int(sys.argv[5]) if len(sys.argv) > 5 else 256


class StandInDecode:
    def __init__(self):
        self.done = threading.Event()

    def wait(self):
        self.done.wait()


calls = queue.SimpleQueue()
decoder_busy = [0.0]


def decoder_loop():
    while True:
        pending = calls.get()
        started = time.perf_counter()
        time.sleep(DECODE_S)  # nvjpegDecodeBatchedEx
        decoder_busy[0] += time.perf_counter() - started
        pending.done.set()


threading.Thread(target=decoder_loop, daemon=True).start()


def run_batch(self, inputs, args, batch):
    """MixedDecoder.run_batch with the decode stood in for: the batch buffer and its layout, and
    one call queued for the decoder thread."""
    items = inputs[0]
    shapes, offsets, total = [], [], 0
    for item in items:
        window, height, width = item.window, item.height, item.width
        if window is not None:
            height, width = window[2], window[3]
        shapes.append((height, width, 3))
        offsets.append(total)
        total += -(-height * width * 3 // 256) * 256
    buffer = torch.empty(total, dtype=torch.uint8)
    pending = StandInDecode()
    calls.put(pending)
    return replace(ImagePlan.of(PackedBatch(buffer, offsets, shapes), upload=to_device), pending=pending)


class NoLaunch:
    def __getitem__(self, grid):
        return lambda *a, **k: None


decoders.MixedDecoder.prepare = decoders.MixedDecoder.encoded  # the real work, not the CPU emulation's decode
decoders.MixedDecoder.run_batch = run_batch
triton_resample.resample_kernel = NoLaunch()

from penstock.recipes import imagenet_train  # noqa: E402  (after the stand-ins are in place)


def thread_cpu():
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                text = f.read()
            name = names.get(int(tid), "?")
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        out[(tid, name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


pipe = imagenet_train(DATA, device="gpu", batch_size=BATCH_SIZE, num_threads=THREADS, device_id=0, seed=7)
pipe.build()
for _ in range(5):
    pipe.run()
before, started, busy0 = thread_cpu(), time.perf_counter(), decoder_busy[0]
for _ in range(BATCHES):
    pipe.run()
seconds = time.perf_counter() - started
after = thread_cpu()
rate = BATCHES * BATCH_SIZE / seconds
print(f"{rate:8,.0f} images/s; decoder-bound ceiling {BATCH_SIZE / DECODE_S:,.0f}; decoder busy "
      f"{(decoder_busy[0] - busy0) / seconds:.0%}")
total = 0
for key in sorted(after, key=lambda k: -(after[k] - before.get(k, 0))):
    spent = (after[key] - before.get(key, 0)) / BATCHES * 1000
    total += spent
    if spent > 0.05:
        print(f"  {key[1]:24s} {spent:6.2f} ms/batch")
print(f"  {'main process total':24s} {total:6.2f} ms/batch")
pipe.close()
