"""The numbers that tune penstock's speed and memory, in one place: the mechanisms that use them
(the executor, its worker processes and rings, the mixed decoders' CPU share) take a ``Tuning``
(operators through their BuildContext, the executor through its constructor) and read each number
once, when they are made. What each was measured with: BENCHMARKS.md, "Tuning numbers"."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    # ---- executor: threads, batches ahead, shutdown ----
    max_python_workers: int = 8  # worker threads at most (interpreter lock contention); CPU pipelines, 8 vs 16 threads
    cpu_batches_ahead: int = 2  # batches a GPU pipeline's CPU stage holds beyond the prefetch depth; H100 training
    thread_stop_seconds: float = 1.5  # how long close() waits for the CPU stages' threads, all together

    # ---- worker processes: message sizes, priority, stop ----
    process_chunk: int = 32  # samples per message when they are shared out evenly, at most
    message_seconds: float = 0.01  # a worker's time a message of light samples carries (dispatcher's cost per message)
    light_chunk: int = 128  # samples per message of light samples, at most
    heavy_message_seconds: float = 0.05  # a worker's time a message carries, at most
    reply_ring_share: int = 4  # a reply takes at most 1 / this of its process's ring
    worker_niceness: int = 5  # the worker processes' niceness above the pipeline's; H100, 2-megapixel JPEGs
    worker_stop_seconds: float = 0.3  # how long closing waits for busy worker processes before terminating them

    # ---- worker processes' shared memory (executor.shared_ring) ----
    ring_bytes: int = 256 << 20  # a ring's address space (only pages written are backed)
    lent_ring_bytes: int = 1 << 30  # a SharedHeap's address space: the process's share of the batches held
    lent_smallest: int = 1 << 20  # arrays from this size come back through the ring or heap, not pickled
    ring_smallest: int = 8 << 10  # arrays below this cross the pipe: a reference would save nothing
    pinned_rings_bytes: int = 1 << 30  # what the pinned rings of all processes share; 2-megapixel JPEGs, batches of 256
    # the shared arena's region for fixed-shape CPU values the GPU copies (DALI's SSD example: box_encoder's 45 MB
    # a batch), of which the pipeline pins what the first batches took, twice over: the GPU copies them in place
    pinned_upload_bytes: int = 1 << 30

    # ---- mixed decoders ----
    decode_buffer_steps: int = 4  # sizes per power of two a batch's decode buffer is rounded to (0: exact); H200 memory

    # ---- mixed decoders: the CPU workers' share of the JPEGs (operators.decoders.cpu_share) ----
    hardware_us_per_image: float = 13.0  # nvJPEG's hardware call per image; 256 windows, H100 and H200
    hardware_us_per_megapixel: float = 82.0  # ... and per megapixel of the whole image
    pipeline_us_per_image: float = 37.0  # what the rest of the GPU training pipeline takes per image (27,000/s)
    headroom: float = 2.0  # a share pays once the engines take this many times the pipeline's time per image
    window_floor_per_spare_core: float = 0.006  # least share of windows per spare core; H100s on 16 and 32 cores
    max_window_floor: float = 0.1  # ... at most; cores busy at 0.13 on 32 cores
    cpu_to_hardware_time: float = 48.0  # a CPU core's time for a whole image, in the engines' times; 2-megapixel photos
    pipeline_cores: int = 6  # the cores a GPU pipeline keeps busy without a share (4.1-4.6 measured) and 2 more
    max_automatic_cpu_share: float = 0.3  # the share at most; larger was slower wherever measured
    max_whole_image_cpu_share: float = 0.2  # the share of whole images at most; validation, 32 cores
    max_share_workers: int = 32  # worker processes the automatic share asks for, at most


DEFAULT = Tuning()
