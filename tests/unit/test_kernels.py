"""The compiled tanh used by the reference policies' forward pass: as accurate as np.tanh over float32 inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from npsco.novelty import _kernels


def kernel_tanh(x: np.ndarray) -> np.ndarray:
    z = np.ascontiguousarray(x, np.float32).reshape(1, -1)
    out = np.empty_like(z)
    _kernels.tanh_rows(z, out)
    return out.reshape(np.shape(x))


def test_dense_grid_is_within_one_rounding_of_tanh():
    x = np.linspace(-12, 12, 2_000_001, dtype=np.float32)
    y, exact = kernel_tanh(x), np.tanh(x.astype(np.float64))
    assert np.abs(y - exact).max() <= 6.0e-8  # float32 rounding near 1 is 6e-8; np.tanh's own error here is 6.0e-8
    ulps = np.abs(y.view(np.int32).astype(np.int64) - np.tanh(x).view(np.int32))
    assert ulps.max() <= 1
    assert np.all(np.diff(y) >= 0)  # monotone
    np.testing.assert_array_equal(y, -y[::-1])  # odd (the grid is symmetric)
    assert np.abs(y).max() == 1.0


@pytest.mark.parametrize(
    "x, expected",
    [
        (0.0, 0.0),
        (np.inf, 1.0),
        (-np.inf, -1.0),
        (20.0, 1.0),
        (-9.02, -1.0),
        (9.0, np.float32(np.tanh(9.0))),
        (1e-30, 1e-30),
    ],
)
def test_special_values(x, expected):
    assert kernel_tanh(np.array([x]))[0] == np.float32(expected)


def test_nan_propagates():
    assert np.isnan(kernel_tanh(np.array([np.nan, 1.0]))[0])


@settings(max_examples=50, deadline=None)
@given(arrays(np.float32, st.integers(1, 200), elements=st.floats(-50, 50, width=32)))
def test_matches_numpy_on_random_arrays(x):
    np.testing.assert_allclose(kernel_tanh(x), np.tanh(x), rtol=2e-7, atol=6e-8)


def test_rows_write_only_the_first_columns():
    z = np.arange(12, dtype=np.float32).reshape(3, 4) / 4 - 1
    out = np.full((3, 6), 7.0, np.float32)  # like a layer input whose last columns hold the bias ones
    _kernels.tanh_rows(z, out)
    np.testing.assert_allclose(out[:, :4], np.tanh(z), rtol=2e-7, atol=6e-8)
    np.testing.assert_array_equal(out[:, 4:], 7.0)


def test_an_output_too_small_is_refused():
    with pytest.raises(ValueError, match="at least its columns"):
        _kernels.tanh_rows(np.zeros((2, 5), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="z's rows"):
        _kernels.tanh_rows(np.zeros((2, 5), np.float32), np.zeros((1, 5), np.float32))
