"""Compiled kernels for the reference policies (numba).

Evaluating M reference policies at every rollout step is mostly tanh: at M = 20 and 8 envs, 20k values per step, and
numpy's float32 tanh (torch's too) costs more than the matmuls around it. `tanh_rows` is a rational tanh that vectorises
(no libm call): faster than numpy's and as accurate in float32. With many states per call the matmuls stay with numpy
(OpenBLAS): loops compiled by numba were slower for those shapes. With few (a step of one or a few envs) numpy's
per-call overhead dominates, and `novelty_step` runs the tracker's whole step in one call: the references' forward
passes with the same `_tanh`, the distances, the running sums. The timings:
benchmarks/results/throughput/design_measurements.md.

The tanh is `npsco.forward.tanh`'s rational function (its docstring says how it was fitted), compiled here with
fastmath: multiply-adds fused, so within 1 ulp of it, not its bits.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from npsco.forward import TANH_CLAMP as _CLAMP
from npsco.forward import TANH_ONE as _ONE
from npsco.forward import TANH_P, TANH_Q

_P0, _P1, _P2, _P3, _P4, _P5, _P6 = TANH_P
_Q0, _Q1, _Q2, _Q3 = TANH_Q
_U = 1.0 / (_CLAMP * _CLAMP)

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


@_jit
def novelty_step(
    obs: np.ndarray,
    action: np.ndarray,
    std: np.ndarray,
    norm: np.ndarray,
    bounds: np.ndarray,
    weights: tuple[np.ndarray, ...],
    rows: np.ndarray,
    relu: bool,
    squash: bool,
    discount: float,
    sums: np.ndarray,
    counts: np.ndarray,
    d: np.ndarray,
    u: np.ndarray,
) -> None:
    """One `NoveltyTracker.update` for M references of one architecture at N states, in one call (`_CompiledStep`).

    Read, float32 unless said: obs (N, D) the raw observations and action (N, A) the new policy's actions; std (A,)
    its std for the wasserstein2 metric, empty for the deterministic one; norm (M, 3, D) each reference's observation
    mean, scale 1 / sqrt(var + eps) and clip; bounds (M, 3, A) its action low, high and std; weights: per layer the
    references' [W | b], (M, out, in + 1) where `rows[layer]`, else transposed, (M, in + 1, out); relu (else tanh)
    hidden layers, squash (a tanh output). Updated: sums (M, N) and counts (N,), float64, the running sums, first
    scaled by `discount`. Written: d (N, M) the per-state distances and u (N,) float64 the running novelty.

    The operations of `_Group.mean_actions_t`'s exact path (normalise and clip; the layers; `_tanh` for the hidden
    layers, as `tanh_rows`; squash; clip to the bounds) and of `ReferenceSet._distances`, each value stored in float32
    as there, except that each layer sums in its own order (BLAS has its own), the output's squash uses `_tanh` (numpy's
    tanh there: 1 ulp apart) and the distance sums in float64. NaN propagates as with numpy's ufuncs."""
    n_env, dim = obs.shape
    n_ref, n_act, last = norm.shape[0], bounds.shape[2], len(weights) - 1
    if norm.shape[2] != dim or action.shape != (n_env, n_act) or (std.size != 0 and std.size != n_act):
        raise ValueError("novelty_step: the observations' or the actions' size is not the references'")
    if sums.shape != (n_ref, n_env) or counts.shape != (n_env,) or d.shape != (n_env, n_ref) or u.shape != (n_env,):
        raise ValueError("novelty_step: the running sums are not (references, envs)")
    width = dim
    for w in weights:
        width = max(width, w.shape[1], w.shape[2])
    x, y = np.empty((n_env, width), np.float32), np.empty((n_env, width), np.float32)
    if discount != 1.0:  # weights g^(t - t'): the past fades before this step is added with weight 1
        sums *= discount
        counts *= discount
    for m in range(n_ref):
        mean, scale, clip = norm[m, 0], norm[m, 1], norm[m, 2]
        for n in range(n_env):  # normalise and clip the observations
            xn, on = x[n], obs[n]
            for k in range(dim):
                v = (on[k] - mean[k]) * scale[k]
                xn[k] = -clip[k] if v < -clip[k] else (clip[k] if v > clip[k] else v)
        for layer, w in enumerate(weights):  # (1-D views in the inner loops: LLVM vectorises those)
            by_rows = rows[layer]
            out, inp = (w.shape[1], w.shape[2] - 1) if by_rows else (w.shape[2], w.shape[1] - 1)
            for n in range(n_env):
                xn, yn = x[n], y[n]
                if by_rows:  # w (M, out, in + 1): one dot product per output
                    for o in range(out):
                        wo = w[m, o]
                        acc = wo[inp]
                        for i in range(inp):
                            acc += wo[i] * xn[i]
                        yn[o] = acc
                else:  # w (M, in + 1, out): each input's column added to all the outputs
                    yn[:out] = w[m, inp]
                    for i in range(inp):
                        xi, wi = xn[i], w[m, i]
                        for o in range(out):
                            yn[o] += wi[o] * xi
                if layer < last and relu:
                    for o in range(out):
                        yn[o] = np.float32(0.0) if yn[o] < 0 else yn[o]
                elif layer < last:
                    for o in range(out):
                        yn[o] = np.float32(_tanh(np.float64(yn[o])))
            x, y = y, x
        low, high, ref_std = bounds[m, 0], bounds[m, 1], bounds[m, 2]
        for n in range(n_env):
            sq = 0.0
            for a in range(n_act):
                mu = x[n, a]
                if squash:  # low + (tanh(mu) + 1) / 2 (high - low), in float32 and in `squash`'s order
                    mu = (np.float32(_tanh(np.float64(mu))) + np.float32(1.0)) * np.float32(0.5)
                    mu = mu * (high[a] - low[a]) + low[a]
                mu = low[a] if mu < low[a] else (high[a] if mu > high[a] else mu)
                diff = np.float64(mu) - np.float64(action[n, a])
                sq += diff * diff
            for a in range(std.size):
                diff = np.float64(ref_std[a]) - np.float64(std[a])
                sq += diff * diff
            dist = np.float32(math.sqrt(sq))
            d[n, m] = dist
            sums[m, n] += dist
    for n in range(n_env):
        counts[n] += 1.0
        best = sums[0, n]  # min_j (sum_j / count) = (min_j sum_j) / count, as the numpy path; NaN wins, as np.minimum
        for m in range(1, n_ref):
            v = sums[m, n]
            if v < best or v != v:
                best = v
        u[n] = best / counts[n]
