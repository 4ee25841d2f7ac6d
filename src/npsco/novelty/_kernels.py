"""Compiled kernels for the reference policies' hidden layers (numba).

Evaluating M reference policies at every rollout step is mostly tanh: at M = 20 and 8 envs, 20k values per step, and
numpy's float32 tanh (torch's too) costs more than the matmuls around it. `tanh_rows` is a rational tanh that vectorises
(no libm call): faster than numpy's and as accurate in float32. The matmuls stay with numpy (OpenBLAS): loops compiled
by numba were slower for these shapes. The timings: benchmarks/results/throughput/design_measurements.md.

The tanh: on |x| <= 9, tanh(x) = x P(u) / Q(u) with u = (x / 9)^2, evaluated in float64 and rounded to float32;
between 9 and 13 ln 2 = 9.011 the input is clamped to 9 (the float32 tanh there is 1 - 2^-24), beyond it the result is
+-1. P (degree 6) and Q (degree 3) were fitted on 250k points of [0, 9] by linearised least squares, iterated with
Sanathanan-Koerner (1/Q) and Lawson (largest relative error) reweighting; the rational function's own relative error is
below 7e-9. Over float32 inputs the result is within 6e-8 of the true tanh and 1 ulp of `np.tanh`, odd and monotone
(tests/unit/test_kernels.py).
"""

from __future__ import annotations

import math

import numba
import numpy as np

_CLAMP = 9.0
_P = (
    0.9999999934564697,
    10.598026604469247,
    20.364859667016322,
    5.92768766604112,
    -0.8705742000159655,
    0.1840096226605103,
    -0.023970463446971596,
)
_Q = (1.0, 37.598021570323915, 160.71208539007827, 135.31025547681955)
_P0, _P1, _P2, _P3, _P4, _P5, _P6 = _P
_Q0, _Q1, _Q2, _Q3 = _Q
_U = 1.0 / (_CLAMP * _CLAMP)
_ONE = 13.0 * math.log(2.0)  # beyond 9.011, 1 - tanh(x) < 2^-25 (half a float32 step below 1): tanh rounds to 1.0

# fastmath lets LLVM fuse multiply-adds and vectorise the loops (without "nnan"/"ninf": NaN and inf keep their IEEE
# meaning); error_model="numpy" drops the division-by-zero check that otherwise keeps the division scalar (Q >= 1).
_jit = numba.njit(fastmath={"nsz", "arcp", "contract", "afn", "reassoc"}, error_model="numpy", cache=True)


@_jit
def _tanh(x: float) -> float:
    c = min(max(x, -_CLAMP), _CLAMP)
    u = c * c * _U
    p = (((((_P6 * u + _P5) * u + _P4) * u + _P3) * u + _P2) * u + _P1) * u + _P0
    q = ((_Q3 * u + _Q2) * u + _Q1) * u + _Q0
    return math.copysign(1.0, x) if abs(x) >= _ONE else c * p / q  # NaN: the comparison fails and NaN propagates


@_jit
def tanh_rows(z: np.ndarray, out: np.ndarray) -> None:
    """out[i, :L] = tanh(z[i]) for z (R, L) and out (R, L') float32, both C-contiguous, L <= L'.

    The references' forward pass calls it with z = (M, K * N) pre-activations and out = (M, (K + 1) * N), the next
    layer's input whose last N values per reference are the constant ones of its bias column."""
    rows, length = z.shape
    if out.shape[0] != rows or out.shape[1] < length:
        raise ValueError("tanh_rows: out must have z's rows and at least its columns")
    for i in range(rows):
        for j in range(length):
            out[i, j] = _tanh(np.float64(z[i, j]))
