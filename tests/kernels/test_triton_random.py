"""The random generators' kernel against a numpy Philox4x32-10 written here from its definition
(Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"; the counter (index, 0, 0, 0), the key
the sample's 64-bit key): uniform variates exactly, normal ones (Box-Muller on the first two words)
within 1e-5; and a sample's numbers depend on its key alone, not on the batch around it."""
from __future__ import annotations

import numpy as np
import torch

from conftest import CUDA
from penstock.kernels.triton_random import draw_variates
from penstock.runtime.pinned import to_device

DEVICE = torch.device("cuda") if CUDA else torch.device("cpu")
MASK = np.uint64(0xFFFFFFFF)


def philox(key: int, counters: np.ndarray) -> tuple:
    """Philox4x32-10 of counters (index, 0, 0, 0) under ``key``: the four 32-bit words (uint64)."""
    c0, c1, c2, c3 = (counters.astype(np.uint64), *(np.zeros(len(counters), np.uint64) for _ in range(3)))
    k0, k1 = np.uint64(key & 0xFFFFFFFF), np.uint64(key >> 32)
    a, b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(10):
        product_a, product_b = a * c0, b * c2  # below 2**64: exact in uint64
        c0, c1, c2, c3 = ((product_b >> np.uint64(32)) ^ c1 ^ k0, product_b & MASK,
                          (product_a >> np.uint64(32)) ^ c3 ^ k1, product_a & MASK)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & MASK, (k1 + np.uint64(0xBB67AE85)) & MASK
    return c0, c1, c2, c3


def uniform(words: np.ndarray) -> np.ndarray:
    """A 32-bit word to [0, 1): as a signed int folded onto [0, 2**31), times 2**-31 (in float32)."""
    signed = words.astype(np.uint32).view(np.int32).astype(np.int64)
    folded = np.where(signed < 0, -signed - 1, signed).astype(np.int32)
    return folded.astype(np.float32) * np.float32(4.6566127342e-10)


def expected(key: int, size: int, normal: bool) -> np.ndarray:
    words = philox(key, np.arange(size))
    if not normal:
        return uniform(words[0])
    u1, u2 = np.maximum(np.float32(1e-7), uniform(words[0])), uniform(words[1])
    return (np.sqrt(-2.0 * np.log(u1.astype(np.float64))) * np.cos(2 * np.pi * u2.astype(np.float64))).astype(np.float32)


def drawn(keys: list, shapes: list, normal: bool) -> list:
    batch = draw_variates(np.array(keys, np.int64), shapes, normal, DEVICE, upload=to_device)
    assert [tuple(sample.shape) for sample in batch] == [tuple(shape) for shape in shapes]
    return [sample.cpu().numpy() for sample in batch]


def test_uniform_variates_are_philox_words_in_zero_to_one():
    keys = [0, 1, 2**40 + 77, 2**63 - 1]
    shapes = [(3, 5), (0,), (1200,), (7, 2, 3)]
    for got, key, shape in zip(drawn(keys, shapes, normal=False), keys, shapes):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.ravel(), expected(key, int(np.prod(shape)), normal=False))
        assert np.all((got >= 0) & (got < 1))


def test_normal_variates_are_box_muller_on_two_words():
    keys, shapes = [5, 2**62 + 3], [(2000,), (40, 25)]
    for got, key, shape in zip(drawn(keys, shapes, normal=True), keys, shapes):
        np.testing.assert_allclose(got.ravel(), expected(key, int(np.prod(shape)), normal=True), rtol=0, atol=1e-5)
    together = np.concatenate([sample.ravel() for sample in drawn([11, 12, 13], [(30000,)] * 3, normal=True)])
    assert abs(together.mean()) < 0.02 and abs(together.std() - 1) < 0.02


def test_a_samples_numbers_depend_on_its_key_alone():
    alone, = drawn([99], [(300,)], normal=True)
    among = drawn([1, 99, 2], [(5000,), (300,), (0,)], normal=True)
    np.testing.assert_array_equal(among[1], alone)
    assert not np.array_equal(among[0][:300], alone)
