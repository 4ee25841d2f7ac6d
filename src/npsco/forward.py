"""The policy's forward pass, compiled (numba): observations to mean actions, one row at a time.

Every action npsco takes with a policy goes through `actor_means`: the rollout's sampled actions, `Policy.mean_action`
and `Policy.act` (evaluation, thresholds, the report's videos, a user's own loop) and the distances a verdict is
measured with. Each row (one observation) is computed alone, by the same instructions whatever the batch holds, in
IEEE arithmetic without fused multiply-adds or reassociation, with a rational tanh (no libm call): a row's action is the
same bits alone or in a batch of any size, and the same on every x86-64 processor. A matrix product through BLAS
(numpy's `@`) gives neither: its kernels sum a row's products in an order that depends on the batch's shape and the
processor, and a chaotic task (Walker2d) turns those 1e-7 differences into different returns.

Each layer adds each input's column of weights to all of its outputs (weights stored as (in, out)): the loop over the
outputs has independent lanes and vectorises without reordering a sum. Activations are float32, as a BLAS product's.

The tanh: on |x| <= 9, tanh(x) = x P(u) / Q(u) with u = (x / 9)^2, evaluated in float64 and rounded to float32;
between 9 and 13 ln 2 = 9.011 the input is clamped to 9 (the float32 tanh there is 1 - 2^-24), beyond it the result is
+-1. P (degree 6) and Q (degree 3) were fitted on 250k points of [0, 9] by linearised least squares, iterated with
Sanathanan-Koerner (1/Q) and Lawson (largest relative error) reweighting; the rational function's own relative error is
below 7e-9. Over float32 inputs the result is within 6e-8 of the true tanh and 1 ulp of `np.tanh`
(tests/unit/test_forward.py).
"""

from __future__ import annotations

import math

import numba
import numpy as np

TANH_CLAMP = 9.0
TANH_P = (
    0.9999999934564697,
    10.598026604469247,
    20.364859667016322,
    5.92768766604112,
    -0.8705742000159655,
    0.1840096226605103,
    -0.023970463446971596,
)
TANH_Q = (1.0, 37.598021570323915, 160.71208539007827, 135.31025547681955)
TANH_ONE = 13.0 * math.log(2.0)
"""Beyond 9.011, 1 - tanh(x) < 2^-25 (half a float32 step below 1): tanh rounds to 1.0."""
_P0, _P1, _P2, _P3, _P4, _P5, _P6 = TANH_P
_Q0, _Q1, _Q2, _Q3 = TANH_Q
_U = 1.0 / (TANH_CLAMP * TANH_CLAMP)

RELU, TANH = 0, 1
"""`actor_means`'s hidden-layer activations."""

jit = numba.njit(error_model="numpy", cache=True)
"""IEEE arithmetic in the written order: no fastmath, so no fused multiply-add and no reassociation."""


@jit
def tanh(x: float) -> float:
    """The rational tanh of the module docstring, in float64 (round the result to float32)."""
    c = min(max(x, -TANH_CLAMP), TANH_CLAMP)
    u = c * c * _U
    p = (((((_P6 * u + _P5) * u + _P4) * u + _P3) * u + _P2) * u + _P1) * u + _P0
    q = ((_Q3 * u + _Q2) * u + _Q1) * u + _Q0
    return math.copysign(1.0, x) if abs(x) >= TANH_ONE else c * p / q  # NaN: the comparison fails, NaN propagates


@jit
def actor_means(
    obs: np.ndarray,
    norm: np.ndarray,
    clip: float,
    weights: tuple[np.ndarray, ...],
    biases: tuple[np.ndarray, ...],
    activation: int,
    bounds: np.ndarray,
    squash: bool,
    clip_to_bounds: bool,
    out: np.ndarray,
) -> None:
    """out[n] = the policy's mean action at obs[n], for each row n.

    obs (N, D) raw observations, float64 (or float32); norm (2, D) float64: each dimension's mean and
    sqrt(var + eps), or empty (0, D) for a policy that does not normalise (the input is then obs cast to float32);
    clip: the normalised observations' bound. weights: per layer W^T (in, out) float32, C-contiguous; biases: per
    layer (out,) float32.
    activation: `TANH` or `RELU` between layers (the last is linear). bounds (2, A) float32: the action bounds;
    squash: the output is tanh-squashed into them (low + (tanh(u) + 1) / 2 (high - low), in that order, float32);
    clip_to_bounds: the result is clipped to them. out (N, A) float32."""
    n_rows, dim = obs.shape
    width = dim
    for w in weights:
        width = max(width, w.shape[1])
    x, y = np.empty(width, np.float32), np.empty(width, np.float32)
    normalise = norm.shape[0] == 2
    last = len(weights) - 1
    low, high = bounds[0], bounds[1]
    for n in range(n_rows):
        row = obs[n]
        for k in range(dim):  # (obs - mean) / sqrt(var + eps), clipped, in float64, then float32
            if normalise:
                v = (row[k] - norm[0, k]) / norm[1, k]
                x[k] = np.float32(-clip if v < -clip else (clip if v > clip else v))
            else:
                x[k] = np.float32(row[k])
        size = dim
        for layer in range(last + 1):
            w, b = weights[layer], biases[layer]
            outs = w.shape[1]
            for o in range(outs):
                y[o] = np.float32(0.0)
            for i in range(size):  # y += x_i W^T[i]: independent lanes, no sum reordered
                xi, wi = x[i], w[i]
                for o in range(outs):
                    y[o] += xi * wi[o]
            for o in range(outs):
                v = y[o] + b[o]
                if layer < last:
                    if activation == TANH:
                        v = np.float32(tanh(np.float64(v)))
                    elif v < 0:
                        v = np.float32(0.0)
                y[o] = v
            x, y = y, x
            size = outs
        for a in range(size):
            m = x[a]
            if squash:
                t = np.float32(tanh(np.float64(m)))
                m = low[a] + (np.float32(0.5) * (t + np.float32(1.0)) * (high[a] - low[a]))
            if clip_to_bounds:
                m = low[a] if m < low[a] else (high[a] if m > high[a] else m)  # NaN kept, as np.clip
            out[n, a] = m
