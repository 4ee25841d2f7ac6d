"""The compiled sums of `npsco.ppo._numpy_sums` give numpy's bits: the same additions in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from npsco.ppo._numpy_sums import column_sums, pairwise_sum, reduce_sum


def spread(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Values over many magnitudes and both signs: a sum of them depends on the order of its additions."""
    return (rng.standard_normal(shape) * np.exp(rng.uniform(-10, 10, shape))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_sum_is_numpys_sum_bit_for_bit(dtype):
    rng = np.random.default_rng(0)
    sizes = [*range(1, 140), 255, 256, 257, 300, 1000, 1031, 2048, 4099, 9000, 20011]
    for n in sizes:
        for _ in range(5):
            a = spread(rng, (n,), dtype)
            assert np.array(reduce_sum(a), dtype).tobytes() == np.add.reduce(a).tobytes(), n


def test_the_order_matters_so_the_test_can_fail():
    """The values above do round differently in another order: a sequential sum differs from numpy's somewhere."""
    rng = np.random.default_rng(0)
    differs = 0
    for _ in range(50):
        a = spread(rng, (64,), np.float32)
        sequential = np.float32(0.0)
        for x in a:
            sequential = np.float32(sequential + x)
        differs += sequential != np.add.reduce(a)
    assert differs > 10


def test_pairwise_sum_of_a_strided_run():
    rng = np.random.default_rng(1)
    a = spread(rng, (3 * 700,), np.float64)
    assert pairwise_sum(a, 2, 700, 3) == np.add.reduce(a[2::3].copy())
    assert pairwise_sum(a, 0, 1, 1) == a[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_are_numpys_sum_over_axis_0(dtype):
    rng = np.random.default_rng(2)
    for rows in [1, 2, 3, 7, 8, 9, 16, 64, 65, 200, 2048]:
        for cols in [1, 2, 3, 6, 11, 17, 64]:
            x = spread(rng, (rows, cols), dtype)
            out = np.empty(cols, dtype)
            column_sums(x, out)
            assert out.tobytes() == np.add.reduce(x, axis=0).tobytes(), (rows, cols)
