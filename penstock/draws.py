"""The random numbers operators draw: each operator's stream per iteration (``random_stream``), and
draws that a sample makes where it is computed, rather than all at once by the producer.

A random crop looks at up to ``num_attempts`` candidate windows per sample, four uniforms each (100
attempts in the ResNet-50 recipes: 3.2 KB a sample, most of a worker process's request), and
usually keeps the first. ``UniformBlocks`` stands for ``rng.random((count, blocks, 4))`` without
drawing it: a batch of them pickles to a few bytes, and a sample draws only the blocks it reads.

The numbers are exactly those of ``rng.random((count, blocks, 4))``: numpy's Philox makes each
block of four 64-bit outputs (four doubles) from one counter value, so block ``b`` of sample ``i``
comes from counter ``start + i * blocks + b``, and setting the counter draws it alone.

A batch's draws (what ``Operator.draw`` returned: element i for sample i) go with the samples
they belong to when a batch is cut into parts (a worker process's request, a branch of a
conditional, the samples kept after a failure): ``of_samples`` takes them, at once for the draws
that declare they slice by sample positions (``SlicedBySamples``).
"""
from __future__ import annotations

import abc
import threading

import numpy as np


class SlicedBySamples(abc.ABC):
    """Declares that ``draws[positions]`` (a list of sample positions) is the draws of those samples,
    of the same kind: numpy arrays (registered below) and UniformBlocks."""


SlicedBySamples.register(np.ndarray)


def of_samples(draws, positions: list):
    """A batch's draws of the samples at ``positions``: sliced at once where they declare they can
    be (SlicedBySamples), else a list of them one by one."""
    if isinstance(draws, SlicedBySamples):
        return draws[positions]
    return [draws[index] for index in positions]


def random_stream(seed: int, iteration: int) -> np.random.Generator:
    """The random stream of one operator (``seed``, already derived from the pipeline's) for one
    iteration: the same numbers whatever thread, process or prefetch depth draws them.

    It is ``Philox(key=[seed & (2**64 - 1), iteration])``'s stream, with the key handed over as
    numpy converts it (``np.asarray``, then uint64: a word of 2**63 or more beside a smaller one goes
    through a float, as in numpy) rather than through ``key=``, for which numpy first gathers OS
    entropy for a seed sequence it then drops: 23 us of the producer's thread per step and batch."""
    return keyed_stream(np.asarray([seed & (2**64 - 1), iteration]).astype(np.uint64))


def keyed_stream(key) -> np.random.Generator:
    """``Generator(Philox(key=key))``'s stream (``key``: an int below 2**64, or up to two such
    words), without the OS entropy numpy gathers for ``key=`` and then drops (7-25 us a call)."""
    words = np.zeros(2, np.uint64)
    words[:np.size(key)] = np.asarray(key, np.uint64)
    return np.random.Generator(np.random.Philox(_PhiloxKey(words)))


class _PhiloxKey(np.random.bit_generator.ISeedSequence):
    """A seed sequence whose state is a Philox key, as given (Philox asks it for two uint64 words)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray):
        self.words = words

    def generate_state(self, n_words, dtype=np.uint32):
        return self.words


_generators = threading.local()  # per thread: key -> (Philox, Generator), reused across samples


class UniformBlocks(SlicedBySamples):
    """``rng.random((count, blocks, 4))`` drawn lazily: ``blocks_[i]`` is sample i's SampleBlocks,
    ``blocks_[indices]`` the UniformBlocks of those samples (what a worker process is sent)."""

    __slots__ = ("key", "start", "blocks", "indices")

    def __init__(self, key: tuple, start: int, blocks: int, indices: list):
        self.key, self.start, self.blocks, self.indices = key, start, blocks, indices

    @classmethod
    def draw(cls, rng: np.random.Generator, count: int, blocks: int):
        """Stands for ``rng.random((count, blocks, 4))`` and moves ``rng`` past those numbers; the
        array itself where ``rng`` cannot be replayed block by block (not Philox, or in the middle
        of a block)."""
        generator = rng.bit_generator
        state = generator.state
        counter = state["state"]["counter"] if isinstance(generator, np.random.Philox) else None
        if counter is None or state["buffer_pos"] != 4 or state["has_uint32"] or counter[1:].any() or \
                int(counter[0]) + count * blocks >= 2**64:
            return rng.random((count, blocks, 4))
        generator.advance(count * blocks)
        return cls(tuple(int(word) for word in state["state"]["key"]), int(counter[0]), blocks, range(count))

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, selection):
        if isinstance(selection, (int, np.integer)):
            return SampleBlocks(self.key, self.start + self.indices[selection] * self.blocks, self.blocks)
        return UniformBlocks(self.key, self.start, self.blocks, [self.indices[index] for index in selection])

    def __reduce__(self):
        return UniformBlocks, (self.key, self.start, self.blocks, list(self.indices))

    def __array__(self, dtype=None, copy=None):
        array = np.array([np.asarray(self[position]) for position in range(len(self))]).reshape(
            len(self), self.blocks, 4)
        return array if dtype is None else array.astype(dtype)


class SampleBlocks:
    """One sample's blocks of four uniforms: iterating draws one block at a time."""

    __slots__ = ("key", "first", "blocks")

    def __init__(self, key: tuple, first: int, blocks: int):
        self.key, self.first, self.blocks = key, first, blocks

    def __len__(self) -> int:
        return self.blocks

    def __iter__(self):
        generators = getattr(_generators, "by_key", None)
        if generators is None:
            generators = _generators.by_key = {}
        found = generators.get(self.key)
        if found is None:
            if len(generators) > 64:  # one key per batch and operator: old batches' keys go
                generators.clear()
            generator = keyed_stream(np.array(self.key, np.uint64))
            found = generators[self.key] = (generator.bit_generator, generator)
        bit_generator, generator = found
        state = bit_generator.state
        for block in range(self.blocks):
            state["state"]["counter"][:] = (self.first + block, 0, 0, 0)
            state["buffer_pos"], state["has_uint32"] = 4, 0
            bit_generator.state = state
            yield tuple(generator.random(4).tolist())

    def __array__(self, dtype=None, copy=None):
        array = np.array(list(self), np.float64).reshape(self.blocks, 4)
        return array if dtype is None else array.astype(dtype)


class SampleStreams:
    """For operators whose samples draw as many numbers as they turn out to need (rounds of crop
    attempts, a pixel among however many the mask has): ``draw`` gives each sample a key of its
    own, and ``stream(sample)`` is that sample's generator, the same whatever thread runs it."""

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return rng.integers(0, 2**63, count)

    @staticmethod
    def stream(sample) -> np.random.Generator:
        return keyed_stream(int(sample.params))
